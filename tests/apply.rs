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
        destroy: false,
        outside_changes: vec![],
        changes: vec![],
        drift: vec![],
        steps,
        etcd: QuorumSummary {
            members_before: 0,
            members_after: 0,
            min_healthy: 0,
            quorum: 0,
            kine: false,
        },
        warnings: vec![],
        state_serial: None,
        first_contacts: vec![],
        k0s_version: None,
        hooks_not_run: vec![],
        manifests: vec![],
        private_addresses: vec![],
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
        ..ExecOptions::default()
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

impl Script {
    /// Steps `0..n` each work for `d`.
    fn each_taking(n: usize, d: Duration) -> Self {
        Script {
            delay: (0..n).map(|i| (i, d)).collect(),
            ..Script::default()
        }
    }
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
    async fn run(
        self: Arc<Self>,
        step: Step,
        ctx: StepContext,
    ) -> Result<Vec<StateChange>, StepError> {
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
}

// ---------------------------------------------------------------------------------------------
// Part 2: the real k0s steps against a fake cluster behind a fake Transport

mod fake {
    use base64::Engine;
    use k0sform::apply::HostProber;
    use k0sform::hostid::HostId;
    use k0sform::reality::{ClusterView, HostFacts, K0sStatus, MemberView, Probe};
    use k0sform::state::BinaryRecord;
    use k0sform::transport::{CommandOutput, FileAttrs, RemoteCommand, Transport, TransportError};
    use std::collections::{BTreeMap, HashMap};
    use std::io::Write;
    use std::sync::{Arc, Mutex, MutexGuard};
    use std::time::Duration;

    pub const BEARER: &str = "abcdef.0123456789abcdef";
    pub const BOOT_UID: &str = "b0075a11-0000-4000-8000-000000000001";
    pub const OLD_UID: &str = "7c3f0000-0000-4000-8000-000000000002";
    /// The stat line of every binary the fake moves into place.
    pub const MOVED_STAT: &str =
        "1234 2049 77 2026-12-04 10:00:00.000000000 +0000 2026-12-04 10:00:01.000000000 +0000";

    fn moved_stat_line() -> String {
        format!("{}{MOVED_STAT}\n", k0sform::k0s::MOVED_STAT_PREFIX)
    }

    #[derive(Debug, Clone, Default)]
    pub struct FakeHost {
        pub machine_id: String,
        pub hostname: String,
        pub running: bool,
        /// `controller` / `worker` and the install args.
        pub installed: Option<(String, Vec<String>)>,
        pub files: BTreeMap<String, (Vec<u8>, u32)>,
        /// The API server on this host does not answer.
        pub unhealthy: bool,
        /// The version k0s runs with since its last start (from the binary installed then:
        /// `k0s vX.Y.Z` → `vX.Y.Z+k0s.0`), else v1.33.4+k0s.0.
        pub version: Option<String>,
        /// Arguments `k0s status` shows after the binary and the role (the running service's).
        pub status_args: Vec<String>,
    }

    #[derive(Debug, Clone)]
    pub struct Member {
        pub name: String,
        pub peer_url: String,
        pub id: String,
    }

    #[derive(Debug, Clone)]
    pub enum CallKind {
        Run {
            argv: Vec<String>,
            env: Vec<(String, String)>,
            stdin: Option<Vec<u8>>,
        },
        Write {
            path: String,
            data: Vec<u8>,
            mode: u32,
        },
    }

    #[derive(Debug, Clone)]
    pub struct Call {
        pub host: HostId,
        pub kind: CallKind,
    }

    impl Call {
        /// The k0s words after the binary, e.g. `etcd leave --peer-address=…`.
        pub fn words(&self) -> String {
            match &self.kind {
                CallKind::Run { argv, .. } if argv.get(3).is_some_and(|a| a == "k0sform-swap") => {
                    "swap".to_string()
                }
                // The wrappers of `k0s::install_service` and `k0s::start_at_host_time`: their
                // k0s command's words.
                CallKind::Run { argv, .. }
                    if argv.get(3).is_some_and(|a| a == "k0sform-install") =>
                {
                    argv[9..].join(" ")
                }
                CallKind::Run { argv, .. } if argv.get(3).is_some_and(|a| a == "k0sform-start") => {
                    argv[5..].join(" ")
                }
                CallKind::Run { argv, .. }
                    if argv.get(3).is_some_and(|a| a == "k0sform-token-file") =>
                {
                    format!("token-file {}", argv[4])
                }
                CallKind::Run { argv, .. } => {
                    let i = argv.iter().position(|a| a.ends_with("k0s")).unwrap_or(0);
                    argv[i + 1..].join(" ")
                }
                CallKind::Write { path, .. } => format!("write {path}"),
            }
        }
        pub fn is(&self, host: &HostId, prefix: &str) -> bool {
            &self.host == host && self.words().starts_with(prefix)
        }
        /// The command line of a run (not a write).
        pub fn argv(&self) -> Option<&[String]> {
            match &self.kind {
                CallKind::Run { argv, .. } => Some(argv),
                CallKind::Write { .. } => None,
            }
        }
    }

    #[derive(Debug, Default)]
    pub struct World {
        pub hosts: BTreeMap<HostId, FakeHost>,
        pub members: Vec<Member>,
        pub nodes: BTreeMap<String, bool>,
        pub uid: Option<String>,
        pub next_id: u64,
        pub calls: Vec<Call>,
        pub in_flight: HashMap<HostId, usize>,
        pub max_in_flight: HashMap<HostId, usize>,
        /// File writes (uploads included) in flight on all hosts together, and their peak.
        pub writes_in_flight: usize,
        pub max_writes_in_flight: usize,
        pub delay: Duration,
        /// Commands whose k0s words start with this fail on that host.
        pub fail: Vec<(HostId, String)>,
        /// EtcdMember objects show this member ID for a peer address instead of the real one.
        pub object_id_override: HashMap<String, String>,
        pub tokens: Vec<String>,
        /// `kubectl delete etcdmember X` hides X's object (as on a real cluster).
        pub hide_objects_after_delete: bool,
        pub deleted_objects: Vec<String>,
        /// `etcd leave` is refused with `unhealthy cluster` this many more times (etcd's strict
        /// reconfiguration check right after membership churn).
        pub refuse_leave: usize,
        /// Hosts probed through `Prober`, in order.
        pub probed: Vec<HostId>,
        /// The binary record each probe was given (`Prober::probe`'s `known_binary`).
        pub probed_known: Vec<(HostId, Option<BinaryRecord>)>,
        /// Nodes marked unschedulable (`kubectl cordon`/`drain`, until `uncordon`).
        pub cordoned: std::collections::BTreeSet<String>,
        /// Taints put on Nodes with `kubectl taint nodes`, by Node.
        pub taints: BTreeMap<String, Vec<String>>,
        /// The hosts' clock (seconds; one for all hosts): `date -u +%s` and each k0s start move
        /// it on by a second.
        pub clock: i64,
        /// When each Node's kubelet last posted its status (`lastHeartbeatTime`), by the clock.
        pub beats: BTreeMap<String, i64>,
        /// Nodes whose kubelet posts nothing after a start: they keep the Ready condition and
        /// heartbeat they had (the cached Ready of a stopped kubelet).
        pub silent_kubelets: std::collections::BTreeSet<String>,
        /// etcd learners by peer address (k0s v1.35.5+): their EtcdMember object appears (with
        /// Joined=True) only after this many more object listings that show them as members.
        pub learners: BTreeMap<String, usize>,
        /// Probes report which start of k0s each host runs (`k0s status`'s InvocationID) and
        /// which start wrote each EtcdMember object (its `shutdown-on-leave` label): `run-ADDR`.
        pub invocations: bool,
        /// EtcdMember objects by peer address that still show an earlier life of their host
        /// (another member ID, another invocation) for this many more probes: restored from a
        /// backup, or left by a rebuilt host, until the running k0s rewrites them.
        pub stale_objects: BTreeMap<String, (String, usize)>,
        /// k0s rewrites such an object in two calls, labels before status: probes show it with
        /// the running start's InvocationID beside the earlier member ID. `kubectl get
        /// etcdmembers` shows it, Joined=True, while its address is no member or a hidden
        /// learner (it was there before the join; k0s rewrites it only after the promotion).
        pub relabelled_stale: bool,
        /// `Transport::run_lines` (the Node watch). `None`, the default: the fake cannot stream,
        /// and the runner polls. `Some((after, node))`: the watch starts; `after` later that
        /// Node's kubelet registers it Ready and the watch prints `node/NODE`, then runs until it
        /// is dropped.
        pub watch: Option<(Duration, String)>,
        /// With `watch`: the watch's command ends this long after it started, printing
        /// nothing; the kubelet still registers its Node when `watch` says.
        pub watch_ends: Option<Duration>,
        /// Node watches started, and those ended or dropped since.
        pub watches: (usize, usize),
        /// Hosts whose probe meets another SSH host key than the one recorded.
        pub key_changed: std::collections::BTreeSet<HostId>,
    }

    fn ok(stdout: impl Into<Vec<u8>>) -> CommandOutput {
        CommandOutput {
            status: Some(0),
            stdout: stdout.into(),
            stderr: vec![],
        }
    }

    fn err(line: &str) -> CommandOutput {
        CommandOutput {
            status: Some(1),
            stdout: vec![],
            stderr: format!("{line}\n").into_bytes(),
        }
    }

    pub fn make_token() -> String {
        let kubeconfig = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0E=\n    server: https://127.0.0.1:9443\n  name: k0s\ncontexts:\n- context:\n    cluster: k0s\n    user: controller-bootstrap\n  name: k0s\ncurrent-context: k0s\nkind: Config\npreferences: {{}}\nusers:\n- name: controller-bootstrap\n  user:\n    token: {BEARER}\n"
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(kubeconfig.as_bytes()).unwrap();
        base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap())
    }

    fn addr_of(url: &str) -> String {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        rest.rsplit_once(':').map_or(rest, |(h, _)| h).to_string()
    }

    impl World {
        pub fn add_host(&mut self, id: &HostId, name: &str) {
            self.hosts.insert(
                id.clone(),
                FakeHost {
                    machine_id: format!("mid-{name}"),
                    hostname: name.to_string(),
                    ..Default::default()
                },
            );
        }

        /// A running controller that is already an etcd member (and has a Node if `node`).
        pub fn add_member(&mut self, id: &HostId, name: &str) -> String {
            self.add_host(id, name);
            let h = self.hosts.get_mut(id).unwrap();
            h.running = true;
            h.installed = Some(("controller".into(), vec![]));
            self.next_id += 1;
            let mid = format!("{:016x}", 0x8e9e05c521640000u64 + self.next_id);
            self.members.push(Member {
                name: name.to_string(),
                peer_url: format!("https://{}:2380", id.address),
                id: mid.clone(),
            });
            self.uid.get_or_insert_with(|| OLD_UID.to_string());
            mid
        }

        fn answer(&mut self, host: &HostId, argv: &[String]) -> CommandOutput {
            // `k0s::install_service`: the staged binary (argument 4, if any) onto the install
            // path (5), k0sctl's drop-in (6) removed, the `export` lines of its OpenRC file (7)
            // too, then the install (8…).
            // A moved binary's stat line comes first (`k0s::MOVED_STAT_PREFIX`).
            if argv.get(3).map(String::as_str) == Some("k0sform-install") {
                let mut moved = false;
                if let Some(h) = self.hosts.get_mut(host) {
                    if !argv[4].is_empty()
                        && let Some(f) = h.files.remove(&argv[4])
                    {
                        h.files.insert(argv[5].clone(), f);
                        moved = true;
                    }
                    h.files.remove(&argv[6]);
                }
                let mut out = self.answer(host, &argv[8..]);
                if moved {
                    let mut stdout = moved_stat_line().into_bytes();
                    stdout.extend(out.stdout);
                    out.stdout = stdout;
                }
                return out;
            }
            // `k0s::start_at_host_time`: the host's clock, then the start (4…).
            if argv.get(3).map(String::as_str) == Some("k0sform-start") {
                let date = ["date", "-u", "+%s"].map(String::from);
                let mut out = self.answer(host, &date);
                let start = self.answer(host, &argv[4..]);
                out.stdout.extend(start.stdout);
                out.stderr = start.stderr;
                out.status = start.status;
                return out;
            }
            // `k0s::token_file::ensure_decodable`: the placeholder (5) into the file (4) unless
            // it holds a join token.
            if argv.get(3).map(String::as_str) == Some("k0sform-token-file") {
                let h = self.hosts.get_mut(host).unwrap();
                let decodes = h.files.get(&argv[4]).is_some_and(|(data, _)| {
                    k0sform::k0s::parse_token(&String::from_utf8_lossy(data)).is_ok()
                });
                if decodes {
                    return ok("");
                }
                h.files
                    .insert(argv[4].clone(), (argv[5].clone().into_bytes(), 0o600));
                return ok(format!("{}\n", argv[4]));
            }
            // `k0s::swap_in_binary`: mv the staged file onto the install path, if staged.
            if argv.get(3).map(String::as_str) == Some("k0sform-swap") {
                if let Some(h) = self.hosts.get_mut(host)
                    && let Some(f) = h.files.remove(&argv[4])
                {
                    h.files.insert(argv[5].clone(), f);
                    return ok(moved_stat_line());
                }
                return ok("");
            }
            // `k0s::remove_files`: rm -f -- PATH…
            if argv.first().map(String::as_str) == Some("rm")
                && argv.get(2).map(String::as_str) == Some("--")
            {
                if let Some(h) = self.hosts.get_mut(host) {
                    for p in argv.iter().skip_while(|a| *a != "--").skip(1) {
                        h.files.remove(p);
                    }
                }
                return ok("");
            }
            let i = argv.iter().position(|a| a.ends_with("k0s")).unwrap_or(0);
            let w: Vec<&str> = argv[i + 1..].iter().map(String::as_str).collect();
            let words = w.join(" ");
            if self
                .fail
                .iter()
                .any(|(h, p)| h == host && words.starts_with(p.as_str()))
            {
                return err("Error: injected failure");
            }
            let addr = host.address.clone();
            let Some(h) = self.hosts.get(host).cloned() else {
                return err("Error: no such host in the fake");
            };
            match w.as_slice() {
                ["-u", "+%s"] if argv[0] == "date" => {
                    self.clock = self.clock.max(1_800_000_000) + 1;
                    ok(format!("{}\n", self.clock))
                }
                ["version"] => ok(format!(
                    "{}\n",
                    h.version.as_deref().unwrap_or("v1.33.4+k0s.0")
                )),
                ["status", "-o", "json"] => {
                    if h.running {
                        ok(format!(
                            "{{\"Version\":\"{}\",\"Pid\":1234,\"PPid\":0,\"Role\":\"{}\",\"SysInit\":\"\",\"StubFile\":\"\",\"Output\":\"\",\"Workloads\":false,\"SingleNode\":false,\"Args\":[\"/usr/local/bin/k0s\",\"controller\"{}],\"ClusterConfig\":null,\"K0sVars\":{{}}}}\n",
                            h.version.as_deref().unwrap_or("v1.33.4+k0s.0"),
                            h.installed.as_ref().map_or("controller", |i| i.0.as_str()),
                            h.status_args
                                .iter()
                                .map(|a| format!(",{}", serde_json::Value::from(a.as_str())))
                                .collect::<String>()
                        ))
                    } else {
                        err(
                            "Error: status: can't get \"status\" via \"/run/k0s/status.sock\": Get \"http://localhost/status\": dial unix /run/k0s/status.sock: connect: no such file or directory",
                        )
                    }
                }
                ["install", kind, rest @ ..] => {
                    let args: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
                    self.hosts.get_mut(host).unwrap().installed = Some((kind.to_string(), args));
                    ok("")
                }
                ["start"] => {
                    let Some((kind, args)) = h.installed.clone() else {
                        return err("Error: k0s has not been installed as a service");
                    };
                    if h.running {
                        return err("Error: already running");
                    }
                    let version = h.files.get("/usr/local/bin/k0s").and_then(|(d, _)| {
                        String::from_utf8_lossy(d).strip_prefix("k0s ").map(|v| {
                            match v.contains('+') {
                                true => v.to_string(),
                                false => format!("{v}+k0s.0"),
                            }
                        })
                    });
                    let fh = self.hosts.get_mut(host).unwrap();
                    fh.running = true;
                    fh.version = version;
                    let joining = h
                        .files
                        .get("/etc/k0s/k0stoken")
                        .is_some_and(|(d, _)| !d.is_empty())
                        && args.iter().any(|a| a.starts_with("--token-file"));
                    if kind == "controller" {
                        if !joining {
                            self.members.clear();
                            self.uid = Some(BOOT_UID.into());
                        }
                        self.next_id += 1;
                        self.members.push(Member {
                            name: h.hostname.clone(),
                            peer_url: format!("https://{addr}:2380"),
                            id: format!("{:016x}", 0xaaaa000000000000u64 + self.next_id),
                        });
                    }
                    if (kind == "worker" || args.iter().any(|a| a == "--enable-worker=true"))
                        && !self.silent_kubelets.contains(&h.hostname)
                    {
                        self.nodes.insert(h.hostname.clone(), true);
                        self.clock = self.clock.max(1_800_000_000) + 1;
                        self.beats.insert(h.hostname.clone(), self.clock);
                    }
                    ok("")
                }
                ["stop"] => {
                    if !h.running {
                        return err("Error: already stopped");
                    }
                    self.hosts.get_mut(host).unwrap().running = false;
                    ok("")
                }
                ["reset", ..] => {
                    if h.running {
                        return err(
                            "Error: another k0s process is still running, please stop k0s before reset",
                        );
                    }
                    self.hosts.get_mut(host).unwrap().installed = None;
                    ok("")
                }
                ["token", "create", ..] => {
                    let t = make_token();
                    self.tokens.push(t.clone());
                    ok(format!("{t}\n"))
                }
                ["token", "invalidate", ..] => ok("token abcdef deleted successfully\n"),
                ["etcd", "member-list", ..] => {
                    if !h.running {
                        return err(
                            "Error: can't list etcd cluster members: context deadline exceeded",
                        );
                    }
                    let m: BTreeMap<String, String> = self
                        .members
                        .iter()
                        .map(|m| (m.name.clone(), m.peer_url.clone()))
                        .collect();
                    ok(format!("{}\n", serde_json::json!({ "members": m })))
                }
                ["etcd", "leave", _rest @ ..] if self.refuse_leave > 0 => {
                    self.refuse_leave -= 1;
                    err(
                        "time=\"2026-12-02 10:00:00\" level=error msg=\"Failed to delete node from cluster\"\nError: etcdserver: unhealthy cluster",
                    )
                }
                ["etcd", "leave", rest @ ..] => {
                    let pa = rest
                        .iter()
                        .find_map(|a| a.strip_prefix("--peer-address="))
                        .unwrap_or("");
                    match self.members.iter().position(|m| addr_of(&m.peer_url) == pa) {
                        Some(i) => {
                            self.members.remove(i);
                            ok("")
                        }
                        None => err(&format!("Error: peer not found: https://{pa}:2380")),
                    }
                }
                ["kubectl", _dd, rest @ ..] => {
                    if !h.running || h.unhealthy {
                        return err("The connection to the server localhost:6443 was refused");
                    }
                    match rest {
                        ["get", "--raw=/readyz"] => ok("ok"),
                        ["get", "nodes", "-o", "json"] => {
                            let items: Vec<_> = self.nodes.iter().map(|(n, r)| {
                                let beat = self.beats.get(n).map(|t| humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(*t as u64)).to_string());
                                serde_json::json!({
                                    "metadata": {"name": n},
                                    "status": {"conditions": [{"type": "Ready", "status": if *r {"True"} else {"False"}, "lastHeartbeatTime": beat}]}
                                })
                            }).collect();
                            ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
                        }
                        ["get", res, "-o", "json"] if res.starts_with("etcdmember") => {
                            let hidden: Vec<String> = self.learners.iter().filter(|(_, n)| **n > 0).map(|(a, _)| a.clone()).collect();
                            for (a, n) in self.learners.iter_mut() {
                                if *n > 0 && self.members.iter().any(|m| addr_of(&m.peer_url) == *a) {
                                    *n -= 1;
                                }
                            }
                            let voters: Vec<String> = self.members.iter().map(|m| addr_of(&m.peer_url)).filter(|a| !hidden.contains(a)).collect();
                            let stale = self.stale_objects.iter().filter(|(a, (_, n))| self.relabelled_stale && *n > 0 && !voters.contains(a)).map(|(a, (id, _))| serde_json::json!({
                                "apiVersion": "etcd.k0sproject.io/v1beta1", "kind": "EtcdMember",
                                "metadata": {"name": format!("earlier-{a}")},
                                "spec": {},
                                "status": {"peerAddress": a, "memberID": id, "conditions": [{"type": "Joined", "status": "True"}]}
                            }));
                            let items: Vec<_> = stale.chain(self.members.iter().filter(|m| !m.name.is_empty() && !self.deleted_objects.contains(&m.name) && !hidden.contains(&addr_of(&m.peer_url))).map(|m| {
                                let a = addr_of(&m.peer_url);
                                let id = self.object_id_override.get(&a).cloned().unwrap_or(m.id.clone());
                                serde_json::json!({
                                    "apiVersion": "etcd.k0sproject.io/v1beta1", "kind": "EtcdMember",
                                    "metadata": {"name": m.name},
                                    "spec": {"leave": false},
                                    "status": {"peerAddress": a, "memberID": id, "reconcileStatus": "Success",
                                               "conditions": [{"type": "Joined", "status": "True"}]}
                                })
                            })).collect();
                            ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
                        }
                        ["get", "namespace", "kube-system", "-o", "json"] => ok(serde_json::json!({
                            "apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": "kube-system", "uid": self.uid.clone().unwrap_or_default()}
                        }).to_string()),
                        ["delete", object, ..] if object.contains('/') => {
                            let (res, name) = object.split_once('/').unwrap_or_default();
                            if res.starts_with("etcdmember") && self.hide_objects_after_delete {
                                self.deleted_objects.push(name.to_string());
                            }
                            ok("")
                        }
                        [verb @ ("cordon" | "uncordon"), object] => {
                            let Some(node) = object.strip_prefix("node/") else {
                                return err(&format!("Error: the fake wants node/NAME, not {object:?}"));
                            };
                            if !self.nodes.contains_key(node) {
                                return err(&format!("Error from server (NotFound): nodes \"{node}\" not found"));
                            }
                            if *verb == "cordon" {
                                self.cordoned.insert(node.to_string());
                            } else {
                                self.cordoned.remove(node);
                            }
                            ok(format!("node/{node} {verb}ed\n"))
                        }
                        ["taint", "nodes", rest @ ..] => {
                            let (object, taint) = match rest {
                                ["--overwrite", o, t] | [o, t] => (*o, *t),
                                _ => return err("Error: the fake wants taint nodes [--overwrite] node/NAME TAINT"),
                            };
                            let node = object.trim_start_matches("node/").to_string();
                            let list = self.taints.entry(node.clone()).or_default();
                            if let Some(t) = taint.strip_suffix('-') {
                                if !list.iter().any(|x| x == t) {
                                    return err(&format!("error: taint \"{t}\" not found"));
                                }
                                list.retain(|x| x != t);
                                return ok(format!("node/{node} untainted\n"));
                            }
                            if !list.iter().any(|x| x == taint) {
                                list.push(taint.to_string());
                            }
                            ok(format!("node/{node} tainted\n"))
                        }
                        ["drain", args @ ..] => {
                            let last = args.last().copied().unwrap_or("");
                            let Some(node) = last.strip_prefix("node/") else {
                                return err(&format!("Error: the fake wants node/NAME, not {last:?}"));
                            };
                            if self.nodes.contains_key(node) {
                                self.cordoned.insert(node.to_string());
                                self.nodes.insert(node.to_string(), false);
                                ok(format!("node/{node} drained\n"))
                            } else {
                                err(&format!("Error from server (NotFound): nodes \"{node}\" not found"))
                            }
                        }
                        other => err(&format!("Error: the fake does not know kubectl {other:?}")),
                    }
                }
                ["config", "validate", _config] => ok(""),
                // `mv -f STAGED PATH` / `rm -f STAGED` (argv[0] is the command: no k0s in it).
                ["-fT", "--", from, to] if argv[0] == "mv" => {
                    let h = self.hosts.get_mut(host).unwrap();
                    if let Some(f) = h.files.remove(*from) {
                        h.files.insert(to.to_string(), f);
                    }
                    ok("")
                }
                ["-f", path] if argv[0] == "rm" => {
                    self.hosts.get_mut(host).unwrap().files.remove(*path);
                    ok("")
                }
                other => err(&format!("Error: the fake does not know {other:?}")),
            }
        }
    }

    #[derive(Clone, Default)]
    pub struct Fake {
        pub world: Arc<Mutex<World>>,
    }

    impl Fake {
        fn enter(&self, host: &HostId, kind: CallKind) -> Duration {
            let mut w = self.world.lock().unwrap();
            w.calls.push(Call {
                host: host.clone(),
                kind,
            });
            let n = {
                let e = w.in_flight.entry(host.clone()).or_default();
                *e += 1;
                *e
            };
            let m = w.max_in_flight.entry(host.clone()).or_default();
            *m = (*m).max(n);
            w.delay
        }
        fn leave(&self, host: &HostId) {
            *self.world.lock().unwrap().in_flight.get_mut(host).unwrap() -= 1;
        }
        pub fn calls(&self) -> Vec<Call> {
            self.world().calls.clone()
        }
        /// The fake cluster, locked.
        pub fn world(&self) -> MutexGuard<'_, World> {
            self.world.lock().unwrap()
        }
    }

    impl Transport for Fake {
        async fn run(
            &self,
            host: &HostId,
            cmd: RemoteCommand,
        ) -> Result<CommandOutput, TransportError> {
            let delay = self.enter(
                host,
                CallKind::Run {
                    argv: cmd.argv.clone(),
                    env: cmd.env.clone(),
                    stdin: cmd.stdin.clone(),
                },
            );
            tokio::time::sleep(delay).await;
            let out = self.world.lock().unwrap().answer(host, &cmd.argv);
            self.leave(host);
            Ok(out)
        }

        async fn run_lines(
            &self,
            host: &HostId,
            cmd: RemoteCommand,
            lines: tokio::sync::mpsc::Sender<String>,
        ) -> Result<Option<i32>, TransportError> {
            let Some((after, node)) = self.world.lock().unwrap().watch.clone() else {
                return Err(TransportError::Other {
                    host: host.clone(),
                    message: "the fake does not stream".into(),
                });
            };
            self.world.lock().unwrap().calls.push(Call {
                host: host.clone(),
                kind: CallKind::Run {
                    argv: cmd.argv.clone(),
                    env: cmd.env.clone(),
                    stdin: None,
                },
            });
            struct Stopped<'a>(&'a Mutex<World>);
            impl Drop for Stopped<'_> {
                fn drop(&mut self) {
                    self.0.lock().unwrap().watches.1 += 1;
                }
            }
            self.world.lock().unwrap().watches.0 += 1;
            let _stopped = Stopped(&self.world);
            let register = |w: &Mutex<World>, node: &str| {
                let mut w = w.lock().unwrap();
                w.silent_kubelets.remove(node);
                w.nodes.insert(node.to_string(), true);
                w.clock += 1;
                let now = w.clock;
                w.beats.insert(node.to_string(), now);
            };
            let ends = self.world.lock().unwrap().watch_ends;
            if let Some(ends) = ends {
                let world = self.world.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    register(&world, &node);
                });
                tokio::time::sleep(ends).await;
                return Ok(Some(0));
            }
            tokio::time::sleep(after).await;
            register(&self.world, &node);
            let _ = lines.send(format!("node/{node}")).await;
            std::future::pending().await
        }

        async fn write_file(
            &self,
            host: &HostId,
            path: &str,
            data: Vec<u8>,
            attrs: &FileAttrs,
        ) -> Result<(), TransportError> {
            let mode = attrs.mode;
            let delay = self.enter(
                host,
                CallKind::Write {
                    path: path.to_string(),
                    data: data.clone(),
                    mode,
                },
            );
            {
                let mut w = self.world.lock().unwrap();
                w.writes_in_flight += 1;
                w.max_writes_in_flight = w.max_writes_in_flight.max(w.writes_in_flight);
            }
            tokio::time::sleep(delay).await;
            {
                let mut w = self.world.lock().unwrap();
                w.writes_in_flight -= 1;
                if let Some(h) = w.hosts.get_mut(host) {
                    h.files.insert(path.to_string(), (data, mode));
                }
            }
            self.leave(host);
            Ok(())
        }
    }

    impl HostProber for Fake {
        fn probe<'a>(
            &'a self,
            host: &'a HostId,
            known_binary: Option<&'a BinaryRecord>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Probe> + Send + 'a>> {
            let probed = match self.facts(host, known_binary) {
                Ok(facts) => Probe::Reached(Box::new(facts)),
                Err(other) => other,
            };
            Box::pin(async move { probed })
        }
    }

    impl Fake {
        /// What a probe of `host` shows: its facts, or the probe result that ends there.
        fn facts(
            &self,
            host: &HostId,
            known_binary: Option<&BinaryRecord>,
        ) -> Result<HostFacts, Probe> {
            let mut w = self.world.lock().unwrap();
            w.probed.push(host.clone());
            w.probed_known.push((host.clone(), known_binary.cloned()));
            let w = &mut *w;
            if w.key_changed.contains(host) {
                return Err(Probe::HostKeyChanged {
                    expected: format!("SHA256:key-{}", host.address),
                    offered: "SHA256:other".into(),
                    bastion: None,
                });
            }
            let h = w.hosts.get(host).ok_or_else(|| Probe::Unreachable {
                error: "unreachable".into(),
            })?;
            let run = |addr: &str| w.invocations.then(|| format!("run-{addr}"));
            let controller = h.running && h.installed.as_ref().is_some_and(|i| i.0 == "controller");
            let view = controller.then(|| ClusterView {
                cluster_uid: w.uid.clone(),
                members: w
                    .members
                    .iter()
                    .map(|m| {
                        let addr = addr_of(&m.peer_url);
                        let (id, invocation) = match w.stale_objects.get(&addr) {
                            Some((old, n)) if *n > 0 && w.relabelled_stale => {
                                (old.clone(), run(&addr))
                            }
                            Some((old, n)) if *n > 0 => (old.clone(), run("earlier")),
                            _ => (m.id.clone(), run(&addr)),
                        };
                        MemberView {
                            name: m.name.clone(),
                            peer_url: m.peer_url.clone(),
                            member_id: Some(id),
                            invocation,
                        }
                    })
                    .collect(),
                nodes: vec![],
                control_nodes: vec![],
                errors: vec![],
            });
            let status = (controller && w.invocations).then(|| K0sStatus {
                invocation_id: run(&host.address),
                ..K0sStatus::running("v1.33.4+k0s.0".parse().unwrap(), 0, "controller")
            });
            let facts = HostFacts {
                machine_id: h.machine_id.clone(),
                hostname: h.hostname.clone(),
                host_key: format!("SHA256:key-{}", host.address),
                k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
                status,
                view,
                ..Default::default()
            };
            if controller {
                for (_, n) in w.stale_objects.values_mut() {
                    *n = n.saturating_sub(1);
                }
            }
            Ok(facts)
        }
    }
}

use fake::{CallKind, Fake};
use k0sform::apply::{Remote, execute};
use k0sform::k0s::{TokenRole, desired};
use k0sform::spec::{HostSpec, K0sSpec, Options, Role, Spec, SshTarget};
use k0sform::state::{EtcdMemberState, HostState};
use k0sform::ui::{EventSink, HumanSink, JsonSink};

fn spec_of(hosts: &[(u8, Role, &str)]) -> Spec {
    Spec {
        name: "test".into(),
        user: "admin".into(),
        hosts: hosts
            .iter()
            .enumerate()
            .map(|(i, (n, role, name))| spec_host(*role, &host(*n), name, i + 1))
            .collect(),
        k0s: K0sSpec {
            version: Some("v1.33.4+k0s.0".parse().unwrap()),
            version_channel: None,
            dynamic_config: false,
            config: None,
            controllers_run: false,
        },
        options: Options::default(),
        manifests: vec![],
        env_values: vec![],
    }
}

/// Host `h` of the spec, with hostname `name`, written at `index` in k0sctl.yaml.
fn spec_host(role: Role, h: &HostId, name: &str, index: usize) -> HostSpec {
    let mut spec = HostSpec::new(role, SshTarget::new(h.address.clone(), 22), index);
    spec.hostname = Some(name.to_string());
    spec
}

fn step_on(id: usize, on: HostId, kind: StepKind, after: &[usize]) -> Step {
    Step {
        id,
        host: on,
        kind,
        after: after.to_vec(),
    }
}

/// A plan of the one step `kind` on `on`.
fn one_step(on: &HostId, kind: StepKind) -> Plan {
    plan_of(vec![step_on(0, on.clone(), kind, &[])])
}

/// Remove member `member_id`, recorded for `on`'s peer URL, through `via`.
fn remove_member(member_id: &str, on: &HostId, via: &HostId) -> StepKind {
    StepKind::RemoveMember {
        member_id: member_id.to_string(),
        peer_url: format!("https://{}:2380", on.address),
        via: via.clone(),
    }
}

fn recorded(h: &HostId, name: &str, member_id: Option<&str>) -> HostState {
    HostState {
        address: h.address.clone(),
        port: h.port,
        role: Role::Controller,
        node_name: Some(name.into()),
        machine_id: format!("mid-{name}"),
        host_key: format!("SHA256:key-{}", h.address),
        host_public_key: None,
        etcd: member_id.map(|id| EtcdMemberState {
            member_id: id.into(),
            peer_url: format!("https://{}:2380", h.address),
        }),
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        install_flags_sha256: None,
        config_sha256: None,
        k0s_binary: None,
        access: None,
    }
}

struct Applied {
    result: Result<k0sform::apply::ApplyReport, ApplyError>,
    state: State,
    checkpoints: Vec<State>,
    events: Vec<ApplyEvent>,
    json: String,
    human: String,
}

impl Applied {
    /// Why the apply was refused as unsafe; panics when it was not refused.
    fn refusal(&self) -> &str {
        match &self.result {
            Err(ApplyError::Unsafe { reason, .. }) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    /// The report of an apply that failed; panics when it did not fail.
    fn failure(&self) -> &k0sform::apply::ApplyReport {
        match &self.result {
            Err(ApplyError::Failed { report }) => report,
            other => panic!("expected a failure, got {other:?}"),
        }
    }
    /// The exit code of an apply that did not succeed.
    fn exit_code(&self) -> u8 {
        self.result
            .as_ref()
            .expect_err("the apply failed")
            .exit()
            .code()
    }
    /// Pending intents in each checkpoint, in order.
    fn intent_counts(&self) -> Vec<usize> {
        self.checkpoints.iter().map(|s| s.intents.len()).collect()
    }
}

fn apply_with(fake: &Fake, plan: &Plan, spec: &Spec, state: State, o: ExecOptions) -> Applied {
    let mut state = state;
    let mut checkpoints = Vec::new();
    let mut cp = |s: &State| -> Result<(), String> {
        checkpoints.push(s.clone());
        Ok(())
    };
    let mut vec_sink = VecSink::default();
    let mut json = JsonSink::new(Vec::new());
    let mut human = HumanSink::new(Vec::new(), false, false);
    let remote = Remote {
        transport: Arc::new(fake.clone()),
        prober: Arc::new(fake.clone()),
    };
    let result = {
        let mut tee = k0sform::ui::Tee::new(vec![
            &mut vec_sink as &mut dyn EventSink,
            &mut json,
            &mut human,
        ]);
        rt().block_on(execute(
            plan,
            spec,
            &mut state,
            remote,
            &o,
            &mut tee,
            &mut cp,
            &Cancel::new(),
        ))
    };
    Applied {
        result,
        state,
        checkpoints,
        events: vec_sink.events,
        json: String::from_utf8(json.into_inner()).unwrap(),
        human: String::from_utf8(human.into_inner()).unwrap(),
    }
}

/// c1, c2, c3 controllers running one cluster; the state knows all three with their IDs.
fn three_controllers() -> (Fake, Spec, State, Vec<String>) {
    let fake = Fake::default();
    let mut ids = vec![];
    {
        let mut w = fake.world();
        for (n, name) in [(1, "c1"), (2, "c2"), (3, "c3")] {
            ids.push(w.add_member(&host(n), name));
        }
    }
    let spec = spec_of(&[
        (1, Role::Controller, "c1"),
        (2, Role::Controller, "c2"),
        (3, Role::Controller, "c3"),
    ]);
    let mut state = State::new();
    for (i, (n, name)) in [(1, "c1"), (2, "c2"), (3, "c3")].into_iter().enumerate() {
        state.upsert_host(recorded(&host(n), name, Some(&ids[i])));
    }
    (fake, spec, state, ids)
}

fn runs_on(fake: &Fake, h: &HostId, prefix: &str) -> usize {
    runs_of(fake, h, prefix).len()
}

/// The k0s words of each call on `h` that starts with `prefix`, in order.
fn runs_of(fake: &Fake, h: &HostId, prefix: &str) -> Vec<String> {
    fake.calls()
        .iter()
        .filter(|c| c.is(h, prefix))
        .map(|c| c.words())
        .collect()
}

/// The k0s words of every call on `h` (`write PATH` for a file), in order.
fn words_on(fake: &Fake, h: &HostId) -> Vec<String> {
    fake.calls()
        .iter()
        .filter(|c| &c.host == h)
        .map(|c| c.words())
        .collect()
}

/// A token file left after a join: never empty (k0s v1.35.1 workers exit on an empty one), 0600,
/// a token of the host's role that grants nothing.
#[track_caller]
fn assert_placeholder(file: &(Vec<u8>, u32), role: TokenRole) {
    assert_eq!(file.1, 0o600);
    let text = String::from_utf8(file.0.clone()).expect("token text");
    assert_eq!(text, k0sform::k0s::placeholder_token(role));
    let info = k0sform::k0s::parse_token(&text).expect("a token");
    assert_eq!((info.kind, info.id.as_str()), (role, "k0sfrm"));
}

/// Where the first of `words` starting with `prefix` is; panics when none does.
fn first(words: &[String], prefix: &str) -> usize {
    words
        .iter()
        .position(|w| w.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in {words:?}"))
}

/// The etcd members of the fake cluster, by name.
fn member_names(fake: &Fake) -> Vec<String> {
    fake.world()
        .members
        .iter()
        .map(|m| m.name.clone())
        .collect()
}

#[test]
fn bootstrap_join_controller_and_worker() {
    let fake = Fake::default();
    {
        let mut w = fake.world();
        w.add_host(&host(1), "c1");
        w.add_host(&host(2), "c2");
        w.add_host(&host(3), "w1");
    }
    let spec = spec_of(&[
        (1, Role::Controller, "c1"),
        (2, Role::Controller, "c2"),
        (3, Role::Worker, "w1"),
    ]);
    let mut binary = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut binary, b"#!/bin/sh\necho fake k0s\n").unwrap();
    let bin_sha = k0sform::hash::sha256_hex(b"#!/bin/sh\necho fake k0s\n");
    let mut spec = spec;
    spec.hosts[2].k0s_binary_path = Some(binary.path().to_path_buf());
    let cfg_sha = |i: usize| k0sform::hash::sha256_hex(desired::config_yaml(&spec, &spec.hosts[i]));
    let (c1, c2, w1) = (host(1), host(2), host(3));
    let plan = plan_of(vec![
        step_on(
            0,
            c1.clone(),
            StepKind::WriteConfig { sha256: cfg_sha(0) },
            &[],
        ),
        step_on(1, c1.clone(), StepKind::Bootstrap, &[0]),
        step_on(2, c1.clone(), StepKind::RecordHost, &[1]),
        step_on(
            3,
            c2.clone(),
            StepKind::WriteConfig { sha256: cfg_sha(1) },
            &[],
        ),
        step_on(
            4,
            c2.clone(),
            StepKind::JoinController { via: c1.clone() },
            &[1, 3],
        ),
        step_on(5, c2.clone(), StepKind::RecordHost, &[4]),
        step_on(
            6,
            w1.clone(),
            StepKind::UploadBinary {
                sha256: bin_sha.clone(),
                version: None,
            },
            &[],
        ),
        step_on(
            7,
            w1.clone(),
            StepKind::JoinWorker { via: c1.clone() },
            &[1, 6],
        ),
        step_on(8, w1.clone(), StepKind::RecordHost, &[7]),
        step_on(
            9,
            c1.clone(),
            StepKind::WaitHealthy { via: c1.clone() },
            &[5],
        ),
    ]);
    // Progress names hosts as the command passes them (the spec's or the probe's hostnames).
    let mut o = opts(4);
    o.names = [(&c1, "c1"), (&c2, "c2"), (&w1, "w1")]
        .into_iter()
        .map(|(h, n)| (h.clone(), n.to_string()))
        .collect();
    let r = apply_with(&fake, &plan, &spec, State::new(), o);
    let report = r.result.as_ref().expect("apply succeeds");
    assert_eq!(report.succeeded(), (0..10).collect::<Vec<_>>());

    // The state: cluster identity from the bootstrap, each host's identity and member ID.
    let cluster = r.state.cluster.as_ref().expect("cluster recorded");
    assert_eq!(cluster.uid, fake::BOOT_UID);
    let world = fake.world().members.clone();
    assert_eq!(world.len(), 2);
    for (h, name) in [(&c1, "c1"), (&c2, "c2")] {
        let hs = r.state.host(h).expect("recorded");
        let m = world.iter().find(|m| m.name == name).unwrap();
        assert_eq!(
            hs.etcd.as_ref().map(|e| e.member_id.as_str()),
            Some(m.id.as_str())
        );
        assert_eq!(hs.machine_id, format!("mid-{name}"));
        assert_eq!(hs.host_key, format!("SHA256:key-{}", h.address));
    }
    assert_eq!(r.state.host(&w1).unwrap().etcd, None);
    assert!(r.state.intents.is_empty());

    // The worker's binary, moved into place by its install, is re-probed with its stat line
    // after the move and the sha256 its upload checked: not hashed again. The controllers got
    // no binary from this run: their probes go as the state says.
    let known = fake.world().probed_known.clone();
    let placed = k0sform::state::BinaryRecord {
        stat: fake::MOVED_STAT.into(),
        sha256: bin_sha.clone(),
    };
    assert_eq!(
        known.iter().filter(|(h, _)| h == &w1).collect::<Vec<_>>(),
        vec![&(w1.clone(), Some(placed))]
    );
    assert!(
        known.iter().all(|(h, k)| h == &w1 || k.is_none()),
        "{known:?}"
    );

    // Intents were written before the three non-idempotent steps and cleared after them.
    let mut seen: Vec<String> = r
        .checkpoints
        .iter()
        .flat_map(|s| s.intents.iter().map(|i| i.kind.clone()))
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, vec!["bootstrap", "join_controller", "join_worker"]);

    // The bootstrap controller gets no token file; the joiners do, written before install.
    let calls = fake.calls();
    let boot_install = calls
        .iter()
        .find(|c| c.is(&c1, "install controller"))
        .unwrap();
    assert!(
        !boot_install.words().contains("--token-file"),
        "{}",
        boot_install.words()
    );
    let pos_of = |h: &HostId, p: &str| calls.iter().position(|c| c.is(h, p)).unwrap();
    assert!(pos_of(&c1, "token create --role=controller") < pos_of(&c2, "write /etc/k0s/k0stoken"));
    assert!(pos_of(&c2, "write /etc/k0s/k0stoken") < pos_of(&c2, "install controller"));
    // Both joins run at once: each invalidation comes after a start, the last after both.
    let invalidations: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is(&c1, "token invalidate"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(invalidations.len(), 2);
    let starts = [pos_of(&c2, "start"), pos_of(&w1, "start")];
    assert!(invalidations[0] > starts[0].min(starts[1]));
    assert!(invalidations[1] > starts[0].max(starts[1]));
    assert!(
        calls
            .iter()
            .find(|c| c.is(&c2, "install controller"))
            .unwrap()
            .words()
            .contains("--token-file=/etc/k0s/k0stoken")
    );
    assert!(pos_of(&c1, "token create --role=worker") < pos_of(&w1, "install worker"));

    // The binary went to k0sInstallPath, the config to /etc/k0s/k0s.yaml, both with their modes.
    let w = fake.world();
    assert_eq!(
        w.hosts[&w1]
            .files
            .get("/usr/local/bin/k0s")
            .map(|(d, m)| (d.len(), *m)),
        Some((24, 0o755))
    );
    assert_eq!(w.hosts[&c2].files["/etc/k0s/k0s.yaml"].1, 0o600);
    // Token files hold a placeholder after the join (never left empty).
    assert_placeholder(
        &w.hosts[&c2].files["/etc/k0s/k0stoken"],
        TokenRole::Controller,
    );
    assert_placeholder(&w.hosts[&w1].files["/etc/k0s/k0stoken"], TokenRole::Worker);
    let tokens = w.tokens.clone();
    drop(w);
    assert_eq!(tokens.len(), 2);

    // The summary line and one start/finish line per step.
    assert!(
        r.human
            .contains("Apply complete: 0 added, 0 replaced, 0 changed, 0 removed."),
        "{}",
        r.human
    );
    // Hosts by name (c2 here is the spec's hostname), steps in words.
    assert!(
        r.human
            .contains("c2: Joining the cluster as controller (token from c1)...\n"),
        "{}",
        r.human
    );
    assert!(r.human.contains("c2: Joined after "), "{}", r.human);
    assert!(!r.human.contains("join_controller"), "{}", r.human);
    assert_eq!(r.json.lines().count(), r.events.len());

    assert_token_never_leaks(&fake, &tokens, &r);
}

/// The token goes to the joining host's token file (0600) and nowhere else: not in any command
/// line, environment or stdin, event, rendered line or checkpoint.
fn assert_token_never_leaks(fake: &Fake, tokens: &[String], r: &Applied) {
    assert_token_never_leaks_shared(fake, tokens, r, tokens.len());
}

/// As `assert_token_never_leaks`, for `writes` token files written from `tokens` (a worker token
/// goes to every worker joining with it).
fn assert_token_never_leaks_shared(fake: &Fake, tokens: &[String], r: &Applied, writes: usize) {
    let secret = fake::BEARER.split_once('.').unwrap().1;
    let mut needles: Vec<&str> = tokens.iter().map(String::as_str).collect();
    needles.push(fake::BEARER);
    needles.push(secret);
    let mut haystacks: Vec<(String, String)> = vec![
        ("json events".into(), r.json.clone()),
        ("human output".into(), r.human.clone()),
        ("events".into(), format!("{:?}", r.events)),
        ("result".into(), format!("{:?}", r.result)),
    ];
    for (i, s) in r.checkpoints.iter().enumerate() {
        haystacks.push((format!("checkpoint {i}"), serde_json::to_string(s).unwrap()));
    }
    let mut token_writes = 0;
    for c in fake.calls() {
        match &c.kind {
            CallKind::Run { argv, env, stdin } => haystacks.push((
                format!("command {argv:?}"),
                format!(
                    "{argv:?} {env:?} {}",
                    String::from_utf8_lossy(stdin.as_deref().unwrap_or_default())
                ),
            )),
            CallKind::Write { path, data, mode } => {
                let text = String::from_utf8_lossy(data).to_string();
                if tokens.iter().any(|t| text.contains(t.as_str())) {
                    assert_eq!(path, "/etc/k0s/k0stoken");
                    assert_eq!(*mode, 0o600);
                    token_writes += 1;
                } else {
                    haystacks.push((format!("write {path}"), text));
                }
            }
        }
    }
    assert_eq!(token_writes, writes, "each token file written exactly once");
    for (what, text) in &haystacks {
        for n in &needles {
            assert!(!text.contains(n), "the join token leaked into {what}");
        }
    }
}

#[test]
fn remove_member_refused_when_peer_url_carries_another_member_id() {
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    // c3 was rebuilt and re-added out of band: its peer URL now carries a new member.
    fake.world()
        .object_id_override
        .insert(c3.address.clone(), "1111222233334444".into());
    let plan = one_step(&c3, remove_member(&ids[2], &c3, &c1));
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let reason = r.refusal();
    assert_eq!(r.exit_code(), 3);
    assert!(
        reason.contains("1111222233334444") && reason.contains(&ids[2]),
        "{reason}"
    );
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0, "no remote change");
    assert_eq!(fake.world().members.len(), 3);
    assert!(
        r.checkpoints.iter().all(|s| s.intents.is_empty()),
        "refused before any intent"
    );
    assert!(r.human.contains("Apply refused as unsafe"), "{}", r.human);
}

/// Issue 28: a step removing a spec controller's member for another host (a state entry that
/// records c2's member ID and peer URL) is refused by the executor too, before any change.
#[test]
fn remove_member_refused_for_another_spec_controllers_peer_address() {
    let (fake, spec, mut state, ids) = three_controllers();
    let (c1, x9) = (host(1), host(9));
    let mut entry = recorded(&x9, "x9", Some(&ids[1]));
    entry.etcd.as_mut().expect("member").peer_url = format!("https://{}:2380", host(2).address);
    state.upsert_host(entry);
    let plan = one_step(
        &x9,
        StepKind::RemoveMember {
            member_id: ids[1].clone(),
            peer_url: format!("https://{}:2380", host(2).address),
            via: c1.clone(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let reason = r.refusal();
    assert_eq!(r.exit_code(), 3);
    assert!(
        reason.contains(&format!(
            "is the peer address of {}, a controller of the spec: refusing to remove its member for {x9}",
            host(2)
        )),
        "{reason}"
    );
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0, "no remote change");
    assert_eq!(fake.world().members.len(), 3);
}

/// A controller restored from a backup (or rebuilt) shows its earlier EtcdMember object, with
/// the earlier member ID, until the k0s running now rewrites it: `RecordHost` takes the member
/// ID only from an object that the running k0s wrote (its label = `k0s status`'s InvocationID),
/// and probes again until there is one.
#[test]
fn record_host_takes_the_member_id_only_from_the_running_k0s_object() {
    let (fake, spec, state, ids) = three_controllers();
    let c2 = host(2);
    {
        let mut w = fake.world();
        w.invocations = true;
        w.stale_objects
            .insert(c2.address.clone(), ("5555666677778888".into(), 2));
    }
    assert_eq!(record_member_id(&fake, &spec, state, &c2), ids[1]);
    let probes = fake.world().probed.iter().filter(|h| **h == c2).count();
    assert_eq!(probes, 3, "two probes showed the earlier object");
}

/// Without the labels (k0s before InvocationID, or an object written before it) the object
/// is taken as it is: there is nothing to tell an earlier one by.
#[test]
fn record_host_takes_an_unlabelled_member_object_as_it_is() {
    let (fake, spec, state, _) = three_controllers();
    let c2 = host(2);
    fake.world()
        .stale_objects
        .insert(c2.address.clone(), ("5555666677778888".into(), 2));
    assert_eq!(
        record_member_id(&fake, &spec, state, &c2),
        "5555666677778888"
    );
}

/// A host whose SSH host key changed since the plan's probe is refused as unsafe (exit 3), not
/// failed (exit 1): nothing runs on it, and the error says whose key.
#[test]
fn host_key_change_during_apply_is_refused() {
    let (fake, spec, state, _) = three_controllers();
    let c2 = host(2);
    fake.world().key_changed.insert(c2.clone());
    let r = apply_with(
        &fake,
        &one_step(&c2, StepKind::RecordHost),
        &spec,
        state,
        opts(2),
    );
    assert_eq!(r.exit_code(), 3, "{:?}", r.result);
    let e = r.result.as_ref().unwrap_err().to_string();
    assert!(
        e.contains(&format!("{c2}: host key changed: recorded SHA256:key-")),
        "{e}"
    );
}

/// Run `RecordHost` on `h` alone and return the member ID it recorded.
fn record_member_id(fake: &Fake, spec: &Spec, state: State, h: &HostId) -> String {
    let r = apply_with(
        fake,
        &one_step(h, StepKind::RecordHost),
        spec,
        state,
        opts(2),
    );
    r.result.as_ref().expect("recorded");
    let rec = r.state.host(h).expect("recorded").etcd.clone();
    rec.expect("member recorded").member_id
}

#[test]
fn remove_dead_member_by_recorded_id() {
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    {
        // c3 died: its member is still registered, its API does not answer.
        let mut w = fake.world();
        let h = w.hosts.get_mut(&c3).unwrap();
        h.running = false;
    }
    let plan = one_step(&c3, remove_member(&ids[2], &c3, &c1));
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("removed");
    let leave = runs_of(&fake, &c1, "etcd leave");
    assert_eq!(leave.len(), 1);
    assert!(
        leave[0].contains("--peer-address=127.0.0.3"),
        "{}",
        leave[0]
    );
    assert_eq!(member_names(&fake), vec!["c1", "c2"]);
    assert_eq!(r.state.host(&c3).unwrap().etcd, None, "member info cleared");
    assert_eq!(r.intent_counts(), vec![1, 0]);
    assert_eq!(
        r.checkpoints[0].intents[0].member_id.as_deref(),
        Some(ids[2].as_str())
    );
}

#[test]
fn remove_member_retries_while_etcd_says_unhealthy_cluster() {
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    {
        let mut w = fake.world();
        w.hosts.get_mut(&c3).unwrap().running = false;
        w.refuse_leave = 2;
    }
    let plan = one_step(&c3, remove_member(&ids[2], &c3, &c1));
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.expect("removed after etcd stopped refusing");
    assert_eq!(
        runs_on(&fake, &c1, "etcd leave"),
        3,
        "two refusals, then the removal"
    );
    assert_eq!(member_names(&fake), vec!["c1", "c2"]);
}

#[test]
fn remove_member_gives_up_when_etcd_keeps_refusing() {
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    {
        let mut w = fake.world();
        w.hosts.get_mut(&c3).unwrap().running = false;
        w.refuse_leave = usize::MAX;
    }
    let plan = one_step(&c3, remove_member(&ids[2], &c3, &c1));
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let err = r
        .result
        .expect_err("etcd never accepted the removal")
        .to_string();
    assert!(err.contains("failed"), "{err}");
    assert_eq!(fake.world().members.len(), 3, "nothing removed");
}

#[test]
fn reset_refused_when_machine_id_differs() {
    let (fake, spec, state, _) = three_controllers();
    let c3 = host(3);
    fake.world().hosts.get_mut(&c3).unwrap().machine_id = "mid-rebuilt".into();
    let plan = one_step(
        &c3,
        StepKind::ResetHost {
            machine_id: "mid-c3".into(),
            uninstall: false,
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let reason = r.refusal();
    assert_eq!(r.exit_code(), 3);
    assert!(reason.contains("mid-rebuilt"), "{reason}");
    assert!(
        fake.calls().iter().all(|c| c.host != c3),
        "no command ran on the host"
    );
    assert!(fake.world().hosts[&c3].running);
}

/// Issue 28: a host known only to the state whose recorded data dir is `/` is never reset
/// with it (the planner refuses such a plan; the executor checks again).
#[test]
fn reset_refused_for_implausible_recorded_paths() {
    let (fake, mut spec, mut state, _) = three_controllers();
    let c3 = host(3);
    spec.hosts.retain(|h| h.id() != c3);
    let rec = state.host_mut(&c3).expect("c3 recorded");
    rec.access = Some(k0sform::state::HostAccess {
        ssh: SshTarget::new(c3.address.clone(), 22),
        k0s_install_path: "/usr/local/bin/k0s".into(),
        data_dir: "/".into(),
        kubelet_root_dir: None,
        cluster_address: None,
    });
    let plan = one_step(
        &c3,
        StepKind::ResetHost {
            machine_id: "mid-c3".into(),
            uninstall: false,
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let reason = r.refusal();
    assert_eq!(r.exit_code(), 3);
    assert!(
        reason.contains("access.dataDir: `/` is the root directory"),
        "{reason}"
    );
    assert!(
        fake.calls().iter().all(|c| c.host != c3),
        "no command ran on the host"
    );
    assert!(fake.world().hosts[&c3].running);
}

#[test]
fn reset_stops_then_resets_the_recorded_machine() {
    let (fake, spec, state, _) = three_controllers();
    let c3 = host(3);
    let plan = one_step(
        &c3,
        StepKind::ResetHost {
            machine_id: "mid-c3".into(),
            uninstall: false,
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.expect("reset");
    let words = words_on(&fake, &c3);
    let stop = words.iter().position(|w| w == "stop").expect("stopped");
    let reset = first(&words, "reset --data-dir=/var/lib/k0s");
    assert!(stop < reset, "{words:?}");
    let w = fake.world();
    assert!(!w.hosts[&c3].running && w.hosts[&c3].installed.is_none());
}

/// Destroy's reset (`uninstall`) also takes the binary, k0s.yaml and the token file off the
/// host, as k0sctl's reset does, and only after `k0s reset`; a plain reset keeps them.
#[test]
fn destroy_reset_removes_binary_and_config_after_the_reset() {
    for uninstall in [true, false] {
        let (fake, spec, state, _) = three_controllers();
        let c3 = host(3);
        for f in ["/usr/local/bin/k0s", "/etc/k0s/k0s.yaml"] {
            fake.world()
                .hosts
                .get_mut(&c3)
                .unwrap()
                .files
                .insert(f.into(), (b"x".to_vec(), 0o600));
        }
        let plan = one_step(
            &c3,
            StepKind::ResetHost {
                machine_id: "mid-c3".into(),
                uninstall,
            },
        );
        let r = apply_with(&fake, &plan, &spec, state, opts(2));
        r.result.expect("reset");
        let runs: Vec<Vec<String>> = fake
            .calls()
            .iter()
            .filter(|c| c.host == c3)
            .filter_map(|c| match &c.kind {
                CallKind::Run { argv, .. } => Some(argv.clone()),
                _ => None,
            })
            .collect();
        let reset = runs
            .iter()
            .position(|a| a.iter().any(|w| w == "reset"))
            .expect("k0s reset ran");
        let rm = runs
            .iter()
            .position(|a| a.first().is_some_and(|w| w == "rm"));
        let files = &fake.world().hosts[&c3].files;
        if uninstall {
            let rm = rm.expect("rm ran");
            assert!(reset < rm, "{runs:?}");
            assert_eq!(
                runs[rm],
                [
                    "rm",
                    "-f",
                    "--",
                    "/usr/local/bin/k0s",
                    "/etc/k0s/k0s.yaml",
                    "/etc/k0s/k0stoken"
                ]
            );
            assert!(files.is_empty(), "{:?}", files.keys());
        } else {
            assert!(rm.is_none(), "{runs:?}");
            assert_eq!(files.len(), 2);
        }
    }
}

/// `RemoveUnknownMember` (destroy): a member no host owns, added by hand and never started
/// (no name, no EtcdMember object), is removed through `via` by its peer address; no host's
/// state record changes, and its intent carries the peer URL.
#[test]
fn unknown_member_is_removed_by_its_peer_address_and_changes_no_state() {
    let (fake, spec, state, ids) = three_controllers();
    let c1 = host(1);
    fake.world().members.push(fake::Member {
        name: String::new(),
        peer_url: "https://127.0.0.9:2380".into(),
        id: "0badc0de0badc0de".into(),
    });
    let before = state.clone();
    let plan = one_step(
        &c1,
        StepKind::RemoveUnknownMember {
            name: String::new(),
            member_id: None,
            peer_url: "https://127.0.0.9:2380".into(),
            via: c1.clone(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("removed");
    let leave = runs_of(&fake, &c1, "etcd leave");
    assert_eq!(leave.len(), 1, "{leave:?}");
    assert!(
        leave[0].contains("--peer-address=127.0.0.9"),
        "{}",
        leave[0]
    );
    assert_eq!(member_names(&fake), vec!["c1", "c2", "c3"]);
    assert_eq!(r.state.hosts, before.hosts, "a host's record changed");
    assert_eq!(
        r.state
            .host(&c1)
            .unwrap()
            .etcd
            .as_ref()
            .map(|e| &e.member_id),
        Some(&ids[0])
    );
    assert_eq!(r.intent_counts(), vec![1, 0]);
    assert_eq!(
        r.checkpoints[0].intents[0].peer_url.as_deref(),
        Some("https://127.0.0.9:2380")
    );
}

/// The unknown member's ID is checked against the EtcdMember object at its address: one the
/// plan did not see, or another than it saw, refuses before anything changes; an address a
/// host of the spec or the state has is never removed as unknown.
#[test]
fn unknown_member_removal_refused_when_its_address_changed_hands() {
    for (planned, why) in [
        (None, "which the plan did not see"),
        (
            Some("1111222233334444"),
            "not 1111222233334444 as the plan saw",
        ),
    ] {
        let (fake, spec, state, _) = three_controllers();
        let c1 = host(1);
        fake.world().members.push(fake::Member {
            name: "x9".into(),
            peer_url: "https://127.0.0.9:2380".into(),
            id: "0badc0de0badc0de".into(),
        });
        let plan = one_step(
            &c1,
            StepKind::RemoveUnknownMember {
                name: "x9".into(),
                member_id: planned.map(String::from),
                peer_url: "https://127.0.0.9:2380".into(),
                via: c1.clone(),
            },
        );
        let r = apply_with(&fake, &plan, &spec, state, opts(2));
        let reason = r.refusal();
        assert!(
            reason.contains(why) && reason.contains("0badc0de0badc0de"),
            "{reason}"
        );
        assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0, "no remote change");
        assert_eq!(fake.world().members.len(), 4);
    }
    // c3's own peer address is never an unknown member's.
    let (fake, spec, state, _) = three_controllers();
    let c1 = host(1);
    let plan = one_step(
        &c1,
        StepKind::RemoveUnknownMember {
            name: "c3".into(),
            member_id: None,
            peer_url: "https://127.0.0.3:2380".into(),
            via: c1.clone(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    assert!(r.refusal().contains("peer address now"), "{}", r.refusal());
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0, "no remote change");
}

#[test]
fn join_refused_while_the_stale_member_is_still_registered() {
    let (fake, mut spec, state, _) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    {
        // c3 was wiped: same address, fresh disk; its old member is still in etcd.
        let mut w = fake.world();
        w.add_host(&c3, "c3");
        w.hosts.get_mut(&c3).unwrap().machine_id = "mid-new".into();
    }
    spec.hosts[2].hostname = Some("c3".into());
    let plan = one_step(&c3, StepKind::JoinController { via: c1.clone() });
    let mut o = opts(2);
    o.health_grace = Duration::from_millis(5);
    let r = apply_with(&fake, &plan, &spec, state, o);
    let reason = r.refusal();
    assert!(reason.contains("must be removed before"), "{reason}");
    assert_eq!(
        runs_on(&fake, &c1, "token create"),
        0,
        "no token was created"
    );
    assert_eq!(runs_on(&fake, &c3, "install"), 0);
}

#[test]
fn join_refused_while_a_member_is_unhealthy() {
    let (fake, spec, state, _) = three_controllers();
    let (c1, c2) = (host(1), host(2));
    let c4 = host(4);
    let mut spec = spec;
    spec.hosts.push(spec_host(Role::Controller, &c4, "c4", 4));
    {
        let mut w = fake.world();
        w.add_host(&c4, "c4");
        w.hosts.get_mut(&c2).unwrap().unhealthy = true;
    }
    let plan = one_step(&c4, StepKind::JoinController { via: c1.clone() });
    let mut o = opts(2);
    o.health_grace = Duration::from_millis(20);
    let r = apply_with(&fake, &plan, &spec, state, o);
    let reason = r.refusal();
    assert!(
        reason.contains("\"c2\"") && reason.contains("not healthy"),
        "{reason}"
    );
    assert_eq!(runs_on(&fake, &c1, "token create"), 0);
    assert!(r.checkpoints.iter().all(|s| s.intents.is_empty()));
}

/// Three controllers on k0s v1.35.5 (joiners become etcd learners) and c4 to join via c1.
fn learner_cluster() -> (Fake, Spec, State, HostId, HostId) {
    let (fake, mut spec, state, _) = three_controllers();
    let (c1, c4) = (host(1), host(4));
    spec.hosts.push(spec_host(Role::Controller, &c4, "c4", 4));
    {
        let mut w = fake.world();
        w.add_host(&c4, "c4");
        for h in w.hosts.values_mut() {
            h.version = Some("v1.35.5+k0s.0".parse().unwrap());
        }
    }
    (fake, spec, state, c1, c4)
}

/// Issue 13: on k0s v1.35.5+ a joined controller is a learner until the leader promotes it
/// (its EtcdMember object shows Joined=True only then); the join step ends only once it is a
/// voter, even when its API already answers.
#[test]
fn controller_join_waits_until_the_learner_is_promoted() {
    let (fake, spec, state, c1, c4) = learner_cluster();
    fake.world().learners.insert(c4.address.clone(), 5);
    let plan = one_step(&c4, StepKind::JoinController { via: c1.clone() });
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("joined");
    assert_eq!(
        fake.world().learners[&c4.address],
        0,
        "the step ended before c4's EtcdMember object showed it promoted"
    );
}

/// A learner that is never promoted: the join fails at its timeout, saying so.
#[test]
fn controller_join_fails_clearly_when_the_learner_is_never_promoted() {
    let (fake, spec, state, c1, c4) = learner_cluster();
    fake.world().learners.insert(c4.address.clone(), usize::MAX);
    let plan = one_step(&c4, StepKind::JoinController { via: c1.clone() });
    let mut o = opts(2);
    o.wait_timeout = Duration::from_millis(200);
    o.poll_interval = Duration::from_millis(20);
    let r = apply_with(&fake, &plan, &spec, state, o);
    let report = r.failure();
    let (_, why) = &report.summary.failed[0];
    assert!(
        why.contains("timed out") && why.contains("to be promoted from learner to voter"),
        "{why}"
    );
    // Before v1.35.5 nothing waits for a promotion: members join as voters.
    let (fake, spec, state, c1, c4) = learner_cluster();
    {
        let mut w = fake.world();
        w.learners.insert(c4.address.clone(), usize::MAX);
        for h in w.hosts.values_mut() {
            h.version = Some("v1.35.4+k0s.0".parse().unwrap());
        }
    }
    let plan = one_step(&c4, StepKind::JoinController { via: c1.clone() });
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("joined");
}

/// The member ID etcd gave `h` (the fake's member at its address).
fn real_member_id(fake: &Fake, h: &HostId) -> String {
    let w = fake.world();
    let m = w
        .members
        .iter()
        .find(|m| m.peer_url.contains(&format!("//{}:", h.address)));
    m.expect("a member at its address").id.clone()
}

/// c4 (k0s v1.35.4: no learners) joins via c1, then is recorded; its address has an EtcdMember
/// object of its earlier life (member ID 5555666677778888) that probes show relabelled for
/// `probes` more probes (k0s's labels written, its status not yet).
fn rejoin_over_earlier_object(probes: usize) -> (Fake, Spec, State, HostId, Plan) {
    let (fake, spec, state, c1, c4) = learner_cluster();
    {
        let mut w = fake.world();
        for h in w.hosts.values_mut() {
            h.version = Some("v1.35.4+k0s.0".parse().unwrap());
        }
        w.invocations = true;
        w.relabelled_stale = true;
        w.stale_objects
            .insert(c4.address.clone(), ("5555666677778888".into(), probes));
    }
    let plan = plan_of(vec![
        step_on(0, c4.clone(), StepKind::JoinController { via: c1 }, &[]),
        step_on(1, c4.clone(), StepKind::RecordHost, &[0]),
    ]);
    (fake, spec, state, c4, plan)
}

/// c4 joins where an EtcdMember object of its earlier life survived (its member left by hand)
/// and k0s rewrites that object in two calls, labels first: for two probes it shows c4's new
/// InvocationID beside the earlier member ID. `RecordHost` after the join takes the new ID only.
#[test]
fn rejoined_controller_is_recorded_with_its_new_member_id_not_its_earlier_one() {
    let (fake, spec, state, c4, plan) = rejoin_over_earlier_object(2);
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("joined and recorded");
    let etcd = r.state.host(&c4).expect("c4 recorded").etcd.clone();
    let id = etcd.expect("with its member ID").member_id;
    assert_ne!(
        id, "5555666677778888",
        "the earlier life's member ID was recorded"
    );
    assert_eq!(id, real_member_id(&fake, &c4));
    let probes = fake.world().probed.iter().filter(|h| **h == c4).count();
    assert_eq!(probes, 3, "two probes showed the object not yet rewritten");
}

/// k0s's status write never lands (before v1.35.5 a failed one is only logged): the object keeps
/// the earlier life's ID beside the new start's label. `RecordHost` records the host without a
/// member ID at its deadline, and says why.
#[test]
fn rejoined_controller_whose_object_is_never_rewritten_is_recorded_without_an_id() {
    let (fake, spec, state, c4, plan) = rejoin_over_earlier_object(usize::MAX);
    let mut o = opts(2);
    o.health_grace = Duration::from_millis(200);
    o.poll_interval = Duration::from_millis(20);
    let r = apply_with(&fake, &plan, &spec, state, o);
    r.result.as_ref().expect("recorded");
    let rec = r.state.host(&c4).expect("c4 recorded");
    assert_eq!(rec.etcd, None, "an ID was recorded");
    assert!(
        r.human.contains(
            "etcd member ID unknown (its EtcdMember object still shows member 5555666677778888 of its earlier life); recorded without it"
        ),
        "{}",
        r.human
    );
}

/// On k0s v1.35.5+ the same surviving object says Joined=True from the start, while c4 is
/// still a learner: the join waits for c4's promotion, not for any Joined=True at its address.
#[test]
fn controller_join_is_not_ended_by_the_object_of_its_earlier_life() {
    let (fake, spec, state, c1, c4) = learner_cluster();
    {
        let mut w = fake.world();
        w.learners.insert(c4.address.clone(), 5);
        w.relabelled_stale = true;
        w.stale_objects
            .insert(c4.address.clone(), ("5555666677778888".into(), 1));
    }
    let plan = one_step(&c4, StepKind::JoinController { via: c1 });
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("joined");
    assert_eq!(
        fake.world().learners[&c4.address],
        0,
        "the step ended on the earlier life's Joined=True, before c4 was promoted"
    );
}

/// A learner counts as no voter in the health gate before a membership change: the next
/// join is refused (exit 3) while a member is not promoted, before any token exists.
#[test]
fn join_refused_while_a_member_is_still_a_learner() {
    let (fake, spec, state, c1, c4) = learner_cluster();
    fake.world()
        .learners
        .insert(host(3).address.clone(), usize::MAX);
    let plan = one_step(&c4, StepKind::JoinController { via: c1.clone() });
    let mut o = opts(2);
    o.health_grace = Duration::from_millis(20);
    let r = apply_with(&fake, &plan, &spec, state, o);
    let reason = r.refusal();
    assert!(
        reason.contains("\"c3\"") && reason.contains("not a voter yet"),
        "{reason}"
    );
    assert_eq!(runs_on(&fake, &c1, "token create"), 0);
    assert_eq!(runs_on(&fake, &c4, "install"), 0);
}

#[test]
fn failed_join_still_invalidates_and_replaces_the_token() {
    let (fake, spec, state, _) = three_controllers();
    let (c1, c4) = (host(1), host(4));
    let mut spec = spec;
    spec.hosts.push(spec_host(Role::Controller, &c4, "c4", 4));
    {
        let mut w = fake.world();
        w.add_host(&c4, "c4");
        w.fail.push((c4.clone(), "install".into()));
    }
    let plan = plan_of(vec![
        step_on(
            0,
            c4.clone(),
            StepKind::JoinController { via: c1.clone() },
            &[],
        ),
        step_on(1, c4.clone(), StepKind::RecordHost, &[0]),
    ]);
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let report = r.failure();
    assert_eq!(r.exit_code(), 1);
    assert_eq!(report.failed(), vec![0]);
    assert_eq!(report.skipped(), vec![1]);
    assert!(
        report.summary.failed[0]
            .1
            .contains("k0s install failed: Error: injected failure")
    );
    assert_eq!(runs_on(&fake, &c1, "token invalidate"), 1);
    assert_placeholder(
        &fake.world().hosts[&c4].files["/etc/k0s/k0stoken"],
        TokenRole::Controller,
    );
    // The half-done join stays recorded for the next plan.
    assert_eq!(r.state.intents.len(), 1);
    assert_eq!(
        r.checkpoints.last().unwrap().intents[0].kind,
        "join_controller"
    );
    let tokens = fake.world().tokens.clone();
    assert_token_never_leaks(&fake, &tokens, &r);
}

#[test]
fn workers_joining_together_share_one_token_and_one_node_query() {
    let (fake, spec, state, _) = three_controllers();
    let c1 = host(1);
    let workers: Vec<HostId> = (10..16).map(host).collect();
    let mut spec = spec;
    let mut o = opts(workers.len());
    {
        let mut w = fake.world();
        w.delay = Duration::from_millis(20);
        for (i, h) in workers.iter().enumerate() {
            let name = format!("w{i}");
            w.add_host(h, &name);
            // No hostname in the spec: the Node name comes from the plan's probe.
            spec.hosts.push(HostSpec::new(
                Role::Worker,
                SshTarget::new(h.address.clone(), 22),
                10 + i,
            ));
            o.hostnames.insert(h.clone(), name.to_uppercase());
        }
    }
    let plan = plan_of(
        workers
            .iter()
            .enumerate()
            .map(|(i, h)| step_on(i, h.clone(), StepKind::JoinWorker { via: c1.clone() }, &[]))
            .collect(),
    );
    let r = apply_with(&fake, &plan, &spec, state, o);
    assert!(r.result.is_ok(), "{:?}", r.result);

    assert_eq!(runs_on(&fake, &c1, "token create --role=worker"), 1);
    assert_eq!(runs_on(&fake, &c1, "token invalidate"), 1);
    let calls = fake.calls();
    let invalidated = calls
        .iter()
        .position(|c| c.is(&c1, "token invalidate"))
        .unwrap();
    for h in &workers {
        let started = calls.iter().position(|c| c.is(h, "start")).unwrap();
        assert!(started < invalidated, "{h} started after the invalidation");
    }
    // Every worker got the one token, then a placeholder in the token file.
    let w = fake.world();
    assert_eq!(w.tokens.len(), 1);
    for h in &workers {
        assert_placeholder(&w.hosts[h].files["/etc/k0s/k0stoken"], TokenRole::Worker);
    }
    // The plan's hostnames named the Nodes (lower-cased): no probe before the joins.
    assert!(w.probed.is_empty(), "probed {:?}", w.probed);
    let tokens = w.tokens.clone();
    drop(w);
    // The waits asked c1 for its Nodes together, not once per worker.
    let polls = runs_on(&fake, &c1, "kubectl --data-dir=/var/lib/k0s get nodes");
    assert!(
        (1..workers.len()).contains(&polls),
        "{polls} node queries for {} workers",
        workers.len()
    );
    assert_token_never_leaks_shared(&fake, &tokens, &r, workers.len());
}

#[test]
fn per_host_command_limit_is_honoured() {
    let (fake, spec, state, _) = three_controllers();
    let c1 = host(1);
    fake.world().delay = Duration::from_millis(25);
    // Eight independent steps that all talk to c1.
    let steps: Vec<Step> = (0..8)
        .map(|i| {
            step_on(
                i,
                host(10 + i as u8),
                StepKind::DeleteObjects {
                    node: format!("gone{i}"),
                    objects: vec![k0sform::plan::ObjectKind::Node],
                    via: c1.clone(),
                    etcd_member: None,
                    control_node: None,
                },
                &[],
            )
        })
        .collect();
    let plan = plan_of(steps);
    let mut o = opts(8);
    o.per_host_limit = 3;
    let r = apply_with(&fake, &plan, &spec, state.clone(), o);
    r.result.expect("ok");
    assert_eq!(fake.world().max_in_flight[&c1], 3);

    let (fake, _, _, _) = three_controllers();
    fake.world().delay = Duration::from_millis(25);
    let mut o = opts(8);
    o.per_host_limit = 10;
    apply_with(&fake, &plan, &spec, state, o)
        .result
        .expect("ok");
    assert_eq!(fake.world().max_in_flight[&c1], 8, "steps do overlap");
}

/// `options.concurrency.uploads` caps the uploads in flight on all hosts together; 0 is no
/// limit of its own, as in k0sctl (phase/generic_phase.go `parallelDoUpload`), so only the
/// hosts-at-once limit applies (it used to mean one at a time).
#[test]
fn uploads_in_flight_follow_options_concurrency_uploads() {
    for (uploads, parallelism, expected) in [(0, 8, 4), (0, 3, 3), (1, 8, 1), (2, 8, 2)] {
        let fake = Fake::default();
        let workers: Vec<HostId> = (1..=4).map(host).collect();
        let mut spec = spec_of(&[]);
        let mut binary = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut binary, b"k0s").unwrap();
        for (i, w) in workers.iter().enumerate() {
            fake.world().add_host(w, &format!("w{i}"));
            let mut h = spec_host(Role::Worker, w, &format!("w{i}"), i + 1);
            h.k0s_binary_path = Some(binary.path().to_path_buf());
            spec.hosts.push(h);
        }
        spec.options.concurrent_uploads = uploads;
        fake.world().delay = Duration::from_millis(50);
        let steps = workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                step_on(
                    i,
                    w.clone(),
                    StepKind::UploadBinary {
                        sha256: k0sform::hash::sha256_hex(b"k0s"),
                        version: None,
                    },
                    &[],
                )
            })
            .collect();
        apply_with(
            &fake,
            &plan_of(steps),
            &spec,
            State::new(),
            opts(parallelism),
        )
        .result
        .expect("uploaded");
        assert_eq!(
            fake.world().max_writes_in_flight,
            expected,
            "uploads: {uploads}, parallelism {parallelism}"
        );
    }
}

#[test]
fn upgrade_replaces_the_binary_and_restarts() {
    let (fake, spec, state, w1, o, _bin) = worker_to_upgrade();
    let plan = one_step(
        &w1,
        StepKind::Upgrade {
            from: Some("v1.33.4+k0s.0".parse().unwrap()),
            to: "v1.34.1+k0s.0".into(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, o);
    r.result.as_ref().expect("upgraded");
    let words = words_on(&fake, &w1);
    let at = |p: &str| first(&words, p);
    // Staged beside the install path, moved into place only once k0s is stopped: the unit
    // restarts k0s by itself, and must never find the new binary before this host's turn.
    // The move is the first thing the install's session does (`k0s::install_service`).
    assert!(at("write /usr/local/bin/k0s.k0sform-new") < at("install worker"));
    assert!(at("stop") < at("install worker"));
    let install = fake
        .calls()
        .into_iter()
        .find(|c| c.is(&w1, "install worker"))
        .unwrap();
    let argv = install.argv().unwrap();
    assert_eq!(
        argv[3..6],
        [
            "k0sform-install",
            "/usr/local/bin/k0s.k0sform-new",
            "/usr/local/bin/k0s"
        ]
    );
    assert!(words[at("install worker")].ends_with("--force"));
    assert!(at("install worker") < at("start"));
    let w = fake.world();
    assert_eq!(
        w.hosts[&w1].files["/usr/local/bin/k0s"],
        (b"k0s v1.34.1".to_vec(), 0o755)
    );
    assert!(w.hosts[&w1].running);
    drop(w);
    // The Node was checked through a controller after the restart.
    assert!(
        fake.calls()
            .iter()
            .any(|c| c.is(&host(1), "kubectl --data-dir=/var/lib/k0s get nodes"))
    );
    let recorded = r.state.host(&w1).and_then(|h| h.k0s_version.clone());
    assert_eq!(
        recorded.map(|v| v.to_string()).as_deref(),
        Some("v1.34.1+k0s.0")
    );
    assert_eq!(r.intent_counts(), vec![1, 0]);
}

/// k0s #7202: a worker k0sctl joined (its token file says `# overwritten by k0sctl after join`)
/// gets a decodable placeholder there while k0s is stopped, before it starts on v1.35.1+k0s.0
/// (k0sctl `phase/ensure_join_token_workaround.go`); also when a worker that already runs that
/// version is reconfigured. A file that holds a token, another version, or a controller+worker
/// is left alone.
#[test]
fn worker_restarting_on_v1_35_1_k0s_0_gets_a_decodable_token_file_first() {
    const K0SCTL: &[u8] = b"# overwritten by k0sctl after join\n";
    const TOKEN_FILE: &str = "/etc/k0s/k0stoken";
    let setup = |running: &str, to: &str| {
        let (fake, spec, state, w1, mut o, _) = worker_to_upgrade();
        let mut bin = tempfile::NamedTempFile::new().unwrap();
        let data = format!("k0s {to}");
        std::io::Write::write_all(&mut bin, data.as_bytes()).unwrap();
        o.binaries = vec![k0sform::binaries::LocalK0s {
            path: bin.path().to_path_buf(),
            sha256: k0sform::hash::sha256_hex(data.as_bytes()),
            version: Some(to.parse().unwrap()),
        }];
        {
            let mut w = fake.world();
            let h = w.hosts.get_mut(&w1).unwrap();
            h.files.insert(TOKEN_FILE.into(), (K0SCTL.to_vec(), 0o600));
            h.status_args = vec![format!("--token-file={TOKEN_FILE}")];
            h.version = Some(running.into());
        }
        (fake, spec, state, w1, o, bin)
    };
    let upgrade = |w1: &HostId, to: &str| {
        one_step(
            w1,
            StepKind::Upgrade {
                from: Some("v1.34.3+k0s.0".into()),
                to: to.into(),
            },
        )
    };
    let token_of = |fake: &Fake, w1: &HostId| fake.world().hosts[w1].files[TOKEN_FILE].clone();

    let (fake, spec, state, w1, o, _bin) = setup("v1.34.3+k0s.0", "v1.35.1+k0s.0");
    let r = apply_with(&fake, &upgrade(&w1, "v1.35.1+k0s.0"), &spec, state, o);
    r.result.as_ref().expect("upgraded");
    assert_placeholder(&token_of(&fake, &w1), TokenRole::Worker);
    let words = words_on(&fake, &w1);
    let at = |p: &str| first(&words, p);
    assert!(at("stop") < at(&format!("token-file {TOKEN_FILE}")));
    assert!(at(&format!("token-file {TOKEN_FILE}")) < at("start"));
    assert!(
        r.events
            .iter()
            .any(|e| format!("{e:?}").contains("a placeholder was written (k0s #7202)")),
        "{:?}",
        r.events
    );

    // Already on that version: a reconfigure (a restart) does the same.
    let (fake, spec, state, w1, o, _bin) = setup("v1.35.1+k0s.0", "v1.35.1+k0s.0");
    let r = apply_with(
        &fake,
        &one_step(&w1, StepKind::Reconfigure),
        &spec,
        state,
        o,
    );
    r.result.as_ref().expect("reconfigured");
    assert_placeholder(&token_of(&fake, &w1), TokenRole::Worker);

    // Other versions need nothing: k0sctl's comment stays, nothing is asked.
    for to in ["v1.35.1+k0s.1", "v1.35.2+k0s.0"] {
        let (fake, spec, state, w1, o, _bin) = setup("v1.34.3+k0s.0", to);
        apply_with(&fake, &upgrade(&w1, to), &spec, state, o)
            .result
            .expect("upgraded");
        assert_eq!(token_of(&fake, &w1).0, K0SCTL, "{to}");
        assert!(
            !words_on(&fake, &w1)
                .iter()
                .any(|w| w.starts_with("token-file"))
        );
    }
    // A token that decodes stays as it is.
    let (fake, spec, state, w1, o, _bin) = setup("v1.34.3+k0s.0", "v1.35.1+k0s.0");
    let other = k0sform::k0s::placeholder_token(TokenRole::Controller).into_bytes();
    fake.world()
        .hosts
        .get_mut(&w1)
        .unwrap()
        .files
        .insert(TOKEN_FILE.into(), (other.clone(), 0o600));
    apply_with(&fake, &upgrade(&w1, "v1.35.1+k0s.0"), &spec, state, o)
        .result
        .expect("upgraded");
    assert_eq!(token_of(&fake, &w1).0, other);
}

/// A local k0s binary that changed since planning is refused before anything reaches the
/// staging path (the planned sha256 is checked before the move, not after).
#[test]
fn an_upload_of_a_binary_changed_since_planning_writes_nothing() {
    let (fake, spec, state, w1, o, binary) = worker_to_upgrade();
    std::fs::write(binary.path(), b"k0s replaced").unwrap();
    let plan = one_step(
        &w1,
        StepKind::UploadBinary {
            sha256: k0sform::hash::sha256_hex(b"k0s v1.34.1"),
            version: Some(k0sform::version::K0sVersion::parse("v1.34.1+k0s.0").unwrap()),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, o);
    let e = r.result.expect_err("refused");
    assert!(format!("{e:?}").contains("the plan expected"), "{e:?}");
    assert!(
        !fake.world().hosts[&w1]
            .files
            .contains_key("/usr/local/bin/k0s.k0sform-new"),
        "nothing staged"
    );
}

#[test]
fn bootstrap_refused_when_the_state_names_a_cluster() {
    let fake = Fake::default();
    fake.world().add_host(&host(1), "c1");
    let spec = spec_of(&[(1, Role::Controller, "c1")]);
    let mut state = State::new();
    state.cluster = Some(k0sform::state::ClusterState {
        name: "test".into(),
        uid: fake::OLD_UID.into(),
        etcd_cluster_id: None,
        k0s_version: None,
        config_sha256: None,
    });
    let plan = one_step(&host(1), StepKind::Bootstrap);
    let r = apply_with(&fake, &plan, &spec, state, opts(1));
    let reason = r.refusal();
    assert!(
        reason.contains("never bootstrap over a known cluster"),
        "{reason}"
    );
    assert!(fake.calls().is_empty(), "nothing ran: {:?}", fake.calls());
}

#[test]
fn bootstrap_refused_when_k0s_already_runs_there() {
    let fake = Fake::default();
    fake.world().add_member(&host(1), "c1");
    let spec = spec_of(&[(1, Role::Controller, "c1")]);
    let plan = one_step(&host(1), StepKind::Bootstrap);
    let r = apply_with(&fake, &plan, &spec, State::new(), opts(1));
    assert!(
        matches!(r.result, Err(ApplyError::Unsafe { .. })),
        "{:?}",
        r.result
    );
    assert_eq!(runs_on(&fake, &host(1), "install"), 0);
}

#[test]
fn drain_and_delete_of_missing_objects_succeed() {
    let (fake, spec, state, _) = three_controllers();
    let c1 = host(1);
    fake.world().nodes.insert("w1".into(), true);
    let plan = plan_of(vec![
        step_on(
            0,
            host(5),
            StepKind::Drain {
                node: "w1".into(),
                via: c1.clone(),
                evict_taint: None,
            },
            &[],
        ),
        step_on(
            1,
            host(6),
            StepKind::Drain {
                node: "gone".into(),
                via: c1.clone(),
                evict_taint: None,
            },
            &[],
        ),
        step_on(
            2,
            host(6),
            StepKind::DeleteObjects {
                node: "gone".into(),
                objects: vec![
                    k0sform::plan::ObjectKind::Node,
                    k0sform::plan::ObjectKind::EtcdMember,
                    k0sform::plan::ObjectKind::ControlNode,
                ],
                via: c1.clone(),
                etcd_member: None,
                control_node: None,
            },
            &[1],
        ),
        step_on(3, host(6), StepKind::ForgetHost, &[2]),
    ]);
    let mut state = state;
    state.upsert_host(recorded(&host(6), "gone", None));
    let r = apply_with(&fake, &plan, &spec, state, opts(4));
    r.result.expect("ok");
    assert!(!fake.world().nodes["w1"], "w1 drained");
    let deletes = runs_of(&fake, &c1, "kubectl --data-dir=/var/lib/k0s delete");
    assert_eq!(deletes.len(), 3, "{deletes:?}");
    assert!(r.state.host(&host(6)).is_none(), "forgotten");
}

#[test]
fn wait_healthy_times_out_as_a_failure() {
    let (fake, spec, state, _) = three_controllers();
    fake.world().hosts.get_mut(&host(2)).unwrap().unhealthy = true;
    let plan = one_step(&host(1), StepKind::WaitHealthy { via: host(1) });
    let mut o = opts(1);
    o.wait_timeout = Duration::from_millis(30);
    let r = apply_with(&fake, &plan, &spec, state, o);
    let report = r.failure();
    assert_eq!(r.exit_code(), 1);
    assert!(
        report.summary.failed[0].1.contains("timed out"),
        "{:?}",
        report.summary.failed
    );
    // The repeated poll is reported once, not once per poll.
    let progress = r
        .events
        .iter()
        .filter(|e| matches!(e, ApplyEvent::StepProgress { .. }))
        .count();
    assert_eq!(progress, 1);
}

#[test]
fn removal_plan_deleting_the_etcd_member_object_first_still_checks_the_id() {
    // The planner's removal order: delete Node/EtcdMember/ControlNode, then remove the member.
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    fake.world().hosts.get_mut(&c3).unwrap().running = false;
    let remove = |id: &str| {
        plan_of(vec![
            step_on(
                0,
                c3.clone(),
                StepKind::DeleteObjects {
                    node: "c3".into(),
                    objects: vec![k0sform::plan::ObjectKind::EtcdMember],
                    via: c1.clone(),
                    etcd_member: None,
                    control_node: None,
                },
                &[],
            ),
            step_on(1, c3.clone(), remove_member(id, &c3, &c1), &[0]),
        ])
    };
    {
        let mut w = fake.world();
        w.hide_objects_after_delete = true;
    }
    let r = apply_with(
        &fake,
        &remove("0000000000000bad"),
        &spec,
        state.clone(),
        opts(1),
    );
    let reason = r.refusal();
    assert!(reason.contains(&ids[2]), "{reason}");
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0);

    // A new run sees the object again before deleting it (as a fresh cluster would).
    fake.world().deleted_objects.clear();
    let r = apply_with(&fake, &remove(&ids[2]), &spec, state, opts(1));
    r.result
        .expect("removed with the ID the object showed before its deletion");
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 1);
}

#[test]
fn reconfigure_writes_config_reinstalls_and_restarts() {
    let (fake, mut spec, state, _) = three_controllers();
    let c2 = host(2);
    spec.hosts[1].install_flags = vec!["--debug".into()];
    let plan = one_step(&c2, StepKind::Reconfigure);
    let r = apply_with(&fake, &plan, &spec, state, opts(1));
    r.result.expect("reconfigured");
    let words = words_on(&fake, &c2);
    let at = |p: &str| first(&words, p);
    assert!(at("write /etc/k0s/k0s.yaml") < at("install controller"));
    assert!(at("install controller") < at("stop"));
    assert!(at("stop") < at("start"));
    assert!(
        at("start")
            < words
                .iter()
                .rposition(|w| w.contains("--raw=/readyz"))
                .unwrap()
    );
    // The new k0s.yaml is staged, validated by k0s, then renamed into place.
    assert!(at("write /etc/k0s/k0s.yaml.k0sform-new") < at("config validate"));
    assert!(at("config validate") < at("-fT -- /etc/k0s/k0s.yaml.k0sform-new /etc/k0s/k0s.yaml"));
    // The user's flags go to k0s as written (k0s records `--debug=true`).
    let install = &words[at("install controller")];
    assert!(
        install.contains("--debug ") && install.ends_with("--force"),
        "{install}"
    );
    let w = fake.world();
    let (yaml, mode) = &w.hosts[&c2].files["/etc/k0s/k0s.yaml"];
    assert_eq!(*mode, 0o600);
    assert_eq!(
        String::from_utf8_lossy(yaml),
        desired::config_yaml(&spec, &spec.hosts[1])
    );
    assert!(w.hosts[&c2].running);
}

/// A k0s.yaml that `k0s config validate` refuses never replaces the one the host runs with,
/// and nothing is restarted.
#[test]
fn refused_config_keeps_the_old_one() {
    let (fake, spec, state, _) = three_controllers();
    let c2 = host(2);
    {
        let mut w = fake.world.lock().unwrap();
        let h = w.hosts.get_mut(&c2).unwrap();
        h.files
            .insert("/etc/k0s/k0s.yaml".into(), (b"old: true\n".to_vec(), 0o600));
        w.fail.push((c2.clone(), "config validate".into()));
    }
    let plan = plan_of(vec![step_on(0, c2.clone(), StepKind::Reconfigure, &[])]);
    let r = apply_with(&fake, &plan, &spec, state, opts(1));
    let e = r.result.expect_err("refused by k0s");
    assert!(format!("{e:?}").contains("config validate"), "{e:?}");
    let w = fake.world.lock().unwrap();
    assert_eq!(w.hosts[&c2].files["/etc/k0s/k0s.yaml"].0, b"old: true\n");
    assert!(
        !w.hosts[&c2]
            .files
            .contains_key("/etc/k0s/k0s.yaml.k0sform-new")
    );
    assert!(w.hosts[&c2].running, "not restarted");
    drop(w);
    assert_eq!(runs_on(&fake, &c2, "stop"), 0);
}

// ---------------------------------------------------------------------------------------------
// Progress for people and the versioned JSON events

/// A long step gets a "still running" event every `still_running_every` (on tokio's paused
/// clock: deterministic), a short one none, and none after a step ends.
#[test]
fn long_steps_report_that_they_are_still_running() {
    let plan = plan_of(vec![step(0, plain(), &[]), step(1, plain(), &[0])]);
    let script = Script {
        delay: HashMap::from([(0, Duration::from_secs(25)), (1, Duration::from_secs(5))]),
        ..Script::default()
    };
    let cancel = Cancel::new();
    let runner = ScriptedRunner::new(script, cancel.clone());
    let mut state = State::new();
    let mut sink = VecSink::default();
    let mut cp = |_: &State| -> Result<(), String> { Ok(()) };
    let mut o = opts(2);
    o.names = HashMap::from([(host(1), "c1".to_string())]);
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    paused
        .block_on(run_plan(
            &plan, &mut state, runner, &o, &mut sink, &mut cp, &cancel,
        ))
        .expect("runs");
    let still: Vec<(usize, String, u64)> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            ApplyEvent::StepStillRunning { step, elapsed } => {
                Some((step.id, step.name.clone(), elapsed.as_secs()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(still, vec![(0, "c1".into(), 10), (0, "c1".into(), 20)]);
    // Each comes between its step's start and finish.
    let kinds: Vec<&str> = sink
        .events
        .iter()
        .map(|e| match e {
            ApplyEvent::StepStarted { .. } => "started",
            ApplyEvent::StepStillRunning { .. } => "still",
            ApplyEvent::StepFinished { .. } => "finished",
            _ => "other",
        })
        .filter(|k| *k != "other")
        .collect();
    assert_eq!(
        kinds,
        [
            "started", "still", "still", "finished", "started", "finished"
        ]
    );
    // The unnamed host falls back to its address.
    let finished_1 = sink.events.iter().find_map(|e| match e {
        ApplyEvent::StepFinished { step, .. } if step.id == 1 => Some(step.name.clone()),
        _ => None,
    });
    assert_eq!(finished_1.as_deref(), Some("127.0.0.2"));
}

/// Regenerate with `K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform apply::events_schema_is_fresh`.
#[test]
fn events_schema_is_fresh() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/events.schema.json");
    let now = k0sform::ui::events_json_schema();
    if std::env::var_os("K0SFORM_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &now).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == now,
        "schema/events.schema.json is stale; regenerate with \
         `K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform apply::events_schema_is_fresh`"
    );
    // Every line's type is one the schema names, and format_version is required.
    let text = now.clone();
    for t in [
        "planned",
        "begin",
        "step_started",
        "step_progress",
        "step_still_running",
        "step_finished",
        "step_failed",
        "step_skipped",
        "checkpoint",
        "summary",
    ] {
        assert!(text.contains(&format!("\"const\": \"{t}\"")), "{t} missing");
    }
    let schema: serde_json::Value = serde_json::from_str(&now).unwrap();
    assert!(
        schema["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == "format_version")),
        "{now}"
    );
}

/// A worker with a Node, running, recorded in state: (fake, spec, state, worker id, options with
/// a local binary for v1.34.1).
fn worker_to_upgrade() -> (
    Fake,
    Spec,
    State,
    HostId,
    ExecOptions,
    tempfile::NamedTempFile,
) {
    let (fake, mut spec, mut state, _) = three_controllers();
    let w1 = host(5);
    spec.hosts.push(spec_host(Role::Worker, &w1, "w1", 4));
    {
        let mut w = fake.world();
        w.add_host(&w1, "w1");
        let h = w.hosts.get_mut(&w1).unwrap();
        h.running = true;
        h.installed = Some(("worker".into(), vec![]));
        w.nodes.insert("w1".into(), true);
    }
    let mut rec = recorded(&w1, "w1", None);
    rec.role = Role::Worker;
    state.upsert_host(rec);
    let mut binary = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut binary, b"k0s v1.34.1").unwrap();
    let mut o = opts(2);
    o.binaries.push(k0sform::binaries::LocalK0s {
        path: binary.path().to_path_buf(),
        sha256: k0sform::hash::sha256_hex(b"k0s v1.34.1"),
        version: Some("v1.34.1+k0s.0".parse().unwrap()),
    });
    (fake, spec, state, w1, o, binary)
}

fn drained_upgrade(w1: &HostId, taint: Option<&str>) -> Plan {
    let via = host(1);
    plan_of(vec![
        step_on(
            0,
            w1.clone(),
            StepKind::Drain {
                node: "w1".into(),
                via: via.clone(),
                evict_taint: taint.map(str::to_string),
            },
            &[],
        ),
        step_on(
            1,
            w1.clone(),
            StepKind::Upgrade {
                from: Some("v1.33.4+k0s.0".parse().unwrap()),
                to: "v1.34.1+k0s.0".into(),
            },
            &[0],
        ),
        step_on(
            2,
            w1.clone(),
            StepKind::Uncordon {
                node: "w1".into(),
                via,
                evict_taint: taint.map(str::to_string),
            },
            &[1],
        ),
    ])
}

#[test]
fn upgrade_cordons_taints_drains_then_uncordons_once_ready() {
    let (fake, spec, state, w1, o, _bin) = worker_to_upgrade();
    let taint = "k0sctl.k0sproject.io/evict=true:NoExecute";
    let r = apply_with(&fake, &drained_upgrade(&w1, Some(taint)), &spec, state, o);
    r.result.as_ref().expect("upgraded");
    // Through the controller, in k0sctl's order: cordon, taint, drain … uncordon, untaint.
    let on_c1 = words_on(&fake, &host(1));
    let at = |p: &str| first(&on_c1, p);
    let k = "kubectl --data-dir=/var/lib/k0s";
    assert!(
        at(&format!("{k} cordon node/w1"))
            < at(&format!("{k} taint nodes --overwrite node/w1 {taint}"))
    );
    assert!(at(&format!("{k} taint nodes --overwrite")) < at(&format!("{k} drain")));
    assert!(at(&format!("{k} drain")) < at(&format!("{k} uncordon node/w1")));
    assert!(at(&format!("{k} uncordon")) < at(&format!("{k} taint nodes node/w1 {taint}-")));
    // The restart happened between the drain and the uncordon.
    let order: Vec<String> = fake.calls().iter().map(|c| c.words()).collect();
    let pos = |p: &str| order.iter().position(|w| w.starts_with(p)).expect(p);
    assert!(pos(&format!("{k} drain")) < pos("stop"));
    assert!(pos("start") < pos(&format!("{k} uncordon")));
    let w = fake.world();
    assert!(w.cordoned.is_empty(), "uncordoned: {:?}", w.cordoned);
    assert!(w.taints["w1"].is_empty(), "untainted: {:?}", w.taints);
}

/// Issue 13: a worker is back after its upgrade only when k0s reports the new version and its
/// Node turned Ready after the restart, by the host's clock. A Node still showing the Ready
/// (and heartbeat) of the stopped kubelet, as the cluster does for 40 s, does not count: the
/// step fails at its timeout, the Node stays cordoned and the state keeps the old version.
#[test]
fn stale_ready_after_a_restart_does_not_count_as_back() {
    let (fake, spec, state, w1, mut o, _bin) = worker_to_upgrade();
    o.wait_timeout = Duration::from_millis(300);
    o.poll_interval = Duration::from_millis(20);
    {
        let mut w = fake.world();
        w.silent_kubelets.insert("w1".into());
        w.beats.insert("w1".into(), 1_700_000_000);
    }
    let plan = one_step(
        &w1,
        StepKind::Upgrade {
            from: Some("v1.33.4+k0s.0".parse().unwrap()),
            to: "v1.34.1+k0s.0".into(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state.clone(), o.clone());
    let report = r.failure();
    let (_, why) = &report.summary.failed[0];
    assert!(
        why.contains("Node \"w1\" shows Ready from before its restart"),
        "{why}"
    );
    assert!(why.contains("timed out"), "{why}");
    let recorded = r.state.host(&w1).and_then(|h| h.k0s_version.clone());
    assert_eq!(
        recorded.map(|v| v.to_string()).as_deref(),
        Some("v1.33.4+k0s.0")
    );
    // The same with a drain: never uncordoned on the stale Ready.
    let (fake, spec, state, w1, mut o, _bin) = worker_to_upgrade();
    o.wait_timeout = Duration::from_millis(300);
    o.poll_interval = Duration::from_millis(20);
    fake.world().silent_kubelets.insert("w1".into());
    let r = apply_with(&fake, &drained_upgrade(&w1, None), &spec, state, o);
    r.failure();
    assert_eq!(
        runs_on(&fake, &host(1), "kubectl --data-dir=/var/lib/k0s uncordon"),
        0
    );
    assert!(fake.world().cordoned.contains("w1"));

    // A kubelet that reports again after the restart: back, on the new version.
    let (fake, spec, state, w1, o, _bin) = worker_to_upgrade();
    fake.world().beats.insert("w1".into(), 1_700_000_000);
    let r = apply_with(&fake, &plan, &spec, state, o);
    r.result.as_ref().expect("upgraded");
    let calls: Vec<String> = words_on(&fake, &w1);
    let at = |p: &str| first(&calls, p);
    // The host's clock is read in the start's own session (`k0s::start_at_host_time`), after
    // the stop.
    assert!(at("stop") < at("start"), "{calls:#?}");
    let start = fake
        .calls()
        .into_iter()
        .find(|c| c.is(&w1, "start"))
        .unwrap();
    assert_eq!(start.argv().unwrap()[3], "k0sform-start");
    assert!(
        calls[at("start")..]
            .iter()
            .any(|w| w.starts_with("status -o json")),
        "k0s status asked after the start: {calls:#?}"
    );
}

/// A worker whose k0s comes back on another version than the upgrade's (here: no binary of
/// that version was given, the old one runs on) is not back.
#[test]
fn upgrade_waits_for_k0s_to_report_the_new_version() {
    let (fake, spec, state, w1, mut o, _bin) = worker_to_upgrade();
    o.wait_timeout = Duration::from_millis(300);
    o.poll_interval = Duration::from_millis(20);
    let plan = one_step(
        &w1,
        StepKind::Upgrade {
            from: Some("v1.33.4+k0s.0".parse().unwrap()),
            to: "v1.34.2+k0s.0".into(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, o);
    let report = r.failure();
    let (_, why) = &report.summary.failed[0];
    assert!(
        why.contains("k0s reports version v1.33.4+k0s.0, not v1.34.2+k0s.0"),
        "{why}"
    );
}

#[test]
fn failed_drain_stops_before_the_restart_and_leaves_the_node_cordoned() {
    let (fake, spec, state, w1, o, _bin) = worker_to_upgrade();
    fake.world()
        .fail
        .push((host(1), "kubectl --data-dir=/var/lib/k0s drain".into()));
    let r = apply_with(&fake, &drained_upgrade(&w1, None), &spec, state, o);
    let report = r.failure();
    let (_, why) = &report.summary.failed[0];
    assert!(why.contains("draining Node \"w1\" failed"), "{why}");
    assert!(why.contains("stays cordoned"), "{why}");
    assert!(why.contains("k0s kubectl uncordon w1"), "{why}");
    assert_eq!(runs_on(&fake, &w1, "stop"), 0, "not restarted");
    assert_eq!(runs_on(&fake, &w1, "install"), 0, "not reinstalled");
    assert_eq!(
        runs_on(&fake, &host(1), "kubectl --data-dir=/var/lib/k0s uncordon"),
        0,
        "left cordoned"
    );
}

/// Issue 14, item 7: a hook step shows its lines as written (`${TOKEN}`) while the host runs
/// the spec's expanded line; the failing line's error (the fake echoes the command it does not
/// know, secret included) is shown as written too, in human output, `-json` events and the
/// result. A step whose lines are not the spec's is refused before anything runs.
#[test]
fn hook_step_runs_the_spec_line_and_shows_the_written_one() {
    const SECRET: &str = "tok-9f8e7d6c5b4a";
    let (fake, mut spec, state, _) = three_controllers();
    let c1 = host(1);
    let idx = spec.hosts.iter().position(|h| h.id() == c1).unwrap();
    spec.hosts[idx].hooks = std::collections::BTreeMap::from([(
        "apply".to_string(),
        std::collections::BTreeMap::from([("before".to_string(), vec![format!("echo {SECRET}")])]),
    )]);
    spec.set_env_values([("TOKEN".to_string(), SECRET.to_string())]);
    let step = |line: &str| StepKind::RunHooks {
        action: "apply".into(),
        stage: "before".into(),
        lines: vec![line.to_string()],
    };
    let hook_runs = |fake: &Fake| -> Vec<Vec<String>> {
        fake.calls()
            .iter()
            .filter_map(|c| match &c.kind {
                CallKind::Run { argv, .. } if argv.first().is_some_and(|a| a == "sh") => {
                    Some(argv.clone())
                }
                _ => None,
            })
            .collect()
    };
    let r = apply_with(
        &fake,
        &one_step(&c1, step("echo ${TOKEN}")),
        &spec,
        state.clone(),
        opts(2),
    );
    assert_eq!(
        hook_runs(&fake),
        vec![vec![
            "sh".to_string(),
            "-c".to_string(),
            format!("echo {SECRET}")
        ]],
        "the host runs the expanded line"
    );
    assert!(r.human.contains("echo ${TOKEN}"), "{}", r.human);
    let result = format!("{:?}", r.result);
    assert!(r.result.is_err(), "the fake fails the line: {result}");
    for (what, out) in [
        ("human output", &r.human),
        ("-json events", &r.json),
        ("events", &format!("{:?}", r.events)),
        ("result", &result),
    ] {
        assert!(!out.contains(SECRET), "{what} shows the secret: {out}");
    }

    // Lines that are not the spec's (a hand-made step): refused, nothing runs.
    let (fake2, _, state2, _) = three_controllers();
    let r = apply_with(
        &fake2,
        &one_step(&c1, step("id > /tmp/x")),
        &spec,
        state2,
        opts(2),
    );
    assert!(
        format!("{:?}", r.result).contains("not the spec's"),
        "{:?}",
        r.result
    );
    assert!(hook_runs(&fake2).is_empty(), "{:?}", hook_runs(&fake2));
}

/// Joins worker w1 through c1 of `three_controllers` with a silent kubelet that registers its
/// Node `registers` into the Node watch (which ends after `watch_ends`, if given), polling every
/// `poll`: the fake and how long the apply took.
fn watched_join(
    registers: Duration,
    watch_ends: Option<Duration>,
    poll: Duration,
) -> (Fake, Duration) {
    let (fake, mut spec, state, _) = three_controllers();
    let c1 = host(1);
    let w1 = host(5);
    spec.hosts.push(spec_host(Role::Worker, &w1, "w1", 4));
    {
        let mut w = fake.world();
        w.add_host(&w1, "w1");
        w.silent_kubelets.insert("w1".into());
        w.watch = Some((registers, "w1".into()));
        w.watch_ends = watch_ends;
    }
    let mut o = opts(2);
    o.poll_interval = poll;
    o.hostnames.insert(w1.clone(), "w1".into());
    let plan = one_step(&w1, StepKind::JoinWorker { via: c1 });
    let started = std::time::Instant::now();
    let r = apply_with(&fake, &plan, &spec, state, o);
    r.result.as_ref().expect("joined");
    (fake, started.elapsed())
}

/// A Node watch that ends during the wait (the controller's k0s restarted, the session broke)
/// leaves the join polling at its usual interval, not the slow pace of a running watch: the
/// Node registering after the watch ended is seen at the next poll.
#[test]
fn a_join_whose_node_watch_ends_polls_at_its_interval() {
    // The watch ends 100 ms in; the kubelet registers 700 ms in, with no watch to say so.
    let (fake, took) = watched_join(
        Duration::from_millis(700),
        Some(Duration::from_millis(100)),
        Duration::from_millis(300),
    );
    // A running watch's pace (WATCHED_POLL, 5 s) would take 5 s.
    assert!(
        took < Duration::from_millis(2500),
        "took {took:?}: still on the watch's pace"
    );
    assert_eq!(fake.world().watches, (1, 1), "one watch, ended");
    let gets = runs_on(
        &fake,
        &host(1),
        "kubectl --data-dir=/var/lib/k0s get nodes -o json",
    );
    assert!(
        gets >= 3,
        "{gets} polls: the first, at the watch's end, then each interval"
    );
}

/// A worker join whose kubelet registers between two polls is woken by the Node watch at once:
/// the step ends long before its next poll (here 2 s apart, 5 s while the watch runs), asks
/// `get nodes` twice, and the watch is stopped when the wait ends.
#[test]
fn a_node_watch_wakes_the_join_and_is_stopped_after() {
    // Its kubelet registers only when the watch says so, 200 ms into the wait.
    let (fake, took) = watched_join(Duration::from_millis(200), None, Duration::from_secs(2));
    let c1 = host(1);
    assert!(
        took < Duration::from_millis(1500),
        "took {took:?}: not woken"
    );
    assert_eq!(fake.world().watches, (1, 1), "one watch, stopped");
    assert_eq!(
        runs_on(
            &fake,
            &c1,
            "kubectl --data-dir=/var/lib/k0s get nodes --watch-only -o name"
        ),
        1,
        "the watch ran on the controller it joins through"
    );
    assert_eq!(
        runs_on(
            &fake,
            &c1,
            "kubectl --data-dir=/var/lib/k0s get nodes -o json"
        ),
        2
    );
}
