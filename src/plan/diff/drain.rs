//! Drains around disruptive steps, as k0sctl does them: only a worker's upgrade is drained
//! (phase/upgrade_workers.go: cordon, evict taint, drain, upgrade, uncordon and untaint, in
//! batches of `workerDisruptionPercent`). Controllers, controller+workers and `single` hosts
//! restart without a drain (their unit has `KillMode=process`: containers keep running), and so
//! does every reconfigure; draining a lone `single` host would evict its workloads to nowhere.
//! Which Node a restart drains, with which taint, and the `Drain`/`Uncordon` steps around it.

use super::Planner;
use super::host_plan::{Decision, HostPlan};
use super::hosts::HostCtx;
use super::steps::Builder;
use crate::hostid::HostId;
use crate::plan::model::StepKind;

/// The Node a restart drains and uncordons again.
pub(super) struct RestartDrain {
    node: String,
    via: HostId,
    evict_taint: Option<String>,
}

impl Planner<'_> {
    /// Nodes are drained unless `options.drain.enabled: false` or `-no-drain` (k0sctl's
    /// cmd/apply.go `getNoDrainFlagOrConfig`).
    pub(super) fn drains(&self) -> bool {
        self.spec.options.drain.enabled && !self.opts.no_drain
    }

    /// The drain around the restart `p` of worker `h` through `via`: for an upgrade of a worker
    /// whose Node the cluster lists, with the evict taint when enabled.
    pub(super) fn restart_drain(
        &self,
        h: &HostCtx,
        p: &HostPlan,
        via: &HostId,
    ) -> Option<RestartDrain> {
        let node = h.name();
        if !self.drains()
            || h.role().is_controller()
            || !matches!(p.decision, Decision::Upgrade { .. })
            || !self.cluster.nodes.contains_key(&node)
        {
            return None;
        }
        let evict_taint = self.spec.options.evict_taint.as_ref().map(|t| t.spec());
        Some(RestartDrain {
            node,
            via: via.clone(),
            evict_taint,
        })
    }
}

impl RestartDrain {
    /// Cordon (and taint) and drain the Node after `deps`; the restart waits for this step.
    pub(super) fn push_drain(
        &self,
        b: &mut Builder,
        owner: usize,
        host: &HostId,
        deps: Vec<Option<usize>>,
    ) -> usize {
        b.push(
            owner,
            host,
            StepKind::Drain {
                node: self.node.clone(),
                via: self.via.clone(),
                evict_taint: self.evict_taint.clone(),
            },
            deps,
        )
    }

    /// Uncordon (and untaint) the Node once it is Ready, after `back` (the restart or the
    /// health gate behind it).
    pub(super) fn push_uncordon(
        &self,
        b: &mut Builder,
        owner: usize,
        host: &HostId,
        back: usize,
    ) -> usize {
        b.push(
            owner,
            host,
            StepKind::Uncordon {
                node: self.node.clone(),
                via: self.via.clone(),
                evict_taint: self.evict_taint.clone(),
            },
            [Some(back)],
        )
    }
}
