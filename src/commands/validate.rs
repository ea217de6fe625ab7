//! `k0sform validate`: check the spec offline.

use crate::cli::GlobalArgs;
use crate::exit::Exit;

pub fn run(_global: &GlobalArgs) -> Exit {
    eprintln!("Error: `validate` is not available in this build yet");
    Exit::Error
}
