//! The cluster spec: k0sctl.yaml / JSON model, loading, defaults and validation with
//! file:line:column diagnostics.
//!
//! `load` is the entry point: paths (files, folders, `-`) → `Loaded { spec, sha256, warnings,
//! files }` or `Diagnostics` (every error and warning, each with file:line:column and field).
//! What k0sform does with k0sctl fields it does not implement is decided in `resolve.rs`.

mod check;
mod diag;
mod envsubst;
mod load;
mod model;
mod node;
pub mod raw;
mod resolve;
mod validate;

pub use diag::{Diagnostic, Diagnostics, Severity};
pub use load::{
    CLUSTER_API_VERSION, K0S_API_VERSION, LoadOptions, Loaded, default_paths, load, load_with,
};
pub use model::*;
pub use validate::{check_k0s_version, shell_words};
