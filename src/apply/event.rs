//! The executor's typed events: what a renderer may show about a run. They never carry secrets
//! (join tokens stay inside the step that uses them). `-json` writes each as one `EventLine`
//! (schema/events.schema.json, versioned by `EVENTS_FORMAT_VERSION`). The executor sends them
//! to an `EventSink`; `ui` holds the renderers.

use crate::hostid::HostId;
use crate::plan::Plan;
use serde::{Serialize, Serializer};
use std::time::Duration;

/// Version of the `-json` event lines; bumped when a field is removed or changes meaning (new
/// fields and new event types do not bump it: readers ignore what they do not know).
pub const EVENTS_FORMAT_VERSION: u32 = 1;

/// A step as renderers show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct StepInfo {
    /// Index in `Plan::steps`.
    pub id: usize,
    pub host: HostId,
    /// The host's name as the plan shows it (node name, else its address).
    pub name: String,
    /// Machine-readable kind, e.g. `join_controller`.
    pub kind: String,
    /// Short technical label, e.g. `join_controller via 10.0.0.2`.
    pub label: String,
    /// What the step does, for people, e.g. `Joining the cluster as controller (token from c2)`.
    pub description: String,
    /// Past tense for the finish line, e.g. `Joined` (human output only).
    #[serde(skip)]
    pub done: String,
    /// Gerund for the still-running line, e.g. `joining` (human output only).
    #[serde(skip)]
    pub still: String,
}

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApplyOutcome {
    Complete,
    /// A step failed; nothing new was started after it.
    Failed,
    /// A safety precondition did not hold against the live cluster (exit 3).
    Refused,
    /// First Ctrl-C: running steps finished, nothing new started.
    Cancelled,
    /// Second Ctrl-C: running steps were abandoned.
    Aborted,
}

/// Host changes of the plan, by kind (the "Apply complete: …" line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ChangeCounts {
    pub added: usize,
    pub replaced: usize,
    pub changed: usize,
    pub removed: usize,
    pub adopted: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ApplySummary {
    pub outcome: ApplyOutcome,
    pub changes: ChangeCounts,
    pub succeeded: Vec<StepInfo>,
    /// Failed steps with their error.
    pub failed: Vec<(StepInfo, String)>,
    /// Skipped steps with the reason.
    pub skipped: Vec<(StepInfo, String)>,
    /// What went wrong in a step without failing it (a `k0s reset` whose clean-up had errors).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<(StepInfo, String)>,
    /// Why the run stopped early (refusal reason, cancellation), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Seconds.
    #[serde(serialize_with = "secs")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ApplyEvent {
    /// The plan about to be applied (before any confirmation), as `plan -json` prints it.
    Planned {
        plan: Box<Plan>,
    },
    /// The run begins.
    Begin {
        cluster: String,
        total_steps: usize,
        parallelism: usize,
    },
    StepStarted {
        step: StepInfo,
    },
    /// Something worth telling while a step runs (waiting, a warning that does not fail it).
    StepProgress {
        step: StepInfo,
        message: String,
    },
    /// The step is still running (every `ExecOptions::still_running_every`, 10 s by default).
    StepStillRunning {
        step: StepInfo,
        /// Seconds.
        #[serde(serialize_with = "secs")]
        #[schemars(with = "f64")]
        elapsed: Duration,
    },
    StepFinished {
        step: StepInfo,
        /// Seconds.
        #[serde(serialize_with = "secs")]
        #[schemars(with = "f64")]
        elapsed: Duration,
    },
    StepFailed {
        step: StepInfo,
        error: String,
        /// Seconds.
        #[serde(serialize_with = "secs")]
        #[schemars(with = "f64")]
        elapsed: Duration,
    },
    /// Not run: a predecessor failed or was skipped, or the run stopped first.
    StepSkipped {
        step: StepInfo,
        reason: String,
    },
    /// The state was written (atomically) to disk.
    Checkpoint {
        /// e.g. `intent for step 3`, `after step 3`.
        reason: String,
        /// Open intents after this write.
        intents: usize,
    },
    Summary {
        summary: ApplySummary,
    },
}

/// One line of `apply -json`: the event with the format version on every line, so a reader can
/// check any line it sees (schema/events.schema.json).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct EventLine<'a> {
    /// `EVENTS_FORMAT_VERSION`.
    pub format_version: u32,
    #[serde(flatten)]
    pub event: &'a ApplyEvent,
}

impl<'a> EventLine<'a> {
    pub fn new(event: &'a ApplyEvent) -> Self {
        EventLine {
            format_version: EVENTS_FORMAT_VERSION,
            event,
        }
    }
}

/// schema/events.schema.json: the JSON Schema of one `apply -json` line.
pub fn events_json_schema() -> String {
    let schema = schemars::schema_for!(EventLine<'static>);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_millis() as f64) / 1000.0)
}

/// `850ms`, `4.2s`, `2m03s`: short and stable for step lines.
pub fn format_elapsed(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{}s", ms / 1000, (ms % 1000) / 100)
    } else {
        let s = ms / 1000;
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

impl ChangeCounts {
    /// `1 added, 1 replaced, 0 changed, 1 removed` (+ `, N adopted` when any).
    pub fn sentence(&self) -> String {
        let mut s = format!(
            "{} added, {} replaced, {} changed, {} removed",
            self.added, self.replaced, self.changed, self.removed
        );
        if self.adopted > 0 {
            s.push_str(&format!(", {} adopted", self.adopted));
        }
        s
    }
}

/// `10s`, `1m10s`: whole seconds for the still-running line, as Terraform shows them.
pub fn format_whole_secs(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_secs_formats() {
        assert_eq!(format_whole_secs(Duration::from_millis(10_400)), "10s");
        assert_eq!(format_whole_secs(Duration::from_secs(70)), "1m10s");
    }

    #[test]
    fn elapsed_formats() {
        assert_eq!(format_elapsed(Duration::from_millis(850)), "850ms");
        assert_eq!(format_elapsed(Duration::from_millis(4_250)), "4.2s");
        assert_eq!(format_elapsed(Duration::from_secs(123)), "2m03s");
    }

    #[test]
    fn counts_sentence() {
        let c = ChangeCounts {
            added: 1,
            replaced: 1,
            changed: 0,
            removed: 1,
            adopted: 0,
        };
        assert_eq!(c.sentence(), "1 added, 1 replaced, 0 changed, 1 removed");
        let c = ChangeCounts { adopted: 3, ..c };
        assert_eq!(
            c.sentence(),
            "1 added, 1 replaced, 0 changed, 1 removed, 3 adopted"
        );
    }
}
