//! `k0sform state list|show|rm|pull` and `force-unlock`.

use crate::cli::{ForceUnlockArgs, GlobalArgs, StateCommand};
use crate::exit::Exit;

pub fn run(_global: &GlobalArgs, _cmd: &StateCommand) -> Exit {
    eprintln!("Error: `state` is not available in this build yet");
    Exit::Error
}

pub fn force_unlock(_global: &GlobalArgs, _args: &ForceUnlockArgs) -> Exit {
    eprintln!("Error: `force-unlock` is not available in this build yet");
    Exit::Error
}
