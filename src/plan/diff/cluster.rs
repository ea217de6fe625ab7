//! Which cluster the plan manages (rules 1-4 of the decision table): every running controller's
//! answer is grouped by identity, split brain and lost clusters are refused, and the agreeing
//! views are merged into the members, Nodes and ControlNodes the per-host decisions work from.

use super::Planner;
use super::hosts::{HostCtx, peer_key};
use crate::hash::short;
use crate::hostid::HostId;
use crate::plan::model::{ClusterAction, PlanOptions, Refusal, RefusalKind};
use crate::reality::{ClusterView, Probe};
use crate::spec::Spec;
use crate::state::State;
use std::collections::{BTreeMap, BTreeSet};

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

/// Running controllers grouped by the identity they answer with.
type Groups<'h, 'a> = BTreeMap<Identity, Vec<&'h HostCtx<'a>>>;

/// One etcd member of the managed cluster, merged from every agreeing controller's view.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) name: String,
    pub(super) peer_url: String,
    pub(super) member_id: Option<String>,
    /// The spec/state host this member belongs to.
    pub(super) host: Option<HostId>,
    /// Its host runs a controller that answers with the cluster's identity.
    pub(super) healthy: bool,
    pub(super) seen_by: Vec<HostId>,
}

/// The cluster-level decision (rules 1-4) and the facts per-host decisions need.
pub(super) struct ClusterCtx {
    pub(super) action: ClusterAction,
    pub(super) uid: Option<String>,
    pub(super) members: Vec<Member>,
    /// Running controllers that answer with the managed identity.
    pub(super) healthy: BTreeSet<HostId>,
    /// Controllers that answer with another identity (only when named by `-replace`).
    pub(super) foreign: BTreeSet<HostId>,
    pub(super) nodes: BTreeMap<String, Vec<HostId>>,
    /// Each Node's InternalIP addresses, as the agreeing controllers list them.
    pub(super) node_ips: BTreeMap<String, BTreeSet<String>>,
    /// Nodes whose Ready condition is True (a kubelet posts their status).
    pub(super) ready_nodes: BTreeSet<String>,
    pub(super) control_nodes: BTreeSet<String>,
    /// Every agreeing controller answered every query (no partial views).
    pub(super) nodes_complete: bool,
}

impl ClusterCtx {
    /// The host rule 4 bootstraps the cluster on, if it does.
    pub(super) fn bootstrap_host(&self) -> Option<&HostId> {
        match &self.action {
            ClusterAction::Bootstrap { host } => Some(host),
            _ => None,
        }
    }
}

/// Member IDs are hex without padding (`%x`); compare them as numbers so `0a1f` and `a1f` agree.
pub(super) fn same_member_id(a: &str, b: &str) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    match (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.eq_ignore_ascii_case(b),
    }
}

pub(super) fn identify_cluster(
    spec: &Spec,
    state: &State,
    hosts: &[HostCtx],
    opts: &PlanOptions,
) -> Result<ClusterCtx, Refusal> {
    let mut groups = views_by_identity(hosts);
    merge_partial_views(&mut groups);
    let good = managed_identity(state, hosts, &groups, opts)?;
    let foreign = foreign_controllers(hosts, &groups, good.as_ref(), opts)?;
    match good {
        Some(good_id) => Ok(managed_cluster(state, hosts, &groups, good_id, foreign)),
        // Rule 4: nothing of ours runs anywhere.
        None => bootstrap_cluster(spec, hosts, &groups, foreign, opts),
    }
}

fn views_by_identity<'h, 'a>(hosts: &'h [HostCtx<'a>]) -> Groups<'h, 'a> {
    let mut groups: Groups = BTreeMap::new();
    // Only controllers (by the spec or the state, not by what a host says of itself) speak for
    // the cluster: a worker's answer is no vote in split-brain detection.
    for h in hosts
        .iter()
        .filter(|h| !h.excluded && h.role().is_controller())
    {
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
    groups
}

/// A view whose uid query failed but whose member list matches a complete answer agrees
/// with it: a failed kubectl call is not a second cluster.
fn merge_partial_views(groups: &mut Groups) {
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
}

/// One line per controller for a refusal: what it answered, or why it could not.
fn who_sees_what(hosts: &[HostCtx], groups: &Groups) -> Vec<String> {
    let mut peer_names: BTreeMap<String, String> = BTreeMap::new();
    for h in hosts {
        for p in h.peer_keys() {
            peer_names.insert(p, h.name());
        }
    }
    let mut lines = Vec::new();
    for h in hosts
        .iter()
        .filter(|h| h.role().is_controller() && !h.excluded)
    {
        let line = match h.probe {
            None => "not probed".to_string(),
            Some(Probe::Unreachable { error }) => format!("unreachable ({error})"),
            Some(Probe::K0sNotAnswering { .. }) => "k0s not answering".to_string(),
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
}

/// Pick the managed identity: the state's uid when there is one; otherwise the one group
/// that is not entirely named by -replace.
fn managed_identity(
    state: &State,
    hosts: &[HostCtx],
    groups: &Groups,
    opts: &PlanOptions,
) -> Result<Option<Identity>, Refusal> {
    let replaced = |hs: &Vec<&HostCtx>| hs.iter().all(|h| opts.is_replaced(&h.id));
    match state.cluster.as_ref().map(|c| c.uid.clone()) {
        Some(uid) => {
            let mut candidates: Vec<(&Identity, &Vec<&HostCtx>)> = groups
                .iter()
                .filter(|(id, _)| id.uid.as_deref() == Some(uid.as_str()))
                .collect();
            // Largest agreeing group first; ties by identity order (deterministic).
            candidates.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
            match candidates.first() {
                Some((id, _)) => Ok(Some((*id).clone())),
                None => Err(Refusal {
                    kind: RefusalKind::NoController,
                    message: format!(
                        "the state names cluster \"{}\" (identity {}), but none of its controllers answers; \
                         refusing to plan (a new cluster is never bootstrapped over a known one)",
                        state
                            .cluster
                            .as_ref()
                            .map(|c| c.name.as_str())
                            .unwrap_or(""),
                        short(&uid)
                    ),
                    details: who_sees_what(hosts, groups),
                }),
            }
        }
        None => {
            let unreplaced: Vec<&Identity> = groups
                .iter()
                .filter(|(_, hs)| !replaced(hs))
                .map(|(id, _)| id)
                .collect();
            match unreplaced.len() {
                0 => Ok(None),
                1 => Ok(Some(unreplaced[0].clone())),
                _ => Err(Refusal {
                    kind: RefusalKind::SplitBrain,
                    message: format!(
                        "running controllers disagree on what the cluster is ({} different answers); \
                         refusing to plan",
                        unreplaced.len()
                    ),
                    details: who_sees_what(hosts, groups),
                }),
            }
        }
    }
}

/// The running controllers outside the managed group; everyone of them must be named by
/// -replace. Without a managed group, every running controller is foreign.
fn foreign_controllers(
    hosts: &[HostCtx],
    groups: &Groups,
    good: Option<&Identity>,
    opts: &PlanOptions,
) -> Result<BTreeSet<HostId>, Refusal> {
    let mut foreign = BTreeSet::new();
    let Some(good_id) = good else {
        foreign.extend(groups.values().flatten().map(|h| h.id.clone()));
        return Ok(foreign);
    };
    let mut disagree = false;
    for (id, hs) in groups {
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
            details: who_sees_what(hosts, groups),
        });
    }
    Ok(foreign)
}

/// Rule 4: bootstrap on the first reachable controller of the spec that runs no other cluster.
fn bootstrap_cluster(
    spec: &Spec,
    hosts: &[HostCtx],
    groups: &Groups,
    foreign: BTreeSet<HostId>,
    opts: &PlanOptions,
) -> Result<ClusterCtx, Refusal> {
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
            message: "no controller of the spec is reachable to bootstrap the cluster on".into(),
            details: who_sees_what(hosts, groups),
        });
    };
    Ok(ClusterCtx {
        action: ClusterAction::Bootstrap { host: first.id() },
        uid: None,
        members: Vec::new(),
        healthy: BTreeSet::new(),
        foreign,
        nodes: BTreeMap::new(),
        node_ips: BTreeMap::new(),
        ready_nodes: BTreeSet::new(),
        control_nodes: BTreeSet::new(),
        nodes_complete: true,
    })
}

/// Rules 1 and 3: the cluster the agreeing controllers describe, adopted when the state has
/// none yet.
fn managed_cluster(
    state: &State,
    hosts: &[HostCtx],
    groups: &Groups,
    good_id: Identity,
    foreign: BTreeSet<HostId>,
) -> ClusterCtx {
    let known_uid = state.cluster.as_ref().map(|c| c.uid.clone());
    let agreeing: Vec<&HostCtx> = groups.get(&good_id).cloned().unwrap_or_default();
    let healthy: BTreeSet<HostId> = agreeing.iter().map(|h| h.id.clone()).collect();
    let mut members: BTreeMap<String, Member> = BTreeMap::new();
    let mut nodes: BTreeMap<String, Vec<HostId>> = BTreeMap::new();
    let mut node_ips: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut ready_nodes = BTreeSet::new();
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
            node_ips
                .entry(n.name.clone())
                .or_default()
                .extend(n.internal_ips.iter().cloned());
            if n.ready {
                ready_nodes.insert(n.name.clone());
            }
        }
        control_nodes.extend(view.control_nodes.iter().cloned());
    }
    for m in members.values_mut() {
        if let Some(o) = member_owner(hosts, m) {
            m.host = Some(o.id.clone());
            m.healthy = healthy.contains(&o.id);
        }
    }
    ClusterCtx {
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
        node_ips,
        ready_nodes,
        control_nodes,
        nodes_complete: agreeing.iter().all(|h| {
            h.facts()
                .and_then(|f| f.view.as_ref())
                .is_some_and(|v| v.errors.is_empty())
        }),
    }
}

/// The host an etcd member belongs to. The spec is trusted and the state is data that can be
/// wrong (or written by someone else), so what the state records counts last: first a host of
/// the spec that answers with the member's peer address (`k0s status`), then one whose peer
/// address it is by the spec, then any other machine answering with it or at its address, and
/// only then a state record naming its peer URL or member ID. Within each, the first in the
/// order of `hosts` (sorted by id): a state entry whose address sorts first no longer takes a
/// live controller's member (which had that controller planned as having left the cluster).
fn member_owner<'h, 'a>(hosts: &'h [HostCtx<'a>], m: &Member) -> Option<&'h HostCtx<'a>> {
    let key = peer_key(&m.peer_url);
    let answers = |h: &&HostCtx| {
        h.facts()
            .and_then(|f| f.status.as_ref())
            .and_then(|s| s.peer_address.as_deref())
            .is_some_and(|p| peer_key(&super::hosts::peer_url(p)) == key)
    };
    // A controller answering at the member's address, k0s running there or not.
    let at = crate::k0s::peer_url_host(&m.peer_url);
    let answers_at =
        |h: &&HostCtx| h.role().is_controller() && h.facts().is_some() && h.id.address == at;
    let of_spec = |h: &&HostCtx| {
        h.spec
            .is_some_and(|s| peer_key(&super::hosts::peer_url(s.peer_address())) == key)
    };
    let recorded = |h: &&HostCtx| {
        h.state.and_then(|s| s.etcd.as_ref()).is_some_and(|e| {
            peer_key(&e.peer_url) == key
                || m.member_id
                    .as_deref()
                    .is_some_and(|id| same_member_id(id, &e.member_id))
        })
    };
    hosts
        .iter()
        .find(|h| h.spec.is_some() && answers(h))
        .or_else(|| hosts.iter().find(of_spec))
        .or_else(|| hosts.iter().find(|h| answers(h) || answers_at(h)))
        .or_else(|| hosts.iter().find(recorded))
}

/// `destroy` where no controller of the recorded cluster answers (all stopped, or reset by an
/// earlier, interrupted destroy): no membership to change, only hosts to reset.
pub(super) fn no_running_cluster(state: &State) -> ClusterCtx {
    ClusterCtx {
        action: ClusterAction::Existing,
        uid: state.cluster.as_ref().map(|c| c.uid.clone()),
        members: Vec::new(),
        healthy: BTreeSet::new(),
        foreign: BTreeSet::new(),
        nodes: BTreeMap::new(),
        node_ips: BTreeMap::new(),
        ready_nodes: BTreeSet::new(),
        control_nodes: BTreeSet::new(),
        nodes_complete: false,
    }
}

impl Planner<'_> {
    /// The cluster keeps its data in kine, not etcd: no member IDs, no quorum arithmetic. What
    /// the running controllers report decides (k0s resolves the type, `--single` included);
    /// with none running, the spec's storage type as k0sctl reads it.
    pub(super) fn kine(&self) -> bool {
        let mut running = self
            .hosts
            .iter()
            .filter(|h| self.cluster.healthy.contains(&h.id))
            .filter_map(|h| h.facts())
            .peekable();
        if running.peek().is_some() {
            running.any(|f| f.runs_kine())
        } else {
            crate::k0s::desired::storage_type(self.spec) == "kine"
        }
    }

    pub(super) fn member_of(&self, id: &HostId) -> Option<&Member> {
        self.cluster
            .members
            .iter()
            .find(|m| m.host.as_ref() == Some(id))
    }

    /// Is this running host part of the managed cluster right now?
    pub(super) fn in_cluster(&self, h: &HostCtx) -> bool {
        let Some(f) = h.facts() else { return false };
        if !f.is_running() {
            return false;
        }
        if h.role().is_controller() {
            // A kine controller has no etcd member: answering with the cluster's identity is
            // all there is to belonging.
            self.cluster.healthy.contains(&h.id)
                && (f.runs_kine() || self.member_of(&h.id).is_some())
        } else {
            // A worker has no view of its own: it belongs when a controller lists its Node.
            // When a Node query failed, a running worker is not taken for gone.
            self.cluster.nodes.contains_key(&h.name()) || !self.cluster.nodes_complete
        }
    }
}
