//! The planner against table-driven cases (testdata/plans/<case>/case.yaml: a compact description
//! of spec, state and reality, and the expected outcome), insta snapshots of every case's text,
//! JSON and DOT, proptest properties over generated clusters, and the plan schema's freshness.

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

fn member_id(name: &str) -> String {
    sha256_hex(format!("member {name}"))[..16].to_string()
}

fn peer_url(addr: &str) -> String {
    format!("https://{addr}:2380")
}

/// What `k0s status` reports of a controller's storage: (etcd peer address, type). A `single`
/// host runs kine (no peer address); workers report neither.
/// What `k0s status` reports about storage on a host running the desired k0s.yaml.
fn storage_of(spec: &Spec, hs: &HostSpec, controller: bool) -> (Option<String>, Option<String>) {
    if !controller {
        return (None, None);
    }
    match desired::host_storage_type(spec, hs).as_str() {
        "etcd" => (Some(hs.peer_address().to_string()), Some("etcd".into())),
        other => (None, Some(other.into())),
    }
}

fn host_spec(h: &HostCase, index: usize) -> HostSpec {
    let mut ssh = SshTarget::new(h.addr.clone(), h.port.unwrap_or(22));
    ssh.host_key = h.pin.clone();
    let mut hs = HostSpec::new(h.role, ssh, index);
    hs.hostname = Some(h.name.clone());
    hs.private_address = h.private.clone();
    hs.reset = h.reset;
    hs.install_flags = h.flags.clone();
    hs.hooks = h.hooks.clone();
    hs
}

fn build(case: &Case) -> Inputs {
    let mut options = Options::default();
    if let Some(p) = case.spec.worker_disruption_percent {
        options.worker_disruption_percent = p;
    }
    if let Some(d) = case.spec.drain {
        options.drain.enabled = d;
    }
    options.evict_taint = case.spec.evict_taint.clone();
    let mut spec = Spec {
        name: case.spec.name.clone(),
        user: "admin".into(),
        hosts: case
            .spec
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| host_spec(h, i + 1))
            .collect(),
        k0s: K0sSpec {
            version: case.spec.version.clone(),
            version_channel: None,
            dynamic_config: case.spec.dynamic_config,
            config: case.spec.config.clone(),
            controllers_run: false,
        },
        options,
        manifests: vec![],
        env_values: vec![],
    };
    // Hosts only the state knows still need a HostSpec to derive their running args/config.
    // The harness names hosts by `hostname`; the planner's spec has it only where the case sets it.
    let mut all_specs: Vec<HostSpec> = spec.hosts.clone();
    for (hs, h) in spec.hosts.iter_mut().zip(&case.spec.hosts) {
        if !h.set_hostname {
            hs.hostname = None;
        }
    }
    let mut state = State {
        format_version: 1,
        lineage: "00000000-0000-4000-8000-000000000001".into(),
        serial: 0,
        tool_version: "0.1.0".into(),
        cluster: None,
        hosts: vec![],
        intents: vec![],
        bastions: vec![],
        downloads: vec![],
        manifests: vec![],
    };
    if let Some(st) = &case.state {
        state.serial = st.serial;
        state.cluster = Some(ClusterState {
            name: case.spec.name.clone(),
            uid: st.uid.clone(),
            etcd_cluster_id: None,
            k0s_version: None,
            config_sha256: None,
        });
        for h in &st.hosts {
            let port = h.port.unwrap_or(22);
            if !all_specs
                .iter()
                .any(|s| s.id() == HostId::new(h.addr.clone(), port))
            {
                let mut hc = HostCase::new(&h.addr, h.role, &h.name);
                hc.port = h.port;
                all_specs.push(host_spec(&hc, 0));
            }
            state.upsert_host(HostState {
                address: h.addr.clone(),
                port,
                role: h.role,
                node_name: Some(h.name.clone()),
                machine_id: h.machine_id.clone().unwrap_or(format!("mid-{}", h.name)),
                host_key: h
                    .host_key
                    .clone()
                    .unwrap_or(format!("SHA256:key-{}", h.name)),
                host_public_key: None,
                etcd: h.role.is_controller().then(|| EtcdMemberState {
                    member_id: member_id(&h.name),
                    peer_url: peer_url(&h.addr),
                }),
                k0s_version: h.version.clone().or(case.spec.version.clone()),
                install_flags_sha256: None,
                config_sha256: None,
                k0s_binary: None,
                access: None,
            });
        }
    }
    let name_of_addr = |addr: &str, port: u16| -> Option<&HostSpec> {
        all_specs
            .iter()
            .find(|s| s.ssh.address == addr && s.ssh.port == port)
    };
    let addr_of_name = |name: &str| -> String {
        all_specs
            .iter()
            .find(|s| s.hostname.as_deref() == Some(name))
            .map(|s| s.peer_address().to_string())
            .unwrap_or_else(|| format!("10.9.9.{}", name.len()))
    };
    let scheme = case.reality.peer_scheme.as_deref().unwrap_or("https");
    let seen_url = |addr: &str| format!("{scheme}://{addr}:2380");
    let seen_id = |n: &str| {
        case.reality
            .member_ids
            .get(n)
            .cloned()
            .unwrap_or_else(|| member_id(n))
    };
    let view_members = |names: &[String]| -> Vec<MemberView> {
        let mut v: Vec<MemberView> = names
            .iter()
            .map(|n| MemberView {
                name: n.clone(),
                peer_url: seen_url(&addr_of_name(n)),
                member_id: Some(seen_id(n)),
                invocation: None,
            })
            .collect();
        for (n, a) in &case.reality.extra_members {
            v.push(MemberView {
                name: n.clone(),
                peer_url: seen_url(a),
                member_id: Some(seen_id(n)),
                invocation: None,
            });
        }
        v
    };
    let running_nodes: Vec<String> = case.reality.nodes.clone().unwrap_or_else(|| {
        case.reality
            .hosts
            .iter()
            .filter(|r| r.running.is_some() && r.view.is_none())
            .filter_map(|r| name_of_addr(&r.addr, r.port.unwrap_or(22)))
            .filter(|s| s.role.has_node())
            .filter_map(|s| s.hostname.clone())
            .collect()
    });
    let control_nodes: Vec<String> = case.reality.members.to_vec();
    let mut reality = Reality::default();
    for r in &case.reality.hosts {
        let id = HostId::new(r.addr.clone(), r.port.unwrap_or(22));
        let probe = if let Some(e) = &r.unreachable {
            Probe::Unreachable { error: e.clone() }
        } else if let Some((expected, offered)) = &r.host_key_changed {
            Probe::HostKeyChanged {
                expected: expected.clone(),
                offered: offered.clone(),
                bastion: None,
            }
        } else {
            let hs = name_of_addr(&r.addr, id.port)
                .unwrap_or_else(|| panic!("reality host {} is not in spec or state", r.addr));
            let name = hs.hostname.clone().unwrap_or_default();
            let version = r.version.clone().or(case.spec.version.clone());
            let mut f = HostFacts {
                machine_id: r.machine_id.clone().unwrap_or(format!("mid-{name}")),
                hostname: name.clone(),
                host_key: r.host_key.clone().unwrap_or(format!("SHA256:key-{name}")),
                os: "debian".into(),
                arch: "amd64".into(),
                worker_token_file: r.token_file,
                ..Default::default()
            };
            if let Some(kind) = &r.running {
                // `controller+worker` and `single` run as a controller with workloads; plain
                // `controller` (or `worker`) runs with the workloads of the spec's role.
                let (kind, workloads, single) = match kind.as_str() {
                    "controller+worker" => (&"controller".to_string(), true, false),
                    "single" => (&"controller".to_string(), true, true),
                    _ => (kind, hs.role.has_node(), hs.role == Role::Single),
                };
                let controller = kind == "controller";
                let mut args = vec![
                    hs.k0s_install_path.clone(),
                    if controller { "controller" } else { "worker" }.to_string(),
                ];
                match &r.args {
                    Some(recorded) => args.extend(recorded.iter().cloned()),
                    None => args.extend(desired::install_args(&spec, hs)),
                }
                args.extend(r.extra_args.iter().cloned());
                f.k0s_version = version.clone();
                f.k0s_binary_sha256 = version.as_ref().map(|v| sha256_hex(format!("k0s {v}")));
                f.service = Some(if controller {
                    ServiceKind::Controller
                } else {
                    ServiceKind::Worker
                });
                f.status = Some(K0sStatus {
                    version: version
                        .clone()
                        .unwrap_or_else(|| "v1.33.4+k0s.0".parse().unwrap()),
                    pid: 100,
                    role: kind.clone(),
                    workloads,
                    single_node: single,
                    args,
                    peer_address: r
                        .peer_address
                        .clone()
                        .or(storage_of(&spec, hs, controller).0),
                    storage_type: r.storage.clone().or(storage_of(&spec, hs, controller).1),
                    invocation_id: None,
                });
                f.config_defaults = r.defaults.clone();
                if controller {
                    f.has_etcd_data = true;
                    let text = match r.config.as_deref() {
                        None | Some("desired") => Some(desired::config_yaml(&spec, hs)),
                        Some("none") => None,
                        Some(t) => Some(t.to_string()),
                    };
                    f.config_sha256 = text.as_ref().map(sha256_hex);
                    f.config_text = text;
                    let view = match &r.view {
                        Some(v) => ClusterView {
                            cluster_uid: Some(v.uid.clone()),
                            members: view_members(&v.members),
                            nodes: vec![],
                            control_nodes: v.members.clone(),
                            errors: vec![],
                        },
                        None => ClusterView {
                            cluster_uid: case.reality.uid.clone(),
                            members: view_members(&case.reality.members),
                            nodes: running_nodes
                                .iter()
                                .map(|n| NodeView {
                                    name: n.clone(),
                                    ready: true,
                                    ..Default::default()
                                })
                                .collect(),
                            control_nodes: control_nodes.clone(),
                            errors: vec![],
                        },
                    };
                    let mut view = view;
                    if !r.view_errors.is_empty() {
                        view.cluster_uid = None;
                        view.nodes.clear();
                        view.errors = r.view_errors.clone();
                    }
                    f.view = Some(view);
                }
            } else if r.leftovers {
                f.k0s_version = version.clone();
                f.service = Some(if hs.role.is_controller() {
                    ServiceKind::Controller
                } else {
                    ServiceKind::Worker
                });
                f.has_etcd_data = hs.role.is_controller();
            } else if let Some(v) = &r.binary {
                f.k0s_version = Some(v.clone());
                f.k0s_binary_sha256 = Some(sha256_hex(format!("k0s {v}")));
            }
            // The probe reports every file the spec names for the host, present or not.
            let spec_files = case
                .spec
                .hosts
                .iter()
                .find(|c| c.addr == r.addr && c.port == r.port)
                .map(|c| c.files.clone())
                .unwrap_or_default();
            f.files = spec_files
                .iter()
                .map(
                    |want| match r.files.iter().find(|h| h.remote == want.remote) {
                        Some(have) => RemoteFile {
                            path: want.remote.clone(),
                            sha256: Some(sha256_hex(&have.data)),
                            mode: k0sform::files::octal(&have.mode),
                            user: Some(have.user.clone().unwrap_or("root".into())),
                            group: Some(have.group.clone().unwrap_or("root".into())),
                            uid: have.user.is_none().then_some(0),
                            gid: have.group.is_none().then_some(0),
                        },
                        None => RemoteFile {
                            path: want.remote.clone(),
                            ..Default::default()
                        },
                    },
                )
                .collect();
            Probe::Reached(Box::new(f))
        };
        reality.hosts.push(HostReality { id, probe });
    }
    reality.sort();
    // As the engine does after the probe.
    k0sform::k0s::desired::note_running_controllers(&mut spec, &reality);
    // The caller resolves the spec's version to a binary for every host.
    let local = case.binary.as_ref().or(case.spec.version.as_ref());
    let desired = match local.filter(|_| !case.no_local_binary) {
        Some(v) if case.host_download.is_some() => {
            let d = case.host_download.as_ref().unwrap();
            let mut ids: Vec<HostId> = spec.hosts.iter().map(|h| h.id()).collect();
            ids.sort();
            Desired {
                hosts: ids
                    .into_iter()
                    .map(|host| k0sform::plan::DesiredHost {
                        host,
                        local_binary: None,
                        host_download: Some(k0sform::plan::HostDownload {
                            url: d.url.clone(),
                            sha256: d.sha256.clone(),
                            version: v.clone(),
                        }),
                        files: Vec::new(),
                    })
                    .collect(),
            }
        }
        Some(v) => Desired::same_binary(
            &spec.hosts.iter().map(|h| h.id()).collect::<Vec<_>>(),
            LocalBinary {
                sha256: sha256_hex(format!("k0s {v}")),
                version: Some(v.clone()),
                url: None,
            },
        ),
        None => Desired::default(),
    };
    let mut desired = desired;
    for c in case.spec.hosts.iter().filter(|c| !c.files.is_empty()) {
        let id = HostId::new(c.addr.clone(), c.port.unwrap_or(22));
        let mut files: Vec<_> = c.files.iter().map(FileCase::desired).collect();
        files.sort_by(|a, b| a.remote.cmp(&b.remote));
        match desired.hosts.iter_mut().find(|h| h.host == id) {
            Some(h) => h.files = files,
            None => desired.hosts.push(k0sform::plan::DesiredHost {
                host: id,
                local_binary: None,
                host_download: None,
                files,
            }),
        }
    }
    desired.hosts.sort_by(|a, b| a.host.cmp(&b.host));
    Inputs {
        spec,
        state,
        reality,
        desired,
        options: case.options.clone(),
    }
}

fn run(i: &Inputs) -> Result<Plan, Refusal> {
    plan::diff(&i.spec, &i.state, &i.reality, &i.desired, &i.options)
}

// ---------------------------------------------------------------------------------------------
// A pure model of what apply does, to check that an applied plan converges.

fn sim_member_id(name: &str) -> String {
    sha256_hex(format!("joined {name}"))[..16].to_string()
}

fn facts_mut<'a>(reality: &'a mut Reality, id: &HostId) -> Option<&'a mut HostFacts> {
    reality
        .hosts
        .iter_mut()
        .find(|h| &h.id == id)
        .and_then(|h| match &mut h.probe {
            Probe::Reached(f) => Some(&mut **f),
            _ => None,
        })
}

/// The state and reality after `plan` ran successfully.
fn simulate_apply(plan: &Plan, i: &Inputs) -> (State, Reality) {
    let order: Vec<usize> = (0..plan.steps.len()).collect();
    simulate_apply_in(plan, i, &order)
}

/// A topological order of the steps picked pseudo-randomly from `seed` among the ready ones.
/// The plan of `i`'s spec again, after an apply left `state` and `reality`.
fn replan(i: &Inputs, state: &State, reality: &Reality) -> Plan {
    plan::diff(&i.spec, state, reality, &i.desired, &PlanOptions::default()).expect("replan")
}

fn step_host_is_controller(i: &Inputs, id: &HostId) -> bool {
    i.spec.host(id).is_some_and(|h| h.role.is_controller())
}

fn random_topological_order(plan: &Plan, seed: u64) -> Vec<usize> {
    let mut done = vec![false; plan.steps.len()];
    let mut order = Vec::new();
    let mut x = seed | 1;
    while order.len() < plan.steps.len() {
        let ready: Vec<usize> = plan
            .steps
            .iter()
            .filter(|s| !done[s.id] && s.after.iter().all(|a| done[*a]))
            .map(|s| s.id)
            .collect();
        assert!(!ready.is_empty(), "no ready step: cycle");
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let pick = ready[(x % ready.len() as u64) as usize];
        done[pick] = true;
        order.push(pick);
    }
    order
}

/// The state and reality after `plan` ran successfully, its steps run in `order`.
fn simulate_apply_in(plan: &Plan, i: &Inputs, order: &[usize]) -> (State, Reality) {
    let mut reality = i.reality.clone();
    let mut state = i.state.clone();
    // The cluster as the managed controllers see it.
    let mut uid = plan.cluster_uid.clone();
    let mut members: Vec<MemberView> = Vec::new();
    let mut nodes: Vec<NodeView> = Vec::new();
    let mut control_nodes: Vec<String> = Vec::new();
    if let Some(u) = &uid {
        let view = reality.hosts.iter().find_map(|h| match &h.probe {
            Probe::Reached(f) => f
                .view
                .as_ref()
                .filter(|v| v.cluster_uid.as_ref() == Some(u)),
            _ => None,
        });
        if let Some(v) = view {
            members = v.members.clone();
            nodes = v.nodes.clone();
            control_nodes = v.control_nodes.clone();
        }
    }
    // Nodes the plan cordoned: each must be uncordoned or deleted by the end.
    let mut cordoned: BTreeSet<String> = BTreeSet::new();
    for &n in order {
        let step = &plan.steps[n];
        // The controller a step acts through must be up and a member at that moment.
        let via = match &step.kind {
            StepKind::JoinController { via }
            | StepKind::JoinWorker { via }
            | StepKind::RemoveMember { via, .. }
            | StepKind::RemoveUnknownMember { via, .. }
            | StepKind::Drain { via, .. }
            | StepKind::Uncordon { via, .. }
            | StepKind::DeleteObjects { via, .. }
            | StepKind::WaitHealthy { via } => Some(via.clone()),
            _ => None,
        };
        if let Some(via) = via {
            let up = facts_mut(&mut reality, &via)
                .and_then(|f| f.status.as_ref())
                .and_then(|st| st.peer_address.clone())
                .is_some_and(|pa| {
                    members
                        .iter()
                        .any(|m| m.peer_url.ends_with(&format!("://{pa}:2380")))
                });
            assert!(
                up,
                "step {n} ({} on {}) acts through {via}, which is not a running member then",
                step.kind.name(),
                step.host
            );
        }
        let hs = i.spec.host(&step.host);
        let f = facts_mut(&mut reality, &step.host);
        match &step.kind {
            StepKind::ResetHost {
                machine_id,
                uninstall,
            } => {
                let f = f.expect("reset of an unreachable host");
                assert_eq!(&f.machine_id, machine_id, "reset of another machine");
                f.status = None;
                f.service = None;
                f.has_etcd_data = false;
                f.view = None;
                if *uninstall {
                    // destroy: the binary and k0s.yaml go too.
                    f.k0s_version = None;
                    f.k0s_binary_sha256 = None;
                    f.config_sha256 = None;
                    f.config_text = None;
                }
            }
            StepKind::UploadBinary { sha256, version } => {
                let f = f.expect("upload to an unreachable host");
                f.k0s_binary_sha256 = Some(sha256.clone());
                f.k0s_version = version.clone();
            }
            StepKind::DownloadBinary {
                sha256, version, ..
            } => {
                let f = f.expect("download on an unreachable host");
                f.k0s_binary_sha256 = Some(sha256.clone());
                f.k0s_version = Some(version.clone());
            }
            StepKind::WriteConfig { sha256 } => {
                let f = f.expect("config to an unreachable host");
                let text = desired::config_yaml(&i.spec, hs.expect("in spec"));
                assert_eq!(&sha256_hex(&text), sha256);
                f.config_sha256 = Some(sha256.clone());
                f.config_text = Some(text);
            }
            StepKind::RestoreBackup { .. } => {
                let f = f.expect("restore onto an unreachable host");
                assert!(f.status.is_none(), "restore where k0s runs");
                assert!(members.is_empty(), "restore over a cluster");
                f.has_etcd_data = true;
            }
            StepKind::Bootstrap | StepKind::JoinController { .. } | StepKind::JoinWorker { .. } => {
                let f = f.expect("join of an unreachable host");
                let hs = hs.expect("in spec");
                let controller = hs.role.is_controller();
                if matches!(step.kind, StepKind::Bootstrap) {
                    assert!(members.is_empty(), "bootstrap over a cluster");
                    uid = Some("sim-uid".into());
                }
                let name = hs.hostname.clone().unwrap_or_default();
                let version = f
                    .k0s_version
                    .clone()
                    .or(i.spec.k0s.version.clone())
                    .unwrap_or_else(|| "v1.33.4+k0s.0".parse().unwrap());
                let mut args = vec![
                    hs.k0s_install_path.clone(),
                    if controller { "controller" } else { "worker" }.to_string(),
                ];
                args.extend(desired::install_args(&i.spec, hs));
                f.status = Some(K0sStatus {
                    version,
                    pid: 1,
                    role: if controller { "controller" } else { "worker" }.into(),
                    workloads: hs.role.has_node(),
                    single_node: hs.role == Role::Single,
                    args,
                    peer_address: storage_of(&i.spec, hs, controller).0,
                    storage_type: storage_of(&i.spec, hs, controller).1,
                    invocation_id: None,
                });
                f.service = Some(if controller {
                    ServiceKind::Controller
                } else {
                    ServiceKind::Worker
                });
                if controller {
                    f.has_etcd_data = true;
                    let url = peer_url(hs.peer_address());
                    assert!(
                        !members.iter().any(|m| m.peer_url == url),
                        "join while {url} is still a member (etcd: Peer URLs already exists)"
                    );
                    members.push(MemberView {
                        name: name.clone(),
                        peer_url: url,
                        member_id: Some(sim_member_id(&name)),
                        invocation: None,
                    });
                    control_nodes.retain(|n| n != &name);
                    control_nodes.push(name.clone());
                }
                if hs.role.has_node() {
                    nodes.retain(|n| n.name != name);
                    nodes.push(NodeView {
                        name,
                        ready: true,
                        ..Default::default()
                    });
                }
            }
            StepKind::RemoveMember { member_id, .. } => {
                let before = members.len();
                members.retain(|m| m.member_id.as_deref() != Some(member_id.as_str()));
                assert_eq!(members.len() + 1, before, "member {member_id} not found");
            }
            StepKind::RemoveUnknownMember { peer_url, via, .. } => {
                assert_eq!(
                    &step.host, via,
                    "an unknown member removed as another host's"
                );
                let before = members.len();
                members.retain(|m| &m.peer_url != peer_url);
                assert_eq!(members.len() + 1, before, "member {peer_url} not found");
            }
            StepKind::DeleteObjects { .. } => {
                for (o, name) in step.kind.object_names() {
                    match o {
                        plan::ObjectKind::Node => nodes.retain(|n| n.name != name),
                        plan::ObjectKind::ControlNode => control_nodes.retain(|n| n != name),
                        plan::ObjectKind::EtcdMember => {}
                    }
                }
            }
            StepKind::Upgrade { .. } | StepKind::Reconfigure => {
                let f = f.expect("restart of an unreachable host");
                let hs = hs.expect("in spec");
                let st = f.status.as_mut().expect("restart of a stopped host");
                if let Some(v) = &f.k0s_version {
                    st.version = v.clone();
                }
                if let Some(v) = &i.spec.k0s.version
                    && i.desired.local_binary(&step.host).is_none()
                {
                    st.version = v.clone();
                    f.k0s_version = Some(v.clone());
                }
                st.args.truncate(2);
                st.args.extend(desired::install_args(&i.spec, hs));
                // A worker restarting on a k0s that decodes its token file gets a placeholder
                // first (`token_file_workaround`).
                if hs.role == Role::Worker
                    && k0sform::k0s::quirks::worker_decodes_token_file_at_start(&st.version)
                    && f.worker_token_file.is_some()
                {
                    f.worker_token_file = Some(k0sform::reality::TokenFileState::Decodes);
                }
            }
            StepKind::WriteTokenPlaceholder => {
                let f = f.expect("token file of an unreachable host");
                assert!(
                    f.worker_token_file.is_some(),
                    "a placeholder for a token file the probe did not report on"
                );
                f.worker_token_file = Some(k0sform::reality::TokenFileState::Decodes);
            }
            StepKind::RecordBastion { .. } => {
                panic!(
                    "the simulated cases have no bastions, yet {} is recorded as one",
                    step.host
                )
            }
            StepKind::RecordHost => {
                let f = f.expect("record of an unreachable host").clone();
                let role = hs.map(|h| h.role).expect("in spec");
                let etcd = members
                    .iter()
                    .find(|m| Some(&m.peer_url) == hs.map(|h| peer_url(h.peer_address())).as_ref())
                    .and_then(|m| {
                        Some(EtcdMemberState {
                            member_id: m.member_id.clone()?,
                            peer_url: m.peer_url.clone(),
                        })
                    });
                if state.cluster.is_none() {
                    state.cluster = Some(ClusterState {
                        name: i.spec.name.clone(),
                        uid: uid.clone().expect("record before the cluster exists"),
                        etcd_cluster_id: None,
                        k0s_version: None,
                        config_sha256: None,
                    });
                }
                state.upsert_host(HostState {
                    address: step.host.address.clone(),
                    port: step.host.port,
                    role,
                    node_name: Some(f.hostname.clone()),
                    machine_id: f.machine_id.clone(),
                    host_key: f.host_key.clone(),
                    host_public_key: None,
                    etcd: if role.is_controller() { etcd } else { None },
                    k0s_version: f.status.as_ref().map(|s| s.version.clone()),
                    install_flags_sha256: None,
                    config_sha256: f.config_sha256.clone(),
                    k0s_binary: None,
                    access: None,
                });
            }
            StepKind::ForgetHost => {
                state.remove_host(&step.host);
            }
            StepKind::ApplyManifest { manifest, sha256 } => {
                let f = f.expect("manifest applied through an unreachable host");
                assert!(
                    f.is_running() && step_host_is_controller(i, &step.host),
                    "manifest applied through {} that runs no controller",
                    step.host
                );
                state
                    .manifests
                    .retain(|m| !m.manifest.same_object(manifest));
                state.manifests.push(k0sform::manifests::ManifestRecord {
                    manifest: manifest.clone(),
                    sha256: sha256.clone(),
                });
            }
            StepKind::ForgetManifest { manifest } => {
                state
                    .manifests
                    .retain(|m| !m.manifest.same_object(manifest));
            }
            StepKind::MoveHost { from } => {
                let f = f.expect("move of an unreachable host");
                assert!(
                    state.host(&step.host).is_none(),
                    "move onto a recorded address"
                );
                let mut rec = state.remove_host(from).expect("move of an unrecorded host");
                assert_eq!(rec.machine_id, f.machine_id, "move of another machine");
                assert_eq!(rec.host_key, f.host_key, "move of another machine");
                rec.address = step.host.address.clone();
                rec.port = step.host.port;
                state.upsert_host(rec);
            }
            StepKind::ForgetCluster => {
                state.cluster = None;
            }
            StepKind::WriteHostEnvironment { names } => {
                let f = f.expect("/etc/environment of an unreachable host");
                let env = &hs.expect("in spec").environment;
                let file = f.etc_environment.get_or_insert_with(BTreeMap::new);
                for k in names {
                    file.insert(k.clone(), sha256_hex(&env[k]));
                }
            }
            StepKind::UploadFiles { files } => {
                let f = f.expect("files for an unreachable host");
                for want in files {
                    let have = f
                        .files
                        .iter_mut()
                        .find(|r| r.path == want.remote)
                        .expect("a planned file the probe did not report");
                    have.sha256 = Some(want.sha256.clone());
                    have.mode = Some(want.mode);
                    if let Some(u) = &want.user {
                        have.user = Some(u.clone());
                    }
                    if let Some(g) = &want.group {
                        have.group = Some(g.clone());
                    }
                }
            }
            StepKind::Drain { node, .. } => {
                cordoned.insert(node.clone());
            }
            StepKind::Uncordon { node, .. } => {
                assert!(
                    cordoned.remove(node),
                    "step {n} uncordons Node {node:?}, which no earlier step drained"
                );
            }
            StepKind::WaitHealthy { .. } | StepKind::RunHooks { .. } => {}
        }
        if let StepKind::DeleteObjects { node, objects, .. } = &step.kind
            && objects.contains(&plan::ObjectKind::Node)
        {
            cordoned.remove(node);
        }
    }
    assert!(
        cordoned.is_empty(),
        "the plan leaves Nodes cordoned: {cordoned:?}"
    );
    // Every managed running controller now reports the resulting cluster.
    let in_cluster: Vec<String> = members.iter().map(|m| m.peer_url.clone()).collect();
    for h in &mut reality.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(st) = &f.status
            && let Some(pa) = &st.peer_address
            && (in_cluster.contains(&peer_url(pa))
                || f.view.as_ref().is_some_and(|v| v.cluster_uid == uid))
        {
            f.view = Some(ClusterView {
                cluster_uid: uid.clone(),
                members: members.clone(),
                nodes: nodes.clone(),
                control_nodes: control_nodes.clone(),
                errors: vec![],
            });
        }
    }
    state.serial += 1;
    (state, reality)
}

// ---------------------------------------------------------------------------------------------
// Table-driven cases.

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/plans")
}

fn load_cases() -> Vec<(String, Case)> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("testdata/plans")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("case.yaml").exists())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(d.join("case.yaml")).unwrap();
        let case: Case = serde_saphyr::from_str(&text)
            .unwrap_or_else(|e| panic!("testdata/plans/{name}/case.yaml: {e}"));
        out.push((name, case));
    }
    out
}

fn refusal_text(r: &Refusal) -> String {
    let mut s = format!(
        "refused ({:?}, exit {}): {}\n",
        r.kind,
        r.exit_code(),
        r.message
    );
    for d in &r.details {
        s.push_str(&format!("  {d}\n"));
    }
    s
}

fn check_case(name: &str, case: &Case) -> Result<(), String> {
    let inputs = build(case);
    let result = run(&inputs);
    let e = &case.expect;
    match (&result, &e.refusal) {
        (Err(r), Some(kind)) => {
            let got = serde_json::to_value(r.kind).unwrap();
            if got != serde_json::Value::String(kind.clone()) {
                return Err(format!(
                    "refusal kind {got}, expected {kind}: {}",
                    r.message
                ));
            }
            if let Some(code) = e.exit
                && code != r.exit_code()
            {
                return Err(format!("exit {} expected {code}", r.exit_code()));
            }
            let text = refusal_text(r);
            for c in &e.contains {
                if !text.contains(c) {
                    return Err(format!("refusal lacks {c:?}:\n{text}"));
                }
            }
            insta::assert_snapshot!(format!("{name}__refusal"), text);
            Ok(())
        }
        (Err(r), None) => Err(format!("unexpected refusal: {}", refusal_text(r))),
        (Ok(_), Some(kind)) => Err(format!("expected refusal {kind}, got a plan")),
        (Ok(p), None) => {
            let actions: BTreeMap<String, Action> = p
                .changes
                .iter()
                .map(|c| (c.host.to_string(), c.action))
                .collect();
            if actions != e.actions {
                return Err(format!("actions {actions:?}, expected {:?}", e.actions));
            }
            if let Some(ca) = &e.cluster_action {
                let got = match &p.cluster_action {
                    ClusterAction::Existing => "existing".to_string(),
                    ClusterAction::Adopt => "adopt".to_string(),
                    ClusterAction::Bootstrap { host } => format!("bootstrap {host}"),
                };
                if &got != ca {
                    return Err(format!("cluster action {got}, expected {ca}"));
                }
            }
            for (host, kinds) in &e.steps {
                let got: Vec<&str> = p
                    .steps
                    .iter()
                    .filter(|s| &s.host.to_string() == host)
                    .map(|s| s.kind.name())
                    .collect();
                if &got != kinds {
                    return Err(format!("steps of {host}: {got:?}, expected {kinds:?}"));
                }
            }
            if let Some((b, a, h, q)) = e.etcd {
                let got = (
                    p.etcd.members_before,
                    p.etcd.members_after,
                    p.etcd.min_healthy,
                    p.etcd.quorum,
                );
                if got != (b, a, h, q) {
                    return Err(format!("etcd {got:?}, expected {:?}", (b, a, h, q)));
                }
            }
            let find = |what: &str| -> Result<usize, String> {
                let (host, kind) = what
                    .split_once(' ')
                    .ok_or(format!("bad step name {what}"))?;
                p.steps
                    .iter()
                    .find(|s| s.host.to_string() == host && s.kind.name() == kind)
                    .map(|s| s.id)
                    .ok_or(format!("no step {what}"))
            };
            for (a, b) in &e.ordered {
                if !graph::precedes(&p.steps, find(a)?, find(b)?) {
                    return Err(format!("{a} does not precede {b}"));
                }
            }
            if p.drift.len() != e.drift {
                return Err(format!(
                    "{} drift entries, expected {}",
                    p.drift.len(),
                    e.drift
                ));
            }
            let text = render::text(p, false);
            for c in &e.contains {
                if !text.contains(c) {
                    return Err(format!("plan text lacks {c:?}:\n{text}"));
                }
            }
            check_invariants(p, &inputs)?;
            // An applied plan converges: planning again changes nothing.
            // (A host the probe could not run on has no facts to simulate.)
            let unprobed = inputs
                .reality
                .hosts
                .iter()
                .any(|h| matches!(h.probe, Probe::HostKeyChanged { .. }));
            if !p.refresh_only && p.has_changes() && inputs.options.target.is_empty() && !unprobed {
                let (state2, reality2) = simulate_apply(p, &inputs);
                if p.destroy {
                    // A destroy ends with an empty state of the same lineage.
                    if !state2.hosts.is_empty() || state2.cluster.is_some() {
                        return Err(format!("state after destroy is not empty: {state2:?}"));
                    }
                    if state2.lineage != inputs.state.lineage {
                        return Err("destroy changed the state's lineage".into());
                    }
                }
                let again = plan::diff(
                    &inputs.spec,
                    &state2,
                    &reality2,
                    &inputs.desired,
                    &PlanOptions {
                        exclude: inputs.options.exclude.clone(),
                        destroy: p.destroy,
                        ..Default::default()
                    },
                )
                .map_err(|r| format!("replanning after apply refused: {}", refusal_text(&r)))?;
                if again.has_changes() {
                    return Err(format!(
                        "replanning after apply still has changes:\n{}",
                        render::text(&again, false)
                    ));
                }
            }
            insta::assert_snapshot!(format!("{name}__text"), text);
            insta::assert_snapshot!(format!("{name}__json"), render::json(p));
            insta::assert_snapshot!(format!("{name}__dot"), render::dot(p));
            Ok(())
        }
    }
}

#[test]
fn decision_table_cases() {
    let cases = load_cases();
    assert!(cases.len() >= 20, "only {} cases found", cases.len());
    let mut failures = Vec::new();
    for (name, case) in &cases {
        if let Err(e) = check_case(name, case) {
            failures.push(format!("{name} ({}): {e}", case.description));
        }
    }
    assert!(
        failures.is_empty(),
        "failing cases:\n{}",
        failures.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Invariants every plan must satisfy.

fn quorum(n: usize) -> usize {
    n / 2 + 1
}

fn check_invariants(p: &Plan, i: &Inputs) -> Result<(), String> {
    graph::check_acyclic(&p.steps).map_err(|e| e.to_string())?;
    for (pos, s) in p.steps.iter().enumerate() {
        if s.id != pos || s.after.iter().any(|a| *a >= s.id) {
            return Err(format!("step {pos} is out of topological order"));
        }
    }
    // Membership changes are totally ordered, each followed by a health gate before the next.
    let membership: Vec<usize> = p
        .steps
        .iter()
        .filter(|s| s.kind.is_membership_change())
        .map(|s| s.id)
        .collect();
    for w in membership.windows(2) {
        if !graph::precedes(&p.steps, w[0], w[1]) {
            return Err(format!(
                "membership steps {} and {} are not ordered",
                w[0], w[1]
            ));
        }
        let gated = p.steps.iter().any(|g| {
            matches!(g.kind, StepKind::WaitHealthy { .. })
                && graph::precedes(&p.steps, w[0], g.id)
                && graph::precedes(&p.steps, g.id, w[1])
        });
        if !gated {
            return Err(format!(
                "no health gate between steps {} and {}",
                w[0], w[1]
            ));
        }
    }
    // Replay the (totally ordered) membership changes: every topological order sees them in
    // this order, so this checks them all.
    // (member ID, peer URL, healthy)
    let mut members: Vec<(String, String, bool)> = Vec::new();
    if let Some(uid) = &p.cluster_uid {
        let healthy_urls: Vec<String> = i
            .reality
            .hosts
            .iter()
            .filter_map(|h| match &h.probe {
                Probe::Reached(f)
                    if f.view.as_ref().and_then(|v| v.cluster_uid.as_ref()) == Some(uid) =>
                {
                    f.status
                        .as_ref()?
                        .peer_address
                        .as_ref()
                        .map(|a| format!("{a}:2380"))
                }
                _ => None,
            })
            .collect();
        if let Some(v) = i.reality.hosts.iter().find_map(|h| match &h.probe {
            Probe::Reached(f) => f
                .view
                .as_ref()
                .filter(|v| v.cluster_uid.as_ref() == Some(uid)),
            _ => None,
        }) {
            members = v
                .members
                .iter()
                .map(|m| {
                    (
                        m.member_id.clone().unwrap_or_default(),
                        m.peer_url.clone(),
                        // Scheme-blind, like the planner: doubles speak http to peers.
                        healthy_urls
                            .iter()
                            .any(|u| m.peer_url.ends_with(&format!("://{u}"))),
                    )
                })
                .collect();
        }
    }
    // Controller restarts (one member down until it is back) count too; they are chained with
    // the membership changes.
    let restarts_controller = |s: &k0sform::plan::Step| {
        matches!(s.kind, StepKind::Upgrade { .. } | StepKind::Reconfigure)
            && i.spec.host(&s.host).is_some_and(|h| h.role.is_controller())
    };
    let replayed: Vec<usize> = p
        .steps
        .iter()
        .filter(|s| s.kind.is_membership_change() || restarts_controller(s))
        .map(|s| s.id)
        .collect();
    for w in replayed.windows(2) {
        if !graph::precedes(&p.steps, w[0], w[1]) {
            return Err(format!(
                "membership change or controller restart {} and {} are not ordered",
                w[0], w[1]
            ));
        }
    }
    let mut min_healthy = members.iter().filter(|m| m.2).count();
    for id in &replayed {
        let s = &p.steps[*id];
        let healthy = members.iter().filter(|m| m.2).count();
        match &s.kind {
            StepKind::Upgrade { .. } | StepKind::Reconfigure if !members.is_empty() => {
                min_healthy = min_healthy.min(healthy.saturating_sub(1));
            }
            StepKind::RemoveMember { member_id, via, .. } => {
                if via == &s.host {
                    return Err(format!("member of {} removed through itself", s.host));
                }
                let pos = members
                    .iter()
                    .position(|m| &m.0 == member_id)
                    .ok_or(format!("removing unknown member {member_id}"))?;
                let (_, _, was_healthy) = members.remove(pos);
                let h = healthy - usize::from(was_healthy);
                if members.is_empty() || h < quorum(members.len()) {
                    return Err(format!("step {id} leaves {h} healthy of {}", members.len()));
                }
                min_healthy = min_healthy.min(h);
            }
            StepKind::RemoveUnknownMember { peer_url, .. } => {
                if !p.destroy {
                    return Err(format!(
                        "step {id} removes an unknown member outside destroy"
                    ));
                }
                let pos = members
                    .iter()
                    .position(|m| &m.1 == peer_url)
                    .ok_or(format!("removing {peer_url}, which is no member"))?;
                let (_, _, was_healthy) = members.remove(pos);
                let h = healthy - usize::from(was_healthy);
                if members.is_empty() || h < quorum(members.len()) {
                    return Err(format!("step {id} leaves {h} healthy of {}", members.len()));
                }
                min_healthy = min_healthy.min(h);
            }
            StepKind::JoinController { .. } => {
                // The cluster must be whole before an add, and reach quorum once the new
                // member runs.
                if healthy < members.len() || healthy + 1 < quorum(members.len() + 1) {
                    return Err(format!(
                        "step {id} joins with {healthy} healthy of {} members",
                        members.len()
                    ));
                }
                min_healthy = min_healthy.min(healthy);
                members.push((format!("new{id}"), String::new(), true));
            }
            StepKind::Bootstrap => {
                if !members.is_empty() {
                    return Err("bootstrap over an existing cluster".into());
                }
                members.push((format!("new{id}"), String::new(), true));
            }
            _ => {}
        }
    }
    if !replayed.is_empty() && p.etcd.min_healthy != min_healthy {
        return Err(format!(
            "summary says min healthy {}, replay says {min_healthy}",
            p.etcd.min_healthy
        ));
    }
    // A host is reset only after its membership is gone, and only with a machine-id.
    for s in &p.steps {
        if let StepKind::ResetHost { machine_id, .. } = &s.kind {
            if machine_id.is_empty() {
                return Err(format!("reset of {} without a machine-id", s.host));
            }
            for r in &p.steps {
                if let StepKind::RemoveMember { .. } = r.kind
                    && r.host == s.host
                    && !graph::precedes(&p.steps, r.id, s.id)
                {
                    return Err(format!("{} reset before its member is removed", s.host));
                }
                if let StepKind::DeleteObjects { .. } = r.kind
                    && r.host == s.host
                    && r.id > s.id
                    && matches!(
                        p.changes
                            .iter()
                            .find(|c| c.host == s.host)
                            .map(|c| c.action),
                        Some(Action::Remove)
                    )
                {
                    return Err(format!("{} reset before its objects are deleted", s.host));
                }
            }
        }
        // Upload and config come before install.
        if matches!(
            s.kind,
            StepKind::JoinController { .. } | StepKind::JoinWorker { .. } | StepKind::Bootstrap
        ) {
            for r in &p.steps {
                if r.host == s.host
                    && matches!(
                        r.kind,
                        StepKind::UploadBinary { .. } | StepKind::WriteConfig { .. }
                    )
                    && !graph::precedes(&p.steps, r.id, s.id)
                {
                    return Err(format!("{}: {} not before the join", s.host, r.kind.name()));
                }
            }
        }
    }
    // Deterministic.
    let again = run(i).map_err(|r| r.message)?;
    if &again != p {
        return Err("planning twice gave different plans".into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Saved plans.

/// The inputs of the case in testdata/plans/NAME.
fn case_inputs(name: &str) -> Inputs {
    let (_, case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("case {name}"));
    build(&case)
}

/// `case_inputs` with machine-ids and host key fingerprints that look like real ones, in the
/// state and the probe alike (the cases' `mid-c01` and `SHA256:key-c01` would not pass the
/// checks a saved plan is read with): hex and base64 of the fixtures' own values.
fn saved_case_inputs(name: &str) -> Inputs {
    use base64::Engine as _;
    let mut i = case_inputs(name);
    let machine = |m: &mut String| {
        let hex: String = m.bytes().map(|b| format!("{b:02x}")).collect();
        *m = format!("{hex:0<32}");
    };
    let key = |k: &mut String| {
        *k = format!(
            "SHA256:{}",
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(k.as_bytes())
        );
    };
    for h in &mut i.state.hosts {
        machine(&mut h.machine_id);
        key(&mut h.host_key);
    }
    for h in &mut i.reality.hosts {
        if let Probe::Reached(f) = &mut h.probe {
            machine(&mut f.machine_id);
            key(&mut f.host_key);
        }
    }
    i
}

/// A `files[].src` glob (k0sctl `cluster/uploadfile.go`): each match is planned as its own
/// upload line (source → destination, sha256), in path order whatever order the folder lists
/// them in; once they are on the host, the next plan is a no-op.
#[test]
fn glob_matches_are_planned_one_line_each_and_then_nothing() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(d.path().join("images/sub")).unwrap();
    for f in ["c.tar", "a.tar", "b.tar", "notes.txt", "sub/d.tar"] {
        std::fs::write(d.path().join("images").join(f), f).unwrap();
    }
    let yaml = d.path().join("k0sctl.yaml");
    std::fs::write(
        &yaml,
        "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata:\n  name: prod\nspec:\n  hosts:\n    - role: controller\n      ssh: {address: 10.0.0.1}\n    - role: worker\n      ssh: {address: 10.0.1.1}\n      files:\n        - {name: images, src: images/*.tar, dstDir: /var/lib/k0s/images, perm: '0640'}\n  k0s:\n    version: v1.33.4+k0s.0\n",
    )
    .unwrap();
    let env = |_: &str| None;
    let loaded = k0sform::spec::load_with(
        &[yaml],
        &k0sform::spec::LoadOptions {
            env: &env,
            stdin: None,
        },
    )
    .expect("spec loads");
    let files = k0sform::files::desired(&loaded.spec.hosts[1]).expect("expands");
    // The `files` case's running worker w01 gets the glob's matches instead of its own files.
    let mut i = case_inputs("files");
    let w01 = HostId::new("10.0.1.1".to_string(), 22);
    i.desired
        .hosts
        .iter_mut()
        .find(|h| h.host == w01)
        .expect("w01")
        .files = files.clone();
    // The probe reports every file the spec names, here none present.
    facts_mut(&mut i.reality, &w01).expect("w01 reached").files = files
        .iter()
        .map(|f| RemoteFile {
            path: f.remote.clone(),
            ..Default::default()
        })
        .collect();
    let p = run(&i).expect("plan");
    let dir = d.path().display().to_string();
    let text = render::text(&p, false).replace(&dir, "[DIR]");
    let w01_lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("~ worker w01"))
        .take_while(|l| !l.is_empty())
        .collect();
    insta::assert_snapshot!(w01_lines.join("\n"));
    let (state, reality) = simulate_apply(&p, &i);
    let again = plan::diff(
        &i.spec,
        &state,
        &reality,
        &i.desired,
        &PlanOptions::default(),
    )
    .expect("replan");
    assert!(!again.has_changes(), "{}", render::text(&again, false));
}

/// A URL `files[].src` (k0sctl `phase/uploadfiles.go` `uploadURL`): its `%v` `%p` tokens are
/// expanded for the host (spec version, host architecture) in the planned step; without a
/// `sha256` the plan says the download is not verified, and once the state records the hash
/// the host got from that URL, a host with that file plans nothing; another version (another
/// URL) downloads again; with a `sha256` the plan holds the file to it.
#[test]
fn url_sources_are_expanded_per_host_and_recorded_hashes_hold() {
    let mut i = case_inputs("files");
    let w01 = HostId::new("10.0.1.1".to_string(), 22);
    let bundle = k0sform::files::DesiredFile {
        name: "bundle".into(),
        remote: "/var/lib/k0s/images/bundle-%v-%p.tar".into(),
        source: String::new(),
        url: Some("http://127.0.0.1:8080/b/bundle-%v-%p.tar".into()),
        sha256: String::new(),
        mode: 0o644,
        user: None,
        group: None,
        dir_mode: 0o755,
    };
    i.desired
        .hosts
        .iter_mut()
        .find(|h| h.host == w01)
        .expect("w01")
        .files = vec![bundle.clone()];
    let facts = facts_mut(&mut i.reality, &w01).expect("w01 reached");
    facts.arch = "x86_64".into();
    facts.files = vec![RemoteFile {
        path: bundle.remote.clone(),
        ..Default::default()
    }];
    let p = run(&i).expect("plan");
    let url = "http://127.0.0.1:8080/b/bundle-v1.33.4%2Bk0s.0-amd64.tar";
    let text = render::text(&p, false);
    let w01_lines = |text: &str| -> String {
        text.lines()
            .skip_while(|l| !l.contains("worker w01"))
            .take_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    insta::assert_snapshot!(w01_lines(&text));
    let planned = p
        .steps
        .iter()
        .find_map(|s| match &s.kind {
            StepKind::UploadFiles { files } if s.host == w01 => Some(files),
            _ => None,
        })
        .expect("w01 upload");
    assert_eq!(planned[0].url.as_deref(), Some(url));
    assert_eq!(
        planned[0].sha256, "",
        "an unverified download checks nothing"
    );

    // The host got it; the state records what the host computed: nothing to do.
    let got = sha256_hex("bundle");
    i.state.record_download(k0sform::state::DownloadRecord {
        address: w01.address.clone(),
        port: 22,
        path: bundle.remote.clone(),
        url_sha256: sha256_hex(url),
        sha256: got.clone(),
    });
    let facts = facts_mut(&mut i.reality, &w01).expect("w01 reached");
    facts.files[0] = RemoteFile {
        path: bundle.remote.clone(),
        sha256: Some(got.clone()),
        mode: Some(0o644),
        user: Some("root".into()),
        group: Some("root".into()),
        uid: Some(0),
        gid: Some(0),
    };
    let p = run(&i).expect("plan");
    assert!(
        !render::text(&p, false).contains("worker w01"),
        "{}",
        render::text(&p, false)
    );
    // A record of another URL (another version) is no record.
    i.spec.k0s.version = Some(K0sVersion::parse("v1.33.5+k0s.0").unwrap());
    let p = run(&i).expect("plan");
    assert!(
        render::text(&p, false)
            .contains("/var/lib/k0s/images/bundle-%v-%p.tar (not downloaded from this URL yet)"),
        "{}",
        render::text(&p, false)
    );
    i.spec.k0s.version = Some(K0sVersion::parse("v1.33.4+k0s.0").unwrap());
    // The spec's sha256 is what counts when it is given.
    let other = sha256_hex("other");
    i.desired
        .hosts
        .iter_mut()
        .find(|h| h.host == w01)
        .expect("w01")
        .files[0]
        .sha256 = other.clone();
    let p = run(&i).expect("plan");
    assert!(
        w01_lines(&render::text(&p, false)).contains(&format!(
            "~ file {url} → /var/lib/k0s/images/bundle-%v-%p.tar (0644, sha256 {}…)",
            &other[..4]
        )),
        "{}",
        render::text(&p, false)
    );
}

#[test]
fn saved_plan_detects_every_kind_of_staleness() {
    let i = saved_case_inputs("replace_machine_id");
    let p = run(&i).expect("plan");
    let saved = SavedPlan::new(p, &i.state, "aaaa", &i.reality);
    saved
        .verify(&i.state, "aaaa", &i.reality)
        .expect("fresh plan verifies");
    let back = SavedPlan::from_json(&saved.to_json()).unwrap();
    assert_eq!(back, saved);
    back.verify(&i.state, "aaaa", &i.reality).unwrap();

    let mut altered = saved.clone();
    altered.plan.cluster_name = "other".into();
    let e = altered.verify(&i.state, "aaaa", &i.reality).unwrap_err();
    assert!(e.reasons[0].contains("altered"), "{e}");

    let mut moved = i.state.clone();
    moved.serial += 1;
    let e = saved.verify(&moved, "aaaa", &i.reality).unwrap_err();
    assert_eq!(
        e.reasons,
        vec!["the state moved from serial 12 to 13".to_string()]
    );

    let e = saved.verify(&i.state, "bbbb", &i.reality).unwrap_err();
    assert_eq!(e.reasons.len(), 1);
    assert!(e.reasons[0].starts_with("the spec changed"), "{e}");

    let mut rebuilt = i.reality.clone();
    if let Probe::Reached(f) = &mut rebuilt.hosts[1].probe {
        f.machine_id = "fresh-machine".into();
    }
    let e = saved.verify(&i.state, "aaaa", &rebuilt).unwrap_err();
    assert_eq!(e.reasons.len(), 1);
    assert!(e.reasons[0].contains("machine-id changed"), "{e}");
    assert!(e.to_string().starts_with("the saved plan is stale"));
}

/// A saved plan is a review artefact: its seal is a plain sha256 anyone can recompute, so a file
/// whose steps were swapped for a hook line (`id > /tmp/x`) and resealed passes the seal, and
/// `apply FILE` must refuse it because the plan derived again from spec, state and probe differs.
#[test]
fn resealed_plan_with_tampered_steps_is_not_the_derived_plan() {
    let i = case_inputs("add_worker");
    let p = run(&i).expect("plan");
    let saved = SavedPlan::with_options(p.clone(), &i.state, "aaaa", &i.reality, i.options.clone());
    let opts = saved.options_for_apply(&i.options).expect("same options");
    assert_eq!(opts, i.options);
    saved
        .matches(&run(&i).unwrap())
        .expect("untampered plan matches");

    let mut evil = saved.clone();
    let host = p.steps[0].host.clone();
    evil.plan.steps = vec![k0sform::plan::Step {
        id: 0,
        host,
        kind: StepKind::RunHooks {
            action: "apply".into(),
            stage: "before".into(),
            lines: vec!["id > /tmp/x".into()],
        },
        after: vec![],
    }];
    evil.seal();
    evil.verify(&i.state, "aaaa", &i.reality)
        .expect("a resealed file passes the seal: it proves nothing");
    let e = evil.matches(&run(&i).unwrap()).unwrap_err();
    assert!(e.to_string().contains("step 0 is run_hooks"), "{e}");
    // Steps kept, only the shown description changed: refused as well.
    let mut evil = saved.clone();
    evil.plan.changes.clear();
    evil.seal();
    assert!(evil.matches(&run(&i).unwrap()).is_err());
}

/// `options.replace` written into a saved plan (resealed) would switch off the host-key check
/// for that host: `apply FILE` takes `-replace` and `-exclude` only from its command line.
#[test]
fn resealed_plan_cannot_grant_replace_or_exclude() {
    let i = case_inputs("add_worker");
    let p = run(&i).expect("plan");
    let addr = p.steps[0].host.address.clone();
    let mut evil = SavedPlan::with_options(p, &i.state, "aaaa", &i.reality, i.options.clone());
    evil.options.replace = vec![addr.clone()];
    evil.seal();
    let e = evil.options_for_apply(&PlanOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "made with -replace {addr} but apply was given no -replace"
        )),
        "{e}"
    );
    // Repeated on the command line, it is the user's choice.
    let cli = PlanOptions {
        replace: vec![addr.clone()],
        ..Default::default()
    };
    assert_eq!(
        evil.options_for_apply(&cli).unwrap().replace,
        vec![addr.clone()]
    );

    let mut evil = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    evil.options.exclude = vec![addr.clone()];
    evil.seal();
    assert!(evil.options_for_apply(&PlanOptions::default()).is_err());
    // Narrowing options come from the file; a stricter host-key rule from either side.
    let mut narrow = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    narrow.options.target = vec![addr.clone()];
    narrow.options.refresh_only = true;
    let strict = PlanOptions {
        refuse_first_contact: true,
        ..Default::default()
    };
    let o = narrow.options_for_apply(&strict).unwrap();
    assert_eq!(
        (o.target, o.refresh_only, o.refuse_first_contact),
        (vec![addr], true, true)
    );
}

/// `-no-drain` in a saved plan (resealed) would restart hosts under their pods: `apply FILE`
/// must be given it again, and a plan made with drains cannot lose them either.
#[test]
fn saved_plan_cannot_switch_drains_off() {
    let i = case_inputs("upgrade");
    let mut evil = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    evil.options.no_drain = true;
    evil.seal();
    let e = evil.options_for_apply(&PlanOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("made with -no-drain but apply was run without it"),
        "{e}"
    );
    let cli = PlanOptions {
        no_drain: true,
        ..Default::default()
    };
    assert!(evil.options_for_apply(&cli).unwrap().no_drain);
    let plain = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    assert!(plain.options_for_apply(&cli).is_err());
}

/// Issue 28, item 4: `-restore-from` and `-allow-downgrade` in a saved plan (resealed) choose
/// what runs: `apply FILE` must be given them again, the archive as read from the disk now
/// (path, sha256, peer address) must be the file's, and what is used is the disk's.
#[test]
fn saved_plan_cannot_choose_the_archive_or_a_downgrade() {
    use k0sform::plan::RestoreArchive;
    let i = case_inputs("upgrade");
    let archive = |path: &str, sha: &str, peer: Option<&str>| RestoreArchive {
        path: path.into(),
        sha256: sha.into(),
        peer_address: peer.map(str::to_string),
    };
    let with = |r: Option<RestoreArchive>| PlanOptions {
        restore: r,
        ..Default::default()
    };
    let mut evil = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    evil.options.restore = Some(archive("/b/backup.tar.gz", "11", Some("10.0.0.1")));
    evil.seal();
    for (cli, needle) in [
        (
            with(None),
            "made with -restore-from /b/backup.tar.gz but apply was given no -restore-from",
        ),
        (
            with(Some(archive("/c/backup.tar.gz", "11", Some("10.0.0.1")))),
            "apply was given -restore-from /c/backup.tar.gz",
        ),
        (
            with(Some(archive("/b/backup.tar.gz", "22", Some("10.0.0.1")))),
            "/b/backup.tar.gz changed since the plan was made",
        ),
        (
            with(Some(archive("/b/backup.tar.gz", "11", None))),
            "the plan records the etcd peer address 10.0.0.1, the archive has none",
        ),
    ] {
        let e = evil.options_for_apply(&cli).unwrap_err();
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    let disk = archive("/b/backup.tar.gz", "11", Some("10.0.0.1"));
    let o = evil.options_for_apply(&with(Some(disk.clone()))).unwrap();
    assert_eq!(o.restore, Some(disk.clone()));
    let plain = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    assert!(plain.options_for_apply(&with(Some(disk))).is_err());

    let mut evil = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    evil.options.allow_downgrade = true;
    evil.seal();
    let e = evil.options_for_apply(&PlanOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("made with -allow-downgrade but apply was run without it"),
        "{e}"
    );
    let cli = PlanOptions {
        allow_downgrade: true,
        ..Default::default()
    };
    assert!(evil.options_for_apply(&cli).unwrap().allow_downgrade);
    assert!(plain.options_for_apply(&cli).is_err());
}

/// Issue 28, item 4: the k0s version a saved plan chose (the spec names none) is never taken
/// from the file: every version it names must be a k0s version when it is read, and the one
/// chosen again at apply must be the file's.
#[test]
fn saved_plan_versions_are_checked_and_chosen_again() {
    use k0sform::plan::ResolvedVersion;
    let i = saved_case_inputs("add_worker");
    let p = run(&i).expect("plan");
    let mut saved = SavedPlan::new(p.clone(), &i.state, "aaaa", &i.reality);
    let version = |v: &str| k0sform::version::K0sVersion::parse(v).expect("a k0s version");
    saved.plan.k0s_version = Some(ResolvedVersion {
        version: version("v1.33.4+k0s.0"),
        source: "latest stable release".into(),
    });
    saved.seal();
    let good = saved.to_json();
    SavedPlan::from_json(&good).expect("a k0s version parses");
    // Not a version at all: refused as the file is read (K0sVersion's own parser).
    for bad in [
        "v1.33.4+k0s.0/../../x",
        "latest",
        "v1.33.4 --help",
        "",
        "v1.33.4+k0s.0\\u001b[2J",
    ] {
        let evil = good.replace("\"v1.33.4+k0s.0\"", &format!("\"{bad}\""));
        assert_ne!(evil, good);
        let e = SavedPlan::from_json(&evil).unwrap_err();
        assert!(e.to_string().contains("is not a k0s version"), "{bad}: {e}");
    }
    // A version too old for k0sform, in the plan's choice and in a step: the field is named.
    let mut evil = saved.clone();
    evil.plan.k0s_version.as_mut().unwrap().version = version("v0.10.0");
    evil.seal();
    let e = SavedPlan::from_json(&evil.to_json()).unwrap_err();
    assert!(e.to_string().contains("plan.k0s_version.version"), "{e}");
    let mut evil = saved.clone();
    evil.plan.steps.insert(
        0,
        k0sform::plan::Step {
            id: 0,
            host: p.steps[0].host.clone(),
            kind: StepKind::DownloadBinary {
                url: "https://example.invalid/k0s".into(),
                sha256: "ab".repeat(32),
                version: version("v0.10.0"),
            },
            after: vec![],
        },
    );
    evil.seal();
    let e = SavedPlan::from_json(&evil.to_json()).unwrap_err();
    assert!(e.to_string().contains("plan.steps[0].kind.version"), "{e}");

    let mut derived = p.clone();
    derived.k0s_version = Some(ResolvedVersion {
        version: version("v1.33.5+k0s.0"),
        source: "latest stable release".into(),
    });
    let e = saved.matches(&derived).unwrap_err();
    assert!(
        e.to_string().contains(
            "the file installs k0s v1.33.4+k0s.0 (latest stable release), k0s v1.33.5+k0s.0 (latest stable release) is chosen now"
        ),
        "{e}"
    );
}

/// First contact is shown per host, and `-trust-new-host-keys=false` refuses it (exit 3) naming
/// the offered key; a host pinned with ssh.hostKey or recorded in the state is not first contact.
#[test]
fn first_contact_is_shown_and_refused_on_request() {
    let mut i = case_inputs("add_worker");
    let p = run(&i).expect("plan");
    assert_eq!(p.first_contacts.len(), 1, "{:?}", p.first_contacts);
    let new = p.first_contacts[0].clone();
    let text = render::text(&p, false);
    assert!(
        text.contains(&format!("first contact: trusting {}", new.fingerprint)),
        "{text}"
    );
    i.options.refuse_first_contact = true;
    let r = run(&i).unwrap_err();
    assert_eq!(r.exit_code(), 3);
    assert!(r.details[0].contains(&new.fingerprint), "{r:?}");
    // Pinned in the spec: checked, not trusted on first use.
    for h in &mut i.spec.hosts {
        if h.id() == new.host {
            h.ssh.host_key = Some(new.fingerprint.clone());
        }
    }
    let p = run(&i).expect("pinned host plans");
    assert!(p.first_contacts.is_empty());
}

/// Issue 28, item 10: `-trust-new-host-keys=false` is checked on the keys alone, before the
/// probe runs (`refuse_first_contact_keys`). On every plan case it is never stricter than the
/// plan's own review: what it refuses, the plan refuses too; a new host is refused, a host
/// that moved (it offers the key recorded at its old address) is not.
#[test]
fn first_contact_keys_are_refused_before_the_probe_as_the_plan_would() {
    use k0sform::ssh::{ConnectedBastion, ConnectedHost};
    let connections = |r: &Reality| -> Vec<(HostId, ConnectedHost)> {
        r.hosts
            .iter()
            .filter_map(|h| {
                let f = h.probe.facts()?;
                Some((
                    h.id.clone(),
                    ConnectedHost {
                        fingerprint: f.host_key.clone(),
                        public_key: f.host_public_key.clone().unwrap_or_default(),
                        first_contact: true,
                        bastions: f
                            .bastions
                            .iter()
                            .map(|b| ConnectedBastion {
                                id: b.bastion.clone(),
                                fingerprint: b.host_key.clone(),
                                public_key: b.host_public_key.clone(),
                                first_contact: true,
                            })
                            .collect(),
                    },
                ))
            })
            .collect()
    };
    let early = |i: &Inputs| {
        let c = connections(&i.reality);
        let keys: Vec<(&HostId, &ConnectedHost)> = c.iter().map(|(id, c)| (id, c)).collect();
        plan::refuse_first_contact_keys(&i.spec, &i.state, &i.options, &keys)
    };
    for (name, case) in load_cases() {
        let i = build(&case);
        let Ok(p) = run(&i) else { continue };
        if let Err(r) = early(&i) {
            assert_eq!(r.exit_code(), 3, "{name}");
            for f in &p.first_contacts {
                assert!(
                    r.details.iter().any(|d| d.contains(&f.fingerprint)),
                    "{name}: {r:?}"
                );
            }
            assert_eq!(r.details.len(), p.first_contacts.len(), "{name}: {r:?}");
        }
    }
    let i = case_inputs("add_worker");
    let new = run(&i).unwrap().first_contacts[0].clone();
    let r = early(&i).unwrap_err();
    assert!(
        r.details[0].contains(&format!("{}: offers {}", new.host, new.fingerprint)),
        "{r:?}"
    );
    let i = case_inputs("move_worker");
    assert!(run(&i).unwrap().first_contacts.is_empty());
    early(&i).expect("a moved host offers its recorded key");
}

/// Hook lines show values from the environment as the `${NAME}` they came from, in the plan's
/// steps, text, JSON and saved plan; `-show-secrets` shows them (issue 14, item 7).
#[test]
fn hook_lines_show_environment_values_as_written() {
    let mut i = case_inputs("hooks");
    // As if the spec said `echo ${STAGE_SECRET}` with STAGE_SECRET=up-before in the environment.
    i.spec
        .set_env_values([("STAGE_SECRET".to_string(), "up-before".to_string())]);
    let p = run(&i).expect("plan");
    let hook_lines: Vec<&String> = p
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::RunHooks { lines, .. } => Some(lines),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(
        hook_lines
            .iter()
            .any(|l| l.as_str() == "echo ${STAGE_SECRET}"),
        "{hook_lines:?}"
    );
    let text = render::text(&p, false);
    let json = render::json(&p);
    let saved = SavedPlan::new(p.clone(), &i.state, "aaaa", &i.reality).to_json();
    for (what, out) in [("text", &text), ("json", &json), ("saved plan", &saved)] {
        assert!(!out.contains("up-before"), "{what}: {out}");
        assert!(out.contains("${STAGE_SECRET}"), "{what}: {out}");
    }
    assert!(
        text.contains("hooks upgrade.before run: echo ${STAGE_SECRET}"),
        "{text}"
    );
    i.options.show_secrets = true;
    let p = run(&i).expect("plan");
    assert!(render::text(&p, false).contains("hooks upgrade.before run: echo up-before"));
}

/// Values from the environment in install flags and k0s.yaml are shown as their `${NAME}`
/// in the plan's reasons and config diff, unless `-show-secrets` (issue 14, item 7).
#[test]
fn flags_and_config_show_environment_values_as_written() {
    let mut i = case_inputs("reconfigure");
    i.spec.set_env_values([
        (
            "METRICS".to_string(),
            "--enable-metrics-scraper=true".to_string(),
        ),
        ("TELEMETRY".to_string(), "false".to_string()),
    ]);
    let text = render::text(&run(&i).expect("plan"), false);
    assert!(
        text.contains("install flags differ (not wanted: ${METRICS})"),
        "{text}"
    );
    assert!(text.contains("+    enabled: ${TELEMETRY}"), "{text}");
    assert!(!text.contains("--enable-metrics-scraper=true"), "{text}");
    i.options.show_secrets = true;
    let text = render::text(&run(&i).expect("plan"), false);
    assert!(
        text.contains("not wanted: --enable-metrics-scraper=true"),
        "{text}"
    );
    assert!(text.contains("+    enabled: false"), "{text}");
}

/// With `-target`, a bastion's key is recorded only when a host the plan is for goes through
/// it: a targeted host, or one the plan changes for it (the bootstrap controller). A bastion
/// only other hosts go through is still shown as a first contact, and recorded by the plan
/// for them (or by a plan without `-target`).
#[test]
fn target_records_only_bastions_its_hosts_go_through() {
    use k0sform::reality::BastionKey;
    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvZ/q36TdInhTZoW5bXPQ/Hey6Hm97hfZmb+65XdDbu";
    let bastion = HostId::new("127.0.0.50", 22);
    // `behind` is reached through the bastion, every other host directly.
    let through = |i: &mut Inputs, behind: &HostId| {
        for h in &mut i.spec.hosts {
            if &h.id() == behind {
                h.ssh.bastion = Some(Box::new(SshTarget::new("127.0.0.50", 22)));
            }
        }
        for h in &mut i.reality.hosts {
            if let Probe::Reached(f) = &mut h.probe
                && &h.id == behind
            {
                f.bastions = vec![BastionKey {
                    bastion: HostId::new("127.0.0.50", 22),
                    host_key: k0sform::ssh::fingerprint(KEY).unwrap(),
                    host_public_key: KEY.to_string(),
                }];
            }
        }
    };
    let recorded = |p: &Plan| -> Vec<HostId> {
        p.steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::RecordBastion { .. }))
            .map(|s| s.host.clone())
            .collect()
    };
    let target = |i: &mut Inputs, t: &[&str]| {
        i.options.target = t.iter().map(|s| s.to_string()).collect();
        run(i).expect("plan")
    };

    // w01 goes through the bastion; nothing changes anywhere.
    let w01 = HostId::new("10.0.1.1", 22);
    let mut i = case_inputs("noop");
    through(&mut i, &w01);
    let p = target(&mut i, &["10.0.0.1"]);
    assert_eq!(recorded(&p), Vec::<HostId>::new(), "{:?}", p.steps);
    assert!(!p.has_changes(), "{:?}", p.steps);
    assert!(
        p.first_contacts
            .iter()
            .any(|f| f.bastion && f.host == bastion),
        "{:?}",
        p.first_contacts
    );
    assert!(
        !render::text(&p, false).contains("bastion host key to record"),
        "{}",
        render::text(&p, false)
    );
    assert_eq!(
        recorded(&target(&mut i, &["10.0.1.1"])),
        vec![bastion.clone()]
    );
    assert_eq!(
        recorded(&target(&mut i, &["10.0.0.2", "10.0.1.1"])),
        vec![bastion.clone()]
    );
    assert_eq!(recorded(&target(&mut i, &[])), vec![bastion.clone()]);

    // -target w01 on a new cluster bootstraps c01 too: c01's bastion is recorded, c02's not.
    let mut i = case_inputs("target_needs_bootstrap");
    let c01 = HostId::new("10.0.0.1", 22);
    through(&mut i, &c01);
    assert_eq!(
        recorded(&target(&mut i, &["10.0.1.1"])),
        vec![bastion.clone()]
    );
    let mut i = case_inputs("target_needs_bootstrap");
    through(&mut i, &HostId::new("10.0.0.2", 22));
    assert_eq!(
        recorded(&target(&mut i, &["10.0.1.1"])),
        Vec::<HostId>::new()
    );
}

/// Bastions are held to the hosts' rules: a bastion with no recorded key is a first contact
/// (shown, refused with `-trust-new-host-keys=false`) and gets a `RecordBastion` step; once
/// recorded it is quiet; a changed bastion key refuses the plan (exit 3) naming the bastion,
/// whatever `-replace` says about the hosts behind it; `-replace BASTION` accepts the new key.
#[test]
fn bastion_keys_are_shown_recorded_and_checked() {
    use k0sform::reality::BastionKey;
    use k0sform::state::BastionState;
    const KEY1: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvZ/q36TdInhTZoW5bXPQ/Hey6Hm97hfZmb+65XdDbu";
    const KEY2: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFP+/ojncWRTHg/eH9zkhBM5UfE1so5lUGxA6hGnxOyE";
    let fp1 = k0sform::ssh::fingerprint(KEY1).unwrap();
    let fp2 = k0sform::ssh::fingerprint(KEY2).unwrap();
    let bastion = HostId::new("127.0.0.50", 22);
    let mut i = case_inputs("noop");
    for h in &mut i.spec.hosts {
        h.ssh.bastion = Some(Box::new(SshTarget::new("127.0.0.50", 22)));
    }
    let through = |i: &mut Inputs, key: &str| {
        for h in &mut i.reality.hosts {
            if let Probe::Reached(f) = &mut h.probe {
                f.bastions = vec![BastionKey {
                    bastion: HostId::new("127.0.0.50", 22),
                    host_key: k0sform::ssh::fingerprint(key).unwrap(),
                    host_public_key: key.to_string(),
                }];
            }
        }
    };
    through(&mut i, KEY1);

    // First contact: shown, and recorded by a step of its own.
    let p = run(&i).expect("plan");
    let fc: Vec<_> = p.first_contacts.iter().filter(|f| f.bastion).collect();
    assert_eq!(fc.len(), 1, "{:?}", p.first_contacts);
    assert_eq!(fc[0].host, bastion);
    assert_eq!(fc[0].fingerprint, fp1);
    let text = render::text(&p, false);
    assert!(
        text.contains(&format!(
            "bastion (127.0.0.50): first contact: trusting {fp1}"
        )),
        "{text}"
    );
    assert!(text.contains("1 bastion host key to record"), "{text}");
    assert!(
        text.contains(&format!("  + bastion (127.0.0.50): {fp1}")),
        "{text}"
    );
    let rec: Vec<_> = p
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::RecordBastion { .. }))
        .collect();
    assert_eq!(rec.len(), 1, "{:?}", p.steps);
    assert_eq!(rec[0].host, bastion);
    assert!(
        matches!(&rec[0].kind, StepKind::RecordBastion { fingerprint, public_key } if fingerprint == &fp1 && public_key == KEY1)
    );

    // -trust-new-host-keys=false refuses the unpinned bastion.
    i.options.refuse_first_contact = true;
    let r = run(&i).unwrap_err();
    assert_eq!(r.exit_code(), 3);
    assert!(
        r.details
            .iter()
            .any(|d| d.contains("bastion 127.0.0.50") && d.contains(&fp1)),
        "{r:?}"
    );
    i.options.refuse_first_contact = false;

    // Recorded: no first contact, nothing to do.
    i.state.upsert_bastion(BastionState {
        address: "127.0.0.50".into(),
        port: 22,
        host_key: fp1.clone(),
        host_public_key: KEY1.into(),
    });
    let p = run(&i).expect("plan");
    assert!(p.first_contacts.is_empty(), "{:?}", p.first_contacts);
    assert!(!p.has_changes(), "{:?}", p.steps);
    i.options.refuse_first_contact = true;
    run(&i).expect("a recorded bastion is no first contact");
    i.options.refuse_first_contact = false;

    // The bastion's key changed: refused naming the bastion, even with -replace on the hosts.
    let victim = i.reality.hosts[0].id.clone();
    let reached = i.reality.hosts[0].probe.clone();
    i.reality.hosts[0].probe = Probe::HostKeyChanged {
        expected: fp1.clone(),
        offered: fp2.clone(),
        bastion: Some(bastion.clone()),
    };
    let r = run(&i).unwrap_err();
    assert_eq!(r.exit_code(), 3);
    assert!(r.message.contains("bastion"), "{r:?}");
    assert!(
        r.details
            .iter()
            .any(|d| d.contains("bastion 127.0.0.50") && d.contains(&fp2)),
        "{r:?}"
    );
    i.options.replace = vec![victim.to_string()];
    let r = run(&i).unwrap_err();
    assert_eq!(
        r.exit_code(),
        3,
        "-replace HOST does not accept a bastion's key"
    );

    // -replace BASTION: the probe accepted the new key; it is first contact and recorded again.
    i.options.replace = vec!["127.0.0.50".into()];
    i.reality.hosts[0].probe = reached;
    through(&mut i, KEY2);
    let p = run(&i).expect("plan with -replace bastion");
    assert!(
        !p.warnings.iter().any(|w| w.contains("names no host")),
        "{:?}",
        p.warnings
    );
    assert!(
        p.first_contacts
            .iter()
            .any(|f| f.bastion && f.fingerprint == fp2)
    );
    assert!(p.steps.iter().any(
        |s| matches!(&s.kind, StepKind::RecordBastion { fingerprint, .. } if fingerprint == &fp2)
    ));

    // Two connections that saw two keys for one bastion: refused.
    let mut i2 = case_inputs("noop");
    for h in &mut i2.spec.hosts {
        h.ssh.bastion = Some(Box::new(SshTarget::new("127.0.0.50", 22)));
    }
    through(&mut i2, KEY1);
    let last = i2.reality.hosts.len() - 1;
    if let Probe::Reached(f) = &mut i2.reality.hosts[last].probe {
        f.bastions[0].host_key = fp2.clone();
        f.bastions[0].host_public_key = KEY2.into();
    }
    assert!(i2.reality.hosts.len() > 1);
    let r = run(&i2).unwrap_err();
    assert_eq!(r.exit_code(), 3);
    assert!(r.message.contains("different SSH host keys"), "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// Schema freshness: regenerate with
//   K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform plan::plan_schema_is_fresh

#[test]
fn plan_schema_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/plan.schema.json");
    let now = render::json_schema();
    if std::env::var_os("K0SFORM_UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &now).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == now,
        "schema/plan.schema.json is stale; regenerate with \
         `K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform plan::plan_schema_is_fresh`"
    );
    // And every case's JSON has the schema's top-level fields.
    let schema: serde_json::Value = serde_json::from_str(&now).unwrap();
    let required = schema["required"].as_array().unwrap();
    for r in ["format_version", "changes", "steps", "etcd"] {
        assert!(required.iter().any(|x| x == r), "{r} not required");
    }
}

// ---------------------------------------------------------------------------------------------
// Properties over generated clusters.

mod props {
    use super::*;
    use proptest::prelude::*;

    /// What happened to a host since the state was written.
    #[derive(Debug, Clone, Copy)]
    enum Fate {
        Healthy,
        Fresh,
        Rebuilt,
        Left,
        OldVersion,
        Removed,
        Reset,
        Down,
        /// Rebuilt with a new host key; the user passed -replace.
        RekeyedReplaced,
        /// Same machine at a new address (issue 16); a controller keeps its old address as
        /// privateAddress, so its etcd peer address does not change.
        Moved,
    }

    fn fate() -> impl Strategy<Value = Fate> {
        prop_oneof![
            4 => Just(Fate::Healthy),
            1 => Just(Fate::Fresh),
            1 => Just(Fate::Rebuilt),
            1 => Just(Fate::Left),
            1 => Just(Fate::OldVersion),
            1 => Just(Fate::Removed),
            1 => Just(Fate::Reset),
            1 => Just(Fate::Down),
            1 => Just(Fate::RekeyedReplaced),
            1 => Just(Fate::Moved),
        ]
    }

    fn scenario(ctrl: &[(Fate, bool)], workers: &[Fate], fresh_cluster: bool) -> Case {
        let v_new = "v1.33.4+k0s.0";
        let v_old = "v1.33.3+k0s.0";
        let mut case = Case {
            spec: SpecCase {
                name: "prop".into(),
                version: Some(v_new.parse().unwrap()),
                ..Default::default()
            },
            reality: RealityCase::default(),
            ..Default::default()
        };
        let mut state_hosts = Vec::new();
        let mut excluded = Vec::new();
        let mut replaced = Vec::new();
        let hosts = ctrl
            .iter()
            .enumerate()
            .map(|(n, (f, cw))| {
                let role = if *cw {
                    Role::ControllerWorker
                } else {
                    Role::Controller
                };
                (format!("10.0.0.{}", n + 1), format!("c{}", n + 1), role, *f)
            })
            .chain(workers.iter().enumerate().map(|(n, f)| {
                (
                    format!("10.0.1.{}", n + 1),
                    format!("w{}", n + 1),
                    Role::Worker,
                    *f,
                )
            }));
        for (addr, name, role, fate) in hosts {
            let fate = if fresh_cluster { Fate::Fresh } else { fate };
            // A moved host answers at 10.0.2.x (controllers) or 10.0.3.x (workers).
            let new_addr = match addr.strip_prefix("10.0.0.") {
                Some(n) => format!("10.0.2.{n}"),
                None => format!("10.0.3.{}", addr.trim_start_matches("10.0.1.")),
            };
            if matches!(fate, Fate::Moved) {
                let mut hc = HostCase::new(&new_addr, role, &name);
                if role.is_controller() {
                    hc.private = Some(addr.clone());
                }
                case.spec.hosts.push(hc);
            } else if !matches!(fate, Fate::Removed) {
                let mut hc = HostCase::new(&addr, role, &name);
                hc.reset = matches!(fate, Fate::Reset);
                case.spec.hosts.push(hc);
            }
            if !matches!(fate, Fate::Fresh) {
                state_hosts.push(StateHostCase {
                    addr: addr.clone(),
                    port: None,
                    role,
                    name: name.clone(),
                    machine_id: None,
                    host_key: None,
                    version: None,
                });
            }
            let running = if role.is_controller() {
                "controller"
            } else {
                "worker"
            };
            let mut r = RealHostCase {
                addr: addr.clone(),
                ..Default::default()
            };
            match fate {
                Fate::Healthy | Fate::Removed | Fate::Reset => {
                    r.running = Some(running.into());
                    if role.is_controller() {
                        case.reality.members.push(name.clone());
                    }
                }
                Fate::OldVersion => {
                    r.running = Some(running.into());
                    r.version = Some(v_old.parse().unwrap());
                    if role.is_controller() {
                        case.reality.members.push(name.clone());
                    }
                }
                Fate::Fresh => {}
                Fate::Rebuilt => {
                    r.machine_id = Some(format!("new-{name}"));
                    if role.is_controller() {
                        case.reality.members.push(name.clone());
                    }
                }
                Fate::Left => r.leftovers = true,
                Fate::RekeyedReplaced => {
                    r.machine_id = Some(format!("new-{name}"));
                    r.host_key = Some(format!("SHA256:new-{name}"));
                    replaced.push(addr.clone());
                    if role.is_controller() {
                        case.reality.members.push(name.clone());
                    }
                }
                Fate::Down => {
                    r.unreachable = Some("connection timed out".into());
                    excluded.push(addr.clone());
                    if role.is_controller() {
                        case.reality.members.push(name.clone());
                    }
                }
                Fate::Moved => {
                    r.unreachable = Some("no route to host".into());
                    case.reality.hosts.push(RealHostCase {
                        addr: new_addr.clone(),
                        running: Some(running.into()),
                        ..Default::default()
                    });
                    if role.is_controller() {
                        case.reality.members.push(name.clone());
                    }
                }
            }
            case.reality.hosts.push(r);
        }
        if !fresh_cluster {
            case.state = Some(StateCase {
                serial: 3,
                uid: "uid-prop".into(),
                hosts: state_hosts,
            });
            case.reality.uid = Some("uid-prop".into());
        }
        case.options.exclude = excluded;
        case.options.replace = replaced;
        case
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn plans_are_safe_deterministic_and_converge(
            ctrl in proptest::collection::vec((fate(), proptest::bool::weighted(0.3)), 1..6),
            workers in proptest::collection::vec(fate(), 0..3),
            fresh in proptest::bool::weighted(0.15),
            seed in any::<u64>(),
        ) {
            let case = scenario(&ctrl, &workers, fresh);
            let i = build(&case);
            if std::env::var_os("PLAN_PROP_STATS").is_some() {
                match run(&i) {
                    Ok(p) => eprintln!("STAT ok steps={} changes={}", p.steps.len(), p.changes.len()),
                    Err(r) => eprintln!("STAT refused {:?} {:?} {:?} :: {}", r.kind, ctrl, workers, r.message),
                }
            }
            match run(&i) {
                Err(r) => {
                    // Refusals are deterministic too, and say why.
                    prop_assert!(!r.message.is_empty());
                    prop_assert_eq!(run(&i).unwrap_err(), r);
                }
                Ok(p) => {
                    if let Err(e) = check_invariants(&p, &i) {
                        prop_assert!(false, "{}\n{}", e, render::text(&p, false));
                    }
                    // A moved host is a move: its record follows, it is never removed, added
                    // or reset at either address.
                    let moved = ctrl
                        .iter()
                        .map(|(f, _)| *f)
                        .enumerate()
                        .map(|(n, f)| (f, format!("10.0.0.{}", n + 1), format!("10.0.2.{}", n + 1)))
                        .chain(workers.iter().enumerate().map(|(n, f)| {
                            (*f, format!("10.0.1.{}", n + 1), format!("10.0.3.{}", n + 1))
                        }))
                        .filter(|(f, _, _)| !fresh && matches!(f, Fate::Moved));
                    for (_, old, new) in moved {
                        let ch = p.changes.iter().find(|c| c.host.address == new);
                        prop_assert!(
                            ch.is_some_and(|c| c.moved_from.as_ref().is_some_and(|f| f.address == old)
                                && !matches!(c.action, Action::Add | Action::Remove | Action::Replace)),
                            "{} → {} not planned as a move:\n{}", old, new, render::text(&p, false)
                        );
                        prop_assert!(
                            !p.changes.iter().any(|c| c.host.address == old),
                            "the old address {} is planned:\n{}", old, render::text(&p, false)
                        );
                        prop_assert!(
                            !p.steps.iter().any(|s| (s.host.address == old || s.host.address == new)
                                && matches!(s.kind, StepKind::ResetHost { .. } | StepKind::JoinController { .. } | StepKind::JoinWorker { .. } | StepKind::ForgetHost)),
                            "a moved host is reset, joined or forgotten:\n{}", render::text(&p, false)
                        );
                    }
                    // Any topological order the executor may pick must work.
                    let order = random_topological_order(&p, seed);
                    let (state2, reality2) = simulate_apply_in(&p, &i, &order);
                    // The replacement is done: the next run does not repeat -replace.
                    let next = PlanOptions { exclude: i.options.exclude.clone(), ..Default::default() };
                    let again = plan::diff(&i.spec, &state2, &reality2, &i.desired, &next);
                    match again {
                        Err(r) => prop_assert!(false, "replan refused: {}\n{}", refusal_text(&r), render::text(&p, false)),
                        Ok(again) => prop_assert!(
                            !again.has_changes(),
                            "first plan:\n{}\nsecond plan:\n{}",
                            render::text(&p, false),
                            render::text(&again, false)
                        ),
                    }
                }
            }
        }
    }
}

#[test]
fn colour_only_when_asked() {
    let (_, case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "replace_host_key_change")
        .expect("case");
    let p = run(&build(&case)).expect("plan");
    let plain = render::text(&p, false);
    let coloured = render::text(&p, true);
    assert!(!plain.contains('\x1b'));
    assert!(coloured.contains("\x1b[33m-/+\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[32m+\x1b[0m k0s"), "{coloured}");
    assert!(
        coloured.contains("\x1b[31m-\x1b[0m etcd member"),
        "{coloured}"
    );
    // Same words either way.
    let strip = |s: &str| {
        let mut out = String::new();
        let mut esc = false;
        for c in s.chars() {
            match (esc, c) {
                (false, '\x1b') => esc = true,
                (true, 'm') => esc = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    };
    assert_eq!(strip(&coloured), plain);
}

#[test]
fn target_ignores_refusals_of_other_hosts() {
    let (_, mut case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "unreachable")
        .expect("case");
    let i = build(&case);
    assert!(run(&i).is_err());
    case.options.target = vec!["10.0.1.1".into()];
    let p = run(&build(&case)).expect("a targeted plan skips the unreachable c03");
    assert!(!p.has_changes());
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("c03 (10.0.0.3) is unreachable")),
        "{:?}",
        p.warnings
    );
    case.options.target = vec!["10.0.0.3".into()];
    let r = run(&build(&case)).expect_err("targeting the unreachable host is refused");
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn selectors_naming_no_host_are_warned_about() {
    let (_, mut case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "noop")
        .expect("case");
    case.options.replace = vec!["10.0.0.99".into()];
    case.options.exclude = vec!["10.0.0.1:2222".into()];
    let p = run(&build(&case)).expect("plan");
    assert_eq!(
        p.warnings,
        vec![
            "-replace 10.0.0.99 names no host of the spec or the state".to_string(),
            "-exclude 10.0.0.1:2222 names no host of the spec or the state".to_string(),
        ]
    );
    assert!(!p.has_changes());
}

/// A controller removed from the spec whose etcd member has no known ID (no EtcdMember object
/// names it: k0s before 1.30, or capitals in its hostname on k0s 1.30–1.34.0, and none recorded
/// in the state) is refused: removing it would reset the host and leave a dead voter behind.
#[test]
fn removal_of_a_member_without_a_known_id_is_refused_not_half_done() {
    let (_, case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "remove_controller")
        .expect("case remove_controller");
    let mut i = build(&case);
    let gone = HostId::new("10.0.0.3", 22);
    if let Some(h) = i.state.hosts.iter_mut().find(|h| h.id() == gone) {
        h.etcd = None;
    }
    for h in &mut i.reality.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(v) = &mut f.view
        {
            for m in &mut v.members {
                if m.peer_url == peer_url("10.0.0.3") {
                    m.member_id = None;
                }
            }
        }
    }
    let err = run(&i).expect_err("refused");
    assert_eq!(err.kind, RefusalKind::UnknownIdentity, "{err:?}");
    let text = refusal_text(&err);
    assert!(text.contains("has no known member ID"), "{text}");
    assert!(
        text.contains("k0s etcd leave --peer-address=10.0.0.3"),
        "{text}"
    );
}

/// A host whose `k0s status` does not answer is refused as "k0s not answering", not as unreachable.
#[test]
fn k0s_not_answering_is_refused_as_such() {
    let (_, case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "noop")
        .expect("case noop");
    let mut i = build(&case);
    let h = i.reality.hosts.last_mut().expect("a host");
    let id = h.id.clone();
    h.probe = Probe::K0sNotAnswering {
        error: "k0s not answering: `k0s status` gave no answer within 10 s".into(),
    };
    let err = run(&i).expect_err("refused");
    let text = refusal_text(&err);
    assert!(text.contains("k0s not answering"), "{text}");
    assert!(!text.contains("unreachable ("), "{text}");
    assert!(text.contains(&format!("-exclude {id}")), "{text}");
}

/// Issue 14, item 7: secret values of k0s.yaml (helm repository passwords, a kine DSN) reach
/// neither the plan text, `-json` nor a saved plan; a changed secret still shows as a changed
/// line (`(secret, changed: old value)` / `… new value)`). `-show-secrets` (PlanOptions::show_secrets) shows them, and is
/// never saved.
#[test]
fn secrets_in_the_config_diff_are_redacted_unless_asked_for() {
    let mut i = case_inputs("reconfigure");
    let repo = |password: &str| {
        serde_json::json!({"helm": {"repositories": [
            {"name": "private", "url": "https://charts.example.com", "username": "ci", "password": password}
        ]}})
    };
    let config = i
        .spec
        .k0s
        .config
        .get_or_insert_with(|| serde_json::json!({}));
    config["spec"]["extensions"] = repo("n3w-s3cret");
    let c01 = HostId::new("10.0.0.1", 22);
    let f = facts_mut(&mut i.reality, &c01).expect("c01 probed");
    let host_config = f.config_text.clone().expect("c01 has a k0s.yaml");
    f.config_text = Some(format!(
        "{host_config}  extensions:\n    helm:\n      repositories:\n      - name: private\n        url: https://charts.example.com\n        username: ci\n        password: 0ld-s3cret\n"
    ));

    let p = run(&i).expect("plan");
    let saved = SavedPlan::new(p.clone(), &i.state, "aaaa", &i.reality).to_json();
    for (what, out) in [
        ("text", render::text(&p, false)),
        ("json", render::json(&p)),
        ("saved plan", saved),
    ] {
        for secret in ["n3w-s3cret", "0ld-s3cret"] {
            assert!(!out.contains(secret), "{what} shows {secret}:\n{out}");
        }
        assert!(
            out.contains("password: (secret, changed: "),
            "{what}:\n{out}"
        );
        // No hash of a secret, not even a short one (issue 28, item 8).
        for secret in ["n3w-s3cret", "0ld-s3cret"] {
            let sum = k0sform::hash::sha256_hex(secret);
            assert!(
                !out.contains(&sum[..8]),
                "{what} shows {secret}'s hash:\n{out}"
            );
        }
    }
    let text = render::text(&p, false);
    // c01's diff: the old secret's line removed, the new one's added.
    let c01 = &text[text.find("(on c01)").expect("c01's diff")..];
    let secret_line = |sign: char| {
        c01.lines()
            .map(str::trim)
            .find(|l| l.starts_with(sign) && l.contains("password:"))
            .unwrap_or_else(|| panic!("no {sign} password line:\n{text}"))
    };
    let (old, new) = (secret_line('-'), secret_line('+'));
    assert_ne!(
        old[1..],
        new[1..],
        "a changed secret must show as changed:\n{text}"
    );

    i.options.show_secrets = true;
    let shown = render::text(&run(&i).expect("plan"), false);
    assert!(
        shown.contains("n3w-s3cret") && shown.contains("0ld-s3cret"),
        "{shown}"
    );
    let mut saved = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    saved.options = i.options.clone();
    assert!(!saved.to_json().contains("show_secrets"));
    assert!(!saved.options_for_apply(&i.options).unwrap().show_secrets);
}

/// Issue 14, item 5: a host being removed goes by the node name the state recorded, not by the
/// hostname it reports now; a host that renames itself to another host's name cannot make the
/// drain and the deletion hit that host's Node.
#[test]
fn removal_uses_the_recorded_name_not_the_reported_one() {
    let mut i = case_inputs("remove_worker");
    let w01 = HostId::new("10.0.1.1", 22);
    facts_mut(&mut i.reality, &w01)
        .expect("w01 probed")
        .hostname = "c01".into();
    let p = run(&i).expect("plan");
    let names: Vec<&str> = p
        .steps
        .iter()
        .filter(|s| s.host == w01)
        .filter_map(|s| match &s.kind {
            StepKind::Drain { node, .. } | StepKind::DeleteObjects { node, .. } => {
                Some(node.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(names, ["w01", "w01"], "{:#?}", p.steps);
}

/// Issue 14, item 5: a host without a spec hostname that reports the name another host of the
/// cluster goes by is refused (exit 3), naming both.
#[test]
fn a_host_reporting_another_hosts_name_is_refused() {
    let mut i = case_inputs("noop");
    let w01 = HostId::new("10.0.1.1", 22);
    for h in i.spec.hosts.iter_mut().filter(|h| h.id() == w01) {
        h.hostname = None;
    }
    facts_mut(&mut i.reality, &w01)
        .expect("w01 probed")
        .hostname = "c02".into();
    let r = run(&i).expect_err("refused");
    assert_eq!(r.kind.exit(), k0sform::exit::Exit::Refused, "{r:?}");
    let text = format!("{}\n{}", r.message, r.details.join("\n"));
    assert!(
        text.contains("10.0.1.1 says its hostname is \"c02\", the name of 10.0.0.2"),
        "{text}"
    );
    // Its own recorded name is fine.
    facts_mut(&mut i.reality, &w01)
        .expect("w01 probed")
        .hostname = "w01".into();
    run(&i).expect("plan");
}

/// Issue 28, item 8: a download URL with credentials (a mirror's token) is shown without them.
#[test]
fn download_urls_are_shown_without_their_credentials() {
    let mut i = case_inputs("add_worker");
    let w02 = HostId::new("10.0.1.2", 22);
    let h = i
        .desired
        .hosts
        .iter_mut()
        .find(|h| h.host == w02)
        .expect("w02 desired");
    let sha256 = h.local_binary.take().expect("a local binary").sha256;
    h.host_download = Some(k0sform::plan::HostDownload {
        url: "https://ci:t0ken@mirror.example/k0s/v1.33.4%2Bk0s.0/k0s-v1.33.4+k0s.0-amd64".into(),
        sha256,
        version: k0sform::version::K0sVersion::parse("v1.33.4+k0s.0").unwrap(),
    });
    let text = render::text(&run(&i).expect("plan"), false);
    assert!(
        text.contains("downloaded by the host from https://(secret)@mirror.example/k0s/"),
        "{text}"
    );
    assert!(!text.contains("t0ken"), "{text}");
}

/// Issue 28, item 11: a new host reporting the name of a Node no host owns is refused
/// (`add_worker_node_name_taken`); the spec's `hostname:` for it says the name is meant, and a
/// host already running k0s (adopted) keeps its own Node.
#[test]
fn a_new_host_may_take_an_unowned_nodes_name_only_by_its_spec_hostname() {
    let mut i = case_inputs("add_worker_node_name_taken");
    let w = HostId::new("10.0.1.2", 22);
    let err = run(&i).expect_err("refused");
    assert!(
        refusal_text(&err).contains("the name of a Node of the cluster no host"),
        "{}",
        refusal_text(&err)
    );
    for h in i.spec.hosts.iter_mut().filter(|h| h.id() == w) {
        h.hostname = Some("w99".into());
    }
    let p = run(&i).expect("planned with hostname: w99");
    assert!(p.changes.iter().any(|c| c.host == w), "{:#?}", p.changes);
    // Another name: nothing to refuse.
    let mut i = case_inputs("add_worker_node_name_taken");
    facts_mut(&mut i.reality, &w).expect("probed").hostname = "w02".into();
    run(&i).expect("plan");
}

/// Issue 14 (low): only controllers' views count in split-brain detection; a worker reporting
/// another cluster (a hostile or confused host) is no second cluster.
#[test]
fn a_workers_view_is_no_vote_on_the_cluster_identity() {
    let mut i = case_inputs("noop");
    let w01 = HostId::new("10.0.1.1", 22);
    let f = facts_mut(&mut i.reality, &w01).expect("w01 probed");
    f.view = Some(ClusterView {
        cluster_uid: Some("00000000-0000-4000-8000-000000000bad".into()),
        members: vec![MemberView {
            name: "evil".into(),
            peer_url: "https://10.9.9.9:2380".into(),
            member_id: Some("1234abcd1234abcd".into()),
            invocation: None,
        }],
        nodes: vec![],
        control_nodes: vec![],
        errors: vec![],
    });
    let p = run(&i).expect("a worker's view is ignored");
    assert!(!p.has_changes(), "{}", render::text(&p, false));
}

/// Issue 16: `environment` is what `k0s install -e` put in the service; the probe reads it
/// (values as sha256 only). A difference is a reconfigure (reinstall with the new environment,
/// restart, with the drain of any restart); the same environment plans nothing; values stay
/// hidden unless `-show-secrets`.
#[test]
fn environment_changes_are_a_planned_reconfigure_with_hidden_values() {
    let mut i = case_inputs("noop");
    let w01 = HostId::new("10.0.1.1", 22);
    let hash = |v: &str| sha256_hex(v);
    let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let installed = env(&[("HTTP_PROXY", "http://proxy:3128"), ("TOKEN", "0ld-s3cret")]);
    facts_mut(&mut i.reality, &w01).unwrap().service_env = Some(
        installed
            .iter()
            .map(|(k, v)| (k.clone(), hash(v)))
            .collect(),
    );
    let at = i.spec.hosts.iter().position(|h| h.id() == w01).unwrap();

    // The same environment: nothing to do.
    i.spec.hosts[at].environment = installed.clone();
    let p = run(&i).expect("plan");
    assert!(!p.has_changes(), "{}", render::text(&p, false));

    // A changed secret, an added and a removed variable: reconfigured (no drain, as k0sctl),
    // values hidden.
    i.spec.hosts[at].environment = env(&[("TOKEN", "n3w-s3cret"), ("NO_PROXY", "10.0.0.0/8")]);
    let p = run(&i).expect("plan");
    let ch = p
        .changes
        .iter()
        .find(|c| c.host == w01)
        .expect("w01 changes");
    assert_eq!(ch.action, Action::Reconfigure);
    let kinds: Vec<&str> = ch.steps.iter().map(|s| p.steps[*s].kind.name()).collect();
    assert_eq!(kinds, ["reconfigure", "record_host"]);
    let text = render::text(&p, false);
    assert!(
        text.contains(
            "the service environment differs (added: NO_PROXY; changed: TOKEN; removed: HTTP_PROXY, values hidden (-show-secrets))"
        ),
        "{text}"
    );
    assert!(
        text.contains("reinstalled with the spec's flags and environment"),
        "{text}"
    );
    for out in [text, render::json(&p)] {
        assert!(
            !out.contains("s3cret") && !out.contains("10.0.0.0/8"),
            "{out}"
        );
    }
    i.options.show_secrets = true;
    let shown = render::text(&run(&i).expect("plan"), false);
    assert!(shown.contains("changed: TOKEN=n3w-s3cret"), "{shown}");

    // No service environment read (an older probe file): not compared.
    i.options.show_secrets = false;
    facts_mut(&mut i.reality, &w01).unwrap().service_env = None;
    assert!(!run(&i).expect("plan").has_changes());
}

/// Issue 27 item 8: k0sctl also writes a host's `environment` to /etc/environment
/// (phase/prepare_hosts.go). A variable missing there or with another value is set by a
/// preflight step that the host's download follows (it may need the proxy); values stay
/// hidden; once the file has them, nothing is planned; a variable only in the file stays.
#[test]
fn etc_environment_is_set_before_the_download_and_then_planned_no_more() {
    let mut i = case_inputs("add_worker_download_unchecked");
    let w01 = HostId::new("10.0.1.1", 22);
    let at = i.spec.hosts.iter().position(|h| h.id() == w01).unwrap();
    i.spec.hosts[at].environment = [
        ("HTTPS_PROXY", "http://user:s3cret@proxy:3128"),
        ("NO_PROXY", "10.0.0.0/8"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    // The file has NO_PROXY already, and a variable the spec does not name.
    facts_mut(&mut i.reality, &w01).unwrap().etc_environment = Some(
        [
            ("NO_PROXY".to_string(), sha256_hex("10.0.0.0/8")),
            ("LANG".to_string(), sha256_hex("C.UTF-8")),
        ]
        .into(),
    );
    let p = run(&i).expect("plan");
    let ch = p.changes.iter().find(|c| c.host == w01).unwrap();
    let kinds: Vec<&str> = ch.steps.iter().map(|s| p.steps[*s].kind.name()).collect();
    assert_eq!(
        kinds,
        [
            "write_host_environment",
            "download_binary",
            "join_worker",
            "record_host"
        ]
    );
    let env_step = &p.steps[ch.steps[0]];
    assert_eq!(
        env_step.kind,
        StepKind::WriteHostEnvironment {
            names: vec!["HTTPS_PROXY".into()]
        }
    );
    assert!(
        env_step.after.is_empty(),
        "a preflight step waits for nothing"
    );
    assert!(env_step.kind.is_preflight());
    assert!(p.steps[ch.steps[1]].after.contains(&env_step.id));
    let text = render::text(&p, false);
    assert!(
        text.contains("/etc/environment sets HTTPS_PROXY (as k0sctl"),
        "{text}"
    );
    for out in [text, render::json(&p)] {
        assert!(!out.contains("s3cret"), "{out}");
    }

    // After the apply the file has both: nothing more to do there (a second plan has no
    // changes); LANG, which the spec never named, is left alone.
    let (state, mut reality) = simulate_apply(&p, &i);
    let file = facts_mut(&mut reality, &w01)
        .unwrap()
        .etc_environment
        .clone();
    assert_eq!(file.unwrap().len(), 3);
    let copy = |i: &Inputs| Inputs {
        spec: i.spec.clone(),
        state: i.state.clone(),
        reality: i.reality.clone(),
        desired: i.desired.clone(),
        options: i.options.clone(),
    };
    let mut again = copy(&i);
    again.state = state;
    again.reality = reality;
    let p = run(&again).expect("plan");
    assert!(!p.has_changes(), "{}", render::text(&p, false));

    // A host with nothing else to do: only its /etc/environment, no restart.
    let mut changed = copy(&again);
    let at = changed
        .spec
        .hosts
        .iter()
        .position(|h| h.id() == w01)
        .unwrap();
    changed.spec.hosts[at]
        .environment
        .insert("NO_PROXY".into(), "10.0.0.0/8,.internal".into());
    let p = run(&changed).expect("plan");
    let ch = p.changes.iter().find(|c| c.host == w01).unwrap();
    assert_eq!(ch.action, Action::UpdateFiles);
    let kinds: Vec<&str> = ch.steps.iter().map(|s| p.steps[*s].kind.name()).collect();
    assert_eq!(kinds, ["write_host_environment"]);

    // Not read (an older probe file): not compared; -refresh-only changes nothing.
    let mut old = copy(&i);
    facts_mut(&mut old.reality, &w01).unwrap().etc_environment = None;
    let p = run(&old).expect("plan");
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::WriteHostEnvironment { .. }))
    );
    changed.options.refresh_only = true;
    let p = run(&changed).expect("plan");
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::WriteHostEnvironment { .. }))
    );
}

/// Issue 16: a match that is not one recorded host at one new address of the same role is not
/// a move (and says why): one machine answering at two spec addresses, or another role.
#[test]
fn ambiguous_or_role_changing_matches_are_not_moves() {
    let base = case_inputs("move_worker");
    let w02 = HostId::new("10.0.1.9", 22);
    let p = run(&base).expect("plan");
    assert_eq!(p.changes[0].moved_from, Some(HostId::new("10.0.1.2", 22)));

    // The same machine at a second spec address too.
    let mut i = case_inputs("move_worker");
    let mut twin = i.spec.hosts.iter().find(|h| h.id() == w02).unwrap().clone();
    twin.ssh.address = "10.0.1.8".into();
    twin.hostname = Some("w02b".into());
    i.spec.hosts.push(twin);
    let facts = base.reality.facts(&w02).unwrap().clone();
    i.reality.hosts.push(HostReality {
        id: HostId::new("10.0.1.8", 22),
        probe: Probe::Reached(Box::new(facts)),
    });
    i.reality.sort();
    // The machine runs k0s as w02 (at the new addresses): removing the old record would drain
    // and delete its Node, so that is refused, naming both.
    let r = run(&i).expect_err("the old record's Node is in use");
    assert!(
        refusal_text(&r).contains(
            "w02 (10.0.1.2) leaves the spec, but the Node \"w02\" it would delete is named after w02b (10.0.1.8), a host of the spec that runs k0s"
        ),
        "{}",
        refusal_text(&r)
    );
    // Once k0s is stopped there and its Node is NotReady, the old record is removed; the twins
    // are not a move.
    let not_ready = |i: &mut Inputs| {
        for h in &mut i.reality.hosts {
            if let Probe::Reached(f) = &mut h.probe
                && let Some(v) = f.view.as_mut()
            {
                for n in v.nodes.iter_mut().filter(|n| n.name == "w02") {
                    n.ready = false;
                }
            }
        }
        for twin in [HostId::new("10.0.1.9", 22), HostId::new("10.0.1.8", 22)] {
            if let Some(f) = facts_mut(&mut i.reality, &twin) {
                f.status = None;
            }
        }
    };
    not_ready(&mut i);
    let p = run(&i).expect("plan");
    assert!(
        p.changes.iter().all(|c| c.moved_from.is_none()),
        "{}",
        render::text(&p, false)
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("answers at several addresses of the spec (10.0.1.8, 10.0.1.9)")),
        "{:?}",
        p.warnings
    );

    // Recorded as a worker, now a controller in the spec.
    let mut i = case_inputs("move_worker");
    let at = i.spec.hosts.iter().position(|h| h.id() == w02).unwrap();
    i.spec.hosts[at].role = Role::Controller;
    not_ready(&mut i);
    let p = run(&i);
    let text = match &p {
        Ok(p) => {
            assert!(p.changes.iter().all(|c| c.moved_from.is_none()));
            p.warnings.join("\n")
        }
        Err(r) => refusal_text(r),
    };
    let warned = p.as_ref().is_ok_and(|p| {
        p.warnings.iter().any(|w| {
            w.contains("makes it a controller where it was a worker: not treated as a move")
        })
    });
    assert!(warned, "{text}");
}

/// A saved destroy plan is applied only with `-destroy` on the command line (issue 28, item 4),
/// is then derived again as a destroy and equals what was saved; a normal plan whose options are
/// edited into a destroy (resealed) is refused without `-destroy`, and with it is not the plan
/// the file shows; `-destroy` with a normal plan is refused too.
#[test]
fn saved_destroy_plans_are_derived_again_as_destroys() {
    let i = saved_case_inputs("destroy");
    let p = run(&i).expect("plan");
    assert!(p.destroy);
    let saved = SavedPlan::with_options(p.clone(), &i.state, "aaaa", &i.reality, i.options.clone());
    let back = SavedPlan::from_json(&saved.to_json()).expect("parses");
    let plain = PlanOptions::default();
    let e = back.options_for_apply(&plain).unwrap_err();
    assert!(
        e.to_string()
            .contains("made with -destroy but apply was run without it"),
        "{e}"
    );
    let cli = PlanOptions {
        destroy: true,
        ..PlanOptions::default()
    };
    let opts = back.options_for_apply(&cli).expect("options");
    assert!(opts.destroy);
    let derived = plan::diff(&i.spec, &i.state, &i.reality, &i.desired, &opts).expect("plan");
    back.matches(&derived)
        .expect("a saved destroy plan is derived again equal");

    // A normal plan of the same inputs, its options switched to destroy and resealed.
    let normal_opts = PlanOptions {
        destroy: false,
        ..i.options.clone()
    };
    let normal = plan::diff(&i.spec, &i.state, &i.reality, &i.desired, &normal_opts).expect("plan");
    assert!(!normal.destroy);
    let honest = SavedPlan::with_options(
        normal.clone(),
        &i.state,
        "aaaa",
        &i.reality,
        normal_opts.clone(),
    );
    let e = honest.options_for_apply(&cli).unwrap_err();
    assert!(
        e.to_string()
            .contains("made without -destroy but apply was run with it"),
        "{e}"
    );
    let mut evil = SavedPlan::with_options(normal, &i.state, "aaaa", &i.reality, normal_opts);
    evil.options.destroy = true;
    evil.seal();
    assert!(evil.options_for_apply(&plain).is_err());
    let opts = evil.options_for_apply(&cli).expect("options");
    let derived = plan::diff(&i.spec, &i.state, &i.reality, &i.desired, &opts).expect("plan");
    assert!(
        evil.matches(&derived).is_err(),
        "an edited mode ran as a destroy"
    );
}

/// Destroy's order: the workers' steps wait for nothing of each other (the executor runs them
/// as -parallelism allows), every controller step waits for every worker, and the controllers
/// go strictly one after another.
#[test]
fn destroy_resets_workers_together_then_controllers_one_at_a_time() {
    let i = case_inputs("destroy");
    let p = run(&i).expect("plan");
    let role_of = |h: &HostId| {
        i.state
            .hosts
            .iter()
            .find(|s| &s.id() == h)
            .map(|s| s.role)
            .expect("recorded")
    };
    let (workers, controllers): (Vec<&k0sform::plan::Step>, Vec<&k0sform::plan::Step>) = p
        .steps
        .iter()
        .filter(|s| !matches!(s.kind, StepKind::ForgetCluster))
        .partition(|s| !role_of(&s.host).is_controller());
    assert_eq!(workers.len(), 4, "{workers:?}");
    for a in &workers {
        for b in &workers {
            if a.host != b.host {
                assert!(
                    !graph::precedes(&p.steps, a.id, b.id),
                    "{} waits for {}",
                    b.host,
                    a.host
                );
            }
        }
        for c in &controllers {
            assert!(graph::precedes(&p.steps, a.id, c.id), "{c:?} before {a:?}");
        }
    }
    // Controllers one at a time: of two controllers' steps, one always comes first.
    for a in &controllers {
        for b in &controllers {
            if a.host != b.host {
                assert!(
                    graph::precedes(&p.steps, a.id, b.id) || graph::precedes(&p.steps, b.id, a.id),
                    "{} and {} may run at once",
                    a.host,
                    b.host
                );
            }
        }
    }
}

/// Turn a case's cluster into a multi-controller kine cluster on an external datasource (k0s
/// `storage.type: kine` with a `dataSource` other controllers can reach, `IsJoinable` in k0s
/// `pkg/apis/k0s/v1beta1/storage.go`): every controller's k0s reports kine and no etcd peer
/// address, no controller lists etcd members (`k0s etcd` refuses on kine), and the state
/// records no member IDs.
fn into_kine(i: &mut Inputs) {
    i.spec.k0s.config = Some(
        serde_json::json!({"spec": {"storage": {"type": "kine", "kine": {
        "dataSource": "postgres://k0s:pw@db.example.com:5432/k0s"}}}}),
    );
    for h in &mut i.state.hosts {
        h.etcd = None;
    }
    let specs: Vec<HostSpec> = i.spec.hosts.clone();
    for h in &mut i.reality.hosts {
        let Probe::Reached(f) = &mut h.probe else {
            continue;
        };
        let Some(st) = f.status.as_mut() else {
            continue;
        };
        if st.role != "controller" {
            continue;
        }
        st.storage_type = Some("kine".into());
        st.peer_address = None;
        f.has_etcd_data = false;
        if let Some(hs) = specs.iter().find(|s| s.id() == h.id) {
            let text = desired::config_yaml(&i.spec, hs);
            f.config_sha256 = Some(sha256_hex(&text));
            f.config_text = Some(text);
        }
        if let Some(v) = f.view.as_mut() {
            v.members.clear();
        }
    }
}

fn step_kinds(p: &Plan, id: &HostId) -> Vec<&'static str> {
    p.steps
        .iter()
        .filter(|s| &s.host == id)
        .map(|s| s.kind.name())
        .collect()
}

/// Issue 13: a multi-controller kine cluster (external datasource) is planned without etcd: no
/// member IDs looked for, no quorum arithmetic, no member added or removed.
#[test]
fn kine_cluster_with_an_external_datasource_is_planned_without_etcd() {
    // Steady state: nothing to do, nothing refused for want of an etcd member.
    let mut i = case_inputs("noop");
    into_kine(&mut i);
    let p = run(&i).expect("plan");
    assert!(p.changes.is_empty(), "{:#?}", p.changes);
    assert_eq!(p.etcd.members_before, 0);

    // A controller joins: a join, no etcd arithmetic.
    let mut i = case_inputs("add_controller");
    into_kine(&mut i);
    let p = run(&i).expect("plan");
    let c04 = HostId::new("10.0.0.4", 22);
    assert_eq!(
        step_kinds(&p, &c04),
        [
            "upload_binary",
            "write_config",
            "join_controller",
            "wait_healthy",
            "record_host"
        ]
    );
    assert_eq!(
        (
            p.etcd.members_before,
            p.etcd.members_after,
            p.etcd.min_healthy,
            p.etcd.quorum
        ),
        (0, 0, 0, 0)
    );
    let text = render::text(&p, false);
    assert!(!text.contains("etcd:"), "{text}");
    assert!(text.contains("(kine, no etcd, identity 7c3f"), "{text}");
    assert!(p.etcd.kine);
    for h in ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.1"] {
        assert!(step_kinds(&p, &HostId::new(h, 22)).is_empty(), "{h}");
    }

    // A controller leaves: no member to remove, its objects deleted, the host reset.
    let mut i = case_inputs("remove_controller");
    into_kine(&mut i);
    let p = run(&i).expect("plan");
    let c03 = HostId::new("10.0.0.3", 22);
    let kinds = step_kinds(&p, &c03);
    assert!(!kinds.contains(&"remove_member"), "{kinds:?}");
    assert_eq!(kinds, ["delete_objects", "reset_host", "forget_host"]);
    assert_eq!(p.etcd.members_before, 0);
}

/// Issue 13: a removed controller's EtcdMember and ControlNode are deleted by the names k0s
/// gives them (its etcd member name and OS hostname, lower-cased), not by its Node name
/// (`hostname:`, recorded in the state).
#[test]
fn removal_deletes_etcd_member_and_control_node_by_their_own_names() {
    let mut i = case_inputs("remove_controller");
    let c03 = HostId::new("10.0.0.3", 22);
    for h in &mut i.state.hosts {
        if h.id() == c03 {
            h.node_name = Some("kube-c03".into());
        }
    }
    facts_mut(&mut i.reality, &c03)
        .expect("c03 probed")
        .hostname = "Ctl-C03".into();
    for h in &mut i.reality.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(v) = &mut f.view
        {
            for m in &mut v.members {
                if m.peer_url == peer_url("10.0.0.3") {
                    m.name = "Ctl-C03".into();
                }
            }
            v.control_nodes.retain(|n| n != "c03");
            v.control_nodes.push("ctl-c03".into());
        }
    }
    let p = run(&i).expect("plan");
    let del = p
        .steps
        .iter()
        .find(|s| s.host == c03 && s.kind.name() == "delete_objects")
        .expect("delete_objects");
    assert_eq!(
        del.kind.object_names(),
        [
            (plan::ObjectKind::EtcdMember, "ctl-c03"),
            (plan::ObjectKind::ControlNode, "ctl-c03")
        ],
        "{:#?}",
        del.kind
    );
    let text = render::text(&p, false);
    assert!(
        text.contains("EtcdMember \"ctl-c03\", ControlNode \"ctl-c03\", deleted via"),
        "{text}"
    );
}

/// Add an etcd member no host owns to every controller's view: added by hand and never
/// started (no name, and no EtcdMember object, so no ID).
fn add_unstarted_member(i: &mut Inputs, addr: &str) {
    for h in &mut i.reality.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(v) = &mut f.view
        {
            v.members.push(MemberView {
                name: String::new(),
                peer_url: peer_url(addr),
                member_id: None,
                invocation: None,
            });
        }
    }
}

/// A member added by hand and never started (no name, no ID) is removed first by its peer
/// address, named by that address in the plan; its removal carries no ID to check.
#[test]
fn destroy_removes_an_unstarted_unknown_member_first_by_its_peer_address() {
    let mut i = case_inputs("destroy");
    add_unstarted_member(&mut i, "10.0.0.9");
    let p = run(&i).expect("plan");
    let c01 = HostId::new("10.0.0.1", 22);
    assert_eq!(
        step_kinds(&p, &c01),
        [
            "remove_unknown_member",
            "wait_healthy",
            "reset_host",
            "forget_host",
            "forget_cluster"
        ]
    );
    let rm = p
        .steps
        .iter()
        .find(|s| s.kind.name() == "remove_unknown_member")
        .expect("removal");
    assert_eq!(
        rm.kind,
        StepKind::RemoveUnknownMember {
            name: String::new(),
            member_id: None,
            peer_url: peer_url("10.0.0.9"),
            via: c01.clone(),
        }
    );
    // Before every controller's leave, after every worker.
    for s in &p.steps {
        match s.kind.name() {
            "remove_member" => assert!(graph::precedes(&p.steps, rm.id, s.id), "{s:?}"),
            _ if !i
                .state
                .host(&s.host)
                .is_some_and(|h| h.role.is_controller())
                && s.kind.name() != "forget_cluster" =>
            {
                assert!(graph::precedes(&p.steps, s.id, rm.id), "{s:?}")
            }
            _ => {}
        }
    }
    let text = render::text(&p, false);
    assert!(
        text.contains("etcd member (https://10.0.0.9:2380, added but never started), which no host of the spec or the state owns, removed via c01 before any controller leaves\n      ! etcd 4 → 3 members, 3 healthy after; quorum of 3 is 2"),
        "{text}"
    );
    assert_eq!(
        (p.etcd.members_before, p.etcd.min_healthy, p.etcd.quorum),
        (4, 1, 3)
    );
}

/// Without quorum no member can leave, an unknown one neither: every controller is reset
/// without leaving (as before), and the warning names the member counted as down.
#[test]
fn destroy_without_quorum_names_the_unknown_member_it_counts_as_down() {
    let mut i = case_inputs("destroy_no_quorum");
    add_unstarted_member(&mut i, "10.0.0.9");
    let p = run(&i).expect("plan");
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s.kind.name(), "remove_member" | "remove_unknown_member")),
        "{:#?}",
        p.steps
    );
    assert!(
        p.warnings.iter().any(|w| w.contains(
            "etcd has 1 healthy of 4 members (quorum 3): no member can leave"
        ) && w.contains(
            "(counted as down: (https://10.0.0.9:2380, added but never started), which no host of the spec or the state owns)"
        )),
        "{:?}",
        p.warnings
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 28, item 1: a state entry for a host that left the spec (an address no machine answers
// at) must not remove a live host's etcd member, take ownership of it, or delete its objects.

/// A state-only host at `addr` that no machine answers: recorded with `role`, `name` and, when
/// given, the etcd member (ID and peer URL) of the host named `etcd_of`.
fn add_state_only_entry(i: &mut Inputs, addr: &str, role: Role, name: &str, etcd_of: Option<&str>) {
    let etcd = etcd_of.map(|of| {
        let owner = i
            .spec
            .hosts
            .iter()
            .find(|h| h.hostname.as_deref() == Some(of))
            .expect("owner in the spec");
        EtcdMemberState {
            member_id: member_id(of),
            peer_url: peer_url(owner.peer_address()),
        }
    });
    i.state.upsert_host(HostState {
        address: addr.into(),
        port: 22,
        role,
        node_name: Some(name.into()),
        machine_id: format!("mid-{name}"),
        host_key: format!("SHA256:key-{name}"),
        host_public_key: None,
        etcd,
        k0s_version: None,
        install_flags_sha256: None,
        config_sha256: None,
        k0s_binary: None,
        access: None,
    });
    i.reality.hosts.push(HostReality {
        id: HostId::new(addr, 22),
        probe: Probe::Unreachable {
            error: "connection timed out".into(),
        },
    });
    i.reality.sort();
}

fn refused_exit_3(i: &Inputs) -> String {
    let r = run(i).expect_err("refused");
    assert_eq!(r.exit_code(), 3, "{}", refusal_text(&r));
    refusal_text(&r)
}

/// A state-only entry recording a live spec controller's member ID and peer URL would plan
/// "controller c9 will be removed" and remove c02's real member: refused, naming both.
#[test]
fn state_entry_naming_a_live_controllers_member_is_refused() {
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c9", Some("c02"));
    let text = refused_exit_3(&i);
    assert!(
        text.contains("c9 (10.0.0.99): the state records etcd member")
            && text.contains("belongs to c02 (10.0.0.2)")
            && text.contains("refusing to remove another host's etcd member"),
        "{text}"
    );
    assert!(
        text.contains("https://10.0.0.2:2380: c02 (10.0.0.2) answers with that peer address"),
        "{text}"
    );

    // Only the member ID, at a made-up peer URL; only the peer URL, with a made-up ID: the same.
    for (id, url) in [
        (member_id("c02"), peer_url("10.0.0.99")),
        ("0123456789abcdef".to_string(), peer_url("10.0.0.2")),
    ] {
        let mut i = case_inputs("noop");
        add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c9", Some("c02"));
        let e = i
            .state
            .hosts
            .iter_mut()
            .find(|h| h.address == "10.0.0.99")
            .and_then(|h| h.etcd.as_mut())
            .expect("recorded member");
        e.member_id = id;
        e.peer_url = url;
        let text = refused_exit_3(&i);
        assert!(
            text.contains("c9 (10.0.0.99)") && text.contains("belongs to c02 (10.0.0.2)"),
            "{text}"
        );
    }

    // Down, the controller still owns its member by the spec's peer address.
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c9", Some("c02"));
    i.options.exclude = vec!["10.0.0.2".into()];
    let c02 = HostId::new("10.0.0.2", 22);
    for h in i.reality.hosts.iter_mut().filter(|h| h.id == c02) {
        h.probe = Probe::Unreachable {
            error: "down".into(),
        };
    }
    let text = refused_exit_3(&i);
    assert!(
        text.contains("it is the peer address of c02 (10.0.0.2), a host of the spec"),
        "{text}"
    );
}

/// Two such entries would take etcd from 3 members to 1: refused, naming every pair.
#[test]
fn two_state_entries_naming_live_members_are_refused() {
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.98", Role::Controller, "c8", Some("c02"));
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c9", Some("c03"));
    let text = refused_exit_3(&i);
    assert!(
        text.contains("c8 (10.0.0.98)") && text.contains("belongs to c02 (10.0.0.2)"),
        "{text}"
    );
    assert!(
        text.contains("c9 (10.0.0.99)") && text.contains("belongs to c03 (10.0.0.3)"),
        "{text}"
    );
}

/// An entry whose address sorts before the real controller's no longer takes ownership of its
/// member: the real c02 is not planned as "left the cluster" (reset and rejoined), and the
/// entry is refused.
#[test]
fn state_entry_sorting_first_does_not_take_a_live_controllers_member() {
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.0", Role::Controller, "c0", Some("c02"));
    let text = refused_exit_3(&i);
    assert!(
        text.contains("c0 (10.0.0.0)") && text.contains("belongs to c02 (10.0.0.2)"),
        "{text}"
    );
    assert!(!text.contains("left the cluster"), "{text}");
    // Left out with -exclude, the entry changes nothing about c02.
    i.options.exclude = vec!["10.0.0.0".into()];
    let p = run(&i).expect("plan");
    assert!(
        p.changes.is_empty(),
        "c02 must not be planned at all:\n{}",
        render::text(&p, false)
    );
}

/// An entry recorded as `controller` with a live worker's node name would delete that worker's
/// Node without a drain (a controller has none to drain): refused, naming both.
#[test]
fn state_entry_with_a_live_workers_node_name_is_refused_whatever_its_role() {
    for role in [Role::Controller, Role::Worker, Role::ControllerWorker] {
        let mut i = case_inputs("noop");
        add_state_only_entry(&mut i, "10.0.0.99", role, "w01", None);
        let text = refused_exit_3(&i);
        assert!(
            text.contains(
                "w01 (10.0.0.99) leaves the spec, but the Node \"w01\" it would delete is named after w01 (10.0.1.1), a host of the spec that runs k0s"
            ),
            "{role:?}: {text}"
        );
    }
    // Where w01 has no spec hostname (it goes by the name it reports), the record is blamed,
    // not the live host.
    let mut i = case_inputs("noop");
    let w01 = HostId::new("10.0.1.1", 22);
    for h in i.spec.hosts.iter_mut().filter(|h| h.id() == w01) {
        h.hostname = None;
    }
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "w01", None);
    let text = refused_exit_3(&i);
    assert!(
        text.contains("w01 (10.0.0.99) leaves the spec, but the Node \"w01\" it would delete is named after w01 (10.0.1.1)")
            && !text.contains("says its hostname is"),
        "{text}"
    );
    // Its EtcdMember and ControlNode objects too: named after a live controller.
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c02", None);
    let text = refused_exit_3(&i);
    assert!(
        text.contains(
            "it would delete is named after c02 (10.0.0.2), a host of the spec that runs k0s"
        ),
        "{text}"
    );
}

/// A new machine taking the name of a removed, dead one (not running k0s yet, its old Node
/// NotReady) is no owner of the old Node: the old record is removed and the new host added.
#[test]
fn a_new_machine_taking_a_dead_hosts_name_is_not_refused() {
    let mut i = case_inputs("remove_worker");
    let old = HostId::new("10.0.1.1", 22);
    for h in i.reality.hosts.iter_mut() {
        if h.id == old {
            h.probe = Probe::Unreachable {
                error: "connection timed out".into(),
            };
        } else if let Probe::Reached(f) = &mut h.probe
            && let Some(v) = f.view.as_mut()
        {
            for n in v.nodes.iter_mut().filter(|n| n.name == "w01") {
                n.ready = false;
            }
        }
    }
    let mut new = i.spec.hosts[0].clone();
    new.ssh = SshTarget::new("10.0.1.5", 22);
    new.role = Role::Worker;
    new.hostname = Some("w01".into());
    i.spec.hosts.push(new);
    i.reality.hosts.push(HostReality {
        id: HostId::new("10.0.1.5", 22),
        probe: Probe::Reached(Box::new(HostFacts {
            machine_id: "mid-new".into(),
            hostname: "w01".into(),
            host_key: "SHA256:key-new".into(),
            os: "debian".into(),
            arch: "amd64".into(),
            ..Default::default()
        })),
    });
    i.reality.sort();
    i.desired = Desired::same_binary(
        &i.spec.hosts.iter().map(|h| h.id()).collect::<Vec<_>>(),
        LocalBinary {
            sha256: sha256_hex("k0s v1.33.4+k0s.0"),
            version: Some("v1.33.4+k0s.0".parse().unwrap()),
            url: None,
        },
    );
    let p = run(&i).expect("plan");
    let actions: BTreeMap<String, Action> = p
        .changes
        .iter()
        .map(|c| (c.host.to_string(), c.action))
        .collect();
    assert_eq!(
        actions,
        BTreeMap::from([
            ("10.0.1.1".to_string(), Action::Remove),
            ("10.0.1.5".to_string(), Action::Add)
        ]),
        "{}",
        render::text(&p, false)
    );
}

/// The k0s paths a removal of a state-only host uses come from the state: shown in the plan,
/// and refused (exit 3, naming host and field) where they cannot be k0s's.
#[test]
fn recorded_k0s_paths_are_shown_and_implausible_ones_refused() {
    let access = |bin: &str, data_dir: &str, kubelet: Option<&str>| k0sform::state::HostAccess {
        ssh: SshTarget::new("10.0.0.3", 22),
        k0s_install_path: bin.into(),
        data_dir: data_dir.into(),
        kubelet_root_dir: kubelet.map(Into::into),
        cluster_address: None,
    };
    let c03 = HostId::new("10.0.0.3", 22);
    let with = |case: &str, a: k0sform::state::HostAccess| {
        let mut i = case_inputs(case);
        i.state
            .hosts
            .iter_mut()
            .find(|h| h.id() == c03)
            .expect("c03")
            .access = Some(a);
        i
    };
    let p = run(&with(
        "remove_controller",
        access("/opt/k0s/bin/k0s", "/srv/k0s", Some("/srv/kubelet")),
    ))
    .expect("plan");
    let text = render::text(&p, false);
    assert!(
        text.contains("k0s stopped and reset on c03 (machine-id mid-…)\n      ! k0s paths from its state record: k0sInstallPath /opt/k0s/bin/k0s, dataDir /srv/k0s, kubeletRootDir /srv/kubelet\n"),
        "{text}"
    );

    for (a, field, why) in [
        (
            access("/usr/local/bin/k0s", "/", None),
            "dataDir",
            "`/` is the root directory",
        ),
        (
            access("/etc/shadow", "/var/lib/k0s", None),
            "k0sInstallPath",
            "`/etc/shadow` is under /etc",
        ),
        (
            access("/usr/local/bin/k0s", "/etc/shadow", None),
            "dataDir",
            "`/etc/shadow` is under /etc",
        ),
        (
            access("/usr/local/bin/k0s", "var/lib/k0s", None),
            "dataDir",
            "must be an absolute path",
        ),
        (
            access("/usr/local/bin/k0s", "/var/lib/k0s/../../..", None),
            "dataDir",
            "is not a clean absolute path",
        ),
        (
            access("/usr/local/bin/k0s", "/var/lib/k0s", Some("/var/lib/..")),
            "kubeletRootDir",
            "is not a clean absolute path",
        ),
        (
            access("/bin/rm", "/var/lib/k0s", None),
            "k0sInstallPath",
            "does not name a k0s binary",
        ),
    ] {
        for case in ["remove_controller", "destroy"] {
            let mut i = with(case, a.clone());
            if case == "destroy" {
                // Only the state knows it.
                i.spec.hosts.retain(|h| h.id() != c03);
            }
            let text = refused_exit_3(&i);
            assert!(
                text.contains("c03 (10.0.0.3) leaves the cluster, but the k0s paths its state record names are no plausible k0s paths")
                    && text.contains(&format!("c03 (10.0.0.3): access.{field}: "))
                    && text.contains(why),
                "{case} {field}: {text}"
            );
        }
    }
}

/// A spec controller's record naming another controller's member (c02 recorded with c03's ID
/// and peer URL): c02 rebuilt is replaced without removing c03's member, and c03 is not taken
/// for gone.
#[test]
fn a_spec_hosts_record_naming_another_controllers_member_is_refused() {
    let mut i = case_inputs("noop");
    let (c02, c03) = (HostId::new("10.0.0.2", 22), HostId::new("10.0.0.3", 22));
    let theirs = i.state.host(&c03).and_then(|h| h.etcd.clone());
    i.state
        .hosts
        .iter_mut()
        .find(|h| h.id() == c02)
        .expect("c02")
        .etcd = theirs;
    // As recorded, c02 runs as it is: nothing to change for either.
    let p = run(&i).expect("plan");
    assert!(p.changes.is_empty(), "{}", render::text(&p, false));
    // Rebuilt, c02 is replaced: its stale member would be c03's.
    facts_mut(&mut i.reality, &c02).expect("c02").machine_id = "mid-rebuilt".into();
    let text = refused_exit_3(&i);
    assert!(
        text.contains("c02 (10.0.0.2): the state records etcd member")
            && text.contains("belongs to c03 (10.0.0.3)")
            && !text.contains("left the cluster"),
        "{text}"
    );
}

/// A state entry at a second address of a live controller's machine, recorded with that
/// machine's machine-id and host key (the state shows both): its removal would reset c02.
/// Refused, naming both.
#[test]
fn state_entry_at_a_second_address_of_a_live_host_is_not_reset() {
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.22", Role::Worker, "x22", None);
    for h in i
        .state
        .hosts
        .iter_mut()
        .filter(|h| h.address == "10.0.0.22")
    {
        h.machine_id = "mid-c02".into();
        h.host_key = "SHA256:key-c02".into();
    }
    let c02 = i
        .reality
        .facts(&HostId::new("10.0.0.2", 22))
        .expect("c02")
        .clone();
    for h in i
        .reality
        .hosts
        .iter_mut()
        .filter(|h| h.id.address == "10.0.0.22")
    {
        h.probe = Probe::Reached(Box::new(c02.clone()));
    }
    let text = refused_exit_3(&i);
    assert!(
        text.contains("x22 (10.0.0.22) leaves the spec, but the machine answering there is c02 (10.0.0.2), a host of the spec")
            && text.contains("refusing to reset it"),
        "{text}"
    );
}

fn manifest(kind: &str, name: &str, data: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, "data": {"k": data}})
}

/// Extra manifests of the spec (k0sctl `phase/apply_manifests.go`): each is applied through one
/// running controller after every other step and recorded with its content hash; the next plan
/// has no changes; a changed one is applied again; one the spec lost is left in the cluster and
/// forgotten by the state; `-target` applies none (and says so).
#[test]
fn manifests_are_applied_once_then_only_when_changed() {
    let mut i = case_inputs("add_worker");
    i.spec.manifests = vec![
        manifest("ConfigMap", "a", "1"),
        manifest("ConfigMap", "b", "2"),
    ];
    let p = run(&i).expect("plan");
    let applies: Vec<&k0sform::plan::Step> = p
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::ApplyManifest { .. }))
        .collect();
    assert_eq!(applies.len(), 2, "{}", render::text(&p, false));
    let others: Vec<usize> = p
        .steps
        .iter()
        .filter(|s| !matches!(s.kind, StepKind::ApplyManifest { .. }))
        .map(|s| s.id)
        .collect();
    // Every other step comes first: in every order the DAG allows, no apply runs before one.
    for seed in 0..20 {
        let order = random_topological_order(&p, seed);
        let first_apply = order
            .iter()
            .position(|n| applies.iter().any(|a| a.id == *n));
        let last_other = order.iter().rposition(|n| others.contains(n));
        assert!(first_apply > last_other, "seed {seed}: {order:?}");
    }
    // One after the other, in spec order (a Namespace before what goes in it).
    assert_eq!(applies[1].after, [applies[0].id]);
    assert!(step_host_is_controller(&i, &applies[0].host));
    let text = render::text(&p, false);
    assert!(text.contains("+ ConfigMap default/a: created"), "{text}");
    assert!(text.contains("2 manifests to apply."), "{text}");
    check_invariants(&p, &i).expect("invariants");

    let (state, reality) = simulate_apply(&p, &i);
    let again = replan(&i, &state, &reality);
    let text = render::text(&again, false);
    assert!(!again.has_changes(), "{text}");
    assert!(text.contains("Manifests: 2 unchanged"), "{text}");

    // One changed, one removed.
    let mut j = case_inputs("add_worker");
    j.spec = i.spec.clone();
    j.spec.manifests = vec![manifest("ConfigMap", "a", "changed")];
    j.state = state;
    j.reality = reality;
    let third = plan::diff(
        &j.spec,
        &j.state,
        &j.reality,
        &i.desired,
        &PlanOptions::default(),
    )
    .expect("third plan");
    let text = render::text(&third, false);
    assert!(text.contains("~ ConfigMap default/a: changed"), "{text}");
    assert!(
        text.contains("- ConfigMap default/b: no longer in the spec: left in the cluster"),
        "{text}"
    );
    assert!(text.contains("1 manifest to apply."), "{text}");
    assert!(
        third.steps.iter().any(
            |s| matches!(&s.kind, StepKind::ForgetManifest { manifest } if manifest.name == "b")
        )
    );
    let (state, reality) = simulate_apply(&third, &j);
    assert_eq!(state.manifests.len(), 1);
    let fourth = replan(&j, &state, &reality);
    assert!(!fourth.has_changes(), "{}", render::text(&fourth, false));

    // -target works on its hosts only.
    let opts = PlanOptions {
        target: vec!["10.0.0.1".into()],
        ..Default::default()
    };
    let mut k = case_inputs("noop");
    k.spec.manifests = vec![manifest("ConfigMap", "a", "1")];
    let targeted = plan::diff(&k.spec, &k.state, &k.reality, &k.desired, &opts).expect("targeted");
    assert!(!targeted.has_changes());
    assert!(
        targeted
            .warnings
            .iter()
            .any(|w| w.contains("manifests are not applied")),
        "{:?}",
        targeted.warnings
    );
}

/// With `dynamicConfig`, the plan warns where the ClusterConfig object a healthy controller
/// reported differs from what spec.k0s.config sets (only what the spec sets; the node part
/// left out), and plans nothing for it.
#[test]
fn dynamic_config_drift_is_a_warning() {
    let mut i = case_inputs("noop");
    i.spec.k0s.dynamic_config = true;
    i.spec.k0s.config = Some(serde_json::json!({"spec": {
        "telemetry": {"enabled": false},
        "api": {"port": 6443},
        "network": {"provider": "kuberouter"},
    }}));
    let c01 = HostId::new("10.0.0.1".to_string(), 22);
    facts_mut(&mut i.reality, &c01).expect("c01").cluster_config = Some(serde_json::json!({
        "telemetry": {"enabled": true},
        "network": {"provider": "kuberouter", "podCIDR": "10.244.0.0/16"},
    }));
    let p = run(&i).expect("plan");
    let live = facts_mut(&mut i.reality, &c01)
        .expect("c01")
        .cluster_config
        .take();
    assert_eq!(
        p.steps,
        run(&i).expect("plan").steps,
        "the drift plans nothing"
    );
    facts_mut(&mut i.reality, &c01).expect("c01").cluster_config = live;
    let w: Vec<&String> = p
        .warnings
        .iter()
        .filter(|w| w.contains("dynamic config"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings);
    assert!(
        w[0].contains("as 10.0.0.1 reads it")
            && w[0].contains("spec.telemetry.enabled: false in the spec, true in the cluster")
            && !w[0].contains("api"),
        "{}",
        w[0]
    );
    // The same object, or no dynamic config: no warning.
    i.spec.k0s.dynamic_config = false;
    assert!(
        run(&i)
            .expect("plan")
            .warnings
            .iter()
            .all(|w| !w.contains("dynamic config"))
    );
}
