//! The coordinator (cargo's DependencyQueue, nextest's dispatcher): the only owner of scheduling
//! state (pending, running, succeeded, failed, skipped) and of the `State`. It starts ready steps
//! within the limits, serializes membership changes even when the plan forgot an edge, records
//! intents on request, applies each finished step's changes and checkpoints after every step.

use super::event::{ApplyEvent, ApplyOutcome, ApplySummary, EventSink, StepInfo};
use super::{
    ApplyError, ApplyReport, Cancel, CancelLevel, Checkpoint, ExecOptions, HostNames, StateChange,
    StepContext, StepError, StepRunner, WorkerMsg, change_counts, emit, step_info,
};
use crate::plan::Plan;
use crate::plan::graph::ReadySet;
use crate::state::{Intent, State};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;
// tokio's clock: still-running notes and elapsed times follow a paused clock in tests.
use tokio::task::JoinSet;
use tokio::time::Instant;

#[derive(Debug, Clone)]
enum Status {
    Pending,
    Running {
        started: Instant,
        /// The intent recorded for this run of the step, cleared when it succeeds.
        intent: Option<Intent>,
    },
    Succeeded,
    Failed(String),
    Skipped(String),
}

/// Why the coordinator stopped starting steps. Higher rank wins: a refusal is reported over a
/// failure, a failure over an interrupt.
#[derive(Debug, Clone)]
enum Stop {
    Cancelled,
    Failed,
    Checkpoint(String),
    Unsafe { step: usize, reason: String },
}

impl Stop {
    fn rank(&self) -> u8 {
        match self {
            Stop::Cancelled => 0,
            Stop::Failed => 1,
            Stop::Checkpoint(_) => 2,
            Stop::Unsafe { .. } => 3,
        }
    }
    fn describe(&self) -> String {
        match self {
            Stop::Cancelled => "the apply was interrupted".into(),
            Stop::Failed => "the apply stopped after a failed step".into(),
            Stop::Checkpoint(e) => format!("the state could not be saved: {e}"),
            Stop::Unsafe { step, .. } => format!("the apply was refused as unsafe at step {step}"),
        }
    }
}

fn set_stop(stop: &mut Option<Stop>, new: Stop) {
    if stop.as_ref().is_none_or(|s| new.rank() > s.rank()) {
        *stop = Some(new);
    }
}

fn save(
    state: &State,
    checkpoint: &mut dyn Checkpoint,
    sink: &mut dyn EventSink,
    reason: String,
) -> Result<(), String> {
    checkpoint.save(state)?;
    emit(
        sink,
        ApplyEvent::Checkpoint {
            reason,
            intents: state.intents.len(),
        },
    );
    Ok(())
}

/// Run `plan` with `runner` doing the steps. `state` is updated in place and checkpointed after
/// every step (and before every non-idempotent one, with its intent).
pub async fn run_plan<R: StepRunner>(
    plan: &Plan,
    state: &mut State,
    runner: Arc<R>,
    opts: &ExecOptions,
    sink: &mut dyn EventSink,
    checkpoint: &mut dyn Checkpoint,
    cancel: &Cancel,
) -> Result<ApplyReport, ApplyError> {
    let (tx, rx) = mpsc::unbounded_channel::<WorkerMsg>();
    let cancel_rx = cancel.subscribe();
    let mut drain = Drain::new(plan, state, runner, opts, sink, checkpoint, tx)?;
    if cancel.level() >= CancelLevel::Graceful {
        set_stop(&mut drain.stop, Stop::Cancelled);
    }
    drain.drive(rx, cancel_rx).await;
    if drain.aborted {
        drain.abandon_running();
    }
    drain.skip_the_rest();
    drain.finish()
}

/// The scheduling state of one run (cargo's `DrainState`): what each step is doing, the tasks
/// running them, why the run stopped starting steps, and what the summary will list.
struct Drain<'a, R: StepRunner> {
    plan: &'a Plan,
    state: &'a mut State,
    runner: Arc<R>,
    sink: &'a mut dyn EventSink,
    checkpoint: &'a mut dyn Checkpoint,
    names: HostNames,
    parallelism: usize,
    begun: Instant,
    status: Vec<Status>,
    /// Pending steps whose dependencies all succeeded (the DAG's ready-set).
    ready: ReadySet,
    /// Staging steps that have not succeeded: while there are any, only staging steps start.
    staging_left: usize,
    tx: mpsc::UnboundedSender<WorkerMsg>,
    set: JoinSet<Result<Vec<StateChange>, StepError>>,
    tasks: HashMap<tokio::task::Id, usize>,
    membership_running: Option<usize>,
    stop: Option<Stop>,
    /// A second interrupt: running steps are abandoned.
    aborted: bool,
    last_progress: HashMap<usize, String>,
    warnings: Vec<(usize, String)>,
    /// Long steps get a "still running" note every `every`: when each running step's next is due.
    every: std::time::Duration,
    next_note: HashMap<usize, (Instant, u32)>,
}

impl<'a, R: StepRunner> Drain<'a, R> {
    fn new(
        plan: &'a Plan,
        state: &'a mut State,
        runner: Arc<R>,
        opts: &ExecOptions,
        sink: &'a mut dyn EventSink,
        checkpoint: &'a mut dyn Checkpoint,
        tx: mpsc::UnboundedSender<WorkerMsg>,
    ) -> Result<Self, ApplyError> {
        // Ids are indexes, edges point at existing steps, no cycle (a cycle would leave steps
        // pending forever).
        let ready =
            ReadySet::new(&plan.steps).map_err(|e| ApplyError::InvalidPlan(e.to_string()))?;
        let n = plan.steps.len();
        let parallelism = opts.parallelism.max(1);
        let begun = Instant::now();
        emit(
            sink,
            ApplyEvent::Begin {
                cluster: plan.cluster_name.clone(),
                total_steps: n,
                parallelism,
            },
        );
        Ok(Drain {
            plan,
            state,
            runner,
            sink,
            checkpoint,
            names: HostNames::new(plan, &opts.names),
            parallelism,
            begun,
            status: vec![Status::Pending; n],
            ready,
            staging_left: plan.steps.iter().filter(|s| s.kind.is_preflight()).count(),
            tx,
            set: JoinSet::new(),
            tasks: HashMap::new(),
            membership_running: None,
            stop: None,
            aborted: false,
            last_progress: HashMap::new(),
            warnings: Vec::new(),
            every: opts
                .still_running_every
                .max(std::time::Duration::from_millis(1)),
            next_note: HashMap::new(),
        })
    }

    fn info(&self, i: usize) -> StepInfo {
        step_info(&self.plan.steps[i], &self.names)
    }

    fn save(&mut self, reason: String) -> Result<(), String> {
        save(self.state, self.checkpoint, self.sink, reason)
    }

    /// Start ready steps and handle what happens until nothing runs (or a second interrupt).
    async fn drive(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<WorkerMsg>,
        mut cancel_rx: tokio::sync::watch::Receiver<CancelLevel>,
    ) {
        let mut cancel_alive = true;
        loop {
            if self.stop.is_none() {
                self.start_ready();
            }
            if self.set.is_empty() {
                break;
            }
            let due = self.next_note.values().map(|(at, _)| *at).min();
            tokio::select! {
                biased;
                changed = cancel_rx.changed(), if cancel_alive => {
                    if changed.is_err() {
                        cancel_alive = false;
                        continue;
                    }
                    let level = *cancel_rx.borrow_and_update();
                    match level {
                        CancelLevel::Abort => {
                            self.aborted = true;
                            break;
                        }
                        CancelLevel::Graceful => set_stop(&mut self.stop, Stop::Cancelled),
                        CancelLevel::Running => {}
                    }
                }
                Some(msg) = rx.recv() => self.on_message(msg),
                Some(joined) = self.set.join_next_with_id() => self.on_joined(joined),
                () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    self.note_still_running();
                }
            }
        }
        // A warning sent just before its step ended is still in the channel.
        while let Ok(msg) = rx.try_recv() {
            if let WorkerMsg::Warning { id, message } = msg {
                self.warnings.push((id, message));
            }
        }
    }

    /// Start the steps whose dependencies succeeded, within the limits.
    fn start_ready(&mut self) {
        let plan = self.plan;
        // Preflight: while a k0s binary is still being staged (uploaded, or downloaded and
        // verified on its host), nothing else starts, so a failed download or checksum
        // stops the run before it changed anything anywhere but /etc/environment (which a
        // host's download follows: it may set the proxy the download needs).
        let staging = self.staging_left > 0;
        let mut from = 0;
        while self.set.len() < self.parallelism {
            let Some(i) = self.ready.next_from(from) else {
                break;
            };
            from = i + 1;
            let step = &plan.steps[i];
            if staging && !step.kind.is_preflight() {
                continue;
            }
            // Membership changes one at a time, whatever edges the plan has.
            let membership = step.kind.is_membership_change();
            if membership && self.membership_running.is_some() {
                continue;
            }
            if membership {
                self.membership_running = Some(i);
            }
            self.ready.started(i);
            let started = Instant::now();
            self.status[i] = Status::Running {
                started,
                intent: None,
            };
            self.next_note.insert(i, (started + self.every, 1));
            let info = self.info(i);
            emit(self.sink, ApplyEvent::StepStarted { step: info });
            let ctx = StepContext {
                id: i,
                tx: self.tx.clone(),
            };
            let handle = self.set.spawn(self.runner.clone().run(step.clone(), ctx));
            self.tasks.insert(handle.id(), i);
        }
    }

    fn on_message(&mut self, msg: WorkerMsg) {
        match msg {
            WorkerMsg::Progress { id, message } => {
                // Polls repeat themselves every few seconds; show each new situation once.
                if self.last_progress.get(&id) != Some(&message) {
                    self.last_progress.insert(id, message.clone());
                    let step = self.info(id);
                    emit(self.sink, ApplyEvent::StepProgress { step, message });
                }
            }
            WorkerMsg::Warning { id, message } => {
                self.warnings.push((id, message.clone()));
                let step = self.info(id);
                emit(
                    self.sink,
                    ApplyEvent::StepProgress {
                        step,
                        message: format!("warning: {message}"),
                    },
                );
            }
            WorkerMsg::Intent { id, intent, ack } => {
                if let Some(s) = &self.stop {
                    let _ = ack.send(Err(format!("not started: {}", s.describe())));
                    return;
                }
                self.state.intents.push(intent.clone());
                match self.save(format!("intent for step {id}")) {
                    Ok(()) => {
                        if let Status::Running { intent: slot, .. } = &mut self.status[id] {
                            *slot = Some(intent);
                        }
                        let _ = ack.send(Ok(()));
                    }
                    Err(e) => {
                        self.state.intents.retain(|x| x != &intent);
                        let _ =
                            ack.send(Err(format!("cannot record the intent in the state: {e}")));
                        set_stop(&mut self.stop, Stop::Checkpoint(e));
                    }
                }
            }
        }
    }

    /// A step's task ended: record its outcome, apply its changes and checkpoint.
    fn on_joined(
        &mut self,
        joined: Result<
            (tokio::task::Id, Result<Vec<StateChange>, StepError>),
            tokio::task::JoinError,
        >,
    ) {
        let (task_id, outcome) = match joined {
            Ok((tid, r)) => (tid, r),
            Err(e) => {
                let why = if e.is_panic() {
                    "internal error: the step panicked"
                } else {
                    "the step's task was cancelled"
                };
                (e.id(), Err(StepError::Failed(why.into())))
            }
        };
        let Some(i) = self.tasks.remove(&task_id) else {
            return;
        };
        self.next_note.remove(&i);
        if self.membership_running == Some(i) {
            self.membership_running = None;
        }
        let (started, intent) = match std::mem::replace(&mut self.status[i], Status::Pending) {
            Status::Running { started, intent } => (started, intent),
            other => {
                self.status[i] = other;
                return;
            }
        };
        let elapsed = started.elapsed();
        let step = self.info(i);
        match outcome {
            Ok(changes) => {
                for c in &changes {
                    c.apply(self.state);
                }
                if let Some(it) = &intent {
                    self.state.intents.retain(|x| x != it);
                }
                self.status[i] = Status::Succeeded;
                self.ready.succeeded(i);
                if self.plan.steps[i].kind.is_preflight() {
                    self.staging_left -= 1;
                }
                if let Err(e) = self.save(format!("after step {i}")) {
                    set_stop(&mut self.stop, Stop::Checkpoint(e));
                }
                emit(self.sink, ApplyEvent::StepFinished { step, elapsed });
            }
            Err(StepError::NotStarted(why)) => {
                self.status[i] = Status::Skipped(why.clone());
                emit(self.sink, ApplyEvent::StepSkipped { step, reason: why });
            }
            Err(err) => {
                let msg = err.to_string();
                // A half-done step keeps its intent: the next plan must probe what happened.
                if let StepError::Unsafe(reason) = &err {
                    let reason = reason.clone();
                    set_stop(&mut self.stop, Stop::Unsafe { step: i, reason });
                } else {
                    set_stop(&mut self.stop, Stop::Failed);
                }
                self.status[i] = Status::Failed(msg.clone());
                if let Err(e) = self.save(format!("after step {i}")) {
                    set_stop(&mut self.stop, Stop::Checkpoint(e));
                }
                emit(
                    self.sink,
                    ApplyEvent::StepFailed {
                        step,
                        error: msg,
                        elapsed,
                    },
                );
            }
        }
    }

    /// The "still running" notes that are due, in step order.
    fn note_still_running(&mut self) {
        let now = Instant::now();
        let mut ready: Vec<usize> = self
            .next_note
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(i, _)| *i)
            .collect();
        ready.sort_unstable();
        for i in ready {
            let step = self.info(i);
            if let Some((at, k)) = self.next_note.get_mut(&i) {
                let elapsed = self.every * *k;
                *at += self.every;
                *k += 1;
                emit(self.sink, ApplyEvent::StepStillRunning { step, elapsed });
            }
        }
    }

    /// After a second interrupt: the steps still running are abandoned, as failed.
    fn abandon_running(&mut self) {
        self.set.abort_all();
        for s in self.status.iter_mut() {
            if matches!(s, Status::Running { .. }) {
                *s = Status::Failed(
                    "abandoned by a second interrupt; it may be half done (its intent stays in the state)"
                        .into(),
                );
            }
        }
    }

    /// Whatever did not run is skipped, with the first reason that applies.
    fn skip_the_rest(&mut self) {
        for i in 0..self.status.len() {
            if !matches!(self.status[i], Status::Pending) {
                continue;
            }
            let reason = if self.aborted {
                "the apply was aborted".to_string()
            } else {
                self.why_not_run(i)
            };
            self.status[i] = Status::Skipped(reason.clone());
            let step = self.info(i);
            emit(self.sink, ApplyEvent::StepSkipped { step, reason });
        }
    }

    /// Why step `i` did not run: a dependency failed or was skipped, or the run stopped.
    fn why_not_run(&self, i: usize) -> String {
        // Named as an operator reads it: "joining the cluster as controller on c2 failed".
        let what = |p: usize| {
            let d = self.info(p);
            format!("{} on {}", lower_first(&d.description), d.name)
        };
        self.plan.steps[i]
            .after
            .iter()
            .find_map(|&p| match &self.status[p] {
                Status::Failed(_) => Some(format!("{} failed", what(p))),
                Status::Skipped(_) => Some(format!("{} was skipped", what(p))),
                _ => None,
            })
            .or_else(|| self.stop.as_ref().map(Stop::describe))
            .unwrap_or_else(|| "not reached".into())
    }

    /// The summary (also sent as the last event) and the run's result.
    fn finish(mut self) -> Result<ApplyReport, ApplyError> {
        let summary = self.summary();
        emit(
            self.sink,
            ApplyEvent::Summary {
                summary: summary.clone(),
            },
        );
        let clean = summary.failed.is_empty() && summary.skipped.is_empty();
        let report = Box::new(ApplyReport { summary });
        if self.aborted {
            return Err(ApplyError::Aborted { report });
        }
        match self.stop.take() {
            None => Ok(*report),
            Some(Stop::Cancelled) if clean => Ok(*report),
            Some(Stop::Cancelled) => Err(ApplyError::Cancelled { report }),
            Some(Stop::Failed) => Err(ApplyError::Failed { report }),
            Some(Stop::Checkpoint(message)) => Err(ApplyError::Checkpoint { message, report }),
            Some(Stop::Unsafe { step, reason }) => Err(ApplyError::Unsafe {
                step: Box::new(self.info(step)),
                reason,
                report,
            }),
        }
    }

    fn summary(&mut self) -> ApplySummary {
        let mut summary = ApplySummary {
            outcome: ApplyOutcome::Complete,
            changes: change_counts(self.plan),
            succeeded: Vec::new(),
            failed: Vec::new(),
            skipped: Vec::new(),
            warnings: std::mem::take(&mut self.warnings)
                .into_iter()
                .map(|(id, message)| (self.info(id), message))
                .collect(),
            reason: None,
            elapsed: self.begun.elapsed(),
        };
        for (i, s) in self.status.iter().enumerate() {
            let step = self.info(i);
            match s {
                Status::Succeeded => summary.succeeded.push(step),
                Status::Failed(e) => summary.failed.push((step, e.clone())),
                Status::Skipped(why) => summary.skipped.push((step, why.clone())),
                Status::Pending | Status::Running { .. } => {}
            }
        }
        let clean = summary.failed.is_empty() && summary.skipped.is_empty();
        let (outcome, reason) = if self.aborted {
            (
                ApplyOutcome::Aborted,
                Some("a second interrupt".to_string()),
            )
        } else {
            match &self.stop {
                None => (ApplyOutcome::Complete, None),
                Some(Stop::Cancelled) if clean => (ApplyOutcome::Complete, None),
                Some(Stop::Cancelled) => {
                    (ApplyOutcome::Cancelled, Some(Stop::Cancelled.describe()))
                }
                Some(Stop::Failed) => (ApplyOutcome::Failed, None),
                Some(s @ Stop::Checkpoint(_)) => (ApplyOutcome::Failed, Some(s.describe())),
                Some(Stop::Unsafe { reason, .. }) => (ApplyOutcome::Refused, Some(reason.clone())),
            }
        };
        summary.outcome = outcome;
        summary.reason = reason;
        summary
    }
}

/// `Joining the cluster` → `joining the cluster`, for a description inside a sentence.
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}
