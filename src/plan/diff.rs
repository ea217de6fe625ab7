//! `diff`: the decision table of DESIGN.md. Spec, state, probed reality and the caller's desired
//! facts go in; a plan (per-host changes with reasons, and a DAG of steps) or a refusal comes out.
//! Pure: no I/O, no clock; hosts are visited in sorted order so the same inputs give the same plan.

use super::model::*;
use crate::hash::{sha256_hex, short, short_key};
use crate::hostid::HostId;
use crate::k0s::desired;
use crate::reality::{ClusterView, HostFacts, Probe, Reality};
use crate::spec::{HostSpec, Role, Spec};
use crate::state::{HostState, State};
use std::collections::{BTreeMap, BTreeSet};

/// Plan the changes that bring `reality` to `spec`, using what `state` recorded.
pub fn diff(
    spec: &Spec,
    state: &State,
    reality: &Reality,
    desired: &Desired,
    opts: &PlanOptions,
) -> Result<Plan, Refusal> {
    let hosts = collect_hosts(spec, state, reality, opts);
    let cluster = identify_cluster(spec, state, &hosts, opts)?;
    let mut planner = Planner {
        spec,
        state,
        desired,
        opts,
        hosts,
        cluster,
        warnings: Vec::new(),
    };
    planner.plan()
}

/// Everything known about one host, from whichever inputs name it.
struct HostCtx<'a> {
    id: HostId,
    spec: Option<&'a HostSpec>,
    state: Option<&'a HostState>,
    probe: Option<&'a Probe>,
    excluded: bool,
}

impl HostCtx<'_> {
    fn role(&self) -> Role {
        self.spec
            .map(|s| s.role)
            .or(self.state.map(|s| s.role))
            .unwrap_or(Role::Worker)
    }
    fn facts(&self) -> Option<&HostFacts> {
        match self.probe {
            Some(Probe::Reached(f)) => Some(f),
            _ => None,
        }
    }
    /// The node (and etcd member) name: the spec's hostname, else what the host says, else the
    /// state's record, else the address.
    fn name(&self) -> String {
        if let Some(h) = self.spec.and_then(|s| s.hostname.as_ref()) {
            return h.to_lowercase();
        }
        if let Some(f) = self.facts().filter(|f| !f.hostname.is_empty()) {
            return f.hostname.to_lowercase();
        }
        if let Some(n) = self.state.and_then(|s| s.node_name.as_ref()) {
            return n.clone();
        }
        self.id.address.clone()
    }
    /// The etcd peer addresses this host has (or would have), as [`peer_key`]s.
    fn peer_keys(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(s) = self.spec {
            v.push(peer_key(&peer_url(s.peer_address())));
        }
        if let Some(e) = self.state.and_then(|s| s.etcd.as_ref()) {
            v.push(peer_key(&e.peer_url));
        }
        if let Some(p) = self
            .facts()
            .and_then(|f| f.status.as_ref())
            .and_then(|s| s.peer_address.as_ref())
        {
            v.push(peer_key(&peer_url(p)));
        }
        v.sort();
        v.dedup();
        v
    }
    fn in_spec(&self) -> bool {
        self.spec.is_some_and(|s| !s.reset)
    }
}

/// A peer URL without its scheme (`10.0.0.1:2380`): k0s speaks https to its peers, test
/// doubles may speak http, and the member is the same either way.
fn peer_key(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    rest.trim_end_matches('/').to_string()
}

/// `v1.33.4+k0s.0` → (1, 33, 4, 0) for ordering versions; pre-releases (`-rc.1`) sort as the
/// release itself, which is close enough to spot a downgrade.
fn version_key(v: &str) -> Option<(u64, u64, u64, u64)> {
    let v = v.trim().trim_start_matches('v');
    let (core, build) = v.split_once('+').unwrap_or((v, ""));
    let core = core.split('-').next().unwrap_or(core);
    let mut nums = core.split('.').map(|n| n.parse::<u64>().ok());
    let major = nums.next()??;
    let minor = nums.next()??;
    let patch = nums.next().flatten().unwrap_or(0);
    let build = build
        .rsplit('.')
        .next()
        .and_then(|b| b.parse().ok())
        .unwrap_or(0);
    Some((major, minor, patch, build))
}

/// Member IDs are hex without padding (`%x`); compare them as numbers so `0a1f` and `a1f` agree.
fn same_member_id(a: &str, b: &str) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    match (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.eq_ignore_ascii_case(b),
    }
}

fn peer_url(addr: &str) -> String {
    if addr.contains(':') {
        format!("https://[{addr}]:2380")
    } else {
        format!("https://{addr}:2380")
    }
}

fn collect_hosts<'a>(
    spec: &'a Spec,
    state: &'a State,
    reality: &'a Reality,
    opts: &PlanOptions,
) -> Vec<HostCtx<'a>> {
    let mut ids: BTreeSet<HostId> = spec.hosts.iter().map(|h| h.id()).collect();
    ids.extend(state.hosts.iter().map(|h| h.id()));
    // Indexed once (first entry wins, as `find` does): a scan of each list per host made
    // 5,000-host plans quadratic.
    let mut by_spec: BTreeMap<(&str, u16), &HostSpec> = BTreeMap::new();
    for h in &spec.hosts {
        by_spec
            .entry((h.ssh.address.as_str(), h.ssh.port))
            .or_insert(h);
    }
    let mut by_state: BTreeMap<(&str, u16), &HostState> = BTreeMap::new();
    for h in &state.hosts {
        by_state.entry((h.address.as_str(), h.port)).or_insert(h);
    }
    let mut by_probe: BTreeMap<(&str, u16), &Probe> = BTreeMap::new();
    for h in &reality.hosts {
        by_probe
            .entry((h.id.address.as_str(), h.id.port))
            .or_insert(&h.probe);
    }
    ids.into_iter()
        .map(|id| {
            let k = (id.address.as_str(), id.port);
            HostCtx {
                spec: by_spec.get(&k).copied(),
                state: by_state.get(&k).copied(),
                probe: by_probe.get(&k).copied(),
                excluded: opts.is_excluded(&id),
                id,
            }
        })
        .collect()
}

/// How a controller's view identifies the cluster: uid and member peer URLs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Identity {
    uid: Option<String>,
    peers: Vec<String>,
}

impl Identity {
    fn of(view: &ClusterView) -> Self {
        let mut peers: Vec<String> = view.members.iter().map(|m| m.peer_url.clone()).collect();
        peers.sort();
        peers.dedup();
        Identity {
            uid: view.cluster_uid.clone(),
            peers,
        }
    }
    fn describe(&self, names: &BTreeMap<String, String>) -> String {
        let members: Vec<String> = self
            .peers
            .iter()
            .map(|p| {
                names
                    .get(&peer_key(p))
                    .cloned()
                    .unwrap_or_else(|| p.clone())
            })
            .collect();
        format!(
            "cluster {} with members {}",
            self.uid.as_deref().map(short).unwrap_or_else(|| "?".into()),
            if members.is_empty() {
                "(none)".into()
            } else {
                members.join(", ")
            }
        )
    }
}

/// One etcd member of the managed cluster, merged from every agreeing controller's view.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    peer_url: String,
    member_id: Option<String>,
    /// The spec/state host this member belongs to.
    host: Option<HostId>,
    /// Its host runs a controller that answers with the cluster's identity.
    healthy: bool,
    seen_by: Vec<HostId>,
}

/// The cluster-level decision (rules 1-4) and the facts per-host decisions need.
struct ClusterCtx {
    action: ClusterAction,
    uid: Option<String>,
    members: Vec<Member>,
    /// Running controllers that answer with the managed identity.
    healthy: BTreeSet<HostId>,
    /// Controllers that answer with another identity (only when named by `-replace`).
    foreign: BTreeSet<HostId>,
    nodes: BTreeMap<String, Vec<HostId>>,
    control_nodes: BTreeSet<String>,
    /// Every agreeing controller answered every query (no partial views).
    nodes_complete: bool,
}

fn identify_cluster(
    spec: &Spec,
    state: &State,
    hosts: &[HostCtx],
    opts: &PlanOptions,
) -> Result<ClusterCtx, Refusal> {
    let mut groups: BTreeMap<Identity, Vec<&HostCtx>> = BTreeMap::new();
    for h in hosts.iter().filter(|h| !h.excluded) {
        if let Some(view) = h
            .facts()
            .filter(|f| f.is_running())
            .and_then(|f| f.view.as_ref())
        {
            let id = Identity::of(view);
            if id.uid.is_none() && id.peers.is_empty() {
                // A view whose every query failed says nothing about identity.
                continue;
            }
            groups.entry(id).or_default().push(h);
        }
    }
    let mut peer_names: BTreeMap<String, String> = BTreeMap::new();
    for h in hosts {
        for p in h.peer_keys() {
            peer_names.insert(p, h.name());
        }
    }
    let who_sees_what = |groups: &BTreeMap<Identity, Vec<&HostCtx>>| -> Vec<String> {
        let mut lines = Vec::new();
        for h in hosts
            .iter()
            .filter(|h| h.role().is_controller() && !h.excluded)
        {
            let line = match h.probe {
                None => "not probed".to_string(),
                Some(Probe::Unreachable { error }) => format!("unreachable ({error})"),
                Some(Probe::HostKeyChanged { .. }) => "host key changed; not asked".to_string(),
                Some(Probe::Reached(f)) if !f.is_running() => "k0s not running".to_string(),
                Some(Probe::Reached(_)) => groups
                    .iter()
                    .find(|(_, hs)| hs.iter().any(|x| x.id == h.id))
                    .map(|(id, _)| format!("sees {}", id.describe(&peer_names)))
                    .unwrap_or_else(|| "running, but its view of the cluster is empty".into()),
            };
            lines.push(format!("{} ({}): {}", h.name(), h.id, line));
        }
        lines
    };

    // A view whose uid query failed but whose member list matches a complete answer agrees
    // with it: a failed kubectl call is not a second cluster.
    let partial: Vec<Identity> = groups.keys().filter(|k| k.uid.is_none()).cloned().collect();
    for p in partial {
        let target = groups
            .keys()
            .find(|k| k.uid.is_some() && k.peers == p.peers)
            .cloned();
        if let Some(t) = target
            && let Some(hs) = groups.remove(&p)
        {
            groups.entry(t).or_default().extend(hs);
        }
    }

    let known_uid = state.cluster.as_ref().map(|c| c.uid.clone());
    let replaced = |hs: &Vec<&HostCtx>| hs.iter().all(|h| opts.is_replaced(&h.id));

    // Pick the managed identity: the state's uid when there is one; otherwise the one group
    // that is not entirely named by -replace.
    let good: Option<Identity> = match &known_uid {
        Some(uid) => {
            let mut candidates: Vec<(&Identity, &Vec<&HostCtx>)> = groups
                .iter()
                .filter(|(id, _)| id.uid.as_deref() == Some(uid.as_str()))
                .collect();
            // Largest agreeing group first; ties by identity order (deterministic).
            candidates.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
            match candidates.first() {
                Some((id, _)) => Some((*id).clone()),
                None => {
                    return Err(Refusal {
                        kind: RefusalKind::NoController,
                        message: format!(
                            "the state names cluster \"{}\" (identity {}), but none of its controllers answers; \
                             refusing to plan (a new cluster is never bootstrapped over a known one)",
                            state
                                .cluster
                                .as_ref()
                                .map(|c| c.name.as_str())
                                .unwrap_or(""),
                            short(uid)
                        ),
                        details: who_sees_what(&groups),
                    });
                }
            }
        }
        None => {
            let unreplaced: Vec<&Identity> = groups
                .iter()
                .filter(|(_, hs)| !replaced(hs))
                .map(|(id, _)| id)
                .collect();
            match unreplaced.len() {
                0 => None,
                1 => Some(unreplaced[0].clone()),
                _ => {
                    return Err(Refusal {
                        kind: RefusalKind::SplitBrain,
                        message: format!(
                            "running controllers disagree on what the cluster is ({} different answers); \
                             refusing to plan",
                            unreplaced.len()
                        ),
                        details: who_sees_what(&groups),
                    });
                }
            }
        }
    };
    // Everyone not in the managed group must be named by -replace.
    let mut foreign = BTreeSet::new();
    if let Some(good_id) = &good {
        let mut disagree = false;
        for (id, hs) in &groups {
            if id == good_id {
                continue;
            }
            for h in hs {
                if opts.is_replaced(&h.id) {
                    foreign.insert(h.id.clone());
                } else {
                    disagree = true;
                }
            }
        }
        if disagree {
            return Err(Refusal {
                kind: RefusalKind::SplitBrain,
                message: "running controllers disagree on the cluster identity or membership; refusing to plan. \
                          If the controllers outside the recorded cluster were rebuilt, name them with -replace ADDR"
                    .into(),
                details: who_sees_what(&groups),
            });
        }
    } else {
        foreign.extend(groups.values().flatten().map(|h| h.id.clone()));
    }

    let Some(good_id) = good else {
        // Rule 4: nothing of ours runs anywhere.
        let first = spec.hosts.iter().find(|h| {
            h.role.is_controller()
                && !h.reset
                && !opts.is_excluded(&h.id())
                && hosts
                    .iter()
                    .any(|c| c.id == h.id() && c.facts().is_some() && !foreign.contains(&c.id))
        });
        let Some(first) = first else {
            return Err(Refusal {
                kind: RefusalKind::Unreachable,
                message: "no controller of the spec is reachable to bootstrap the cluster on"
                    .into(),
                details: who_sees_what(&groups),
            });
        };
        return Ok(ClusterCtx {
            action: ClusterAction::Bootstrap { host: first.id() },
            uid: None,
            members: Vec::new(),
            healthy: BTreeSet::new(),
            foreign,
            nodes: BTreeMap::new(),
            control_nodes: BTreeSet::new(),
            nodes_complete: true,
        });
    };

    let agreeing: Vec<&HostCtx> = groups.get(&good_id).cloned().unwrap_or_default();
    let healthy: BTreeSet<HostId> = agreeing.iter().map(|h| h.id.clone()).collect();
    let mut members: BTreeMap<String, Member> = BTreeMap::new();
    let mut nodes: BTreeMap<String, Vec<HostId>> = BTreeMap::new();
    let mut control_nodes = BTreeSet::new();
    for h in &agreeing {
        let Some(view) = h.facts().and_then(|f| f.view.as_ref()) else {
            continue;
        };
        for m in &view.members {
            let e = members
                .entry(peer_key(&m.peer_url))
                .or_insert_with(|| Member {
                    name: m.name.clone(),
                    peer_url: m.peer_url.clone(),
                    member_id: None,
                    host: None,
                    healthy: false,
                    seen_by: Vec::new(),
                });
            if e.member_id.is_none() {
                e.member_id = m.member_id.clone();
            }
            if e.name.is_empty() {
                e.name = m.name.clone();
            }
            e.seen_by.push(h.id.clone());
        }
        for n in &view.nodes {
            nodes.entry(n.name.clone()).or_default().push(h.id.clone());
        }
        control_nodes.extend(view.control_nodes.iter().cloned());
    }
    for m in members.values_mut() {
        let owner = hosts.iter().find(|h| {
            h.peer_keys().contains(&peer_key(&m.peer_url))
                || (m.member_id.is_some()
                    && h.state.and_then(|s| s.etcd.as_ref()).map(|e| &e.member_id)
                        == m.member_id.as_ref())
        });
        if let Some(o) = owner {
            m.host = Some(o.id.clone());
            m.healthy = healthy.contains(&o.id);
        }
    }
    Ok(ClusterCtx {
        action: if known_uid.is_some() {
            ClusterAction::Existing
        } else {
            ClusterAction::Adopt
        },
        uid: good_id.uid.clone().or(known_uid),
        members: members.into_values().collect(),
        healthy,
        foreign,
        nodes,
        control_nodes,
        nodes_complete: agreeing.iter().all(|h| {
            h.facts()
                .and_then(|f| f.view.as_ref())
                .is_some_and(|v| v.errors.is_empty())
        }),
    })
}

fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// A member to remove, by the ID recorded in state (or, for a host k0sform never recorded, the
/// ID the cluster reports).
#[derive(Debug, Clone)]
struct MemberRef {
    member_id: String,
    peer_url: String,
    healthy: bool,
}

/// What happens to one host.
#[derive(Debug, Clone)]
enum Decision {
    Noop,
    Adopt,
    Add {
        bootstrap: bool,
        stale: Option<MemberRef>,
        reset: Option<String>,
    },
    Upgrade {
        from: Option<String>,
        to: String,
        write_config: bool,
    },
    Reconfigure {
        write_config: bool,
    },
    Rejoin {
        stale: Option<MemberRef>,
        reset: Option<String>,
    },
    Replace {
        stale: Option<MemberRef>,
        reset: Option<String>,
    },
    Remove {
        member: Option<MemberRef>,
        reset: Option<String>,
    },
    /// Only `files:` differ.
    Files,
}

impl Decision {
    fn action(&self) -> Option<Action> {
        Some(match self {
            Decision::Noop => return None,
            Decision::Adopt => Action::Adopt,
            Decision::Add { .. } => Action::Add,
            Decision::Upgrade { .. } => Action::Upgrade,
            Decision::Reconfigure { .. } => Action::Reconfigure,
            Decision::Rejoin { .. } => Action::Rejoin,
            Decision::Replace { .. } => Action::Replace,
            Decision::Remove { .. } => Action::Remove,
            Decision::Files => Action::UpdateFiles,
        })
    }
    /// Restarts k0s in place (upgrade or reconfigure).
    fn restarts(&self) -> bool {
        matches!(
            self,
            Decision::Upgrade { .. } | Decision::Reconfigure { .. }
        )
    }
    fn installs(&self) -> bool {
        matches!(
            self,
            Decision::Add { .. } | Decision::Rejoin { .. } | Decision::Replace { .. }
        )
    }
    fn stale(&self) -> Option<&MemberRef> {
        match self {
            Decision::Add { stale, .. }
            | Decision::Rejoin { stale, .. }
            | Decision::Replace { stale, .. } => stale.as_ref(),
            Decision::Remove { member, .. } => member.as_ref(),
            _ => None,
        }
    }
}

struct HostPlan {
    idx: usize,
    decision: Decision,
    reasons: Vec<Reason>,
    config_diff: Option<String>,
    /// The spec's `files:` to upload (missing or different on the host).
    files: Vec<crate::files::DesiredFile>,
}

fn reason(code: ReasonCode, message: impl Into<String>) -> Reason {
    Reason {
        code,
        message: message.into(),
    }
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

impl<'a> Planner<'a> {
    fn plan(&mut self) -> Result<Plan, Refusal> {
        let outside_changes = self.outside_changes();
        let drift = self.drift();
        if self.opts.refresh_only {
            return Ok(self.refresh_plan(outside_changes, drift));
        }
        self.intent_warnings();
        self.selector_warnings();
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
                        plans.push(p)
                    }
                    Err(r) => refusals.push((idx, r)),
                },
                Ok(None) => {}
                Err(r) => refusals.push((idx, r)),
            }
        }
        // -target: keep the named hosts' changes, and the bootstrap they cannot do without.
        if !self.opts.target.is_empty() {
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
            let bootstrap_host = match &self.cluster.action {
                ClusterAction::Bootstrap { host } if needs_bootstrap => Some(host.clone()),
                _ => None,
            };
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
        if !refusals.is_empty() {
            return Err(merge_refusals(
                refusals.into_iter().map(|(_, r)| r).collect(),
            ));
        }
        let (steps, step_owner, etcd) = self.build_steps(&plans)?;
        let (steps, step_owner) = self.with_hooks(&plans, steps, step_owner);
        self.two_member_restarts(&plans);
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
                    details: self.details(p, &steps),
                    config_diff: p.config_diff.clone(),
                    steps: step_owner
                        .iter()
                        .filter(|(_, owner)| **owner == p.idx)
                        .map(|(s, _)| *s)
                        .collect(),
                })
            })
            .collect();
        changes.sort_by(|a, b| a.host.cmp(&b.host));
        super::graph::check_acyclic(&steps).map_err(|e| Refusal {
            kind: RefusalKind::Quorum,
            message: format!("internal error: the step graph is not a DAG: {e}"),
            details: vec![],
        })?;
        Ok(Plan {
            format_version: PLAN_FORMAT_VERSION,
            cluster_name: self.spec.name.clone(),
            cluster_uid: self.cluster.uid.clone(),
            cluster_action: self.cluster.action.clone(),
            refresh_only: false,
            outside_changes,
            changes,
            drift,
            steps,
            etcd,
            warnings: std::mem::take(&mut self.warnings),
            state_serial: self.state_serial(),
        })
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
                if !self.hosts.iter().any(|h| h.id.matches(sel)) {
                    self.warnings.push(format!(
                        "{flag} {sel} names no host of the spec or the state"
                    ));
                }
            }
        }
    }

    fn state_serial(&self) -> Option<u64> {
        (self.state.cluster.is_some() || !self.state.hosts.is_empty()).then_some(self.state.serial)
    }

    fn member_of(&self, id: &HostId) -> Option<&Member> {
        self.cluster
            .members
            .iter()
            .find(|m| m.host.as_ref() == Some(id))
    }

    /// Is this running host part of the managed cluster right now?
    fn in_cluster(&self, h: &HostCtx) -> bool {
        let Some(f) = h.facts() else { return false };
        if !f.is_running() {
            return false;
        }
        if h.role().is_controller() {
            self.cluster.healthy.contains(&h.id) && self.member_of(&h.id).is_some()
        } else {
            // A worker has no view of its own: it belongs when a controller lists its Node.
            // When a Node query failed, a running worker is not taken for gone.
            self.cluster.nodes.contains_key(&h.name()) || !self.cluster.nodes_complete
        }
    }

    fn leftovers(f: &HostFacts) -> bool {
        f.service.is_some() || f.is_running() || f.has_etcd_data
    }

    /// The spec's `files:` that are missing or differ on the host (content, mode, owner where
    /// the spec names one) join the host's plan; a host with nothing else to do gets
    /// `Decision::Files`. Not for hosts leaving, unreachable ones or `-refresh-only`.
    fn plan_files(&self, p: &mut HostPlan) {
        let h = &self.hosts[p.idx];
        if self.opts.refresh_only || matches!(p.decision, Decision::Remove { .. }) {
            return;
        }
        let (Some(_), Some(f)) = (h.spec, h.facts()) else {
            return;
        };
        let mut why = Vec::new();
        for want in self.desired.files(&h.id) {
            let have = f.files.iter().find(|r| r.path == want.remote);
            let diff = match have.and_then(|r| r.sha256.as_ref().map(|s| (r, s))) {
                None => Some("missing".to_string()),
                Some((_, sha)) if sha != &want.sha256 => Some("content differs".to_string()),
                Some((r, _)) if r.mode != Some(want.mode) => Some(format!(
                    "mode {} → {}",
                    r.mode.map(crate::files::mode_text).unwrap_or_default(),
                    crate::files::mode_text(want.mode)
                )),
                Some((r, _)) if !r.owned_by(want.user.as_deref(), want.group.as_deref()) => {
                    Some(format!(
                        "owner {}:{} → {}:{}",
                        r.user.as_deref().unwrap_or("?"),
                        r.group.as_deref().unwrap_or("?"),
                        want.user.as_deref().or(r.user.as_deref()).unwrap_or("?"),
                        want.group.as_deref().or(r.group.as_deref()).unwrap_or("?")
                    ))
                }
                Some(_) => None,
            };
            if let Some(d) = diff {
                why.push(format!("{} ({d})", want.remote));
                p.files.push(want.clone());
            }
        }
        if why.is_empty() {
            return;
        }
        if matches!(p.decision, Decision::Noop) {
            p.decision = Decision::Files;
        }
        p.reasons.push(reason(
            ReasonCode::FilesChange,
            format!("files to upload: {}", why.join(", ")),
        ));
    }

    /// A plan that installs or upgrades k0s needs a binary of the wanted version: a local one
    /// to upload (`k0sBinaryPath`), or for an install the one already on the host. Refused up
    /// front (exit 1), before any step could remove a member or reset a host; otherwise an
    /// "upgrade" would restart k0s on its old binary and record the new version.
    fn k0s_binary_for(&self, p: &HostPlan) -> Result<(), Refusal> {
        let h = &self.hosts[p.idx];
        if self.desired.local_binary(&h.id).is_some() {
            return Ok(());
        }
        let path = h
            .spec
            .map(|s| s.k0s_install_path.as_str())
            .unwrap_or("the k0s install path");
        let on_host = h.facts().and_then(|f| f.k0s_version.clone());
        let why = match &p.decision {
            Decision::Upgrade { to, .. } => format!("upgrading k0s to {to} needs that binary"),
            d if d.installs() => match (on_host, self.desired_version(&h.id)) {
                (None, _) => format!("there is no k0s binary at {path} to install"),
                (Some(have), Some(want)) if have != want => {
                    format!("{path} is k0s {have}, the spec asks for {want}")
                }
                _ => return Ok(()),
            },
            _ => return Ok(()),
        };
        Err(Refusal {
            kind: RefusalKind::NoK0sBinary,
            message: format!("{} ({}): {why}", h.name(), h.id),
            details: vec![if h.spec.is_some_and(|s| s.use_existing_k0s) {
                "useExistingK0s: k0sform uses the k0s binary on the host as it is; make spec.k0s.version name that binary's version".into()
            } else {
                "set k0sBinaryPath to a k0s binary of the version spec.k0s.version names: k0sform uploads it (it does not download k0s)".into()
            }],
        })
    }

    fn desired_version(&self, id: &HostId) -> Option<String> {
        self.desired
            .local_binary(id)
            .and_then(|b| b.version.clone())
            .or_else(|| self.spec.k0s.version.clone())
    }

    fn stale_member(&self, h: &HostCtx) -> Result<Option<MemberRef>, Refusal> {
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
        Ok(m.member_id.clone().map(|member_id| MemberRef {
            member_id,
            peer_url: m.peer_url.clone(),
            healthy: m.healthy,
        }))
    }

    fn decide(&mut self, idx: usize) -> Result<Option<HostPlan>, Refusal> {
        let h = &self.hosts[idx];
        let plan = |decision, reasons| {
            Ok(Some(HostPlan {
                idx,
                decision,
                reasons,
                config_diff: None,
                files: Vec::new(),
            }))
        };
        let replaced = self.opts.is_replaced(&h.id);

        // Removal: not in the spec, or `reset: true`.
        if !h.in_spec() {
            let (code, why) = if h.spec.is_some() {
                (ReasonCode::ResetRequested, "reset: true in k0sctl.yaml")
            } else {
                (ReasonCode::NotInSpec, "no longer in k0sctl.yaml")
            };
            let f = h.facts();
            if h.state.is_none() && !f.is_some_and(Self::leftovers) {
                return Ok(None);
            }
            let member = self.stale_member(h)?;
            let reset = match (f, h.state) {
                (Some(f), Some(st))
                    if f.machine_id == st.machine_id && f.host_key == st.host_key =>
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
            return plan(Decision::Remove { member, reset }, vec![reason(code, why)]);
        }

        let probe = match h.probe {
            None | Some(Probe::Unreachable { .. }) => {
                let err = match h.probe {
                    Some(Probe::Unreachable { error }) => error.clone(),
                    _ => "not probed".into(),
                };
                return Err(Refusal {
                    kind: RefusalKind::Unreachable,
                    message: format!("{} ({}) is unreachable", h.name(), h.id),
                    details: vec![format!(
                        "{} ({}): unreachable ({err}): cannot tell down from rebuilt; \
                         leave it out with -exclude {}",
                        h.name(),
                        h.id,
                        h.id
                    )],
                });
            }
            Some(p) => p,
        };
        if let Probe::HostKeyChanged { expected, offered } = probe {
            if !replaced {
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
            return plan(Decision::Replace { stale, reset: None }, reasons);
        }
        let Some(f) = h.facts() else {
            return Ok(None);
        };
        let spec_host = h.spec.ok_or_else(|| Refusal {
            kind: RefusalKind::Unreachable,
            message: format!("{} is not in the spec", h.id),
            details: vec![],
        })?;

        let bootstrap_here =
            matches!(&self.cluster.action, ClusterAction::Bootstrap { host } if host == &h.id);
        let reset_if = |f: &HostFacts| Self::leftovers(f).then(|| f.machine_id.clone());

        let Some(st) = h.state else {
            if bootstrap_here {
                return plan(
                    Decision::Add {
                        bootstrap: true,
                        stale: None,
                        reset: reset_if(f),
                    },
                    vec![reason(
                        ReasonCode::Bootstrap,
                        "first controller of a new cluster (nothing runs anywhere)",
                    )],
                );
            }
            if self.cluster.foreign.contains(&h.id) {
                return plan(
                    Decision::Replace {
                        stale: None,
                        reset: reset_if(f),
                    },
                    vec![reason(
                        ReasonCode::ReplaceRequested,
                        "it runs another cluster; -replace names this host",
                    )],
                );
            }
            if self.in_cluster(h) {
                return plan(
                    Decision::Adopt,
                    vec![reason(
                        ReasonCode::FoundRunning,
                        "found running in the cluster; recorded without changes",
                    )],
                );
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
            return plan(
                Decision::Add {
                    bootstrap: false,
                    stale,
                    reset: reset_if(f),
                },
                reasons,
            );
        };

        // Recorded host: identity first.
        let key_changed = f.host_key != st.host_key;
        let mid_changed = f.machine_id != st.machine_id;
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
        if key_changed || mid_changed || replaced || foreign {
            let mut reasons = Vec::new();
            if mid_changed {
                reasons.push(reason(
                    ReasonCode::MachineIdChanged,
                    "the host was rebuilt (machine-id changed)",
                ));
            }
            if key_changed {
                reasons.push(reason(
                    ReasonCode::HostKeyChanged,
                    format!(
                        "the SSH host key changed ({}→{})",
                        short_key(&st.host_key),
                        short_key(&f.host_key)
                    ),
                ));
            }
            if replaced {
                reasons.push(reason(
                    ReasonCode::ReplaceRequested,
                    "-replace names this host",
                ));
            }
            if foreign {
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
            let stale = self.stale_member(h)?;
            return plan(
                Decision::Replace {
                    stale,
                    reset: reset_if(f),
                },
                reasons,
            );
        }

        if !self.in_cluster(h) {
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
            return plan(
                Decision::Rejoin {
                    stale,
                    reset: reset_if(f),
                },
                vec![r],
            );
        }

        // In the cluster: version, then config and flags.
        let running_version = f
            .status
            .as_ref()
            .map(|s| s.version.clone())
            .or_else(|| f.k0s_version.clone());
        let want_version = self.desired_version(&h.id);
        let bin = self.desired.local_binary(&h.id);
        let version_differs = match (&want_version, &running_version) {
            (Some(w), Some(r)) => w != r,
            (Some(_), None) => true,
            _ => false,
        } || match (bin, &f.k0s_binary_sha256) {
            (Some(b), Some(have)) => &b.sha256 != have,
            _ => false,
        };
        let mut reasons = Vec::new();
        let mut config_diff = None;
        let mut write_config = false;
        if h.role().is_controller() {
            let want = desired::config_yaml(self.spec, spec_host);
            if f.config_sha256.as_deref() != Some(sha256_hex(&want).as_str()) {
                write_config = true;
                let have = f.config_text.clone().unwrap_or_default();
                config_diff = Some(
                    similar::TextDiff::from_lines(have.as_str(), want.as_str())
                        .unified_diff()
                        .context_radius(3)
                        .header(
                            &format!("{} (on {})", desired::CONFIG_FILE, h.name()),
                            &format!("{} (from k0sctl.yaml)", desired::CONFIG_FILE),
                        )
                        .to_string(),
                );
                reasons.push(reason(
                    ReasonCode::ConfigChange,
                    "k0s.yaml differs from the spec (diff below)",
                ));
            }
        }
        let running_args: Vec<String> = f
            .status
            .as_ref()
            .map(|s| s.args.iter().skip(2).cloned().collect())
            .unwrap_or_default();
        let want_args = desired::install_args(self.spec, spec_host);
        if desired::comparable_args(&running_args) != desired::comparable_args(&want_args) {
            let have = desired::comparable_args(&running_args);
            let want = desired::comparable_args(&want_args);
            let gone: Vec<&String> = have.iter().filter(|a| !want.contains(a)).collect();
            let new: Vec<&String> = want.iter().filter(|a| !have.contains(a)).collect();
            let mut parts = Vec::new();
            if !gone.is_empty() {
                parts.push(format!(
                    "not wanted: {}",
                    gone.iter()
                        .map(|a| a.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                ));
            }
            if !new.is_empty() {
                parts.push(format!(
                    "missing: {}",
                    new.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(" ")
                ));
            }
            reasons.push(reason(
                ReasonCode::InstallFlagsChange,
                format!("install flags differ ({})", parts.join("; ")),
            ));
        }
        if version_differs {
            let to = want_version
                .clone()
                .or_else(|| bin.map(|b| format!("binary sha256 {}", short(&b.sha256))))
                .unwrap_or_default();
            if let (Some(have), Some(want)) = (
                running_version.as_deref().and_then(version_key),
                want_version.as_deref().and_then(version_key),
            ) && want < have
            {
                self.warnings.push(format!(
                    "{} ({}) would be downgraded from {} to {to}; k0s does not support downgrades",
                    h.name(),
                    h.id,
                    running_version.as_deref().unwrap_or_default()
                ));
            }
            reasons.insert(
                0,
                reason(
                    ReasonCode::VersionChange,
                    match (running_version.as_deref(), want_version.as_deref(), bin) {
                        // Same version string, other bytes: a rebuilt or patched binary.
                        (Some(have), Some(want), Some(b)) if have == want => format!(
                            "the k0s binary changed (sha256 {} → {}), version {want}",
                            f.k0s_binary_sha256
                                .as_deref()
                                .map(short)
                                .unwrap_or_else(|| "none".into()),
                            short(&b.sha256)
                        ),
                        _ => format!(
                            "k0s version {} → {}",
                            running_version.as_deref().unwrap_or("none"),
                            to
                        ),
                    },
                ),
            );
            return Ok(Some(HostPlan {
                idx,
                decision: Decision::Upgrade {
                    from: running_version,
                    to,
                    write_config,
                },
                reasons,
                config_diff,
                files: Vec::new(),
            }));
        }
        if !reasons.is_empty() {
            return Ok(Some(HostPlan {
                idx,
                decision: Decision::Reconfigure { write_config },
                reasons,
                config_diff,
                files: Vec::new(),
            }));
        }
        Ok(Some(HostPlan {
            idx,
            decision: Decision::Noop,
            reasons: vec![],
            config_diff: None,
            files: Vec::new(),
        }))
    }

    fn outside_changes(&self) -> Vec<OutsideChange> {
        let mut out = Vec::new();
        for h in self.hosts.iter().filter(|h| !h.excluded) {
            let Some(st) = h.state else { continue };
            let mut changes = Vec::new();
            match h.probe {
                Some(Probe::HostKeyChanged { expected, offered }) => {
                    changes.push(format!(
                        "host key {}→{}",
                        short_key(expected),
                        short_key(offered)
                    ));
                }
                Some(Probe::Reached(f)) => {
                    if f.machine_id != st.machine_id {
                        changes.push(format!(
                            "machine-id {}→{}",
                            short(&st.machine_id),
                            short(&f.machine_id)
                        ));
                    }
                    if f.host_key != st.host_key {
                        changes.push(format!(
                            "host key {}→{}",
                            short_key(&st.host_key),
                            short_key(&f.host_key)
                        ));
                    }
                    let running = f.status.as_ref().map(|s| s.version.clone());
                    if let (Some(rec), Some(now)) = (&st.k0s_version, &running)
                        && rec != now
                    {
                        changes.push(format!("k0s {rec}→{now}"));
                    }
                    if !f.is_running() {
                        changes.push("k0s not running".into());
                    }
                    if let Some(rec) = &st.etcd
                        && self.cluster.uid.is_some()
                        && !self.cluster.members.iter().any(|m| {
                            m.member_id
                                .as_deref()
                                .is_some_and(|id| same_member_id(id, &rec.member_id))
                        })
                    {
                        changes.push(format!("etcd member {} gone", rec.member_id));
                    }
                }
                _ => {}
            }
            if !changes.is_empty() {
                out.push(OutsideChange {
                    host: h.id.clone(),
                    role: h.role(),
                    name: h.name(),
                    changes,
                });
            }
        }
        out
    }

    fn drift(&self) -> Vec<Drift> {
        let mut out = Vec::new();
        for m in self.cluster.members.iter().filter(|m| m.host.is_none()) {
            out.push(Drift {
                code: ReasonCode::UnknownMember,
                what: format!(
                    "etcd member \"{}\" ({}{})",
                    m.name,
                    m.peer_url,
                    m.member_id
                        .as_ref()
                        .map(|i| format!(", id {i}"))
                        .unwrap_or_default()
                ),
                seen_by: m.seen_by.clone(),
            });
        }
        let known: BTreeSet<String> = self.hosts.iter().map(|h| h.name()).collect();
        for (node, seen_by) in &self.cluster.nodes {
            if !known.contains(node) {
                out.push(Drift {
                    code: ReasonCode::UnknownNode,
                    what: format!("Node \"{node}\""),
                    seen_by: seen_by.clone(),
                });
            }
        }
        out
    }

    /// `-refresh-only`: record what runs, touch nothing.
    fn refresh_plan(&mut self, outside_changes: Vec<OutsideChange>, drift: Vec<Drift>) -> Plan {
        let mut steps = Vec::new();
        let mut changes = Vec::new();
        for h in self
            .hosts
            .iter()
            .filter(|h| !h.excluded && h.facts().is_some())
        {
            if !self.in_cluster(h) {
                if h.state.is_some() || h.in_spec() {
                    self.warnings.push(format!(
                        "{} ({}) is not running in the cluster; not recorded",
                        h.name(),
                        h.id
                    ));
                }
                continue;
            }
            let f = h.facts().map(|f| (*f).clone()).unwrap_or_default();
            let member_id = self.member_of(&h.id).and_then(|m| m.member_id.clone());
            let reasons = match h.state {
                None => vec![reason(
                    ReasonCode::FoundRunning,
                    "found running in the cluster; recorded",
                )],
                Some(st) => {
                    let mut r = Vec::new();
                    if st.machine_id != f.machine_id {
                        r.push(reason(
                            ReasonCode::MachineIdChanged,
                            "machine-id recorded as seen",
                        ));
                    }
                    if st.host_key != f.host_key {
                        r.push(reason(
                            ReasonCode::HostKeyChanged,
                            "host key recorded as seen",
                        ));
                    }
                    let running = f.status.as_ref().map(|s| s.version.clone());
                    if st.k0s_version != running {
                        r.push(reason(
                            ReasonCode::VersionChange,
                            "k0s version recorded as seen",
                        ));
                    }
                    if h.role().is_controller()
                        && st.etcd.as_ref().map(|e| e.member_id.clone()) != member_id
                    {
                        r.push(reason(
                            ReasonCode::LeftCluster,
                            "etcd member recorded as seen",
                        ));
                    }
                    r
                }
            };
            if reasons.is_empty() {
                continue;
            }
            let id = steps.len();
            steps.push(Step {
                id,
                host: h.id.clone(),
                kind: StepKind::RecordHost,
                after: vec![],
            });
            changes.push(HostChange {
                host: h.id.clone(),
                role: h.role(),
                name: h.name(),
                action: Action::Adopt,
                reasons,
                details: vec![Detail {
                    sign: '+',
                    text: identity_text(&f, member_id.as_deref()),
                }],
                config_diff: None,
                steps: vec![id],
            });
        }
        let n = self.cluster.members.len();
        let healthy = self.cluster.members.iter().filter(|m| m.healthy).count();
        Plan {
            format_version: PLAN_FORMAT_VERSION,
            cluster_name: self.spec.name.clone(),
            cluster_uid: self.cluster.uid.clone(),
            cluster_action: self.cluster.action.clone(),
            refresh_only: true,
            outside_changes,
            changes,
            drift,
            steps,
            etcd: QuorumSummary {
                members_before: n,
                members_after: n,
                min_healthy: healthy,
                quorum: if n == 0 { 0 } else { quorum(n) },
            },
            warnings: std::mem::take(&mut self.warnings),
            state_serial: self.state_serial(),
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

    /// Two etcd members are no more available than one: while either restarts, the other
    /// alone has no quorum, so etcd and the API stop. Not refused (there is no safer order, and
    /// k0sctl does the same), but said.
    fn two_member_restarts(&mut self, plans: &[HostPlan]) {
        if self.cluster.members.len() != 2 {
            return;
        }
        let names: Vec<String> = plans
            .iter()
            .filter(|p| self.hosts[p.idx].role().is_controller() && p.decision.restarts())
            .map(|p| self.hosts[p.idx].name())
            .collect();
        if !names.is_empty() {
            self.warnings.push(format!(
                "restarting {} in a cluster of 2 etcd members: while each restarts the other has no quorum, so etcd and the Kubernetes API are unavailable until it is back (3 controllers keep quorum)",
                names.join(", ")
            ));
        }
    }

    /// The spec's hooks as `RunHooks` steps wrapped around the steps they name, host by host:
    /// `install.*` around a bootstrap or join, `upgrade.*` around an upgrade, `reset.*` around
    /// a reset, and `apply.before`/`apply.after` around everything this plan runs on the host
    /// itself (not what runs through a controller on its behalf). Whatever waited for a
    /// wrapped step waits for its after-hooks too. Hosts without changes run no hooks.
    fn with_hooks(
        &self,
        plans: &[HostPlan],
        steps: Vec<Step>,
        owner: BTreeMap<usize, usize>,
    ) -> (Vec<Step>, BTreeMap<usize, usize>) {
        let has_hooks = |p: &HostPlan| self.hosts[p.idx].spec.is_some_and(|s| !s.hooks.is_empty());
        if !plans.iter().any(has_hooks) {
            return (steps, owner);
        }
        let mut before: BTreeMap<usize, Vec<StepKind>> = BTreeMap::new();
        let mut after: BTreeMap<usize, Vec<StepKind>> = BTreeMap::new();
        // Each host plan's steps that run on the host itself, in id order (one pass).
        let mut on_hosts: BTreeMap<usize, Vec<&Step>> = BTreeMap::new();
        for s in &steps {
            if let Some(&idx) = owner.get(&s.id)
                && s.host == self.hosts[idx].id
                && runs_on_host(&s.kind)
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
                (!lines.is_empty()).then(|| StepKind::RunHooks {
                    action: action.into(),
                    stage: stage.into(),
                    lines: lines.clone(),
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
                if let Some(k) = hook("apply", "after") {
                    after.entry(last.id).or_default().push(k);
                }
            }
        }
        if before.is_empty() && after.is_empty() {
            return (steps, owner);
        }
        // Rebuilt in id order, so every step still comes after what it waits for.
        let mut out: Vec<Step> = Vec::with_capacity(steps.len());
        let mut new_owner = BTreeMap::new();
        // old id → the new step that stands for "done": the step or its last after-hook.
        let mut done: Vec<usize> = Vec::with_capacity(steps.len());
        for s in steps {
            let own = owner[&s.id];
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
                new_owner.insert(id, own);
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

    #[allow(clippy::type_complexity)]
    fn build_steps(
        &self,
        plans: &[HostPlan],
    ) -> Result<(Vec<Step>, BTreeMap<usize, usize>, QuorumSummary), Refusal> {
        let mut b = Builder::default();
        // Hosts whose membership or service this plan disrupts are not the first choice to act
        // through.
        let busy: BTreeSet<HostId> = plans
            .iter()
            .filter(|p| {
                !matches!(
                    p.decision,
                    Decision::Noop | Decision::Adopt | Decision::Files
                ) && self.hosts[p.idx].role().is_controller()
            })
            .map(|p| self.hosts[p.idx].id.clone())
            .collect();
        let bootstrap_host = match &self.cluster.action {
            ClusterAction::Bootstrap { host } => Some(host.clone()),
            _ => None,
        };
        let mut vias = ViaPicker {
            base: bootstrap_host.clone().or_else(|| self.pick_via(&busy)),
            joined: Vec::new(),
            removed: BTreeSet::new(),
            fallback: self
                .cluster
                .healthy
                .iter()
                .filter(|id| !self.opts.is_excluded(id))
                .cloned()
                .collect(),
        };

        let mut quorum = QuorumSim::new(&self.cluster.members);
        let mut gate: Option<usize> = None;
        let sorted = |f: &dyn Fn(&HostPlan) -> bool| -> Vec<&HostPlan> {
            plans.iter().filter(|p| f(p)).collect()
        };
        let ctrl = |p: &HostPlan| self.hosts[p.idx].role().is_controller();

        // M1: members that must go first: dead or replaced members, stale members of rejoiners,
        // and removals of members that are already down (a dead member is removed before its
        // replacement is added).
        for p in sorted(&|p| match &p.decision {
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
                self.build_removal(&mut b, &mut quorum, &mut gate, p, &mut vias)?;
                continue;
            }
            let Some(m) = p.decision.stale() else {
                continue;
            };
            let name = h.name();
            let via = vias.for_subject(&h.id, &name)?;
            quorum.remove(&m.member_id, &m.peer_url, &name)?;
            let rm = b.push(
                p.idx,
                &h.id,
                StepKind::RemoveMember {
                    member_id: m.member_id.clone(),
                    peer_url: m.peer_url.clone(),
                    via: via.clone(),
                },
                [gate],
            );
            let w = b.push(p.idx, &h.id, StepKind::WaitHealthy { via }, [Some(rm)]);
            gate = Some(w);
            vias.removed.insert(h.id.clone());
        }
        // Stale API objects of replaced and rejoining hosts go before they come back.
        for p in sorted(&|p| {
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
            let via = vias.for_subject(&h.id, &h.name())?;
            let prev = b.last.get(&p.idx).copied();
            b.push(
                p.idx,
                &h.id,
                StepKind::DeleteObjects {
                    node: h.name(),
                    objects,
                    via,
                },
                [prev],
            );
        }

        // M2: bootstrap.
        let mut controller_ready: Option<usize> = None;
        if let Some(bh) = &bootstrap_host
            && let Some(p) = plans.iter().find(|p| &self.hosts[p.idx].id == bh)
        {
            self.build_prep(&mut b, p);
            let prev = b.last.get(&p.idx).copied();
            quorum.join(&self.hosts[p.idx].name(), true)?;
            let s = b.push(p.idx, bh, StepKind::Bootstrap, [prev, gate]);
            let w = b.push(
                p.idx,
                bh,
                StepKind::WaitHealthy { via: bh.clone() },
                [Some(s)],
            );
            gate = Some(w);
            controller_ready = Some(w);
            b.push(p.idx, bh, StepKind::RecordHost, [Some(w)]);
        }

        // M3: controllers joining (one at a time, each behind the previous health gate).
        for p in sorted(&|p| {
            ctrl(p)
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
            let via = vias.for_subject(&h.id, &h.name())?;
            self.build_prep(&mut b, p);
            let prev = b.last.get(&p.idx).copied();
            quorum.join(&h.name(), false)?;
            let s = b.push(
                p.idx,
                &h.id,
                StepKind::JoinController { via: via.clone() },
                [prev, gate],
            );
            let w = b.push(p.idx, &h.id, StepKind::WaitHealthy { via }, [Some(s)]);
            gate = Some(w);
            b.push(p.idx, &h.id, StepKind::RecordHost, [Some(w)]);
            vias.joined.push(h.id.clone());
            vias.removed.remove(&h.id);
        }

        // M4: healthy members removed from the spec, after any additions.
        for p in sorted(&|p| {
            ctrl(p)
                && match &p.decision {
                    Decision::Remove { member, .. } => member.as_ref().is_none_or(|m| m.healthy),
                    _ => false,
                }
        }) {
            self.build_removal(&mut b, &mut quorum, &mut gate, p, &mut vias)?;
        }

        // Controller restarts (upgrade, reconfigure): one at a time, each behind a health gate.
        for p in sorted(&|p| ctrl(p) && p.decision.restarts()) {
            let h = &self.hosts[p.idx];
            // A lone controller checks its own health after the restart.
            let via = vias
                .for_subject(&h.id, &h.name())
                .unwrap_or_else(|_| h.id.clone());
            self.build_prep(&mut b, p);
            let prev = b.last.get(&p.idx).copied();
            let kind = self.restart_kind(p);
            quorum.restart();
            let s = b.push(p.idx, &h.id, kind, [prev, gate]);
            let w = b.push(p.idx, &h.id, StepKind::WaitHealthy { via }, [Some(s)]);
            gate = Some(w);
            b.push(p.idx, &h.id, StepKind::RecordHost, [Some(w)]);
        }
        let controllers_done = gate;

        // Workers joining: after a controller is ready.
        for p in sorted(&|p| !ctrl(p) && p.decision.installs()) {
            let h = &self.hosts[p.idx];
            let via = vias.for_subject(&h.id, &h.name())?;
            self.build_prep(&mut b, p);
            let prev = b.last.get(&p.idx).copied();
            // A controller that joined in this plan is usable once the membership chain is done.
            // A controller that joined, or restarts, in this plan is usable once the
            // controller chain is done.
            let restarts_via = plans
                .iter()
                .any(|q| self.hosts[q.idx].id == via && q.decision.restarts());
            let ready = if vias.joined.contains(&via) || restarts_via {
                gate
            } else {
                controller_ready
            };
            let s = b.push(p.idx, &h.id, StepKind::JoinWorker { via }, [prev, ready]);
            b.push(p.idx, &h.id, StepKind::RecordHost, [Some(s)]);
        }
        // Workers leaving.
        for p in sorted(&|p| !ctrl(p) && matches!(p.decision, Decision::Remove { .. })) {
            self.build_removal(&mut b, &mut quorum, &mut gate, p, &mut vias)?;
        }
        // Worker restarts in batches of worker_disruption_percent, after every controller.
        let restarts = sorted(&|p| !ctrl(p) && p.decision.restarts());
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
                self.build_prep(&mut b, p);
                let prev = b.last.get(&p.idx).copied();
                let kind = self.restart_kind(p);
                let deps: Vec<Option<usize>> = prev_batch
                    .iter()
                    .map(|x| Some(*x))
                    .chain([prev, controllers_done])
                    .collect();
                let s = b.push(p.idx, &h.id, kind, deps);
                let r = b.push(p.idx, &h.id, StepKind::RecordHost, [Some(s)]);
                this_batch.push(r);
            }
            prev_batch = this_batch;
        }
        // Adopted hosts: record only.
        for p in sorted(&|p| matches!(p.decision, Decision::Adopt)) {
            let h = &self.hosts[p.idx];
            b.push(p.idx, &h.id, StepKind::RecordHost, [None]);
        }
        // Files of hosts with nothing else to do (or only adopted): on their own.
        for p in sorted(&|p| {
            !p.files.is_empty() && matches!(p.decision, Decision::Files | Decision::Adopt)
        }) {
            self.push_files(&mut b, p);
        }
        let summary = quorum.summary();
        Ok((b.steps, b.owner, summary))
    }

    fn restart_kind(&self, p: &HostPlan) -> StepKind {
        match &p.decision {
            Decision::Upgrade { from, to, .. } => StepKind::Upgrade {
                from: from.clone(),
                to: to.clone(),
            },
            _ => StepKind::Reconfigure,
        }
    }

    fn existing_objects(&self, h: &HostCtx) -> Vec<ObjectKind> {
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

    /// Reset leftovers, upload the binary, write the config: what a host needs before
    /// join/upgrade/reconfigure.
    fn build_prep(&self, b: &mut Builder, p: &HostPlan) {
        let h = &self.hosts[p.idx];
        let reset = match &p.decision {
            Decision::Add { reset, .. }
            | Decision::Rejoin { reset, .. }
            | Decision::Replace { reset, .. } => reset.clone(),
            _ => None,
        };
        if let Some(mid) = reset {
            let prev = b.last.get(&p.idx).copied();
            b.push(
                p.idx,
                &h.id,
                StepKind::ResetHost { machine_id: mid },
                [prev],
            );
        }
        let upload = match &p.decision {
            Decision::Upgrade { .. } => true,
            d => d.installs(),
        };
        if upload && let Some(bin) = self.desired.local_binary(&h.id) {
            let prev = b.last.get(&p.idx).copied();
            b.push(
                p.idx,
                &h.id,
                StepKind::UploadBinary {
                    sha256: bin.sha256.clone(),
                    version: bin.version.clone(),
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
            let prev = b.last.get(&p.idx).copied();
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
        let prev = b.last.get(&p.idx).copied();
        b.push(
            p.idx,
            &self.hosts[p.idx].id,
            StepKind::UploadFiles {
                files: p.files.clone(),
            },
            [prev],
        );
    }

    /// Drain, remove the member (quorum-checked, gated, and checked against its EtcdMember object,
    /// so the objects go after it: a removed member can no longer recreate them), delete the
    /// objects, reset, forget.
    fn build_removal(
        &self,
        b: &mut Builder,
        quorum: &mut QuorumSim,
        gate: &mut Option<usize>,
        p: &HostPlan,
        vias: &mut ViaPicker,
    ) -> Result<(), Refusal> {
        let h = &self.hosts[p.idx];
        let Decision::Remove { member, reset } = &p.decision else {
            return Ok(());
        };
        let name = h.name();
        // Quorum first: "would leave 0 healthy" says more than "nobody to act through".
        if let Some(m) = member {
            quorum.remove(&m.member_id, &m.peer_url, &name)?;
        }
        let via = vias.for_subject(&h.id, &name)?;
        // The controller acted through may have joined in this plan: wait for the chain.
        let mut first_dep = *gate;
        if h.role().has_node()
            && self.spec.options.drain.enabled
            && self.cluster.nodes.contains_key(&name)
        {
            b.push(
                p.idx,
                &h.id,
                StepKind::Drain {
                    node: name.clone(),
                    via: via.clone(),
                },
                [first_dep.take()],
            );
        }
        if let Some(m) = member {
            let prev = b.last.get(&p.idx).copied();
            let rm = b.push(
                p.idx,
                &h.id,
                StepKind::RemoveMember {
                    member_id: m.member_id.clone(),
                    peer_url: m.peer_url.clone(),
                    via: via.clone(),
                },
                [prev, *gate],
            );
            let w = b.push(
                p.idx,
                &h.id,
                StepKind::WaitHealthy { via: via.clone() },
                [Some(rm)],
            );
            *gate = Some(w);
        }
        let objects = self.existing_objects(h);
        if !objects.is_empty() {
            let prev = b.last.get(&p.idx).copied();
            let del = b.push(
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
                *gate = Some(del);
            }
        }
        vias.removed.insert(h.id.clone());
        if let Some(mid) = reset {
            let prev = b.last.get(&p.idx).copied();
            b.push(
                p.idx,
                &h.id,
                StepKind::ResetHost {
                    machine_id: mid.clone(),
                },
                [prev],
            );
        }
        if h.state.is_some() {
            let prev = b.last.get(&p.idx).copied();
            b.push(p.idx, &h.id, StepKind::ForgetHost, [prev]);
        }
        Ok(())
    }

    /// The indented lines under a host in the plan text, derived from its steps.
    fn details(&self, p: &HostPlan, steps: &[Step]) -> Vec<Detail> {
        let h = &self.hosts[p.idx];
        let name_of = |id: &HostId| -> String {
            self.hosts
                .iter()
                .find(|x| &x.id == id)
                .map(|x| x.name())
                .unwrap_or_else(|| id.to_string())
        };
        let d = |sign: char, text: String| Detail { sign, text };
        let mut out = Vec::new();
        let own: Vec<&Step> = steps.iter().filter(|s| s.host == h.id).collect();
        let mut installed = None;
        let mut config = false;
        for s in &own {
            match &s.kind {
                StepKind::UploadBinary { sha256, version } => {
                    installed = Some(format!(
                        "k0s {}uploaded (sha256 {})",
                        version
                            .as_deref()
                            .map(|v| format!("{v} "))
                            .unwrap_or_default(),
                        short(sha256)
                    ));
                }
                StepKind::WriteConfig { .. } => config = true,
                _ => {}
            }
        }
        let flush = |out: &mut Vec<Detail>, installed: &mut Option<String>, config: &mut bool| {
            match (installed.take(), *config) {
                (Some(i), true) => out.push(d('+', format!("{i}, config written"))),
                (Some(i), false) => out.push(d('+', i)),
                (None, true) => out.push(d('~', format!("{} rewritten", desired::CONFIG_FILE))),
                (None, false) => {}
            }
            *config = false;
        };
        let mut flushed = false;
        for s in &own {
            match &s.kind {
                StepKind::RemoveMember {
                    member_id,
                    peer_url,
                    via,
                } => out.push(d(
                    '-',
                    format!(
                        "etcd member {member_id} ({peer_url}), removed via {}",
                        name_of(via)
                    ),
                )),
                StepKind::Drain { node, via } => {
                    let deleted = own.iter().any(|x| {
                        matches!(&x.kind, StepKind::DeleteObjects { node: n, objects, .. }
                            if n == node && objects.contains(&ObjectKind::Node))
                    });
                    let what = if deleted {
                        "drained and deleted"
                    } else {
                        "drained"
                    };
                    out.push(d(
                        '-',
                        format!("Node \"{node}\" {what} via {}", name_of(via)),
                    ))
                }
                StepKind::DeleteObjects { node, objects, via } => {
                    let drained = own
                        .iter()
                        .any(|x| matches!(&x.kind, StepKind::Drain { node: n, .. } if n == node));
                    let rest: Vec<ObjectKind> = objects
                        .iter()
                        .copied()
                        .filter(|o| !(drained && *o == ObjectKind::Node))
                        .collect();
                    if !rest.is_empty() {
                        out.push(d(
                            '-',
                            format!(
                                "{} \"{node}\", deleted via {}",
                                object_list(&rest),
                                name_of(via)
                            ),
                        ))
                    }
                }
                StepKind::UploadFiles { files } => {
                    // After the binary and the config, before k0s starts.
                    flush(&mut out, &mut installed, &mut config);
                    flushed = true;
                    let list: Vec<String> = files
                        .iter()
                        .map(|f| {
                            let owner = match (&f.user, &f.group) {
                                (None, None) => String::new(),
                                (Some(u), None) => format!(", owner {u}"),
                                (None, Some(g)) => format!(", group {g}"),
                                (Some(u), Some(g)) => format!(", {u}:{g}"),
                            };
                            format!("{} ({}{owner})", f.remote, crate::files::mode_text(f.mode))
                        })
                        .collect();
                    out.push(d('~', format!("files uploaded: {}", list.join(", "))))
                }
                StepKind::RunHooks {
                    action,
                    stage,
                    lines,
                } => {
                    // Only apply.before runs before the upload and the config.
                    if !(action == "apply" && stage == "before") {
                        flush(&mut out, &mut installed, &mut config);
                        flushed = true;
                    }
                    out.push(d(
                        '>',
                        format!("hooks {action}.{stage} run: {}", lines.join(" ; ")),
                    ))
                }
                StepKind::ResetHost { machine_id } => out.push(d(
                    '-',
                    format!(
                        "k0s stopped and reset on {} (machine-id {})",
                        h.name(),
                        short(machine_id)
                    ),
                )),
                StepKind::Bootstrap => {
                    flush(&mut out, &mut installed, &mut config);
                    flushed = true;
                    out.push(d(
                        '+',
                        "bootstraps a new cluster as its first controller".into(),
                    ));
                }
                StepKind::JoinController { via } => {
                    flush(&mut out, &mut installed, &mut config);
                    flushed = true;
                    out.push(d(
                        '+',
                        format!(
                            "joins the cluster as {} (token from {})",
                            h.role(),
                            name_of(via)
                        ),
                    ));
                }
                StepKind::JoinWorker { via } => {
                    flush(&mut out, &mut installed, &mut config);
                    flushed = true;
                    out.push(d(
                        '+',
                        format!("joins the cluster as worker (token from {})", name_of(via)),
                    ));
                }
                StepKind::Upgrade { from, to } => {
                    flush(&mut out, &mut installed, &mut config);
                    flushed = true;
                    let how = if h.role().is_controller() {
                        "controllers one at a time".to_string()
                    } else {
                        let restarts = steps
                            .iter()
                            .filter(|s| {
                                matches!(s.kind, StepKind::Upgrade { .. } | StepKind::Reconfigure)
                                    && self
                                        .hosts
                                        .iter()
                                        .any(|x| x.id == s.host && !x.role().is_controller())
                            })
                            .count();
                        let batch = worker_batch_size(
                            restarts,
                            self.spec.options.worker_disruption_percent,
                            self.spec.options.concurrency_limit,
                        );
                        format!("workers {batch} at a time")
                    };
                    out.push(d(
                        '~',
                        format!(
                            "k0s {} → {to}, reinstalled and restarted ({how})",
                            from.as_deref().unwrap_or("none")
                        ),
                    ));
                }
                StepKind::Reconfigure => {
                    flush(&mut out, &mut installed, &mut config);
                    flushed = true;
                    out.push(d(
                        '~',
                        "service reinstalled with the spec's flags and restarted".into(),
                    ));
                }
                StepKind::RecordHost if matches!(p.decision, Decision::Adopt) => {
                    let f = h.facts().cloned().unwrap_or_default();
                    let mid = self.member_of(&h.id).and_then(|m| m.member_id.clone());
                    out.push(d('+', identity_text(&f, mid.as_deref())));
                }
                StepKind::ForgetHost => {
                    if let Decision::Remove { reset: None, .. } = &p.decision {
                        out.push(d(
                            '!',
                            "not reset: unreachable, or no longer the recorded machine".into(),
                        ));
                    }
                    out.push(d('-', "forgotten in the state".into()))
                }
                _ => {}
            }
        }
        if !flushed {
            flush(&mut out, &mut installed, &mut config);
        }
        out
    }
}

fn identity_text(f: &HostFacts, member_id: Option<&str>) -> String {
    let mut s = format!(
        "recorded in state: machine-id {}, host key {}",
        short(&f.machine_id),
        short_key(&f.host_key)
    );
    if let Some(m) = member_id {
        s.push_str(&format!(", etcd member {m}"));
    }
    if let Some(v) = f.status.as_ref().map(|s| &s.version) {
        s.push_str(&format!(", k0s {v}"));
    }
    s
}

fn object_list(objects: &[ObjectKind]) -> String {
    let names: Vec<&str> = objects
        .iter()
        .map(|o| match o {
            ObjectKind::Node => "Node",
            ObjectKind::EtcdMember => "EtcdMember",
            ObjectKind::ControlNode => "ControlNode",
        })
        .collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

fn host_key_refusal(h: &HostCtx, expected: &str, offered: &str) -> Refusal {
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

/// Steps that run commands on their own host (not through a controller on its behalf, and not
/// just reading it).
fn runs_on_host(kind: &StepKind) -> bool {
    matches!(
        kind,
        StepKind::UploadBinary { .. }
            | StepKind::UploadFiles { .. }
            | StepKind::WriteConfig { .. }
            | StepKind::Bootstrap
            | StepKind::JoinController { .. }
            | StepKind::JoinWorker { .. }
            | StepKind::ResetHost { .. }
            | StepKind::Upgrade { .. }
            | StepKind::Reconfigure
    )
}

fn merge_refusals(mut refusals: Vec<Refusal>) -> Refusal {
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

/// How many workers restart at once: `workerDisruptionPercent` of them, at least one, at most
/// the concurrency limit. (k0sctl divides the percentage by 100 in integers first, which makes
/// every batch a single worker.)
pub fn worker_batch_size(workers: usize, percent: u32, limit: usize) -> usize {
    let n = workers * percent as usize / 100;
    let n = n.max(1);
    if limit > 0 { n.min(limit) } else { n }
}

/// Chooses the controller a step acts through: one this plan leaves alone if possible, else one
/// that joined earlier in the plan, else any healthy one that is not the subject and not removed.
struct ViaPicker {
    base: Option<HostId>,
    joined: Vec<HostId>,
    removed: BTreeSet<HostId>,
    fallback: Vec<HostId>,
}

impl ViaPicker {
    fn for_subject(&self, subject: &HostId, name: &str) -> Result<HostId, Refusal> {
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

/// Steps under construction: every edge points to an earlier step, so the graph is acyclic by
/// construction and insertion order is a topological order.
#[derive(Default)]
struct Builder {
    steps: Vec<Step>,
    /// step id → index of the host plan that owns it.
    owner: BTreeMap<usize, usize>,
    /// host plan index → its latest step.
    last: BTreeMap<usize, usize>,
}

impl Builder {
    fn push(
        &mut self,
        owner: usize,
        host: &HostId,
        kind: StepKind,
        after: impl IntoIterator<Item = Option<usize>>,
    ) -> usize {
        let id = self.steps.len();
        let mut after: Vec<usize> = after.into_iter().flatten().filter(|a| *a < id).collect();
        after.sort_unstable();
        after.dedup();
        self.steps.push(Step {
            id,
            host: host.clone(),
            kind,
            after,
        });
        self.owner.insert(id, owner);
        self.last.insert(owner, id);
        id
    }
}

/// Replays the membership changes in order and refuses the first that would leave fewer
/// healthy members than quorum.
struct QuorumSim {
    /// (member id or peer URL, healthy)
    members: Vec<(String, String, bool)>,
    before: usize,
    min_healthy: usize,
    max_quorum: usize,
    changed: bool,
}

impl QuorumSim {
    fn new(members: &[Member]) -> Self {
        let members: Vec<(String, String, bool)> = members
            .iter()
            .map(|m| {
                (
                    m.member_id.clone().unwrap_or_default(),
                    m.peer_url.clone(),
                    m.healthy,
                )
            })
            .collect();
        let n = members.len();
        let healthy = members.iter().filter(|m| m.2).count();
        QuorumSim {
            before: n,
            min_healthy: healthy,
            max_quorum: if n == 0 { 0 } else { quorum(n) },
            members,
            changed: false,
        }
    }
    fn healthy(&self) -> usize {
        self.members.iter().filter(|m| m.2).count()
    }
    fn check_start(&self, what: &str) -> Result<(), Refusal> {
        let n = self.members.len();
        if n > 0 && self.healthy() < quorum(n) {
            return Err(Refusal {
                kind: RefusalKind::Quorum,
                message: format!(
                    "etcd has {} healthy of {n} members; quorum is {}: {what} is not possible",
                    self.healthy(),
                    quorum(n)
                ),
                details: vec![format!(
                    "{} healthy < quorum {} of {n} members",
                    self.healthy(),
                    quorum(n)
                )],
            });
        }
        Ok(())
    }
    fn remove(&mut self, member_id: &str, peer_url: &str, name: &str) -> Result<(), Refusal> {
        self.check_start(&format!("removing {name}"))?;
        let Some(pos) = self
            .members
            .iter()
            .position(|m| same_member_id(&m.0, member_id) || peer_key(&m.1) == peer_key(peer_url))
        else {
            return Ok(());
        };
        let was_healthy = self.members[pos].2;
        let n = self.members.len() - 1;
        let healthy = self.healthy() - usize::from(was_healthy);
        if n == 0 || healthy < quorum(n) {
            let q = if n == 0 { 1 } else { quorum(n) };
            return Err(Refusal {
                kind: RefusalKind::Quorum,
                message: format!(
                    "removing {name} would leave {healthy} healthy of {n} members; quorum is {q}"
                ),
                details: vec![format!(
                    "{} members now, {} healthy; {name} is {}; after: {n} members, {healthy} healthy, quorum {q}",
                    n + 1,
                    self.healthy(),
                    if was_healthy { "healthy" } else { "down" }
                )],
            });
        }
        self.members.remove(pos);
        self.changed = true;
        self.min_healthy = self.min_healthy.min(healthy);
        self.max_quorum = self.max_quorum.max(quorum(n));
        Ok(())
    }
    fn join(&mut self, name: &str, bootstrap: bool) -> Result<(), Refusal> {
        if !bootstrap {
            self.check_start(&format!("adding {name}"))?;
            let n = self.members.len() + 1;
            let healthy = self.healthy();
            // etcd refuses to add while a voter is down (strict reconfig check), and the new
            // member only helps once it runs: dead members must be removed first.
            let down = self.members.len() - healthy;
            if down > 0 || healthy + 1 < quorum(n) {
                return Err(Refusal {
                    kind: RefusalKind::Quorum,
                    message: format!(
                        "adding {name} would make {n} members of which {} can be healthy; quorum is {}{}",
                        healthy + 1,
                        quorum(n),
                        if down > 0 {
                            format!(" and {down} existing member(s) are down")
                        } else {
                            String::new()
                        }
                    ),
                    details: vec![format!(
                        "{} members now, {healthy} healthy; after adding {name}: {n} members, quorum {}",
                        n - 1,
                        quorum(n)
                    )],
                });
            }
            // Between the member add and its start, etcd counts it as a down voter.
            self.min_healthy = self.min_healthy.min(healthy);
            self.max_quorum = self.max_quorum.max(quorum(n));
        } else {
            self.max_quorum = self.max_quorum.max(1);
            if self.members.is_empty() {
                self.min_healthy = 0;
            }
        }
        self.members
            .push((String::new(), format!("new:{name}"), true));
        self.changed = true;
        Ok(())
    }

    /// A member restarting (upgrade, reconfigure) is down until it is back.
    fn restart(&mut self) {
        let n = self.members.len();
        if n == 0 {
            return;
        }
        self.min_healthy = self.min_healthy.min(self.healthy().saturating_sub(1));
        self.max_quorum = self.max_quorum.max(quorum(n));
    }

    fn summary(&self) -> QuorumSummary {
        QuorumSummary {
            members_before: self.before,
            members_after: self.members.len(),
            min_healthy: if self.changed || self.before > 0 {
                self.min_healthy
            } else {
                0
            },
            quorum: self.max_quorum,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically() {
        assert!(version_key("v1.33.4+k0s.0") < version_key("v1.33.10+k0s.0"));
        assert!(version_key("v1.33.4+k0s.0") < version_key("v1.33.4+k0s.1"));
        assert_eq!(version_key("v1.33.4-rc.1+k0s.0"), Some((1, 33, 4, 0)));
        assert_eq!(version_key("garbage"), None);
    }

    #[test]
    fn worker_batches_use_the_percentage() {
        assert_eq!(worker_batch_size(20, 10, 30), 2);
        assert_eq!(worker_batch_size(5, 10, 30), 1);
        assert_eq!(worker_batch_size(100, 50, 30), 30);
        assert_eq!(worker_batch_size(4, 50, 0), 2);
    }

    #[test]
    fn quorum_arithmetic_in_refusal() {
        let m = |id: &str, healthy| Member {
            name: id.into(),
            peer_url: format!("https://{id}:2380"),
            member_id: Some(id.into()),
            host: None,
            healthy,
            seen_by: vec![],
        };
        let mut q = QuorumSim::new(&[m("c1", true), m("c2", true), m("c3", false)]);
        let r = q.remove("c2", "https://c2:2380", "c2").unwrap_err();
        assert_eq!(
            r.message,
            "removing c2 would leave 1 healthy of 2 members; quorum is 2"
        );
        assert_eq!(r.exit_code(), 3);
        // A dead member can go: 2 members, 2 healthy.
        q.remove("c3", "https://c3:2380", "c3").unwrap();
        assert_eq!(q.summary().members_after, 2);
    }
}
