//! The hosts a plan considers: every host the spec or the state names, each with what the spec
//! wants, what the state recorded and what the probe found, and the names and etcd peer
//! addresses derived from them.

use crate::hostid::HostId;
use crate::plan::model::PlanOptions;
use crate::reality::{HostFacts, Probe, Reality};
use crate::spec::{HostSpec, Role, Spec};
use crate::state::{HostState, State};
use std::collections::{BTreeMap, BTreeSet};

/// Everything known about one host, from whichever inputs name it.
pub(super) struct HostCtx<'a> {
    pub(super) id: HostId,
    pub(super) spec: Option<&'a HostSpec>,
    pub(super) state: Option<&'a HostState>,
    pub(super) probe: Option<&'a Probe>,
    pub(super) excluded: bool,
    /// The recorded address this host moved from (`plan::moves`): `state` is that record.
    pub(super) moved_from: Option<HostId>,
}

impl<'a> HostCtx<'a> {
    pub(super) fn role(&self) -> Role {
        self.spec
            .map(|s| s.role)
            .or(self.state.map(|s| s.role))
            .unwrap_or(Role::Worker)
    }
    pub(super) fn facts(&self) -> Option<&'a HostFacts> {
        match self.probe {
            Some(Probe::Reached(f)) => Some(f),
            _ => None,
        }
    }
    /// The node (and etcd member) name: the spec's hostname, else what the host says, else the
    /// state's record, else the address. A host being removed (only in the state, or `reset:
    /// true`) goes by the state's record first: a host can rename itself, and its removal must
    /// drain and delete what k0sform recorded, not whatever name it reports now.
    pub(super) fn name(&self) -> String {
        if let Some(h) = self.spec.and_then(|s| s.node_name()) {
            return h;
        }
        if self.spec.is_none_or(|s| s.reset)
            && let Some(n) = self.state.and_then(|s| s.node_name.as_ref())
        {
            return n.clone();
        }
        if let Some(f) = self.facts().filter(|f| !f.hostname.is_empty()) {
            return f.hostname.to_lowercase();
        }
        if let Some(n) = self.state.and_then(|s| s.node_name.as_ref()) {
            return n.clone();
        }
        self.id.address.clone()
    }
    /// The name this host reports about itself, when that is the name it goes by (no spec
    /// hostname, not overridden by the state's record).
    pub(super) fn reported_name(&self) -> Option<String> {
        if self.spec.is_some_and(|s| s.node_name().is_some()) {
            return None;
        }
        let f = self.facts().filter(|f| !f.hostname.is_empty())?;
        let reported = f.hostname.to_lowercase();
        (self.name() == reported).then_some(reported)
    }
    /// Every name this host is known by: the spec's hostname and the state's record.
    pub(super) fn known_names(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(h) = self.spec.and_then(|s| s.node_name()) {
            v.push(h);
        }
        if let Some(n) = self.state.and_then(|s| s.node_name.as_ref()) {
            v.push(n.to_lowercase());
        }
        v
    }
    /// The etcd peer addresses this host has (or would have), as [`peer_key`]s.
    pub(super) fn peer_keys(&self) -> Vec<String> {
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
    pub(super) fn in_spec(&self) -> bool {
        self.spec.is_some_and(|s| !s.reset)
    }
    /// Where k0s's binary is on the host: the spec's `k0sInstallPath`, else the path recorded
    /// for it (where the probe looked and the executor acts).
    pub(super) fn install_path(&self) -> String {
        match self.spec {
            Some(s) => s.k0s_install_path.clone(),
            None => HostState::k0s_paths(self.state).0,
        }
    }
}

/// A peer URL without its scheme (`10.0.0.1:2380`): k0s speaks https to its peers, test
/// doubles may speak http, and the member is the same either way.
pub(super) fn peer_key(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    rest.trim_end_matches('/').to_string()
}

pub(super) fn peer_url(addr: &str) -> String {
    if addr.contains(':') {
        format!("https://[{addr}]:2380")
    } else {
        format!("https://{addr}:2380")
    }
}

pub(super) fn collect_hosts<'a>(
    spec: &'a Spec,
    state: &'a State,
    reality: &'a Reality,
    opts: &PlanOptions,
    moves: &[crate::plan::moves::Move],
) -> Vec<HostCtx<'a>> {
    // Sorted and deduplicated as one list: a tree set of 100,000 ids was a visible share of
    // the 50,000-host plan, growing faster than the host count.
    let mut ids: Vec<HostId> = Vec::with_capacity(spec.hosts.len() + state.hosts.len());
    ids.extend(spec.hosts.iter().map(|h| h.id()));
    ids.extend(state.hosts.iter().map(|h| h.id()));
    ids.sort_unstable();
    ids.dedup();
    // Indexed once (first entry wins, as `find` does): a scan of each list per host made
    // 5,000-host plans quadratic.
    let by_spec = spec.host_index();
    let by_state = state.host_index();
    let by_probe = reality.probe_index();
    // A moved host's record goes with it to its new address; its old address is not a host of
    // this plan any more (it is unreachable, or another machine k0sform never recorded there,
    // or the same machine by another address: nothing there may be removed or reset).
    let mut moved_to: BTreeMap<&HostId, &crate::plan::moves::Move> = BTreeMap::new();
    let mut moved_from: BTreeSet<&HostId> = BTreeSet::new();
    for m in moves {
        moved_from.insert(&m.from);
        moved_to.entry(&m.to).or_insert(m);
    }
    ids.retain(|id| !moved_from.contains(id));
    ids.into_iter()
        .map(|id| {
            let moved = moved_to.get(&id);
            let state = match moved {
                Some(m) => by_state.get(&m.from),
                None => by_state.get(&id),
            };
            HostCtx {
                spec: by_spec.get(&id),
                state,
                probe: by_probe.get(&id),
                excluded: opts.is_excluded(&id),
                moved_from: moved.map(|m| m.from.clone()),
                id,
            }
        })
        .collect()
}
