//! Taking a host out of the cluster: drain its Node, remove its etcd member (quorum-checked,
//! through another controller), delete its Node, EtcdMember and ControlNode objects, reset the
//! host if it is still the recorded machine, and forget it in the state.

use super::Planner;
use super::decision::{Decision, HostPlan};
use super::hosts::HostCtx;
use super::steps::Chain;
use crate::plan::model::{ObjectKind, Refusal, StepKind};

impl Planner<'_> {
    /// Drain, remove the member (quorum-checked, gated, and checked against its EtcdMember object,
    /// so the objects go after it: a removed member can no longer recreate them), delete the
    /// objects, reset, forget.
    pub(super) fn build_removal(&self, c: &mut Chain, p: &HostPlan) -> Result<(), Refusal> {
        let h = &self.hosts[p.idx];
        let Decision::Remove { member, reset } = &p.decision else {
            return Ok(());
        };
        let name = h.name();
        // Quorum first: "would leave 0 healthy" says more than "nobody to act through".
        if let Some(m) = member {
            c.quorum.remove(&m.member_id, &m.peer_url, &name)?;
        }
        let via = c.vias.for_subject(&h.id, &name)?;
        // The controller acted through may have joined in this plan: wait for the chain.
        let mut first_dep = c.gate;
        if h.role().has_node() && self.drains() && self.cluster.nodes.contains_key(&name) {
            c.b.push(
                p.idx,
                &h.id,
                StepKind::Drain {
                    node: name.clone(),
                    via: via.clone(),
                    evict_taint: None,
                },
                [first_dep.take()],
            );
        }
        if let Some(m) = member {
            let prev = c.b.last.get(&p.idx).copied();
            c.remove_member(p.idx, &h.id, m, &via, prev);
        }
        let objects = self.existing_objects(h);
        if !objects.is_empty() {
            let prev = c.b.last.get(&p.idx).copied();
            let del = c.b.push(
                p.idx,
                &h.id,
                StepKind::DeleteObjects {
                    node: name.clone(),
                    objects,
                    via: via.clone(),
                },
                [prev, first_dep.take()],
            );
            // The controller it acts through may be the next one to leave: the next
            // membership change waits for this deletion.
            if member.is_some() {
                c.gate = Some(del);
            }
        }
        c.vias.removed.insert(h.id.clone());
        if let Some(mid) = reset {
            let prev = c.b.last.get(&p.idx).copied();
            c.b.push(
                p.idx,
                &h.id,
                StepKind::ResetHost {
                    machine_id: mid.clone(),
                    uninstall: false,
                },
                [prev],
            );
        }
        if h.state.is_some() {
            let prev = c.b.last.get(&p.idx).copied();
            c.b.push(p.idx, &h.id, StepKind::ForgetHost, [prev]);
        }
        Ok(())
    }

    /// The cluster objects that still name the host.
    pub(super) fn existing_objects(&self, h: &HostCtx) -> Vec<ObjectKind> {
        let name = h.name();
        let mut v = Vec::new();
        if self.cluster.nodes.contains_key(&name) {
            v.push(ObjectKind::Node);
        }
        if h.role().is_controller() {
            if self.cluster.members.iter().any(|m| m.name == name)
                || h.state.and_then(|s| s.etcd.as_ref()).is_some()
            {
                v.push(ObjectKind::EtcdMember);
            }
            if self.cluster.control_nodes.contains(&name) {
                v.push(ObjectKind::ControlNode);
            }
        }
        v
    }
}
