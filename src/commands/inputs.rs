//! What the flags name: the spec and the state (in the store `ops::open_store` opens), the
//! plan options.

use crate::cli::{GlobalArgs, TargetArgs};
use crate::ops::{self, Failure, Planned};
use crate::plan::PlanOptions;
use crate::spec;
use crate::ssh::SshTransport;
use std::path::Path;

/// The spec `-c` names, then the state in the store the command line names.
pub(super) fn load_inputs(global: &GlobalArgs) -> Result<(spec::Loaded, ops::StateCtx), Failure> {
    let loaded = ops::load_spec(&global.config)?;
    let state = ops::load_state(ops::open_store(global)?)?;
    Ok((loaded, state))
}

/// The plan options the command line gives: the host selection flags, `-show-secrets` and
/// `-destroy`.
pub(super) fn plan_options(
    t: &TargetArgs,
    show_secrets: bool,
    destroy: bool,
) -> Result<PlanOptions, Failure> {
    Ok(PlanOptions {
        replace: t.replace.clone(),
        target: t.target.clone(),
        exclude: t.exclude.clone(),
        refresh_only: t.refresh_only,
        refuse_first_contact: t.host_keys.refuse_first_contact(),
        no_drain: t.no_drain,
        allow_downgrade: t.allow_downgrade,
        restore: match &t.restore_from {
            Some(p) => Some(ops::restore_archive(p)?),
            None => None,
        },
        show_secrets,
        destroy,
    })
}

/// `-destroy` resets every host of the spec and the state: the flags that narrow or seed a plan
/// do not go with it (`plan -destroy`, `apply -destroy`).
pub(super) fn refuse_with_destroy(t: &TargetArgs) -> Result<(), Failure> {
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

/// Probe and diff the spec and the state, as `plan` and `graph` do: `-parallelism` hosts at
/// once, else the spec's limit.
pub(super) async fn plan_now(
    (loaded, state): (spec::Loaded, ops::StateCtx),
    (t, opts): (&TargetArgs, &PlanOptions),
    transport: &SshTransport,
    (probe_in, probe_out): (Option<&Path>, Option<&Path>),
) -> Result<Planned, Failure> {
    let parallelism = ops::hosts_at_once(t.parallelism, &loaded.spec, state.state.hosts.len());
    let with = (opts, parallelism);
    ops::plan_with(loaded, state, transport, with, probe_in, probe_out).await
}
