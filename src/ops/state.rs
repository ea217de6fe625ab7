//! `state list|show|rm|mv|pull|push` and `force-unlock`: read the state through its store,
//! forget or move a host, replace the whole state (`push`), each write under the lock; break a
//! remote state's lock.

use super::Failure;
use crate::hostid::HostId;
use crate::state::{
    self, ForceUnlockOutcome, HostState, LocalStore, State, StateError, StateStore, WriteOutcome,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The failure of a command that needs a state where there is none.
pub fn no_state(location: &str) -> Failure {
    Failure::error(if state::is_etcd_location(location) {
        format!("no state at {location} (apply creates it; `state push FILE` moves one there)")
    } else {
        format!(
            "no state file at {location} (use -state PATH or URL, or -c for the spec whose folder \
             holds it)"
        )
    })
}

/// The state in `store`, refused when there is none.
pub fn existing(store: &mut dyn StateStore) -> Result<State, Failure> {
    match store.load()? {
        Some(s) => Ok(s),
        None => Err(no_state(&store.location())),
    }
}

/// The one host `selector` (ADDR or ADDR:PORT) names; an address shared by several ports needs
/// the port.
pub fn find_host<'a>(
    state: &'a State,
    selector: &str,
    location: &str,
) -> Result<&'a HostState, Failure> {
    let matches: Vec<&HostState> = state
        .hosts
        .iter()
        .filter(|h| h.id().matches(selector))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => {
            let known: Vec<String> = state.hosts.iter().map(|h| h.id().to_string()).collect();
            let known = if known.is_empty() {
                "the state has no hosts".to_string()
            } else {
                format!("hosts in state: {}", known.join(", "))
            };
            Err(Failure::error(format!(
                "host {selector} is not in the state {location} ({known})"
            )))
        }
        many => {
            let ids: Vec<String> = many
                .iter()
                .map(|h| format!("{}:{}", h.address, h.port))
                .collect();
            Err(Failure::error(format!(
                "{selector} names several hosts in {location}: {}; give ADDR:PORT",
                ids.join(", ")
            )))
        }
    }
}

/// A write of the state: the serial before and after, and where the previous version is kept.
pub struct Written {
    pub before: u64,
    pub after: u64,
    pub history: String,
}

/// `state rm`: the host removed, and whether unfinished steps are still recorded for it.
pub struct Removed {
    pub id: HostId,
    pub written: Written,
    pub unfinished_steps: bool,
}

/// `state mv`: from where to where, and the etcd peer URL still recorded for it.
pub struct Moved {
    pub from: HostId,
    pub to: HostId,
    pub written: Written,
    pub peer_url: Option<String>,
}

/// Load the state under the lock (checked before locking too, so a mistyped -state does not
/// leave a stray lock file), change it with `change`, write it.
fn change_locked<R>(
    store: &mut dyn StateStore,
    operation: &str,
    lock_timeout: Duration,
    change: impl FnOnce(&mut State, &str) -> Result<R, Failure>,
) -> Result<(R, Written), Failure> {
    existing(store)?;
    let guard = store.lock(operation, lock_timeout)?;
    let mut state = existing(store)?;
    let done = change(&mut state, &store.location())?;
    let before = state.serial;
    let outcome = store.write(&state)?;
    guard.unlock()?;
    let written = Written {
        before,
        after: outcome.serial(),
        history: store.history_hint(),
    };
    Ok((done, written))
}

/// Forget the host `selector` names, under the lock.
pub fn rm(
    store: &mut dyn StateStore,
    selector: &str,
    lock_timeout: Duration,
) -> Result<Removed, Failure> {
    let ((id, unfinished_steps), written) =
        change_locked(store, "state rm", lock_timeout, |state, location| {
            let id = find_host(state, selector, location)?.id();
            state.remove_host(&id);
            let unfinished = state
                .intents
                .iter()
                .any(|i| i.address == id.address && i.port == id.port);
            Ok((id, unfinished))
        })?;
    Ok(Removed {
        id,
        written,
        unfinished_steps,
    })
}

/// `NEW` of `state mv`: `ADDR`, `ADDR:PORT` or `[IPv6]:PORT`; without a port, `port` stays.
/// Checked as the spec checks a host's `ssh.address` and `ssh.port`.
pub fn parse_new_address(new: &str, port: u16) -> Result<HostId, String> {
    let bad_port = |p: &str| format!("{new}: `{p}` is not a port (1 to 65535)");
    let (addr, port) = if let Some(rest) = new.strip_prefix('[') {
        let (a, tail) = rest
            .split_once(']')
            .ok_or_else(|| format!("{new}: `[` without `]`"))?;
        match tail.strip_prefix(':') {
            Some(p) => (a, p.parse::<u16>().map_err(|_| bad_port(p))?),
            None if tail.is_empty() => (a, port),
            None => return Err(format!("{new}: expected [IPv6]:PORT")),
        }
    } else if new.matches(':').count() == 1 {
        let (a, p) = new.split_once(':').unwrap_or((new, ""));
        (a, p.parse::<u16>().map_err(|_| bad_port(p))?)
    } else {
        (new, port)
    };
    let target = crate::spec::SshTarget::new(addr.to_string(), port);
    let problems: Vec<String> = crate::spec::target_findings(&target, "NEW")
        .into_iter()
        .filter_map(|f| match f {
            crate::spec::TargetFinding::Error { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    if !problems.is_empty() {
        return Err(format!("{new}: {}", problems.join("; ")));
    }
    Ok(HostId::new(addr.to_string(), port))
}

/// Move a host's record to a new address under the lock: everything recorded is kept (node
/// name, etcd member, machine-id, host key), the address and the recorded access follow, and
/// so do its unfinished steps. Refused when NEW is already recorded or OLD is not.
pub fn mv(
    store: &mut dyn StateStore,
    old: &str,
    new: &str,
    lock_timeout: Duration,
) -> Result<Moved, Failure> {
    let ((from, to, peer_url), written) =
        change_locked(store, "state mv", lock_timeout, |state, location| {
            move_host(state, old, new, location)
        })?;
    Ok(Moved {
        from,
        to,
        written,
        peer_url,
    })
}

/// `mv` on the loaded state: from, to and the etcd peer URL still recorded.
fn move_host(
    state: &mut State,
    old: &str,
    new: &str,
    location: &str,
) -> Result<(HostId, HostId, Option<String>), Failure> {
    let from = find_host(state, old, location)?.id();
    let to = parse_new_address(new, from.port).map_err(Failure::error)?;
    if let Some(h) = state
        .hosts
        .iter()
        .find(|h| h.address.eq_ignore_ascii_case(&to.address) && h.port == to.port)
    {
        return Err(Failure::error(format!(
            "{to} is already in the state {location} (as {}); `state rm` it first if that record is stale",
            h.node_name
                .as_deref()
                .unwrap_or("a host without a node name")
        )));
    }
    let Some(mut h) = state.remove_host(&from) else {
        return Err(Failure::error(format!("host {from} is not in the state")));
    };
    h.address = to.address.clone();
    h.port = to.port;
    if let Some(a) = &mut h.access {
        a.ssh.address = to.address.clone();
        a.ssh.port = to.port;
    }
    let peer = h.etcd.as_ref().map(|e| e.peer_url.clone());
    state.upsert_host(h);
    for i in &mut state.intents {
        if i.address == from.address && i.port == from.port {
            i.address = to.address.clone();
            i.port = to.port;
        }
    }
    Ok((from, to, peer))
}

/// The state (or the version with `serial`) as canonical JSON.
pub fn pull(store: &mut dyn StateStore, serial: Option<u64>) -> Result<String, Failure> {
    let state = match serial {
        Some(n) => store.load_serial(n)?,
        None => existing(store)?,
    };
    state.to_canonical_json().map_err(|source| {
        StateError::Serialize {
            path: store.location().into(),
            source,
        }
        .into()
    })
}

/// `state push`: what was pushed and what the store did with it.
pub struct Pushed {
    pub state: State,
    pub outcome: WriteOutcome,
}

/// Replace the state with FILE (`-` for stdin), under the lock, keeping its lineage and serial.
pub fn push(
    store: &mut dyn StateStore,
    file: &Path,
    force: bool,
    lock_timeout: Duration,
) -> Result<Pushed, Failure> {
    let bytes = if file == Path::new("-") {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
            .map_err(|e| Failure::error(format!("cannot read the state from stdin: {e}")))?;
        b
    } else {
        std::fs::read(file)
            .map_err(|e| Failure::error(format!("cannot read {}: {e}", file.display())))?
    };
    let pushed = state::parse(file, &bytes)?;
    let guard = store.lock("state push", lock_timeout)?;
    let outcome = store.push(&pushed, force)?;
    guard.unlock()?;
    Ok(Pushed {
        state: pushed,
        outcome,
    })
}

/// `force-unlock`: what the store found, and where a local state's lock file is.
pub struct Unlocked {
    pub outcome: ForceUnlockOutcome,
    /// The lock file of a local state (its OS file lock frees itself when the holder exits);
    /// `None` for a remote backend.
    pub local_lock: Option<PathBuf>,
}

/// Break the lock with ID `id` of the state at `location` (in `store`): a remote backend
/// releases it; a local state's is never broken (see `StateStore::force_unlock`).
pub fn force_unlock(
    store: &dyn StateStore,
    location: &Path,
    id: &str,
) -> Result<Unlocked, Failure> {
    let is_remote = location.to_str().is_some_and(state::is_etcd_location);
    let outcome = store.force_unlock(id)?;
    Ok(Unlocked {
        outcome,
        local_lock: (!is_remote).then(|| LocalStore::new(location).lock_path()),
    })
}
