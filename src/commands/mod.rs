//! One file per command: translate flags, call the library, choose the exit code.

mod apply;
mod completion;
mod graph;
mod init;
mod plan;
mod show;
mod state;
mod validate;

use crate::cli::{Cli, Command};
use crate::exit::Exit;

pub fn run(cli: Cli) -> Exit {
    init_logging(cli.global.verbose);
    // -chdir comes before anything reads a path (Terraform's rule): the spec, the state, plan files.
    if let Some(dir) = &cli.global.chdir
        && let Err(e) = std::env::set_current_dir(dir)
    {
        eprintln!("Error: -chdir={}: {e}", dir.display());
        return Exit::Error;
    }
    match cli.command {
        Command::Version => {
            println!("k0sform {}", env!("CARGO_PKG_VERSION"));
            Exit::Success
        }
        Command::Validate(args) => validate::run(&cli.global, &args),
        Command::Init(args) => init::run(&args),
        Command::Completion(args) => completion::run(&args),
        Command::State(cmd) => state::run(&cli.global, &cmd),
        Command::ForceUnlock(args) => state::force_unlock(&cli.global, &args),
        Command::Plan(args) => plan::run(&cli.global, &args),
        Command::Apply(args) => apply::run(&cli.global, &args),
        Command::Show(args) => show::run(&cli.global, &args),
        Command::Graph(args) => graph::run(&cli.global, &args),
    }
}

/// Logs go to stderr: warnings by default, `-v` info, `-vv` debug, `-vvv` trace
/// (`K0SFORM_LOG` overrides with a tracing filter).
fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("K0SFORM_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(crate::ui::stderr_is_tty() && std::env::var_os("NO_COLOR").is_none())
        .without_time()
        .try_init();
}
