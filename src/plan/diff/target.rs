//! `-target`: the plan keeps the named hosts' changes and refusals, and the bootstrap they
//! cannot do without; everything else it leaves out is said in a warning.

use super::Planner;
use super::host_plan::{Decision, HostPlan};
use crate::plan::model::Refusal;

impl Planner<'_> {
    /// -target: keep the named hosts' changes, and the bootstrap they cannot do without.
    pub(super) fn keep_targeted(
        &mut self,
        plans: &mut Vec<HostPlan>,
        refusals: &mut Vec<(usize, Refusal)>,
    ) {
        let needs_bootstrap = plans
            .iter()
            .any(|p| self.opts.is_targeted(&self.hosts[p.idx].id) && p.decision.installs());
        let mut dropped = Vec::new();
        plans.retain(|p| {
            let h = &self.hosts[p.idx];
            let keep = self.opts.is_targeted(&h.id)
                || (needs_bootstrap
                    && matches!(
                        p.decision,
                        Decision::Add {
                            bootstrap: true,
                            ..
                        }
                    ));
            if !keep && !matches!(p.decision, Decision::Noop) {
                dropped.push(h.id.to_string());
            }
            keep
        });
        if !dropped.is_empty() {
            self.warnings.push(format!(
                "-target: changes for {} not planned",
                dropped.join(", ")
            ));
        }
        let bootstrap_host = self
            .cluster
            .bootstrap_host()
            .filter(|_| needs_bootstrap)
            .cloned();
        refusals.retain(|(idx, r)| {
            let id = &self.hosts[*idx].id;
            let keep = self.opts.is_targeted(id) || bootstrap_host.as_ref() == Some(id);
            if !keep {
                self.warnings
                    .push(format!("not targeted, so not refused: {}", r.message));
            }
            keep
        });
    }
}
