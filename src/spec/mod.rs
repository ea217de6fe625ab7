//! The cluster spec: k0sctl.yaml / JSON model, loading, defaults and validation with
//! file:line:column diagnostics.
//!
//! `load` is the entry point: paths (files, folders, `-`) → `Loaded { spec, sha256, warnings,
//! files }` or `Diagnostics` (every error and warning, each with file:line:column and field).
//!
//! Pipeline: `load` (paths, envsubst, documents) → `node` (YAML tree with positions) → `check`
//! (structure against `raw::schema()`: unknown keys with "did you mean", types, enums) →
//! `resolve` (k0sctl defaults, paths, unsupported fields) → `validate` (offline rules).
//!
//! k0sctl fields k0sform does not implement (decided and documented in `resolve.rs`):
//! errors: `winRM`;
//! warnings (ignored, the cluster is still what the file describes): `os`, `connect`
//! hooks, `openSSH.disableMultiplexing`, a `keyPath`/`configPath` that does not exist yet.

mod check;
mod diag;
mod envsubst;
mod load;
mod model;
mod node;
mod paths;
pub mod raw;
mod resolve;
mod validate;

pub use diag::{
    Diagnostic, DiagnosticJson, Diagnostics, Severity, VALIDATE_FORMAT_VERSION, ValidationReport,
    validate_json_schema,
};
pub use load::{
    CLUSTER_API_VERSION, K0S_API_VERSION, LoadOptions, Loaded, default_paths, load, load_with,
};
pub use model::*;
pub use paths::k0s_path_problem;
pub(crate) use validate::{
    TargetFinding, is_user_name, json_field_problem, peer_url_problem, recorded_field_problem,
    remote_path_problem, target_findings,
};
pub use validate::{
    check_k0s_version, is_object_name, shell_words, valid_env_name, valid_interface,
};
