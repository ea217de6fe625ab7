//! Command-line definitions (clap). Terraform-style single-dash long flags (`-auto-approve`,
//! `-out=FILE`) are accepted exactly like their `--` forms: `normalize` rewrites them before clap.

use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "k0sform", version, about = "Plan and apply changes to k0s clusters, with a state file", after_help = crate::exit::MAIN_HELP_FOOTER)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone)]
// The help heading of every option here (it would also reach args `Cli` added after them: none).
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Switch to DIR before doing anything else (as Terraform's -chdir): relative paths, the
    /// default spec and state are then found there
    #[arg(long = "chdir", global = true, value_name = "DIR")]
    pub chdir: Option<PathBuf>,
    /// Spec file or folder (repeatable; default k0sctl.yaml, then k0sctl.yml)
    #[arg(short = 'c', long = "config", global = true, value_name = "PATH")]
    pub config: Vec<PathBuf>,
    /// State file, or etcd://HOST:PORT[,HOST:PORT…]/PREFIX (etcds:// for TLS); also
    /// K0SFORM_STATE (default k0sform.state.json beside the spec)
    #[arg(long = "state", global = true, value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
    /// CA certificate of the etcd holding the state (etcds://; also K0SFORM_ETCD_CACERT)
    #[arg(long = "etcd-cacert", global = true, value_name = "FILE")]
    pub etcd_cacert: Option<PathBuf>,
    /// Client certificate for the state etcd (also K0SFORM_ETCD_CERT)
    #[arg(long = "etcd-cert", global = true, value_name = "FILE")]
    pub etcd_cert: Option<PathBuf>,
    /// Client key for the state etcd (also K0SFORM_ETCD_KEY)
    #[arg(long = "etcd-key", global = true, value_name = "FILE")]
    pub etcd_key: Option<PathBuf>,
    /// How long to wait for the state lock (e.g. 30s, 2m)
    #[arg(long = "lock-timeout", global = true, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub lock_timeout: std::time::Duration,
    /// No colour in output (also NO_COLOR)
    #[arg(long = "no-color", global = true)]
    pub no_color: bool,
    /// -input=false: never ask a question (apply without -auto-approve then fails)
    #[arg(long = "input", global = true, value_name = "BOOL", default_value = "true", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub input: bool,
    /// More logging (repeat for more; also K0SFORM_LOG)
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Debug logging on stderr, as -vv (k0sctl's --debug/-d; also DEBUG=true)
    #[arg(short = 'd', long = "debug", global = true)]
    pub debug: bool,
    /// Trace logging on stderr, as -vvv (k0sctl's --trace; also TRACE=true)
    #[arg(long = "trace", global = true)]
    pub trace: bool,
}

impl GlobalArgs {
    /// The stderr log level asked for: `-v` counts, k0sctl's `--debug`/`--trace` and its `DEBUG`
    /// and `TRACE` variables (cmd/flags.go `debugFlag`, `traceFlag`: true when set to a Go
    /// `strconv.ParseBool` truth) raise it to -vv and -vvv.
    pub fn verbosity(&self) -> u8 {
        let env = |k: &str| std::env::var(k).is_ok_and(|v| go_bool(&v) == Some(true));
        let mut v = self.verbose;
        if self.debug || env("DEBUG") {
            v = v.max(2);
        }
        if self.trace || env("TRACE") {
            v = v.max(3);
        }
        v
    }
}

/// Go's `strconv.ParseBool`, which k0sctl's (urfave/cli) boolean flags and their variables use.
pub fn go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A Go `time.Duration` (`90s`, `1h30m`, `0`), as k0sctl's duration flags take it.
fn parse_go_duration(s: &str) -> Result<std::time::Duration, String> {
    match crate::install_flags::parse_go_duration(s) {
        Ok(ns) if ns >= 0 => Ok(std::time::Duration::from_nanos(
            u64::try_from(ns).unwrap_or(u64::MAX),
        )),
        Ok(_) => Err("negative duration".into()),
        Err(why) => Err(format!("{why} (examples: 0, 90s, 10m, 1h30m)")),
    }
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 0s, 30s, 2m)"))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check the spec offline: fields, types, hosts, paths, versions
    Validate(ValidateArgs),
    /// Print a starting k0sctl.yaml (as `k0sctl init`): hosts from arguments or stdin
    Init(InitArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(after_help = COMPLETION_HELP)]
    Completion(CompletionArgs),
    /// Probe the hosts and show what apply would change
    Plan(PlanArgs),
    /// Plan (or take a saved plan) and carry it out
    Apply(ApplyArgs),
    /// Reset every host of the cluster and empty the state (as `k0sctl reset`); asks for the
    /// cluster's name unless -auto-approve
    Destroy(DestroyArgs),
    /// Show a saved plan, or the state
    Show(ShowArgs),
    /// Print the plan's step graph as Graphviz DOT
    Graph(GraphArgs),
    /// Print (or -out: write, 0600) the cluster's admin kubeconfig, as `k0sctl kubeconfig`
    Kubeconfig(KubeconfigArgs),
    /// Back up the cluster (`k0s backup` on a healthy controller) into a local archive
    Backup(BackupArgs),
    /// The dynamic config (spec.k0s.dynamicConfig) through a healthy controller, as `k0sctl
    /// config`
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Inspect or edit the state
    #[command(subcommand)]
    State(StateCommand),
    /// Remove a stale lock by its ID
    ForceUnlock(ForceUnlockArgs),
    /// Print the version (-k0s: the latest k0s release, as `k0sctl version --k0s`)
    Version(VersionArgs),
}

#[derive(Debug, Args, Clone, Default)]
pub struct VersionArgs {
    /// Print the latest k0s version (stable.txt of K0SFORM_K0S_VERSION_URL) instead
    #[arg(long = "k0s")]
    pub k0s: bool,
    /// With -k0s: pre-releases count (latest.txt)
    #[arg(long = "pre", requires = "k0s")]
    pub pre: bool,
    /// k0sctl's latest release: not k0sform's business (refused with a pointer)
    #[arg(long = "k0sctl", hide = true)]
    pub k0sctl: bool,
}

#[derive(Debug, Args, Clone, Default)]
pub struct ValidateArgs {
    /// Print the result and every diagnostic as one JSON object (schema/validate.schema.json)
    #[arg(long = "json")]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct InitArgs {
    /// Hosts as [user@]address[:port]; more are read from stdin when it is not a terminal
    /// (one per line, `#` comments ignored). None: two example hosts
    #[arg(value_name = "[USER@]ADDRESS[:PORT]")]
    pub addresses: Vec<String>,
    /// The first N hosts are controllers, the rest workers
    #[arg(
        short = 'C',
        long = "controller-count",
        value_name = "N",
        default_value_t = 1
    )]
    pub controller_count: usize,
    /// SSH user of the hosts (default root)
    #[arg(short = 'u', long = "user", value_name = "USER")]
    pub user: Option<String>,
    /// SSH private key of the hosts
    #[arg(short = 'i', long = "key-path", value_name = "FILE")]
    pub key_path: Option<String>,
    /// metadata.name of the cluster
    #[arg(
        short = 'n',
        long = "cluster-name",
        value_name = "NAME",
        default_value = "k0s-cluster"
    )]
    pub cluster_name: String,
    /// Include k0s's default configuration under spec.k0s.config
    #[arg(long = "k0s")]
    pub k0s: bool,
}

#[derive(Debug, Args, Clone)]
pub struct CompletionArgs {
    /// The shell to complete for (default: -shell, else $SHELL's name, else bash)
    #[arg(value_enum)]
    pub shell: Option<clap_complete::Shell>,
    /// The shell, as k0sctl's `completion --shell`/`-s` names it (cmd/completion.go)
    #[arg(short = 's', long = "shell", value_enum, conflicts_with = "shell")]
    pub shell_flag: Option<clap_complete::Shell>,
}

impl CompletionArgs {
    /// The argument, `-shell`, else as k0sctl: the name of `$SHELL` (`/bin/zsh`: zsh), else bash.
    pub fn shell(&self) -> Result<clap_complete::Shell, String> {
        use clap::ValueEnum;
        if let Some(s) = self.shell.or(self.shell_flag) {
            return Ok(s);
        }
        let Some(env) = std::env::var("SHELL").ok().filter(|s| !s.is_empty()) else {
            return Ok(clap_complete::Shell::Bash);
        };
        let name = env.rsplit('/').next().unwrap_or_default();
        clap_complete::Shell::from_str(name, false)
            .map_err(|_| format!("SHELL={env}: no completion for {name}; name the shell: bash, zsh, fish, elvish or powershell"))
    }
}

const COMPLETION_HELP: &str = "\
Install, for example:
  bash: k0sform completion bash > ~/.local/share/bash-completion/completions/k0sform
  zsh:  k0sform completion zsh > \"${fpath[1]}/_k0sform\"
  fish: k0sform completion fish > ~/.config/fish/completions/k0sform.fish
The scripts complete the --long form of each flag; the -single-dash form works as well.";

/// `-trust-new-host-keys`: every command that connects to the hosts takes it (`plan`, `apply`,
/// `graph`, `destroy`, `kubeconfig`, `backup`), with one default and one meaning.
#[derive(Debug, Args, Clone)]
pub struct HostKeyArgs {
    /// -trust-new-host-keys=false: refuse when a host or bastion has no host key recorded in
    /// the state nor pinned with ssh.hostKey (first contact), e.g. in CI
    #[arg(long = "trust-new-host-keys", value_name = "BOOL", default_value = "true", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub trust_new_host_keys: bool,
}

impl Default for HostKeyArgs {
    /// As the flag's default: first contact is trusted (and shown).
    fn default() -> Self {
        HostKeyArgs {
            trust_new_host_keys: true,
        }
    }
}

impl HostKeyArgs {
    /// A host or bastion with no recorded or pinned key is refused, not trusted on first contact.
    pub fn refuse_first_contact(&self) -> bool {
        !self.trust_new_host_keys
    }
}

#[derive(Debug, Args, Clone)]
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
    /// Restart hosts without cordoning and draining their Nodes first (as k0sctl's --no-drain)
    #[arg(long = "no-drain")]
    pub no_drain: bool,
    /// Plan a spec.k0s.version older than what a host runs (refused otherwise, as k0sctl; also
    /// spelled as k0sctl's --disable-downgrade-check)
    #[arg(long = "allow-downgrade", alias = "disable-downgrade-check")]
    pub allow_downgrade: bool,
    /// Hosts probed (and steps run) at once [default: spec.options.concurrency.limit, 30; 0
    /// there: every host]
    #[arg(long = "parallelism", value_name = "N")]
    pub parallelism: Option<usize>,
    #[command(flatten)]
    pub host_keys: HostKeyArgs,
    /// Bootstrap the cluster from this `k0sform backup`/`k0s backup` archive (new hosts only:
    /// refused where a cluster runs or the state names one)
    #[arg(long = "restore-from", value_name = "FILE")]
    pub restore_from: Option<PathBuf>,
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
    /// -show-secrets: show secret values (passwords, tokens, DSNs) in the k0s.yaml diff instead
    /// of `(secret)`; never with a saved plan, which holds no secrets (k0sctl's --no-redact)
    #[arg(long = "show-secrets", alias = "no-redact")]
    pub show_secrets: bool,
    /// Plan the destruction of the cluster (what `destroy` would do): every host reset, the
    /// state emptied. `-out` saves it for `apply FILE`
    #[arg(long = "destroy")]
    pub destroy: bool,
    /// -lock=false: do not take the state lock while reading the state and probing (the plan
    /// may then see a state an apply is changing)
    #[arg(long = "lock", value_name = "BOOL", default_value = "true", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub lock: bool,
}

#[derive(Debug, Args, Clone)]
pub struct DestroyArgs {
    /// Reset this host although its machine-id or host key is not the recorded one (it was
    /// rebuilt) (repeatable)
    #[arg(long = "replace", value_name = "ADDR")]
    pub replace: Vec<String>,
    /// Drop this host from the state WITHOUT resetting it, e.g. when it cannot be reached
    /// (repeatable); an unreachable host refuses the destroy otherwise
    #[arg(long = "exclude", value_name = "ADDR")]
    pub exclude: Vec<String>,
    /// Hosts probed (and workers reset) at once [default: spec.options.concurrency.limit, 30;
    /// 0 there: every host]
    #[arg(long = "parallelism", value_name = "N")]
    pub parallelism: Option<usize>,
    #[command(flatten)]
    pub host_keys: HostKeyArgs,
    /// Do not ask for the cluster's name
    #[arg(long = "auto-approve")]
    pub auto_approve: bool,
    /// Print progress as JSON lines
    #[arg(long = "json")]
    pub json: bool,
    #[command(flatten)]
    pub run: RunArgs,
    /// k0sctl reset's --force (its confirmation bypass, action/reset.go): -auto-approve
    #[arg(long = "force", help_heading = K0SCTL_HEADING)]
    pub force: bool,
}

impl DestroyArgs {
    /// `destroy` is `apply -destroy`, confirmed by typing the cluster's name: its flags as
    /// `apply` takes them.
    pub fn as_apply(&self) -> ApplyArgs {
        ApplyArgs {
            plan_file: None,
            target: self.target_args(),
            destroy: true,
            // k0sctl reset's --force is its confirmation bypass (action/reset.go).
            auto_approve: self.auto_approve || self.force,
            json: self.json,
            kubeconfig_out: None,
            show_secrets: false,
            run: self.run.clone(),
            k0sctl: Default::default(),
        }
    }

    /// The host selection flags, as `apply` takes them.
    pub fn target_args(&self) -> TargetArgs {
        TargetArgs {
            replace: self.replace.clone(),
            target: Vec::new(),
            exclude: self.exclude.clone(),
            refresh_only: false,
            no_drain: false,
            allow_downgrade: false,
            parallelism: self.parallelism,
            host_keys: self.host_keys.clone(),
            restore_from: None,
        }
    }
}

#[derive(Debug, Args, Clone)]
pub struct ApplyArgs {
    /// A plan saved by `plan -out`
    pub plan_file: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Destroy the cluster: with a plan file, the file is a `plan -destroy` plan (needed to
    /// apply one); without, as `k0sform destroy`. Asks for the cluster's name unless
    /// -auto-approve
    #[arg(long = "destroy")]
    pub destroy: bool,
    /// Do not ask for confirmation
    #[arg(long = "auto-approve")]
    pub auto_approve: bool,
    /// Print progress as JSON lines
    #[arg(long = "json")]
    pub json: bool,
    /// After a successful apply, write the admin kubeconfig to FILE (0600), as `kubeconfig -out`
    #[arg(long = "kubeconfig-out", value_name = "FILE")]
    pub kubeconfig_out: Option<PathBuf>,
    /// -show-secrets: show secret values (passwords, tokens, DSNs) in the k0s.yaml diff instead
    /// of `(secret)`; never with a saved plan, which holds no secrets (k0sctl's --no-redact)
    #[arg(long = "show-secrets", alias = "no-redact")]
    pub show_secrets: bool,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub k0sctl: K0sctlApplyArgs,
}

/// The `--help` heading of flags that exist so that a k0sctl command line works unchanged.
pub const K0SCTL_HEADING: &str = "k0sctl spellings";

/// What `apply` and `destroy` (k0sctl's `reset`) both take from k0sctl's cmd/flags.go.
#[derive(Debug, Args, Clone, Default)]
pub struct RunArgs {
    /// Print the plan and exit, changing nothing (as `plan`; k0sctl's --dry-run, also
    /// DRY_RUN=true)
    #[arg(long = "dry-run", help_heading = K0SCTL_HEADING)]
    pub dry_run: bool,
    /// k0sctl's --concurrency: hosts at once (as -parallelism) and the worker batch limit
    /// (spec.options.concurrency.limit); 0: no limit
    #[arg(long = "concurrency", value_name = "N", conflicts_with = "parallelism", help_heading = K0SCTL_HEADING)]
    pub concurrency: Option<usize>,
    /// Give up after DURATION (Go syntax: 90s, 10m, 1h30m; 0: never, the default): no new step
    /// starts, running ones finish, and the run fails (k0sctl's --timeout)
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_go_duration)]
    pub timeout: Option<std::time::Duration>,
}

impl RunArgs {
    /// `-dry-run`, or k0sctl's `DRY_RUN` variable (cmd/flags.go `dryRunFlag`). A value that is
    /// not a Go boolean is refused, as k0sctl refuses it: it may have meant a dry run.
    pub fn dry_run(&self) -> Result<bool, String> {
        dry_run_requested(self.dry_run)
    }

    /// The run's deadline: `-timeout`, none when 0 or not given.
    pub fn deadline(&self) -> Option<std::time::Duration> {
        self.timeout.filter(|d| !d.is_zero())
    }
}

/// `-dry-run` given (`flag`), or k0sctl's `DRY_RUN` variable (cmd/flags.go `dryRunFlag`, taken
/// by apply, reset, kubeconfig and backup). A value that is not a Go boolean is refused.
pub fn dry_run_requested(flag: bool) -> Result<bool, String> {
    if flag {
        return Ok(true);
    }
    match std::env::var("DRY_RUN") {
        Ok(v) if v.is_empty() => Ok(false),
        Ok(v) => go_bool(&v).ok_or_else(|| {
            format!("DRY_RUN={v:?} is not a boolean (true, false, 1, 0): refusing to guess whether this is a dry run")
        }),
        Err(_) => Ok(false),
    }
}

/// k0sctl's flags of `kubeconfig` and `backup` (cmd/kubeconfig.go, cmd/backup.go) with no
/// k0sform spelling of their own (`commands::k0sctl_day2`).
#[derive(Debug, Args, Clone, Default)]
pub struct K0sctlDay2Args {
    /// Say what would run and exit, running, reading and writing nothing (k0sctl's --dry-run,
    /// also DRY_RUN=true)
    #[arg(long = "dry-run", help_heading = K0SCTL_HEADING)]
    pub dry_run: bool,
    /// k0sctl's --force: there is no check here to turn off, so it changes nothing (a note
    /// says so)
    #[arg(long = "force", help_heading = K0SCTL_HEADING)]
    pub force: bool,
    /// k0sctl's --no-redact: nothing here is redacted, so it changes nothing (a note says so)
    #[arg(long = "no-redact", help_heading = K0SCTL_HEADING)]
    pub no_redact: bool,
    /// k0sctl's --timeout (Go syntax: 90s, 10m; 0: never)
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_go_duration, help_heading = K0SCTL_HEADING)]
    pub timeout: Option<std::time::Duration>,
}

/// k0sctl apply's flags (cmd/apply.go) with no k0sform spelling of their own.
#[derive(Debug, Args, Clone, Default)]
pub struct K0sctlApplyArgs {
    /// Do not wait for worker Nodes to be Ready after a join or restart (as
    /// spec.options.wait.enabled: false; k0sctl's --no-wait)
    #[arg(long = "no-wait", help_heading = K0SCTL_HEADING)]
    pub no_wait: bool,
    /// Files uploaded at once (spec.options.concurrency.uploads; 0: no limit)
    #[arg(long = "concurrent-uploads", value_name = "N", help_heading = K0SCTL_HEADING)]
    pub concurrent_uploads: Option<usize>,
    /// Taint a Node before draining it, as spec.options.evictTaint: <key=value>:<effect>
    #[arg(long = "evict-taint", value_name = "TAINT", help_heading = K0SCTL_HEADING)]
    pub evict_taint: Option<String>,
    /// With -kubeconfig-out: the API server URL in it (as `kubeconfig -address`)
    #[arg(long = "kubeconfig-api-address", value_name = "URL", help_heading = K0SCTL_HEADING)]
    pub kubeconfig_api_address: Option<String>,
    /// With -kubeconfig-out: the user name in it (as `kubeconfig -user`)
    #[arg(long = "kubeconfig-user", value_name = "NAME", help_heading = K0SCTL_HEADING)]
    pub kubeconfig_user: Option<String>,
    /// With -kubeconfig-out: the cluster and context name in it (as `kubeconfig -cluster`)
    #[arg(long = "kubeconfig-cluster", value_name = "NAME", help_heading = K0SCTL_HEADING)]
    pub kubeconfig_cluster: Option<String>,
    /// k0sctl's --force: k0sform's checks cannot be turned off, so it changes nothing (a note
    /// says what to use instead)
    #[arg(long = "force", help_heading = K0SCTL_HEADING)]
    pub force: bool,
}

#[derive(Debug, Args, Clone, Default)]
pub struct KubeconfigArgs {
    /// User name in the kubeconfig (default: metadata.user, else admin)
    #[arg(short = 'u', long = "user", value_name = "NAME")]
    pub user: Option<String>,
    /// Cluster and context name in the kubeconfig (default: metadata.name)
    #[arg(short = 'n', long = "cluster", value_name = "NAME")]
    pub cluster: Option<String>,
    /// API server URL, used as given (default: spec.k0s.config.spec.api.externalAddress, else
    /// the first healthy controller's address, with spec.api.port)
    #[arg(long = "address", value_name = "URL")]
    pub address: Option<String>,
    /// Write the kubeconfig to FILE (0600, atomically) instead of stdout
    #[arg(long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub host_keys: HostKeyArgs,
    #[command(flatten)]
    pub k0sctl: K0sctlDay2Args,
}

#[derive(Debug, Args, Clone, Default)]
pub struct BackupArgs {
    /// Folder for the archive (default: the current folder)
    #[arg(long = "out", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write the archive to FILE (0600, replacing it) instead (k0sctl's -o/--output)
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        conflicts_with = "out"
    )]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub host_keys: HostKeyArgs,
    #[command(flatten)]
    pub k0sctl: K0sctlDay2Args,
    /// k0sctl's --concurrency: backup asks one controller at a time, so it changes nothing (a
    /// note says so)
    #[arg(long = "concurrency", value_name = "N", help_heading = K0SCTL_HEADING)]
    pub concurrency: Option<usize>,
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
pub enum ConfigCommand {
    /// Edit the ClusterConfig object in $VISUAL or $EDITOR (else vi) and apply it, as `k0sctl
    /// config edit`
    #[command(after_help = CONFIG_EDIT_HELP)]
    Edit(ConfigEditArgs),
    /// Show the reconcile events of the ClusterConfig object, as `k0sctl config status`
    Status(ConfigStatusArgs),
}

const CONFIG_EDIT_HELP: &str = "\
How: as k0sctl (action/config_edit.go), `k0s kubectl -n kube-system get clusterconfig k0s -o yaml`
on the first healthy controller, the YAML into a 0600 temporary file here, your editor on it,
then what you saved is applied with `k0s kubectl apply -n kube-system -f -` there. Saved
unchanged: nothing is applied and the command fails, as k0sctl's. Unlike k0sctl: the editor
line runs through `sh -c` (so `EDITOR='code --wait'` works), it needs no terminal when $VISUAL
or $EDITOR is set (a script can edit), and the saved file must be YAML (checked here, its line
named) before anything is sent. The spec file is not changed: spec.k0s.config still says what
a new cluster starts with; `plan` shows where the live object differs from it.";

#[derive(Debug, Args, Clone, Default)]
pub struct ConfigEditArgs {
    #[command(flatten)]
    pub host_keys: HostKeyArgs,
}

#[derive(Debug, Args, Clone, Default)]
pub struct ConfigStatusArgs {
    /// kubectl's output format (-o json, yaml, wide…), as k0sctl passes it on
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<String>,
    #[command(flatten)]
    pub host_keys: HostKeyArgs,
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
    /// Move a host's record to a new address (it was re-addressed; same machine): node name,
    /// etcd member and identity kept
    Mv {
        /// The recorded host: ADDR or ADDR:PORT
        old: String,
        /// Its new address: ADDR, ADDR:PORT or [IPv6]:PORT (the port stays when not given)
        new: String,
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
        // Aliases (k0sctl's spellings) take one dash as well.
        for a in arg.get_all_aliases().unwrap_or_default() {
            out.push(a.to_string());
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
    fn new_flags_work_with_one_or_two_dashes() {
        for args in [
            &[
                "k0sform",
                "-chdir=/tmp",
                "-input=false",
                "validate",
                "-json",
            ][..],
            &[
                "k0sform", "--chdir", "/tmp", "--input", "false", "validate", "--json",
            ][..],
        ] {
            let cli = parse_strs(args);
            assert_eq!(cli.global.chdir, Some(PathBuf::from("/tmp")));
            assert!(!cli.global.input);
            let Command::Validate(v) = cli.command else {
                panic!("not validate")
            };
            assert!(v.json);
        }
        assert!(parse_strs(&["k0sform", "validate"]).global.input);
        for args in [
            &[
                "k0sform",
                "init",
                "-controller-count=3",
                "-user",
                "admin",
                "-key-path=~/.ssh/k",
                "-cluster-name",
                "prod",
                "-k0s",
                "10.0.0.1",
            ][..],
            &[
                "k0sform",
                "init",
                "--controller-count",
                "3",
                "--user=admin",
                "--key-path",
                "~/.ssh/k",
                "--cluster-name=prod",
                "--k0s",
                "10.0.0.1",
            ][..],
            &[
                "k0sform", "init", "-C", "3", "-u", "admin", "-i", "~/.ssh/k", "-n", "prod",
                "--k0s", "10.0.0.1",
            ][..],
        ] {
            let Command::Init(i) = parse_strs(args).command else {
                panic!("not init")
            };
            assert_eq!(i.controller_count, 3);
            assert_eq!(i.user.as_deref(), Some("admin"));
            assert_eq!(i.key_path.as_deref(), Some("~/.ssh/k"));
            assert_eq!(i.cluster_name, "prod");
            assert!(i.k0s);
            assert_eq!(i.addresses, vec!["10.0.0.1"]);
        }
    }

    /// `kubeconfig` and `backup` take `-trust-new-host-keys` as `plan` and `apply` do: true by
    /// default, `=false` (one or two dashes, any boolish spelling) refuses first contact.
    #[test]
    fn trust_new_host_keys_on_every_connecting_command() {
        fn refuses(args: &[&str]) -> bool {
            match parse_strs(args).command {
                Command::Kubeconfig(a) => a.host_keys.refuse_first_contact(),
                Command::Backup(a) => a.host_keys.refuse_first_contact(),
                Command::Plan(a) => a.target.host_keys.refuse_first_contact(),
                Command::Apply(a) => a.target.host_keys.refuse_first_contact(),
                Command::Destroy(a) => a.target_args().host_keys.refuse_first_contact(),
                other => panic!("unexpected {other:?}"),
            }
        }
        for cmd in ["kubeconfig", "backup", "plan", "apply", "destroy"] {
            assert!(!refuses(&["k0sform", cmd]), "{cmd}: trusts by default");
            for off in ["-trust-new-host-keys=false", "--trust-new-host-keys=no"] {
                assert!(refuses(&["k0sform", cmd, off]), "{cmd} {off}");
            }
            assert!(
                !refuses(&["k0sform", cmd, "-trust-new-host-keys", "true"]),
                "{cmd}"
            );
        }
        assert!(
            Cli::try_parse_from(normalize(
                ["k0sform", "kubeconfig", "-trust-new-host-keys=maybe"]
                    .iter()
                    .map(OsString::from)
                    .collect()
            ))
            .is_err()
        );
        assert!(!KubeconfigArgs::default().host_keys.refuse_first_contact());
        assert!(!BackupArgs::default().host_keys.refuse_first_contact());
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
