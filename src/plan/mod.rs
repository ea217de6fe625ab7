//! Planning: `diff` (the decision table), `graph` (the step DAG), `render` (text, JSON, DOT).

mod model;

pub use model::*;
