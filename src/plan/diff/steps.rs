//! The step DAG of a plan, in the order the safety invariants ask for: dead and stale members go
//! first, then the bootstrap, joins one at a time, removals, controller restarts, and workers
//! after every controller, in batches.

use super::Planner;
use super::host_plan::{Decision, HostPlan, MemberRef};
use super::quorum::QuorumSim;
use super::via::ViaPicker;
use crate::hash::sha256_hex;
use crate::hostid::HostId;
use crate::k0s::desired;
use crate::plan::model::{QuorumSummary, Refusal, Step, StepKind};

/// Steps under construction: every edge points to an earlier step, so the graph is acyclic by
/// construction and insertion order is a topological order.
///
/// The bookkeeping is dense vectors, not maps: step ids are positions and host plan indices are
/// host positions, and a 50,000-host plan pushes ~150,000 steps (tree inserts there were a
/// visible, faster-than-linear share of testdata/lab/bench figure 4).
#[derive(Default)]
pub(super) struct Builder {
    pub(super) steps: Vec<Step>,
    /// step id → index of the host plan that owns it (`owner[id]`).
    pub(super) owner: StepOwners,
    /// host plan index → its latest step.
    last: Vec<Option<usize>>,
    /// host plan index → its binary staging step, which every later step of it follows.
    staged: Vec<Option<usize>>,
}

/// Step id → index of the host plan that owns the step; one entry per step.
pub(super) type StepOwners = Vec<usize>;

/// `v[i]`, or None past the end.
fn slot(v: &[Option<usize>], i: usize) -> Option<usize> {
    v.get(i).copied().flatten()
}

/// Set `v[i]`, growing `v` as needed.
fn set_slot(v: &mut Vec<Option<usize>>, i: usize, id: usize) {
    if v.len() <= i {
        v.resize(i + 1, None);
    }
    v[i] = Some(id);
}

impl Builder {
    /// Room for about `steps` steps of `hosts` host plans (growing past it is fine).
    pub(super) fn with_capacity(hosts: usize, steps: usize) -> Self {
        Builder {
            steps: Vec::with_capacity(steps),
            owner: Vec::with_capacity(steps),
            last: vec![None; hosts],
            staged: vec![None; hosts],
        }
    }

    /// The latest step of host plan `owner`, if it has one.
    pub(super) fn last_of(&self, owner: usize) -> Option<usize> {
        slot(&self.last, owner)
    }

    /// Mark `id` as host plan `owner`'s staging step: its later steps follow it.
    pub(super) fn set_staged(&mut self, owner: usize, id: usize) {
        set_slot(&mut self.staged, owner, id);
    }

    pub(super) fn push(
        &mut self,
        owner: usize,
        host: &HostId,
        kind: StepKind,
        after: impl IntoIterator<Item = Option<usize>>,
    ) -> usize {
        let id = self.steps.len();
        let staged = slot(&self.staged, owner);
        let mut after: Vec<usize> = after
            .into_iter()
            .chain([staged])
            .flatten()
            .filter(|a| *a < id)
            .collect();
        after.sort_unstable();
        after.dedup();
        self.steps.push(Step {
            id,
            host: host.clone(),
            kind,
            after,
        });
        self.owner.push(owner);
        set_slot(&mut self.last, owner, id);
        id
    }
}

/// The steps under construction and what the chain of membership changes threads through
/// them: the simulated quorum, the latest health gate, and who is left to act through.
pub(super) struct Chain {
    pub(super) b: Builder,
    pub(super) quorum: QuorumSim,
    /// The latest health gate: the next membership change waits for it.
    pub(super) gate: Option<usize>,
    pub(super) vias: ViaPicker,
}

impl Chain {
    /// Remove a member through `via` after the host's `prev` step and the latest gate, and
    /// make etcd's health afterwards the gate for the next membership change.
    pub(super) fn remove_member(
        &mut self,
        idx: usize,
        host: &HostId,
        m: &MemberRef,
        via: &HostId,
        prev: Option<usize>,
    ) {
        let rm = self.b.push(
            idx,
            host,
            StepKind::RemoveMember {
                member_id: m.member_id.clone(),
                peer_url: m.peer_url.clone(),
                via: via.clone(),
            },
            [prev, self.gate],
        );
        let w = self.b.push(
            idx,
            host,
            StepKind::WaitHealthy { via: via.clone() },
            [Some(rm)],
        );
        self.gate = Some(w);
    }
}

/// How many workers restart at once: `workerDisruptionPercent` of them, at least one, at most
/// the concurrency limit. (k0sctl divides the percentage by 100 in integers first, which makes
/// every batch a single worker.)
pub fn worker_batch_size(workers: usize, percent: u32, limit: usize) -> usize {
    let n = workers * percent as usize / 100;
    let n = n.max(1);
    if limit > 0 { n.min(limit) } else { n }
}

impl Planner<'_> {
    #[allow(clippy::type_complexity)]
    pub(super) fn build_steps(
        &self,
        plans: &[HostPlan],
    ) -> Result<(Vec<Step>, StepOwners, QuorumSummary), Refusal> {
        let mut c = Chain {
            // A host plan takes up to five steps (stage, drain, upgrade, uncordon, record):
            // room that goes untouched costs no memory, a regrowth copies every step.
            b: Builder::with_capacity(self.hosts.len(), plans.len() * 5 + 16),
            quorum: if self.kine() {
                QuorumSim::off()
            } else {
                QuorumSim::new(&self.cluster.members)
            },
            gate: None,
            vias: self.via_picker(plans),
        };
        // /etc/environment first (k0sctl's "Prepare hosts" comes before it stages binaries):
        // a proxy set there is one the host's download needs. A preflight step too, which
        // every later step of the host follows.
        for p in plans.iter().filter(|p| !p.etc_environment.is_empty()) {
            let kind = StepKind::WriteHostEnvironment {
                names: p.etc_environment.clone(),
            };
            let id = c.b.push(p.idx, &self.hosts[p.idx].id, kind, []);
            c.b.set_staged(p.idx, id);
        }
        // Binaries are staged first and wait for nothing but that: the executor runs every
        // preflight step before any other, and each host's later steps follow its own.
        for p in plans {
            if let Some(kind) = self.staging(p) {
                let id = c.b.push(p.idx, &self.hosts[p.idx].id, kind, []);
                c.b.set_staged(p.idx, id);
            }
        }
        // A moved host's record follows it before anything else happens to it.
        for p in plans {
            if let Some(from) = &self.hosts[p.idx].moved_from {
                let prev = c.b.last_of(p.idx);
                c.b.push(
                    p.idx,
                    &self.hosts[p.idx].id,
                    StepKind::MoveHost { from: from.clone() },
                    [prev],
                );
            }
        }
        self.remove_stale_members(&mut c, plans)?;
        self.delete_stale_objects(&mut c, plans)?;
        let controller_ready = self.bootstrap(&mut c, plans)?;
        self.join_controllers(&mut c, plans)?;
        // M4: healthy members removed from the spec, after any additions.
        for p in plans.iter().filter(|p| {
            self.is_controller(p)
                && match &p.decision {
                    Decision::Remove { member, .. } => member.as_ref().is_none_or(|m| m.healthy),
                    _ => false,
                }
        }) {
            self.build_removal(&mut c, p)?;
        }
        self.restart_controllers(&mut c, plans);
        let controllers_done = c.gate;
        self.join_workers(&mut c, plans, controller_ready)?;
        // Workers leaving.
        for p in plans
            .iter()
            .filter(|p| !self.is_controller(p) && matches!(p.decision, Decision::Remove { .. }))
        {
            self.build_removal(&mut c, p)?;
        }
        self.restart_workers(&mut c.b, &c.vias, plans, controllers_done);
        self.record_adopted(&mut c.b, plans);
        let summary = c.quorum.summary();
        Ok((c.b.steps, c.b.owner, summary))
    }

    fn is_controller(&self, p: &HostPlan) -> bool {
        self.hosts[p.idx].role().is_controller()
    }

    /// M1: members that must go first: dead or replaced members, stale members of rejoiners,
    /// and removals of members that are already down (a dead member is removed before its
    /// replacement is added).
    fn remove_stale_members(&self, c: &mut Chain, plans: &[HostPlan]) -> Result<(), Refusal> {
        for p in plans.iter().filter(|p| match &p.decision {
            Decision::Replace { stale: Some(_), .. }
            | Decision::Rejoin { stale: Some(_), .. }
            | Decision::Add { stale: Some(_), .. } => true,
            Decision::Remove {
                member: Some(m), ..
            } => !m.healthy,
            _ => false,
        }) {
            let h = &self.hosts[p.idx];
            if let Decision::Remove { .. } = p.decision {
                self.build_removal(c, p)?;
                continue;
            }
            let Some(m) = p.decision.stale() else {
                continue;
            };
            let name = h.name();
            let via = c.vias.for_subject(&h.id, &name)?;
            c.quorum.remove(&m.member_id, &m.peer_url, &name)?;
            c.remove_member(p.idx, &h.id, m, &via, None);
            c.vias.removed.insert(h.id.clone());
        }
        Ok(())
    }

    /// Stale API objects of replaced and rejoining hosts go before they come back.
    fn delete_stale_objects(&self, c: &mut Chain, plans: &[HostPlan]) -> Result<(), Refusal> {
        for p in plans.iter().filter(|p| {
            matches!(
                p.decision,
                Decision::Replace { .. } | Decision::Rejoin { .. }
            )
        }) {
            let h = &self.hosts[p.idx];
            let objects = self.existing_objects(h);
            if objects.is_empty() {
                continue;
            }
            let via = c.vias.for_subject(&h.id, &h.name())?;
            let prev = c.b.last_of(p.idx);
            c.b.push(
                p.idx,
                &h.id,
                self.delete_objects_step(h, objects, via),
                [prev],
            );
        }
        Ok(())
    }

    /// M2: bootstrap. Returns the step after which the first controller is ready.
    fn bootstrap(&self, c: &mut Chain, plans: &[HostPlan]) -> Result<Option<usize>, Refusal> {
        let Some(bh) = self.cluster.bootstrap_host() else {
            return Ok(None);
        };
        let Some(p) = plans.iter().find(|p| &self.hosts[p.idx].id == bh) else {
            return Ok(None);
        };
        self.build_prep(&mut c.b, p);
        if let Some(a) = &self.opts.restore {
            // `-restore-from`: the etcd data and certificates are in place before k0s first starts.
            let prev = c.b.last_of(p.idx);
            let kind = StepKind::RestoreBackup {
                archive: a.path.clone(),
                sha256: a.sha256.clone(),
            };
            c.b.push(p.idx, bh, kind, [prev, c.gate]);
        }
        let prev = c.b.last_of(p.idx);
        c.quorum.join(&self.hosts[p.idx].name(), true)?;
        let s = c.b.push(p.idx, bh, StepKind::Bootstrap, [prev, c.gate]);
        let w = c.b.push(
            p.idx,
            bh,
            StepKind::WaitHealthy { via: bh.clone() },
            [Some(s)],
        );
        c.gate = Some(w);
        c.b.push(p.idx, bh, StepKind::RecordHost, [Some(w)]);
        Ok(Some(w))
    }

    /// M3: controllers joining (one at a time, each behind the previous health gate).
    fn join_controllers(&self, c: &mut Chain, plans: &[HostPlan]) -> Result<(), Refusal> {
        for p in plans.iter().filter(|p| {
            self.is_controller(p)
                && p.decision.installs()
                && !matches!(
                    p.decision,
                    Decision::Add {
                        bootstrap: true,
                        ..
                    }
                )
        }) {
            let h = &self.hosts[p.idx];
            let via = c.vias.for_subject(&h.id, &h.name())?;
            self.build_prep(&mut c.b, p);
            let prev = c.b.last_of(p.idx);
            c.quorum.join(&h.name(), false)?;
            let s = c.b.push(
                p.idx,
                &h.id,
                StepKind::JoinController { via: via.clone() },
                [prev, c.gate],
            );
            let w =
                c.b.push(p.idx, &h.id, StepKind::WaitHealthy { via }, [Some(s)]);
            c.gate = Some(w);
            c.b.push(p.idx, &h.id, StepKind::RecordHost, [Some(w)]);
            c.vias.joined.push(h.id.clone());
            c.vias.removed.remove(&h.id);
        }
        Ok(())
    }

    /// Controller restarts (upgrade, reconfigure): one at a time, each behind a health gate.
    fn restart_controllers(&self, c: &mut Chain, plans: &[HostPlan]) {
        for p in plans
            .iter()
            .filter(|p| self.is_controller(p) && p.decision.restarts())
        {
            let h = &self.hosts[p.idx];
            // A lone controller checks its own health after the restart.
            let via = c
                .vias
                .for_subject(&h.id, &h.name())
                .unwrap_or_else(|_| h.id.clone());
            self.build_prep(&mut c.b, p);
            let prev = c.b.last_of(p.idx);
            let kind = restart_kind(p);
            c.quorum.restart();
            // No drain: k0sctl restarts controllers of every kind without one
            // (phase/upgrade_controllers.go); their containers survive the restart.
            let s = c.b.push(p.idx, &h.id, kind, [prev, c.gate]);
            let w =
                c.b.push(p.idx, &h.id, StepKind::WaitHealthy { via }, [Some(s)]);
            c.gate = Some(w);
            c.b.push(p.idx, &h.id, StepKind::RecordHost, [Some(w)]);
        }
    }

    /// Workers joining: after a controller is ready.
    fn join_workers(
        &self,
        c: &mut Chain,
        plans: &[HostPlan],
        controller_ready: Option<usize>,
    ) -> Result<(), Refusal> {
        for p in plans
            .iter()
            .filter(|p| !self.is_controller(p) && p.decision.installs())
        {
            let h = &self.hosts[p.idx];
            let via = c.vias.for_subject(&h.id, &h.name())?;
            self.build_prep(&mut c.b, p);
            let prev = c.b.last_of(p.idx);
            // A controller that joined in this plan is usable once the membership chain is done.
            // A controller that joined, or restarts, in this plan is usable once the
            // controller chain is done.
            let restarts_via = plans
                .iter()
                .any(|q| self.hosts[q.idx].id == via && q.decision.restarts());
            let ready = if c.vias.joined.contains(&via) || restarts_via {
                c.gate
            } else {
                controller_ready
            };
            let s =
                c.b.push(p.idx, &h.id, StepKind::JoinWorker { via }, [prev, ready]);
            c.b.push(p.idx, &h.id, StepKind::RecordHost, [Some(s)]);
        }
        Ok(())
    }

    /// Worker restarts in batches of worker_disruption_percent, after every controller. As in
    /// k0sctl (phase/upgrade_workers.go `BatchedParallelEach`), a batch starts once the previous
    /// one is done: each worker's Node is cordoned and drained just before its restart and
    /// uncordoned once Ready, so at most a batch of Nodes is unschedulable at a time, and a
    /// failed drain stops the batches after it.
    fn restart_workers(
        &self,
        b: &mut Builder,
        vias: &ViaPicker,
        plans: &[HostPlan],
        controllers_done: Option<usize>,
    ) {
        let restarts: Vec<&HostPlan> = plans
            .iter()
            .filter(|p| !self.is_controller(p) && p.decision.restarts())
            .collect();
        let batch = worker_batch_size(
            restarts.len(),
            self.spec.options.worker_disruption_percent,
            self.spec.options.concurrency_limit,
        );
        let mut prev_batch: Vec<usize> = Vec::new();
        for chunk in restarts.chunks(batch.max(1)) {
            let mut this_batch = Vec::new();
            for p in chunk {
                let h = &self.hosts[p.idx];
                self.build_prep(b, p);
                let prev = b.last_of(p.idx);
                let kind = restart_kind(p);
                let deps: Vec<Option<usize>> = prev_batch
                    .iter()
                    .map(|x| Some(*x))
                    .chain([prev, controllers_done])
                    .collect();
                let drain = vias
                    .for_subject(&h.id, &h.name())
                    .ok()
                    .and_then(|via| self.restart_drain(h, p, &via));
                let s = match &drain {
                    Some(d) => {
                        let dr = d.push_drain(b, p.idx, &h.id, deps);
                        let s = b.push(p.idx, &h.id, kind, [Some(dr)]);
                        d.push_uncordon(b, p.idx, &h.id, s)
                    }
                    None => b.push(p.idx, &h.id, kind, deps),
                };
                let r = b.push(p.idx, &h.id, StepKind::RecordHost, [Some(s)]);
                this_batch.push(r);
            }
            prev_batch = this_batch;
        }
    }

    /// Adopted hosts are recorded only; files of hosts with nothing else to do (or only
    /// adopted) go on their own.
    fn record_adopted(&self, b: &mut Builder, plans: &[HostPlan]) {
        for p in plans
            .iter()
            .filter(|p| matches!(p.decision, Decision::Adopt))
        {
            let h = &self.hosts[p.idx];
            b.push(p.idx, &h.id, StepKind::RecordHost, [None]);
        }
        for p in plans.iter().filter(|p| {
            !p.files.is_empty()
                && matches!(
                    p.decision,
                    Decision::Files | Decision::Adopt | Decision::Move
                )
        }) {
            self.push_files(b, p);
        }
        for p in plans.iter().filter(|p| {
            p.token_placeholder
                && matches!(
                    p.decision,
                    Decision::Files | Decision::Adopt | Decision::Move
                )
        }) {
            let prev = b.last_of(p.idx);
            b.push(
                p.idx,
                &self.hosts[p.idx].id,
                StepKind::WriteTokenPlaceholder,
                [prev],
            );
        }
    }

    /// Reset leftovers and write the config (the binary is staged already): what a host needs
    /// before join/upgrade/reconfigure.
    fn build_prep(&self, b: &mut Builder, p: &HostPlan) {
        let h = &self.hosts[p.idx];
        let reset = match &p.decision {
            Decision::Add { reset, .. }
            | Decision::Rejoin { reset, .. }
            | Decision::Replace { reset, .. } => reset.clone(),
            _ => None,
        };
        if let Some(mid) = reset {
            let prev = b.last_of(p.idx);
            b.push(
                p.idx,
                &h.id,
                StepKind::ResetHost {
                    machine_id: mid,
                    uninstall: false,
                },
                [prev],
            );
        }
        let write_config = match &p.decision {
            Decision::Upgrade { write_config, .. } | Decision::Reconfigure { write_config } => {
                *write_config
            }
            d => d.installs() && h.role().is_controller(),
        };
        if write_config && let Some(sh) = h.spec {
            let prev = b.last_of(p.idx);
            b.push(
                p.idx,
                &h.id,
                StepKind::WriteConfig {
                    sha256: sha256_hex(desired::config_yaml(self.spec, sh)),
                },
                [prev],
            );
        }
        // Files go before k0s (re)starts, as in k0sctl (they may be images or configs it reads).
        self.push_files(b, p);
    }

    /// The host plan's files as one step after its latest one (none when there are none).
    fn push_files(&self, b: &mut Builder, p: &HostPlan) {
        if p.files.is_empty() {
            return;
        }
        let prev = b.last_of(p.idx);
        b.push(
            p.idx,
            &self.hosts[p.idx].id,
            StepKind::UploadFiles {
                files: p.files.clone(),
            },
            [prev],
        );
    }
}

fn restart_kind(p: &HostPlan) -> StepKind {
    match &p.decision {
        Decision::Upgrade { from, to, .. } => StepKind::Upgrade {
            from: from.clone(),
            to: to.clone(),
        },
        _ => StepKind::Reconfigure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_batches_use_the_percentage() {
        assert_eq!(worker_batch_size(20, 10, 30), 2);
        assert_eq!(worker_batch_size(5, 10, 30), 1);
        assert_eq!(worker_batch_size(100, 50, 30), 30);
        assert_eq!(worker_batch_size(4, 50, 0), 2);
    }
}
