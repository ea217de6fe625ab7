//! What the global flags name: the state's store, the spec and the state, the plan options.

use crate::cli::{GlobalArgs, TargetArgs};
use crate::ops::{self, Failure, Planned};
use crate::plan::PlanOptions;
use crate::spec;
use crate::ssh::SshTransport;
use crate::state::{EtcdOptions, StateError, StateStore};
use std::path::{Path, PathBuf};

/// Where the state is: `-state`, else `K0SFORM_STATE`, else beside the spec (`-c`).
pub(super) fn state_location(global: &GlobalArgs) -> PathBuf {
    crate::state::default_path(global.state.as_deref(), &global.config)
}

/// The store the command line names: the state's location and the `--etcd-*` TLS flags.
pub(super) fn open_store(global: &GlobalArgs) -> Result<Box<dyn StateStore>, StateError> {
    let opts = EtcdOptions::from_flags(
        global.etcd_cacert.as_deref(),
        global.etcd_cert.as_deref(),
        global.etcd_key.as_deref(),
    );
    let location = state_location(global);
    if let Some(w) = crate::state::transport_warning(&location) {
        eprintln!("Warning: {w}");
    }
    crate::state::open(&location, &opts)
}

/// The spec `-c` names, then the state in the store the command line names.
pub(super) fn load_inputs(global: &GlobalArgs) -> Result<(spec::Loaded, ops::StateCtx), Failure> {
    let loaded = ops::load_spec(&global.config)?;
    let state = ops::load_state(open_store(global)?)?;
    Ok((loaded, state))
}

pub(super) fn plan_options(t: &TargetArgs) -> Result<PlanOptions, Failure> {
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
        show_secrets: false,
        destroy: false,
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

/// Load, probe and diff, as `plan` and `graph` do.
pub(super) async fn plan_now(
    global: &GlobalArgs,
    (t, opts): (&TargetArgs, &PlanOptions),
    transport: &SshTransport,
    probe_in: Option<&Path>,
    probe_out: Option<&Path>,
) -> Result<Planned, Failure> {
    let (loaded, state) = load_inputs(global)?;
    let parallelism = ops::hosts_at_once(t.parallelism, &loaded.spec, state.state.hosts.len());
    ops::plan_with(
        loaded,
        state,
        transport,
        (opts, parallelism),
        probe_in,
        probe_out,
    )
    .await
}
