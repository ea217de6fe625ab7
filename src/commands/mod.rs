//! One file per command: translate flags, call the library, choose the exit code.

mod apply;
mod backup;
mod completion;
mod graph;
mod init;
mod kubeconfig;
mod plan;
mod show;
mod state;
mod validate;

use crate::cli::{Cli, Command, GlobalArgs, TargetArgs};
use crate::engine::{self, Failure, Planned};
use crate::exit::Exit;
use crate::plan::PlanOptions;
use crate::spec;
use crate::ssh::SshTransport;
use crate::state::{EtcdOptions, StateError, StateStore};
use std::path::{Path, PathBuf};

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
        Command::Destroy(args) => apply::destroy(&cli.global, &args),
        Command::Show(args) => show::run(&cli.global, &args),
        Command::Graph(args) => graph::run(&cli.global, &args),
        Command::Kubeconfig(args) => kubeconfig::run(&cli.global, &args),
        Command::Backup(args) => backup::run(&cli.global, &args),
    }
}

/// Where the state is: `-state`, else `K0SFORM_STATE`, else beside the spec (`-c`).
fn state_location(global: &GlobalArgs) -> PathBuf {
    crate::state::default_path(global.state.as_deref(), &global.config)
}

/// The store the command line names: the state's location and the `--etcd-*` TLS flags.
fn open_store(global: &GlobalArgs) -> Result<Box<dyn StateStore>, StateError> {
    let opts = EtcdOptions::from_flags(
        global.etcd_cacert.as_deref(),
        global.etcd_cert.as_deref(),
        global.etcd_key.as_deref(),
    );
    let location = state_location(global);
    if let Some(w) = crate::state::transport_warning(&location) {
        eprintln!("Warning: {w}");
    }
    crate::state::open(&location, &opts)
}

/// The spec `-c` names, then the state in the store the command line names.
fn load_inputs(global: &GlobalArgs) -> Result<(spec::Loaded, engine::StateCtx), Failure> {
    let loaded = engine::load_spec(&global.config)?;
    let state = engine::load_state(open_store(global)?)?;
    Ok((loaded, state))
}

fn plan_options(t: &TargetArgs) -> Result<PlanOptions, Failure> {
    Ok(PlanOptions {
        replace: t.replace.clone(),
        target: t.target.clone(),
        exclude: t.exclude.clone(),
        refresh_only: t.refresh_only,
        refuse_first_contact: t.host_keys.refuse_first_contact(),
        no_drain: t.no_drain,
        allow_downgrade: t.allow_downgrade,
        restore: match &t.restore_from {
            Some(p) => Some(engine::restore_archive(p)?),
            None => None,
        },
        show_secrets: false,
        destroy: false,
    })
}

/// `-destroy` resets every host of the spec and the state: the flags that narrow or seed a plan
/// do not go with it (`plan -destroy`, `apply -destroy`).
fn refuse_with_destroy(t: &TargetArgs) -> Result<(), Failure> {
    for (given, flag) in [
        (t.refresh_only, "-refresh-only"),
        (!t.target.is_empty(), "-target"),
        (t.restore_from.is_some(), "-restore-from"),
    ] {
        if given {
            return Err(Failure::error(format!(
                "-destroy cannot be used with {flag}: a destroy resets every host of the spec and the state"
            )));
        }
    }
    Ok(())
}

/// Load, probe and diff, as `plan` and `graph` do.
async fn plan_now(
    global: &GlobalArgs,
    (t, opts): (&TargetArgs, &PlanOptions),
    transport: &SshTransport,
    probe_in: Option<&Path>,
    probe_out: Option<&Path>,
) -> Result<Planned, Failure> {
    let (loaded, state) = load_inputs(global)?;
    engine::plan_with(
        loaded,
        state,
        transport,
        (opts, t.parallelism),
        probe_in,
        probe_out,
    )
    .await
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
