//! Address moves: a host of the spec that the state does not know at its address, but that
//! offers the machine-id AND the SSH host key of a host the state recorded at an address the
//! spec no longer names, is that recorded host at a new address (DHCP, re-IP). A host that
//! became (or stopped being) the `localhost` host has no two keys to compare: its machine-id,
//! read on this machine, decides (`transport::host_keys_differ`). Its record
//! follows it (node name, etcd member ID, identity), instead of a removal plus a join. Pure.

use super::model::PlanOptions;
use crate::hostid::HostId;
use crate::reality::{Probe, Reality};
use crate::spec::Spec;
use crate::state::State;
use std::collections::BTreeSet;

/// The recorded hosts that may have moved: their address left the spec, they are not
/// excluded, and they have a machine-id and a host key to be recognised by.
pub(super) fn gone_hosts<'a>(
    spec: &Spec,
    state: &'a State,
    opts: &PlanOptions,
) -> Vec<&'a crate::state::HostState> {
    // Looked up per host: a set, not `Spec::host` scans (those made every plan quadratic in
    // the number of hosts).
    let in_spec: BTreeSet<(&str, u16)> = spec
        .hosts
        .iter()
        .map(|h| (h.ssh.address.as_str(), h.ssh.port))
        .collect();
    state
        .hosts
        .iter()
        .filter(|h| !in_spec.contains(&(h.address.as_str(), h.port)) && !opts.is_excluded(&h.id()))
        .filter(|h| !h.machine_id.trim().is_empty() && !h.host_key.is_empty())
        .collect()
}

/// One recorded host found at a new address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    /// The recorded address (no longer in the spec).
    pub from: HostId,
    /// The spec's address where the recorded machine answered.
    pub to: HostId,
}

/// The moves of this plan, and warnings for matches that are not taken (ambiguous ones).
/// Only a match on both the machine-id and the host key counts: a machine-id alone is the
/// "host rebuilt / identity mismatch" path, and a host key alone can be a cloned image.
pub fn find_moves(
    spec: &Spec,
    state: &State,
    reality: &Reality,
    opts: &PlanOptions,
) -> (Vec<Move>, Vec<String>) {
    let mut warnings = Vec::new();
    let gone = gone_hosts(spec, state, opts);
    if gone.is_empty() {
        return (Vec::new(), warnings);
    }
    let in_state: BTreeSet<(&str, u16)> = state
        .hosts
        .iter()
        .map(|h| (h.address.as_str(), h.port))
        .collect();
    // The first probe of an address, as `Reality::get` finds it.
    let by_probe = reality.probe_index();
    let mut candidates: Vec<Move> = Vec::new();
    for sh in spec.hosts.iter().filter(|s| !s.reset) {
        let k = (sh.ssh.address.as_str(), sh.ssh.port);
        let id = sh.id();
        if in_state.contains(&k) || opts.is_excluded(&id) {
            continue;
        }
        let Some(Probe::Reached(f)) = by_probe.at(k.0, k.1) else {
            continue;
        };
        let matches: Vec<&&crate::state::HostState> = gone
            .iter()
            .filter(|g| {
                g.machine_id == f.machine_id.trim()
                    && !crate::transport::host_keys_differ(&g.host_key, &f.host_key)
            })
            .collect();
        match matches.as_slice() {
            [] => {}
            [g] if g.role == sh.role => candidates.push(Move {
                from: g.id(),
                to: id,
            }),
            [g] => warnings.push(format!(
                "{id} is the machine recorded at {} (same machine-id and host key), but the spec \
                 makes it a {} where it was a {}: not treated as a move",
                g.id(),
                sh.role,
                g.role
            )),
            many => warnings.push(format!(
                "{id} offers the machine-id and host key of several recorded hosts ({}): not \
                 treated as a move",
                many.iter()
                    .map(|g| g.id().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    // One recorded host cannot move to two addresses (a machine reachable at both).
    let mut moves = Vec::new();
    for m in &candidates {
        let mut targets: Vec<&Move> = candidates.iter().filter(|c| c.from == m.from).collect();
        targets.sort_by(|a, b| a.to.cmp(&b.to));
        if targets.len() == 1 {
            moves.push(m.clone());
        } else if candidates.iter().find(|c| c.from == m.from).map(|c| &c.to) == Some(&m.to) {
            warnings.push(format!(
                "the machine recorded at {} answers at several addresses of the spec ({}): not \
                 treated as a move",
                m.from,
                targets
                    .iter()
                    .map(|t| t.to.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    (moves, warnings)
}
