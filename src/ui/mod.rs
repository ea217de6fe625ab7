//! What people and programs see: the renderers of the executor's events (`apply::event`: the
//! executor never prints, it reports typed `ApplyEvent`s to an `EventSink`, ripgrep's Sink
//! model), human lines (+ a progress bar on a TTY) and JSON lines (`-json`), and of plans
//! (`render`). Colour only on a TTY, never when `NO_COLOR` is set.

mod human;
mod json;
pub mod render;
pub mod state;

// The events and sinks are the executor's; named here too, where their renderers are.
pub use crate::apply::event::{
    ApplyEvent, ApplyOutcome, ApplySummary, ChangeCounts, EVENTS_FORMAT_VERSION, EventLine,
    EventSink, StepInfo, Tee, VecSink, events_json_schema, format_elapsed, format_whole_secs,
};
pub use human::HumanSink;
pub use json::JsonSink;

use std::io::IsTerminal;

/// Colour decision for a stream: only on a terminal, and never when `NO_COLOR` is set to a
/// non-empty value (https://no-color.org).
pub fn use_color(is_tty: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_tty && no_color.is_none_or(|v| v.is_empty())
}

/// `use_color` for stderr in this process (log lines).
pub fn stderr_color() -> bool {
    use_color(stderr_is_tty(), std::env::var_os("NO_COLOR").as_deref())
}

/// The ANSI codes of every coloured output (plan text, progress), in one place.
pub mod ansi {
    pub const GREEN: &str = "\x1b[32m";
    pub const RED: &str = "\x1b[31m";
    pub const YELLOW: &str = "\x1b[33m";
    pub const DIM: &str = "\x1b[2m";
    pub const BOLD: &str = "\x1b[1m";
    pub const RESET: &str = "\x1b[0m";
}

/// `use_color` for stdout in this process.
pub fn stdout_color() -> bool {
    use_color(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// Where `apply`'s events go: JSON lines with `-json`, else human lines on stdout (with a
/// progress bar when stderr is a terminal).
pub fn apply_sink(json: bool, color: bool) -> Box<dyn EventSink> {
    if json {
        Box::new(JsonSink::new(std::io::stdout()))
    } else {
        Box::new(HumanSink::new(std::io::stdout(), color, stderr_is_tty()))
    }
}

/// A live progress bar is drawn only when stderr is a terminal.
pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn color_only_on_tty_without_no_color() {
        assert!(use_color(true, None));
        assert!(!use_color(false, None));
        assert!(!use_color(true, Some(OsStr::new("1"))));
        // An empty NO_COLOR does not disable colour (no-color.org).
        assert!(use_color(true, Some(OsStr::new(""))));
    }
}
