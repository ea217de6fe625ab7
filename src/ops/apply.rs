//! `apply`: a saved plan derived again and compared, what earlier runs left settled, the
//! executor's re-probe.

use super::{Failure, Planned, StateCtx, desired_and_reality, release_sources};
use crate::hostid::HostId;
use crate::plan::{self, PlanOptions};
use crate::probe::{self, ProbeOptions};
use crate::spec::{Loaded, Spec};
use crate::ssh::SshTransport;
use crate::state::State;
use std::sync::Arc;

/// Why `apply FILE` will not run a saved plan.
pub enum SavedPlanFailure {
    /// Stale or altered: exit 5.
    Stale(plan::Stale),
    /// Anything else (the probe failed, the plan is refused now): its own exit code.
    Other(Failure),
}

impl From<Failure> for SavedPlanFailure {
    fn from(f: Failure) -> Self {
        SavedPlanFailure::Other(f)
    }
}

/// `apply FILE`: derive the plan again from the spec, the state and a fresh probe, with the
/// options `SavedPlan::options_for_apply` allows, and return it only when it equals the saved
/// plan and nothing the plan was made against moved. The file's steps are never run as such.
pub async fn rederive_saved(
    saved: &plan::SavedPlan,
    mut loaded: Loaded,
    state: StateCtx,
    transport: &SshTransport,
    (cli, parallelism): (&PlanOptions, usize),
) -> Result<Planned, SavedPlanFailure> {
    let opts = saved
        .options_for_apply(cli)
        .map_err(SavedPlanFailure::Stale)?;
    let (mut desired, reality, staging) =
        desired_and_reality(&loaded, &state, transport, (&opts, parallelism), None, None).await?;
    saved
        .verify(&state.sealed_view(), &loaded.sha256, &reality)
        .map_err(SavedPlanFailure::Stale)?;
    crate::k0s::desired::keep_running_storage(&mut loaded.spec, &reality);
    crate::k0s::desired::note_running_controllers(&mut loaded.spec, &reality);
    // The version is chosen again, as for a plan: the file's choice must be the same
    // (`SavedPlan::matches`), it is never taken.
    let resolved = if opts.destroy {
        None
    } else {
        release_sources(&mut loaded.spec, &state.state, &reality, &mut desired).await?
    };
    let mut derived = plan::diff(&loaded.spec, &state.state, &reality, &desired, &opts)
        .map_err(|r| SavedPlanFailure::Other(r.into()))?;
    derived.k0s_version = resolved;
    saved.matches(&derived).map_err(SavedPlanFailure::Stale)?;
    Ok(Planned {
        loaded,
        state,
        reality,
        desired,
        staging,
        plan: derived,
    })
}

/// Re-probes one host for the executor (after a join, to record its identity), over the
/// connection the probe opened.
pub struct SshProber {
    transport: SshTransport,
    probes: Vec<probe::HostProbe>,
}

impl SshProber {
    pub fn new(transport: SshTransport, spec: &Spec, state: &State) -> Self {
        let probes = probe::plan_probes(spec, state, &ProbeOptions::default());
        SshProber { transport, probes }
    }
}

impl crate::apply::Prober for SshProber {
    async fn probe(
        &self,
        host: &crate::hostid::HostId,
        known_binary: Option<&crate::state::BinaryRecord>,
    ) -> Result<crate::reality::HostFacts, String> {
        let p = probe::find_probe(&self.probes, host)
            .ok_or_else(|| format!("{host} is neither in the spec nor in the state"))?;
        let placed;
        let p = match known_binary {
            Some(k) => {
                placed = probe::HostProbe {
                    known_binary: Some(k.clone()),
                    ..p.clone()
                };
                &placed
            }
            None => p,
        };
        match probe::probe_host(&self.transport, p).await {
            crate::reality::Probe::Reached(facts) => Ok(*facts),
            crate::reality::Probe::Unreachable { error }
            | crate::reality::Probe::K0sNotAnswering { error } => Err(error),
            crate::reality::Probe::HostKeyChanged {
                expected,
                offered,
                bastion,
            } => Err(crate::reality::key_change_text(
                &expected,
                &offered,
                bastion.as_ref(),
            )),
        }
    }
}

/// What a killed or failed earlier run left on the reachable hosts of the spec is removed: upload
/// staging files, and on `interrupted_joins` (hosts whose join an earlier run began and did not
/// see finish: its intents) a join token the run did not replace with the placeholder. Only
/// hosts whose probe found staging files (`HostFacts::staging_leftovers`) or whose join was
/// interrupted get a session: a no-op apply costs one session per host, the probe's. The
/// cleanup finds the files on the host again (beside `Planned::staging`, the destinations the
/// probe looked beside); nothing the probe reported is removed by name. Run by `apply` under
/// the state lock, so no other run of this cluster is writing them now. Returns one line per
/// settled file, for the user; a host that cannot be settled is reported, never fatal.
pub async fn settle_leftovers(
    planned: &Planned,
    transport: &SshTransport,
    interrupted_joins: &[HostId],
    parallelism: usize,
) -> Vec<String> {
    use crate::transport::Transport;
    let spec = &planned.loaded.spec;
    // At most `parallelism` hosts at a time (as the probe).
    let limit = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let by_spec = spec.host_index();
    for (i, hr) in planned.reality.hosts.iter().enumerate() {
        let crate::reality::Probe::Reached(facts) = &hr.probe else {
            continue;
        };
        let join_interrupted = interrupted_joins.contains(&hr.id);
        if facts.staging_leftovers.is_empty() && !join_interrupted {
            continue;
        }
        let (Some(hs), Some(destinations)) = (by_spec.get(&hr.id), planned.staging.get(&hr.id))
        else {
            continue;
        };
        let role = if hs.role.is_controller() {
            crate::k0s::TokenRole::Controller
        } else {
            crate::k0s::TokenRole::Worker
        };
        let placeholder = join_interrupted.then(|| crate::k0s::placeholder_token(role));
        let cmd = crate::k0s::settle_leftovers(
            &crate::k0s::desired::token_file(hs),
            placeholder.as_deref(),
            destinations,
        );
        let id = hr.id.clone();
        let transport = transport.clone();
        let limit = limit.clone();
        tasks.spawn(async move {
            // The semaphore is never closed, so acquiring only fails if it were.
            let _permit = limit.acquire_owned().await.ok();
            let notes = match transport.run(&id, cmd).await {
                Ok(out) if out.success() => out
                    .stdout_str()
                    .lines()
                    .map(|f| format!("{id}: cleaned up {}, left by an earlier run", f.trim()))
                    .collect(),
                Ok(out) => vec![format!(
                    "{id}: could not remove what an earlier run left: {}",
                    out.error_line()
                )],
                Err(e) => vec![format!("could not remove what an earlier run left: {e}")],
            };
            (i, notes)
        });
    }
    let mut done = Vec::new();
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(x) => done.push(x),
            Err(e) => done.push((
                usize::MAX,
                vec![format!("could not remove what an earlier run left: {e}")],
            )),
        }
    }
    // In host order, as before.
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().flat_map(|(_, n)| n).collect()
}
