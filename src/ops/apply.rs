//! `apply`: the plan made (or a saved plan derived again and compared) under the lock, what
//! earlier runs left settled, the steps run with the state checkpointed after each one.

use super::{Deadline, Failure, Planned, StateCtx, desired_and_reality, diff_seen, hosts_at_once};
use crate::apply::event::EventSink;
use crate::apply::{Cancel, ExecOptions, Remote};
use crate::exit::Exit;
use crate::hostid::HostId;
use crate::plan::{self, PlanOptions};
use crate::probe::{self, ProbeOptions};
use crate::spec::{Loaded, Spec};
use crate::state::{LockGuard, State};
use crate::transport::Transport;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Take the state's lock for `operation` and read the state again under it: another run may
/// have written since it was first read.
pub fn lock(ctx: &mut StateCtx, operation: &str, timeout: Duration) -> Result<LockGuard, Failure> {
    let guard = ctx.store.lock(operation, timeout)?;
    let fresh = ctx.store.load()?;
    ctx.had_state = fresh.is_some();
    ctx.state = fresh.unwrap_or_default();
    Ok(guard)
}

/// Reached while planning, the run fails before any host changed.
const PLANNING: &str = " while planning; no host was changed";

/// Load, probe and diff (as `plan`, without `-probe-in`/`-probe-out`), within `deadline`.
async fn plan<T: Transport + Clone + 'static>(
    loaded: Loaded,
    ctx: StateCtx,
    transport: &T,
    (opts, parallelism): (&PlanOptions, usize),
    deadline: &Deadline,
) -> Result<Planned, Failure> {
    let planning = super::plan_with(loaded, ctx, transport, (opts, parallelism), None, None);
    deadline.bounded(planning, PLANNING).await?
}

/// `apply FILE`: the saved plan `saved` (read from `file`) derived again, within `deadline`;
/// stale or altered → exit 5.
async fn rederive<T: Transport + Clone + 'static>(
    (file, saved): (&Path, &plan::SavedPlan),
    loaded: Loaded,
    ctx: StateCtx,
    transport: &T,
    (cli, parallelism): (&PlanOptions, usize),
    deadline: &Deadline,
) -> Result<Planned, Failure> {
    let rederiving = rederive_saved(saved, loaded, ctx, transport, (cli, parallelism));
    deadline
        .bounded(rederiving, PLANNING)
        .await?
        .map_err(|e| match e {
            SavedPlanFailure::Stale(stale) => Failure::new(
                Exit::StalePlan,
                format!("{}: {stale}; run `k0sform plan` again", file.display()),
            ),
            SavedPlanFailure::Other(f) => f,
        })
}

/// The plan `apply` runs: the saved plan in `plan_file` derived again (`rederive`), else one
/// made now (`plan`), within `deadline`.
pub async fn plan_or_rederive<T: Transport + Clone + 'static>(
    plan_file: Option<&Path>,
    loaded: Loaded,
    ctx: StateCtx,
    transport: &T,
    with: (&PlanOptions, usize),
    deadline: &Deadline,
) -> Result<Planned, Failure> {
    match plan_file {
        Some(file) => {
            let saved = super::read_saved(file)?;
            rederive((file, &saved), loaded, ctx, transport, with, deadline).await
        }
        None => plan(loaded, ctx, transport, with, deadline).await,
    }
}

/// Why `apply FILE` will not run a saved plan.
enum SavedPlanFailure {
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
async fn rederive_saved<T: Transport + Clone + 'static>(
    saved: &plan::SavedPlan,
    loaded: Loaded,
    state: StateCtx,
    transport: &T,
    (cli, parallelism): (&PlanOptions, usize),
) -> Result<Planned, SavedPlanFailure> {
    let opts = saved
        .options_for_apply(cli)
        .map_err(SavedPlanFailure::Stale)?;
    let (desired, reality, staging) =
        desired_and_reality(&loaded, &state, transport, (&opts, parallelism), None, None).await?;
    saved
        .verify(&state.sealed_view(), &loaded.sha256, &reality)
        .map_err(SavedPlanFailure::Stale)?;
    // The version is chosen again, as for a plan: the file's choice must be the same
    // (`SavedPlan::matches`), it is never taken.
    let planned = diff_seen(loaded, state, (reality, desired, staging), &opts).await?;
    saved
        .matches(&planned.plan)
        .map_err(SavedPlanFailure::Stale)?;
    Ok(planned)
}

/// How an approved plan runs.
pub struct RunOptions {
    /// Hosts at once for the cleanup of what earlier runs left (as for the probe).
    pub parallelism: usize,
    /// `-parallelism` as given: the executor's limit is worked out again from the state it runs
    /// against (`hosts_at_once`).
    pub parallelism_flag: Option<usize>,
    pub deadline: Deadline,
    /// Show download progress on stderr.
    pub progress: bool,
}

/// Run an approved plan: the intents of an earlier run settled, what it left on the hosts
/// cleaned up, an emptied destroy's cluster forgotten, then the steps, each reported to `sink`.
pub async fn run<T: Transport + Clone + 'static>(
    mut planned: Planned,
    transport: &T,
    opts: &RunOptions,
    sink: &mut dyn EventSink,
) -> Result<Exit, Failure> {
    // Known before the intents are settled: where a killed run may have left a join token.
    let interrupted_joins: Vec<_> = planned
        .state
        .state
        .intents
        .iter()
        .filter(|i| i.kind.starts_with("join_"))
        .map(|i| HostId::new(&i.address, i.port))
        .collect();
    resolve_intents(&mut planned)?;
    for note in settle_leftovers(&planned, transport, &interrupted_joins, opts.parallelism).await {
        eprintln!("{}", crate::escape::escape(&note));
    }
    if planned.plan.destroy && !planned.plan.has_changes() {
        super::destroy::forget_empty_cluster(&mut planned)?;
    }
    if planned.plan.has_changes() {
        execute(planned, transport, opts, sink).await
    } else {
        Ok(Exit::Success)
    }
}

/// Steps an earlier run started and did not see finish (it was killed) are recorded as intents.
/// The plan was just made from what the hosts show now, so it already accounts for whatever those
/// steps did or did not do: once it is approved, the intents are settled and dropped.
fn resolve_intents(planned: &mut Planned) -> Result<(), Failure> {
    let n = planned.state.state.intents.len();
    if n == 0 {
        return Ok(());
    }
    planned.state.state.intents.clear();
    planned.state.store.write(&planned.state.state)?;
    eprintln!(
        "Settled {n} unfinished step{} of an earlier run against what the hosts show now.",
        if n == 1 { "" } else { "s" }
    );
    Ok(())
}

/// What to call each host in progress lines, as the planner names nodes: the spec's hostname,
/// else what the host said, else the state's node name (the plan's names win over these).
fn display_names(
    spec: &Spec,
    state: &State,
    probed: &HashMap<HostId, String>,
) -> HashMap<HostId, String> {
    let mut names = HashMap::new();
    for h in &state.hosts {
        if let Some(n) = &h.node_name {
            names.insert(h.id(), n.clone());
        }
    }
    for (id, n) in probed {
        names.insert(id.clone(), n.to_lowercase());
    }
    for h in &spec.hosts {
        if let Some(n) = &h.hostname {
            names.insert(h.id(), n.to_lowercase());
        }
    }
    names
}

/// The steps of the plan, the state checkpointed after each one.
async fn execute<T: Transport + Clone + 'static>(
    planned: Planned,
    transport: &T,
    opts: &RunOptions,
    sink: &mut dyn EventSink,
) -> Result<Exit, Failure> {
    let Planned {
        loaded,
        state: mut ctx,
        plan,
        reality,
        desired,
        ..
    } = planned;
    // uploadBinary: every release binary the plan uploads, downloaded once into the local
    // cache before any step runs, so a failed download changes no host.
    let mirror = super::mirror()?;
    let binaries = tokio::task::block_in_place(|| {
        crate::binaries::cache_uploads(&plan, &desired, &mirror, opts.progress)
    })
    .map_err(Failure::error)?;
    let remote = Remote {
        transport: Arc::new(transport.clone()),
        prober: Arc::new(Reprober::new(transport.clone(), &loaded.spec, &ctx.state)),
    };
    let hostnames = reality
        .hosts
        .iter()
        .filter_map(|h| {
            let name = h.probe.facts()?.hostname.trim();
            (!name.is_empty()).then(|| (h.id.clone(), name.to_string()))
        })
        .collect();
    let names = display_names(&loaded.spec, &ctx.state, &hostnames);
    let exec = ExecOptions {
        parallelism: hosts_at_once(opts.parallelism_flag, &loaded.spec, ctx.state.hosts.len()),
        hostnames,
        names,
        binaries,
        download_timeout: mirror.timeout,
        ..ExecOptions::default()
    };
    let cancel = Cancel::new();
    cancel.interrupt_on_ctrl_c();
    let timer = interrupt_at(&opts.deadline, &cancel);
    let store = &mut ctx.store;
    let mut checkpoint = |s: &State| store.write(s).map(|_| ());
    let mut state = ctx.state.clone();
    let result = crate::apply::execute(
        &plan,
        &loaded.spec,
        &mut state,
        remote,
        &exec,
        sink,
        &mut checkpoint,
        &cancel,
    )
    .await;
    if let Some(t) = timer {
        t.abort();
    }
    match result {
        Ok(_) => Ok(Exit::Success),
        Err(e) => Err(Failure::new(e.exit(), e.to_string())),
    }
}

/// -timeout (k0sctl's --timeout): when it is reached, as one Ctrl-C: nothing new starts,
/// running steps finish and are recorded, the run fails.
fn interrupt_at(deadline: &Deadline, cancel: &Cancel) -> Option<tokio::task::JoinHandle<()>> {
    let (at, d) = deadline.at()?;
    let cancel = cancel.clone();
    Some(tokio::spawn(async move {
        tokio::time::sleep_until(at).await;
        eprintln!(
            "-timeout {} reached: no new step starts; waiting for the running ones",
            humantime::format_duration(d)
        );
        cancel.interrupt();
    }))
}

/// Probes one host again for the executor (after a join, to record its identity), over the
/// connection the plan's probe opened, its host keys checked as the probe checks them.
pub struct Reprober<T> {
    transport: T,
    probes: Vec<probe::HostProbe>,
}

impl<T: Transport + Clone + 'static> Reprober<T> {
    pub fn new(transport: T, spec: &Spec, state: &State) -> Self {
        let probes = probe::plan_probes(spec, state, &ProbeOptions::default());
        Reprober { transport, probes }
    }
}

impl<T: Transport + Clone + 'static> crate::apply::HostProber for Reprober<T> {
    fn probe<'a>(
        &'a self,
        host: &'a HostId,
        known_binary: Option<&'a crate::state::BinaryRecord>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::reality::Probe> + Send + 'a>>
    {
        Box::pin(async move {
            let Some(p) = probe::find_probe(&self.probes, host) else {
                return crate::reality::Probe::Unreachable {
                    error: format!("{host} is neither in the spec nor in the state"),
                };
            };
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
            probe::probe_host(&self.transport, p).await
        })
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
pub async fn settle_leftovers<T: Transport + Clone + 'static>(
    planned: &Planned,
    transport: &T,
    interrupted_joins: &[HostId],
    parallelism: usize,
) -> Vec<String> {
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
