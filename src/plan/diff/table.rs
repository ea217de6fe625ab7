//! The per-host rows of the decision table (each ends in a `host_plan::Decision`): a host
//! leaving, an unreachable one, a new one, a rebuilt one, one that left the cluster. A host
//! running in the cluster as recorded is compared in `running`.

use super::cluster::same_member_id;
use super::host_plan::{Decision, HostPlan, MemberRef};
use super::hosts::{HostCtx, peer_key};
use super::{Planner, reason};
use crate::hash::{short, short_key};
use crate::plan::model::{ClusterAction, Reason, ReasonCode, Refusal, RefusalKind};
use crate::reality::{HostFacts, K0sStatus, Probe};
use crate::spec::{HostSpec, Role};
use crate::state::HostState;
use crate::transport::{LOCAL_HOST_KEY, host_keys_differ};

/// How a recorded host differs from its record, or why it is replaced anyway.
struct IdentityChange {
    machine_id: bool,
    host_key: bool,
    /// `-replace` names the host (and it is not still the recorded machine).
    replace_requested: bool,
    /// It runs another cluster.
    foreign: bool,
}

impl IdentityChange {
    fn any(&self) -> bool {
        self.host_key || self.machine_id || self.replace_requested || self.foreign
    }
}

impl<'a> Planner<'a> {
    pub(super) fn decide(&mut self, idx: usize) -> Result<Option<HostPlan>, Refusal> {
        let h = &self.hosts[idx];

        // Removal: not in the spec, or `reset: true`.
        if !h.in_spec() {
            // `reset: true` on a host whose role differs from the running one: k0sctl refuses
            // it too (without --force), and the reset would go by the wrong role.
            if let (Some(s), Some(f)) = (h.spec, h.facts()) {
                role_check(h, f, s)?;
            }
            return self.decide_removal(idx);
        }

        let probe = match h.probe {
            None | Some(Probe::Unreachable { .. }) => return Err(unreachable_refusal(h)),
            Some(Probe::K0sNotAnswering { error }) => return Err(not_answering_refusal(h, error)),
            Some(p) => p,
        };
        if let Probe::HostKeyChanged {
            expected,
            offered,
            bastion,
        } = probe
        {
            // A bastion's changed key is never the host's rebuild: `-replace HOST` does not
            // accept it (`plan::trust` refuses it first, naming the bastion).
            if let Some(b) = bastion {
                return Err(crate::plan::trust::bastion_key_refusal(
                    b, &h.id, expected, offered,
                ));
            }
            return self.decide_key_changed(idx, expected, offered);
        }
        let Some(f) = h.facts() else {
            return Ok(None);
        };
        let spec_host = h.spec.ok_or_else(|| Refusal {
            kind: RefusalKind::Unreachable,
            message: format!("{} is not in the spec", h.id),
            details: vec![],
        })?;
        let Some(from) = h.moved_from.clone() else {
            return match h.state {
                None => self.decide_unrecorded(idx, f),
                Some(st) => self.decide_recorded(idx, f, st, spec_host),
            };
        };
        let st = h.state.ok_or_else(|| Refusal {
            kind: RefusalKind::UnknownIdentity,
            message: format!("{}: moved from {from} without a record", h.id),
            details: vec![],
        })?;
        self.check_peer_move(idx, &from, f, st, spec_host)?;
        let moved = reason(
            ReasonCode::Moved,
            if st.host_key == f.host_key {
                format!(
                    "it answers with the machine-id {} and host key {} recorded at {from}",
                    short(&st.machine_id),
                    short_key(&st.host_key)
                )
            } else {
                // Reached locally now, or recorded so (`transport::host_keys_differ`).
                format!(
                    "it answers with the machine-id {} recorded at {from} (reached {} now)",
                    short(&st.machine_id),
                    if f.host_key == LOCAL_HOST_KEY {
                        "on this machine, without SSH"
                    } else {
                        "over SSH"
                    }
                )
            },
        );
        let mut plan = match self.decide_recorded(idx, f, st, spec_host)? {
            Some(p) => p,
            None => HostPlan::new(idx, Decision::Noop, vec![]),
        };
        if matches!(plan.decision, Decision::Noop) {
            plan.decision = Decision::Move;
        }
        plan.reasons.insert(0, moved);
        Ok(Some(plan))
    }

    /// A controller whose move changes its etcd peer address: etcd still knows the member by
    /// the old peer URL, and k0s has no command to change it (`k0s etcd` has only `leave` and
    /// `member-list`: cmd/etcd in k0s). Refused with the steps to take by hand, before any
    /// step: nothing of the membership is half done.
    fn check_peer_move(
        &self,
        idx: usize,
        from: &crate::hostid::HostId,
        f: &HostFacts,
        st: &HostState,
        spec_host: &HostSpec,
    ) -> Result<(), Refusal> {
        let h = &self.hosts[idx];
        if !h.role().is_controller() || h.role() == crate::spec::Role::Single {
            return Ok(());
        }
        let old = st
            .etcd
            .as_ref()
            .map(|e| crate::k0s::peer_url_host(&e.peer_url).to_string())
            .or_else(|| f.status.as_ref().and_then(|s| s.peer_address.clone()));
        let new = spec_host.peer_address().to_string();
        let Some(old) = old.filter(|o| o.trim_matches(['[', ']']) != new) else {
            return Ok(());
        };
        let name = h.name();
        let member = st
            .etcd
            .as_ref()
            .map(|e| e.member_id.clone())
            .unwrap_or_else(|| "<member ID from `k0s etcd member-list`>".into());
        let via = self
            .hosts
            .iter()
            .find(|o| o.id != h.id && self.cluster.healthy.contains(&o.id))
            .map(|o| format!("{} ({})", o.name(), o.id))
            .unwrap_or_else(|| "a healthy controller".into());
        let update = super::peer::etcdctl_member_update(&spec_host.data_dir, &member, &new);
        Err(Refusal {
            kind: RefusalKind::PeerAddressChange,
            message: format!(
                "controller {name} moved from {from} to {} and its etcd peer address changes \
                 ({old} → {new}); k0s has no command to change a member's peer URL, so \
                 k0sform does not move it: refusing to plan",
                h.id
            ),
            details: vec![
                format!(
                    "{name}: 1. on {via}, change the member's peer URL with etcdctl (k0s's etcd \
                     client certificate): {update}"
                ),
                format!(
                    "{name}: 2. k0sform state mv {from} {}; 3. k0sform apply (writes \
                     storage.etcd.peerAddress {new} into its k0s.yaml and restarts it, with the \
                     health gates)",
                    h.id
                ),
                format!(
                    "{name}: or keep its old address: put {from} back in the spec (or give the \
                     host its old address again)"
                ),
            ],
        })
    }

    /// Not in the spec, or `reset: true`: remove the member and the objects, and reset the host
    /// only if it is still the recorded machine.
    fn decide_removal(&mut self, idx: usize) -> Result<Option<HostPlan>, Refusal> {
        let h = &self.hosts[idx];
        let (code, why) = if h.spec.is_some() {
            (ReasonCode::ResetRequested, "reset: true in k0sctl.yaml")
        } else {
            (ReasonCode::NotInSpec, "no longer in k0sctl.yaml")
        };
        let f = h.facts();
        if h.state.is_none() && !f.is_some_and(leftovers) {
            return Ok(None);
        }
        recorded_paths_check(h)?;
        let member = self.stale_member(h)?;
        if let Some(f) = f {
            self.check_not_a_spec_hosts_machine(h, f)?;
        }
        let reset = match (f, h.state) {
            (Some(f), Some(st))
                if f.machine_id == st.machine_id
                    && !host_keys_differ(&st.host_key, &f.host_key) =>
            {
                Some(st.machine_id.clone())
            }
            (Some(f), None) => Some(f.machine_id.clone()),
            (Some(_), Some(_)) => {
                self.warnings.push(format!(
                    "{} ({}) is not reset: its machine-id or host key is not the recorded one",
                    h.name(),
                    h.id
                ));
                None
            }
            (None, _) => {
                self.warnings.push(format!(
                    "{} ({}) is not reset: it cannot be reached; its cluster objects are still removed",
                    h.name(),
                    h.id
                ));
                None
            }
        };
        Ok(Some(HostPlan::new(
            idx,
            Decision::Remove { member, reset },
            vec![reason(code, why)],
        )))
    }

    /// The host offered another key than the probe expected: replaced when `-replace` names
    /// it, refused otherwise.
    fn decide_key_changed(
        &self,
        idx: usize,
        expected: &str,
        offered: &str,
    ) -> Result<Option<HostPlan>, Refusal> {
        let h = &self.hosts[idx];
        if !self.opts.is_replaced(&h.id) {
            return Err(host_key_refusal(h, expected, offered));
        }
        let mut reasons = vec![
            reason(
                ReasonCode::HostKeyChanged,
                format!(
                    "the SSH host key changed ({}→{})",
                    short_key(expected),
                    short_key(offered)
                ),
            ),
            reason(ReasonCode::ReplaceRequested, "-replace names this host"),
        ];
        reasons.dedup_by_key(|r| r.code);
        let stale = self.stale_member(h)?;
        Ok(Some(HostPlan::new(
            idx,
            Decision::Replace { stale, reset: None },
            reasons,
        )))
    }

    /// A host of the spec the state has no record of: the bootstrap host, a foreign controller
    /// named by `-replace`, one found running in the cluster, or a new one.
    fn decide_unrecorded(&self, idx: usize, f: &HostFacts) -> Result<Option<HostPlan>, Refusal> {
        let h = &self.hosts[idx];
        let bootstrap_here =
            matches!(&self.cluster.action, ClusterAction::Bootstrap { host } if host == &h.id);
        if bootstrap_here {
            return Ok(Some(HostPlan::new(
                idx,
                Decision::Add {
                    bootstrap: true,
                    stale: None,
                    reset: reset_if_leftovers(f),
                },
                vec![reason(
                    ReasonCode::Bootstrap,
                    "first controller of a new cluster (nothing runs anywhere)",
                )],
            )));
        }
        if self.cluster.foreign.contains(&h.id) {
            return Ok(Some(HostPlan::new(
                idx,
                Decision::Replace {
                    stale: None,
                    reset: reset_if_leftovers(f),
                },
                vec![reason(
                    ReasonCode::ReplaceRequested,
                    "it runs another cluster; -replace names this host",
                )],
            )));
        }
        if self.in_cluster(h) {
            if let Some(sh) = h.spec {
                role_check(h, f, sh)?;
                self.refuse_datastore_switch(h, f, sh)?;
                self.refuse_peer_change(h, f, sh)?;
            }
            return Ok(Some(HostPlan::new(
                idx,
                Decision::Adopt,
                vec![reason(
                    ReasonCode::FoundRunning,
                    "found running in the cluster; recorded without changes",
                )],
            )));
        }
        let stale = if h.role().is_controller() {
            self.stale_member(h)?.filter(|m| !m.healthy)
        } else {
            None
        };
        let mut reasons = vec![reason(ReasonCode::NewHost, "new host")];
        if stale.is_some() {
            reasons.push(reason(
                ReasonCode::LeftCluster,
                "a stale etcd member still holds its peer address",
            ));
        }
        Ok(Some(HostPlan::new(
            idx,
            Decision::Add {
                bootstrap: false,
                stale,
                reset: reset_if_leftovers(f),
            },
            reasons,
        )))
    }

    /// A recorded host: identity first (rebuilt, re-keyed, named by `-replace`, foreign), then
    /// membership, then what runs on it.
    fn decide_recorded(
        &mut self,
        idx: usize,
        f: &'a HostFacts,
        st: &'a HostState,
        spec_host: &'a HostSpec,
    ) -> Result<Option<HostPlan>, Refusal> {
        let h = &self.hosts[idx];
        let replaced = self.opts.is_replaced(&h.id);
        let key_changed = host_keys_differ(&st.host_key, &f.host_key);
        let mid_changed = f.machine_id != st.machine_id;
        // Reached locally (now or when recorded): no SSH key to refuse on, so a machine-id that
        // is not the recorded one is refused the way a changed key is, unless `-replace`.
        let local = f.host_key == LOCAL_HOST_KEY || st.host_key == LOCAL_HOST_KEY;
        if local && mid_changed && !replaced {
            return Err(local_identity_refusal(h, st, f));
        }
        if key_changed {
            let pinned = spec_host.ssh.host_key.as_deref() == Some(f.host_key.as_str());
            if !pinned && !replaced {
                return Err(host_key_refusal(h, &st.host_key, &f.host_key));
            }
        }
        let foreign = self.cluster.foreign.contains(&h.id);
        // `-replace` accepts a rebuilt host; it does not churn etcd membership for a host that is
        // still the recorded machine in the recorded cluster. So re-running an interrupted
        // `apply -replace` converges instead of replacing the fresh member a second time.
        let replaced = if replaced && !key_changed && !mid_changed && !foreign {
            self.warnings.push(format!(
                "-replace {}: {} is still the recorded machine (machine-id {}, host key {}): nothing to replace; \
                 to rebuild it anyway, remove it from the spec, apply, and add it back",
                h.id,
                h.name(),
                short(&st.machine_id),
                short_key(&st.host_key)
            ));
            false
        } else {
            replaced
        };
        let change = IdentityChange {
            machine_id: mid_changed,
            host_key: key_changed,
            replace_requested: replaced,
            foreign,
        };
        if change.any() {
            let stale = self.stale_member(h)?;
            return Ok(Some(HostPlan::new(
                idx,
                Decision::Replace {
                    stale,
                    reset: reset_if_leftovers(f),
                },
                replace_reasons(&change, f, st),
            )));
        }
        role_check(h, f, spec_host)?;
        if !self.in_cluster(h) {
            return self.decide_rejoin(idx, f);
        }
        self.decide_running(idx, f, spec_host).map(Some)
    }

    /// The recorded machine is no longer in the cluster: remove its stale member, reset it, and
    /// join it again.
    fn decide_rejoin(&self, idx: usize, f: &HostFacts) -> Result<Option<HostPlan>, Refusal> {
        let h = &self.hosts[idx];
        let r = if !f.is_running() {
            reason(
                ReasonCode::NotRunning,
                "k0s is not running; the host left the cluster",
            )
        } else if h.role().is_controller() {
            reason(
                ReasonCode::LeftCluster,
                "the host left the cluster (not an etcd member)",
            )
        } else {
            reason(
                ReasonCode::LeftCluster,
                "the host left the cluster (no Node object)",
            )
        };
        let stale = self.stale_member(h)?;
        Ok(Some(HostPlan::new(
            idx,
            Decision::Rejoin {
                stale,
                reset: reset_if_leftovers(f),
            },
            vec![r],
        )))
    }

    pub(super) fn stale_member(&self, h: &HostCtx) -> Result<Option<MemberRef>, Refusal> {
        if let Some(rec) = h.state.and_then(|s| s.etcd.as_ref()) {
            // Recorded: remove by the recorded ID, and only if the cluster still has it.
            let Some(m) = self.cluster.members.iter().find(|m| {
                m.member_id
                    .as_deref()
                    .is_some_and(|id| same_member_id(id, &rec.member_id))
                    || peer_key(&m.peer_url) == peer_key(&rec.peer_url)
            }) else {
                return Ok(None);
            };
            if let Some(owner) = m.host.as_ref().filter(|o| **o != h.id) {
                return Err(self.others_member_refusal(h, rec, m, owner));
            }
            if let Some(seen) = &m.member_id
                && !same_member_id(seen, &rec.member_id)
            {
                return Err(Refusal {
                    kind: RefusalKind::UnknownIdentity,
                    message: format!(
                        "{} ({}): its peer address {} is held by etcd member {seen}, not by the recorded {}; \
                         refusing to remove a member k0sform did not record",
                        h.name(),
                        h.id,
                        m.peer_url,
                        rec.member_id
                    ),
                    details: vec![format!(
                        "{} ({}): recorded member {}, cluster shows {seen} at {}",
                        h.name(),
                        h.id,
                        rec.member_id,
                        m.peer_url
                    )],
                });
            }
            return Ok(Some(MemberRef {
                member_id: rec.member_id.clone(),
                // As the cluster reports it: the executor checks this URL still carries the ID.
                peer_url: m.peer_url.clone(),
                healthy: m.healthy,
            }));
        }
        let Some(m) = self.member_of(&h.id) else {
            return Ok(None);
        };
        let Some(member_id) = m.member_id.clone() else {
            // Without an ID the executor cannot check what it removes; going on would reset the
            // host and leave its member registered (a dead voter). Members are matched by peer
            // URL, so this happens only where no EtcdMember object names the member: k0s before
            // 1.30, or a hostname with capitals on k0s 1.30 to 1.34.0 (the API refuses the name).
            return Err(Refusal {
                kind: RefusalKind::UnknownIdentity,
                message: format!(
                    "{} ({}): its etcd member at {} has no known member ID; refusing to change its \
                     membership without identifying it",
                    h.name(),
                    h.id,
                    m.peer_url
                ),
                details: vec![format!(
                    "{} ({}): no EtcdMember object gives the ID of {} (k0s before 1.30, or a hostname \
                     with capitals on k0s 1.30 to 1.34.0); remove the member by hand (k0s etcd leave \
                     --peer-address={} on a healthy controller) and plan again",
                    h.name(),
                    h.id,
                    m.peer_url,
                    crate::k0s::peer_url_host(&m.peer_url)
                )],
            });
        };
        Ok(Some(MemberRef {
            member_id,
            peer_url: m.peer_url.clone(),
            healthy: m.healthy,
        }))
    }
}

impl Planner<'_> {
    /// A state record names the etcd member of another host (`cluster::member_owner`): a live
    /// controller of the spec, a machine that answers with its peer address, or another record.
    /// Removing it would take that host's member out of etcd (two such records: a 3-member
    /// etcd down to 1). Refused, naming both hosts.
    fn others_member_refusal(
        &self,
        h: &HostCtx,
        rec: &crate::state::EtcdMemberState,
        m: &super::cluster::Member,
        owner: &crate::hostid::HostId,
    ) -> Refusal {
        let o = self.host_by_id(owner);
        let who = match o {
            Some(o) => format!("{} ({})", o.name(), o.id),
            None => owner.to_string(),
        };
        let key = peer_key(&m.peer_url);
        let why = match o {
            Some(o)
                if o.facts()
                    .and_then(|f| f.status.as_ref())
                    .and_then(|s| s.peer_address.as_deref())
                    .is_some_and(|p| peer_key(&super::hosts::peer_url(p)) == key) =>
            {
                format!("{who} answers with that peer address")
            }
            Some(o) if o.facts().is_some() && o.spec.is_none() => {
                format!("{who} answers at that address")
            }
            Some(o) if o.spec.is_some() => {
                format!("it is the peer address of {who}, a host of the spec")
            }
            _ => format!("the state records it for {who} too"),
        };
        let seen = m.member_id.as_deref().unwrap_or("(no ID shown)");
        Refusal {
            kind: RefusalKind::UnknownIdentity,
            message: format!(
                "{} ({}): the state records etcd member {} ({}) for it, but member {seen} at {} \
                 belongs to {who}; refusing to remove another host's etcd member",
                h.name(),
                h.id,
                rec.member_id,
                rec.peer_url,
                m.peer_url
            ),
            details: vec![
                format!("{} ({}): {}: {why}", h.name(), h.id, m.peer_url),
                format!(
                    "{} ({}): if it is no machine of this cluster, its state record is wrong: \
                     check it (k0sform state show {}) and forget it (k0sform state rm {})",
                    h.name(),
                    h.id,
                    h.id,
                    h.id
                ),
            ],
        }
    }
}

impl Planner<'_> {
    /// The machine answering at a leaving host's address is also a host of the spec, at
    /// another address (same machine-id and host key): a second address of that machine, and
    /// a state record for it (copied from the spec host's, which the state shows) would reset
    /// the live host. Refused, naming both. A move (the record follows the machine to its new
    /// address, `plan::moves`) never gets here: its old address is no host of the plan.
    fn check_not_a_spec_hosts_machine(&self, h: &HostCtx, f: &HostFacts) -> Result<(), Refusal> {
        let Some(o) = self.hosts.iter().find(|o| {
            o.id != h.id
                && o.in_spec()
                && o.facts().is_some_and(|of| {
                    of.machine_id == f.machine_id && !host_keys_differ(&of.host_key, &f.host_key)
                })
        }) else {
            return Ok(());
        };
        Err(Refusal {
            kind: RefusalKind::UnknownIdentity,
            message: format!(
                "{} ({}) leaves the spec, but the machine answering there is {} ({}), a host of \
                 the spec (machine-id {}, host key {}); refusing to reset it",
                h.name(),
                h.id,
                o.name(),
                o.id,
                short(&f.machine_id),
                short_key(&f.host_key)
            ),
            details: vec![format!(
                "{} ({}): if it is a second address of {}, its state record is wrong: forget it \
                 (k0sform state rm {}); the machine stays as {}",
                h.name(),
                h.id,
                o.id,
                h.id,
                o.id
            )],
        })
    }
}

/// A host known only to the state is reset (and, on destroy, its binary deleted) with the k0s
/// paths its record names: refused when one of them cannot be k0s's
/// (`state::access::recorded_path_problems`).
pub(super) fn recorded_paths_check(h: &HostCtx) -> Result<(), Refusal> {
    let Some(st) = h.state.filter(|_| h.spec.is_none()) else {
        return Ok(());
    };
    let problems = crate::state::access::recorded_path_problems(st);
    if problems.is_empty() {
        return Ok(());
    }
    let mut details: Vec<String> = problems
        .iter()
        .map(|p| format!("{} ({}): {p}", h.name(), h.id))
        .collect();
    details.push(format!(
        "{} ({}): its state record is wrong: check it (k0sform state show {}), and forget it \
         (k0sform state rm {}) after resetting the machine by hand if it runs k0s",
        h.name(),
        h.id,
        h.id,
        h.id
    ));
    Err(Refusal {
        kind: RefusalKind::UnknownIdentity,
        message: format!(
            "{} ({}) leaves the cluster, but the k0s paths its state record names are no \
             plausible k0s paths; refusing to remove it with them",
            h.name(),
            h.id
        ),
        details,
    })
}

pub(super) fn leftovers(f: &HostFacts) -> bool {
    f.service.is_some() || f.is_running() || f.has_etcd_data
}

/// The role k0s runs in, as k0sctl names it from `k0s status` (phase/gather_k0s_facts.go:
/// a controller with workloads is `single` when started with `--single`, else
/// `controller+worker`; the legacy `server` roles read as controller, `parse_status`).
fn running_role(s: &K0sStatus) -> Option<Role> {
    match s.role.as_str() {
        "worker" => Some(Role::Worker),
        "controller" if !s.workloads => Some(Role::Controller),
        "controller" if s.single_node || s.args.iter().any(|a| a == "--single=true") => {
            Some(Role::Single)
        }
        "controller" => Some(Role::ControllerWorker),
        _ => None,
    }
}

/// k0s runs on the host in another role than the spec gives it. k0sctl refuses this ("is
/// configured as k0s X but is already running as Y - role change is not supported",
/// phase/gather_k0s_facts.go `handleRoleMismatch`); k0sform refuses too, before any step, and
/// says how to change the role: take the host out of the cluster (reset) and join it again.
fn role_check(h: &HostCtx, f: &HostFacts, spec_host: &HostSpec) -> Result<(), Refusal> {
    let Some(running) = f.status.as_ref().and_then(running_role) else {
        return Ok(());
    };
    let want = spec_host.role;
    if running == want {
        return Ok(());
    }
    let name = h.name();
    // A controller leaves etcd first: the plan of step 1 shows it, and refuses it where the
    // others would lose quorum.
    let leaves = if running.is_controller() {
        "it leaves etcd and the cluster and is reset (the plan refuses it if the other \
         controllers would lose quorum)"
    } else {
        "it leaves the cluster and is reset"
    };
    Err(Refusal {
        kind: RefusalKind::RoleChange,
        message: format!(
            "{name} ({}) runs k0s as {running} but the spec gives it role {want}; k0sform does \
             not change the role of a running host (k0sctl refuses it too): refusing to plan",
            h.id
        ),
        details: vec![
            format!("{name}: to keep it as it runs, set `role: {running}` on it in the spec"),
            format!(
                "{name}: to run it as {want}: 1. remove it from the spec (or set `reset: true` \
                 on it, with `role: {running}`) and apply: {leaves}"
            ),
            format!(
                "{name}: 2. add it back with `role: {want}` (without `reset`) and apply: it \
                 joins as {want}"
            ),
        ],
    })
}

/// The machine to reset before installing, when an earlier k0s left something behind.
fn reset_if_leftovers(f: &HostFacts) -> Option<String> {
    leftovers(f).then(|| f.machine_id.clone())
}

fn replace_reasons(change: &IdentityChange, f: &HostFacts, st: &HostState) -> Vec<Reason> {
    let mut reasons = Vec::new();
    if change.machine_id {
        reasons.push(reason(
            ReasonCode::MachineIdChanged,
            "the host was rebuilt (machine-id changed)",
        ));
    }
    if change.host_key {
        reasons.push(reason(
            ReasonCode::HostKeyChanged,
            format!(
                "the SSH host key changed ({}→{})",
                short_key(&st.host_key),
                short_key(&f.host_key)
            ),
        ));
    }
    if change.replace_requested {
        reasons.push(reason(
            ReasonCode::ReplaceRequested,
            "-replace names this host",
        ));
    }
    if change.foreign {
        let other = f
            .view
            .as_ref()
            .and_then(|v| v.cluster_uid.as_deref())
            .map(short)
            .unwrap_or_else(|| "?".into());
        reasons.push(reason(
            ReasonCode::ReplaceRequested,
            format!("it runs another cluster (identity {other})"),
        ));
    }
    reasons
}

pub(super) fn unreachable_refusal(h: &HostCtx) -> Refusal {
    let err = match h.probe {
        Some(Probe::Unreachable { error }) => error.clone(),
        _ => "not probed".into(),
    };
    Refusal {
        kind: RefusalKind::Unreachable,
        message: format!("{} ({}) is unreachable", h.name(), h.id),
        details: vec![format!(
            "{} ({}): unreachable ({err}): cannot tell down from rebuilt; \
             leave it out with -exclude {}",
            h.name(),
            h.id,
            h.id
        )],
    }
}

/// Reachable, but `k0s status` did not answer in time (it can block for minutes on a node that
/// runs workloads): k0s may run, so nothing can be decided for this host.
pub(super) fn not_answering_refusal(h: &HostCtx, error: &str) -> Refusal {
    Refusal {
        kind: RefusalKind::Unreachable,
        message: format!("{} ({}): k0s not answering", h.name(), h.id),
        details: vec![format!(
            "{} ({}): reachable, but {error}; k0s may be running: plan again when it answers, \
             or leave it out with -exclude {}",
            h.name(),
            h.id,
            h.id
        )],
    }
}

/// A host reached on this machine (`localhost`), or recorded so, whose machine-id is not the
/// recorded one: it has no SSH key, so the machine-id is its whole identity.
fn local_identity_refusal(h: &HostCtx, st: &HostState, f: &HostFacts) -> Refusal {
    Refusal {
        kind: RefusalKind::UnknownIdentity,
        message: format!(
            "{} ({}) is not the recorded machine (machine-id changed); refusing to touch it",
            h.name(),
            h.id
        ),
        details: vec![format!(
            "{} ({}): machine-id {} recorded, {} found (a localhost host has no SSH host key, \
             its machine-id is its identity); if the machine was rebuilt, run with -replace {}",
            h.name(),
            h.id,
            short(&st.machine_id),
            short(&f.machine_id),
            h.id
        )],
    }
}

pub(super) fn host_key_refusal(h: &HostCtx, expected: &str, offered: &str) -> Refusal {
    Refusal {
        kind: RefusalKind::HostKeyChanged,
        message: format!(
            "{} ({}) offered another SSH host key than recorded; refusing to touch it",
            h.name(),
            h.id
        ),
        details: vec![format!(
            "{} ({}): host key {expected} recorded, {offered} offered; if the host was rebuilt, \
             run with -replace {} or pin the new key with ssh.hostKey",
            h.name(),
            h.id,
            h.id
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(role: &str, workloads: bool, single: bool, args: &[&str]) -> K0sStatus {
        K0sStatus {
            version: crate::version::K0sVersion::parse("v1.33.4+k0s.0").unwrap(),
            pid: 1,
            role: role.into(),
            workloads,
            single_node: single,
            args: args.iter().map(|a| a.to_string()).collect(),
            peer_address: None,
            storage_type: None,
            invocation_id: None,
        }
    }

    #[test]
    fn running_role_as_k0sctl_names_it() {
        let r = |s: K0sStatus| running_role(&s);
        assert_eq!(r(status("worker", true, false, &[])), Some(Role::Worker));
        assert_eq!(
            r(status("controller", false, false, &[])),
            Some(Role::Controller)
        );
        assert_eq!(
            r(status("controller", true, false, &["--enable-worker=true"])),
            Some(Role::ControllerWorker)
        );
        assert_eq!(r(status("controller", true, true, &[])), Some(Role::Single));
        assert_eq!(
            r(status("controller", true, false, &["--single=true"])),
            Some(Role::Single)
        );
        assert_eq!(r(status("something", true, false, &[])), None);
    }
}
