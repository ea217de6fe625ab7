//! k0sctl apply's flags (cmd/apply.go, cmd/flags.go) with no k0sform spelling of their own:
//! checked before anything runs, and written over the spec's options for this run.

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

/// k0sctl apply's flags that set the spec's options for this run: `--no-wait` is
/// `options.wait.enabled: false` (cmd/apply.go: `NoWait: no-wait || !Wait.Enabled`),
/// `--evict-taint` replaces `options.evictTaint` (`<key=value>:<effect>`, controllerWorkers
/// off), `--concurrency` and `--concurrent-uploads` replace `options.concurrency.limit` and
/// `.uploads` (cmd/flags.go `initManager`; 0 is no limit).
pub(super) fn k0sctl_overrides(
    spec: &mut crate::spec::Spec,
    k: &crate::cli::K0sctlApplyArgs,
    run: &crate::cli::RunArgs,
) -> Result<(), Failure> {
    let o = &mut spec.options;
    if k.no_wait {
        o.wait = false;
    }
    if let Some(n) = run.concurrency {
        o.concurrency_limit = n;
    }
    if let Some(n) = k.concurrent_uploads {
        o.concurrent_uploads = n;
    }
    if let Some(t) = &k.evict_taint {
        o.evict_taint = Some(
            crate::spec::EvictTaint::from_flag(t)
                .map_err(|e| Failure::error(format!("-evict-taint {t:?}: {e}")))?,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{K0sctlApplyArgs, RunArgs};

    /// k0sctl apply's option flags set the spec's options for the run; without them the spec's
    /// own values stay.
    #[test]
    fn k0sctl_flags_set_the_spec_options() {
        let mut spec = crate::spec::Spec::default();
        let before = spec.options.clone();
        k0sctl_overrides(&mut spec, &Default::default(), &Default::default()).expect("ok");
        assert_eq!(spec.options, before);
        let k = K0sctlApplyArgs {
            no_wait: true,
            concurrent_uploads: Some(0),
            evict_taint: Some("a/b=c:NoSchedule".into()),
            ..Default::default()
        };
        let run = RunArgs {
            concurrency: Some(7),
            ..Default::default()
        };
        k0sctl_overrides(&mut spec, &k, &run).expect("ok");
        let o = &spec.options;
        assert!(!o.wait);
        assert_eq!(o.concurrency_limit, 7);
        assert_eq!(o.concurrent_uploads, 0, "0: no limit, as in the spec");
        let t = o.evict_taint.as_ref().expect("taint");
        assert_eq!(
            (t.taint.as_str(), t.effect.as_str()),
            ("a/b=c", "NoSchedule")
        );
        assert!(!t.controller_workers);
        let bad = K0sctlApplyArgs {
            evict_taint: Some("a=b:c:NoSchedule".into()),
            ..Default::default()
        };
        assert!(k0sctl_overrides(&mut spec, &bad, &run).is_err());
    }
}
