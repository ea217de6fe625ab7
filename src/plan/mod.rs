//! Planning: `diff` (the decision table), `graph` (the step DAG) and `saved` (plan files sealed
//! against staleness). Plans are rendered (text, JSON, DOT) by `ui::render`.

mod diff;
pub mod graph;
mod model;
pub mod moves;
mod restore;
pub mod saved;
mod trust;

pub use diff::worker_batch_size;
pub use model::*;
pub use saved::{SavedPlan, Stale};
pub use trust::{refuse_first_contact_keys, refuse_first_contacts};

use crate::hostid::HostId;
use crate::reality::Reality;
use crate::spec::Spec;
use crate::state::State;
use std::collections::BTreeSet;

/// The plan for spec, state and probed reality: the decision table (`diff`) plus what the run
/// trusts and ignores (`trust`: first contacts, the state's unused access settings). Pure.
pub fn diff(
    spec: &Spec,
    state: &State,
    reality: &Reality,
    desired: &Desired,
    opts: &PlanOptions,
) -> Result<Plan, Refusal> {
    let review = trust::review(spec, state, reality, opts)?;
    let mut plan = diff::diff(spec, state, reality, desired, opts)?;
    plan.first_contacts = review.first_contacts;
    plan.warnings.extend(review.warnings);
    // A bastion key trusted this run is recorded as soon as apply starts; it waits for nothing.
    // With -target, only the keys of bastions on the way to the hosts the plan is for: targeted
    // ones, and those it changes for them (a bootstrap); the others' wait for their own plan,
    // as their host keys do.
    let planned: BTreeSet<&HostId> = plan.steps.iter().map(|s| &s.host).collect();
    let used = |h: &HostId| opts.is_targeted(h) || planned.contains(h);
    let records: Vec<_> = review
        .bastion_records
        .into_iter()
        .filter(|r| r.hosts.iter().any(&used))
        .collect();
    for r in records {
        plan.steps.push(Step {
            id: plan.steps.len(),
            host: r.bastion,
            kind: StepKind::RecordBastion {
                fingerprint: r.fingerprint,
                public_key: r.public_key,
            },
            after: Vec::new(),
        });
    }
    Ok(plan)
}
