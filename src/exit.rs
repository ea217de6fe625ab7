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

/// The exit status table as shown in `--help`.
pub const EXIT_CODES_HELP: &str = "\
Long flags may also be written Terraform-style with one dash: -auto-approve, -state=PATH.

Exit codes:
  0  success (plan: no changes)
  1  error
  2  plan has changes (with -detailed-exitcode)
  3  refused as unsafe (split brain, quorum, unknown identity)
  4  state locked by another process
  5  saved plan is stale or altered";
