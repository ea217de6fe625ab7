//! `k0sform state list|show|rm|pull` and `force-unlock`: read the state file through the store,
//! print it for people (or raw for `pull`), and forget hosts under the lock.

use crate::cli::{ForceUnlockArgs, GlobalArgs, StateCommand};
use crate::exit::Exit;
use crate::state::{
    self, ForceUnlockOutcome, HostState, LocalStore, State, StateError, StateStore,
};
use std::fmt::Write as _;
use std::path::Path;

pub fn run(global: &GlobalArgs, cmd: &StateCommand) -> Exit {
    let path = state::default_path(global);
    let mut store = LocalStore::new(&path);
    let result = match cmd {
        StateCommand::List => list(&mut store),
        StateCommand::Show { address } => show(&mut store, address),
        StateCommand::Rm { address } => rm(&mut store, global, address),
        StateCommand::Pull => pull(&mut store),
    };
    match result {
        Ok(text) => {
            print!("{text}");
            Exit::Success
        }
        Err(e) => {
            eprintln!("Error: {e}");
            e.exit()
        }
    }
}

/// A failed state command: a store error, or a message about the command's input.
enum Failure {
    State(StateError),
    Usage(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::State(e) => write!(f, "{e}"),
            Failure::Usage(m) => f.write_str(m),
        }
    }
}

impl Failure {
    fn exit(&self) -> Exit {
        match self {
            Failure::State(e) => e.exit(),
            Failure::Usage(_) => Exit::Error,
        }
    }
}

impl From<StateError> for Failure {
    fn from(e: StateError) -> Self {
        Failure::State(e)
    }
}

fn no_state(path: &Path) -> Failure {
    Failure::Usage(format!(
        "no state file at {} (use -state PATH, or -c for the spec whose folder holds it)",
        path.display()
    ))
}

fn list(store: &mut LocalStore) -> Result<String, Failure> {
    let Some(state) = store.load()? else {
        return Ok(format!("No state at {}.\n", store.path().display()));
    };
    Ok(render_list(&state))
}

/// One line per host under a header; columns padded so they line up.
pub(crate) fn render_list(state: &State) -> String {
    if state.hosts.is_empty() {
        return "No hosts in state.\n".to_string();
    }
    let header = ["ADDRESS", "ROLE", "NODE", "MACHINE-ID", "MEMBER-ID"].map(String::from);
    let mut rows = vec![header];
    for h in &state.hosts {
        rows.push([
            h.id().to_string(),
            h.role.to_string(),
            h.node_name.clone().unwrap_or_else(|| "-".into()),
            short(&h.machine_id).to_string(),
            h.etcd
                .as_ref()
                .map_or_else(|| "-".into(), |e| e.member_id.clone()),
        ]);
    }
    let mut widths = [0usize; 5];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Machine IDs are 32 hex digits; 12 tell hosts apart, like short git hashes.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The one host `selector` (ADDR or ADDR:PORT) names; an address shared by several ports needs
/// the port.
fn find_host<'a>(state: &'a State, selector: &str, path: &Path) -> Result<&'a HostState, Failure> {
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
            Err(Failure::Usage(format!(
                "host {selector} is not in the state {} ({known})",
                path.display()
            )))
        }
        many => {
            let ids: Vec<String> = many
                .iter()
                .map(|h| format!("{}:{}", h.address, h.port))
                .collect();
            Err(Failure::Usage(format!(
                "{selector} names several hosts in {}: {}; give ADDR:PORT",
                path.display(),
                ids.join(", ")
            )))
        }
    }
}

fn show(store: &mut LocalStore, selector: &str) -> Result<String, Failure> {
    let Some(state) = store.load()? else {
        return Err(no_state(store.path()));
    };
    let host = find_host(&state, selector, store.path())?;
    Ok(render_host(&state, host))
}

/// Every recorded field of one host, then the intents that concern it.
pub(crate) fn render_host(state: &State, h: &HostState) -> String {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut fields: Vec<(&str, String)> = vec![
        ("address", h.address.clone()),
        ("port", h.port.to_string()),
        ("role", h.role.to_string()),
        ("node name", opt(&h.node_name)),
        ("machine-id", h.machine_id.clone()),
        ("host key", h.host_key.clone()),
        ("host public key", opt(&h.host_public_key)),
    ];
    match &h.etcd {
        Some(e) => {
            fields.push(("etcd member ID", e.member_id.clone()));
            fields.push(("etcd peer URL", e.peer_url.clone()));
        }
        None => fields.push(("etcd member", "-".into())),
    }
    fields.push(("k0s version", opt(&h.k0s_version)));
    fields.push(("install flags sha256", opt(&h.install_flags_sha256)));
    fields.push(("config sha256", opt(&h.config_sha256)));
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (k, v) in fields {
        let _ = writeln!(out, "{:<width$} {v}", format!("{k}:"));
    }
    let intents: Vec<_> = state
        .intents
        .iter()
        .filter(|i| i.address == h.address && i.port == h.port)
        .collect();
    if !intents.is_empty() {
        out.push_str("unfinished steps:\n");
        for i in intents {
            let _ = writeln!(out, "  {} ({}), started {}", i.step, i.kind, i.started_at);
        }
    }
    out
}

fn rm(store: &mut LocalStore, global: &GlobalArgs, selector: &str) -> Result<String, Failure> {
    // Checked before locking too, so a mistyped -state does not leave a stray lock file.
    if !store.path().exists() {
        return Err(no_state(store.path()));
    }
    let guard = store.lock("state rm", global.lock_timeout)?;
    let Some(mut state) = store.load()? else {
        return Err(no_state(store.path()));
    };
    let id = find_host(&state, selector, store.path())?.id();
    state.remove_host(&id);
    let before = state.serial;
    let outcome = store.write(&state)?;
    guard.unlock()?;
    let mut out = format!(
        "Removed host {id} from the state (serial {before} -> {}). The previous version is kept in {}.\n",
        outcome.serial(),
        store.backup_path().display()
    );
    if state
        .intents
        .iter()
        .any(|i| i.address == id.address && i.port == id.port)
    {
        out.push_str(
            "Note: the state still records unfinished steps for this host (see `state pull`).\n",
        );
    }
    Ok(out)
}

fn pull(store: &mut LocalStore) -> Result<String, Failure> {
    let Some(state) = store.load()? else {
        return Err(no_state(store.path()));
    };
    state.to_canonical_json().map_err(|source| {
        Failure::State(StateError::Serialize {
            path: store.path().to_path_buf(),
            source,
        })
    })
}

pub fn force_unlock(global: &GlobalArgs, args: &ForceUnlockArgs) -> Exit {
    let store = LocalStore::new(state::default_path(global));
    match store.force_unlock(&args.id) {
        Ok(ForceUnlockOutcome::NotLocked { stale }) => {
            match stale {
                Some(h) => println!(
                    "The state is not locked: lock {} was left by pid {} on {} ({}, since {}), \
                     and the OS released it when that process ended. Cleared its record.",
                    h.id, h.pid, h.host, h.operation, h.started_at
                ),
                None => println!("The state is not locked; nothing to unlock."),
            }
            println!(
                "Local state locks are OS file locks on {}: they are freed automatically when the \
                 holding process exits, even when it is killed. force-unlock is needed only for \
                 remote state backends.",
                store.lock_path().display()
            );
            Exit::Success
        }
        Ok(ForceUnlockOutcome::Released { holder }) => {
            println!("Lock {} released ({holder}).", holder.id);
            Exit::Success
        }
        Err(e) => {
            eprintln!("Error: {e}");
            e.exit()
        }
    }
}
