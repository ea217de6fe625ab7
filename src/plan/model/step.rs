//! The steps `apply` runs: `Step` (one node of the DAG) and what it does (`StepKind`).

use crate::hostid::HostId;
use crate::version::K0sVersion;
use serde::{Deserialize, Serialize};

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
    /// Set these variables of the host's `environment` in its /etc/environment, as k0sctl does
    /// before it stages k0s (`k0s::host_env`); the values are the spec's when the step runs.
    /// Runs in the preflight, before the host's binary download, which sees them.
    WriteHostEnvironment { names: Vec<String> },
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
    /// `k0s kubectl apply -f -` of a spec manifest through this controller (k0sctl
    /// `phase/apply_manifests.go`), its content the one planned (`sha256`); then recorded.
    ApplyManifest {
        manifest: crate::manifests::ManifestId,
        sha256: String,
    },
    /// The state forgets a manifest that left the spec; nothing in the cluster changes.
    ForgetManifest {
        manifest: crate::manifests::ManifestId,
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

    /// Runs in the executor's preflight (`is_staging` steps, and the /etc/environment update
    /// that a host's download follows so that it sees a proxy set there).
    pub fn is_preflight(&self) -> bool {
        self.is_staging() || matches!(self, StepKind::WriteHostEnvironment { .. })
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
            StepKind::WriteHostEnvironment { .. } => "write_host_environment",
            StepKind::UploadFiles { .. } => "upload_files",
            StepKind::MoveHost { .. } => "move_host",
            StepKind::RecordHost => "record_host",
            StepKind::RecordBastion { .. } => "record_bastion",
            StepKind::ApplyManifest { .. } => "apply_manifest",
            StepKind::ForgetManifest { .. } => "forget_manifest",
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
