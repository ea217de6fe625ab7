//! `destroy` (and `apply -destroy`): an apply of a destroy plan, and what is left to do when
//! there is no host left to reset.

use super::{Failure, Planned};

/// A destroy with nothing left to reset: a state that still names a cluster but records no host
/// (hosts removed with `state rm`, or a run killed between its last two checkpoints) is emptied.
pub(super) fn forget_empty_cluster(planned: &mut Planned) -> Result<(), Failure> {
    let state = &mut planned.state.state;
    if state.cluster.is_none() || !state.hosts.is_empty() {
        return Ok(());
    }
    state.cluster = None;
    planned.state.store.write(state)?;
    eprintln!("No host is left: the cluster's identity was removed from the state.");
    Ok(())
}
