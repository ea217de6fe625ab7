//! What every operation starts from: the spec, the state, the local files the spec names and
//! the release endpoints.

use super::Failure;
use crate::cli::GlobalArgs;
use crate::k0s::release::Mirror;
use crate::plan::{Desired, DesiredHost, LocalBinary};
use crate::spec::{self, Loaded, Spec};
use crate::state::{EtcdOptions, State, StateError, StateStore};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Load the spec from `paths` (the defaults when empty), printing its warnings; errors are
/// printed with their locations.
pub fn load_spec(paths: &[PathBuf]) -> Result<Loaded, Failure> {
    match spec::load(paths) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("{w}");
            }
            Ok(loaded)
        }
        Err(diags) => {
            for d in &diags.0 {
                eprintln!("{d}");
            }
            let n = diags.error_count();
            Err(Failure::error(format!(
                "the spec is not valid: {n} error{}",
                if n == 1 { "" } else { "s" }
            )))
        }
    }
}

/// The state store for this run (the local file or etcd, as `-state` says) and the state in it
/// (a new, empty one when there is none yet: `had_state` tells which).
pub struct StateCtx {
    pub store: Box<dyn StateStore>,
    pub state: State,
    pub had_state: bool,
}

impl StateCtx {
    /// The state a saved plan is sealed against: with no state yet, an empty lineage (a fresh
    /// state's random lineage would never match the one `apply` creates).
    pub fn sealed_view(&self) -> State {
        let mut seen = self.state.clone();
        if !self.had_state {
            seen.lineage = String::new();
        }
        seen
    }
}

/// Where the state is: `-state`, else `K0SFORM_STATE`, else beside the spec (`-c`).
pub fn state_location(global: &GlobalArgs) -> PathBuf {
    crate::state::default_path(global.state.as_deref(), &global.config)
}

/// The store the command line names: the state's location and the `--etcd-*` TLS flags.
pub fn open_store(global: &GlobalArgs) -> Result<Box<dyn StateStore>, StateError> {
    let opts = EtcdOptions::from_flags(
        global.etcd_cacert.as_deref(),
        global.etcd_cert.as_deref(),
        global.etcd_key.as_deref(),
    );
    let location = state_location(global);
    if let Some(w) = crate::state::transport_warning(&location) {
        eprintln!("Warning: {w}");
    }
    crate::state::open(&location, &opts)
}

/// Read the state from `store`.
pub fn load_state(mut store: Box<dyn StateStore>) -> Result<StateCtx, Failure> {
    let loaded = store.load()?;
    let had_state = loaded.is_some();
    Ok(StateCtx {
        store,
        state: loaded.unwrap_or_default(),
        had_state,
    })
}

/// sha256 of every local k0s binary the spec names (`k0sBinaryPath`), each file read once, and
/// every host's `files:` expanded and hashed.
pub fn desired(spec: &Spec) -> Result<Desired, Failure> {
    let mut by_path: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut hosts = Vec::new();
    for h in &spec.hosts {
        let local_binary = match &h.k0s_binary_path {
            Some(p) => {
                let sha = match by_path.get(p) {
                    Some(s) => s.clone(),
                    None => {
                        let s = hash_file(p)?;
                        by_path.insert(p.clone(), s.clone());
                        s
                    }
                };
                Some(LocalBinary {
                    sha256: sha,
                    version: spec.k0s.version.clone(),
                    url: None,
                })
            }
            None => None,
        };
        let files = crate::files::desired(h).map_err(Failure::error)?;
        hosts.push(DesiredHost {
            host: h.id(),
            local_binary,
            host_download: None,
            files,
        });
    }
    // Sorted: Desired::local_binary binary-searches.
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    Ok(Desired { hosts })
}

/// `-restore-from FILE`: its sha256 and what `k0s restore` will need from it, read before
/// planning so a file that is not a k0s backup is refused before any host is touched.
pub fn restore_archive(path: &Path) -> Result<crate::plan::RestoreArchive, Failure> {
    let fail = |e: &dyn std::fmt::Display| {
        Failure::error(format!("-restore-from {}: {e}", path.display()))
    };
    let abs = std::path::absolute(path).map_err(|e| fail(&e))?;
    let file = std::fs::File::open(&abs).map_err(|e| fail(&e))?;
    let archive =
        crate::k0s::backup::read_archive(std::io::BufReader::new(file)).map_err(|e| fail(&e))?;
    let sha256 = crate::hash::sha256_file(&abs).map_err(|e| fail(&e))?;
    Ok(crate::plan::RestoreArchive {
        path: abs.to_string_lossy().into_owned(),
        sha256,
        peer_address: archive.peer_address,
    })
}

fn hash_file(p: &Path) -> Result<String, Failure> {
    crate::hash::sha256_file(p)
        .map_err(|e| Failure::error(format!("cannot read k0sBinaryPath {}: {e}", p.display())))
}

/// The release endpoints (`K0SFORM_K0S_DOWNLOAD_URL`, `K0SFORM_K0S_VERSION_URL`).
/// A plain-http base is warned about, once per run.
pub fn mirror() -> Result<Mirror, Failure> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let m = Mirror::from_env().map_err(Failure::error)?;
    WARNED.call_once(|| {
        for w in m.warnings() {
            eprintln!("{}", crate::escape::escape_lines(&w));
        }
    });
    Ok(m)
}

/// Hosts worked on at once (probed, steps run), as k0sctl's `Concurrency`: cmd/flags.go
/// `initManager` takes `--concurrency` when given (already written over the spec's limit by
/// `apply`), else `spec.options.concurrency.limit` (default 30); phase/generic_phase.go
/// `parallelDo`: 0 is no limit, every host (of the spec and the state) at once. k0sform's
/// `-parallelism`, when given, wins over the spec.
pub fn hosts_at_once(flag: Option<usize>, spec: &Spec, state_hosts: usize) -> usize {
    match flag {
        Some(n) => n.max(1),
        None if spec.options.concurrency_limit == 0 => (spec.hosts.len() + state_hosts).max(1),
        None => spec.options.concurrency_limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(limit: usize, hosts: usize) -> spec::Spec {
        let mut s = spec::Spec::default();
        s.options.concurrency_limit = limit;
        for i in 0..hosts {
            s.hosts.push(spec::HostSpec::new(
                spec::Role::Worker,
                spec::SshTarget::new(format!("127.0.0.{}", i + 1), 22),
                i,
            ));
        }
        s
    }

    #[test]
    fn hosts_at_once_is_the_spec_limit_unless_parallelism_is_given() {
        // k0sctl's default limit (30) when neither says otherwise.
        assert_eq!(hosts_at_once(None, &spec::Spec::default(), 0), 30);
        // `options.concurrency.limit` (or `--concurrency`, written over it).
        assert_eq!(hosts_at_once(None, &spec_with(2, 5), 0), 2);
        // 0: no limit, every host of the spec and the state at once.
        assert_eq!(hosts_at_once(None, &spec_with(0, 5), 3), 8);
        assert_eq!(hosts_at_once(None, &spec_with(0, 0), 0), 1);
        // -parallelism wins over the spec; at least one.
        assert_eq!(hosts_at_once(Some(7), &spec_with(2, 5), 0), 7);
        assert_eq!(hosts_at_once(Some(4), &spec_with(0, 5), 0), 4);
        assert_eq!(hosts_at_once(Some(0), &spec_with(2, 5), 0), 1);
    }
}
