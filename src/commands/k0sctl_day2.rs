//! k0sctl's flags of `kubeconfig` and `backup` (cmd/kubeconfig.go, cmd/backup.go, cmd/flags.go)
//! with no k0sform spelling of their own: `--dry-run` (also `DRY_RUN`) and `--timeout`
//! (`ops::Deadline`) act as in k0sctl; `--force`, `--no-redact` and backup's `--concurrency` change nothing here, and a note
//! says so.

use crate::cli::K0sctlDay2Args;
use crate::ops::Failure;

/// Print the notes of the flags that change nothing; whether this is a dry run (`--dry-run`, or
/// k0sctl's `DRY_RUN` variable, refused when it is not a boolean).
pub(super) fn notes(args: &K0sctlDay2Args, command: &str) -> Result<bool, Failure> {
    if args.force {
        // k0sctl's --force turns off checks of phase/gather_k0s_facts.go (a k0s installed as a
        // service but stopped); k0sform's controller choice passes such a host over instead.
        eprintln!("Note: -force (k0sctl) changes nothing: {command} has no check to turn off.");
    }
    if args.no_redact {
        eprintln!("Note: -no-redact (k0sctl) changes nothing: {command} redacts nothing.");
    }
    crate::cli::dry_run_requested(args.dry_run).map_err(Failure::error)
}
