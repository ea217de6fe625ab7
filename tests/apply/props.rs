//! Properties of the coordinator over random DAGs (acyclic by construction).

use super::*;
use crate::support::proptest_files;
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
    #![proptest_config(proptest_files::regressions_beside_source(64))]
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
        // After a failure (as the coordinator learns of it) no step starts that was not already
        // running.
        if let Some(first_fail) = r.events.iter().position(|e| matches!(e, ApplyEvent::StepFailed { .. })) {
            for e in &r.events[first_fail..] {
                if let ApplyEvent::StepStarted { step } = e {
                    prop_assert!(false, "step {} started after the failure", step.id);
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
