//! The state: model, format versioning, atomic store with backup, and the lock.
//! Every write of the state goes through a `StateStore`: the local file (`store`) or etcd (`etcd`,
//! built with the `etcd-state` cargo feature, on by default); `open` picks the one a location names.

pub mod access;
mod error;
#[cfg(feature = "etcd-state")]
mod etcd;
mod etcd_location;
mod holder;
mod lock;
mod model;
mod store;

pub use error::StateError;
#[cfg(feature = "etcd-state")]
pub use etcd::EtcdStore;
pub use etcd_location::{EtcdOptions, EtcdUrl, HISTORY_KEEP, is_etcd_location};
pub use holder::LockHolder;
pub use lock::{ForceUnlockOutcome, LockGuard, LockRelease};
pub use model::*;
pub use store::{LocalStore, StateStore, WriteOutcome, WriteStage, parse};

use std::path::{Path, PathBuf};

/// File name of the state when `-state` is not given.
pub const DEFAULT_FILE_NAME: &str = "k0sform.state.json";

/// The state's location: `explicit` (a path or URL, `-state`), else `K0SFORM_STATE`, else
/// `k0sform.state.json` in the folder of the spec (the first of `spec_paths`, itself when it is a
/// folder), else in the current directory.
pub fn default_path(explicit: Option<&Path>, spec_paths: &[PathBuf]) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(v) = std::env::var_os("K0SFORM_STATE").filter(|v| !v.is_empty()) {
        return PathBuf::from(v);
    }
    let dir = match spec_paths.first() {
        Some(c) if c.is_dir() => c.as_path(),
        Some(c) => c.parent().unwrap_or(Path::new("")),
        None => Path::new(""),
    };
    dir.join(DEFAULT_FILE_NAME)
}

/// The store for `location`: etcd for `etcd://` and `etcds://` URLs, else the local file. A
/// build without the `etcd-state` feature refuses an etcd URL rather than taking it for a path.
pub fn open(location: &Path, opts: &EtcdOptions) -> Result<Box<dyn StateStore>, StateError> {
    match location.to_str() {
        Some(url) if is_etcd_location(url) => open_etcd(url, opts),
        _ => Ok(Box::new(LocalStore::new(location))),
    }
}

#[cfg(feature = "etcd-state")]
fn open_etcd(url: &str, opts: &EtcdOptions) -> Result<Box<dyn StateStore>, StateError> {
    Ok(Box::new(EtcdStore::open(url, opts)?))
}

#[cfg(not(feature = "etcd-state"))]
fn open_etcd(url: &str, _opts: &EtcdOptions) -> Result<Box<dyn StateStore>, StateError> {
    Err(StateError::NoEtcdBackend {
        location: url.to_string(),
    })
}

/// A state on plain `etcd://` (no TLS, so no client certificates): anyone on the network can
/// read or rewrite it, and the state decides how removed hosts are reached. k0sform checks what
/// it reads (`access`) but cannot tell who wrote it, so it says so.
pub fn transport_warning(location: &Path) -> Option<String> {
    // Without the etcd backend `open` refuses the URL: nothing travels, so nothing to warn of.
    if !cfg!(feature = "etcd-state") {
        return None;
    }
    let url = location.to_str().filter(|u| is_etcd_location(u))?;
    let parsed = EtcdUrl::parse(url).ok()?;
    (!parsed.tls).then(|| {
        format!(
            "the state at {url} travels and is stored without TLS or client certificates: anyone who reaches that etcd can read or rewrite it; use etcds:// with --etcd-cert/--etcd-key"
        )
    })
}

/// JSON Schema of the state file (checked in as schema/state.schema.json).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(State);
    // Serializing a schema (plain JSON values) cannot fail; fall back to an empty schema anyway.
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "etcd-state")]
    #[test]
    fn plain_etcd_state_is_warned_about() {
        let w = |s: &str| super::transport_warning(std::path::Path::new(s));
        assert!(w("etcd://10.0.0.5:2379/k0sform/prod").is_some_and(|m| m.contains("without TLS")));
        assert_eq!(w("etcds://10.0.0.5:2379/k0sform/prod"), None);
        assert_eq!(w("k0sform.state.json"), None);
    }

    /// Without the etcd backend an etcd URL is refused by name, with the way to a build that has
    /// it, and never taken for a file path; a file path still opens. Runs in CI's
    /// `cargo test --no-default-features --lib` step (.ci/run).
    #[cfg(not(feature = "etcd-state"))]
    #[test]
    fn etcd_state_is_refused_without_the_backend() {
        let opts = super::EtcdOptions::default();
        for url in [
            "etcd://127.0.0.1:2379/k0sform/prod",
            "etcds://127.0.0.1:2379/p",
        ] {
            let err = match super::open(std::path::Path::new(url), &opts) {
                Ok(_) => panic!("{url} opened without the etcd backend"),
                Err(e) => e,
            };
            let text = err.to_string();
            assert!(text.contains(url), "{text}");
            assert!(
                text.contains("built without the etcd state backend"),
                "{text}"
            );
            assert!(text.contains("--features etcd-state"), "{text}");
            assert_eq!(err.exit(), crate::exit::Exit::Error);
            assert_eq!(super::transport_warning(std::path::Path::new(url)), None);
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k0sform.state.json");
        let store = super::open(&file, &opts).expect("a file state opens");
        assert!(store.location().contains("k0sform.state.json"));
    }
}
