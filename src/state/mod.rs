//! The state: model, format versioning, atomic store with backup, and the lock.
//! Every write of the state goes through a `StateStore`: the local file (`store`) or etcd (`etcd`);
//! commands get the one `-state` names with `open_for`.

mod error;
mod etcd;
mod lock;
mod model;
mod store;

pub use error::StateError;
pub use etcd::{EtcdOptions, EtcdStore, EtcdUrl, HISTORY_KEEP, is_etcd_location};
pub use lock::{ForceUnlockOutcome, LockGuard, LockHolder, LockRelease};
pub use model::*;
pub use store::{LocalStore, StateStore, WriteOutcome, WriteStage, parse};

use crate::cli::GlobalArgs;
use std::path::{Path, PathBuf};

/// File name of the state when `-state` is not given.
pub const DEFAULT_FILE_NAME: &str = "k0sform.state.json";

/// The state's location: `-state PATH|URL`, else `K0SFORM_STATE`, else `k0sform.state.json` in
/// the folder of the spec (the first `-c` path, itself when it is a folder), else in the current
/// directory.
pub fn default_path(global: &GlobalArgs) -> PathBuf {
    if let Some(p) = &global.state {
        return p.clone();
    }
    if let Some(v) = std::env::var_os("K0SFORM_STATE").filter(|v| !v.is_empty()) {
        return PathBuf::from(v);
    }
    let dir = match global.config.first() {
        Some(c) if c.is_dir() => c.as_path(),
        Some(c) => c.parent().unwrap_or(Path::new("")),
        None => Path::new(""),
    };
    dir.join(DEFAULT_FILE_NAME)
}

/// The store for `location`: etcd for `etcd://` and `etcds://` URLs, else the local file.
pub fn open(location: &Path, opts: &EtcdOptions) -> Result<Box<dyn StateStore>, StateError> {
    match location.to_str() {
        Some(url) if is_etcd_location(url) => Ok(Box::new(EtcdStore::open(url, opts)?)),
        _ => Ok(Box::new(LocalStore::new(location))),
    }
}

/// The store this command line names (`-state`, `K0SFORM_STATE`, the `--etcd-*` TLS flags).
pub fn open_for(global: &GlobalArgs) -> Result<Box<dyn StateStore>, StateError> {
    let opts = EtcdOptions::from_flags(
        global.etcd_cacert.as_deref(),
        global.etcd_cert.as_deref(),
        global.etcd_key.as_deref(),
    );
    open(&default_path(global), &opts)
}

/// JSON Schema of the state file (checked in as schema/state.schema.json).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(State);
    // Serializing a schema (plain JSON values) cannot fail; fall back to an empty schema anyway.
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}
