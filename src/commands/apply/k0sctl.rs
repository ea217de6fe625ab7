//! k0sctl apply's flags (cmd/apply.go, cmd/flags.go) with no k0sform spelling of their own:
//! checked before anything runs (`ops::spec_flags` writes them over the spec's options).

use crate::cli::ApplyArgs;
use crate::ops::Failure;

/// k0sctl's spellings (cmd/apply.go, cmd/flags.go) that need a word before anything runs: the
/// ones that change the plan cannot change a saved one, `--force` turns nothing off.
pub(super) fn k0sctl_checks(args: &ApplyArgs, dry_run: bool) -> Result<(), Failure> {
    let k = &args.k0sctl;
    if let Some(file) = &args.plan_file {
        if dry_run {
            return Err(Failure::error(format!(
                "-dry-run with a saved plan: `k0sform show {}` shows it without running it",
                file.display()
            )));
        }
        for (given, flag) in [
            (k.no_wait, "-no-wait"),
            (k.evict_taint.is_some(), "-evict-taint"),
            (k.concurrent_uploads.is_some(), "-concurrent-uploads"),
            (args.run.concurrency.is_some(), "-concurrency"),
        ] {
            if given {
                return Err(Failure::error(format!(
                    "{flag} changes the spec's options, which a saved plan has fixed: set it in the spec and run `k0sform plan -out` again (-parallelism sets how many hosts run at once)"
                )));
            }
        }
    }
    if k.force {
        eprintln!(
            "Note: -force (k0sctl) changes nothing: k0sform always installs with `k0s install --force`, and its safety checks cannot be turned off (a rebuilt host: -replace ADDR; an older version: -allow-downgrade)."
        );
    }
    let kubeconfig_flag = [
        (
            k.kubeconfig_api_address.is_some(),
            "-kubeconfig-api-address",
        ),
        (k.kubeconfig_user.is_some(), "-kubeconfig-user"),
        (k.kubeconfig_cluster.is_some(), "-kubeconfig-cluster"),
    ]
    .into_iter()
    .find(|(given, _)| *given);
    if let Some((_, flag)) = kubeconfig_flag
        && args.kubeconfig_out.is_none()
    {
        // As in k0sctl (action/apply.go: only with KubeconfigOut), they do nothing alone.
        eprintln!(
            "Note: {flag} shapes the kubeconfig -kubeconfig-out writes; without -kubeconfig-out it changes nothing."
        );
    }
    if dry_run && args.kubeconfig_out.is_some() {
        eprintln!("Note: a dry run writes no kubeconfig (-kubeconfig-out).");
    }
    Ok(())
}
