//! Part 1: the coordinator driven by a scripted `StepRunner`: order, overlap, membership
//! serialization, failure handling, intents and interrupts.

use super::*;

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
    let plan = plan_of(steps);
    let r = run_scripted(&plan, Script::each_taking(6, Duration::from_millis(30)), 4);
    assert!(r.result.is_ok());
    assert_eq!(r.max_in_flight, 4, "marks {:?}", r.marks);

    let r = run_scripted(&plan, Script::each_taking(6, Duration::from_millis(10)), 1);
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
    let r = run_scripted(&plan, Script::each_taking(5, Duration::from_millis(15)), 10);
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
    assert_eq!(
        summary.skipped[0].1,
        "recording the host in the state on 127.0.0.1 failed"
    );
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
