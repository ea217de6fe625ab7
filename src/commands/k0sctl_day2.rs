//! k0sctl's flags of `kubeconfig` and `backup` (cmd/kubeconfig.go, cmd/backup.go, cmd/flags.go)
//! with no k0sform spelling of their own: `--dry-run` (also `DRY_RUN`) and `--timeout` act as in
//! k0sctl; `--force`, `--no-redact` and backup's `--concurrency` change nothing here, and a note
//! says so.

use crate::cli::K0sctlDay2Args;
use crate::ops::Failure;
use std::time::Duration;

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

/// Run `work`, bounded by `-timeout` (none when 0 or not given, as k0sctl's `veryLongTime`):
/// when reached, the work is dropped and the run fails with `what` said of it.
pub(super) async fn within<T>(
    timeout: Option<Duration>,
    what: &str,
    work: impl std::future::Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    match timeout.filter(|d| !d.is_zero()) {
        None => work.await,
        Some(d) => tokio::time::timeout(d, work).await.unwrap_or_else(|_| {
            Err(Failure::error(format!(
                "-timeout {} reached: {what}",
                humantime::format_duration(d)
            )))
        }),
    }
}
