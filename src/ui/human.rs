//! Human progress: one line per step start and finish (host, step, elapsed time), a final
//! summary, and an indicatif progress bar on stderr only when stderr is a terminal.

use super::{ApplyEvent, ApplyOutcome, ApplySummary, EventSink, StepInfo, format_elapsed};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Write;

pub struct HumanSink<W: Write + Send> {
    out: W,
    color: bool,
    /// Live bar (stderr, TTY only); lines are printed "under" it via `suspend`.
    bar: Option<ProgressBar>,
    want_bar: bool,
}

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

impl<W: Write + Send> HumanSink<W> {
    /// `color`: see `ui::use_color`; `progress_bar`: see `ui::stderr_is_tty`.
    pub fn new(out: W, color: bool, progress_bar: bool) -> Self {
        HumanSink {
            out,
            color,
            bar: None,
            want_bar: progress_bar,
        }
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("{code}{text}{RESET}")
        } else {
            text.to_string()
        }
    }

    fn line(&mut self, text: String) {
        let out = &mut self.out;
        match &self.bar {
            Some(bar) => bar.suspend(|| {
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }),
            None => {
                let _ = writeln!(out, "{text}");
            }
        }
    }

    fn step_prefix(step: &StepInfo) -> String {
        format!("{}: {}", step.host, step.label)
    }

    fn summary_lines(&self, s: &ApplySummary) -> Vec<String> {
        let mut lines = vec![String::new()];
        let counts = format!(
            "{} succeeded, {} failed, {} skipped",
            s.succeeded.len(),
            s.failed.len(),
            s.skipped.len()
        );
        match s.outcome {
            ApplyOutcome::Complete => {
                let text = format!("Apply complete: {}.", s.changes.sentence());
                lines.push(self.paint(&format!("{BOLD}{GREEN}"), &text));
                return lines;
            }
            ApplyOutcome::Failed => {
                lines.push(self.paint(&format!("{BOLD}{RED}"), &format!("Apply failed: {counts}.")))
            }
            ApplyOutcome::Refused => lines.push(self.paint(
                &format!("{BOLD}{RED}"),
                &format!("Apply refused as unsafe: {counts}."),
            )),
            ApplyOutcome::Cancelled => lines.push(self.paint(
                &format!("{BOLD}{YELLOW}"),
                &format!("Apply cancelled: {counts}."),
            )),
            ApplyOutcome::Aborted => lines.push(self.paint(
                &format!("{BOLD}{RED}"),
                &format!("Apply aborted: {counts}; running steps were abandoned."),
            )),
        }
        if let Some(reason) = &s.reason {
            lines.push(format!("  reason: {reason}"));
        }
        for st in &s.succeeded {
            lines.push(format!(
                "  {} {}",
                self.paint(GREEN, "succeeded"),
                Self::step_prefix(st)
            ));
        }
        for (st, err) in &s.failed {
            lines.push(format!(
                "  {}    {}: {err}",
                self.paint(RED, "failed"),
                Self::step_prefix(st)
            ));
        }
        for (st, why) in &s.skipped {
            lines.push(format!(
                "  {}   {} ({why})",
                self.paint(YELLOW, "skipped"),
                Self::step_prefix(st)
            ));
        }
        lines
    }
}

impl<W: Write + Send> EventSink for HumanSink<W> {
    fn event(&mut self, event: &ApplyEvent) {
        match event {
            ApplyEvent::Begin { total_steps, .. } => {
                if self.want_bar {
                    let bar = ProgressBar::with_draw_target(
                        Some(*total_steps as u64),
                        ProgressDrawTarget::stderr(),
                    );
                    if let Ok(style) =
                        ProgressStyle::with_template("{bar:30} {pos}/{len} steps {wide_msg}")
                    {
                        bar.set_style(style);
                    }
                    self.bar = Some(bar);
                }
            }
            ApplyEvent::StepStarted { step } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(format!("{}: {}", step.host, step.label));
                }
                let text = format!("{}: {}...", Self::step_prefix(step), "starting");
                self.line(text);
            }
            ApplyEvent::StepProgress { step, message } => {
                let text = format!("{}: {}", Self::step_prefix(step), self.paint(DIM, message));
                self.line(text);
            }
            ApplyEvent::StepFinished { step, elapsed } => {
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
                let done = self.paint(GREEN, "done");
                let text = format!(
                    "{}: {done} after {}",
                    Self::step_prefix(step),
                    format_elapsed(*elapsed)
                );
                self.line(text);
            }
            ApplyEvent::StepFailed {
                step,
                error,
                elapsed,
            } => {
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
                let failed = self.paint(RED, "FAILED");
                let text = format!(
                    "{}: {failed} after {}: {error}",
                    Self::step_prefix(step),
                    format_elapsed(*elapsed)
                );
                self.line(text);
            }
            ApplyEvent::StepSkipped { step, reason } => {
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
                let skipped = self.paint(YELLOW, "skipped");
                let text = format!("{}: {skipped} ({reason})", Self::step_prefix(step));
                self.line(text);
            }
            // State writes are routine; the JSON stream reports them, humans see the summary.
            ApplyEvent::Checkpoint { .. } => {}
            ApplyEvent::Summary { summary } => {
                if let Some(bar) = self.bar.take() {
                    bar.finish_and_clear();
                }
                for l in self.summary_lines(summary) {
                    self.line(l);
                }
            }
        }
    }
}
