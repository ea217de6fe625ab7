//! One file per command: translate flags, call the library, choose the exit code.

mod state;
mod validate;

use crate::cli::{Cli, Command};
use crate::exit::Exit;

pub fn run(cli: Cli) -> Exit {
    match cli.command {
        Command::Version => {
            println!("k0sform {}", env!("CARGO_PKG_VERSION"));
            Exit::Success
        }
        Command::Validate => validate::run(&cli.global),
        Command::State(cmd) => state::run(&cli.global, &cmd),
        Command::ForceUnlock(args) => state::force_unlock(&cli.global, &args),
        other => {
            eprintln!(
                "Error: `{}` is not available in this build yet",
                command_name(&other)
            );
            Exit::Error
        }
    }
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Validate => "validate",
        Command::Plan(_) => "plan",
        Command::Apply(_) => "apply",
        Command::Show(_) => "show",
        Command::Graph(_) => "graph",
        Command::State(_) => "state",
        Command::ForceUnlock(_) => "force-unlock",
        Command::Version => "version",
    }
}
