//! The spec's extra manifests in the plan (`crate::manifests`): after every other step, each new
//! or changed one is applied through one healthy controller, and the state forgets those the spec
//! lost. None is applied with `-target` (a targeted plan works on its hosts only).

use super::Planner;
use super::host_plan::HostPlan;
use crate::manifests::{self, ManifestAction, ManifestChange};
use crate::plan::model::{Refusal, RefusalKind, Step, StepKind};
use std::collections::BTreeSet;

impl Planner<'_> {
    /// The manifests of the plan; their steps appended to `steps`, the first after every step
    /// that no other step waits for (so after all of them), each next after the one before.
    pub(super) fn manifest_steps(
        &mut self,
        plans: &[HostPlan],
        steps: &mut Vec<Step>,
    ) -> Result<Vec<ManifestChange>, Refusal> {
        if self.spec.manifests.is_empty() && self.state.manifests.is_empty() {
            return Ok(Vec::new());
        }
        let (changes, warnings) = manifests::changes(&self.spec.manifests, &self.state.manifests);
        self.warnings.extend(warnings);
        if !self.opts.target.is_empty() {
            if changes
                .iter()
                .any(|c| c.action != ManifestAction::Unchanged)
            {
                self.warnings.push(
                    "-target: the spec's manifests are not applied by a targeted plan".into(),
                );
            }
            return Ok(Vec::new());
        }
        if changes
            .iter()
            .all(|c| c.action == ManifestAction::Unchanged)
        {
            return Ok(changes);
        }
        let Some(via) = self.manifests_via(plans) else {
            return Err(Refusal {
                kind: RefusalKind::NoController,
                message: "no healthy controller of the spec to apply the spec's manifests through"
                    .into(),
                details: vec![],
            });
        };
        let waited_for: BTreeSet<usize> = steps.iter().flat_map(|s| s.after.clone()).collect();
        let last: Vec<usize> = steps
            .iter()
            .map(|s| s.id)
            .filter(|id| !waited_for.contains(id))
            .collect();
        let mut previous: Option<usize> = None;
        for c in &changes {
            let kind = match c.action {
                ManifestAction::Unchanged => continue,
                ManifestAction::Left => StepKind::ForgetManifest {
                    manifest: c.manifest.clone(),
                },
                ManifestAction::Create | ManifestAction::Change => {
                    let Some(doc) = manifests::find(&self.spec.manifests, &c.manifest) else {
                        continue;
                    };
                    StepKind::ApplyManifest {
                        manifest: c.manifest.clone(),
                        sha256: manifests::sha256(doc),
                    }
                }
            };
            // One at a time, in spec order (a Namespace before what goes in it), as k0sctl
            // applies them one by one.
            let after = match previous {
                Some(p) => vec![p],
                None => last.clone(),
            };
            previous = Some(steps.len());
            steps.push(Step {
                id: steps.len(),
                host: via.clone(),
                kind,
                after,
            });
        }
        Ok(changes)
    }
}
