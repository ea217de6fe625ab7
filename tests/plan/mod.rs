//! The planner against table-driven cases (testdata/plans/<case>/case.yaml: a compact description
//! of spec, state and reality, and the expected outcome), insta snapshots of every case's text,
//! JSON and DOT, proptest properties over generated clusters, and the plan schema's freshness.

use crate::support::schema_files;
use k0sform::hash::sha256_hex;
use k0sform::hostid::HostId;
use k0sform::k0s::desired;
use k0sform::plan::{
    self, Action, ClusterAction, Desired, LocalBinary, Plan, PlanOptions, Refusal, RefusalKind,
    SavedPlan, StepKind, graph,
};
use k0sform::reality::{
    ClusterView, HostFacts, HostReality, K0sStatus, MemberView, NodeView, Probe, Reality,
    RemoteFile, ServiceKind,
};
use k0sform::spec::{HostSpec, K0sSpec, K0sVersion, Options, Role, Spec, SshTarget};
use k0sform::state::{ClusterState, EtcdMemberState, HostState, State};
use k0sform::ui::render;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod cases;
mod display;
mod hosts;
mod inputs;
mod manifests;
mod props;
mod removal;
mod saved;
mod sim;
mod state_entries;

use cases::*;
use inputs::*;
use sim::*;

// ---------------------------------------------------------------------------------------------
// The compact case format.

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Case {
    #[serde(default)]
    description: String,
    spec: SpecCase,
    #[serde(default)]
    state: Option<StateCase>,
    reality: RealityCase,
    #[serde(default)]
    options: PlanOptions,
    /// The local binary every host gets (version), when set.
    #[serde(default)]
    binary: Option<K0sVersion>,
    /// No local binary at all (the spec names no `k0sBinaryPath`), whatever the version.
    #[serde(default)]
    no_local_binary: bool,
    /// Every host downloads its binary from this URL with this sha256 (empty: none to check
    /// against) instead of getting a local one.
    #[serde(default)]
    host_download: Option<HostDownloadCase>,
    expect: Expect,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HostDownloadCase {
    url: String,
    #[serde(default)]
    sha256: String,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SpecCase {
    #[serde(default = "default_name")]
    name: String,
    #[serde(default)]
    version: Option<K0sVersion>,
    #[serde(default)]
    config: Option<serde_json::Value>,
    #[serde(default)]
    worker_disruption_percent: Option<u32>,
    /// `spec.options.drain.enabled` (default true).
    #[serde(default)]
    drain: Option<bool>,
    /// `spec.options.evictTaint`, enabled (`taint`, `effect`, `controller_workers`).
    #[serde(default)]
    evict_taint: Option<k0sform::spec::EvictTaint>,
    /// `spec.k0s.dynamicConfig`.
    #[serde(default)]
    dynamic_config: bool,
    hosts: Vec<HostCase>,
}

fn default_name() -> String {
    "prod".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostCase {
    addr: String,
    #[serde(default)]
    port: Option<u16>,
    role: Role,
    name: String,
    #[serde(default)]
    reset: bool,
    #[serde(default)]
    pin: Option<String>,
    #[serde(default)]
    flags: Vec<String>,
    /// `hooks:` as in k0sctl.yaml: action → stage → shell lines.
    #[serde(default)]
    hooks: k0sform::spec::Hooks,
    /// The host's `files:`, already expanded (remote path, content, mode, owner).
    #[serde(default)]
    files: Vec<FileCase>,
    /// `privateAddress`.
    #[serde(default)]
    private: Option<String>,
    /// Write `name` as the spec's `hostname:` too (default); false: the OS hostname only.
    #[serde(default = "yes")]
    set_hostname: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCase {
    remote: String,
    data: String,
    #[serde(default = "default_mode")]
    mode: String,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    group: Option<String>,
}

fn default_mode() -> String {
    "0644".into()
}

impl FileCase {
    fn desired(&self) -> k0sform::files::DesiredFile {
        k0sform::files::DesiredFile {
            name: self.remote.clone(),
            remote: self.remote.clone(),
            source: String::new(),
            url: None,
            sha256: sha256_hex(&self.data),
            mode: k0sform::files::octal(&self.mode).expect("octal mode"),
            user: self.user.clone(),
            group: self.group.clone(),
            dir_mode: 0o755,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StateCase {
    #[serde(default = "default_serial")]
    serial: u64,
    uid: String,
    hosts: Vec<StateHostCase>,
}

impl HostCase {
    fn new(addr: &str, role: Role, name: &str) -> Self {
        HostCase {
            addr: addr.into(),
            port: None,
            role,
            name: name.into(),
            reset: false,
            pin: None,
            flags: vec![],
            hooks: Default::default(),
            files: vec![],
            private: None,
            set_hostname: true,
        }
    }
}

fn default_serial() -> u64 {
    12
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateHostCase {
    addr: String,
    #[serde(default)]
    port: Option<u16>,
    role: Role,
    name: String,
    /// Defaults: machine-id `mid-<name>`, host key `SHA256:key-<name>`, member id from the name.
    #[serde(default)]
    machine_id: Option<String>,
    #[serde(default)]
    host_key: Option<String>,
    #[serde(default)]
    version: Option<K0sVersion>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RealityCase {
    /// The identity running controllers report by default.
    #[serde(default)]
    uid: Option<String>,
    /// Member names as controllers report them by default (peer URL from the named host).
    #[serde(default)]
    members: Vec<String>,
    /// Members no host knows: (name, peer address).
    #[serde(default)]
    extra_members: Vec<(String, String)>,
    /// `http` for test doubles whose etcd peers speak http; default `https`.
    #[serde(default)]
    peer_scheme: Option<String>,
    /// Member IDs the cluster reports instead of the ones derived from the names.
    #[serde(default)]
    member_ids: BTreeMap<String, String>,
    /// Node names the cluster reports; default: every running host with a Node.
    #[serde(default)]
    nodes: Option<Vec<String>>,
    #[serde(default)]
    hosts: Vec<RealHostCase>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RealHostCase {
    addr: String,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    unreachable: Option<String>,
    /// (expected, offered)
    #[serde(default)]
    host_key_changed: Option<(String, String)>,
    #[serde(default)]
    machine_id: Option<String>,
    #[serde(default)]
    host_key: Option<String>,
    /// Running k0s: `controller`, `worker` or absent; `controller+worker` or `single`: a
    /// controller with workloads whatever the spec's role.
    #[serde(default)]
    running: Option<String>,
    #[serde(default)]
    version: Option<K0sVersion>,
    /// k0s.yaml on the host: `desired` (default for running controllers), `none`, or literal text.
    #[serde(default)]
    config: Option<String>,
    /// Extra service args beyond the desired ones.
    #[serde(default)]
    extra_args: Vec<String>,
    /// The service args after the role exactly as k0s recorded them (instead of the desired ones).
    #[serde(default)]
    args: Option<Vec<String>>,
    /// `k0s config create` on this host (k0s's defaults), when the probe got it.
    #[serde(default)]
    defaults: Option<String>,
    /// The etcd peer address `k0s status` reports (default: the spec's for the host).
    #[serde(default)]
    peer_address: Option<String>,
    /// The storage type `k0s status` reports (default: what the desired k0s.yaml gives).
    #[serde(default)]
    storage: Option<String>,
    /// Leftovers of an earlier install (service unit, etcd data) on a host that is not running.
    #[serde(default)]
    leftovers: bool,
    /// A k0s binary of this version at the install path of a host that is not running.
    #[serde(default)]
    binary: Option<K0sVersion>,
    /// This controller's own view, overriding the default (split brain).
    #[serde(default)]
    view: Option<ViewCase>,
    /// Queries of this controller's view that failed: its uid and Nodes are then unknown.
    #[serde(default)]
    view_errors: Vec<String>,
    /// Files on the host (of those the spec names; the others are missing).
    #[serde(default)]
    files: Vec<FileCase>,
    /// A worker's token file as the probe reports it: `decodes`, `undecodable` or `missing`.
    #[serde(default)]
    token_file: Option<k0sform::reality::TokenFileState>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ViewCase {
    uid: String,
    members: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Expect {
    /// Refusal kind (snake_case) when the plan must be refused.
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    exit: Option<u8>,
    /// Substrings of the refusal message or the plan text.
    #[serde(default)]
    contains: Vec<String>,
    /// Every host change: address → action.
    #[serde(default)]
    actions: BTreeMap<String, Action>,
    #[serde(default)]
    cluster_action: Option<String>,
    /// Step kinds per host, in order (only for the hosts listed).
    #[serde(default)]
    steps: BTreeMap<String, Vec<String>>,
    /// (members_before, members_after, min_healthy, quorum)
    #[serde(default)]
    etcd: Option<(usize, usize, usize, usize)>,
    #[serde(default)]
    drift: usize,
    /// Pairs of `"<host> <step kind>"` where the first must precede the second in the DAG.
    #[serde(default)]
    ordered: Vec<(String, String)>,
}

// ---------------------------------------------------------------------------------------------
// Building real inputs from a case.

struct Inputs {
    spec: Spec,
    state: State,
    reality: Reality,
    desired: Desired,
    options: PlanOptions,
}

// ---------------------------------------------------------------------------------------------
// The inputs of one case, for the tests that change them.

/// insta looks for snapshots in `snapshots/` beside the file that asserts; the plan's are in
/// tests/snapshots/ with every other module's (`k0sform__plan__<file>__<name>.snap`). Keep the
/// guard alive while asserting.
fn snapshots_in_tests_dir() -> insta::internals::SettingsBindDropGuard {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.bind_to_scope()
}

/// The inputs of the case in testdata/plans/NAME.
fn case_inputs(name: &str) -> Inputs {
    let (_, case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("case {name}"));
    build(&case)
}

// ---------------------------------------------------------------------------------------------
// Schema freshness: regenerate with
//   K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform plan::plan_schema_is_fresh

#[test]
fn plan_schema_is_fresh() {
    let now = render::json_schema();
    schema_files::checked_in("plan.schema.json", &now, "plan::plan_schema_is_fresh");
    // And every case's JSON has the schema's top-level fields.
    let schema: serde_json::Value = serde_json::from_str(&now).unwrap();
    let required = schema["required"].as_array().unwrap();
    for r in ["format_version", "changes", "steps", "etcd"] {
        assert!(required.iter().any(|x| x == r), "{r} not required");
    }
}
