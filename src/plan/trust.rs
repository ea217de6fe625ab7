//! What the plan says about trust, beside the decision table: hosts whose SSH key this run
//! trusts on first contact (no key recorded, no `ssh.hostKey` pin), refused with
//! `-trust-new-host-keys=false`; ssh options and files of the state that are not used
//! (`state::access`); and recorded access that differs from the spec. Pure, like `diff`.

use super::model::{FirstContact, PlanOptions, Refusal, RefusalKind};
use crate::reality::Reality;
use crate::spec::Spec;
use crate::state::State;

pub(super) struct Review {
    pub first_contacts: Vec<FirstContact>,
    pub warnings: Vec<String>,
}

pub(super) fn review(
    spec: &Spec,
    state: &State,
    reality: &Reality,
    opts: &PlanOptions,
) -> Result<Review, Refusal> {
    let mut first_contacts = Vec::new();
    let mut warnings = Vec::new();
    // A host that moved offered the key recorded for it at its old address: not a first contact.
    let (moves, _) = super::moves::find_moves(spec, state, reality, opts);
    for h in &reality.hosts {
        let Some(facts) = reality.facts(&h.id) else {
            continue;
        };
        let spec_host = spec.host(&h.id);
        let pinned = spec_host.is_some_and(|s| s.ssh.host_key.is_some());
        let recorded = state
            .host(&h.id)
            .is_some_and(|s| !s.host_key.is_empty() && !opts.is_replaced(&h.id))
            || moves.iter().any(|m| m.to == h.id);
        if !pinned && !recorded {
            first_contacts.push(FirstContact {
                host: h.id.clone(),
                name: facts.hostname.trim().to_lowercase(),
                fingerprint: facts.host_key.clone(),
            });
        }
    }
    for h in &state.hosts {
        let id = h.id();
        let label = match &h.node_name {
            Some(n) => format!("{n} ({id})"),
            None => id.to_string(),
        };
        match spec.host(&id) {
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
    if opts.refuse_first_contact && !first_contacts.is_empty() {
        return Err(Refusal {
            kind: RefusalKind::UnknownIdentity,
            message: "-trust-new-host-keys=false: these hosts have no host key recorded in the state and no ssh.hostKey pin".into(),
            details: first_contacts
                .iter()
                .map(|f| {
                    format!(
                        "{}: offers {}; pin it with ssh.hostKey after checking it out of band",
                        f.host, f.fingerprint
                    )
                })
                .collect(),
        });
    }
    Ok(Review {
        first_contacts,
        warnings,
    })
}
