//! Human progress in Terraform's rhythm: `c1: Joining the cluster as controller (token from
//! c2)...`, `c1: Still joining... [10s elapsed]`, `c1: Joined after 2.9s`, then a summary; an
//! indicatif progress bar on stderr only when stderr is a terminal. Hosts go by their names.

use super::{
    ApplyEvent, ApplyOutcome, ApplySummary, EventSink, StepInfo, format_elapsed, format_whole_secs,
};
use crate::escape::escape;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Write;

pub struct HumanSink<W: Write + Send> {
    out: W,
    color: bool,
    /// Live bar (stderr, TTY only); lines are printed "under" it via `suspend`.
    bar: Option<ProgressBar>,
    want_bar: bool,
}

use super::ansi::{BOLD, DIM, GREEN, RED, RESET, YELLOW};

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

    /// Names, descriptions, progress messages and errors carry text from hosts: escaped here,
    /// before colour codes are added.
    fn step_prefix(step: &StepInfo) -> String {
        format!("{}: {}", escape(&step.name), escape(&step.description))
    }

    fn summary_lines(&self, s: &ApplySummary) -> Vec<String> {
        let mut lines = vec![String::new()];
        let counts = format!(
            "{} succeeded, {} failed, {} skipped",
            s.succeeded.len(),
            s.failed.len(),
            s.skipped.len()
        );
        let warnings = s.warnings.iter().map(|(st, w)| {
            format!(
                "  {} {}: {}",
                self.paint(YELLOW, "warning"),
                Self::step_prefix(st),
                escape(w)
            )
        });
        match s.outcome {
            ApplyOutcome::Complete => {
                let text = format!("Apply complete: {}.", s.changes.sentence());
                lines.push(format!(
                    "{} {} step{} in {}.",
                    self.paint(&format!("{BOLD}{GREEN}"), &text),
                    s.succeeded.len(),
                    if s.succeeded.len() == 1 { "" } else { "s" },
                    format_elapsed(s.elapsed)
                ));
                lines.extend(warnings);
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
            lines.push(format!("  reason: {}", escape(reason)));
        }
        lines.extend(warnings);
        for st in &s.succeeded {
            lines.push(format!(
                "  {} {}",
                self.paint(GREEN, "succeeded"),
                Self::step_prefix(st)
            ));
        }
        for (st, err) in &s.failed {
            lines.push(format!(
                "  {}    {}: {}",
                self.paint(RED, "failed"),
                Self::step_prefix(st),
                escape(err)
            ));
        }
        for (st, why) in &s.skipped {
            lines.push(format!(
                "  {}   {} ({})",
                self.paint(YELLOW, "skipped"),
                Self::step_prefix(st),
                escape(why)
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
            // The plan text was printed before the confirmation; the JSON stream carries it.
            ApplyEvent::Planned { .. } => {}
            ApplyEvent::StepStarted { step } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(Self::step_prefix(step));
                }
                self.line(format!("{}...", Self::step_prefix(step)));
            }
            ApplyEvent::StepProgress { step, message } => {
                let text = format!(
                    "{}: {}",
                    escape(&step.name),
                    self.paint(DIM, &escape(message))
                );
                self.line(text);
            }
            ApplyEvent::StepStillRunning { step, elapsed } => {
                let text = format!(
                    "{}: Still {}... [{} elapsed]",
                    escape(&step.name),
                    step.still,
                    format_whole_secs(*elapsed)
                );
                self.line(text);
            }
            ApplyEvent::StepFinished { step, elapsed } => {
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
                let done = self.paint(GREEN, &step.done);
                let text = format!(
                    "{}: {done} after {}",
                    escape(&step.name),
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
                    "{}: {failed} after {}: {}",
                    Self::step_prefix(step),
                    format_elapsed(*elapsed),
                    escape(error)
                );
                self.line(text);
            }
            ApplyEvent::StepSkipped { step, reason } => {
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
                let skipped = self.paint(YELLOW, "skipped");
                let text = format!(
                    "{}: {skipped} ({})",
                    Self::step_prefix(step),
                    escape(reason)
                );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostid::HostId;
    use crate::ui::{ApplyOutcome, ChangeCounts, JsonSink};
    use std::time::Duration;

    fn info(id: usize, addr: &str, name: &str, words: (&str, &str, &str)) -> StepInfo {
        StepInfo {
            id,
            host: HostId::new(addr, 22),
            name: name.to_string(),
            kind: "kind".to_string(),
            label: "label".to_string(),
            description: words.0.to_string(),
            done: words.1.to_string(),
            still: words.2.to_string(),
        }
    }

    fn events(outcome: ApplyOutcome) -> Vec<ApplyEvent> {
        let join = info(
            1,
            "10.0.0.3",
            "c3",
            (
                "Joining the cluster as controller (token from c1)",
                "Joined",
                "joining",
            ),
        );
        let rec = info(
            2,
            "10.0.0.3",
            "c3",
            ("Recording the host in the state", "Recorded", "recording"),
        );
        let rm = info(
            0,
            "10.0.0.1",
            "c1",
            (
                "Removing etcd member 8e9e05c52164694d (https://10.0.0.1:2380) via c2",
                "Removed",
                "removing",
            ),
        );
        let mut ev = vec![
            ApplyEvent::Begin {
                cluster: "prod".into(),
                total_steps: 3,
                parallelism: 10,
            },
            ApplyEvent::StepStarted { step: rm.clone() },
            ApplyEvent::Checkpoint {
                reason: "intent for step 0".into(),
                intents: 1,
            },
            ApplyEvent::StepFinished {
                step: rm.clone(),
                elapsed: Duration::from_millis(1500),
            },
            ApplyEvent::StepStarted { step: join.clone() },
            ApplyEvent::StepProgress {
                step: join.clone(),
                message: "waiting for the new etcd member".into(),
            },
            ApplyEvent::StepStillRunning {
                step: join.clone(),
                elapsed: Duration::from_secs(10),
            },
            ApplyEvent::StepStillRunning {
                step: join.clone(),
                elapsed: Duration::from_secs(70),
            },
        ];
        let mut summary = ApplySummary {
            outcome,
            changes: ChangeCounts {
                added: 0,
                replaced: 1,
                changed: 0,
                removed: 0,
                adopted: 0,
            },
            succeeded: vec![rm, join.clone()],
            failed: vec![],
            skipped: vec![],
            warnings: vec![],
            reason: None,
            elapsed: Duration::from_secs(75),
        };
        if outcome == ApplyOutcome::Complete {
            ev.push(ApplyEvent::StepFinished {
                step: join,
                elapsed: Duration::from_secs(72),
            });
            ev.push(ApplyEvent::StepStarted { step: rec.clone() });
            ev.push(ApplyEvent::StepFinished {
                step: rec.clone(),
                elapsed: Duration::from_millis(300),
            });
            summary.succeeded.push(rec);
        } else {
            ev.push(ApplyEvent::StepFailed {
                step: join.clone(),
                error: "10.0.0.3: k0s install failed: Error: boom".into(),
                elapsed: Duration::from_secs(3),
            });
            ev.push(ApplyEvent::StepSkipped {
                step: rec.clone(),
                reason: "joining the cluster as controller (token from c1) on c3 failed".into(),
            });
            summary.succeeded.pop();
            summary
                .failed
                .push((join, "10.0.0.3: k0s install failed: Error: boom".into()));
            summary.skipped.push((
                rec,
                "joining the cluster as controller (token from c1) on c3 failed".into(),
            ));
        }
        ev.push(ApplyEvent::Summary { summary });
        ev
    }

    fn render(evs: &[ApplyEvent], color: bool) -> String {
        let mut sink = HumanSink::new(Vec::new(), color, false);
        for e in evs {
            sink.event(e);
        }
        String::from_utf8(sink.into_inner()).unwrap()
    }

    #[test]
    fn complete_run_lines() {
        let out = render(&events(ApplyOutcome::Complete), false);
        assert_eq!(
            out,
            "\
c1: Removing etcd member 8e9e05c52164694d (https://10.0.0.1:2380) via c2...
c1: Removed after 1.5s
c3: Joining the cluster as controller (token from c1)...
c3: waiting for the new etcd member
c3: Still joining... [10s elapsed]
c3: Still joining... [1m10s elapsed]
c3: Joined after 1m12s
c3: Recording the host in the state...
c3: Recorded after 300ms

Apply complete: 0 added, 1 replaced, 0 changed, 0 removed. 3 steps in 1m15s.
"
        );
    }

    #[test]
    fn warnings_follow_a_complete_run() {
        let mut evs = events(ApplyOutcome::Complete);
        let Some(ApplyEvent::Summary { summary }) = evs.last_mut() else {
            panic!("no summary");
        };
        let step = summary.succeeded[0].clone();
        summary.warnings.push((
            step,
            "10.0.0.1: k0s reset left something behind (Error: errors occurred during clean-up: x)"
                .into(),
        ));
        let out = render(&evs, false);
        let tail: Vec<&str> = out.lines().rev().take(2).collect();
        assert_eq!(
            tail,
            [
                "  warning c1: Removing etcd member 8e9e05c52164694d (https://10.0.0.1:2380) via c2: 10.0.0.1: k0s reset left something behind (Error: errors occurred during clean-up: x)",
                "Apply complete: 0 added, 1 replaced, 0 changed, 0 removed. 3 steps in 1m15s.",
            ]
        );
    }

    #[test]
    fn failed_run_lists_every_step() {
        let out = render(&events(ApplyOutcome::Failed), false);
        let tail: Vec<&str> = out.lines().skip(6).collect();
        assert_eq!(
            tail,
            vec![
                "c3: Joining the cluster as controller (token from c1): FAILED after 3.0s: 10.0.0.3: k0s install failed: Error: boom",
                "c3: Recording the host in the state: skipped (joining the cluster as controller (token from c1) on c3 failed)",
                "",
                "Apply failed: 1 succeeded, 1 failed, 1 skipped.",
                "  succeeded c1: Removing etcd member 8e9e05c52164694d (https://10.0.0.1:2380) via c2",
                "  failed    c3: Joining the cluster as controller (token from c1): 10.0.0.3: k0s install failed: Error: boom",
                "  skipped   c3: Recording the host in the state (joining the cluster as controller (token from c1) on c3 failed)",
            ]
        );
    }

    #[test]
    fn colour_only_when_asked() {
        let plain = render(&events(ApplyOutcome::Failed), false);
        assert!(!plain.contains('\x1b'));
        let coloured = render(&events(ApplyOutcome::Failed), true);
        assert!(coloured.contains("\x1b[31mFAILED\x1b[0m"));
    }

    #[test]
    fn host_text_cannot_drive_the_terminal() {
        // A hostile host names itself and fails with escape sequences that would erase the line
        // and move the cursor up over earlier output.
        let mut step = info(
            1,
            "10.0.0.3",
            "c3\x1b[1A\x1b[2K",
            ("Joining", "Joined", "joining"),
        );
        step.description = "Joining\r\x1b]0;owned\x07".into();
        let evs = vec![
            ApplyEvent::StepStarted { step: step.clone() },
            ApplyEvent::StepProgress {
                step: step.clone(),
                message: "hook: echo \u{9b}2J".into(),
            },
            ApplyEvent::StepFailed {
                step: step.clone(),
                error: "Error: boom\n\x1b[32mApply complete!".into(),
                elapsed: Duration::from_secs(1),
            },
        ];
        for color in [false, true] {
            let out = render(&evs, color);
            let stripped = out
                .replace("\x1b[31m", "")
                .replace("\x1b[2m", "")
                .replace("\x1b[0m", "");
            assert!(
                !stripped.chars().any(|c| c.is_control() && c != '\n'),
                "{out:?}"
            );
            assert_eq!(out.lines().count(), 3, "{out:?}");
        }
        let plain = render(&evs, false);
        assert!(
            plain.starts_with("c3\\x1b[1A\\x1b[2K: Joining\\r\\x1b]0;owned\\x07..."),
            "{plain}"
        );
        assert!(
            plain.contains("Error: boom\\n\\x1b[32mApply complete!"),
            "{plain}"
        );
    }

    #[test]
    fn json_lines_one_object_per_event() {
        let evs = events(ApplyOutcome::Complete);
        let mut sink = JsonSink::new(Vec::new());
        for e in &evs {
            sink.event(e);
        }
        let out = String::from_utf8(sink.into_inner()).unwrap();
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), evs.len());
        assert!(
            lines
                .iter()
                .all(|l| l["format_version"] == crate::ui::EVENTS_FORMAT_VERSION)
        );
        assert_eq!(lines[0]["type"], "begin");
        assert_eq!(lines[3]["type"], "step_finished");
        assert_eq!(lines[3]["elapsed"], 1.5);
        assert_eq!(lines[3]["step"]["host"]["address"], "10.0.0.1");
        assert_eq!(lines[3]["step"]["name"], "c1");
        assert!(lines[3]["step"].get("done").is_none());
        assert_eq!(lines[7]["type"], "step_still_running");
        assert_eq!(lines[7]["elapsed"], 70.0);
        let last = lines.last().unwrap();
        assert_eq!(last["type"], "summary");
        assert_eq!(last["summary"]["outcome"], "complete");
        assert_eq!(last["summary"]["changes"]["replaced"], 1);
    }
}
