//! `diff`: the decision table of testdata/reference/DESIGN.md. Spec, state, probed reality and the caller's desired
//! facts go in; a plan (per-host changes with reasons, and a DAG of steps) or a refusal comes out.
//! Pure: no I/O, no clock; hosts are visited in sorted order so the same inputs give the same plan.

mod cluster;
mod config_drift;
mod destroy;
mod details;
mod drain;
mod etc_environment;
mod hooks;
mod host_plan;
mod hosts;
mod manifests;
mod peer;
mod quorum;
mod refresh;
mod removal;
mod running;
mod steps;
mod table;
mod target;
mod uploads;
mod via;

pub use steps::worker_batch_size;

use super::model::*;
use crate::hostid::HostId;
use crate::reality::Reality;
use crate::spec::Spec;
use crate::state::State;
use cluster::{ClusterCtx, identify_cluster};
use host_plan::HostPlan;
use hosts::{HostCtx, collect_hosts};

/// Plan the changes that bring `reality` to `spec`, using what `state` recorded.
pub fn diff(
    spec: &Spec,
    state: &State,
    reality: &Reality,
    desired: &Desired,
    opts: &PlanOptions,
) -> Result<Plan, Refusal> {
    if opts.restore.is_some() {
        crate::plan::restore::check_new_hosts(state, reality)?;
    }
    let (moves, move_warnings) = crate::plan::moves::find_moves(spec, state, reality, opts);
    let hosts = collect_hosts(spec, state, reality, opts, &moves);
    debug_assert!(hosts.windows(2).all(|w| w[0].id < w[1].id));
    let cluster = match identify_cluster(spec, state, &hosts, opts) {
        // Destroy needs no running cluster: with none of its controllers answering there is no
        // membership left to change, only hosts to reset. Split brain is still refused.
        Err(r)
            if opts.destroy
                && matches!(r.kind, RefusalKind::NoController | RefusalKind::Unreachable) =>
        {
            cluster::no_running_cluster(state)
        }
        other => other?,
    };
    if let Some(archive) = &opts.restore {
        crate::plan::restore::check_bootstrap(spec, &cluster.action, archive)?;
    }
    let mut planner = Planner {
        spec,
        state,
        desired,
        opts,
        hosts,
        cluster,
        warnings: move_warnings,
    };
    planner.plan()
}

fn reason(code: ReasonCode, message: impl Into<String>) -> Reason {
    Reason {
        code,
        message: message.into(),
    }
}

/// Which plan `Planner::finish` assembles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PlanKind {
    Apply,
    RefreshOnly,
    Destroy,
}

/// What each kind of plan computes for itself.
struct PlanBody {
    outside_changes: Vec<OutsideChange>,
    changes: Vec<HostChange>,
    drift: Vec<Drift>,
    steps: Vec<Step>,
    etcd: QuorumSummary,
    hooks_not_run: Vec<HooksNotRun>,
}

struct Planner<'a> {
    spec: &'a Spec,
    state: &'a State,
    desired: &'a Desired,
    opts: &'a PlanOptions,
    hosts: Vec<HostCtx<'a>>,
    cluster: ClusterCtx,
    warnings: Vec<String>,
}

impl Planner<'_> {
    fn plan(&mut self) -> Result<Plan, Refusal> {
        if self.opts.destroy {
            return self.destroy_plan();
        }
        let outside_changes = self.outside_changes();
        let drift = self.drift();
        if self.opts.refresh_only {
            return Ok(self.refresh_plan(outside_changes, drift));
        }
        self.check_reported_names()?;
        self.intent_warnings();
        self.selector_warnings();
        self.partial_view_warnings();
        self.config_drift_warnings();
        let (mut plans, mut refusals) = self.decide_hosts();
        if !self.opts.target.is_empty() {
            self.keep_targeted(&mut plans, &mut refusals);
        }
        if !refusals.is_empty() {
            return Err(merge_refusals(
                refusals.into_iter().map(|(_, r)| r).collect(),
            ));
        }
        let (steps, step_owner, etcd) = self.build_steps(&plans)?;
        let (mut steps, step_owner) = self.with_hooks(&plans, steps, step_owner);
        let hooks_not_run = self.hooks_not_run(&steps);
        self.two_member_restarts(&plans);
        self.unchecked_download_warning(&steps);
        let changes = self.host_changes(&plans, &steps, &step_owner);
        let manifests = self.manifest_steps(&plans, &mut steps)?;
        dag_checked(&steps)?;
        let mut plan = self.finish(
            PlanKind::Apply,
            PlanBody {
                outside_changes,
                changes,
                drift,
                steps,
                etcd,
                hooks_not_run,
            },
        );
        plan.manifests = manifests;
        Ok(plan)
    }

    /// The plan of this run from its parts: the one place a `Plan` is assembled (the cluster's
    /// name, identity and action, the warnings gathered, the state serial). First contacts and
    /// the chosen k0s version are filled in by the caller, which knows them.
    fn finish(&mut self, kind: PlanKind, body: PlanBody) -> Plan {
        Plan {
            format_version: PLAN_FORMAT_VERSION,
            cluster_name: self.spec.name.clone(),
            cluster_uid: self.cluster.uid.clone(),
            // Destroy takes the cluster as it is; nothing is bootstrapped or adopted.
            cluster_action: match kind {
                PlanKind::Destroy => ClusterAction::Existing,
                _ => self.cluster.action.clone(),
            },
            refresh_only: kind == PlanKind::RefreshOnly,
            destroy: kind == PlanKind::Destroy,
            outside_changes: body.outside_changes,
            changes: body.changes,
            drift: body.drift,
            steps: body.steps,
            etcd: body.etcd,
            warnings: std::mem::take(&mut self.warnings),
            state_serial: self.state_serial(),
            first_contacts: Vec::new(),
            k0s_version: None,
            hooks_not_run: body.hooks_not_run,
            manifests: Vec::new(),
            private_addresses: self
                .spec
                .hosts
                .iter()
                .filter_map(|h| {
                    Some(crate::plan::model::FoundAddress {
                        host: h.id(),
                        address: h.private_address.clone()?,
                        found_on: h.private_address_detected_on.clone()?,
                    })
                })
                .collect(),
        }
    }

    /// A host that names itself (no spec hostname) must not take a name another host of the
    /// cluster goes by: the drain, delete and wait calls made by that name would act on the
    /// other host's Node, EtcdMember and ControlNode. Nor may a new host take the name of a
    /// Node no host of the spec or the state goes by (a spec `hostname:` says it is meant).
    fn check_reported_names(&self) -> Result<(), Refusal> {
        // Every name a host goes by, to the hosts (in order) going by it: indexed once, as a
        // scan of every host per host made 5,000-host plans quadratic. Host ids are unique, so
        // "another host" is "another index".
        let mut by_name: std::collections::HashMap<String, Vec<usize>> =
            std::collections::HashMap::with_capacity(self.hosts.len());
        for (i, o) in self.hosts.iter().enumerate() {
            for name in o.known_names().into_iter().chain(o.reported_name()) {
                let owners = by_name.entry(name).or_default();
                if owners.last() != Some(&i) {
                    owners.push(i);
                }
            }
        }
        let mut details = Vec::new();
        for (i, h) in self.hosts.iter().enumerate().filter(|(_, h)| !h.excluded) {
            let Some(name) = h.reported_name() else {
                continue;
            };
            // A host running k0s by its name is not blamed for a leaving host's record of that
            // name: that removal refuses to delete the live host's objects, blaming the record
            // (`objects_of_another_host`).
            let runs = h.facts().is_some_and(|f| f.is_running());
            let blamed = |o: &HostCtx| !(runs && !o.in_spec() && !o.excluded);
            let owner = by_name
                .get(&name)
                .and_then(|owners| owners.iter().find(|&&o| o != i && blamed(&self.hosts[o])))
                .map(|&o| &self.hosts[o]);
            if let Some(o) = owner {
                details.push(format!(
                    "{} says its hostname is \"{name}\", the name of {}",
                    h.id, o.id
                ));
            } else if h.in_spec()
                && h.state.is_none()
                && h.facts()
                    .is_some_and(|f| f.service.is_none() && f.status.is_none())
                && self.cluster.nodes.contains_key(&name)
            {
                // A new host (no record, no k0s) by the name of a Node nobody of the spec or
                // the state goes by: its kubelet would take over that Node (another machine's,
                // or one left behind), and a later drain or removal by that name would act on
                // whatever else runs under it.
                details.push(format!(
                    "{} says its hostname is \"{name}\", the name of a Node of the cluster no host of the spec or the state goes by",
                    h.id
                ));
            }
        }
        if details.is_empty() {
            return Ok(());
        }
        Err(Refusal {
            kind: RefusalKind::UnknownIdentity,
            message: "a host reports the name of another host or Node of the cluster; refusing \
                      to plan (set each host's `hostname` in the spec, or fix the host's \
                      hostname; delete a Node left behind)"
                .into(),
            details,
        })
    }

    /// Every host's decision, with the binary and files it needs; the refusals by host index.
    fn decide_hosts(&mut self) -> (Vec<HostPlan>, Vec<(usize, Refusal)>) {
        let mut refusals: Vec<(usize, Refusal)> = Vec::new();
        let mut plans: Vec<HostPlan> = Vec::new();
        for idx in 0..self.hosts.len() {
            if self.hosts[idx].excluded {
                continue;
            }
            match self.decide(idx) {
                Ok(Some(mut p)) => match self.k0s_binary_for(&p) {
                    Ok(()) => {
                        self.plan_files(&mut p);
                        self.plan_token_file(&mut p);
                        self.plan_etc_environment(&mut p);
                        plans.push(p)
                    }
                    Err(r) => refusals.push((idx, r)),
                },
                Ok(None) => {}
                Err(r) => refusals.push((idx, r)),
            }
        }
        (plans, refusals)
    }

    /// The per-host changes of the plan, sorted by host, each with its detail lines and steps.
    fn host_changes(
        &self,
        plans: &[HostPlan],
        steps: &[Step],
        step_owner: &[usize],
    ) -> Vec<HostChange> {
        // Each host's owned step indices, grouped once in step order: a scan of every step per
        // host made 5,000-host plans quadratic.
        let mut owned: Vec<Vec<usize>> = vec![Vec::new(); self.hosts.len()];
        for (s, &owner) in step_owner.iter().enumerate() {
            owned[owner].push(s);
        }
        let ctx = details::StepsByHost::new(self, steps);
        let mut changes: Vec<HostChange> = plans
            .iter()
            .filter_map(|p| {
                let action = p.decision.action()?;
                let h = &self.hosts[p.idx];
                Some(HostChange {
                    host: h.id.clone(),
                    role: h.role(),
                    name: h.name(),
                    action,
                    reasons: p.reasons.clone(),
                    details: self.details(p, &ctx),
                    config_diff: p.config_diff.clone(),
                    moved_from: h.moved_from.clone(),
                    steps: std::mem::take(&mut owned[p.idx]),
                })
            })
            .collect();
        changes.sort_by(|a, b| a.host.cmp(&b.host));
        changes
    }

    /// A controller of the cluster that answered only part of the probe: its view is used,
    /// but the reader should know it may be incomplete.
    fn partial_view_warnings(&mut self) {
        for h in self
            .hosts
            .iter()
            .filter(|h| self.cluster.healthy.contains(&h.id))
        {
            if let Some(v) = h.facts().and_then(|f| f.view.as_ref())
                && !v.errors.is_empty()
            {
                self.warnings.push(format!(
                    "{} ({}) answered only part of the probe: {}",
                    h.name(),
                    h.id,
                    v.errors.join("; ")
                ));
            }
        }
    }

    /// Steps an earlier apply started and never finished: the executor resolves them, but the
    /// reader of the plan should know.
    fn intent_warnings(&mut self) {
        for i in &self.state.intents {
            self.warnings.push(format!(
                "an earlier apply started \"{}\" on {} at {} and did not record its end",
                i.step,
                HostId::new(i.address.clone(), i.port),
                i.started_at
            ));
        }
    }

    /// A selector that names no host is most likely a typo; say so rather than plan silently.
    fn selector_warnings(&mut self) {
        for (flag, list) in [
            ("-replace", &self.opts.replace),
            ("-target", &self.opts.target),
            ("-exclude", &self.opts.exclude),
        ] {
            for sel in list {
                let names_host = self.hosts.iter().any(|h| h.id.matches(sel));
                let names_bastion = flag == "-replace"
                    && crate::plan::trust::names_bastion(self.spec, self.state, sel);
                if !names_host && !names_bastion {
                    self.warnings.push(format!(
                        "{flag} {sel} names no host of the spec or the state"
                    ));
                }
            }
        }
    }

    /// The host with this id. `collect_hosts` returns the hosts sorted by id, each once, so a
    /// binary search finds what a scan would (a scan per step made large plans quadratic).
    fn host_by_id(&self, id: &HostId) -> Option<&HostCtx<'_>> {
        self.hosts
            .binary_search_by(|h| h.id.cmp(id))
            .ok()
            .map(|i| &self.hosts[i])
    }

    fn state_serial(&self) -> Option<u64> {
        (self.state.cluster.is_some() || !self.state.hosts.is_empty()).then_some(self.state.serial)
    }
}

pub(super) fn merge_refusals(mut refusals: Vec<Refusal>) -> Refusal {
    if refusals.len() == 1 {
        return refusals.remove(0);
    }
    // The most serious kind decides the exit code: anything unsafe (3) over an error (1).
    let kind = refusals
        .iter()
        .map(|r| r.kind)
        .find(|k| k.exit() == crate::exit::Exit::Refused)
        .unwrap_or(refusals[0].kind);
    Refusal {
        kind,
        message: format!(
            "refusing to plan: {}",
            refusals
                .iter()
                .map(|r| r.message.clone())
                .collect::<Vec<_>>()
                .join("; ")
        ),
        details: {
            // Hosts refused for the same reason share its explanation (first seen, kept once).
            let mut seen = std::collections::HashSet::new();
            refusals
                .into_iter()
                .flat_map(|r| r.details)
                .filter(|d| seen.insert(d.clone()))
                .collect()
        },
    }
}

/// The steps form a DAG (a cycle or a dangling edge is a planner bug, refused as such).
pub(super) fn dag_checked(steps: &[crate::plan::model::Step]) -> Result<(), Refusal> {
    super::graph::check_acyclic(steps).map_err(|e| Refusal {
        kind: RefusalKind::Quorum,
        message: format!("internal error: the step graph is not a DAG: {e}"),
        details: vec![],
    })
}
