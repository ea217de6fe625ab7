//! Executor tests without SSH. Part 1 drives the coordinator with a scripted `StepRunner` to
//! check scheduling (order, overlap, membership serialization, failure handling, intents,
//! interrupts); part 2 runs the real k0s step runner against a fake `Transport`.

use crate::support::schema_files;
use fake::{CallKind, Fake};
use k0sform::apply::{
    ApplyError, Cancel, ExecOptions, Remote, StateChange, StepContext, StepError, StepRunner,
    execute, intent_for, needs_intent, run_plan,
};
use k0sform::hostid::HostId;
use k0sform::k0s::{TokenRole, desired};
use k0sform::plan::{ClusterAction, Plan, QuorumSummary, Step, StepKind};
use k0sform::spec::{HostSpec, K0sSpec, Role, Spec, SshTarget};
use k0sform::state::{EtcdMemberState, HostState, State};
use k0sform::ui::{ApplyEvent, EventSink, HumanSink, JsonSink, VecSink};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod execution;
mod fake;
mod join;
mod props;
mod removal;
mod scheduling;
mod upgrade;

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
            ..K0sSpec::default()
        },
        ..Spec::default()
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

/// Regenerate with `K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform apply::events_schema_is_fresh`.
#[test]
fn events_schema_is_fresh() {
    let now = k0sform::ui::events_json_schema();
    schema_files::checked_in("events.schema.json", &now, "apply::events_schema_is_fresh");
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
