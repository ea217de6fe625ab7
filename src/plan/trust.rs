//! What the plan says about trust, beside the decision table: hosts whose SSH key this run
//! trusts on first contact (no key recorded, no `ssh.hostKey` pin), refused with
//! `-trust-new-host-keys=false`; ssh options and files of the state that are not used
//! (`state::access`); and recorded access that differs from the spec. Pure, like `diff`.
//!
//! Bastions (`ssh.bastion`) are held to the same rules as hosts: a key recorded in the state's
//! `bastions` is checked strictly, a bastion with none (and no pin) is a first contact, a
//! changed bastion key refuses the whole plan (exit 3) unless `-replace` names the bastion
//! itself (naming a host behind it does not), and the key a run trusted is recorded by a
//! `RecordBastion` step.

use super::model::{FirstContact, PlanOptions, Refusal, RefusalKind};
use crate::hostid::{HostId, HostIndex};
use crate::reality::{Probe, Reality};
use crate::spec::{HostSpec, Spec, SshTarget};
use crate::state::State;
use crate::transport::LOCAL_HOST_KEY;
use std::collections::{BTreeMap, BTreeSet};

pub(super) struct Review {
    pub first_contacts: Vec<FirstContact>,
    pub warnings: Vec<String>,
    /// Bastion keys seen this run that the state does not record (yet, or any more): each
    /// becomes a `RecordBastion` step (with `-target`, only where `plan::diff` keeps it).
    /// Sorted by bastion.
    pub bastion_records: Vec<BastionRecord>,
}

/// A bastion key to record, and the hosts whose connections went through that bastion.
pub(super) struct BastionRecord {
    pub bastion: HostId,
    pub fingerprint: String,
    pub public_key: String,
    pub hosts: Vec<HostId>,
}

/// A bastion offered another key than the one recorded for it.
pub(crate) fn bastion_key_refusal(
    bastion: &HostId,
    host: &HostId,
    expected: &str,
    offered: &str,
) -> Refusal {
    Refusal {
        kind: RefusalKind::HostKeyChanged,
        message: format!(
            "bastion {bastion} offered another SSH host key than recorded; refusing to connect through it"
        ),
        details: vec![bastion_key_detail(bastion, host, expected, offered)],
    }
}

fn bastion_key_detail(bastion: &HostId, host: &HostId, expected: &str, offered: &str) -> String {
    format!(
        "bastion {bastion} (on the way to {host}): host key {expected} recorded, {offered} offered; \
         if the bastion was rebuilt, run with -replace {bastion} or pin the new key with the \
         bastion's ssh.hostKey"
    )
}

/// Does `-replace SEL` name a bastion (of a spec host, or recorded in the state)?
pub(crate) fn names_bastion(spec: &Spec, state: &State, sel: &str) -> bool {
    fn walk(t: &SshTarget, sel: &str) -> bool {
        t.bastion
            .as_deref()
            .is_some_and(|b| HostId::new(b.address.clone(), b.port).matches(sel) || walk(b, sel))
    }
    spec.hosts.iter().any(|h| walk(&h.ssh, sel))
        || state.bastions.iter().any(|b| b.id().matches(sel))
}

/// Is `id` a bastion hop of some spec host with a `ssh.hostKey` pin?
fn bastion_pinned(spec: &Spec, id: &HostId) -> bool {
    fn walk(t: &SshTarget, id: &HostId) -> bool {
        match t.bastion.as_deref() {
            Some(b) => {
                (b.address == id.address && b.port == id.port && b.host_key.is_some())
                    || walk(b, id)
            }
            None => false,
        }
    }
    spec.hosts.iter().any(|h| walk(&h.ssh, id))
}

/// Bastion keys: refusals for changed ones, first contacts, and what to record.
fn review_bastions(
    spec: &Spec,
    state: &State,
    reality: &Reality,
    opts: &PlanOptions,
    first_contacts: &mut Vec<FirstContact>,
) -> Result<Vec<BastionRecord>, Refusal> {
    let mut changed = Vec::new();
    // bastion -> (fingerprint, public key, the hosts whose connections went through it, the
    // first of them first)
    let mut seen: BTreeMap<HostId, (String, String, Vec<HostId>)> = BTreeMap::new();
    let mut conflicts = Vec::new();
    for h in &reality.hosts {
        match &h.probe {
            Probe::HostKeyChanged {
                expected,
                offered,
                bastion: Some(b),
            } => changed.push(bastion_key_detail(b, &h.id, expected, offered)),
            Probe::Reached(f) => {
                for b in &f.bastions {
                    match seen.get_mut(&b.bastion) {
                        None => {
                            seen.insert(
                                b.bastion.clone(),
                                (
                                    b.host_key.clone(),
                                    b.host_public_key.clone(),
                                    vec![h.id.clone()],
                                ),
                            );
                        }
                        Some((fp, _, via)) if fp != &b.host_key => conflicts.push(format!(
                            "bastion {}: offered {fp} on the way to {}, {} on the way to {}",
                            b.bastion, via[0], b.host_key, h.id
                        )),
                        Some((_, _, via)) => via.push(h.id.clone()),
                    }
                }
            }
            _ => {}
        }
    }
    if !changed.is_empty() {
        return Err(Refusal {
            kind: RefusalKind::HostKeyChanged,
            message: "a bastion offered another SSH host key than recorded; refusing to connect through it".into(),
            details: changed,
        });
    }
    if !conflicts.is_empty() {
        return Err(Refusal {
            kind: RefusalKind::HostKeyChanged,
            message:
                "a bastion offered different SSH host keys to different connections of this run"
                    .into(),
            details: conflicts,
        });
    }
    let mut records = Vec::new();
    for (id, (fingerprint, public_key, hosts)) in seen {
        let rec = state.bastion(&id);
        let recorded = rec.is_some_and(|r| !r.host_key.is_empty()) && !opts.is_replaced(&id);
        if !recorded && !bastion_pinned(spec, &id) {
            first_contacts.push(FirstContact {
                host: id.clone(),
                name: "bastion".into(),
                fingerprint: fingerprint.clone(),
                bastion: true,
            });
        }
        if rec.is_none_or(|r| r.host_public_key != public_key || r.host_key != fingerprint) {
            records.push(BastionRecord {
                bastion: id,
                fingerprint,
                public_key,
                hosts,
            });
        }
    }
    Ok(records)
}

pub(super) fn review(
    spec: &Spec,
    state: &State,
    reality: &Reality,
    opts: &PlanOptions,
) -> Result<Review, Refusal> {
    let by_spec = spec.host_index();
    let mut first_contacts = host_first_contacts(spec, &by_spec, state, reality, opts);
    let mut warnings = Vec::new();
    for h in &state.hosts {
        let id = h.id();
        let label = match &h.node_name {
            Some(n) => format!("{n} ({id})"),
            None => id.to_string(),
        };
        match by_spec.get(&id) {
            Some(s) => {
                let differs = crate::state::access::differences(h, s);
                if !differs.is_empty() {
                    warnings.push(format!(
                        "{label}: the state records other access than the spec ({}); the spec's is used",
                        differs.join(", ")
                    ));
                }
            }
            None if opts.is_excluded(&id) => {}
            None => match crate::state::access::reach(h, spec) {
                Ok(r) => {
                    for d in r.dropped {
                        warnings.push(format!("{label}: {d}"));
                    }
                }
                Err(problems) => {
                    for p in problems {
                        warnings.push(format!(
                            "{label}: not contacted, the state's recorded access is not valid: {p}"
                        ));
                    }
                }
            },
        }
    }
    let bastion_records = review_bastions(spec, state, reality, opts, &mut first_contacts)?;
    if opts.refuse_first_contact && !first_contacts.is_empty() {
        return Err(first_contact_refusal(&first_contacts));
    }
    Ok(Review {
        first_contacts,
        warnings,
        bastion_records,
    })
}

/// `-trust-new-host-keys=false` for the commands that reach a host without planning
/// (`kubeconfig`, `backup`): refused as the plan refuses it when a connection of `reality`
/// trusted its host, or a bastion on the way, on first contact. The plan's rules, from the
/// plan's code.
pub fn refuse_first_contacts(spec: &Spec, state: &State, reality: &Reality) -> Result<(), Refusal> {
    let opts = PlanOptions::default();
    let by_spec = spec.host_index();
    let mut first_contacts = host_first_contacts(spec, &by_spec, state, reality, &opts);
    review_bastions(spec, state, reality, &opts, &mut first_contacts)?;
    if first_contacts.is_empty() {
        Ok(())
    } else {
        Err(first_contact_refusal(&first_contacts))
    }
}

/// Does the state vouch for the SSH key `id` offers: a key recorded at `id` (not the localhost
/// host's `LOCAL_HOST_KEY`, which is no key) that no `-replace` drops?
fn ssh_key_on_record(
    by_state: &HostIndex<'_, crate::state::HostState>,
    id: &HostId,
    opts: &PlanOptions,
) -> bool {
    by_state.get(id).is_some_and(|s| {
        !s.host_key.is_empty() && s.host_key != LOCAL_HOST_KEY && !opts.is_replaced(id)
    })
}

/// `-trust-new-host-keys=false`, right after the key exchange and before any command runs on
/// any host: refused (exit 3) when a connection trusted its host's key, or a bastion's on the
/// way, on first contact. The rules of `review`, from what the connections alone show: a host
/// that offers the key of a host the state recorded at an address the spec no longer names may
/// be that host moved (its probed machine-id decides, and `review` checks it again), so it is
/// not refused here. `connected`: each host and the keys it was accepted with.
pub fn refuse_first_contact_keys(
    spec: &Spec,
    state: &State,
    opts: &PlanOptions,
    connected: &[(&HostId, &crate::transport::ConnectedHost)],
) -> Result<(), Refusal> {
    let by_spec = spec.host_index();
    let by_state = state.host_index();
    let moved_keys: BTreeSet<&str> = super::moves::gone_hosts(spec, state, opts)
        .into_iter()
        .map(|h| h.host_key.as_str())
        .collect();
    let mut first_contacts = Vec::new();
    let mut bastions: BTreeMap<&HostId, &str> = BTreeMap::new();
    for (id, c) in connected {
        // A `localhost` host offers no key to trust: its machine-id identifies it.
        if c.fingerprint == LOCAL_HOST_KEY {
            continue;
        }
        let pinned = by_spec.get(id).is_some_and(|s| s.ssh.host_key.is_some());
        let recorded = ssh_key_on_record(&by_state, id, opts);
        if !pinned && !recorded && !moved_keys.contains(c.fingerprint.as_str()) {
            first_contacts.push(FirstContact {
                host: (*id).clone(),
                name: String::new(),
                fingerprint: c.fingerprint.clone(),
                bastion: false,
            });
        }
        for b in &c.bastions {
            let recorded = state.bastion(&b.id).is_some_and(|r| !r.host_key.is_empty())
                && !opts.is_replaced(&b.id);
            if !recorded && !bastion_pinned(spec, &b.id) {
                bastions.entry(&b.id).or_insert(&b.fingerprint);
            }
        }
    }
    first_contacts.extend(bastions.into_iter().map(|(id, fp)| FirstContact {
        host: id.clone(),
        name: "bastion".into(),
        fingerprint: fp.to_string(),
        bastion: true,
    }));
    if first_contacts.is_empty() {
        Ok(())
    } else {
        Err(first_contact_refusal(&first_contacts))
    }
}

/// The reached hosts of `reality` whose key this run trusts on first contact: no `ssh.hostKey`
/// pin, no key recorded at their address (or only one `-replace` drops), and not a recorded
/// host that moved (it offered the key recorded at its old address). `by_spec`:
/// `spec.host_index()`. Each list is indexed once: a scan of each per host made 5,000-host
/// plans quadratic.
fn host_first_contacts(
    spec: &Spec,
    by_spec: &HostIndex<'_, HostSpec>,
    state: &State,
    reality: &Reality,
    opts: &PlanOptions,
) -> Vec<FirstContact> {
    let by_state = state.host_index();
    let by_probe = reality.probe_index();
    let (moves, _) = super::moves::find_moves(spec, state, reality, opts);
    // Only a move matched on a recorded SSH key vouches for the key: one from the localhost
    // host matched on its machine-id alone (`transport::host_keys_differ`).
    let moved_to: BTreeSet<&HostId> = moves
        .iter()
        .filter(|m| {
            by_state
                .get(&m.from)
                .is_some_and(|s| s.host_key != LOCAL_HOST_KEY)
        })
        .map(|m| &m.to)
        .collect();
    let mut first_contacts = Vec::new();
    for h in &reality.hosts {
        let Some(Probe::Reached(facts)) = by_probe.get(&h.id) else {
            continue;
        };
        // A `localhost` host offers no key to trust: its machine-id identifies it.
        if facts.host_key == LOCAL_HOST_KEY {
            continue;
        }
        let pinned = by_spec.get(&h.id).is_some_and(|s| s.ssh.host_key.is_some());
        let recorded = ssh_key_on_record(&by_state, &h.id, opts) || moved_to.contains(&h.id);
        if !pinned && !recorded {
            first_contacts.push(FirstContact {
                host: h.id.clone(),
                name: facts.hostname.trim().to_lowercase(),
                fingerprint: facts.host_key.clone(),
                bastion: false,
            });
        }
    }
    first_contacts
}

/// `-trust-new-host-keys=false`: exit 3, naming each host and bastion with the key it offered.
fn first_contact_refusal(first_contacts: &[FirstContact]) -> Refusal {
    Refusal {
        kind: RefusalKind::UnknownIdentity,
        message: "-trust-new-host-keys=false: these hosts or bastions have no host key recorded in the state and no ssh.hostKey pin".into(),
        details: first_contacts
            .iter()
            .map(|f| {
                format!(
                    "{}{}: offers {}; pin it with {}ssh.hostKey after checking it out of band",
                    if f.bastion { "bastion " } else { "" },
                    f.host,
                    f.fingerprint,
                    if f.bastion { "the bastion's " } else { "" },
                )
            })
            .collect(),
    }
}
