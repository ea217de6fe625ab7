//! Which healthy controller a step acts through (removes a member, deletes objects, hands out a
//! join token): one this plan leaves alone if possible, never the subject itself or a host the
//! plan already took out of the cluster.

use super::Planner;
use super::host_plan::{Decision, HostPlan};
use crate::hostid::HostId;
use crate::plan::model::{Refusal, RefusalKind};
use std::collections::BTreeSet;

/// Chooses the controller a step acts through: one this plan leaves alone if possible, else one
/// that joined earlier in the plan, else any healthy one that is not the subject and not removed.
pub(super) struct ViaPicker {
    base: Option<HostId>,
    pub(super) joined: Vec<HostId>,
    pub(super) removed: BTreeSet<HostId>,
    fallback: Vec<HostId>,
}

impl ViaPicker {
    pub(super) fn for_subject(&self, subject: &HostId, name: &str) -> Result<HostId, Refusal> {
        let usable = |id: &&HostId| *id != subject && !self.removed.contains(*id);
        self.base
            .iter()
            .filter(usable)
            .chain(self.joined.iter().filter(usable))
            .chain(self.fallback.iter().filter(usable))
            .next()
            .cloned()
            .ok_or_else(|| Refusal {
                kind: RefusalKind::NoController,
                message: format!(
                    "no healthy controller is left to act through for {name} ({subject})"
                ),
                details: vec![],
            })
    }
}

impl Planner<'_> {
    /// The picker for this plan: the bootstrap host when there is one, else a healthy
    /// controller the plan does not disrupt.
    pub(super) fn via_picker(&self, plans: &[HostPlan]) -> ViaPicker {
        // Hosts whose membership or service this plan disrupts are not the first choice to act
        // through.
        let busy: BTreeSet<HostId> = plans
            .iter()
            .filter(|p| {
                !matches!(
                    p.decision,
                    Decision::Noop | Decision::Adopt | Decision::Files | Decision::Move
                ) && self.hosts[p.idx].role().is_controller()
            })
            .map(|p| self.hosts[p.idx].id.clone())
            .collect();
        ViaPicker {
            base: self
                .cluster
                .bootstrap_host()
                .cloned()
                .or_else(|| self.pick_via(&busy)),
            joined: Vec::new(),
            removed: BTreeSet::new(),
            fallback: self
                .cluster
                .healthy
                .iter()
                .filter(|id| !self.opts.is_excluded(id))
                .cloned()
                .collect(),
        }
    }

    /// A healthy controller to act through that this plan does not take down.
    fn pick_via(&self, busy: &BTreeSet<HostId>) -> Option<HostId> {
        self.cluster
            .healthy
            .iter()
            .find(|id| {
                !busy.contains(id) && !self.opts.is_excluded(id) && self.spec.host(id).is_some()
            })
            .cloned()
    }

    /// The controller the spec's manifests are applied through once every other step is done:
    /// the bootstrap host, else a healthy controller of the spec the plan leaves alone, else
    /// any healthy controller of the spec the plan does not remove.
    pub(super) fn manifests_via(&self, plans: &[HostPlan]) -> Option<HostId> {
        let picker = self.via_picker(plans);
        let removed: BTreeSet<&HostId> = plans
            .iter()
            .filter(|p| matches!(p.decision, Decision::Remove { .. }))
            .map(|p| &self.hosts[p.idx].id)
            .collect();
        picker.base.clone().or_else(|| {
            picker
                .fallback
                .iter()
                .find(|id| !removed.contains(id) && self.spec.host(id).is_some())
                .cloned()
        })
    }
}
