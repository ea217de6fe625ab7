//! Planning: `diff` (the decision table), `graph` (the step DAG), `render` (text, JSON, DOT) and
//! `saved` (plan files sealed against staleness).

mod diff;
pub mod graph;
mod model;
pub mod moves;
pub mod render;
mod restore;
pub mod saved;
mod trust;

pub use diff::worker_batch_size;
pub use model::*;
pub use saved::{SavedPlan, Stale};
pub use trust::refuse_first_contacts;

use crate::reality::Reality;
use crate::spec::Spec;
use crate::state::State;

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
    for (bastion, fingerprint, public_key) in review.bastion_records {
        plan.steps.push(Step {
            id: plan.steps.len(),
            host: bastion,
            kind: StepKind::RecordBastion {
                fingerprint,
                public_key,
            },
            after: Vec::new(),
        });
    }
    Ok(plan)
}
