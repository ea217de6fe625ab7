//! The state file's model (testdata/reference/DESIGN.md "Files"). Plain data; every write goes through `state::store`.

use crate::hostid::HostId;
use crate::spec::Role;
use crate::version::K0sVersion;
use serde::{Deserialize, Serialize};

/// The newest state format this build reads and writes. 2 added `hosts[].access`, 3 added
/// `bastions`; files of formats 1 and 2 are read as they are (the missing fields are empty) and
/// written as 3 (an older k0sform then refuses them cleanly).
pub const FORMAT_VERSION: u32 = 3;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub format_version: u32,
    /// Fixed at creation; a state of another lineage is never overwritten.
    pub lineage: String,
    /// Grows by one on every write that changes content.
    pub serial: u64,
    pub tool_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterState>,
    /// Sorted by address, then port.
    #[serde(default)]
    pub hosts: Vec<HostState>,
    /// Non-idempotent steps started and not yet known to be finished.
    #[serde(default)]
    pub intents: Vec<Intent>,
    /// The SSH host keys of the bastions (`ssh.bastion`) the hosts are reached through, checked
    /// strictly like the hosts' own keys. Sorted by address, then port. Format 3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bastions: Vec<BastionState>,
    /// URL `files:` sources hosts downloaded with no `sha256` to check. Sorted by address,
    /// port, path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub downloads: Vec<DownloadRecord>,
    /// The spec's extra manifests as last applied (`crate::manifests`), by object: a manifest
    /// whose content hash is the one recorded is not applied again. Untrusted: checked, compared
    /// and shown, never sent anywhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<crate::manifests::ManifestRecord>,
}

/// A URL `files:` source a host downloaded without a `sha256` in the spec: the hash the host
/// computed, so the next plan holds the host's file to it while the expanded URL stays the same
/// (a no-op), and downloads again when the URL changes. Untrusted like all of the state: only
/// ever compared with what the spec and the host say, never run or shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadRecord {
    pub address: String,
    pub port: u16,
    /// The file's path on the host.
    pub path: String,
    /// sha256 of the URL downloaded, as expanded for the host (not the URL: it may carry a
    /// login, which a state file never holds).
    pub url_sha256: String,
    /// Lower-case hex, as the host computed it.
    pub sha256: String,
}

/// A bastion's recorded host key. Only a key to check: how the bastion is reached always comes
/// from the spec (or a host's checked `access`), never from here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BastionState {
    pub address: String,
    pub port: u16,
    /// `SHA256:…` fingerprint of the bastion's SSH host key.
    pub host_key: String,
    /// The key itself (`ssh-ed25519 AAAA…`); its fingerprint is `host_key`.
    pub host_public_key: String,
}

impl BastionState {
    pub fn id(&self) -> HostId {
        HostId::new(self.address.clone(), self.port)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterState {
    pub name: String,
    /// The kube-system namespace uid: the cluster's identity.
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_cluster_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k0s_version: Option<K0sVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostState {
    pub address: String,
    pub port: u16,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    pub machine_id: String,
    /// `SHA256:…` fingerprint of the SSH host key.
    pub host_key: String,
    /// The host key itself (`ssh-ed25519 AAAA…`), so k0sform can check it strictly on the next run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_public_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdMemberState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k0s_version: Option<K0sVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_flags_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// The k0s binary on the host when it was last recorded: a probe that finds it unchanged
    /// does not hash it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k0s_binary: Option<BinaryRecord>,
    /// How the spec said to reach the host and where k0s lives there, as last recorded. Used
    /// once the host has left the spec (to leave the cluster and be reset): its own login, key,
    /// bastion and paths, not another host's or the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<HostAccess>,
}

/// A k0s binary's `stat -L -c '%s %d %i %y %z'` line as the probe prints it (GNU: `1234 2049
/// 5678 2026-12-03 18:37:53.123456789 +0000 …`): numbers, dates, times and zones only, so a
/// line from the state or a host is never more than that.
pub fn is_binary_stat(s: &str) -> bool {
    (1..=200).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" .:+-".contains(&b))
}

/// A host's k0s binary as a probe found it: its sha256 and its `stat` line then (size, device,
/// inode, modification and change times; [`is_binary_stat`]). A real k0s binary is
/// a few hundred MB, so hashing it costs every plan on every host a good part of a CPU second;
/// with the same line (any write, rename or replacement moves the change time, which no one can
/// set back short of the clock) the probe reports the line alone and the record's hash stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BinaryRecord {
    /// Lower-case hex.
    pub sha256: String,
    pub stat: String,
}

impl HostState {
    pub fn id(&self) -> HostId {
        HostId::new(self.address.clone(), self.port)
    }

    /// Where k0s lives on a host that is no longer in the spec: (binary, data dir, kubelet root
    /// dir) as recorded in `access`; k0s's defaults when nothing was recorded (older states).
    pub fn k0s_paths(host: Option<&HostState>) -> (String, String, Option<String>) {
        match host.and_then(|h| h.access.as_ref()) {
            Some(a) => (
                a.k0s_install_path.clone(),
                a.data_dir.clone(),
                a.kubelet_root_dir.clone(),
            ),
            None => (
                crate::spec::DEFAULT_K0S_INSTALL_PATH.to_string(),
                crate::spec::DEFAULT_DATA_DIR.to_string(),
                None,
            ),
        }
    }
}

/// A host's connection settings and k0s paths, copied from its spec entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostAccess {
    pub ssh: crate::spec::SshTarget,
    pub k0s_install_path: String,
    pub data_dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_root_dir: Option<String>,
    /// The address k0s uses on the host (etcd peer address, SAN, `--node-ip`) when the spec
    /// gave one or one was found on the host as k0sctl finds it (src/k0s, address detection).
    /// None: the SSH address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_address: Option<String>,
}

impl HostAccess {
    pub fn of(h: &crate::spec::HostSpec) -> Self {
        HostAccess {
            ssh: h.ssh.clone(),
            k0s_install_path: h.k0s_install_path.clone(),
            data_dir: h.data_dir.clone(),
            kubelet_root_dir: h.kubelet_root_dir.clone(),
            cluster_address: h.private_address.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EtcdMemberState {
    /// Hex member ID, as k0s's EtcdMember objects show it.
    pub member_id: String,
    pub peer_url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Human name of the step, e.g. `remove-member c01`.
    pub step: String,
    pub address: String,
    pub port: u16,
    /// Kind of step, machine-readable (e.g. `remove_member`, `join_controller`, `reset_host`).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_url: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
}

impl State {
    /// A new, empty state with a fresh lineage.
    pub fn new() -> Self {
        State {
            format_version: FORMAT_VERSION,
            lineage: uuid::Uuid::new_v4().to_string(),
            serial: 0,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            cluster: None,
            hosts: Vec::new(),
            intents: Vec::new(),
            bastions: Vec::new(),
            downloads: Vec::new(),
            manifests: Vec::new(),
        }
    }

    /// The recorded download of `path` on `id`, when it is one of `url` with a well-formed
    /// sha256 (anything else in the state counts as no record).
    pub fn download(&self, id: &HostId, path: &str, url: &str) -> Option<&DownloadRecord> {
        self.downloads.iter().find(|d| {
            d.address == id.address
                && d.port == id.port
                && d.path == path
                && d.url_sha256 == crate::hash::sha256_hex(url)
                && crate::hash::is_sha256(&d.sha256)
        })
    }

    /// Insert or replace the record of `r.path` on its host.
    pub fn record_download(&mut self, r: DownloadRecord) {
        self.downloads
            .retain(|d| (&d.address, d.port, &d.path) != (&r.address, r.port, &r.path));
        self.downloads.push(r);
        self.downloads
            .sort_by(|a, b| (&a.address, a.port, &a.path).cmp(&(&b.address, b.port, &b.path)));
    }

    pub fn bastion(&self, id: &HostId) -> Option<&BastionState> {
        self.bastions
            .iter()
            .find(|b| b.address == id.address && b.port == id.port)
    }

    /// Insert or replace a bastion's key, keeping bastions sorted.
    pub fn upsert_bastion(&mut self, bastion: BastionState) {
        let id = bastion.id();
        match self
            .bastions
            .iter_mut()
            .find(|b| b.address == id.address && b.port == id.port)
        {
            Some(b) => *b = bastion,
            None => self.bastions.push(bastion),
        }
        self.sort();
    }

    pub fn host(&self, id: &HostId) -> Option<&HostState> {
        self.hosts
            .iter()
            .find(|h| h.address == id.address && h.port == id.port)
    }

    /// `host` for many lookups: the hosts indexed once (`HostIndex`).
    pub fn host_index(&self) -> crate::hostid::HostIndex<'_, HostState> {
        crate::hostid::HostIndex::new(self.hosts.iter().map(|h| ((h.address.as_str(), h.port), h)))
    }

    pub fn host_mut(&mut self, id: &HostId) -> Option<&mut HostState> {
        self.hosts
            .iter_mut()
            .find(|h| h.address == id.address && h.port == id.port)
    }

    /// Insert or replace a host, keeping hosts sorted.
    pub fn upsert_host(&mut self, host: HostState) {
        let id = host.id();
        match self.host_mut(&id) {
            Some(h) => *h = host,
            None => self.hosts.push(host),
        }
        self.sort();
    }

    pub fn remove_host(&mut self, id: &HostId) -> Option<HostState> {
        let pos = self
            .hosts
            .iter()
            .position(|h| h.address == id.address && h.port == id.port)?;
        Some(self.hosts.remove(pos))
    }

    /// Canonical order: hosts and bastions by (address, port).
    pub fn sort(&mut self) {
        self.hosts
            .sort_by(|a, b| (&a.address, a.port).cmp(&(&b.address, b.port)));
        self.bastions
            .sort_by(|a, b| (&a.address, a.port).cmp(&(&b.address, b.port)));
    }

    /// The state file's exact text: hosts sorted, fields in declaration order, 2-space
    /// indentation, trailing newline. The same state always gives the same bytes.
    pub fn to_canonical_json(&self) -> Result<String, serde_json::Error> {
        let mut sorted;
        let state = if self
            .hosts
            .is_sorted_by(|a, b| (&a.address, a.port) <= (&b.address, b.port))
            && self
                .bastions
                .is_sorted_by(|a, b| (&a.address, a.port) <= (&b.address, b.port))
        {
            self
        } else {
            sorted = self.clone();
            sorted.sort();
            &sorted
        };
        let mut text = serde_json::to_string_pretty(state)?;
        text.push('\n');
        Ok(text)
    }
}

impl Default for State {
    fn default() -> Self {
        Self::new()
    }
}
