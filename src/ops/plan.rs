//! `plan`: load, probe, choose the release, diff.

use super::{Failure, StateCtx, desired, mirror, reality, staging_destinations};
use crate::binaries;
use crate::hostid::HostId;
use crate::plan::{self, Desired, Plan, PlanOptions, ResolvedVersion};
use crate::reality::Reality;
use crate::spec::{Loaded, Spec};
use crate::state::{LockGuard, State, StateStore};
use crate::transport::Transport;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Everything a plan was made from, kept together so `apply` can run it and `-out` can seal it.
pub struct Planned {
    pub loaded: Loaded,
    pub state: StateCtx,
    pub reality: Reality,
    pub desired: Desired,
    /// Where the probe looked for upload staging files (`staging_destinations`): where
    /// `settle_leftovers` cleans up.
    pub staging: BTreeMap<HostId, Vec<String>>,
    pub plan: Plan,
}

/// The state a plan reads, from `store`, under the lock (waiting up to `lock_timeout`; held
/// until the guard drops, so while the hosts are probed): a plan never reads a state an apply
/// is half-way through. `None` (-lock=false) reads it unlocked. Held by another run → exit 4
/// (testdata/reference/DESIGN.md).
pub fn lock_state(
    store: Box<dyn StateStore>,
    opts: &PlanOptions,
    lock_timeout: Option<Duration>,
) -> Result<(StateCtx, Option<LockGuard>), Failure> {
    let operation = if opts.destroy {
        "plan -destroy"
    } else {
        "plan"
    };
    let guard = match lock_timeout {
        Some(timeout) => Some(store.lock(operation, timeout)?),
        None => None,
    };
    Ok((super::load_state(store)?, guard))
}

/// After the probe: choose the k0s version when the spec names none (what runs, else what the
/// state records, else a lookup; a saved plan's choice is never taken, only compared), write it
/// into the spec, and find every release binary the
/// hosts need with its sha256. Network lookups run here, never in `plan::diff`.
pub async fn release_sources(
    spec: &mut Spec,
    state: &State,
    reality: &Reality,
    desired: &mut Desired,
) -> Result<Option<ResolvedVersion>, Failure> {
    let mirror = mirror()?;
    // curl runs synchronously; let the runtime move its other tasks (SSH masters) elsewhere.
    tokio::task::block_in_place(|| {
        let resolved =
            binaries::resolve_version(spec, state, reality, &mirror).map_err(Failure::error)?;
        if let Some(r) = &resolved {
            spec.k0s.version = Some(r.version.clone());
        }
        binaries::release_binaries(spec, reality, desired, &mirror).map_err(Failure::error)?;
        Ok(resolved)
    })
}

/// Probe and diff for an already loaded spec and state.
pub async fn plan_with<T: Transport + Clone + 'static>(
    loaded: Loaded,
    state: StateCtx,
    transport: &T,
    (opts, parallelism): (&PlanOptions, usize),
    probe_in: Option<&Path>,
    probe_out: Option<&Path>,
) -> Result<Planned, Failure> {
    let (desired, reality, staging) = desired_and_reality(
        &loaded,
        &state,
        transport,
        (opts, parallelism),
        probe_in,
        probe_out,
    )
    .await?;
    diff_seen(loaded, state, (reality, desired, staging), opts).await
}

/// Diff what was seen: the private addresses found on hosts without `privateAddress`, the running storage and controllers noted in the spec, the k0s version
/// chosen (a destroy installs nothing: no version to choose, no release to look up).
pub(super) async fn diff_seen(
    mut loaded: Loaded,
    state: StateCtx,
    (reality, mut desired, staging): (Reality, Desired, BTreeMap<HostId, Vec<String>>),
    opts: &PlanOptions,
) -> Result<Planned, Failure> {
    crate::k0s::private_address::fill_detected(&mut loaded.spec, &state.state, &reality)
        .map_err(Failure::error)?;
    crate::k0s::desired::keep_running_storage(&mut loaded.spec, &reality)
        .map_err(Failure::error)?;
    crate::k0s::desired::note_running_controllers(&mut loaded.spec, &reality);
    let resolved = if opts.destroy {
        None
    } else {
        release_sources(&mut loaded.spec, &state.state, &reality, &mut desired).await?
    };
    let mut plan = plan::diff(&loaded.spec, &state.state, &reality, &desired, opts)?;
    plan.k0s_version = resolved;
    if let Some(h) = loaded.spec.hosts.iter().find(|h| h.ssh.localhost) {
        plan.warnings.push(localhost_note(h));
    }
    Ok(Planned {
        loaded,
        state,
        reality,
        desired,
        staging,
        plan,
    })
}

/// What the plan says once about the `localhost` host: it is this machine, how its commands
/// run, and where k0sform is stricter than k0sctl with it.
fn localhost_note(h: &crate::spec::HostSpec) -> String {
    format!(
        "localhost: {} ({}) is this machine; its commands run here {}, not over SSH. With no SSH \
         host key its machine-id is its identity: a changed machine-id is refused unless -replace \
         names it (k0sctl does not check)",
        h.role,
        h.id(),
        crate::ssh::local_runs_as()
    )
}

/// The desired facts (local files hashed), the probed (or read) reality, and where the probe
/// looked for staging files.
pub(super) async fn desired_and_reality<T: Transport + Clone + 'static>(
    loaded: &Loaded,
    state: &StateCtx,
    transport: &T,
    (opts, parallelism): (&PlanOptions, usize),
    probe_in: Option<&Path>,
    probe_out: Option<&Path>,
) -> Result<(Desired, Reality, BTreeMap<HostId, Vec<String>>), Failure> {
    // A destroy uploads nothing: local binaries and files are not read for its plan (they may
    // be gone; `staging_destinations` still expands `files:` where it can).
    let desired = if opts.destroy {
        Desired::default()
    } else {
        desired(&loaded.spec)?
    };
    let staging = staging_destinations(&loaded.spec, &desired);
    let reality = reality(
        (&loaded.spec, &state.state),
        (&desired, &staging),
        transport,
        (opts, parallelism),
        probe_in,
        probe_out,
    )
    .await?;
    Ok((desired, reality, staging))
}

/// Read a saved plan file; one that is not a k0sform plan → exit 5. (`apply` also checks its seal.)
pub fn read_saved(file: &Path) -> Result<plan::SavedPlan, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::error(format!("cannot read the plan {}: {e}", file.display())))?;
    plan::SavedPlan::from_json(&text).map_err(|e| {
        Failure::new(
            crate::exit::Exit::StalePlan,
            format!("{}: {e}", file.display()),
        )
    })
}

/// `plan -out FILE`: the plan sealed against what it was made from (the state, the spec's
/// sha256, what the hosts showed) and the options it was made with, written 0600.
pub fn save_plan(planned: &Planned, opts: &PlanOptions, out: &Path) -> Result<(), Failure> {
    let saved = plan::SavedPlan::with_options(
        planned.plan.clone(),
        &planned.state.sealed_view(),
        &planned.loaded.sha256,
        &planned.reality,
        opts.clone(),
    );
    crate::private_file::write(out, saved.to_json().as_bytes())
        .map_err(|e| Failure::error(format!("cannot write the plan to {}: {e}", out.display())))
}
