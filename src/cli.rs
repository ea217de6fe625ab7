//! Command-line definitions (clap). Terraform-style single-dash long flags (`-auto-approve`,
//! `-out=FILE`) are accepted exactly like their `--` forms: `normalize` rewrites them before clap.

use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "k0sform", version, about = "Plan and apply changes to k0s clusters, with a state file", after_help = crate::exit::EXIT_CODES_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Spec file or folder (repeatable; default k0sctl.yaml, then k0sctl.yml)
    #[arg(
        short = 'c',
        long = "config",
        global = true,
        help_heading = "Global options",
        value_name = "PATH"
    )]
    pub config: Vec<PathBuf>,
    /// State file, or etcd://HOST:PORT[,HOST:PORT…]/PREFIX (etcds:// for TLS); also
    /// K0SFORM_STATE (default k0sform.state.json beside the spec)
    #[arg(
        long = "state",
        global = true,
        help_heading = "Global options",
        value_name = "PATH|URL"
    )]
    pub state: Option<PathBuf>,
    /// CA certificate of the etcd holding the state (etcds://; also K0SFORM_ETCD_CACERT)
    #[arg(
        long = "etcd-cacert",
        global = true,
        help_heading = "Global options",
        value_name = "FILE"
    )]
    pub etcd_cacert: Option<PathBuf>,
    /// Client certificate for the state etcd (also K0SFORM_ETCD_CERT)
    #[arg(
        long = "etcd-cert",
        global = true,
        help_heading = "Global options",
        value_name = "FILE"
    )]
    pub etcd_cert: Option<PathBuf>,
    /// Client key for the state etcd (also K0SFORM_ETCD_KEY)
    #[arg(
        long = "etcd-key",
        global = true,
        help_heading = "Global options",
        value_name = "FILE"
    )]
    pub etcd_key: Option<PathBuf>,
    /// How long to wait for the state lock (e.g. 30s, 2m)
    #[arg(long = "lock-timeout", global = true, help_heading = "Global options", value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub lock_timeout: std::time::Duration,
    /// No colour in output (also NO_COLOR)
    #[arg(long = "no-color", global = true, help_heading = "Global options")]
    pub no_color: bool,
    /// More logging (repeat for more)
    #[arg(short = 'v', long = "verbose", global = true, help_heading = "Global options", action = clap::ArgAction::Count)]
    pub verbose: u8,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 0s, 30s, 2m)"))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check the spec offline: fields, types, hosts, paths, versions
    Validate,
    /// Probe the hosts and show what apply would change
    Plan(PlanArgs),
    /// Plan (or take a saved plan) and carry it out
    Apply(ApplyArgs),
    /// Show a saved plan, or the state
    Show(ShowArgs),
    /// Print the plan's step graph as Graphviz DOT
    Graph(GraphArgs),
    /// Inspect or edit the state
    #[command(subcommand)]
    State(StateCommand),
    /// Remove a stale lock by its ID
    ForceUnlock(ForceUnlockArgs),
    /// Print the version
    Version,
}

#[derive(Debug, Args, Clone, Default)]
pub struct TargetArgs {
    /// Treat this host (ADDR or ADDR:PORT) as rebuilt: replace it (repeatable)
    #[arg(long = "replace", value_name = "ADDR")]
    pub replace: Vec<String>,
    /// Only plan for these hosts (repeatable)
    #[arg(long = "target", value_name = "ADDR")]
    pub target: Vec<String>,
    /// Leave these hosts out (repeatable); unreachable hosts must be excluded to plan
    #[arg(long = "exclude", value_name = "ADDR")]
    pub exclude: Vec<String>,
    /// Only record reality into the state; change no host
    #[arg(long = "refresh-only")]
    pub refresh_only: bool,
    /// Hosts probed (and steps run) at once
    #[arg(long = "parallelism", value_name = "N", default_value_t = 32)]
    pub parallelism: usize,
}

#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Save the plan to FILE for `apply FILE`
    #[arg(long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the plan as JSON
    #[arg(long = "json")]
    pub json: bool,
    /// Exit 0 when there are no changes, 2 when there are
    #[arg(long = "detailed-exitcode")]
    pub detailed_exitcode: bool,
    /// Save what the probe saw as JSON
    #[arg(long = "probe-out", value_name = "FILE")]
    pub probe_out: Option<PathBuf>,
    /// Plan against a saved probe instead of probing (offline)
    #[arg(long = "probe-in", value_name = "FILE")]
    pub probe_in: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct ApplyArgs {
    /// A plan saved by `plan -out`
    pub plan_file: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Do not ask for confirmation
    #[arg(long = "auto-approve")]
    pub auto_approve: bool,
    /// Print progress as JSON lines
    #[arg(long = "json")]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct ShowArgs {
    /// A plan saved by `plan -out` (default: the state)
    pub file: Option<PathBuf>,
    /// Print JSON
    #[arg(long = "json")]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct GraphArgs {
    /// A plan saved by `plan -out` (default: plan now)
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, Subcommand, Clone)]
pub enum StateCommand {
    /// One line per host: address, role, node name, machine-id, member ID
    List,
    /// All recorded fields of one host
    Show {
        /// ADDR or ADDR:PORT
        address: String,
    },
    /// Forget a host (the previous state is kept as .backup)
    Rm {
        /// ADDR or ADDR:PORT
        address: String,
    },
    /// Print the raw state JSON (-serial N: a kept previous version)
    Pull {
        /// Print the kept version with this serial instead of the current one
        #[arg(long = "serial", value_name = "N")]
        serial: Option<u64>,
    },
    /// Replace the state with FILE (a `state pull` output), keeping its lineage and serial
    Push {
        /// State JSON to store
        file: PathBuf,
        /// Overwrite another lineage, a newer serial, or the same serial with other content
        #[arg(long = "force")]
        force: bool,
    },
}

#[derive(Debug, Args, Clone)]
pub struct ForceUnlockArgs {
    /// The lock ID shown by the command that found the state locked
    pub id: String,
}

/// Rewrite Terraform-style `-long-flag[=v]` into `--long-flag[=v]` for every long flag clap knows.
pub fn normalize(args: Vec<OsString>) -> Vec<OsString> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let mut longs: Vec<String> = Vec::new();
    collect_longs(&cmd, &mut longs);
    let mut out = Vec::with_capacity(args.len());
    let mut rest_positional = false;
    for (i, a) in args.into_iter().enumerate() {
        if i == 0 || rest_positional {
            out.push(a);
            continue;
        }
        let s = a.to_string_lossy();
        if s == "--" {
            rest_positional = true;
            out.push(a);
            continue;
        }
        if s.starts_with('-') && !s.starts_with("--") && s.len() > 2 {
            let name = s[1..].split('=').next().unwrap_or("");
            if longs.iter().any(|l| l == name) {
                out.push(OsString::from(format!("-{s}")));
                continue;
            }
        }
        out.push(a);
    }
    out
}

fn collect_longs(cmd: &clap::Command, out: &mut Vec<String>) {
    for arg in cmd.get_arguments() {
        if let Some(l) = arg.get_long() {
            out.push(l.to_string());
        }
    }
    out.push("help".into());
    out.push("version".into());
    for sub in cmd.get_subcommands() {
        collect_longs(sub, out);
    }
}

/// Parse the process arguments; on `--help` or a usage error clap prints and exits.
pub fn parse(args: Vec<OsString>) -> Cli {
    Cli::parse_from(normalize(args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Cli {
        Cli::try_parse_from(normalize(args.iter().map(OsString::from).collect())).expect("parses")
    }

    #[test]
    fn single_dash_long_flags_are_accepted() {
        let cli = parse_strs(&[
            "k0sform",
            "apply",
            "-auto-approve",
            "-state=s.json",
            "-replace",
            "10.0.0.1",
        ]);
        let Command::Apply(a) = cli.command else {
            panic!("not apply")
        };
        assert!(a.auto_approve);
        assert_eq!(a.target.replace, vec!["10.0.0.1"]);
        assert_eq!(cli.global.state, Some(PathBuf::from("s.json")));
        let cli = parse_strs(&[
            "k0sform",
            "plan",
            "-out",
            "p.bin",
            "-detailed-exitcode",
            "-lock-timeout=30s",
        ]);
        let Command::Plan(p) = cli.command else {
            panic!("not plan")
        };
        assert!(p.detailed_exitcode);
        assert_eq!(p.out, Some(PathBuf::from("p.bin")));
        assert_eq!(cli.global.lock_timeout, std::time::Duration::from_secs(30));
    }

    #[test]
    fn short_flags_still_work() {
        let cli = parse_strs(&["k0sform", "-c", "a.yaml", "-c", "b.yaml", "-vv", "validate"]);
        assert_eq!(cli.global.config.len(), 2);
        assert_eq!(cli.global.verbose, 2);
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
