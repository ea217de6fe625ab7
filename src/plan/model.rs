//! The plan as data: per-host changes with reasons (what people read) and a DAG of typed steps
//! (what `apply` runs). Serialized as the versioned plan JSON (schema/plan.schema.json).

use crate::hostid::HostId;
use crate::spec::Role;
use crate::version::K0sVersion;
use serde::{Deserialize, Serialize};

pub const PLAN_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    pub format_version: u32,
    pub cluster_name: String,
    /// The cluster identity (kube-system uid) the plan works on; None before bootstrap.
    pub cluster_uid: Option<String>,
    /// How the cluster itself is treated.
    pub cluster_action: ClusterAction,
    /// `-refresh-only`: the plan only records reality into state.
    pub refresh_only: bool,
    /// `plan -destroy` / `destroy`: every host is reset and the state ends empty (k0sctl reset).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destroy: bool,
    /// Identities that changed since the state was written ("Changed outside k0sform").
    pub outside_changes: Vec<OutsideChange>,
    /// One entry per host that changes, sorted by host id.
    pub changes: Vec<HostChange>,
    /// Members or Nodes that neither the spec nor the state know (reported, not touched).
    pub drift: Vec<Drift>,
    /// The steps, in a topological order; `Step::after` holds the DAG's edges.
    pub steps: Vec<Step>,
    pub etcd: QuorumSummary,
    pub warnings: Vec<String>,
    /// The state serial the plan was made against (None: no state yet).
    #[serde(default)]
    pub state_serial: Option<u64>,
    /// Hosts whose SSH key this run trusted on first use: no key recorded in the state, no
    /// `ssh.hostKey` pin (or `-replace` dropped the recorded one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_contacts: Vec<FirstContact>,
    /// The k0s version the plan installs where the spec names none, and where it came from;
    /// `apply FILE` chooses it again and refuses (exit 5) when that is another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k0s_version: Option<ResolvedVersion>,
    /// `apply.*` and `connect.after` hooks of spec hosts this plan runs nothing on: k0sform
    /// runs them only on hosts an apply changes, where k0sctl runs them at every apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks_not_run: Vec<HooksNotRun>,
    /// Hosts without `privateAddress` whose private address k0s uses (peerAddress, SAN,
    /// `--node-ip`) was found on the host as k0sctl finds it (`k0s::private_address`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_addresses: Vec<FoundAddress>,
}

/// A private address found on a host (or kept from the state for a host not reached).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FoundAddress {
    pub host: HostId,
    pub address: String,
    /// The interface it is on, or "recorded in the state".
    pub found_on: String,
}

/// A host's hooks that do not run because the plan changes nothing on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HooksNotRun {
    pub host: HostId,
    pub name: String,
    /// `action.stage`, e.g. `apply.before`.
    pub hooks: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FirstContact {
    pub host: HostId,
    /// The host's name as it reported it.
    pub name: String,
    /// `SHA256:…` of the key it offered and this run trusts.
    pub fingerprint: String,
    /// `host` is a bastion (`ssh.bastion`) other hosts are reached through, not a host.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bastion: bool,
}

/// A k0s version k0sform chose because `spec.k0s.version` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResolvedVersion {
    pub version: K0sVersion,
    /// Why this one, e.g. "the version the cluster runs", "latest stable release (…/stable.txt)".
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClusterAction {
    /// A cluster known to the state (or adopted earlier) is managed.
    Existing,
    /// No state; a running cluster was found and is adopted (no remote change).
    Adopt,
    /// No state and nothing running: bootstrap on this controller.
    Bootstrap { host: HostId },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutsideChange {
    pub host: HostId,
    pub role: Role,
    pub name: String,
    /// e.g. "machine-id 3d12…→9ab4…", "host key SHA256:Qx…→SHA256:mZ…".
    pub changes: Vec<String>,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Add,
    Adopt,
    Upgrade,
    Reconfigure,
    Rejoin,
    Replace,
    Remove,
    /// Only the spec's `files:` differ: they are uploaded, k0s is not restarted.
    UpdateFiles,
    /// The recorded host answers at a new address (same machine-id and host key): its state
    /// record follows it, nothing runs on the host.
    Move,
}

impl Action {
    /// The plan text's symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Action::Add => "+",
            Action::Adopt => "<=",
            Action::Upgrade
            | Action::Reconfigure
            | Action::Rejoin
            | Action::UpdateFiles
            | Action::Move => "~",
            Action::Replace => "-/+",
            Action::Remove => "-",
        }
    }
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    NewHost,
    Bootstrap,
    FoundRunning,
    VersionChange,
    ConfigChange,
    InstallFlagsChange,
    /// The installed service's environment (`k0s install -e`) differs from `environment`.
    EnvironmentChange,
    LeftCluster,
    NotRunning,
    MachineIdChanged,
    HostKeyChanged,
    ReplaceRequested,
    NotInSpec,
    ResetRequested,
    UnknownMember,
    UnknownNode,
    /// A file of the spec's `files:` is missing or differs on the host.
    FilesChange,
    /// The host answers at a new address with the recorded machine-id and host key.
    Moved,
    /// `destroy`: the whole cluster is reset.
    Destroy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reason {
    pub code: ReasonCode,
    /// A human sentence, e.g. "the host was rebuilt (machine-id changed)".
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostChange {
    pub host: HostId,
    pub role: Role,
    /// Node name (hostname) as shown in the plan.
    pub name: String,
    pub action: Action,
    pub reasons: Vec<Reason>,
    /// Sub-steps as shown under the host, each `+`, `-` or `~` and a text.
    pub details: Vec<Detail>,
    /// Unified diff of k0s.yaml (reconfigure), if any.
    pub config_diff: Option<String>,
    /// The address the state recorded this host at, when it moved (`host` is the new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<HostId>,
    /// Ids of this change's steps.
    pub steps: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Detail {
    pub sign: char,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Drift {
    pub code: ReasonCode,
    /// e.g. `etcd member "x" (https://127.0.0.9:2380)` or `Node "w9"`.
    pub what: String,
    pub seen_by: Vec<HostId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuorumSummary {
    pub members_before: usize,
    pub members_after: usize,
    /// The fewest healthy voting members at any point of the plan.
    pub min_healthy: usize,
    /// The largest quorum required at any point of the plan.
    pub quorum: usize,
    /// The cluster keeps its data in kine (a `single` host, or `storage.type: kine`): it has
    /// no etcd members and the counts above are all 0.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kine: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    /// Index in `Plan::steps`.
    pub id: usize,
    pub host: HostId,
    pub kind: StepKind,
    /// Steps that must finish first.
    pub after: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    Node,
    EtcdMember,
    ControlNode,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepKind {
    /// Upload the k0s binary beside the installed one (sha256-verified); the install or
    /// upgrade step swaps it in.
    UploadBinary {
        sha256: String,
        version: Option<K0sVersion>,
    },
    /// The host downloads k0s from `url` beside the installed one and checks its sha256
    /// (empty: none to check against, the host's own hash is recorded); the install or
    /// upgrade step swaps it in.
    DownloadBinary {
        url: String,
        sha256: String,
        version: K0sVersion,
    },
    /// Write /etc/k0s/k0s.yaml for a controller.
    WriteConfig { sha256: String },
    /// `k0s restore` a backup archive (a local file, `apply -restore-from`) into the first
    /// controller before it bootstraps: the cluster comes back with the backup's identity.
    /// Refused where k0s runs or the state names a cluster.
    RestoreBackup { archive: String, sha256: String },
    /// Install and start the first controller without a token; wait until ready.
    Bootstrap,
    /// Create a controller token on `via`, install with it, start, wait for the new member; invalidate.
    JoinController { via: HostId },
    /// Create a worker token on `via`, install with it, start, wait for the Node; invalidate.
    JoinWorker { via: HostId },
    /// Health gate: every etcd member and the API answer through `via`.
    WaitHealthy { via: HostId },
    /// Remove an etcd member by its recorded ID, through a healthy controller.
    RemoveMember {
        member_id: String,
        peer_url: String,
        via: HostId,
    },
    /// `destroy`: remove an etcd member that no host of the spec or the state owns (added by
    /// hand, or left by a machine k0sform never recorded) through `via` (the step's host, the
    /// controller reset last), by its peer address, before any controller leaves. Its ID, when
    /// the cluster showed one, is checked again first. The state does not change.
    RemoveUnknownMember {
        /// etcd's member name (empty for a member added but never started).
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        member_id: Option<String>,
        peer_url: String,
        via: HostId,
    },
    /// Drain a Node through a controller (`kubectl drain` cordons it first). Before a restart,
    /// `evict_taint` (k0sctl's `options.evictTaint`, `key=value:Effect`) is put on the Node
    /// after cordoning it and before the drain. A failed drain leaves the Node cordoned.
    Drain {
        node: String,
        via: HostId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evict_taint: Option<String>,
    },
    /// Once the host's Node is Ready again after a restart: uncordon it and take off the evict
    /// taint its drain put on.
    Uncordon {
        node: String,
        via: HostId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evict_taint: Option<String>,
    },
    /// Delete the named API objects through a controller. The Node is `node`; the EtcdMember
    /// and ControlNode carry their own names where they differ from it: k0s names them after
    /// the host's etcd member name and OS hostname, not after `hostname:`
    /// (`--hostname-override`).
    DeleteObjects {
        node: String,
        objects: Vec<ObjectKind>,
        via: HostId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        etcd_member: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        control_node: Option<String>,
    },
    /// Stop k0s and `k0s reset` the host, only if its machine-id is still this one.
    /// `uninstall` (destroy): then remove the k0s binary, /etc/k0s/k0s.yaml and k0sform's token
    /// file too, as k0sctl's reset removes the binary and the config.
    ResetHost {
        machine_id: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        uninstall: bool,
    },
    /// Replace the binary and restart (one controller at a time).
    Upgrade { from: Option<String>, to: String },
    /// Reinstall with new flags/config and restart.
    Reconfigure,
    /// k0s issue #7202: a worker running a k0s that decodes its token file at every start
    /// (`k0s::quirks::worker_decodes_token_file_at_start`) whose token file holds no join
    /// token gets a decodable placeholder there, without a restart, so that its next start
    /// (a reboot) does not fail (k0sctl `phase/ensure_join_token_workaround.go`). The file is
    /// the one the running service is given (`--token-file`), never one the plan names.
    WriteTokenPlaceholder,
    /// Upload the spec's `files:` that are missing or differ on the host (content sha256, mode,
    /// owner), each checked against the local content the plan saw.
    UploadFiles {
        files: Vec<crate::files::DesiredFile>,
    },
    /// Run the spec's `hooks.<action>.<stage>` shell lines on the host, one after another, as
    /// the SSH user (no sudo, as k0sctl): `install`/`upgrade`/`reset` around that step,
    /// `apply.before`/`apply.after` around everything this run does on the host.
    RunHooks {
        action: String,
        stage: String,
        lines: Vec<String>,
    },
    /// The host moved: its state record at `from` goes to this address (node name, etcd
    /// member, identity kept), once a fresh probe shows the recorded machine-id and host key
    /// here. Changes nothing on the host.
    MoveHost { from: HostId },
    /// Write the host's probed identity into the state.
    RecordHost,
    /// Record the host key a bastion (the step's `host`) was accepted with this run in the
    /// state's `bastions`, to be checked strictly from then on. Runs nothing anywhere.
    RecordBastion {
        fingerprint: String,
        public_key: String,
    },
    /// Drop the host from the state.
    ForgetHost,
    /// Drop the cluster's identity from the state (`destroy`, after the last host): the state
    /// keeps its lineage, and its serial goes on growing.
    ForgetCluster,
}

impl StepKind {
    /// Does this step change etcd membership? Such steps run strictly one at a time.
    pub fn is_membership_change(&self) -> bool {
        matches!(
            self,
            StepKind::RestoreBackup { .. }
                | StepKind::Bootstrap
                | StepKind::JoinController { .. }
                | StepKind::RemoveMember { .. }
                | StepKind::RemoveUnknownMember { .. }
        )
    }

    /// Puts a new k0s binary beside the installed one, changing nothing that runs: the
    /// executor runs every such step before any other (a preflight), and they wait for none.
    pub fn is_staging(&self) -> bool {
        matches!(
            self,
            StepKind::UploadBinary { .. } | StepKind::DownloadBinary { .. }
        )
    }

    /// Short machine-readable name, e.g. `remove_member`.
    pub fn name(&self) -> &'static str {
        match self {
            StepKind::UploadBinary { .. } => "upload_binary",
            StepKind::DownloadBinary { .. } => "download_binary",
            StepKind::WriteConfig { .. } => "write_config",
            StepKind::RestoreBackup { .. } => "restore_backup",
            StepKind::Bootstrap => "bootstrap",
            StepKind::JoinController { .. } => "join_controller",
            StepKind::JoinWorker { .. } => "join_worker",
            StepKind::WaitHealthy { .. } => "wait_healthy",
            StepKind::RemoveMember { .. } => "remove_member",
            StepKind::RemoveUnknownMember { .. } => "remove_unknown_member",
            StepKind::Drain { .. } => "drain",
            StepKind::Uncordon { .. } => "uncordon",
            StepKind::DeleteObjects { .. } => "delete_objects",
            StepKind::ResetHost { .. } => "reset_host",
            StepKind::Upgrade { .. } => "upgrade",
            StepKind::Reconfigure => "reconfigure",
            StepKind::WriteTokenPlaceholder => "write_token_placeholder",
            StepKind::RunHooks { .. } => "run_hooks",
            StepKind::UploadFiles { .. } => "upload_files",
            StepKind::MoveHost { .. } => "move_host",
            StepKind::RecordHost => "record_host",
            StepKind::RecordBastion { .. } => "record_bastion",
            StepKind::ForgetHost => "forget_host",
            StepKind::ForgetCluster => "forget_cluster",
        }
    }
}

/// An etcd member no host owns, as the plan and the progress name it: `"name" (peer URL, id
/// ID)`; a member added but never started has no name yet.
pub fn unknown_member_text(name: &str, member_id: Option<&str>, peer_url: &str) -> String {
    let id = member_id.map(|i| format!(", id {i}")).unwrap_or_default();
    if name.is_empty() {
        format!("({peer_url}{id}, added but never started)")
    } else {
        format!("\"{name}\" ({peer_url}{id})")
    }
}

impl StepKind {
    /// The objects a `DeleteObjects` step deletes, each with its name.
    pub fn object_names(&self) -> Vec<(ObjectKind, &str)> {
        match self {
            StepKind::DeleteObjects {
                node,
                objects,
                etcd_member,
                control_node,
                ..
            } => objects
                .iter()
                .map(|o| {
                    let name = match o {
                        ObjectKind::Node => None,
                        ObjectKind::EtcdMember => etcd_member.as_deref(),
                        ObjectKind::ControlNode => control_node.as_deref(),
                    };
                    (*o, name.unwrap_or(node))
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Plan {
    pub fn has_changes(&self) -> bool {
        !self.steps.is_empty()
    }
}

/// What the user asked for on the command line, beyond the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanOptions {
    /// `-replace`: treat these hosts as rebuilt (`ADDR` or `ADDR:PORT`).
    #[serde(default)]
    pub replace: Vec<String>,
    /// `-target`: change only these hosts (and what they need).
    #[serde(default)]
    pub target: Vec<String>,
    /// `-exclude`: leave these hosts out entirely.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// `-refresh-only`: record reality into state, change no host.
    #[serde(default)]
    pub refresh_only: bool,
    /// `-trust-new-host-keys=false`: refuse the plan when a host or bastion would be trusted on
    /// first contact (no key recorded in the state, no `ssh.hostKey` pin).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse_first_contact: bool,
    /// `-no-drain`: restart hosts without cordoning and draining their Nodes first (as
    /// k0sctl's `--no-drain`; `options.drain.enabled: false` does the same).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_drain: bool,
    /// `-restore-from`: bootstrap the cluster from this backup archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreArchive>,
    /// `-allow-downgrade`: plan a spec version older than what a host runs (refused otherwise).
    #[serde(default)]
    pub allow_downgrade: bool,
    /// `plan -destroy` / `destroy`: reset every host of the spec and the state (workers first,
    /// then controllers one at a time) and empty the state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destroy: bool,
    /// `-show-secrets`: the k0s.yaml diff shows secret values (kine DSN passwords, tokens)
    /// instead of `(secret)`. Never saved: a saved plan holds no secrets, and its plan
    /// is derived again without them.
    #[serde(skip)]
    #[schemars(skip)]
    pub show_secrets: bool,
}

/// A k0s backup archive on the machine running k0sform (`apply -restore-from FILE`), as read
/// before planning (`k0s::backup::read_archive`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RestoreArchive {
    /// Absolute path.
    pub path: String,
    pub sha256: String,
    /// The etcd peer address recorded in the archive's k0s.yaml, if any: `k0s restore`
    /// registers the restored member there.
    pub peer_address: Option<String>,
}

impl PlanOptions {
    pub fn is_replaced(&self, id: &HostId) -> bool {
        self.replace.iter().any(|s| id.matches(s))
    }
    pub fn is_excluded(&self, id: &HostId) -> bool {
        self.exclude.iter().any(|s| id.matches(s))
    }
    /// Without `-target` every host is targeted.
    pub fn is_targeted(&self, id: &HostId) -> bool {
        self.target.is_empty() || self.target.iter().any(|s| id.matches(s))
    }
}

/// A k0s binary on the machine running k0sform, to be uploaded to a host: `k0sBinaryPath`, or
/// with `uploadBinary: true` a release downloaded into the local cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LocalBinary {
    pub sha256: String,
    /// `k0s version` of that binary, when known.
    pub version: Option<K0sVersion>,
    /// The release URL it is downloaded from (`uploadBinary: true`); None for `k0sBinaryPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A k0s release the host downloads itself (k0sctl's default), and the sha256 it must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostDownload {
    pub url: String,
    /// Empty where nothing publishes one (a `k0sDownloadURL` without `k0sDownloadSha256`, a
    /// release before v1.28.2): the host's hash of its download is recorded.
    pub sha256: String,
    pub version: K0sVersion,
}

/// Facts about the desired outcome that need I/O to compute (hashing local files); the caller
/// computes them so `plan::diff` stays pure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Desired {
    /// Per host; a host without an entry (or without a binary) uses the binary already on it.
    #[serde(default)]
    pub hosts: Vec<DesiredHost>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DesiredHost {
    pub host: HostId,
    pub local_binary: Option<LocalBinary>,
    /// The release the host downloads itself when it needs a binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_download: Option<HostDownload>,
    /// The host's `files:`, expanded (sorted by remote path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::files::DesiredFile>,
}

impl Desired {
    pub fn host(&self, id: &HostId) -> Option<&DesiredHost> {
        // The planner asks once per host: a scan made 5,000-host plans quadratic. Built sorted
        // (engine::desired, same_binary), the list is binary-searched; a miss still scans, so
        // any order stays correct.
        match self.hosts.binary_search_by(|h| h.host.cmp(id)) {
            Ok(i) => self.hosts.get(i),
            Err(_) => self.hosts.iter().find(|h| &h.host == id),
        }
    }

    pub fn local_binary(&self, id: &HostId) -> Option<&LocalBinary> {
        self.host(id).and_then(|h| h.local_binary.as_ref())
    }

    pub fn host_download(&self, id: &HostId) -> Option<&HostDownload> {
        self.host(id).and_then(|h| h.host_download.as_ref())
    }

    /// The files the host should have (none when the spec names none).
    pub fn files(&self, id: &HostId) -> &[crate::files::DesiredFile] {
        self.host(id).map(|h| h.files.as_slice()).unwrap_or(&[])
    }

    /// The same binary for every listed host.
    pub fn same_binary<'a>(hosts: impl IntoIterator<Item = &'a HostId>, bin: LocalBinary) -> Self {
        let mut hosts: Vec<DesiredHost> = hosts
            .into_iter()
            .map(|h| DesiredHost {
                host: h.clone(),
                local_binary: Some(bin.clone()),
                host_download: None,
                files: Vec::new(),
            })
            .collect();
        hosts.sort_by(|a, b| a.host.cmp(&b.host));
        Desired { hosts }
    }
}

/// Why no plan was made. Unsafe situations exit 3, an unreachable host exits 1.
#[derive(
    Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, schemars::JsonSchema,
)]
#[error("{message}")]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
    /// One line per host or fact behind the refusal (who sees what, the quorum arithmetic).
    pub details: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// Running controllers disagree on the cluster identity or membership.
    SplitBrain,
    /// The state names a cluster but none of its controllers answers.
    NoController,
    /// A membership change would leave fewer healthy members than quorum.
    Quorum,
    /// A host offered another SSH key than recorded, and nothing accepted it.
    HostKeyChanged,
    /// A host in the spec could not be reached.
    Unreachable,
    /// The cluster shows an identity k0sform did not record (e.g. another member ID at a
    /// recorded peer address): acting on it could remove the wrong member.
    UnknownIdentity,
    /// A host must install or upgrade k0s, and k0sform has no binary of the wanted version for
    /// it: no `k0sBinaryPath`, and the one on the host (if any) is another version. k0sform does
    /// not download k0s.
    NoK0sBinary,
    /// `-restore-from` where a cluster exists (in the state or on a host), or where the restored
    /// etcd member could not work.
    Restore,
    /// The spec's version is older than what a host runs, and `-allow-downgrade` was not given.
    Downgrade,
    /// A controller moved to an address that changes its etcd peer address: k0s has no command
    /// to change a member's peer URL, so it is left to the operator (steps in the details).
    PeerAddressChange,
    /// k0s runs on a host in another role than the spec gives it: k0sform does not turn a
    /// running host into another role (steps to do it by hand in the details).
    RoleChange,
    /// The spec would move a running controller between etcd and kine: k0s keeps the data where
    /// it was, and the cluster would start over empty.
    DatastoreSwitch,
}

impl RefusalKind {
    /// Exit 1 for what the operator fixes in the spec or the network; exit 3 for the unsafe.
    pub fn exit(self) -> crate::exit::Exit {
        match self {
            RefusalKind::Unreachable | RefusalKind::NoK0sBinary | RefusalKind::Downgrade => {
                crate::exit::Exit::Error
            }
            _ => crate::exit::Exit::Refused,
        }
    }
}

impl Refusal {
    pub fn exit(&self) -> crate::exit::Exit {
        self.kind.exit()
    }
    pub fn exit_code(&self) -> u8 {
        self.exit().code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: &str, sha: &str) -> DesiredHost {
        DesiredHost {
            host: HostId::new(addr, 22),
            local_binary: Some(LocalBinary {
                sha256: sha.into(),
                version: None,
                url: None,
            }),
            host_download: None,
            files: Vec::new(),
        }
    }

    #[test]
    fn local_binary_is_found_in_any_order() {
        let sha = |d: &Desired, a: &str| {
            d.local_binary(&HostId::new(a, 22))
                .map(|b| b.sha256.clone())
        };
        let sorted = Desired {
            hosts: vec![
                entry("10.0.0.1", "a"),
                entry("10.0.0.2", "b"),
                entry("10.0.0.3", "c"),
            ],
        };
        let unsorted = Desired {
            hosts: vec![
                entry("10.0.0.3", "c"),
                entry("10.0.0.1", "a"),
                entry("10.0.0.2", "b"),
            ],
        };
        for d in [&sorted, &unsorted] {
            assert_eq!(sha(d, "10.0.0.1").as_deref(), Some("a"));
            assert_eq!(sha(d, "10.0.0.2").as_deref(), Some("b"));
            assert_eq!(sha(d, "10.0.0.3").as_deref(), Some("c"));
            assert_eq!(sha(d, "10.0.0.4"), None);
        }
        let same = Desired::same_binary(
            [HostId::new("10.0.0.9", 22), HostId::new("10.0.0.1", 22)].iter(),
            LocalBinary {
                sha256: "s".into(),
                version: None,
                url: None,
            },
        );
        assert!(same.hosts.windows(2).all(|w| w[0].host < w[1].host));
        assert!(same.local_binary(&HostId::new("10.0.0.9", 22)).is_some());
    }
}
