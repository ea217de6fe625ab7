//! `k0sform state list|show|rm|mv|pull|push` and `force-unlock`: the state through the store
//! `-state` names (a file or etcd), printed for people (or raw for `pull`); the changes are
//! `ops::state`'s.

mod render;
mod unlock;

pub use render::list as render_list;
pub use unlock::force_unlock;

use crate::cli::{GlobalArgs, StateCommand};
use crate::exit::Exit;
use crate::ops::{Failure, state as ops};
use crate::state::{StateStore, WriteOutcome};
use std::fmt::Write as _;

pub fn run(global: &GlobalArgs, cmd: &StateCommand) -> Exit {
    let mut store = match super::open_store(global) {
        Ok(s) => s,
        Err(e) => return Failure::from(e).exit(),
    };
    let store = store.as_mut();
    let wait = global.lock_timeout;
    let result = match cmd {
        StateCommand::List => list(store),
        StateCommand::Show { address } => show(store, address),
        StateCommand::Rm { address } => ops::rm(store, address, wait).map(|r| removed(&r)),
        StateCommand::Mv { old, new } => ops::mv(store, old, new, wait).map(|m| moved(&m)),
        StateCommand::Pull { serial } => ops::pull(store, *serial),
        StateCommand::Push { file, force } => ops::push(store, file, *force, wait).map(|p| {
            let (location, lineage) = (store.location(), &p.state.lineage);
            match p.outcome {
                WriteOutcome::Unchanged { serial } => format!(
                    "{location} already holds this state (lineage {lineage}, serial {serial}); nothing written.\n"
                ),
                WriteOutcome::Written { serial } => format!(
                    "Pushed {} to {location}: lineage {lineage}, serial {serial}.\n",
                    file.display()
                ),
            }
        }),
    };
    match result {
        // `pull` prints the state as JSON, to be piped or pushed back: serde_json escapes
        // control characters there. Everything else is for people.
        Ok(text) if matches!(cmd, StateCommand::Pull { .. }) => print!("{text}"),
        Ok(text) => print!("{}", crate::ui::escape_lines(&text)),
        Err(f) => return f.exit(),
    }
    Exit::Success
}

fn list(store: &mut dyn StateStore) -> Result<String, Failure> {
    match store.load()? {
        Some(state) => Ok(render::list(&state)),
        None => Ok(format!("No state at {}.\n", store.location())),
    }
}

fn show(store: &mut dyn StateStore, selector: &str) -> Result<String, Failure> {
    let state = ops::existing(store)?;
    let host = ops::find_host(&state, selector, &store.location())?;
    Ok(render::host(&state, host))
}

fn removed(r: &ops::Removed) -> String {
    let w = &r.written;
    let mut out = format!(
        "Removed host {} from the state (serial {} -> {}). The previous version is kept in {}.\n",
        r.id, w.before, w.after, w.history
    );
    if r.unfinished_steps {
        out.push_str(
            "Note: the state still records unfinished steps for this host (see `state pull`).\n",
        );
    }
    out
}

fn moved(m: &ops::Moved) -> String {
    let w = &m.written;
    let mut out = format!(
        "Moved host {} to {} in the state (serial {} -> {}). The previous version is kept in {}.\n",
        m.from, m.to, w.before, w.after, w.history
    );
    if let Some(p) = &m.peer_url {
        let _ = writeln!(
            out,
            "Note: its etcd peer URL is still recorded as {}; `apply` records the one the cluster shows.",
            crate::ui::escape(p)
        );
    }
    out
}
