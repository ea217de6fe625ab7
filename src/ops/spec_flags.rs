//! The command line's flags that set the spec's options for one run: k0sctl apply's
//! `--no-wait`, `--evict-taint`, `--concurrency` and `--concurrent-uploads`.

use super::Failure;

/// k0sctl apply's flags that set the spec's options for this run: `--no-wait` is
/// `options.wait.enabled: false` (cmd/apply.go: `NoWait: no-wait || !Wait.Enabled`),
/// `--evict-taint` replaces `options.evictTaint` (`<key=value>:<effect>`, controllerWorkers
/// off), `--concurrency` and `--concurrent-uploads` replace `options.concurrency.limit` and
/// `.uploads` (cmd/flags.go `initManager`; 0 is no limit).
pub fn k0sctl_overrides(
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
