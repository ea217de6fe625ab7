//! What the probe saw on the hosts, as plain data: the planner's third input. It can be saved
//! (`plan -probe-out`) and fed back (`plan -probe-in`) so a plan is reproducible offline.

use crate::hostid::HostId;
use crate::version::K0sVersion;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reality {
    /// One entry per probed host, sorted by id.
    pub hosts: Vec<HostReality>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostReality {
    pub id: HostId,
    pub probe: Probe,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Probe {
    /// No SSH session could be opened (or it timed out). Never means "fresh".
    Unreachable {
        error: String,
    },
    /// The host offered another key than the one recorded or pinned; nothing was run on it.
    /// With `bastion`: that bastion (one of the host's `ssh.bastion` hops) offered it, and the
    /// host was not reached.
    HostKeyChanged {
        expected: String,
        offered: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bastion: Option<HostId>,
    },
    Reached(Box<HostFacts>),
    /// SSH works but `k0s status` did not answer within its bound (it can block for minutes on
    /// a node that runs workloads): k0s may well run; nothing is known about it.
    K0sNotAnswering {
        error: String,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFacts {
    pub machine_id: String,
    pub hostname: String,
    /// `SHA256:…` fingerprint of the key the host offered.
    pub host_key: String,
    /// The offered key itself (`ssh-ed25519 AAAA…`).
    pub host_public_key: Option<String>,
    /// The bastions the host was reached through (hop order) and the keys they were accepted with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bastions: Vec<BastionKey>,
    pub os: String,
    pub arch: String,
    /// `k0s version` of the installed binary; None = no binary at the install path.
    pub k0s_version: Option<K0sVersion>,
    /// sha256 of the installed binary: hashed by the probe, or the state's record when the
    /// binary's `stat` line is still the recorded one (`k0s_binary_stat`).
    pub k0s_binary_sha256: Option<String>,
    /// The installed binary's `stat -L -c '%s %d %i %y %z'` line (`state::is_binary_stat`); None
    /// when there is no binary, `stat` failed or printed another shape (older probe files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k0s_binary_stat: Option<String>,
    /// Installed service unit, if any.
    pub service: Option<ServiceKind>,
    /// The installed service's environment (`k0s install -e NAME=VALUE`), as name → sha256 of
    /// the value (values may be secrets); None when no service is installed or the probe did
    /// not read it (older probe files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_env: Option<std::collections::BTreeMap<String, String>>,
    /// `/etc/environment` as k0sctl's update reads it (`k0s::host_env::parse_etc_environment`):
    /// name → sha256 of the value of the first `NAME=` line. None when the probe did not read it
    /// (older probe files); empty when the file is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etc_environment: Option<std::collections::BTreeMap<String, String>>,
    /// `k0s status -o json`; None = not running.
    pub status: Option<K0sStatus>,
    /// sha256 and text of /etc/k0s/k0s.yaml on the host, if present.
    pub config_sha256: Option<String>,
    pub config_text: Option<String>,
    /// `k0s config create` of the installed binary (controllers with a k0s.yaml): k0s's own
    /// defaults for this host, which the config comparison treats as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_defaults: Option<String>,
    /// `<data-dir>/etcd/member/snap/db` exists: this controller has etcd data (joined or bootstrapped).
    pub has_etcd_data: bool,
    /// The cluster as this controller sees it (running controllers only).
    pub view: Option<ClusterView>,
    /// The remote files of the spec's `files:` as they are on the host (probe order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<RemoteFile>,
    /// The destinations (the k0s binary path, k0s.yaml, the join token file, the `files:`)
    /// beside which an earlier run left upload staging files (`DEST.k0sform-…`), in the order
    /// the probe was given them: `apply` opens a session to clean up only where this is not
    /// empty (or a join was interrupted). Empty when none were found or none were looked for
    /// (hosts only in the state, older probe files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub staging_leftovers: Vec<String>,
    /// Workers of the spec: whether the token file their service is given (`--token-file`,
    /// default /etc/k0s/k0stoken) holds what k0s decodes as a join token (k0s issue #7202).
    /// Never its content. None for other hosts and older probe files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_token_file: Option<TokenFileState>,
    /// Running controllers of a spec with `dynamicConfig`: the `spec` of the ClusterConfig
    /// object k0s works from (`kubectl -n kube-system get clusterconfig k0s`), checked to be a
    /// mapping. Only compared with spec.k0s.config for the plan; never run or sent anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_config: Option<serde_json::Value>,
    /// The host's IPv4 addresses and the routes k0sctl looks at to find its private address
    /// (`k0s::private_address`). None when `ip` printed nothing or older probe files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetFacts>,
}

/// What a worker's token file holds, as far as k0s v1.35.1's start cares
/// (`k0s::token_file::token_decodes_sh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenFileState {
    /// base64 of gzip, as k0s decodes a join token.
    Decodes,
    /// Present but empty, unreadable or not a token (k0sctl's `# overwritten by k0sctl after
    /// join`).
    Undecodable,
    Missing,
}

impl K0sStatus {
    /// A running k0s of `version` as `role`, everything else empty.
    pub fn running(version: K0sVersion, pid: u64, role: &str) -> K0sStatus {
        K0sStatus {
            version,
            pid,
            role: role.into(),
            workloads: false,
            single_node: false,
            args: Vec::new(),
            peer_address: None,
            storage_type: None,
            invocation_id: None,
        }
    }
}

impl HostFacts {
    /// The binary as the state records it: its hash and `stat` line, when the probe has both.
    pub fn binary_record(&self) -> Option<crate::state::BinaryRecord> {
        Some(crate::state::BinaryRecord {
            sha256: self.k0s_binary_sha256.clone()?,
            stat: self.k0s_binary_stat.clone()?,
        })
    }
}

/// "host key changed: recorded …, offered …", naming the bastion when it was one.
pub fn key_change_text(expected: &str, offered: &str, bastion: Option<&HostId>) -> String {
    match bastion {
        Some(b) => format!("bastion {b} host key changed: recorded {expected}, offered {offered}"),
        None => format!("host key changed: recorded {expected}, offered {offered}"),
    }
}

/// A bastion hop's key as the connection to a host accepted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BastionKey {
    pub bastion: HostId,
    /// `SHA256:…`
    pub host_key: String,
    /// `<type> <base64>`
    pub host_public_key: String,
}

/// One remote file the spec names, as the probe found it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemoteFile {
    pub path: String,
    /// None: no regular file there.
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
}

impl RemoteFile {
    /// Owned as the spec asks: each named part (a user or group name, or a numeric id) matches.
    pub fn owned_by(&self, user: Option<&str>, group: Option<&str>) -> bool {
        let is = |want: &str, name: &Option<String>, id: Option<u32>| {
            name.as_deref() == Some(want) || (id.is_some() && want.parse::<u32>().ok() == id)
        };
        user.is_none_or(|u| is(u, &self.user, self.uid))
            && group.is_none_or(|g| is(g, &self.group, self.gid))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServiceKind {
    Controller,
    Worker,
}

/// The parts of `k0s status -o json` k0sform uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct K0sStatus {
    pub version: K0sVersion,
    pub pid: u64,
    /// "controller" or "worker" as k0s reports it.
    pub role: String,
    pub workloads: bool,
    pub single_node: bool,
    /// The service's command line (`Args`).
    pub args: Vec<String>,
    /// `ClusterConfig.spec.storage.etcd.peerAddress`, when present.
    pub peer_address: Option<String>,
    /// `ClusterConfig.spec.storage.type` (`etcd`, `kine`), when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_type: Option<String>,
    /// `K0sVars.InvocationID`: which start of k0s this is (a new one at every start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<String>,
}

/// One running controller's answer to "what is the cluster?".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterView {
    /// kube-system namespace uid; None when the query failed.
    pub cluster_uid: Option<String>,
    /// From `k0s etcd member-list` (name → first peer URL), merged with EtcdMember objects (IDs).
    pub members: Vec<MemberView>,
    pub nodes: Vec<NodeView>,
    /// ControlNode object names.
    pub control_nodes: Vec<String>,
    /// Errors from individual queries (the view is partial).
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemberView {
    pub name: String,
    pub peer_url: String,
    /// Hex member ID from the EtcdMember object, when known.
    pub member_id: Option<String>,
    /// The invocation of k0s that last wrote that object (its `shutdown-on-leave` label): an
    /// object restored from a backup, or left by the host's earlier life, still shows the old
    /// member ID until the member's new k0s rewrites it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeView {
    pub name: String,
    pub ready: bool,
    /// The Node's `InternalIP` addresses (only those that parse as IP addresses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub internal_ips: Vec<String>,
}

impl Probe {
    /// What a reached host reported.
    pub fn facts(&self) -> Option<&HostFacts> {
        match self {
            Probe::Reached(f) => Some(f),
            _ => None,
        }
    }
}

impl Reality {
    pub fn get(&self, id: &HostId) -> Option<&Probe> {
        self.hosts.iter().find(|h| &h.id == id).map(|h| &h.probe)
    }
    pub fn facts(&self, id: &HostId) -> Option<&HostFacts> {
        self.get(id).and_then(Probe::facts)
    }
    /// `get` and `facts` for many lookups: the probes indexed once (`HostIndex`).
    pub fn probe_index(&self) -> crate::hostid::HostIndex<'_, Probe> {
        crate::hostid::HostIndex::new(
            self.hosts
                .iter()
                .map(|h| ((h.id.address.as_str(), h.id.port), &h.probe)),
        )
    }
    pub fn sort(&mut self) {
        self.hosts.sort_by(|a, b| a.id.cmp(&b.id));
    }
}

impl HostFacts {
    pub fn is_running(&self) -> bool {
        self.status.is_some()
    }
    /// k0s runs here as a kine controller (its running config says `storage.type: kine`, as
    /// k0s resolves it: `--single` without a `storage:` key, or the config naming kine). It has
    /// no etcd membership: `k0s etcd` refuses there.
    pub fn runs_kine(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.storage_type.as_deref() == Some("kine"))
    }
}

/// What the probe learned of a host's network, validated (`k0s::private_address::parse_net`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NetFacts {
    /// Scope-global IPv4 addresses, `ip -o -4 addr show scope global` order.
    #[serde(default)]
    pub addresses: Vec<IfAddress>,
    /// `dev` of the first `ip route list scope global` line matching k0sctl's private pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_route_dev: Option<String>,
    /// `dev` of the first `default` route of `ip route list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_route_dev: Option<String>,
}

/// One IPv4 address of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IfAddress {
    pub interface: String,
    pub address: String,
}
