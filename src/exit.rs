//! Exit statuses, defined once. `--help` documents them from here.

/// Every exit status k0sform can return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success (for `plan`: no changes, or changes without `-detailed-exitcode`).
    Success = 0,
    /// An error: bad input, a failed step, an unreachable host.
    Error = 1,
    /// `plan -detailed-exitcode`: the plan has changes.
    Changes = 2,
    /// Refused as unsafe: split brain, quorum, unknown identity.
    Refused = 3,
    /// The state is locked by another process.
    Locked = 4,
    /// A saved plan no longer matches the state, the spec or the hosts.
    StalePlan = 5,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

/// Every environment variable k0sform reads, as `--help` lists them (a macro so that
/// `MAIN_HELP_FOOTER` can `concat!` it). A test checks that each variable the source reads is here.
macro_rules! environment_help {
    () => {
        "\
Environment:
  K0SFORM_STATE          default for -state (a file, or etcd://… / etcds://…)
  K0SFORM_ETCD_CACERT    CA certificate of the state etcd (-etcd-cacert wins)
  K0SFORM_ETCD_CERT      client certificate for the state etcd (-etcd-cert wins)
  K0SFORM_ETCD_KEY       client key for the state etcd (-etcd-key wins)
  K0SFORM_ETCD_LOCK_TTL  lease of the etcd state lock (default 30s)
  K0SFORM_ETCD_TIMEOUT   timeout of each etcd request (default 10s)
  K0SFORM_LOG            log filter (tracing syntax, e.g. debug or k0sform=trace); wins over -v
  K0SFORM_LOG_PATH       the debug log of runs that connect to hosts (default
                         $XDG_CACHE_HOME/k0sform/k0sform.log)
  DEBUG, TRACE           true: debug or trace logging on stderr (as -d/--debug, --trace; k0sctl's)
  DRY_RUN                true: apply and destroy only plan (as -dry-run; k0sctl's)
  K0SFORM_K0S_DOWNLOAD_URL  base of k0s release downloads (default
                         https://github.com/k0sproject/k0s/releases/download): a mirror holding
                         <base>/<version>/k0s-<version>-<arch> and <base>/<version>/sha256sums.txt
  K0SFORM_K0S_VERSION_URL   base of the version index <base>/stable.txt and <base>/latest.txt
                         (default https://docs.k0sproject.io)
  K0SFORM_K0S_DOWNLOAD_TIMEOUT  limit for one k0s download, on a host or locally (default 10m)
  XDG_CACHE_HOME         local cache: k0s downloads (uploadBinary) in $XDG_CACHE_HOME/k0sform/k0s,
                         the debug log
  NO_COLOR               set and not empty: no colour (as -no-color)
  USER, LOGNAME          the user named in the state lock
  SHELL                  `completion` without a shell: completes for this one (as k0sctl)
  VISUAL, EDITOR         the editor of `config edit` (else vi), as k0sctl
  HOME                   what ~ means in the spec's paths (keyPath, k0sBinaryPath, files)
  SSH_AUTH_SOCK          the ssh-agent whose keys the hosts' ssh uses (an encrypted keyPath it
                         holds is not asked for)
  SSH_ASKPASS            with SSH_ASKPASS_REQUIRE=force (or prefer and DISPLAY): what ssh-add runs
                         to ask an encrypted keyPath's passphrase where there is no terminal
  (any)                  ${VAR} and $VAR in the spec are expanded from the environment, as in k0sctl"
    };
}

/// The exit status table as shown in `--help`.
macro_rules! exit_codes_help {
    () => {
        "\
Exit codes:
  0  success (plan: no changes)
  1  error
  2  plan has changes (with -detailed-exitcode)
  3  refused as unsafe (split brain, quorum, unknown identity)
  4  state locked by another process
  5  saved plan is stale or altered"
    };
}

pub const ENVIRONMENT_HELP: &str = environment_help!();
pub const EXIT_CODES_HELP: &str = exit_codes_help!();

/// `--help`'s closing text: flag style, environment, exit codes.
pub const MAIN_HELP_FOOTER: &str = concat!(
    "Long flags may also be written Terraform-style with one dash: -auto-approve, -state=PATH.\n\n",
    environment_help!(),
    "\n\n",
    exit_codes_help!()
);
