//! The pipeline shared by `plan`, `apply` and `graph`: load the spec and the state, probe the
//! hosts (or read a saved probe), compute the desired facts, and diff. Commands only choose what
//! to print and which exit code to return.

use crate::binaries;
use crate::exit::Exit;
use crate::hostid::HostId;
use crate::k0s::release::Mirror;
use crate::plan::{
    self, Desired, DesiredHost, LocalBinary, Plan, PlanOptions, Refusal, ResolvedVersion,
};
use crate::probe::{self, ProbeOptions};
use crate::reality::Reality;
use crate::spec::{self, Loaded, Spec};
use crate::ssh::{SshOptions, SshTransport};
use crate::state::{State, StateError, StateStore};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A command-level failure: what to print and which exit code to return.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn error(message: impl Into<String>) -> Self {
        Failure {
            exit: Exit::Error,
            message: message.into(),
        }
    }
    /// Print the failure (`Error: …` on stderr) and return its exit code. Messages quote what
    /// hosts answered (stderr lines, names): escaped, line breaks kept.
    /// With a debug log (`runlog`), the message goes there too and names it, as k0sctl's
    /// "apply failed - log file saved to …" (cmd/apply.go).
    pub fn report(self) -> Exit {
        if !self.message.is_empty() {
            let message = crate::ui::escape_lines(&self.message);
            eprintln!("Error: {message}");
            crate::runlog::line(&format!("error: {message:?}"));
            if let Some(log) = crate::runlog::path() {
                eprintln!("The debug log of this run is in {}", log.display());
            }
        }
        self.exit
    }
}

impl From<StateError> for Failure {
    fn from(e: StateError) -> Self {
        Failure {
            exit: e.exit(),
            message: e.to_string(),
        }
    }
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        let mut message = format!("refused: {}", r.message);
        for d in &r.details {
            message.push_str("\n  ");
            message.push_str(d);
        }
        Failure {
            exit: r.exit(),
            message,
        }
    }
}

/// Load the spec from `paths` (the defaults when empty), printing its warnings; errors are
/// printed with their locations.
pub fn load_spec(paths: &[PathBuf]) -> Result<Loaded, Failure> {
    match spec::load(paths) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("{w}");
            }
            Ok(loaded)
        }
        Err(diags) => {
            for d in &diags.0 {
                eprintln!("{d}");
            }
            let n = diags.error_count();
            Err(Failure::error(format!(
                "the spec is not valid: {n} error{}",
                if n == 1 { "" } else { "s" }
            )))
        }
    }
}

/// The state store for this run (the local file or etcd, as `-state` says) and the state in it
/// (a new, empty one when there is none yet: `had_state` tells which).
pub struct StateCtx {
    pub store: Box<dyn StateStore>,
    pub state: State,
    pub had_state: bool,
}

impl StateCtx {
    /// The state a saved plan is sealed against: with no state yet, an empty lineage (a fresh
    /// state's random lineage would never match the one `apply` creates).
    pub fn sealed_view(&self) -> State {
        let mut seen = self.state.clone();
        if !self.had_state {
            seen.lineage = String::new();
        }
        seen
    }
}

/// Read the state from `store`.
pub fn load_state(mut store: Box<dyn StateStore>) -> Result<StateCtx, Failure> {
    let loaded = store.load()?;
    let had_state = loaded.is_some();
    Ok(StateCtx {
        store,
        state: loaded.unwrap_or_default(),
        had_state,
    })
}

/// sha256 of every local k0s binary the spec names (`k0sBinaryPath`), each file read once, and
/// every host's `files:` expanded and hashed.
pub fn desired(spec: &Spec) -> Result<Desired, Failure> {
    let mut by_path: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut hosts = Vec::new();
    for h in &spec.hosts {
        let local_binary = match &h.k0s_binary_path {
            Some(p) => {
                let sha = match by_path.get(p) {
                    Some(s) => s.clone(),
                    None => {
                        let s = hash_file(p)?;
                        by_path.insert(p.clone(), s.clone());
                        s
                    }
                };
                Some(LocalBinary {
                    sha256: sha,
                    version: spec.k0s.version.clone(),
                    url: None,
                })
            }
            None => None,
        };
        let files = crate::files::desired(h).map_err(Failure::error)?;
        hosts.push(DesiredHost {
            host: h.id(),
            local_binary,
            host_download: None,
            files,
        });
    }
    // Sorted: Desired::local_binary binary-searches.
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    Ok(Desired { hosts })
}

/// `-restore-from FILE`: its sha256 and what `k0s restore` will need from it, read before
/// planning so a file that is not a k0s backup is refused before any host is touched.
pub fn restore_archive(path: &Path) -> Result<crate::plan::RestoreArchive, Failure> {
    let fail = |e: &dyn std::fmt::Display| {
        Failure::error(format!("-restore-from {}: {e}", path.display()))
    };
    let abs = std::path::absolute(path).map_err(|e| fail(&e))?;
    let file = std::fs::File::open(&abs).map_err(|e| fail(&e))?;
    let archive =
        crate::k0s::backup::read_archive(std::io::BufReader::new(file)).map_err(|e| fail(&e))?;
    let sha256 = crate::hash::sha256_file(&abs).map_err(|e| fail(&e))?;
    Ok(crate::plan::RestoreArchive {
        path: abs.to_string_lossy().into_owned(),
        sha256,
        peer_address: archive.peer_address,
    })
}

fn hash_file(p: &Path) -> Result<String, Failure> {
    crate::hash::sha256_file(p)
        .map_err(|e| Failure::error(format!("cannot read k0sBinaryPath {}: {e}", p.display())))
}

pub fn ssh_transport() -> Result<SshTransport, Failure> {
    SshTransport::new(SshOptions::default()).map_err(|e| {
        Failure::error(format!(
            "cannot create a private SSH control directory: {e}"
        ))
    })
}

/// Where uploads stage files on each host of the spec: its k0s binary path, k0s.yaml, the join
/// token file and each `files:` destination, each of which may have staging files an earlier
/// run left beside it (`DEST.k0sform-…`). The probe looks beside exactly these and
/// `settle_leftovers` cleans up beside exactly these: one list, so the two never drift. A
/// destroy reads no local file for its plan (`desired` is empty); its hosts' `files:` are
/// expanded here where they still can be, as the cleanup always did.
pub fn staging_destinations(spec: &Spec, desired: &Desired) -> BTreeMap<HostId, Vec<String>> {
    spec.hosts
        .iter()
        .map(|h| {
            let id = h.id();
            let mut d = vec![
                h.k0s_install_path.clone(),
                crate::k0s::desired::config_file(h),
                crate::k0s::desired::token_file(h),
            ];
            match desired.host(&id) {
                Some(dh) => d.extend(dh.files.iter().map(|f| f.remote.clone())),
                None => {
                    if let Ok(files) = crate::files::desired(h) {
                        d.extend(files.into_iter().map(|f| f.remote));
                    }
                }
            }
            (id, d)
        })
        .collect()
}

/// Probe every host (or read `probe_in`), optionally saving what was seen to `probe_out`.
/// `staging`: where to look for upload staging files an earlier run left
/// (`staging_destinations`).
pub async fn reality(
    (spec, state): (&Spec, &State),
    (desired, staging): (&Desired, &BTreeMap<HostId, Vec<String>>),
    transport: &SshTransport,
    (plan_opts, parallelism): (&PlanOptions, usize),
    probe_in: Option<&Path>,
    probe_out: Option<&Path>,
) -> Result<Reality, Failure> {
    let reality = match probe_in {
        Some(p) => probe::load(p).map_err(|e| Failure::error(e.to_string()))?,
        None => {
            let opts = ProbeOptions {
                replace: plan_opts.replace.clone(),
                exclude: plan_opts.exclude.clone(),
                parallelism: parallelism.max(1),
                files: desired
                    .hosts
                    .iter()
                    .filter(|h| !h.files.is_empty())
                    .map(|h| {
                        let paths = h.files.iter().map(|f| f.remote.clone()).collect();
                        (h.host.clone(), paths)
                    })
                    .collect(),
                staging: staging.clone(),
            };
            let plans = probe::plan_probes(spec, state, &opts);
            // -trust-new-host-keys=false: refused right after the key exchange, before the
            // probe (or anything) runs on any host.
            let connected = if plan_opts.refuse_first_contact {
                let connected = probe::connect_all(transport, &plans, opts.parallelism).await;
                let keys: Vec<_> = connected
                    .iter()
                    .filter_map(|(id, c)| Some((id, c.as_ref().ok()?)))
                    .collect();
                crate::plan::refuse_first_contact_keys(spec, state, plan_opts, &keys)?;
                connected
            } else {
                BTreeMap::new()
            };
            probe::probe_planned(transport, &plans, connected, opts.parallelism).await
        }
    };
    if let Some(p) = probe_out {
        let redacted = probe::save(&reality, p).map_err(|e| Failure::error(e.to_string()))?;
        if !redacted.is_empty() {
            let hosts: Vec<String> = redacted.iter().map(|h| h.to_string()).collect();
            eprintln!(
                "{}",
                crate::ui::escape_lines(&format!(
                    "Note: {}: the k0s.yaml of {} is saved with its secrets redacted (its \"redacted\" field says so)",
                    p.display(),
                    hosts.join(", ")
                ))
            );
        }
    }
    Ok(reality)
}

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

/// The release endpoints (`K0SFORM_K0S_DOWNLOAD_URL`, `K0SFORM_K0S_VERSION_URL`).
/// A plain-http base is warned about, once per run.
pub fn mirror() -> Result<Mirror, Failure> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let m = Mirror::from_env().map_err(Failure::error)?;
    WARNED.call_once(|| {
        for w in m.warnings() {
            eprintln!("{}", crate::ui::escape_lines(&w));
        }
    });
    Ok(m)
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
pub async fn plan_with(
    mut loaded: Loaded,
    state: StateCtx,
    transport: &SshTransport,
    (opts, parallelism): (&PlanOptions, usize),
    probe_in: Option<&Path>,
    probe_out: Option<&Path>,
) -> Result<Planned, Failure> {
    let (mut desired, reality, staging) = desired_and_reality(
        &loaded,
        &state,
        transport,
        (opts, parallelism),
        probe_in,
        probe_out,
    )
    .await?;
    crate::k0s::private_address::fill_detected(&mut loaded.spec, &state.state, &reality)
        .map_err(Failure::error)?;
    crate::k0s::desired::keep_running_storage(&mut loaded.spec, &reality);
    crate::k0s::desired::note_running_controllers(&mut loaded.spec, &reality);
    // A destroy installs nothing: no version to choose, no release to look up.
    let resolved = if opts.destroy {
        None
    } else {
        release_sources(&mut loaded.spec, &state.state, &reality, &mut desired).await?
    };
    let mut plan = plan::diff(&loaded.spec, &state.state, &reality, &desired, opts)?;
    plan.k0s_version = resolved;
    Ok(Planned {
        loaded,
        state,
        reality,
        desired,
        staging,
        plan,
    })
}

/// The desired facts (local files hashed), the probed (or read) reality, and where the probe
/// looked for staging files.
async fn desired_and_reality(
    loaded: &Loaded,
    state: &StateCtx,
    transport: &SshTransport,
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
    crate::k0s::private_address::fill_detected(&mut loaded.spec, &state.state, &reality)
        .map_err(|e| SavedPlanFailure::Other(Failure::error(e)))?;
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

/// Run `work` with an SSH transport inside a tokio runtime, close every connection afterwards
/// (whatever `work` returned), and turn the result into an exit code.
pub fn with_ssh<F, Fut>(work: F) -> Exit
where
    F: FnOnce(SshTransport) -> Fut,
    Fut: std::future::Future<Output = Result<Exit, Failure>>,
{
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(f) => return f.report(),
    };
    rt.block_on(async {
        let transport = match ssh_transport() {
            Ok(t) => t,
            Err(f) => return f.report(),
        };
        let result = work(transport.clone()).await;
        transport.close_all().await;
        match result {
            Ok(exit) => exit,
            Err(f) => f.report(),
        }
    })
}

/// A tokio runtime for one command. Two worker threads are plenty: the work is waiting on SSH.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::error(format!("cannot start the async runtime: {e}")))
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

/// The controller `kubeconfig` and `backup` work through, as k0sctl picks its "leader": the
/// first controller of the spec (file order, `reset: true` ones left out) that runs k0s and
/// whose API answers. With a state, only a controller of the recorded cluster counts: another
/// identity is refused (exit 3). Each candidate is probed once (its host key checked as `plan`
/// checks it) until one qualifies; with `refuse_first_contact` (`-trust-new-host-keys=false`)
/// a candidate reached by trusting its key or a bastion's on first contact is refused (exit 3)
/// right after the key exchange, before anything runs on it.
pub async fn healthy_controller<'a>(
    spec: &'a Spec,
    state: &State,
    transport: &SshTransport,
    purpose: &str,
    refuse_first_contact: bool,
) -> Result<(&'a crate::spec::HostSpec, crate::reality::HostFacts), Failure> {
    use crate::reality::{HostReality, Probe};
    let probes = probe::plan_probes(spec, state, &ProbeOptions::default());
    let mut why = Vec::new();
    let mut other_cluster = false;
    for h in spec.controllers().filter(|h| !h.reset) {
        let id = h.id();
        let Some(p) = probe::find_probe(&probes, &id) else {
            continue;
        };
        let probed = match probe::connect_host(transport, p).await {
            Ok(c) => {
                // Before the probe runs on it (`refuse_first_contacts` below checks again).
                if refuse_first_contact {
                    let opts = PlanOptions::default();
                    crate::plan::refuse_first_contact_keys(spec, state, &opts, &[(&id, &c)])?;
                }
                probe::run_probe(transport, p, c).await
            }
            Err(probe) => probe,
        };
        let mut seen = Reality {
            hosts: vec![HostReality {
                id: id.clone(),
                probe: probed,
            }],
        };
        if refuse_first_contact {
            crate::plan::refuse_first_contacts(spec, state, &seen)?;
        }
        let Some(HostReality { probe: probed, .. }) = seen.hosts.pop() else {
            continue;
        };
        match probed {
            Probe::Reached(facts) => {
                let uid = facts.view.as_ref().and_then(|v| v.cluster_uid.clone());
                match (&facts.status, uid) {
                    (None, _) => why.push(format!("{id}: k0s is not running")),
                    (Some(s), _) if s.role != "controller" => {
                        why.push(format!("{id}: k0s runs as {}, not as a controller", s.role))
                    }
                    (Some(_), None) => {
                        why.push(format!("{id}: the Kubernetes API does not answer"))
                    }
                    (Some(_), Some(uid)) => match &state.cluster {
                        Some(c) if c.uid != uid => {
                            other_cluster = true;
                            why.push(format!(
                                "{id}: runs cluster {uid}, the state records {}",
                                c.uid
                            ));
                        }
                        _ => return Ok((h, *facts)),
                    },
                }
            }
            Probe::Unreachable { error } => why.push(format!("{id}: unreachable: {error}")),
            Probe::HostKeyChanged {
                expected,
                offered,
                bastion,
            } => why.push(format!(
                "{id}: {}",
                crate::reality::key_change_text(&expected, &offered, bastion.as_ref())
            )),
            Probe::K0sNotAnswering { error } => {
                why.push(format!("{id}: k0s not answering: {error}"))
            }
        }
    }
    if why.is_empty() {
        why.push("the spec has no controller".into());
    }
    Err(Failure {
        exit: if other_cluster {
            Exit::Refused
        } else {
            Exit::Error
        },
        message: format!(
            "no healthy controller to {purpose}:\n  {}",
            why.join("\n  ")
        ),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{FileSource, HostSpec, Role, SshTarget, UploadFile};

    fn spec(hosts: Vec<HostSpec>) -> Spec {
        Spec {
            name: "t".into(),
            user: "admin".into(),
            hosts,
            ..Default::default()
        }
    }

    /// The probe and the cleanup share this list: the binary path, k0s.yaml, the token file
    /// and each `files:` destination, taken from the plan's desired files (not read again), or
    /// expanded from the spec for a destroy, whose plan reads no local file.
    #[test]
    fn staging_destinations_are_where_uploads_go() {
        let mut w = HostSpec::new(Role::Worker, SshTarget::new("127.0.0.2", 22), 1);
        w.k0s_install_path = "/opt/bin/k0s".into();
        w.files.push(UploadFile {
            name: "i".into(),
            source: FileSource::Inline("x\n".into()),
            dst: Some("/srv/app/i.txt".into()),
            dst_dir: None,
            perm: None,
            dir_perm: "0755".into(),
            user: None,
            group: None,
        });
        let c = HostSpec::new(Role::Controller, SshTarget::new("127.0.0.1", 22), 2);
        let s = spec(vec![w.clone(), c.clone()]);
        let base = |bin: &str| {
            vec![
                bin.to_string(),
                crate::k0s::desired::CONFIG_FILE.to_string(),
                crate::k0s::desired::TOKEN_FILE.to_string(),
            ]
        };
        let mut want_w = base("/opt/bin/k0s");
        want_w.push("/srv/app/i.txt".into());
        let want = BTreeMap::from([
            (w.id(), want_w.clone()),
            (c.id(), base(crate::spec::DEFAULT_K0S_INSTALL_PATH)),
        ]);
        let planned = desired(&s).unwrap();
        assert_eq!(staging_destinations(&s, &planned), want);
        // A destroy: no desired files, the spec's are expanded.
        assert_eq!(staging_destinations(&s, &Desired::default()), want);
        // The plan's desired files are what counts (they are not expanded again).
        let mut moved = planned.clone();
        for h in &mut moved.hosts {
            for f in &mut h.files {
                f.remote = "/srv/other.txt".into();
            }
        }
        assert_eq!(
            staging_destinations(&s, &moved)[&w.id()][3],
            "/srv/other.txt"
        );
    }
}
