//! `plan -destroy` / `destroy`, k0sform's `k0sctl reset`: every host of the spec and of the
//! state is reset and forgotten, and the state ends with no hosts and no cluster identity (its
//! lineage kept). Workers go first, all at once (the executor's `-parallelism` bounds them), then
//! controllers one at a time. k0sctl's reset (action/reset.go, phase/reset_{workers,controllers,
//! leader}.go) stops and resets each controller without leaving etcd (`NoLeave: true`), which
//! takes the remaining members below quorum half-way through; here each controller but the last
//! leaves etcd first (removed by its recorded member ID through the controller reset last, with
//! the quorum arithmetic shown), so an interrupted destroy leaves a smaller, healthy cluster that
//! running destroy again finishes. The last member is simply reset, as k0sctl's ResetLeader does:
//! etcd cannot remove its only member, and its data goes with `k0s reset`. Members no host of
//! the spec or the state owns are removed first, by peer address through that same controller.
//!
//! A host is reset only when it is the machine the state recorded (machine-id and host key), or
//! `-replace` names it; otherwise the plan is refused (exit 3). An unreachable host refuses the
//! plan (exit 1) unless `-exclude` names it: then it is dropped from the state, not reset, and
//! the plan says so.

use super::host_plan::{Decision, HostPlan};
use super::hosts::HostCtx;
use super::quorum::{QuorumSim, quorum};
use super::steps::{Builder, StepOwners};
use super::table::{host_key_refusal, leftovers, not_answering_refusal, unreachable_refusal};
use super::{PlanBody, PlanKind, Planner, merge_refusals, reason};
use crate::hostid::HostId;
use crate::plan::model::*;
use crate::reality::Probe;
use crate::transport::host_keys_differ;
use std::collections::BTreeMap;

/// The steps, their owners, the etcd summary, and extra detail lines per host (the quorum
/// arithmetic of each removal).
type DestroySteps = (
    Vec<Step>,
    StepOwners,
    QuorumSummary,
    BTreeMap<HostId, Vec<Detail>>,
);

impl Planner<'_> {
    pub(super) fn destroy_plan(&mut self) -> Result<Plan, Refusal> {
        let outside_changes = self.outside_changes();
        self.intent_warnings();
        self.selector_warnings();
        let mut plans = Vec::new();
        let mut refusals = Vec::new();
        for idx in 0..self.hosts.len() {
            match self.decide_destroy(idx) {
                Ok(Some(p)) => plans.push(p),
                Ok(None) => {}
                Err(r) => refusals.push(r),
            }
        }
        if !refusals.is_empty() {
            return Err(merge_refusals(refusals));
        }
        let (steps, owner, etcd, notes) = self.destroy_steps(&plans)?;
        let (steps, owner) = self.with_hooks(&plans, steps, owner);
        let mut changes = self.host_changes(&plans, &steps, &owner);
        // The quorum arithmetic goes under the removal it is about: the k-th note under the
        // host's k-th removal line, the rest (the last member, which is reset without leaving)
        // after the last of them, or first when there is none.
        for c in &mut changes {
            if let Some(lines) = notes.get(&c.host) {
                let removals: Vec<usize> = c
                    .details
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| d.text.starts_with("etcd member "))
                    .map(|(i, _)| i)
                    .collect();
                let mut out = Vec::with_capacity(c.details.len() + lines.len());
                let mut pending = lines.iter();
                for (i, d) in c.details.iter().enumerate() {
                    if i == 0 && removals.is_empty() {
                        out.extend(pending.by_ref().cloned());
                    }
                    out.push(d.clone());
                    if removals.contains(&i) {
                        if Some(&i) == removals.last() {
                            out.extend(pending.by_ref().cloned());
                        } else {
                            out.extend(pending.next().cloned());
                        }
                    }
                }
                out.extend(pending.cloned());
                c.details = out;
            }
        }
        super::dag_checked(&steps)?;
        Ok(self.finish(
            PlanKind::Destroy,
            PlanBody {
                outside_changes,
                changes,
                drift: Vec::new(),
                steps,
                etcd,
                hooks_not_run: Vec::new(),
            },
        ))
    }

    /// What destroy does to one host: reset it (when something of k0s is there) and forget it,
    /// its etcd member leaving first; refused when it cannot be reached or is not the recorded
    /// machine.
    fn decide_destroy(&mut self, idx: usize) -> Result<Option<HostPlan>, Refusal> {
        let h = &self.hosts[idx];
        if h.excluded {
            let Some(_) = h.state else {
                return Ok(None);
            };
            self.warnings.push(format!(
                "{} ({}) is excluded: it is NOT reset, only dropped from the state; reset it by \
                 hand (k0s stop; k0s reset) before using it again",
                h.name(),
                h.id
            ));
            let member = if h.role().is_controller() {
                self.stale_member(h)?
            } else {
                None
            };
            return Ok(Some(HostPlan::new(
                idx,
                Decision::Remove {
                    member,
                    reset: None,
                },
                vec![reason(
                    ReasonCode::Destroy,
                    "the cluster is destroyed; -exclude names it: dropped from the state without a reset",
                )],
            )));
        }
        super::table::recorded_paths_check(h)?;
        let f = match h.probe {
            None | Some(Probe::Unreachable { .. }) => return Err(unreachable_refusal(h)),
            Some(Probe::K0sNotAnswering { error }) => return Err(not_answering_refusal(h, error)),
            Some(Probe::HostKeyChanged {
                expected,
                offered,
                bastion: Some(b),
            }) => {
                return Err(crate::plan::trust::bastion_key_refusal(
                    b, &h.id, expected, offered,
                ));
            }
            Some(Probe::HostKeyChanged {
                expected, offered, ..
            }) => {
                return Err(host_key_refusal(h, expected, offered));
            }
            Some(Probe::Reached(f)) => f,
        };
        if let Some(st) = h.state
            && (f.machine_id != st.machine_id || host_keys_differ(&st.host_key, &f.host_key))
            && !self.opts.is_replaced(&h.id)
        {
            return Err(identity_refusal(h, f, st));
        }
        let member = if h.role().is_controller() {
            self.stale_member(h)?
        } else {
            None
        };
        // The recorded machine showing only k0s's binary (no service, process or data) was reset
        // by a destroy that stopped before removing the binary (killed between its `k0s reset`
        // and the `rm`): it is reset again (`k0s reset` where nothing is installed succeeds,
        // k0s pkg/cleanup) and the binary at its install path removed, then forgotten. Not on a
        // machine -replace names: a binary there is not known to be k0sform's.
        let recorded_machine = h.state.is_some_and(|st| {
            f.machine_id == st.machine_id && !host_keys_differ(&st.host_key, &f.host_key)
        });
        let reset =
            (leftovers(f) || (recorded_machine && binary_left(f))).then(|| f.machine_id.clone());
        if h.state.is_none() && reset.is_none() && member.is_none() {
            return Ok(None);
        }
        let mut reasons = vec![reason(ReasonCode::Destroy, "the cluster is destroyed")];
        if h.state.is_some_and(|st| {
            f.machine_id != st.machine_id || host_keys_differ(&st.host_key, &f.host_key)
        }) {
            reasons.push(reason(
                ReasonCode::ReplaceRequested,
                "-replace names it: reset as the machine it is now, not the recorded one",
            ));
        }
        Ok(Some(HostPlan::new(
            idx,
            Decision::Remove { member, reset },
            reasons,
        )))
    }

    /// Workers first (each independent: the executor runs as many at once as -parallelism
    /// allows), then controllers one at a time: members that are down first, the controller
    /// every removal goes through last; then the cluster's identity is forgotten.
    fn destroy_steps(&mut self, plans: &[HostPlan]) -> Result<DestroySteps, Refusal> {
        let mut b = Builder::with_capacity(self.hosts.len(), plans.len() * 2 + 1);
        let mut notes: BTreeMap<HostId, Vec<Detail>> = BTreeMap::new();
        let mut workers_done: Vec<Option<usize>> = Vec::new();
        for p in plans.iter().filter(|p| !self.is_ctrl(p)) {
            self.push_reset_and_forget(&mut b, p, Vec::new());
            workers_done.push(b.last_of(p.idx));
        }

        let mut controllers: Vec<&HostPlan> = plans.iter().filter(|p| self.is_ctrl(p)).collect();
        let last = self.last_controller(&controllers);
        // Down members leave first (each makes the rest safer), the last controller stays last.
        controllers.sort_by_key(|p| {
            let down =
                matches!(&p.decision, Decision::Remove { member: Some(m), .. } if !m.healthy);
            (Some(p.idx) == last, !down, self.hosts[p.idx].id.clone())
        });
        let mut sim = QuorumSim::new(&self.cluster.members);
        let can_leave = sim.has_quorum() && last.is_some();
        if !self.cluster.members.is_empty() && !can_leave {
            self.warn_no_member_can_leave(&sim);
        }
        let via = last.map(|i| self.hosts[i].id.clone());
        let mut prev: Vec<Option<usize>> = workers_done.clone();

        if let (Some(last_idx), Some(via)) = (last.filter(|_| can_leave), &via) {
            prev =
                self.remove_unknown_members(&mut b, &mut sim, &mut notes, (last_idx, via), prev)?;
        }
        for p in &controllers {
            let h = &self.hosts[p.idx];
            let Decision::Remove { member, .. } = &p.decision else {
                continue;
            };
            let mut deps = prev.clone();
            let is_last = Some(p.idx) == last;
            match (member, &via) {
                (Some(m), Some(via)) if can_leave && !is_last => {
                    let name = h.name();
                    let (n0, _) = sim.counts();
                    sim.remove(&m.member_id, &m.peer_url, &name)?;
                    notes
                        .entry(h.id.clone())
                        .or_default()
                        .push(quorum_note(n0, &sim));
                    let rm = b.push(
                        p.idx,
                        &h.id,
                        StepKind::RemoveMember {
                            member_id: m.member_id.clone(),
                            peer_url: m.peer_url.clone(),
                            via: via.clone(),
                        },
                        deps,
                    );
                    let w = b.push(
                        p.idx,
                        &h.id,
                        StepKind::WaitHealthy { via: via.clone() },
                        [Some(rm)],
                    );
                    deps = vec![Some(w)];
                }
                (Some(_), _) if is_last && can_leave => {
                    notes.entry(h.id.clone()).or_default().push(Detail {
                        sign: '!',
                        text: "the last etcd member: reset with the cluster's data, no etcd leave"
                            .into(),
                    });
                }
                (Some(_), _) => {
                    notes.entry(h.id.clone()).or_default().push(Detail {
                        sign: '!',
                        text: "etcd has no quorum: reset without leaving etcd".into(),
                    });
                }
                _ => {}
            }
            self.push_reset_and_forget(&mut b, p, deps);
            prev = vec![b.last_of(p.idx)];
        }

        if self.state.cluster.is_some()
            && let Some(p) = controllers.last().copied().or(plans.last())
        {
            let all: Vec<Option<usize>> = plans.iter().map(|q| b.last_of(q.idx)).collect();
            b.push(p.idx, &self.hosts[p.idx].id, StepKind::ForgetCluster, all);
        }
        let mut etcd = sim.summary();
        etcd.members_after = 0;
        Ok((b.steps, b.owner, etcd, notes))
    }

    /// The warning when etcd has no quorum to spare (or no controller to leave through): the
    /// controllers are reset without leaving etcd.
    fn warn_no_member_can_leave(&mut self, sim: &QuorumSim) {
        let (n, healthy) = sim.counts();
        let unknown: Vec<String> = self
            .cluster
            .members
            .iter()
            .filter(|m| m.host.is_none())
            .map(|m| unknown_member_text(&m.name, m.member_id.as_deref(), &m.peer_url))
            .collect();
        self.warnings.push(format!(
            "etcd has {healthy} healthy of {n} members (quorum {}): no member can leave; the \
             controllers are reset without leaving etcd, as k0sctl reset does{}",
            quorum(n),
            if unknown.is_empty() {
                String::new()
            } else {
                format!(
                    " (counted as down: {}, which no host of the spec or the state owns)",
                    unknown.join(", ")
                )
            }
        ));
    }

    /// Members no host of the spec or the state owns leave first, through the controller
    /// reset last: nothing else of k0sform's would remove them, each counts as down (no
    /// probed host vouches for it), and the cluster is being torn down. Removing a down
    /// member never lowers the healthy count and never raises the quorum, so with quorum now
    /// it keeps it and spares the leaves below: left in place, one such member made the last
    /// controller's leave break quorum (3 controllers + 1 of them: 4 members, 3 healthy) and
    /// the destroy was refused. Should the arithmetic ever refuse such a removal, the refusal
    /// names the member and what to do (`unknown_member_refusal`).
    ///
    /// Returns the steps the controllers' removals wait for.
    fn remove_unknown_members(
        &self,
        b: &mut Builder,
        sim: &mut QuorumSim,
        notes: &mut BTreeMap<HostId, Vec<Detail>>,
        (last_idx, via): (usize, &HostId),
        mut prev: Vec<Option<usize>>,
    ) -> Result<Vec<Option<usize>>, Refusal> {
        let unknown: Vec<&super::cluster::Member> = self
            .cluster
            .members
            .iter()
            .filter(|m| m.host.is_none())
            .collect();
        for m in unknown {
            let label = unknown_member_text(&m.name, m.member_id.as_deref(), &m.peer_url);
            let (n0, _) = sim.counts();
            sim.remove(
                m.member_id.as_deref().unwrap_or_default(),
                &m.peer_url,
                &format!("etcd member {label}"),
            )
            .map_err(|r| unknown_member_refusal(r, &label, &m.peer_url, &self.name_of(via)))?;
            notes
                .entry(via.clone())
                .or_default()
                .push(quorum_note(n0, sim));
            let rm = b.push(
                last_idx,
                via,
                StepKind::RemoveUnknownMember {
                    name: m.name.clone(),
                    member_id: m.member_id.clone(),
                    peer_url: m.peer_url.clone(),
                    via: via.clone(),
                },
                prev,
            );
            let w = b.push(
                last_idx,
                via,
                StepKind::WaitHealthy { via: via.clone() },
                [Some(rm)],
            );
            prev = vec![Some(w)];
        }
        Ok(prev)
    }

    fn is_ctrl(&self, p: &HostPlan) -> bool {
        self.hosts[p.idx].role().is_controller()
    }

    /// `ResetHost` (when there is something to reset) and `ForgetHost` (when the state has the
    /// host), after `deps`.
    fn push_reset_and_forget(&self, b: &mut Builder, p: &HostPlan, deps: Vec<Option<usize>>) {
        let h = &self.hosts[p.idx];
        let Decision::Remove { reset, .. } = &p.decision else {
            return;
        };
        let mut deps = deps;
        if let Some(mid) = reset {
            let r = b.push(
                p.idx,
                &h.id,
                StepKind::ResetHost {
                    machine_id: mid.clone(),
                    uninstall: true,
                },
                deps,
            );
            deps = vec![Some(r)];
        }
        if h.state.is_some() {
            b.push(p.idx, &h.id, StepKind::ForgetHost, deps);
        }
    }

    /// The controller reset last, through which the others leave etcd: a healthy member of the
    /// cluster that is reset here, the spec's first such (k0sctl's leader), else the first by
    /// address.
    fn last_controller(&self, controllers: &[&HostPlan]) -> Option<usize> {
        let ok = |p: &&&HostPlan| {
            let h = &self.hosts[p.idx];
            matches!(&p.decision, Decision::Remove { member: Some(m), reset: Some(_) } if m.healthy)
                && self.cluster.healthy.contains(&h.id)
        };
        let by_spec = self.spec.controllers().find_map(|s| {
            let id = s.id();
            controllers
                .iter()
                .filter(ok)
                .find(|p| self.hosts[p.idx].id == id)
        });
        by_spec
            .or_else(|| controllers.iter().find(ok))
            .map(|p| p.idx)
    }
}

/// k0s's binary is at the host's install path (the probe hashed it or ran it).
pub(super) fn binary_left(f: &crate::reality::HostFacts) -> bool {
    f.k0s_binary_sha256.is_some() || f.k0s_version.is_some()
}

/// Removing a member no host owns would break quorum: say which member, and what to do.
fn unknown_member_refusal(mut r: Refusal, label: &str, peer_url: &str, via: &str) -> Refusal {
    let addr = crate::k0s::probe_script::peer_url_host(peer_url);
    r.message = format!(
        "etcd member {label} belongs to no host of the spec or the state, and removing it first would break quorum: {}",
        r.message
    );
    r.details.push(format!(
        "bring etcd back to quorum (start the controllers that are down), or remove the member by hand on a healthy controller (`k0s etcd leave --peer-address {addr}` on {via}), then run destroy again"
    ));
    r
}

/// A recorded host that is another machine now: destroy resets only what the state recorded.
fn identity_refusal(
    h: &HostCtx,
    f: &crate::reality::HostFacts,
    st: &crate::state::HostState,
) -> Refusal {
    let what = super::refresh::identity_changes(st, f);
    Refusal {
        kind: RefusalKind::UnknownIdentity,
        message: format!(
            "{} ({}) is not the machine the state recorded; refusing to reset it",
            h.name(),
            h.id
        ),
        details: vec![format!(
            "{} ({}): {}; if it was rebuilt and should be reset anyway, name it with -replace {}",
            h.name(),
            h.id,
            what.join(", "),
            h.id
        )],
    }
}

/// The quorum arithmetic of one removal, shown under it: from `n0` members to what `sim` has now.
fn quorum_note(n0: usize, sim: &QuorumSim) -> Detail {
    let (n1, h1) = sim.counts();
    Detail {
        sign: '!',
        text: format!(
            "etcd {n0} → {n1} member{}, {h1} healthy after; quorum of {n1} is {}",
            if n1 == 1 { "" } else { "s" },
            quorum(n1)
        ),
    }
}
