//! The cluster spec: k0sctl.yaml / JSON model, loading, defaults and validation with
//! file:line:column diagnostics.

mod model;

pub use model::*;
