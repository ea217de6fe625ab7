//! One file per command: translate flags, call the library, choose the exit code.

mod apply;
mod backup;
mod completion;
mod config;
mod graph;
mod init;
mod inputs;
mod k0sctl_day2;
mod kubeconfig;
mod logging;
mod plan;
mod prompt;
mod show;
mod state;
mod validate;
mod version;

use crate::cli::{Cli, Command};
use crate::exit::Exit;
use crate::ops::{open_store, state_location};
use inputs::{load_inputs, plan_now, plan_options, refuse_with_destroy};

pub fn run(cli: Cli) -> Exit {
    let log = connects(&cli.command).and_then(crate::runlog::start);
    logging::init(cli.global.verbosity(), log);
    let exit = dispatch(cli);
    crate::runlog::finish(exit.code());
    exit
}

/// The command's name for the debug log (never its arguments), when it connects to hosts: only
/// those runs are logged, as k0sctl logs the commands that connect.
fn connects(command: &Command) -> Option<&'static str> {
    Some(match command {
        Command::Plan(_) => "plan",
        Command::Apply(_) => "apply",
        Command::Destroy(_) => "destroy",
        Command::Graph(_) => "graph",
        Command::Kubeconfig(_) => "kubeconfig",
        Command::Backup(_) => "backup",
        Command::Config(_) => "config",
        _ => return None,
    })
}

fn dispatch(cli: Cli) -> Exit {
    // -chdir comes before anything reads a path (Terraform's rule): the spec, the state, plan files.
    if let Some(dir) = &cli.global.chdir
        && let Err(e) = std::env::set_current_dir(dir)
    {
        eprintln!("Error: -chdir={}: {e}", dir.display());
        return Exit::Error;
    }
    match cli.command {
        Command::Version(args) => version::run(&args),
        Command::Validate(args) => validate::run(&cli.global, &args),
        Command::Init(args) => init::run(&args),
        Command::Completion(args) => completion::run(&args),
        Command::State(cmd) => state::run(&cli.global, &cmd),
        Command::ForceUnlock(args) => state::force_unlock(&cli.global, &args),
        Command::Plan(args) => plan::run(&cli.global, &args),
        Command::Apply(args) => apply::run(&cli.global, &args),
        Command::Destroy(args) => apply::destroy(&cli.global, &args),
        Command::Show(args) => show::run(&cli.global, &args),
        Command::Graph(args) => graph::run(&cli.global, &args),
        Command::Kubeconfig(args) => kubeconfig::run(&cli.global, &args),
        Command::Backup(args) => backup::run(&cli.global, &args),
        Command::Config(cmd) => config::run(&cli.global, &cmd),
    }
}
