//! The coordinator (cargo's DependencyQueue, nextest's dispatcher): the only owner of scheduling
//! state (pending, running, succeeded, failed, skipped) and of the `State`. It starts ready steps
//! within the limits, serializes membership changes even when the plan forgot an edge, records
//! intents on request, applies each finished step's changes and checkpoints after every step.

use super::{
    ApplyError, ApplyReport, Cancel, CancelLevel, Checkpoint, ExecOptions, HostNames, StateChange,
    StepContext, StepError, StepRunner, WorkerMsg, change_counts, emit, step_info,
};
use crate::plan::Plan;
use crate::state::{Intent, State};
use crate::ui::{ApplyEvent, ApplyOutcome, ApplySummary, EventSink};
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

/// Check that the steps form a DAG the coordinator can run: ids are indexes, edges point at
/// existing steps, no cycle (a cycle would leave steps pending forever).
fn validate(plan: &Plan) -> Result<(), ApplyError> {
    let n = plan.steps.len();
    let mut indegree = vec![0usize; n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, s) in plan.steps.iter().enumerate() {
        if s.id != i {
            return Err(ApplyError::InvalidPlan(format!(
                "step at position {i} has id {}",
                s.id
            )));
        }
        for &p in &s.after {
            if p >= n || p == i {
                return Err(ApplyError::InvalidPlan(format!(
                    "step {i} waits for step {p}, which does not exist or is itself"
                )));
            }
            indegree[i] += 1;
            succs[p].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut seen = 0;
    while let Some(i) = ready.pop() {
        seen += 1;
        for &s in &succs[i] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(s);
            }
        }
    }
    if seen != n {
        return Err(ApplyError::InvalidPlan(
            "the steps' dependencies form a cycle".into(),
        ));
    }
    Ok(())
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
    validate(plan)?;
    let n = plan.steps.len();
    let parallelism = opts.parallelism.max(1);
    let begun = Instant::now();
    let mut status = vec![Status::Pending; n];
    let (tx, mut rx) = mpsc::unbounded_channel::<WorkerMsg>();
    let mut set: JoinSet<Result<Vec<StateChange>, StepError>> = JoinSet::new();
    let mut tasks: HashMap<tokio::task::Id, usize> = HashMap::new();
    let mut membership_running: Option<usize> = None;
    let mut stop: Option<Stop> = None;
    let mut aborted = false;
    let mut cancel_rx = cancel.subscribe();
    let mut cancel_alive = true;
    let mut last_progress: HashMap<usize, String> = HashMap::new();
    let mut warnings: Vec<(usize, String)> = Vec::new();
    let names = HostNames::new(plan, &opts.names);
    let info = |i: usize| step_info(&plan.steps[i], &names);
    // Long steps get a "still running" note every `every`: when each running step's next is due.
    let every = opts
        .still_running_every
        .max(std::time::Duration::from_millis(1));
    let mut next_note: HashMap<usize, (Instant, u32)> = HashMap::new();

    emit(
        sink,
        ApplyEvent::Begin {
            cluster: plan.cluster_name.clone(),
            total_steps: n,
            parallelism,
        },
    );
    if cancel.level() >= CancelLevel::Graceful {
        set_stop(&mut stop, Stop::Cancelled);
    }

    loop {
        if stop.is_none() {
            // Preflight: while a k0s binary is still being staged (uploaded, or downloaded and
            // verified on its host), nothing else starts, so a failed download or checksum
            // stops the run before it changed anything anywhere but /etc/environment (which a
            // host's download follows: it may set the proxy the download needs).
            let staging = plan
                .steps
                .iter()
                .zip(&status)
                .any(|(s, st)| s.kind.is_preflight() && !matches!(st, Status::Succeeded));
            for (i, step) in plan.steps.iter().enumerate() {
                if set.len() >= parallelism {
                    break;
                }
                if staging && !step.kind.is_preflight() {
                    continue;
                }
                if !matches!(status[i], Status::Pending)
                    || !step
                        .after
                        .iter()
                        .all(|&p| matches!(status[p], Status::Succeeded))
                {
                    continue;
                }
                // Membership changes one at a time, whatever edges the plan has.
                let membership = step.kind.is_membership_change();
                if membership && membership_running.is_some() {
                    continue;
                }
                if membership {
                    membership_running = Some(i);
                }
                let started = Instant::now();
                status[i] = Status::Running {
                    started,
                    intent: None,
                };
                next_note.insert(i, (started + every, 1));
                emit(sink, ApplyEvent::StepStarted { step: info(i) });
                let ctx = StepContext {
                    id: i,
                    tx: tx.clone(),
                };
                let handle = set.spawn(runner.clone().run(step.clone(), ctx));
                tasks.insert(handle.id(), i);
            }
        }
        if set.is_empty() {
            break;
        }
        let due = next_note.values().map(|(at, _)| *at).min();

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
                        aborted = true;
                        break;
                    }
                    CancelLevel::Graceful => set_stop(&mut stop, Stop::Cancelled),
                    CancelLevel::Running => {}
                }
            }
            Some(msg) = rx.recv() => match msg {
                WorkerMsg::Progress { id, message } => {
                    // Polls repeat themselves every few seconds; show each new situation once.
                    if last_progress.get(&id) != Some(&message) {
                        last_progress.insert(id, message.clone());
                        emit(sink, ApplyEvent::StepProgress { step: info(id), message });
                    }
                }
                WorkerMsg::Warning { id, message } => {
                    warnings.push((id, message.clone()));
                    emit(
                        sink,
                        ApplyEvent::StepProgress {
                            step: info(id),
                            message: format!("warning: {message}"),
                        },
                    );
                }
                WorkerMsg::Intent { id, intent, ack } => {
                    if let Some(s) = &stop {
                        let _ = ack.send(Err(format!("not started: {}", s.describe())));
                        continue;
                    }
                    state.intents.push(intent.clone());
                    match save(state, checkpoint, sink, format!("intent for step {id}")) {
                        Ok(()) => {
                            if let Status::Running { intent: slot, .. } = &mut status[id] {
                                *slot = Some(intent);
                            }
                            let _ = ack.send(Ok(()));
                        }
                        Err(e) => {
                            state.intents.retain(|x| x != &intent);
                            let _ = ack.send(Err(format!("cannot record the intent in the state: {e}")));
                            set_stop(&mut stop, Stop::Checkpoint(e));
                        }
                    }
                }
            },
            Some(joined) = set.join_next_with_id() => {
                let (task_id, outcome) = match joined {
                    Ok((tid, r)) => (tid, r),
                    Err(e) => {
                        let why = if e.is_panic() { "internal error: the step panicked" } else { "the step's task was cancelled" };
                        (e.id(), Err(StepError::Failed(why.into())))
                    }
                };
                let Some(i) = tasks.remove(&task_id) else { continue };
                next_note.remove(&i);
                if membership_running == Some(i) {
                    membership_running = None;
                }
                let (started, intent) = match std::mem::replace(&mut status[i], Status::Pending) {
                    Status::Running { started, intent } => (started, intent),
                    other => { status[i] = other; continue; }
                };
                let elapsed = started.elapsed();
                let step = info(i);
                match outcome {
                    Ok(changes) => {
                        for c in &changes {
                            c.apply(state);
                        }
                        if let Some(it) = &intent {
                            state.intents.retain(|x| x != it);
                        }
                        status[i] = Status::Succeeded;
                        if let Err(e) = save(state, checkpoint, sink, format!("after step {i}")) {
                            set_stop(&mut stop, Stop::Checkpoint(e));
                        }
                        emit(sink, ApplyEvent::StepFinished { step, elapsed });
                    }
                    Err(StepError::NotStarted(why)) => {
                        status[i] = Status::Skipped(why.clone());
                        emit(sink, ApplyEvent::StepSkipped { step, reason: why });
                    }
                    Err(err) => {
                        let msg = err.to_string();
                        // A half-done step keeps its intent: the next plan must probe what happened.
                        if let StepError::Unsafe(reason) = &err {
                            set_stop(&mut stop, Stop::Unsafe { step: i, reason: reason.clone() });
                        } else {
                            set_stop(&mut stop, Stop::Failed);
                        }
                        status[i] = Status::Failed(msg.clone());
                        if let Err(e) = save(state, checkpoint, sink, format!("after step {i}")) {
                            set_stop(&mut stop, Stop::Checkpoint(e));
                        }
                        emit(sink, ApplyEvent::StepFailed { step, error: msg, elapsed });
                    }
                }
            }
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let now = Instant::now();
                let mut ready: Vec<usize> = next_note
                    .iter()
                    .filter(|(_, (at, _))| *at <= now)
                    .map(|(i, _)| *i)
                    .collect();
                ready.sort_unstable();
                for i in ready {
                    if let Some((at, k)) = next_note.get_mut(&i) {
                        emit(sink, ApplyEvent::StepStillRunning { step: info(i), elapsed: every * *k });
                        *at += every;
                        *k += 1;
                    }
                }
            }
        }
    }
    // A warning sent just before its step ended is still in the channel.
    while let Ok(msg) = rx.try_recv() {
        if let WorkerMsg::Warning { id, message } = msg {
            warnings.push((id, message));
        }
    }

    if aborted {
        set.abort_all();
        for s in status.iter_mut() {
            if matches!(s, Status::Running { .. }) {
                *s = Status::Failed(
                    "abandoned by a second interrupt; it may be half done (its intent stays in the state)"
                        .into(),
                );
            }
        }
    }

    // Whatever did not run is skipped, with the first reason that applies.
    for i in 0..n {
        if !matches!(status[i], Status::Pending) {
            continue;
        }
        let step = &plan.steps[i];
        // Named as an operator reads it: "joining the cluster as controller on c2 failed".
        let what = |p: usize| {
            let d = info(p);
            format!("{} on {}", lower_first(&d.description), d.name)
        };
        let reason = step
            .after
            .iter()
            .find_map(|&p| match &status[p] {
                Status::Failed(_) => Some(format!("{} failed", what(p))),
                Status::Skipped(_) => Some(format!("{} was skipped", what(p))),
                _ => None,
            })
            .or_else(|| stop.as_ref().map(Stop::describe))
            .unwrap_or_else(|| "not reached".into());
        let reason = if aborted {
            "the apply was aborted".to_string()
        } else {
            reason
        };
        status[i] = Status::Skipped(reason.clone());
        emit(
            sink,
            ApplyEvent::StepSkipped {
                step: info(i),
                reason,
            },
        );
    }

    let mut summary = ApplySummary {
        outcome: ApplyOutcome::Complete,
        changes: change_counts(plan),
        succeeded: Vec::new(),
        failed: Vec::new(),
        skipped: Vec::new(),
        warnings: warnings
            .into_iter()
            .map(|(id, message)| (info(id), message))
            .collect(),
        reason: None,
        elapsed: begun.elapsed(),
    };
    for (i, s) in status.iter().enumerate() {
        let step = info(i);
        match s {
            Status::Succeeded => summary.succeeded.push(step),
            Status::Failed(e) => summary.failed.push((step, e.clone())),
            Status::Skipped(why) => summary.skipped.push((step, why.clone())),
            Status::Pending | Status::Running { .. } => {}
        }
    }
    let clean = summary.failed.is_empty() && summary.skipped.is_empty();
    let (outcome, reason) = if aborted {
        (
            ApplyOutcome::Aborted,
            Some("a second interrupt".to_string()),
        )
    } else {
        match &stop {
            None => (ApplyOutcome::Complete, None),
            Some(Stop::Cancelled) if clean => (ApplyOutcome::Complete, None),
            Some(Stop::Cancelled) => (ApplyOutcome::Cancelled, Some(Stop::Cancelled.describe())),
            Some(Stop::Failed) => (ApplyOutcome::Failed, None),
            Some(s @ Stop::Checkpoint(_)) => (ApplyOutcome::Failed, Some(s.describe())),
            Some(Stop::Unsafe { reason, .. }) => (ApplyOutcome::Refused, Some(reason.clone())),
        }
    };
    summary.outcome = outcome;
    summary.reason = reason;
    emit(
        sink,
        ApplyEvent::Summary {
            summary: summary.clone(),
        },
    );
    let report = Box::new(ApplyReport { summary });
    if aborted {
        return Err(ApplyError::Aborted { report });
    }
    match stop {
        None => Ok(*report),
        Some(Stop::Cancelled) if clean => Ok(*report),
        Some(Stop::Cancelled) => Err(ApplyError::Cancelled { report }),
        Some(Stop::Failed) => Err(ApplyError::Failed { report }),
        Some(Stop::Checkpoint(message)) => Err(ApplyError::Checkpoint { message, report }),
        Some(Stop::Unsafe { step, reason }) => Err(ApplyError::Unsafe {
            step: Box::new(info(step)),
            reason,
            report,
        }),
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
