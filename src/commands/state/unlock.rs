//! `k0sform force-unlock ID`: break a remote state's lock; for a local state, say why it is
//! never needed.

use crate::cli::{ForceUnlockArgs, GlobalArgs};
use crate::exit::Exit;
use crate::ops::Failure;
use crate::state::{self, ForceUnlockOutcome, LocalStore};

pub fn force_unlock(global: &GlobalArgs, args: &ForceUnlockArgs) -> Exit {
    let location = super::super::state_location(global);
    let is_remote = location.to_str().is_some_and(state::is_etcd_location);
    let store = match super::super::open_store(global) {
        Ok(s) => s,
        Err(e) => return Failure::from(e).exit(),
    };
    let escape = crate::escape::escape;
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
        Err(e) => Failure::from(e).exit(),
    }
}
