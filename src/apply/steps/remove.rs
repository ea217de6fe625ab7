//! Taking a host out: `RemoveMember` (by the member ID recorded in state, checked against what
//! its peer URL carries now), `DeleteObjects` (Node, EtcdMember, ControlNode) and `ResetHost`
//! (only the machine recorded in state). `Drain` lives in drain.rs.

use super::deadline::Deadline;
use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s;
use crate::k0s::probe_script::peer_url_host as peer_host;
use crate::plan::{ObjectKind, Step};
use crate::transport::Transport;

/// Member IDs compare as hex numbers (case and leading zeros do not matter).
pub(super) fn same_member_id(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.trim()
            .trim_start_matches("0x")
            .trim_start_matches('0')
            .to_lowercase()
    };
    norm(a) == norm(b)
}

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn remove_member(
        &self,
        step: &Step,
        ctx: &StepContext,
        member_id: &str,
        peer_url: &str,
        via: &HostId,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let host = &step.host;
        let addr = peer_host(peer_url);
        // The planner never lets one host's record name another's member (`plan::diff`,
        // `cluster::member_owner`); checked again here, as `remove_unknown_member` does.
        if let Some(other) = self
            .spec
            .controllers()
            .find(|h| h.peer_address() == addr && &h.id() != host)
        {
            return Err(StepError::Unsafe(format!(
                "{peer_url} is the peer address of {}, a controller of the spec: refusing to remove its member for {host}",
                other.id()
            )));
        }
        let members = self.member_list(via).await.map_err(StepError::Unsafe)?;
        if !members.values().any(|u| peer_host(u) == addr) {
            ctx.progress(format!(
                "{peer_url} is no longer an etcd member; nothing to remove"
            ));
            return Ok(vec![StateChange::ClearEtcd(host.clone())]);
        }
        let objects = self.etcd_member_objects(via).await.map_err(|e| {
            StepError::Unsafe(format!(
                "cannot check which member ID {peer_url} carries: {e}"
            ))
        })?;
        let object = objects
            .iter()
            .find(|o| o.peer_address.as_deref() == Some(addr))
            .cloned()
            .or_else(|| {
                // Deleted earlier in this run (removal plans delete it first): use what it said.
                // By peer address: etcd's member name keeps the hostname's case, the object's
                // name does not (k0s ≥ 1.34.1).
                self.seen_object(addr)
            });
        match &object {
            None => {
                return Err(StepError::Unsafe(format!(
                    "cannot check that {peer_url} still carries member {member_id}: {via} shows no EtcdMember object for {addr}"
                )));
            }
            Some(o) => match &o.member_id {
                Some(id) if same_member_id(id, member_id) => {}
                Some(id) => {
                    return Err(StepError::Unsafe(format!(
                        "{peer_url} now carries etcd member {id}, not {member_id} as recorded in the state: refusing to remove it"
                    )));
                }
                None => {
                    return Err(StepError::Unsafe(format!(
                        "cannot check that {peer_url} still carries member {member_id}: EtcdMember \"{}\" has no member ID yet",
                        o.name
                    )));
                }
            },
        }
        self.require_health(ctx, via, Some(addr)).await?;
        gate().await?;
        self.leave(ctx, via, peer_url, &format!("member {member_id}"))
            .await?;
        Ok(vec![StateChange::ClearEtcd(host.clone())])
    }

    /// `k0s etcd leave --peer-address` on `via` for the member at `peer_url`, then wait until
    /// `via` no longer lists it. `what` names the member in messages.
    async fn leave(
        &self,
        ctx: &StepContext,
        via: &HostId,
        peer_url: &str,
        what: &str,
    ) -> Result<(), StepError> {
        let addr = peer_host(peer_url);
        let p = self.paths(via);
        // etcd's strict reconfiguration check refuses a removal ("unhealthy cluster") until the
        // serving member has seen every other voter for a few seconds; the health check above
        // cannot see that window, so such refusals are retried (as k0s's own reconciler does).
        let retry = Deadline::new(self.opts.health_grace, self.opts.poll_interval);
        loop {
            let out = self
                .exec(via, k0s::etcd_leave(&p.bin, &p.data_dir, addr))
                .await
                .map_err(failed)?;
            if out.success() || k0s::peer_not_found(&out) {
                break;
            }
            let why = out.error_line();
            if k0s::classify(&out) != Some(k0s::K0sFailure::EtcdUnhealthy) {
                return Err(failed(format!(
                    "{via}: removing etcd {what} ({peer_url}) failed: {why}"
                )));
            }
            ctx.progress(format!("etcd refused the removal for now: {why}"));
            retry
                .retry(&format!("etcd to accept removing {what}"), &why)
                .await
                .map_err(|e| failed(format!("{via}: {e}")))?;
        }
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        loop {
            let why = match self.member_list(via).await {
                Ok(m) if !m.values().any(|u| peer_host(u) == addr) => break,
                Ok(_) => format!("{peer_url} is still listed"),
                Err(e) => e,
            };
            dl.retry(&format!("{what} to be gone"), &why)
                .await
                .map_err(failed)?;
        }
        Ok(())
    }

    /// `destroy`: remove an etcd member no host owns (`StepKind::RemoveUnknownMember`) through
    /// `via`, by its peer address: only while no host of the spec or the state has that peer
    /// address, and, where an EtcdMember object names the member at that address, only if it
    /// shows the ID the plan saw (or the plan saw none and the object shows none). Changes no
    /// state.
    pub(super) async fn remove_unknown_member(
        &self,
        ctx: &StepContext,
        member_id: Option<&str>,
        peer_url: &str,
        via: &HostId,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let addr = peer_host(peer_url);
        let members = self.member_list(via).await.map_err(StepError::Unsafe)?;
        if !members.values().any(|u| peer_host(u) == addr) {
            ctx.progress(format!(
                "{peer_url} is no longer an etcd member; nothing to remove"
            ));
            return Ok(vec![]);
        }
        if let Some(h) = self.host_for_peer(addr) {
            return Err(StepError::Unsafe(format!(
                "{peer_url} is {h}'s peer address now: refusing to remove it as a member no host owns"
            )));
        }
        let object = match self.etcd_member_objects(via).await {
            Ok(objects) => objects
                .into_iter()
                .find(|o| o.peer_address.as_deref() == Some(addr)),
            // No EtcdMember objects to check against (k0s before 1.30 has no such CRD): the
            // plan saw no ID either, or it would have come from one.
            Err(_) if member_id.is_none() => None,
            Err(e) => {
                return Err(StepError::Unsafe(format!(
                    "cannot check which member ID {peer_url} carries: {e}"
                )));
            }
        };
        match (
            member_id,
            object.as_ref().and_then(|o| o.member_id.as_deref()),
        ) {
            (Some(want), Some(id)) if same_member_id(want, id) => {}
            (None, None) => {}
            (Some(want), Some(id)) => {
                return Err(StepError::Unsafe(format!(
                    "{peer_url} now carries etcd member {id}, not {want} as the plan saw: refusing to remove it; plan again"
                )));
            }
            (Some(want), None) => {
                return Err(StepError::Unsafe(format!(
                    "cannot check that {peer_url} still carries member {want}: {via} shows no EtcdMember object with an ID for {addr}; plan again"
                )));
            }
            (None, Some(id)) => {
                return Err(StepError::Unsafe(format!(
                    "{peer_url} now carries etcd member {id}, which the plan did not see: refusing to remove it; plan again"
                )));
            }
        }
        self.require_health(ctx, via, Some(addr)).await?;
        gate().await?;
        let what = match member_id {
            Some(id) => format!("member {id}"),
            None => "member".to_string(),
        };
        self.leave(ctx, via, peer_url, &what).await?;
        Ok(vec![])
    }

    /// Delete each object by its own name (`StepKind::object_names`).
    pub(super) async fn delete_objects(
        &self,
        objects: &[(ObjectKind, &str)],
        via: &HostId,
    ) -> Result<Vec<StateChange>, StepError> {
        let p = self.paths(via);
        if objects.iter().any(|(o, _)| *o == ObjectKind::EtcdMember) {
            // Remember the member ID it shows, for a RemoveMember that follows.
            let _ = self.etcd_member_objects(via).await;
        }
        for (o, node) in objects {
            let node = *node;
            let cmd = match o {
                ObjectKind::Node => k0s::delete_node(&p.bin, &p.data_dir, node),
                ObjectKind::EtcdMember => k0s::delete_etcd_member(&p.bin, &p.data_dir, node),
                ObjectKind::ControlNode => k0s::delete_control_node(&p.bin, &p.data_dir, node),
            };
            let out = self.exec(via, cmd).await.map_err(failed)?;
            if !out.success() && !k0s::kubectl_not_found(&out) {
                return Err(failed(format!(
                    "{via}: deleting {} \"{node}\" failed: {}",
                    crate::apply::summary::object_kind_name(*o),
                    out.error_line()
                )));
            }
        }
        Ok(vec![])
    }

    pub(super) async fn reset_host(
        &self,
        ctx: &StepContext,
        host: &HostId,
        machine_id: &str,
        uninstall: bool,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        // A host known only to the state is reset with its recorded paths (`paths`): the plan
        // refused implausible ones (`state::paths`); checked again before anything runs.
        if self.spec_host(host).is_none()
            && let Some(st) = self.known_host(host)
        {
            let problems = crate::state::access::recorded_path_problems(st);
            if !problems.is_empty() {
                return Err(StepError::Unsafe(format!(
                    "{host}: the state records no plausible k0s paths ({}): refusing to reset it with them",
                    problems.join("; ")
                )));
            }
        }
        let facts = self.probe(host).await?;
        if facts.machine_id.trim() != machine_id.trim() {
            return Err(StepError::Unsafe(format!(
                "{host} now has machine-id {}, not {machine_id} as recorded: it is another machine (rebuilt?); refusing to reset it",
                facts.machine_id.trim()
            )));
        }
        gate().await?;
        self.stop_k0s(host).await?;
        let p = self.paths(host);
        let cmd = k0s::reset(&p.bin, &p.data_dir, p.kubelet_root_dir.as_deref());
        let out = self.exec(host, cmd).await.map_err(failed)?;
        if k0s::reset_cleanup_incomplete(&out) {
            // k0sctl warns and goes on (phase/reset_workers.go, reset_controllers.go): k0s is
            // uninstalled; a removal or destroy does not stop half-way on a leftover.
            ctx.warn(format!(
                "{host}: k0s reset left something behind ({}); reboot the host and remove it by hand",
                out.error_line()
            ));
        } else if !out.success() {
            return Err(failed(format!(
                "{host}: k0s reset failed: {}",
                out.error_line()
            )));
        }
        if uninstall {
            // k0sctl's reset phases remove the binary and the config after `k0s reset`, which
            // keeps them (phase/reset_workers.go, reset_controllers.go, reset_leader.go).
            // Where the spec's installFlags put them (k0sctl `cluster/host.go`
            // `K0sConfigPath`, `K0sJoinTokenPath`); the defaults for a host only the state knows.
            let (config, token) = match self.spec_host(host) {
                Some(hs) => (k0s::desired::config_file(hs), k0s::desired::token_file(hs)),
                None => (
                    k0s::desired::CONFIG_FILE.to_string(),
                    k0s::desired::TOKEN_FILE.to_string(),
                ),
            };
            let cmd = k0s::remove_files(&[p.bin.as_str(), &config, &token]);
            self.exec_ok(host, cmd, "removing the k0s binary and config")
                .await?;
        }
        Ok(vec![])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_ids_compare_as_hex() {
        assert!(same_member_id("8E9E05C52164694D", "8e9e05c52164694d"));
        assert!(same_member_id("0d515f0157a56f3f", "d515f0157a56f3f"));
        assert!(!same_member_id("8e9e05c52164694d", "8e9e05c52164694e"));
    }
}
