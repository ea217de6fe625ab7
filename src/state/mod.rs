//! The state: model, format versioning, atomic store with backup, and the lock.
//! Every write of the state file goes through `store`; commands find the file with `default_path`.

mod error;
mod lock;
mod model;
mod store;

pub use error::StateError;
pub use lock::{ForceUnlockOutcome, LockGuard, LockHolder, LockRelease};
pub use model::*;
pub use store::{LocalStore, StateStore, WriteOutcome, WriteStage, parse};

use crate::cli::GlobalArgs;
use std::path::{Path, PathBuf};

/// File name of the state when `-state` is not given.
pub const DEFAULT_FILE_NAME: &str = "k0sform.state.json";

/// The state file: `-state PATH`, else `k0sform.state.json` in the folder of the spec (the first
/// `-c` path, itself when it is a folder), else in the current directory.
pub fn default_path(global: &GlobalArgs) -> PathBuf {
    if let Some(p) = &global.state {
        return p.clone();
    }
    let dir = match global.config.first() {
        Some(c) if c.is_dir() => c.as_path(),
        Some(c) => c.parent().unwrap_or(Path::new("")),
        None => Path::new(""),
    };
    dir.join(DEFAULT_FILE_NAME)
}

/// JSON Schema of the state file (checked in as schema/state.schema.json).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(State);
    // Serializing a schema (plain JSON values) cannot fail; fall back to an empty schema anyway.
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}
