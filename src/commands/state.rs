//! `k0sform state list|show|rm|mv|pull|push` and `force-unlock`: the state through the store
//! `-state` names (a file or etcd), printed for people (or raw for `pull`); the changes are
//! `ops::state`'s, the text `ui::state`'s.

use crate::cli::{ForceUnlockArgs, GlobalArgs, StateCommand};
use crate::exit::Exit;
use crate::ops::{Failure, state as ops};
use crate::ui::state as show;

pub fn run(global: &GlobalArgs, cmd: &StateCommand) -> Exit {
    let mut store = match super::open_store(global) {
        Ok(s) => s,
        Err(e) => return Failure::from(e).exit(),
    };
    let store = store.as_mut();
    let wait = global.lock_timeout;
    let result = match cmd {
        StateCommand::List => store.load().map_err(Failure::from).map(|s| match s {
            Some(state) => show::list(&state),
            None => format!("No state at {}.\n", store.location()),
        }),
        StateCommand::Show { address } => ops::existing(store).and_then(|state| {
            let host = ops::find_host(&state, address, &store.location())?;
            Ok(show::host(&state, host))
        }),
        StateCommand::Rm { address } => ops::rm(store, address, wait).map(|r| show::removed(&r)),
        StateCommand::Mv { old, new } => ops::mv(store, old, new, wait).map(|m| show::moved(&m)),
        StateCommand::Pull { serial } => ops::pull(store, *serial),
        StateCommand::Push { file, force } => {
            ops::push(store, file, *force, wait).map(|p| show::pushed(&p, file, &store.location()))
        }
    };
    match result {
        // `pull` prints the state as JSON, to be piped or pushed back: serde_json escapes
        // control characters there. Everything else is for people.
        Ok(text) if matches!(cmd, StateCommand::Pull { .. }) => print!("{text}"),
        Ok(text) => print!("{}", crate::escape::escape_lines(&text)),
        Err(f) => return f.exit(),
    }
    Exit::Success
}

/// `k0sform force-unlock ID`: break a remote state's lock; for a local state, say why it is
/// never needed.
pub fn force_unlock(global: &GlobalArgs, args: &ForceUnlockArgs) -> Exit {
    let location = super::state_location(global);
    let unlocked = super::open_store(global)
        .map_err(Failure::from)
        .and_then(|store| ops::force_unlock(store.as_ref(), &location, &args.id));
    match unlocked {
        // Escaped where it is rendered: every field a lock record holds.
        Ok(u) => print!("{}", show::unlocked(&u)),
        Err(f) => return f.exit(),
    }
    Exit::Success
}
