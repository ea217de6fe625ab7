//! The DAG executor: runs a plan's steps in topological order, records intents, checkpoints the
//! state. One coordinator (`coordinator.rs`) owns all scheduling state; step tasks (`steps/`,
//! the only code here that touches hosts, through `k0s` commands and `Transport`) report back.

mod cancel;
mod changes;
mod coordinator;
mod steps;
mod summary;

pub use cancel::{Cancel, CancelLevel};
pub use changes::{StateChange, intent_for, needs_intent};
pub use coordinator::run_plan;
pub use steps::{HostProber, K0sRunner, Remote};
pub use summary::{HostNames, change_counts, step_info, step_label, step_words};

use crate::binaries::LocalK0s;
use crate::exit::Exit;
use crate::hostid::HostId;
use crate::plan::Plan;
use crate::plan::Step;
use crate::spec::Spec;
use crate::state::{Intent, State};
use crate::transport::Transport;
use crate::ui::EventSink;
use crate::ui::{ApplyEvent, ApplySummary, StepInfo};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Knobs of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOptions {
    /// Steps running at once (`-parallelism`).
    pub parallelism: usize,
    /// Remote commands running at once on one host.
    pub per_host_limit: usize,
    /// Pause between two polls of a readiness/health condition.
    pub poll_interval: Duration,
    /// Deadline for a step waiting for k0s to become ready, a member to appear, a Node to be Ready.
    pub wait_timeout: Duration,
    /// How long a membership step's health precondition may wait for the cluster to settle
    /// (e.g. a learner being promoted) before the step is refused as unsafe.
    pub health_grace: Duration,
    /// Local k0s binaries steps may upload, found by sha256 (UploadBinary) or version (Upgrade);
    /// a host's `k0sBinaryPath` is used otherwise.
    pub binaries: Vec<LocalK0s>,
    /// Hostnames the plan's probe saw, by host: a host's Node name when the spec sets none, so
    /// a join need not probe the host again to learn it.
    pub hostnames: HashMap<HostId, String>,
    /// Names to show for hosts the plan does not change (e.g. the controller a join goes
    /// through); the plan's own names win (`HostNames`).
    pub names: HashMap<HostId, String>,
    /// How often a long step gets a "Still …" line.
    pub still_running_every: Duration,
    /// Limit for a host's k0s download (`DownloadBinary`).
    pub download_timeout: Duration,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            parallelism: 10,
            per_host_limit: 10,
            poll_interval: Duration::from_secs(1),
            wait_timeout: Duration::from_secs(600),
            health_grace: Duration::from_secs(60),
            binaries: Vec::new(),
            hostnames: HashMap::new(),
            names: HashMap::new(),
            still_running_every: Duration::from_secs(10),
            download_timeout: Duration::from_secs(600),
        }
    }
}

/// Persists the state after every change (the state engineer's atomic store). Any
/// `FnMut(&State) -> Result<(), E>` is a `Checkpoint`.
pub trait Checkpoint {
    fn save(&mut self, state: &State) -> Result<(), String>;
}

impl<F, E> Checkpoint for F
where
    F: FnMut(&State) -> Result<(), E>,
    E: std::fmt::Display,
{
    fn save(&mut self, state: &State) -> Result<(), String> {
        self(state).map_err(|e| e.to_string())
    }
}

/// Why a step did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// A safety precondition does not hold against the live cluster; the step changed nothing.
    #[error("{0}")]
    Unsafe(String),
    #[error("{0}")]
    Failed(String),
    /// The run stopped (failure elsewhere, interrupt) before this step changed anything.
    #[error("{0}")]
    NotStarted(String),
}

/// What the run did, step by step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyReport {
    pub summary: ApplySummary,
}

impl ApplyReport {
    pub fn succeeded(&self) -> Vec<usize> {
        self.summary.succeeded.iter().map(|s| s.id).collect()
    }
    pub fn failed(&self) -> Vec<usize> {
        self.summary.failed.iter().map(|(s, _)| s.id).collect()
    }
    pub fn skipped(&self) -> Vec<usize> {
        self.summary.skipped.iter().map(|(s, _)| s.id).collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the plan cannot be executed: {0}")]
    InvalidPlan(String),
    #[error("refused as unsafe: {}: {}: {reason}", step.name, step.description)]
    Unsafe {
        step: Box<StepInfo>,
        reason: String,
        report: Box<ApplyReport>,
    },
    #[error("{} step(s) failed", report.summary.failed.len())]
    Failed { report: Box<ApplyReport> },
    #[error("cannot save the state: {message}")]
    Checkpoint {
        message: String,
        report: Box<ApplyReport>,
    },
    #[error("interrupted: running steps finished, nothing new was started")]
    Cancelled { report: Box<ApplyReport> },
    #[error("aborted by a second interrupt: running steps were abandoned")]
    Aborted { report: Box<ApplyReport> },
}

impl ApplyError {
    pub fn exit(&self) -> Exit {
        match self {
            ApplyError::Unsafe { .. } => Exit::Refused,
            _ => Exit::Error,
        }
    }
    pub fn report(&self) -> Option<&ApplyReport> {
        match self {
            ApplyError::InvalidPlan(_) => None,
            ApplyError::Unsafe { report, .. }
            | ApplyError::Failed { report }
            | ApplyError::Checkpoint { report, .. }
            | ApplyError::Cancelled { report }
            | ApplyError::Aborted { report } => Some(report),
        }
    }
}

/// Runs one step. The real implementation (`K0sRunner`) talks to hosts; tests substitute their own
/// to exercise scheduling alone. The future must not borrow: it is spawned.
pub trait StepRunner: Send + Sync + 'static {
    fn run(
        self: Arc<Self>,
        step: Step,
        ctx: StepContext,
    ) -> impl Future<Output = Result<Vec<StateChange>, StepError>> + Send + 'static;
}

pub(crate) enum WorkerMsg {
    /// Record this intent in the state (checkpointed) before the step changes anything.
    Intent {
        id: usize,
        intent: Intent,
        ack: oneshot::Sender<Result<(), String>>,
    },
    Progress {
        id: usize,
        message: String,
    },
    /// Something that went wrong without failing the step: shown now and in the summary.
    Warning {
        id: usize,
        message: String,
    },
}

/// A running step's line back to the coordinator.
pub struct StepContext {
    id: usize,
    tx: mpsc::UnboundedSender<WorkerMsg>,
}

impl StepContext {
    /// Ask the coordinator to record `intent` and checkpoint the state; returns once it is on disk.
    /// Fails when the run is stopping (the step must then change nothing) or the write failed.
    pub async fn record_intent(&self, intent: Intent) -> Result<(), StepError> {
        let (ack, rx) = oneshot::channel();
        self.tx
            .send(WorkerMsg::Intent {
                id: self.id,
                intent,
                ack,
            })
            .map_err(|_| StepError::NotStarted("the apply is shutting down".into()))?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(StepError::NotStarted(why)),
            Err(_) => Err(StepError::NotStarted("the apply is shutting down".into())),
        }
    }

    /// Report what went wrong without failing the step (never pass secrets): shown at once
    /// and again in the run's summary.
    pub fn warn(&self, message: impl Into<String>) {
        let _ = self.tx.send(WorkerMsg::Warning {
            id: self.id,
            message: message.into(),
        });
    }

    /// Tell the user what the step is waiting for (never pass secrets).
    pub fn progress(&self, message: impl Into<String>) {
        let _ = self.tx.send(WorkerMsg::Progress {
            id: self.id,
            message: message.into(),
        });
    }
}

pub(crate) fn emit(sink: &mut dyn crate::ui::EventSink, ev: ApplyEvent) {
    sink.event(&ev);
}

/// Apply `plan` to the hosts: the k0s step runner under the coordinator. `state` is the loaded
/// state (updated in place); `checkpoint` writes it atomically after every step and before every
/// non-idempotent one. Exit status: `ApplyError::exit`.
#[allow(clippy::too_many_arguments)] // the run's inputs are independent; a bundle would only rename them
pub async fn execute<T: Transport + 'static>(
    plan: &Plan,
    spec: &Spec,
    state: &mut State,
    remote: Remote<T>,
    opts: &ExecOptions,
    sink: &mut dyn EventSink,
    checkpoint: &mut dyn Checkpoint,
    cancel: &Cancel,
) -> Result<ApplyReport, ApplyError> {
    let runner = Arc::new(K0sRunner::new(remote, spec, state, opts));
    run_plan(plan, state, runner, opts, sink, checkpoint, cancel).await
}
