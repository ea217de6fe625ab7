//! `RecordHost`: probe a host that k0sform just installed, joined or adopted and write what it is
//! (machine-id, host key, etcd member ID, version, flags) into the state.

use super::deadline::Deadline;
use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s::desired;
use crate::k0s::probe_script::peer_url_host as peer_host;
use crate::reality::HostFacts;
use crate::state::{ClusterState, EtcdMemberState, HostAccess, HostState};
use crate::transport::Transport;

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn record_host(
        &self,
        ctx: &StepContext,
        host: &HostId,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.spec_host(host);
        let before = self.recorded(host);
        let role = hs
            .map(|h| h.role)
            .or(before.map(|b| b.role))
            .ok_or_else(|| failed(format!("{host} is neither in the spec nor in the state")))?;
        let addr = hs.map(|h| h.peer_address().to_string()).or_else(|| {
            before
                .and_then(|b| b.etcd.as_ref())
                .map(|e| peer_host(&e.peer_url).to_string())
        });
        let dl = Deadline::new(self.opts.health_grace, self.opts.poll_interval);
        let (facts, etcd) = loop {
            let facts = self.probe(host).await?;
            // Workers, and kine controllers (no etcd, so no member ID), have no member to wait for.
            if !role.is_controller() || facts.runs_kine() {
                break (facts, None);
            }
            let why = match self.current_member(host, &facts, addr.as_deref()) {
                Ok(etcd) => break (facts, Some(etcd)),
                Err(why) => why,
            };
            if dl.retry("the etcd member ID", &why).await.is_err() {
                ctx.progress(format!(
                    "etcd member ID unknown ({why}); recorded without it"
                ));
                break (facts, None);
            }
        };
        let host_key = if facts.host_key.is_empty() {
            before.map(|b| b.host_key.clone()).unwrap_or_default()
        } else {
            facts.host_key.clone()
        };
        if host_key.is_empty() || facts.machine_id.trim().is_empty() {
            return Err(failed(format!(
                "{host}: the probe returned no machine-id or host key"
            )));
        }
        let local = host_key == crate::transport::LOCAL_HOST_KEY;
        let mut changes = Vec::new();
        if let Some(uid) = facts.view.as_ref().and_then(|v| v.cluster_uid.clone()) {
            changes.push(StateChange::AdoptCluster(ClusterState {
                name: self.spec.name.clone(),
                uid,
                etcd_cluster_id: None,
                k0s_version: self.spec.k0s.version.clone(),
                config_sha256: None,
            }));
        }
        let node_name = hs
            .and_then(|h| h.node_name())
            .unwrap_or_else(|| facts.hostname.trim().to_string());
        changes.push(StateChange::UpsertHost(Box::new(HostState {
            address: host.address.clone(),
            port: host.port,
            role,
            node_name: (!node_name.is_empty()).then(|| node_name.to_lowercase()),
            machine_id: facts.machine_id.trim().to_string(),
            host_key,
            // Reached locally: no key; a key recorded over SSH is not kept beside it.
            host_public_key: facts.host_public_key.clone().or_else(|| {
                before
                    .filter(|_| !local)
                    .and_then(|b| b.host_public_key.clone())
            }),
            etcd,
            k0s_version: facts.k0s_version.clone(),
            install_flags_sha256: facts
                .status
                .as_ref()
                .map(|s| desired::install_flags_sha256(s.args.get(2..).unwrap_or_default())),
            config_sha256: facts.config_sha256.clone(),
            k0s_binary: facts.binary_record(),
            access: hs
                .map(HostAccess::of)
                .or_else(|| before.and_then(|b| b.access.clone())),
        })));
        Ok(changes)
    }

    /// The etcd member of `host` at its peer address `addr` in the probe's view, written by the
    /// k0s running there now; else why there is none (yet).
    fn current_member(
        &self,
        host: &HostId,
        facts: &HostFacts,
        addr: Option<&str>,
    ) -> Result<EtcdMemberState, String> {
        // The object must have been written by the k0s running there now, when both say
        // which start that is: one restored from a backup (or left from the host's earlier
        // life) shows the old member ID until the new k0s rewrites it. k0s rewrites the
        // labels (the start) before the status (the ID), so after a join in this run the ID
        // the object showed before the join is not taken either (`replaced_member_ids`).
        // Not covered: the controller a restore bootstrapped. Its object comes from the
        // backup, no earlier read of it exists, and the restored member may keep the ID
        // (etcd's restore makes it from the peer URLs and cluster token alone:
        // membership/cluster.go `NewClusterFromURLsMap`, `NewMember(.., nil)`), so nothing
        // here tells a stale ID from a current one between k0s's two writes.
        let running = facts
            .status
            .as_ref()
            .and_then(|s| s.invocation_id.as_deref());
        let member = facts.view.as_ref().and_then(|v| {
            v.members.iter().find(|m| {
                addr == Some(peer_host(&m.peer_url))
                    && m.member_id
                        .as_deref()
                        .is_some_and(|id| !self.is_replaced_member_id(host, id))
                    && (running.is_none()
                        || m.invocation.is_none()
                        || m.invocation.as_deref() == running)
            })
        });
        if let Some(m) = member {
            return Ok(EtcdMemberState {
                member_id: m.member_id.clone().unwrap_or_default(),
                peer_url: m.peer_url.clone(),
            });
        }

        // EtcdMember objects appear a little after a join (and not at all before k0s 1.30).
        let here = facts.view.as_ref().and_then(|v| {
            v.members
                .iter()
                .find(|m| addr == Some(peer_host(&m.peer_url)))
        });
        Err(match here.map(|m| m.member_id.as_deref()) {
            None => "no etcd member at its address".to_string(),
            Some(None) => "no EtcdMember object with a member ID".to_string(),
            Some(Some(id)) if self.is_replaced_member_id(host, id) => {
                format!("its EtcdMember object still shows member {id} of its earlier life")
            }
            Some(Some(_)) => {
                "its EtcdMember object was written by an earlier start of k0s".to_string()
            }
        })
    }
}
