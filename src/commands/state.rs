//! `k0sform state list|show|rm|mv|pull|push` and `force-unlock`: read the state through the store
//! `-state` names (a file or etcd), print it for people (or raw for `pull`), forget hosts and
//! replace the whole state (`push`) under the lock.

use crate::cli::{ForceUnlockArgs, GlobalArgs, StateCommand};
use crate::exit::Exit;
use crate::hostid::HostId;
use crate::state::{
    self, ForceUnlockOutcome, HostState, LocalStore, State, StateError, StateStore, WriteOutcome,
};
use std::fmt::Write as _;
use std::path::Path;

pub fn run(global: &GlobalArgs, cmd: &StateCommand) -> Exit {
    let mut store = match super::open_store(global) {
        Ok(s) => s,
        Err(e) => return report(&e, e.exit()),
    };
    let store = store.as_mut();
    let result = match cmd {
        StateCommand::List => list(store),
        StateCommand::Show { address } => show(store, address),
        StateCommand::Rm { address } => rm(store, global, address),
        StateCommand::Mv { old, new } => mv(store, global, old, new),
        StateCommand::Pull { serial } => pull(store, *serial),
        StateCommand::Push { file, force } => push(store, global, file, *force),
    };
    match result {
        // `pull` prints the state as JSON, to be piped or pushed back: serde_json escapes
        // control characters there. Everything else is for people.
        Ok(text) if matches!(cmd, StateCommand::Pull { .. }) => {
            print!("{text}");
            Exit::Success
        }
        Ok(text) => {
            print!("{}", crate::ui::escape_lines(&text));
            Exit::Success
        }
        Err(e) => report(&e, e.exit()),
    }
}

/// `Error: …` on stderr. State commands quote what a state or a lock says (addresses, holder
/// fields, parse errors that cite the file's text): escaped, line breaks kept, as
/// `ops::Failure::report` does for the other commands.
fn report(e: &dyn std::fmt::Display, exit: Exit) -> Exit {
    eprintln!("Error: {}", crate::ui::escape_lines(&e.to_string()));
    exit
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

fn no_state(location: &str) -> Failure {
    Failure::Usage(if state::is_etcd_location(location) {
        format!("no state at {location} (apply creates it; `state push FILE` moves one there)")
    } else {
        format!(
            "no state file at {location} (use -state PATH or URL, or -c for the spec whose folder \
             holds it)"
        )
    })
}

fn list(store: &mut dyn StateStore) -> Result<String, Failure> {
    let Some(state) = store.load()? else {
        return Ok(format!("No state at {}.\n", store.location()));
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
        // A state file is anyone's to edit: what it says is shown escaped.
        rows.push(
            [
                h.id().to_string(),
                h.role.to_string(),
                h.node_name.clone().unwrap_or_else(|| "-".into()),
                short(&h.machine_id).to_string(),
                h.etcd
                    .as_ref()
                    .map_or_else(|| "-".into(), |e| e.member_id.clone()),
            ]
            .map(|c| crate::ui::escape(&c).into_owned()),
        );
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
    if !state.bastions.is_empty() {
        out.push_str("\nBASTION  HOST KEY\n");
        for b in &state.bastions {
            let _ = writeln!(
                out,
                "{}  {}",
                crate::ui::escape(&b.id().to_string()),
                crate::ui::escape(&b.host_key)
            );
        }
    }
    out
}

/// Machine IDs are 32 hex digits; 12 tell hosts apart, like short git hashes.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The one host `selector` (ADDR or ADDR:PORT) names; an address shared by several ports needs
/// the port.
fn find_host<'a>(
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
            Err(Failure::Usage(format!(
                "host {selector} is not in the state {location} ({known})"
            )))
        }
        many => {
            let ids: Vec<String> = many
                .iter()
                .map(|h| format!("{}:{}", h.address, h.port))
                .collect();
            Err(Failure::Usage(format!(
                "{selector} names several hosts in {location}: {}; give ADDR:PORT",
                ids.join(", ")
            )))
        }
    }
}

fn show(store: &mut dyn StateStore, selector: &str) -> Result<String, Failure> {
    let Some(state) = store.load()? else {
        return Err(no_state(&store.location()));
    };
    let host = find_host(&state, selector, &store.location())?;
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
    fields.push((
        "k0s version",
        opt(&h.k0s_version.as_ref().map(ToString::to_string)),
    ));
    fields.push(("install flags sha256", opt(&h.install_flags_sha256)));
    fields.push(("config sha256", opt(&h.config_sha256)));
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (k, v) in fields {
        let _ = writeln!(out, "{:<width$} {}", format!("{k}:"), crate::ui::escape(&v));
    }
    let intents: Vec<_> = state
        .intents
        .iter()
        .filter(|i| i.address == h.address && i.port == h.port)
        .collect();
    if !intents.is_empty() {
        out.push_str("unfinished steps:\n");
        for i in intents {
            let line = format!("{} ({}), started {}", i.step, i.kind, i.started_at);
            let _ = writeln!(out, "  {}", crate::ui::escape(&line));
        }
    }
    out
}

fn rm(store: &mut dyn StateStore, global: &GlobalArgs, selector: &str) -> Result<String, Failure> {
    let location = store.location();
    // Checked before locking too, so a mistyped -state does not leave a stray lock file.
    if store.load()?.is_none() {
        return Err(no_state(&location));
    }
    let guard = store.lock("state rm", global.lock_timeout)?;
    let Some(mut state) = store.load()? else {
        return Err(no_state(&location));
    };
    let id = find_host(&state, selector, &location)?.id();
    state.remove_host(&id);
    let before = state.serial;
    let outcome = store.write(&state)?;
    guard.unlock()?;
    let mut out = format!(
        "Removed host {id} from the state (serial {before} -> {}). The previous version is kept in {}.\n",
        outcome.serial(),
        store.history_hint()
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

/// `NEW` of `state mv`: `ADDR`, `ADDR:PORT` or `[IPv6]:PORT`; without a port, `port` stays.
/// Checked as the spec checks a host's `ssh.address` and `ssh.port`.
pub(crate) fn parse_new_address(new: &str, port: u16) -> Result<HostId, String> {
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
fn mv(
    store: &mut dyn StateStore,
    global: &GlobalArgs,
    old: &str,
    new: &str,
) -> Result<String, Failure> {
    let location = store.location();
    if store.load()?.is_none() {
        return Err(no_state(&location));
    }
    let guard = store.lock("state mv", global.lock_timeout)?;
    let Some(mut state) = store.load()? else {
        return Err(no_state(&location));
    };
    let from = find_host(&state, old, &location)?.id();
    let to = parse_new_address(new, from.port).map_err(Failure::Usage)?;
    if let Some(h) = state
        .hosts
        .iter()
        .find(|h| h.address.eq_ignore_ascii_case(&to.address) && h.port == to.port)
    {
        return Err(Failure::Usage(format!(
            "{to} is already in the state {location} (as {}); `state rm` it first if that record is stale",
            h.node_name
                .as_deref()
                .unwrap_or("a host without a node name")
        )));
    }
    let Some(mut h) = state.remove_host(&from) else {
        return Err(Failure::Usage(format!("host {from} is not in the state")));
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
    let before = state.serial;
    let outcome = store.write(&state)?;
    guard.unlock()?;
    let mut out = format!(
        "Moved host {from} to {to} in the state (serial {before} -> {}). The previous version is kept in {}.\n",
        outcome.serial(),
        store.history_hint()
    );
    if let Some(p) = peer {
        let _ = writeln!(
            out,
            "Note: its etcd peer URL is still recorded as {}; `apply` records the one the cluster shows.",
            crate::ui::escape(&p)
        );
    }
    Ok(out)
}

fn pull(store: &mut dyn StateStore, serial: Option<u64>) -> Result<String, Failure> {
    let state = match serial {
        Some(n) => store.load_serial(n)?,
        None => match store.load()? {
            Some(s) => s,
            None => return Err(no_state(&store.location())),
        },
    };
    state.to_canonical_json().map_err(|source| {
        Failure::State(StateError::Serialize {
            path: store.location().into(),
            source,
        })
    })
}

/// Replace the state with FILE (`-` for stdin), under the lock, keeping its lineage and serial.
fn push(
    store: &mut dyn StateStore,
    global: &GlobalArgs,
    file: &Path,
    force: bool,
) -> Result<String, Failure> {
    let bytes = if file == Path::new("-") {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
            .map_err(|e| Failure::Usage(format!("cannot read the state from stdin: {e}")))?;
        b
    } else {
        std::fs::read(file)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", file.display())))?
    };
    let pushed = state::parse(file, &bytes)?;
    let guard = store.lock("state push", global.lock_timeout)?;
    let outcome = store.push(&pushed, force)?;
    guard.unlock()?;
    let location = store.location();
    Ok(match outcome {
        WriteOutcome::Unchanged { serial } => format!(
            "{location} already holds this state (lineage {}, serial {serial}); nothing written.\n",
            pushed.lineage
        ),
        WriteOutcome::Written { serial } => format!(
            "Pushed {} to {location}: lineage {}, serial {serial}.\n",
            file.display(),
            pushed.lineage
        ),
    })
}

pub fn force_unlock(global: &GlobalArgs, args: &ForceUnlockArgs) -> Exit {
    let location = super::state_location(global);
    let is_remote = location.to_str().is_some_and(state::is_etcd_location);
    let store = match super::open_store(global) {
        Ok(s) => s,
        Err(e) => return report(&e, e.exit()),
    };
    let escape = crate::ui::escape;
    match store.force_unlock(&args.id) {
        Ok(ForceUnlockOutcome::NotLocked { stale }) => {
            match stale {
                // What a lock file says is anyone's to write: shown escaped.
                Some(h) => println!(
                    "The state is not locked: lock {} was left by pid {} on {} ({}, since {}), \
                     and the OS released it when that process ended. Cleared its record.",
                    escape(&h.id),
                    h.pid,
                    escape(&h.host),
                    escape(&h.operation),
                    escape(&h.started_at)
                ),
                None => println!("The state is not locked; nothing to unlock."),
            }
            if !is_remote {
                println!(
                    "Local state locks are OS file locks on {}: they are freed automatically when \
                     the holding process exits, even when it is killed. force-unlock is needed \
                     only for remote state backends.",
                    LocalStore::new(&location).lock_path().display()
                );
            }
            Exit::Success
        }
        Ok(ForceUnlockOutcome::Released { holder }) => {
            println!("Lock {} released ({holder}).", escape(&holder.id));
            Exit::Success
        }
        Err(e) => report(&e, e.exit()),
    }
}
