//! Executor tests without SSH. Part 1 drives the coordinator with a scripted `StepRunner` to
//! check scheduling (order, overlap, membership serialization, failure handling, intents,
//! interrupts); part 2 runs the real k0s step runner against a fake `Transport`.

use k0sform::apply::{
    ApplyError, Cancel, ExecOptions, StateChange, StepContext, StepError, StepRunner, intent_for,
    needs_intent, run_plan,
};
use k0sform::hostid::HostId;
use k0sform::plan::{ClusterAction, Plan, QuorumSummary, Step, StepKind};
use k0sform::state::State;
use k0sform::ui::{ApplyEvent, VecSink};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Shared helpers

fn host(n: u8) -> HostId {
    HostId::new(format!("127.0.0.{n}"), 22)
}

fn plan_of(steps: Vec<Step>) -> Plan {
    Plan {
        format_version: 1,
        cluster_name: "test".into(),
        cluster_uid: None,
        cluster_action: ClusterAction::Existing,
        refresh_only: false,
        outside_changes: vec![],
        changes: vec![],
        drift: vec![],
        steps,
        etcd: QuorumSummary {
            members_before: 0,
            members_after: 0,
            min_healthy: 0,
            quorum: 0,
        },
        warnings: vec![],
        state_serial: None,
    }
}

fn step(id: usize, kind: StepKind, after: &[usize]) -> Step {
    Step {
        id,
        host: host((id % 200) as u8 + 1),
        kind,
        after: after.to_vec(),
    }
}

/// A step that changes nothing remotely and needs no intent.
fn plain() -> StepKind {
    StepKind::RecordHost
}

/// A membership change (needs an intent, runs alone).
fn member() -> StepKind {
    StepKind::JoinController { via: host(250) }
}

fn opts(parallelism: usize) -> ExecOptions {
    ExecOptions {
        parallelism,
        per_host_limit: 10,
        poll_interval: Duration::from_millis(1),
        wait_timeout: Duration::from_secs(2),
        health_grace: Duration::from_millis(20),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

// ---------------------------------------------------------------------------------------------
// Part 1: scheduling with a scripted runner

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Start(usize),
    End(usize),
}

#[derive(Debug, Clone, Default)]
struct Script {
    /// How long each step "works".
    delay: HashMap<usize, Duration>,
    /// Steps that fail (after their work).
    fail: BTreeSet<usize>,
    /// Steps that interrupt the run this many times when they start.
    interrupt: HashMap<usize, usize>,
}

struct ScriptedRunner {
    script: Script,
    cancel: Cancel,
    marks: Mutex<Vec<Mark>>,
    in_flight: Mutex<(usize, usize)>,
}

impl ScriptedRunner {
    fn new(script: Script, cancel: Cancel) -> Arc<Self> {
        Arc::new(ScriptedRunner {
            script,
            cancel,
            marks: Mutex::new(vec![]),
            in_flight: Mutex::new((0, 0)),
        })
    }
    fn marks(&self) -> Vec<Mark> {
        self.marks.lock().unwrap().clone()
    }
    fn max_in_flight(&self) -> usize {
        self.in_flight.lock().unwrap().1
    }
}

impl StepRunner for ScriptedRunner {
    fn run(
        self: Arc<Self>,
        step: Step,
        ctx: StepContext,
    ) -> impl std::future::Future<Output = Result<Vec<StateChange>, StepError>> + Send + 'static
    {
        async move {
            let id = step.id;
            self.marks.lock().unwrap().push(Mark::Start(id));
            {
                let mut f = self.in_flight.lock().unwrap();
                f.0 += 1;
                f.1 = f.1.max(f.0);
            }
            for _ in 0..self.script.interrupt.get(&id).copied().unwrap_or(0) {
                self.cancel.interrupt();
            }
            let res = async {
                if needs_intent(&step.kind) {
                    ctx.record_intent(intent_for(&step)).await?;
                }
                let d = self
                    .script
                    .delay
                    .get(&id)
                    .copied()
                    .unwrap_or(Duration::from_millis(2));
                tokio::time::sleep(d).await;
                if self.script.fail.contains(&id) {
                    return Err(StepError::Failed(format!("step {id} broke")));
                }
                Ok(vec![])
            }
            .await;
            self.in_flight.lock().unwrap().0 -= 1;
            self.marks.lock().unwrap().push(Mark::End(id));
            res
        }
    }
}

struct Run {
    result: Result<k0sform::apply::ApplyReport, ApplyError>,
    marks: Vec<Mark>,
    max_in_flight: usize,
    events: Vec<ApplyEvent>,
    checkpoints: Vec<State>,
}

fn run_scripted(plan: &Plan, script: Script, parallelism: usize) -> Run {
    let cancel = Cancel::new();
    let runner = ScriptedRunner::new(script, cancel.clone());
    let mut state = State::new();
    let mut sink = VecSink::default();
    let mut checkpoints = Vec::new();
    let mut cp = |s: &State| -> Result<(), String> {
        checkpoints.push(s.clone());
        Ok(())
    };
    let result = rt().block_on(run_plan(
        plan,
        &mut state,
        runner.clone(),
        &opts(parallelism),
        &mut sink,
        &mut cp,
        &cancel,
    ));
    Run {
        result,
        marks: runner.marks(),
        max_in_flight: runner.max_in_flight(),
        events: sink.events,
        checkpoints,
    }
}

fn pos(marks: &[Mark], m: Mark) -> Option<usize> {
    marks.iter().position(|x| *x == m)
}

#[test]
fn order_respects_after_edges() {
    // 0 → 1 → 3, 0 → 2 → 3
    let plan = plan_of(vec![
        step(0, plain(), &[]),
        step(1, plain(), &[0]),
        step(2, plain(), &[0]),
        step(3, plain(), &[1, 2]),
    ]);
    let r = run_scripted(&plan, Script::default(), 4);
    let report = r.result.expect("apply succeeds");
    assert_eq!(report.succeeded(), vec![0, 1, 2, 3]);
    for (s, p) in [(1, 0), (2, 0), (3, 1), (3, 2)] {
        assert!(
            pos(&r.marks, Mark::End(p)) < pos(&r.marks, Mark::Start(s)),
            "step {s} started before {p} ended: {:?}",
            r.marks
        );
    }
    // One checkpoint after every step.
    assert_eq!(r.checkpoints.len(), 4);
}

#[test]
fn independent_steps_overlap_up_to_parallelism() {
    let steps: Vec<Step> = (0..6).map(|i| step(i, plain(), &[])).collect();
    let mut script = Script::default();
    for i in 0..6 {
        script.delay.insert(i, Duration::from_millis(30));
    }
    let plan = plan_of(steps);
    let r = run_scripted(&plan, script, 4);
    assert!(r.result.is_ok());
    assert_eq!(r.max_in_flight, 4, "marks {:?}", r.marks);

    let mut script = Script::default();
    for i in 0..6 {
        script.delay.insert(i, Duration::from_millis(10));
    }
    let r = run_scripted(&plan, script, 1);
    assert!(r.result.is_ok());
    assert_eq!(r.max_in_flight, 1);
}

#[test]
fn membership_steps_never_overlap_even_without_edges() {
    let plan = plan_of(vec![
        step(0, member(), &[]),
        step(1, member(), &[]),
        step(2, member(), &[]),
        step(3, plain(), &[]),
        step(4, plain(), &[]),
    ]);
    let mut script = Script::default();
    for i in 0..5 {
        script.delay.insert(i, Duration::from_millis(15));
    }
    let r = run_scripted(&plan, script, 10);
    assert!(r.result.is_ok());
    assert_no_membership_overlap(&plan, &r.marks);
    // The plain steps did run beside the membership steps.
    assert!(r.max_in_flight >= 2);
}

fn assert_no_membership_overlap(plan: &Plan, marks: &[Mark]) {
    let mut open: Option<usize> = None;
    for m in marks {
        match *m {
            Mark::Start(i) if plan.steps[i].kind.is_membership_change() => {
                assert!(
                    open.is_none(),
                    "membership steps {open:?} and {i} overlap: {marks:?}"
                );
                open = Some(i);
            }
            Mark::End(i) if plan.steps[i].kind.is_membership_change() => {
                assert_eq!(open, Some(i));
                open = None;
            }
            _ => {}
        }
    }
}

#[test]
fn failure_starts_nothing_new_and_lets_running_steps_finish() {
    // 0 fails fast; 1 is running slowly beside it; 2 depends on 0; 3 is independent but there is
    // only room for two at once, so it is still pending when 0 fails.
    let plan = plan_of(vec![
        step(0, plain(), &[]),
        step(1, plain(), &[]),
        step(2, plain(), &[0]),
        step(3, plain(), &[]),
    ]);
    let mut script = Script::default();
    script.fail.insert(0);
    script.delay.insert(0, Duration::from_millis(5));
    script.delay.insert(1, Duration::from_millis(60));
    let r = run_scripted(&plan, script, 2);
    let err = r.result.expect_err("a failed step fails the apply");
    assert_eq!(err.exit().code(), 1);
    let report = err.report().expect("report");
    assert_eq!(report.succeeded(), vec![1], "the running step finished");
    assert_eq!(report.failed(), vec![0]);
    assert_eq!(report.skipped(), vec![2, 3]);
    assert_eq!(pos(&r.marks, Mark::Start(2)), None);
    assert_eq!(pos(&r.marks, Mark::Start(3)), None);
    assert!(pos(&r.marks, Mark::End(1)).is_some());
    // Checkpointed after both finished steps.
    assert_eq!(r.checkpoints.len(), 2);
    // The summary event names the failed step's error and each skipped step's reason.
    let Some(ApplyEvent::Summary { summary }) = r.events.last() else {
        panic!("last event is the summary: {:?}", r.events.last());
    };
    assert_eq!(summary.failed[0].1, "step 0 broke");
    assert_eq!(summary.skipped[0].1, "step 0 failed");
    assert_eq!(
        summary.skipped[1].1,
        "the apply stopped after a failed step"
    );
}

#[test]
fn intent_recorded_before_and_cleared_after_non_idempotent_step() {
    let plan = plan_of(vec![step(0, plain(), &[]), step(1, member(), &[0])]);
    let r = run_scripted(&plan, Script::default(), 2);
    r.result.expect("ok");
    let intents: Vec<Vec<String>> = r
        .checkpoints
        .iter()
        .map(|s| s.intents.iter().map(|i| i.kind.clone()).collect())
        .collect();
    assert_eq!(
        intents,
        vec![
            vec![],                              // after step 0
            vec!["join_controller".to_string()], // intent for step 1
            vec![],                              // after step 1
        ]
    );
    let it = &r.checkpoints[1].intents[0];
    assert_eq!((it.address.as_str(), it.port), ("127.0.0.2", 22));
}

#[test]
fn failed_non_idempotent_step_keeps_its_intent() {
    let plan = plan_of(vec![step(0, member(), &[])]);
    let mut script = Script::default();
    script.fail.insert(0);
    let r = run_scripted(&plan, script, 1);
    assert!(matches!(r.result, Err(ApplyError::Failed { .. })));
    let last = r
        .checkpoints
        .last()
        .expect("checkpointed after the failure");
    assert_eq!(
        last.intents.len(),
        1,
        "the next plan must see the half-done join"
    );
}

#[test]
fn checkpoint_failure_stops_the_run() {
    let plan = plan_of(vec![step(0, plain(), &[]), step(1, plain(), &[0])]);
    let cancel = Cancel::new();
    let runner = ScriptedRunner::new(Script::default(), cancel.clone());
    let mut state = State::new();
    let mut sink = VecSink::default();
    let mut cp =
        |_: &State| -> Result<(), std::io::Error> { Err(std::io::Error::other("disk full")) };
    let res = rt().block_on(run_plan(
        &plan,
        &mut state,
        runner.clone(),
        &opts(2),
        &mut sink,
        &mut cp,
        &cancel,
    ));
    match res {
        Err(ApplyError::Checkpoint { message, report }) => {
            assert!(message.contains("disk full"));
            assert_eq!(report.succeeded(), vec![0]);
            assert_eq!(report.skipped(), vec![1]);
        }
        other => panic!("expected a checkpoint error, got {other:?}"),
    }
    assert_eq!(runner.marks(), vec![Mark::Start(0), Mark::End(0)]);
}

#[test]
fn first_interrupt_finishes_running_steps_and_starts_nothing_new() {
    let plan = plan_of(vec![
        step(0, plain(), &[]),
        step(1, plain(), &[0]),
        step(2, plain(), &[]),
    ]);
    let mut script = Script::default();
    script.interrupt.insert(0, 1);
    script.delay.insert(0, Duration::from_millis(20));
    let r = run_scripted(&plan, script, 1);
    match &r.result {
        Err(e @ ApplyError::Cancelled { report }) => {
            assert_eq!(e.exit().code(), 1);
            assert_eq!(report.succeeded(), vec![0]);
            assert_eq!(report.skipped(), vec![1, 2]);
        }
        other => panic!("expected cancelled, got {other:?}"),
    }
}

#[test]
fn second_interrupt_aborts_at_once() {
    let plan = plan_of(vec![step(0, plain(), &[]), step(1, plain(), &[0])]);
    let mut script = Script::default();
    script.interrupt.insert(0, 2);
    script.delay.insert(0, Duration::from_secs(30));
    let t = std::time::Instant::now();
    let r = run_scripted(&plan, script, 1);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "did not wait for the step"
    );
    match &r.result {
        Err(ApplyError::Aborted { report }) => {
            assert_eq!(report.failed(), vec![0]);
            assert_eq!(report.skipped(), vec![1]);
        }
        other => panic!("expected aborted, got {other:?}"),
    }
    assert_eq!(
        r.marks,
        vec![Mark::Start(0)],
        "the step was abandoned mid-way"
    );
}

#[test]
fn invalid_plans_are_rejected_before_anything_runs() {
    let cyclic = plan_of(vec![step(0, plain(), &[1]), step(1, plain(), &[0])]);
    let r = run_scripted(&cyclic, Script::default(), 2);
    assert!(matches!(r.result, Err(ApplyError::InvalidPlan(_))));
    assert!(r.marks.is_empty());
    let dangling = plan_of(vec![step(0, plain(), &[7])]);
    assert!(matches!(
        run_scripted(&dangling, Script::default(), 2).result,
        Err(ApplyError::InvalidPlan(_))
    ));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// Random DAGs, acyclic by construction: a step may only wait for lower ids.
    fn dag() -> impl Strategy<Value = (Plan, Script, usize)> {
        (1usize..12)
            .prop_flat_map(|n| {
                (
                    proptest::collection::vec(
                        (
                            proptest::collection::vec(any::<proptest::sample::Index>(), 0..3),
                            any::<bool>(),                  // membership?
                            proptest::bool::weighted(0.15), // fails?
                            0u64..6,                        // delay ms
                        ),
                        n,
                    ),
                    1usize..5,
                )
            })
            .prop_map(|(specs, parallelism)| {
                let mut steps = Vec::new();
                let mut script = Script::default();
                for (i, (preds, membership, fails, delay)) in specs.into_iter().enumerate() {
                    let mut after: Vec<usize> = if i == 0 {
                        vec![]
                    } else {
                        preds.iter().map(|ix| ix.index(i)).collect()
                    };
                    after.sort();
                    after.dedup();
                    let kind = if membership { member() } else { plain() };
                    steps.push(step(i, kind, &after));
                    if fails {
                        script.fail.insert(i);
                    }
                    script.delay.insert(i, Duration::from_millis(delay));
                }
                (plan_of(steps), script, parallelism)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn scheduling_invariants((plan, script, parallelism) in dag()) {
            let fails = script.fail.clone();
            let r = run_scripted(&plan, script, parallelism);
            let marks = &r.marks;
            // Every executed step ran after all its predecessors succeeded.
            for (ix, m) in marks.iter().enumerate() {
                if let Mark::Start(i) = *m {
                    for &p in &plan.steps[i].after {
                        let end = pos(marks, Mark::End(p));
                        prop_assert!(end.is_some_and(|e| e < ix), "step {} started before {} ended", i, p);
                        prop_assert!(!fails.contains(&p), "step {} started after failed {}", i, p);
                    }
                }
            }
            // No two membership steps overlapped.
            let mut open = None;
            for m in marks {
                match *m {
                    Mark::Start(i) if plan.steps[i].kind.is_membership_change() => {
                        prop_assert!(open.is_none(), "overlap {:?} {}", open, i);
                        open = Some(i);
                    }
                    Mark::End(i) if plan.steps[i].kind.is_membership_change() => open = None,
                    _ => {}
                }
            }
            // After a failure no step starts that was not already running.
            if let Some(first_fail) = marks.iter().position(|m| matches!(m, Mark::End(i) if fails.contains(i))) {
                for m in &marks[first_fail..] {
                    if let Mark::Start(i) = m {
                        prop_assert!(false, "step {} started after the failure", i);
                    }
                }
                prop_assert!(r.result.is_err());
            }
            // Never more than `parallelism` at once.
            prop_assert!(r.max_in_flight <= parallelism);
            // Accounting: every step is exactly one of succeeded/failed/skipped.
            let report = match &r.result { Ok(rep) => rep.clone(), Err(e) => e.report().cloned().expect("report") };
            let mut all: Vec<usize> = report.succeeded();
            all.extend(report.failed());
            all.extend(report.skipped());
            all.sort();
            prop_assert_eq!(all, (0..plan.steps.len()).collect::<Vec<_>>());
            let failed: BTreeSet<usize> = report.failed().into_iter().collect();
            let ran_and_failed: BTreeSet<usize> = fails.iter().copied().filter(|i| pos(marks, Mark::Start(*i)).is_some()).collect();
            // A scripted failure fails the step unless it stopped at the intent gate first.
            prop_assert!(failed.is_subset(&ran_and_failed));
            // No intent leaks from successful steps: the final checkpoint holds only failed ones.
            if let Some(last) = r.checkpoints.last() {
                prop_assert!(last.intents.len() <= failed.len());
            }
        }
    }
}
