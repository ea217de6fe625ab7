//! One file per command: translate flags, call the library, choose the exit code.

mod apply;
mod backup;
mod completion;
mod config;
mod graph;
mod init;
mod kubeconfig;
mod plan;
mod show;
mod state;
mod validate;

use crate::cli::{Cli, Command, GlobalArgs, TargetArgs, VersionArgs};
use crate::engine::{self, Failure, Planned};
use crate::exit::Exit;
use crate::plan::PlanOptions;
use crate::spec;
use crate::ssh::SshTransport;
use crate::state::{EtcdOptions, StateError, StateStore};
use std::path::{Path, PathBuf};

pub fn run(cli: Cli) -> Exit {
    let log = connects(&cli.command).and_then(crate::runlog::start);
    init_logging(cli.global.verbosity(), log);
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
        Command::Version(args) => version(&args),
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

/// `version`, and `version -k0s [-pre]`: the newest k0s release from the version index k0sctl
/// reads (cmd/version.go; `stable.txt`, with -pre `latest.txt`, of K0SFORM_K0S_VERSION_URL).
fn version(args: &VersionArgs) -> Exit {
    use crate::k0s::release::{self, Channel};
    if args.k0sctl {
        return Failure::error(
            "-k0sctl: k0sform does not track k0sctl's releases; `k0sform version` prints k0sform's own",
        )
        .report();
    }
    if !args.k0s {
        println!("k0sform {}", env!("CARGO_PKG_VERSION"));
        return Exit::Success;
    }
    let channel = if args.pre {
        Channel::Latest
    } else {
        Channel::Stable
    };
    let looked_up = engine::mirror().and_then(|m| {
        let url = m.version_index_url(channel);
        crate::download::fetch_text(&url, crate::download::TEXT_TIMEOUT)
            .and_then(|t| release::parse_version_index(&t).map_err(|e| format!("{url}: {e}")))
            .map_err(Failure::error)
    });
    match looked_up {
        Ok(v) => {
            println!("{v}");
            Exit::Success
        }
        Err(f) => f.report(),
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

/// Hosts worked on at once (probed, steps run), as k0sctl's `Concurrency`: cmd/flags.go
/// `initManager` takes `--concurrency` when given (already written over the spec's limit by
/// `apply`), else `spec.options.concurrency.limit` (default 30); phase/generic_phase.go
/// `parallelDo`: 0 is no limit, every host (of the spec and the state) at once. k0sform's
/// `-parallelism`, when given, wins over the spec.
fn hosts_at_once(flag: Option<usize>, spec: &spec::Spec, state_hosts: usize) -> usize {
    match flag {
        Some(n) => n.max(1),
        None if spec.options.concurrency_limit == 0 => (spec.hosts.len() + state_hosts).max(1),
        None => spec.options.concurrency_limit,
    }
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
    let parallelism = hosts_at_once(t.parallelism, &loaded.spec, state.state.hosts.len());
    engine::plan_with(
        loaded,
        state,
        transport,
        (opts, parallelism),
        probe_in,
        probe_out,
    )
    .await
}

/// Logs go to stderr: warnings by default, `-v` info, `-vv` debug, `-vvv` trace
/// (`K0SFORM_LOG` overrides with a tracing filter). With a run log (`runlog`), k0sform's own
/// debug events also go to that file, whatever the stderr level.
fn init_logging(verbose: u8, log: Option<crate::runlog::Writer>) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{EnvFilter, fmt};
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("K0SFORM_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    let stderr = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(crate::ui::stderr_color())
        .without_time()
        .with_filter(filter);
    // Only k0sform's own events: a library's debug output (TLS, HTTP/2 frames of the state etcd)
    // is noise, and k0sform vets what its own events carry.
    let file = log.map(|f| {
        fmt::layer()
            .with_writer(f)
            .with_ansi(false)
            .with_filter(Targets::new().with_target("k0sform", LevelFilter::DEBUG))
    });
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(limit: usize, hosts: usize) -> spec::Spec {
        let mut s = spec::Spec::default();
        s.options.concurrency_limit = limit;
        for i in 0..hosts {
            s.hosts.push(spec::HostSpec::new(
                spec::Role::Worker,
                spec::SshTarget::new(format!("127.0.0.{}", i + 1), 22),
                i,
            ));
        }
        s
    }

    #[test]
    fn hosts_at_once_is_the_spec_limit_unless_parallelism_is_given() {
        // k0sctl's default limit (30) when neither says otherwise.
        assert_eq!(hosts_at_once(None, &spec::Spec::default(), 0), 30);
        // `options.concurrency.limit` (or `--concurrency`, written over it).
        assert_eq!(hosts_at_once(None, &spec_with(2, 5), 0), 2);
        // 0: no limit, every host of the spec and the state at once.
        assert_eq!(hosts_at_once(None, &spec_with(0, 5), 3), 8);
        assert_eq!(hosts_at_once(None, &spec_with(0, 0), 0), 1);
        // -parallelism wins over the spec; at least one.
        assert_eq!(hosts_at_once(Some(7), &spec_with(2, 5), 0), 7);
        assert_eq!(hosts_at_once(Some(4), &spec_with(0, 5), 0), 4);
        assert_eq!(hosts_at_once(Some(0), &spec_with(2, 5), 0), 1);
    }
}
