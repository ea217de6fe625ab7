//! Event sinks for `apply`: the executor never prints, it reports typed `ApplyEvent`s to an
//! `EventSink` (ripgrep's Sink model). Two renderers: human lines (+ a progress bar on a TTY) and
//! JSON lines (`-json`). Colour only on a TTY, never when `NO_COLOR` is set.

mod event;
mod human;
mod json;
pub mod render;

pub use crate::escape::{escape, escape_lines};
pub use event::{
    ApplyEvent, ApplyOutcome, ApplySummary, ChangeCounts, EVENTS_FORMAT_VERSION, EventLine,
    StepInfo, events_json_schema, format_elapsed, format_whole_secs,
};
pub use human::HumanSink;
pub use json::JsonSink;

use std::io::IsTerminal;

/// Receives the executor's events in the order they happen. Rendering must not fail the apply:
/// a sink that cannot write drops the line (the state file, not the terminal, is the record).
pub trait EventSink: Send {
    fn event(&mut self, event: &ApplyEvent);
}

/// Collects events in memory (tests, and callers that post-process the run).
#[derive(Debug, Default)]
pub struct VecSink {
    pub events: Vec<ApplyEvent>,
}

impl EventSink for VecSink {
    fn event(&mut self, event: &ApplyEvent) {
        self.events.push(event.clone());
    }
}

/// Sends every event to several sinks (e.g. JSON lines to stdout and a log file).
pub struct Tee<'a> {
    sinks: Vec<&'a mut dyn EventSink>,
}

impl<'a> Tee<'a> {
    pub fn new(sinks: Vec<&'a mut dyn EventSink>) -> Self {
        Tee { sinks }
    }
}

impl EventSink for Tee<'_> {
    fn event(&mut self, event: &ApplyEvent) {
        for s in &mut self.sinks {
            s.event(event);
        }
    }
}

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
