//! The spec's hooks as `RunHooks` steps: where each host's `install`, `upgrade`, `reset` and
//! `apply` hooks go around the steps of its plan, and the step list rebuilt with them in place.

use super::Planner;
use super::host_plan::HostPlan;
use super::steps::StepOwners;
use crate::hostid::HostId;
use crate::plan::model::{HooksNotRun, Step, StepKind};
use std::collections::BTreeMap;

/// Hooks to run before and after a step, by the id of the step they wrap.
type HooksAround = BTreeMap<usize, Vec<StepKind>>;

impl Planner<'_> {
    /// The spec's hooks as `RunHooks` steps wrapped around the steps they name, host by host:
    /// `install.*` around a bootstrap or join, `upgrade.*` around an upgrade, `reset.*` around
    /// a reset, and `apply.before`/`apply.after` around everything this plan runs on the host
    /// itself (not what runs through a controller on its behalf). Whatever waited for a
    /// wrapped step waits for its after-hooks too. Hosts without changes run no hooks.
    pub(super) fn with_hooks(
        &self,
        plans: &[HostPlan],
        steps: Vec<Step>,
        owner: StepOwners,
    ) -> (Vec<Step>, StepOwners) {
        let has_hooks = |p: &HostPlan| self.hosts[p.idx].spec.is_some_and(|s| !s.hooks.is_empty());
        if !plans.iter().any(has_hooks) {
            return (steps, owner);
        }
        let (before, after) = self.hooks_around(plans, &steps, &owner);
        if before.is_empty() && after.is_empty() {
            return (steps, owner);
        }
        insert_hooks(steps, &owner, before, after)
    }

    /// Which hooks wrap which step, for every host plan whose spec has hooks.
    fn hooks_around(
        &self,
        plans: &[HostPlan],
        steps: &[Step],
        owner: &[usize],
    ) -> (HooksAround, HooksAround) {
        let mut before: HooksAround = BTreeMap::new();
        let mut after: HooksAround = BTreeMap::new();
        // Each host plan's steps that run on the host itself, in id order (one pass).
        let mut on_hosts: BTreeMap<usize, Vec<&Step>> = BTreeMap::new();
        for s in steps {
            if let Some(&idx) = owner.get(s.id)
                && s.host == self.hosts[idx].id
                && runs_on_host(&s.kind)
                // Preflight steps (staging, /etc/environment) wait for nothing: no hook goes
                // before them.
                && !s.kind.is_preflight()
            {
                on_hosts.entry(idx).or_default().push(s);
            }
        }
        for p in plans {
            let h = &self.hosts[p.idx];
            let Some(hs) = h.spec.filter(|s| !s.hooks.is_empty()) else {
                continue;
            };
            let hook = |action: &str, stage: &str| {
                let lines = hs.hooks.get(action)?.get(stage)?;
                // As the spec wrote them: values from the environment (`${SECRET}`) stay
                // `${NAME}` in the plan, its JSON, saved plans and progress, unless
                // -show-secrets. The host runs the expanded lines (`apply::steps::hooks`).
                (!lines.is_empty()).then(|| StepKind::RunHooks {
                    action: action.into(),
                    stage: stage.into(),
                    lines: lines
                        .iter()
                        .map(|l| {
                            if self.opts.show_secrets {
                                l.clone()
                            } else {
                                self.spec.shown(l)
                            }
                        })
                        .collect(),
                })
            };
            let on_host = on_hosts.get(&p.idx).map(Vec::as_slice).unwrap_or_default();
            for s in on_host {
                let action = match s.kind {
                    StepKind::Bootstrap
                    | StepKind::JoinController { .. }
                    | StepKind::JoinWorker { .. } => "install",
                    StepKind::Upgrade { .. } => "upgrade",
                    StepKind::ResetHost { .. } => "reset",
                    _ => continue,
                };
                if let Some(k) = hook(action, "before") {
                    before.entry(s.id).or_default().push(k);
                }
                if let Some(k) = hook(action, "after") {
                    after.entry(s.id).or_default().push(k);
                }
            }
            if let (Some(first), Some(last)) = (on_host.first(), on_host.last()) {
                if let Some(k) = hook("apply", "before") {
                    before.entry(first.id).or_default().insert(0, k);
                }
                // k0sctl runs `connect.after` right after connecting, before anything else
                // (phase/detect_os.go `After`): first of all on the host.
                if let Some(k) = hook("connect", "after") {
                    before.entry(first.id).or_default().insert(0, k);
                }
                if let Some(k) = hook("apply", "after") {
                    after.entry(last.id).or_default().push(k);
                }
            }
        }
        (before, after)
    }
}

impl Planner<'_> {
    /// The `apply.*` and `connect.after` hooks of spec hosts (not being reset) that no step
    /// runs: nothing changes on their host. k0sctl runs them at every apply
    /// (action/apply.go, phase/detect_os.go); the plan says which ones k0sform skips.
    pub(super) fn hooks_not_run(&self, steps: &[Step]) -> Vec<HooksNotRun> {
        // The hooks steps run, by host (one pass over the steps).
        let run: std::collections::HashSet<(&HostId, &str, &str)> = steps
            .iter()
            .filter_map(|s| match &s.kind {
                StepKind::RunHooks { action, stage, .. } => {
                    Some((&s.host, action.as_str(), stage.as_str()))
                }
                _ => None,
            })
            .collect();
        let mut out = Vec::new();
        for h in &self.hosts {
            let Some(hs) = h.spec.filter(|s| !s.reset && !s.hooks.is_empty()) else {
                continue;
            };
            let hooks: Vec<String> = [
                ("connect", "after"),
                ("apply", "before"),
                ("apply", "after"),
            ]
            .into_iter()
            .filter(|(action, stage)| {
                hs.hooks
                    .get(*action)
                    .and_then(|a| a.get(*stage))
                    .is_some_and(|l| !l.is_empty())
                    && !run.contains(&(&h.id, *action, *stage))
            })
            .map(|(action, stage)| format!("{action}.{stage}"))
            .collect();
            if !hooks.is_empty() {
                out.push(HooksNotRun {
                    host: h.id.clone(),
                    name: h.name(),
                    hooks,
                });
            }
        }
        out
    }
}

/// The steps with their hooks in place, renumbered, and the new step → host plan owners.
fn insert_hooks(
    steps: Vec<Step>,
    owner: &[usize],
    mut before: HooksAround,
    mut after: HooksAround,
) -> (Vec<Step>, StepOwners) {
    // Rebuilt in id order, so every step still comes after what it waits for.
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    let mut new_owner = Vec::with_capacity(steps.len());
    // old id → the new step that stands for "done": the step or its last after-hook.
    let mut done: Vec<usize> = Vec::with_capacity(steps.len());
    for s in steps {
        let own = owner[s.id];
        let old = s.id;
        let mut prev: Vec<usize> = s.after.iter().map(|a| done[*a]).collect();
        prev.sort_unstable();
        let mut add = |out: &mut Vec<Step>, host: &HostId, kind: StepKind, deps: Vec<usize>| {
            let id = out.len();
            out.push(Step {
                id,
                host: host.clone(),
                kind,
                after: deps,
            });
            new_owner.push(own);
            id
        };
        for k in before.remove(&old).unwrap_or_default() {
            prev = vec![add(&mut out, &s.host, k, prev)];
        }
        let host = s.host.clone();
        let mut end = add(&mut out, &host, s.kind, prev);
        for k in after.remove(&old).unwrap_or_default() {
            end = add(&mut out, &host, k, vec![end]);
        }
        done.push(end);
    }
    (out, new_owner)
}

/// Steps that run commands on their own host (not through a controller on its behalf, and not
/// just reading it).
fn runs_on_host(kind: &StepKind) -> bool {
    matches!(
        kind,
        StepKind::UploadBinary { .. }
            | StepKind::DownloadBinary { .. }
            | StepKind::UploadFiles { .. }
            | StepKind::WriteConfig { .. }
            | StepKind::RestoreBackup { .. }
            | StepKind::Bootstrap
            | StepKind::JoinController { .. }
            | StepKind::JoinWorker { .. }
            | StepKind::ResetHost { .. }
            | StepKind::Upgrade { .. }
            | StepKind::Reconfigure
            | StepKind::WriteTokenPlaceholder
    )
}
