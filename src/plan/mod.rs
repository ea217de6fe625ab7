//! Planning: `diff` (the decision table), `graph` (the step DAG), `render` (text, JSON, DOT) and
//! `saved` (plan files sealed against staleness).

mod diff;
pub mod graph;
mod model;
pub mod render;
pub mod saved;

pub use diff::{diff, worker_batch_size};
pub use model::*;
pub use saved::{SavedPlan, Stale};
