//! What a finished step changed in the state, as data: step tasks return `StateChange`s and the
//! coordinator (sole owner of the `State`) applies them, then checkpoints. Also builds the
//! `Intent` recorded before a non-idempotent step.

use crate::hostid::HostId;
use crate::plan::{Step, StepKind};
use crate::state::{ClusterState, HostState, Intent, State};
use std::time::SystemTime;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateChange {
    /// Insert or replace the host's record (identity from a fresh probe).
    UpsertHost(Box<HostState>),
    /// Drop the host from the state.
    ForgetHost(HostId),
    /// The host's record moves from `from` to `to` (everything kept but the address, its
    /// access settings and the key, which the fresh probe gives: a host that became or stopped
    /// being the `localhost` host gets `LOCAL_HOST_KEY`, or the SSH key trusted now).
    MoveHost {
        from: HostId,
        to: HostId,
        access: Option<crate::state::HostAccess>,
        host_key: String,
        host_public_key: Option<String>,
    },
    /// Insert or replace a bastion's recorded host key.
    UpsertBastion(crate::state::BastionState),
    /// The host's etcd member was removed: forget its member ID and peer URL.
    ClearEtcd(HostId),
    /// The cluster's identity (bootstrap, or adoption of a running cluster).
    SetCluster(ClusterState),
    /// A running cluster's identity seen by a probe: recorded only if the state has none yet.
    AdoptCluster(ClusterState),
    /// The host now runs this k0s version.
    SetHostVersion {
        host: HostId,
        version: crate::version::K0sVersion,
    },
    /// The cluster was destroyed: forget its identity (the lineage stays).
    ForgetCluster,
    /// A host downloaded a URL `files:` source with no sha256 to check: the hash it computed.
    RecordDownload(crate::state::DownloadRecord),
    /// A manifest was applied with this content: replaces the record of the same object.
    RecordManifest(crate::manifests::ManifestRecord),
    /// A manifest left the spec: the state forgets it (the object stays in the cluster).
    ForgetManifest(crate::manifests::ManifestId),
}

impl StateChange {
    pub fn apply(&self, state: &mut State) {
        match self {
            StateChange::UpsertHost(h) => state.upsert_host((**h).clone()),
            StateChange::ForgetHost(id) => {
                state.remove_host(id);
                // Its downloads' records go with it.
                state
                    .downloads
                    .retain(|d| (d.address.as_str(), d.port) != (id.address.as_str(), id.port));
            }
            StateChange::MoveHost {
                from,
                to,
                access,
                host_key,
                host_public_key,
            } => {
                if state.host(to).is_some() {
                    return;
                }
                if let Some(mut h) = state.remove_host(from) {
                    h.address = to.address.clone();
                    h.port = to.port;
                    if access.is_some() {
                        h.access = access.clone();
                    }
                    if !host_key.is_empty() && *host_key != h.host_key {
                        // Reached locally now, or over SSH now (`transport::host_keys_differ`).
                        h.host_key = host_key.clone();
                        h.host_public_key = None;
                    }
                    if host_public_key.is_some() {
                        h.host_public_key = host_public_key.clone();
                    }
                    state.upsert_host(h);
                }
            }
            StateChange::UpsertBastion(b) => state.upsert_bastion(b.clone()),
            StateChange::ClearEtcd(id) => {
                if let Some(h) = state.host_mut(id) {
                    h.etcd = None;
                }
            }
            StateChange::SetCluster(c) => state.cluster = Some(c.clone()),
            StateChange::AdoptCluster(c) => {
                if state.cluster.is_none() {
                    state.cluster = Some(c.clone());
                }
            }
            StateChange::ForgetCluster => {
                state.cluster = None;
                state.manifests.clear();
            }
            StateChange::RecordManifest(r) => {
                state
                    .manifests
                    .retain(|m| !m.manifest.same_object(&r.manifest));
                state.manifests.push(r.clone());
            }
            StateChange::ForgetManifest(id) => {
                state.manifests.retain(|m| !m.manifest.same_object(id))
            }
            StateChange::RecordDownload(r) => state.record_download(r.clone()),
            StateChange::SetHostVersion { host, version } => {
                if let Some(h) = state.host_mut(host) {
                    h.k0s_version = Some(version.clone());
                }
            }
        }
    }
}

/// Steps that are not safe to simply run again after a crash: an intent records that they began.
pub fn needs_intent(kind: &StepKind) -> bool {
    matches!(
        kind,
        StepKind::Bootstrap
            | StepKind::RestoreBackup { .. }
            | StepKind::JoinController { .. }
            | StepKind::JoinWorker { .. }
            | StepKind::RemoveMember { .. }
            | StepKind::RemoveUnknownMember { .. }
            | StepKind::ResetHost { .. }
            | StepKind::Upgrade { .. }
            | StepKind::Reconfigure
    )
}

/// The intent for a step, stamped now.
pub fn intent_for(step: &Step) -> Intent {
    let (member_id, peer_url) = match &step.kind {
        StepKind::RemoveMember {
            member_id,
            peer_url,
            ..
        } => (Some(member_id.clone()), Some(peer_url.clone())),
        StepKind::RemoveUnknownMember {
            member_id,
            peer_url,
            ..
        } => (member_id.clone(), Some(peer_url.clone())),
        _ => (None, None),
    };
    Intent {
        step: format!("{} {}", step.kind.name().replace('_', "-"), step.host),
        address: step.host.address.clone(),
        port: step.host.port,
        kind: step.kind.name().to_string(),
        member_id,
        peer_url,
        started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_member_intent_carries_member() {
        let step = Step {
            id: 3,
            host: HostId::new("10.0.0.1", 22),
            kind: StepKind::RemoveMember {
                member_id: "8e9e05c52164694d".into(),
                peer_url: "https://10.0.0.1:2380".into(),
                via: HostId::new("10.0.0.2", 22),
            },
            after: vec![],
        };
        let i = intent_for(&step);
        assert_eq!(i.step, "remove-member 10.0.0.1");
        assert_eq!(i.kind, "remove_member");
        assert_eq!(i.member_id.as_deref(), Some("8e9e05c52164694d"));
        assert!(i.started_at.ends_with('Z'), "{}", i.started_at);
        assert!(needs_intent(&step.kind));
        assert!(!needs_intent(&StepKind::RecordHost));
    }

    #[test]
    fn download_records_are_replaced_sorted_and_forgotten_with_their_host() {
        let rec = |addr: &str, path: &str, sha: char| crate::state::DownloadRecord {
            address: addr.into(),
            port: 22,
            path: path.into(),
            url_sha256: crate::hash::sha256_hex("http://127.0.0.1/x"),
            sha256: sha.to_string().repeat(64),
        };
        let mut st = State::new();
        for r in [
            rec("10.0.0.2", "/b", 'a'),
            rec("10.0.0.1", "/a", 'b'),
            rec("10.0.0.2", "/b", 'c'),
        ] {
            StateChange::RecordDownload(r).apply(&mut st);
        }
        assert_eq!(
            st.downloads,
            [rec("10.0.0.1", "/a", 'b'), rec("10.0.0.2", "/b", 'c')]
        );
        let id = HostId::new("10.0.0.2", 22);
        assert!(st.download(&id, "/b", "http://127.0.0.1/x").is_some());
        assert!(st.download(&id, "/b", "http://127.0.0.1/y").is_none());
        StateChange::ForgetHost(id).apply(&mut st);
        assert_eq!(st.downloads, [rec("10.0.0.1", "/a", 'b')]);
    }
}
