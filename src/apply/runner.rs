//! The real steps: what each `StepKind` does on the hosts, through `k0s` command builders and the
//! `Transport` only. Safety preconditions are re-checked against the live cluster right before a
//! step acts (refusals change nothing); intents are recorded through the coordinator before any
//! non-idempotent action. Join tokens live only in `JoinToken` values: inside one step for a
//! controller, shared by the worker joins running at the same time for a worker (`SharedToken`),
//! and are invalidated when the last step using one is done.

use super::{
    ExecOptions, StateChange, StepContext, StepError, StepRunner, intent_for, needs_intent,
};
use crate::hostid::HostId;
use crate::k0s::probe_script::peer_url_host as peer_host;
use crate::k0s::{self, K0sFailure, TokenRole, desired};
use crate::plan::{ObjectKind, Step, StepKind};
use crate::reality::{HostFacts, NodeView, ServiceKind};
use crate::spec::{HostSpec, Role, Spec};
use crate::state::{ClusterState, EtcdMemberState, HostAccess, HostState, State};
use crate::transport::{CommandOutput, RemoteCommand, Transport};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Join tokens live 30 minutes at most, even if invalidation fails.
const TOKEN_EXPIRY: Duration = Duration::from_secs(30 * 60);

/// Probes one host for its identity (machine-id, host key, k0s status, the cluster as it sees
/// it). The command layer supplies the real probe (it also knows the SSH host key).
pub trait HostProber: Send + Sync + 'static {
    fn probe<'a>(
        &'a self,
        host: &'a HostId,
    ) -> Pin<Box<dyn Future<Output = Result<HostFacts, String>> + Send + 'a>>;
}

/// A k0s binary on this machine that steps may upload besides the hosts' `k0sBinaryPath`
/// (none yet: k0sform downloads nothing, so `ExecOptions::binaries` is always empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalK0s {
    pub path: PathBuf,
    pub sha256: String,
    pub version: Option<String>,
}

/// Everything the steps reach hosts with.
pub struct Remote<T> {
    pub transport: Arc<T>,
    pub prober: Arc<dyn HostProber>,
}

impl<T> Clone for Remote<T> {
    fn clone(&self) -> Self {
        Remote {
            transport: self.transport.clone(),
            prober: self.prober.clone(),
        }
    }
}

/// A join token. Deliberately neither `Display` nor a readable `Debug`: it goes to the joining
/// host as a 0600 file and nowhere else.
struct JoinToken(String);

impl std::fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JoinToken(<redacted>)")
    }
}

/// At most `limit` commands at once per host, however many steps talk to it.
struct HostLimits {
    limit: usize,
    sems: Mutex<HashMap<HostId, Arc<Semaphore>>>,
}

impl HostLimits {
    async fn permit(&self, host: &HostId) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let sem = {
            let mut m = self.sems.lock().ok()?;
            m.entry(host.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(self.limit.max(1))))
                .clone()
        };
        sem.acquire_owned().await.ok()
    }
}

struct Paths {
    bin: String,
    data_dir: String,
    kubelet_root_dir: Option<String>,
}

/// Polls a condition until a deadline.
struct Deadline {
    until: Instant,
    total: Duration,
    interval: Duration,
}

impl Deadline {
    fn new(total: Duration, interval: Duration) -> Self {
        Deadline {
            until: Instant::now() + total,
            total,
            interval,
        }
    }
    /// Sleep before the next try, or give up with the last reason.
    async fn retry(&self, what: &str, last: &str) -> Result<(), String> {
        if Instant::now() >= self.until {
            return Err(format!(
                "timed out after {} waiting for {what}: {last}",
                humantime::format_duration(Duration::from_secs(self.total.as_secs().max(1)))
            ));
        }
        tokio::time::sleep(self.interval).await;
        Ok(())
    }
}

/// Member IDs compare as hex numbers (case and leading zeros do not matter).
fn same_member_id(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.trim()
            .trim_start_matches("0x")
            .trim_start_matches('0')
            .to_lowercase()
    };
    norm(a) == norm(b)
}

fn failed(e: impl std::fmt::Display) -> StepError {
    StepError::Failed(e.to_string())
}

/// Runs plan steps against real (or fake) hosts.
pub struct K0sRunner<T> {
    remote: Remote<T>,
    limits: HostLimits,
    /// `options.concurrentUploads`: binary uploads in flight at once (bandwidth, not safety).
    uploads: Arc<Semaphore>,
    spec: Spec,
    /// The state as it was when the run began: who holds which peer address.
    known: State,
    /// The EtcdMember objects seen during this run, by peer address. A removal plan deletes the
    /// object before it removes the member; the member-ID check then uses what the object said
    /// moments before it was deleted.
    seen_objects: Mutex<HashMap<String, k0s::EtcdMemberObject>>,
    /// The last `kubectl get nodes` per controller and when it was asked (see `nodes_via`).
    node_polls: Mutex<HashMap<HostId, Arc<tokio::sync::Mutex<Option<NodePoll>>>>>,
    /// Worker join tokens in use, per controller (see `worker_token`).
    worker_tokens: tokio::sync::Mutex<HashMap<HostId, SharedToken>>,
    opts: ExecOptions,
}

type NodePoll = (Instant, Result<Arc<Vec<NodeView>>, String>);

/// A worker join token shared by the worker joins running at the same time through one
/// controller, as k0sctl shares one token among the workers it installs: the first join creates
/// it, the last one to finish invalidates it. Controller tokens are never shared.
struct SharedToken {
    token: Arc<JoinToken>,
    id: String,
    users: usize,
}

impl<T: Transport + 'static> K0sRunner<T> {
    pub fn new(remote: Remote<T>, spec: &Spec, state: &State, opts: &ExecOptions) -> Self {
        K0sRunner {
            remote,
            limits: HostLimits {
                limit: opts.per_host_limit,
                sems: Mutex::new(HashMap::new()),
            },
            uploads: Arc::new(Semaphore::new(spec.options.concurrent_uploads.max(1))),
            spec: spec.clone(),
            known: state.clone(),
            seen_objects: Mutex::new(HashMap::new()),
            node_polls: Mutex::new(HashMap::new()),
            worker_tokens: tokio::sync::Mutex::new(HashMap::new()),
            opts: opts.clone(),
        }
    }

    // ----- host access -----

    fn paths(&self, id: &HostId) -> Paths {
        match self.spec.host(id) {
            Some(h) => Paths {
                bin: h.k0s_install_path.clone(),
                data_dir: h.data_dir.clone(),
                kubelet_root_dir: h.kubelet_root_dir.clone(),
            },
            // A host no longer in the spec: the paths recorded for it.
            None => {
                let (bin, data_dir, kubelet_root_dir) = HostState::k0s_paths(self.known.host(id));
                Paths {
                    bin,
                    data_dir,
                    kubelet_root_dir,
                }
            }
        }
    }

    fn host_spec(&self, id: &HostId) -> Result<&HostSpec, StepError> {
        self.spec
            .host(id)
            .ok_or_else(|| failed(format!("{id} is not in the spec")))
    }

    async fn exec(&self, host: &HostId, cmd: RemoteCommand) -> Result<CommandOutput, String> {
        let _permit = self.limits.permit(host).await;
        self.remote
            .transport
            .run(host, cmd)
            .await
            .map_err(|e| e.to_string())
    }

    /// Run and require exit 0.
    async fn exec_ok(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
        what: &str,
    ) -> Result<CommandOutput, StepError> {
        let out = self.exec(host, cmd).await.map_err(failed)?;
        if !out.success() {
            return Err(failed(format!(
                "{host}: {what} failed: {}",
                out.error_line()
            )));
        }
        Ok(out)
    }

    async fn write(
        &self,
        host: &HostId,
        path: &str,
        data: Vec<u8>,
        mode: u32,
    ) -> Result<(), StepError> {
        let _permit = self.limits.permit(host).await;
        self.remote
            .transport
            .write_file(host, path, data, mode)
            .await
            .map_err(failed)
    }

    async fn probe(&self, host: &HostId) -> Result<HostFacts, StepError> {
        self.remote
            .prober
            .probe(host)
            .await
            .map_err(|e| failed(format!("{host}: probe failed: {e}")))
    }

    // ----- cluster checks -----

    /// The host (spec or state) that carries etcd peer address `addr`.
    fn host_for_peer(&self, addr: &str) -> Option<HostId> {
        self.spec
            .controllers()
            .find(|h| h.peer_address() == addr)
            .map(HostSpec::id)
            .or_else(|| {
                self.known
                    .hosts
                    .iter()
                    .find(|h| {
                        h.etcd
                            .as_ref()
                            .is_some_and(|e| peer_host(&e.peer_url) == addr)
                    })
                    .map(HostState::id)
            })
    }

    async fn readyz(&self, host: &HostId) -> Result<(), String> {
        let p = self.paths(host);
        let out = self.exec(host, k0s::readyz(&p.bin, &p.data_dir)).await?;
        if k0s::readyz_ok(&out) {
            Ok(())
        } else {
            Err(format!(
                "the API server on {host} is not ready: {}",
                out.error_line()
            ))
        }
    }

    async fn member_list(&self, via: &HostId) -> Result<BTreeMap<String, String>, String> {
        let p = self.paths(via);
        let out = self
            .exec(via, k0s::member_list(&p.bin, &p.data_dir))
            .await?;
        if !out.success() {
            return Err(format!(
                "cannot list etcd members on {via}: {}",
                out.error_line()
            ));
        }
        k0s::parse_member_list(&out.stdout_str()).map_err(|e| format!("{via}: {e}"))
    }

    async fn etcd_member_objects(
        &self,
        via: &HostId,
    ) -> Result<Vec<k0s::EtcdMemberObject>, String> {
        let p = self.paths(via);
        let out = self
            .exec(via, k0s::get_etcd_members(&p.bin, &p.data_dir))
            .await?;
        if !out.success() {
            return Err(format!(
                "cannot list EtcdMember objects on {via}: {}",
                out.error_line()
            ));
        }
        let objects =
            k0s::parse_etcd_members(&out.stdout_str()).map_err(|e| format!("{via}: {e}"))?;
        if let Ok(mut seen) = self.seen_objects.lock() {
            for o in &objects {
                if let Some(a) = &o.peer_address {
                    seen.insert(a.clone(), o.clone());
                }
            }
        }
        Ok(objects)
    }

    fn seen_object(&self, addr: &str) -> Option<k0s::EtcdMemberObject> {
        self.seen_objects.lock().ok()?.get(addr).cloned()
    }

    /// Is every etcd member (except the one at `exclude`, which is being removed) healthy, as
    /// seen through `via`? Healthy: listed as started, its EtcdMember object (if any) joined, and
    /// the API server on its host ready. Returns the member list (name → peer URL).
    async fn health(
        &self,
        via: &HostId,
        exclude: Option<&str>,
    ) -> Result<BTreeMap<String, String>, String> {
        self.readyz(via).await?;
        let members = self.member_list(via).await?;
        // Objects exist from k0s 1.30 on; older clusters are judged on the other checks.
        let objects = self.etcd_member_objects(via).await.unwrap_or_default();
        for (name, url) in &members {
            let addr = peer_host(url);
            if exclude == Some(addr) {
                continue;
            }
            if name.is_empty() {
                return Err(format!("etcd member {url} was added but has not started"));
            }
            if let Some(o) = objects
                .iter()
                .find(|o| o.peer_address.as_deref() == Some(addr))
                && o.joined == Some(false)
            {
                return Err(format!(
                    "EtcdMember \"{}\" ({url}) reports Joined=False",
                    o.name
                ));
            }
            if let Some(h) = self.host_for_peer(addr)
                && &h != via
            {
                self.readyz(&h)
                    .await
                    .map_err(|e| format!("etcd member \"{name}\" ({url}) is not healthy: {e}"))?;
            }
        }
        if members.is_empty() {
            return Err(format!("{via} lists no etcd members"));
        }
        Ok(members)
    }

    /// The safety gate before a membership change: healthy within `health_grace`, else unsafe.
    async fn require_health(
        &self,
        ctx: &StepContext,
        via: &HostId,
        exclude: Option<&str>,
    ) -> Result<BTreeMap<String, String>, StepError> {
        let dl = Deadline::new(self.opts.health_grace, self.opts.poll_interval);
        loop {
            match self.health(via, exclude).await {
                Ok(m) => return Ok(m),
                Err(e) => {
                    ctx.progress(format!("waiting for a healthy cluster: {e}"));
                    dl.retry("every remaining etcd member to be healthy", &e)
                        .await
                        .map_err(|_| {
                            StepError::Unsafe(format!(
                                "not every remaining etcd member is healthy (checked via {via}): {e}"
                            ))
                        })?;
                }
            }
        }
    }

    async fn wait_ready(&self, ctx: &StepContext, host: &HostId) -> Result<(), StepError> {
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        loop {
            match self.readyz(host).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    ctx.progress(format!("waiting for k0s to be ready: {e}"));
                    dl.retry(&format!("k0s to be ready on {host}"), &e)
                        .await
                        .map_err(failed)?;
                }
            }
        }
    }

    async fn wait_node_ready(
        &self,
        ctx: &StepContext,
        via: &HostId,
        node: &str,
    ) -> Result<(), StepError> {
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        loop {
            let why = match self.nodes_via(via, Instant::now()).await {
                Ok(nodes) => match nodes.iter().find(|n| n.name == node) {
                    Some(n) if n.ready => return Ok(()),
                    Some(_) => format!("Node \"{node}\" is not Ready yet"),
                    None => format!("Node \"{node}\" does not exist yet"),
                },
                Err(e) => e,
            };
            ctx.progress(format!("waiting for Node \"{node}\": {why}"));
            dl.retry(&format!("Node \"{node}\" to be Ready (via {via})"), &why)
                .await
                .map_err(failed)?;
        }
    }

    /// The Nodes as controller `via` lists them, asked no earlier than `not_before`. Steps
    /// waiting for Nodes at the same time share one `kubectl get nodes` (single flight): many
    /// workers joining cost the controller one query per poll, not one per worker.
    async fn nodes_via(
        &self,
        via: &HostId,
        not_before: Instant,
    ) -> Result<Arc<Vec<NodeView>>, String> {
        let slot = {
            let mut polls = self
                .node_polls
                .lock()
                .map_err(|_| "node poll table poisoned")?;
            polls.entry(via.clone()).or_default().clone()
        };
        let mut last = slot.lock().await;
        if let Some((asked, result)) = &*last
            && *asked >= not_before
        {
            return result.clone();
        }
        let asked = Instant::now();
        let p = self.paths(via);
        let result = match self.exec(via, k0s::get_nodes(&p.bin, &p.data_dir)).await {
            Ok(out) if out.success() => k0s::parse_nodes(&out.stdout_str())
                .map(Arc::new)
                .map_err(|e| e.to_string()),
            Ok(out) => Err(out.error_line()),
            Err(e) => Err(e),
        };
        *last = Some((asked, result.clone()));
        result
    }

    async fn wait_stopped(&self, host: &HostId) -> Result<(), StepError> {
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        let p = self.paths(host);
        loop {
            let out = self
                .exec(host, k0s::status_json(&p.bin))
                .await
                .map_err(failed)?;
            let stopped = matches!(
                k0s::classify(&out),
                Some(K0sFailure::NotRunning | K0sFailure::NotInstalled | K0sFailure::BinaryMissing)
            );
            if stopped {
                return Ok(());
            }
            dl.retry(&format!("k0s to stop on {host}"), "still running")
                .await
                .map_err(failed)?;
        }
    }

    async fn stop_k0s(&self, host: &HostId) -> Result<(), StepError> {
        let p = self.paths(host);
        let out = self.exec(host, k0s::stop(&p.bin)).await.map_err(failed)?;
        let stopped = matches!(
            k0s::classify(&out),
            Some(K0sFailure::AlreadyStopped | K0sFailure::NotInstalled | K0sFailure::BinaryMissing)
        );
        if !out.success() && !stopped {
            return Err(failed(format!(
                "{host}: k0s stop failed: {}",
                out.error_line()
            )));
        }
        self.wait_stopped(host).await
    }

    async fn start_k0s(&self, host: &HostId) -> Result<(), StepError> {
        let p = self.paths(host);
        let out = self.exec(host, k0s::start(&p.bin)).await.map_err(failed)?;
        if !out.success() && !k0s::already_running(&out) {
            return Err(failed(format!(
                "{host}: k0s start failed: {}",
                out.error_line()
            )));
        }
        Ok(())
    }

    async fn install(&self, hs: &HostSpec, args: &[String]) -> Result<(), StepError> {
        let kind = if hs.role == Role::Worker {
            ServiceKind::Worker
        } else {
            ServiceKind::Controller
        };
        let p = self.paths(&hs.id());
        // --force: a leftover unit from an earlier, half-done run is replaced, not an error.
        let cmd = k0s::install(&p.bin, kind, args, &hs.environment, true);
        self.exec_ok(&hs.id(), cmd, "k0s install").await.map(|_| ())
    }

    /// Wait until the host runs k0s again and, where it has one, its Node is Ready.
    async fn wait_back(&self, ctx: &StepContext, hs: &HostSpec) -> Result<(), StepError> {
        let id = hs.id();
        if hs.role.is_controller() {
            self.wait_ready(ctx, &id).await?;
        }
        if hs.role.has_node() && self.spec.options.wait {
            let via = if hs.role.is_controller() {
                Some(id.clone())
            } else {
                self.spec.controllers().map(HostSpec::id).next()
            };
            if let Some(via) = via {
                let node = self.node_name(hs).await?;
                self.wait_node_ready(ctx, &via, &node).await?;
            }
        }
        Ok(())
    }

    /// The host's Node name: the spec's `hostname`, else the hostname the plan's probe saw,
    /// else (no probe this run) the hostname the host shows now.
    async fn node_name(&self, hs: &HostSpec) -> Result<String, StepError> {
        let id = hs.id();
        match hs.hostname.as_ref().or(self.opts.hostnames.get(&id)) {
            Some(h) => Ok(h.trim().to_lowercase()),
            None => Ok(self.probe(&id).await?.hostname.trim().to_lowercase()),
        }
    }

    fn local_binary(
        &self,
        hs: &HostSpec,
        sha256: Option<&str>,
        version: Option<&str>,
    ) -> Option<PathBuf> {
        let cached = self.opts.binaries.iter().find(|b| {
            sha256.is_some_and(|s| b.sha256 == s)
                || (sha256.is_none() && version.is_some() && b.version.as_deref() == version)
        });
        cached
            .map(|b| b.path.clone())
            .or_else(|| hs.k0s_binary_path.clone())
    }

    /// Upload a local file (at most `uploads` at once, within the host's command limit) and
    /// return the sha256 of what is now at `remote`.
    async fn upload_local(
        &self,
        host: &HostId,
        local: &std::path::Path,
        remote: &str,
        mode: u32,
    ) -> Result<String, StepError> {
        let _upload = self.uploads.clone().acquire_owned().await.ok();
        let _permit = self.limits.permit(host).await;
        self.remote
            .transport
            .upload_file(host, local, remote, mode)
            .await
            .map_err(failed)
    }

    async fn upload_binary(
        &self,
        hs: &HostSpec,
        sha256: Option<&str>,
        version: Option<&str>,
    ) -> Result<(), StepError> {
        let id = hs.id();
        let local = self.local_binary(hs, sha256, version).ok_or_else(|| {
            failed(format!(
                "{id}: no local k0s binary to upload (set k0sBinaryPath{})",
                version
                    .map(|v| format!(" or provide k0s {v}"))
                    .unwrap_or_default()
            ))
        })?;
        let got = self
            .upload_local(&id, &local, &hs.k0s_install_path, 0o755)
            .await?;
        if let Some(want) = sha256
            && !want.is_empty()
            && got != want
        {
            return Err(failed(format!(
                "{id}: the uploaded k0s binary has sha256 {got}, the plan expected {want} ({} changed since planning)",
                local.display()
            )));
        }
        Ok(())
    }

    // ----- steps -----

    async fn run_step(
        &self,
        step: &Step,
        ctx: &StepContext,
    ) -> Result<Vec<StateChange>, StepError> {
        let host = &step.host;
        let gate = async || -> Result<(), StepError> {
            if needs_intent(&step.kind) {
                ctx.record_intent(intent_for(step)).await?;
            }
            Ok(())
        };
        match &step.kind {
            StepKind::UploadBinary { sha256, version } => {
                let hs = self.host_spec(host)?;
                self.upload_binary(hs, Some(sha256), version.as_deref())
                    .await?;
                Ok(vec![])
            }
            StepKind::WriteConfig { sha256 } => {
                let hs = self.host_spec(host)?;
                let yaml = desired::config_yaml(&self.spec, hs);
                let got = crate::hash::sha256_hex(&yaml);
                if !sha256.is_empty() && &got != sha256 {
                    return Err(failed(format!(
                        "{host}: k0s.yaml from the spec now has sha256 {got}, the plan expected {sha256}: plan again"
                    )));
                }
                self.write(host, desired::CONFIG_FILE, yaml.into_bytes(), 0o600)
                    .await?;
                Ok(vec![])
            }
            StepKind::Bootstrap => self.bootstrap(step, ctx, gate).await,
            StepKind::JoinController { via } => {
                let hs = self.host_spec(host)?;
                let addr = hs.peer_address().to_string();
                // The more specific refusal first: a stale member at this address is also an
                // unhealthy one.
                let members = self.member_list(via).await.map_err(StepError::Unsafe)?;
                if let Some((name, url)) = members.iter().find(|(_, u)| peer_host(u) == addr) {
                    return Err(StepError::Unsafe(format!(
                        "{url} is still registered as etcd member \"{name}\": the stale member must be removed before {host} joins"
                    )));
                }
                self.require_health(ctx, via, None).await?;
                gate().await?;
                self.join(ctx, hs, via, TokenRole::Controller, &addr)
                    .await?;
                Ok(vec![])
            }
            StepKind::JoinWorker { via } => {
                let hs = self.host_spec(host)?;
                gate().await?;
                self.join(ctx, hs, via, TokenRole::Worker, "").await?;
                Ok(vec![])
            }
            StepKind::WaitHealthy { via } => {
                let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
                loop {
                    match self.health(via, None).await {
                        Ok(_) => return Ok(vec![]),
                        Err(e) => {
                            ctx.progress(format!("waiting: {e}"));
                            dl.retry("the cluster to be healthy", &e)
                                .await
                                .map_err(failed)?;
                        }
                    }
                }
            }
            StepKind::RemoveMember {
                member_id,
                peer_url,
                via,
            } => {
                self.remove_member(step, ctx, member_id, peer_url, via, gate)
                    .await
            }
            StepKind::Drain { node, via } => {
                if !self.spec.options.drain.enabled {
                    ctx.progress("drain disabled (options.drain.enabled: false)");
                    return Ok(vec![]);
                }
                let p = self.paths(via);
                let cmd = k0s::drain(&p.bin, &p.data_dir, node, &self.spec.options.drain);
                let out = self.exec(via, cmd).await.map_err(failed)?;
                if !out.success() && !k0s::kubectl_not_found(&out) {
                    return Err(failed(format!(
                        "{via}: draining Node \"{node}\" failed: {}",
                        out.error_line()
                    )));
                }
                Ok(vec![])
            }
            StepKind::DeleteObjects { node, objects, via } => {
                let p = self.paths(via);
                if objects.contains(&ObjectKind::EtcdMember) {
                    // Remember the member ID it shows, for a RemoveMember that follows.
                    let _ = self.etcd_member_objects(via).await;
                }
                for o in objects {
                    let cmd = match o {
                        ObjectKind::Node => k0s::delete_node(&p.bin, &p.data_dir, node),
                        ObjectKind::EtcdMember => {
                            k0s::delete_etcd_member(&p.bin, &p.data_dir, node)
                        }
                        ObjectKind::ControlNode => {
                            k0s::delete_control_node(&p.bin, &p.data_dir, node)
                        }
                    };
                    let out = self.exec(via, cmd).await.map_err(failed)?;
                    if !out.success() && !k0s::kubectl_not_found(&out) {
                        return Err(failed(format!(
                            "{via}: deleting {} \"{node}\" failed: {}",
                            super::summary::object_kind_name(*o),
                            out.error_line()
                        )));
                    }
                }
                Ok(vec![])
            }
            StepKind::ResetHost { machine_id } => {
                let facts = self.probe(host).await?;
                if facts.machine_id.trim() != machine_id.trim() {
                    return Err(StepError::Unsafe(format!(
                        "{host} now has machine-id {}, not {machine_id} as recorded: it is another machine (rebuilt?); refusing to reset it",
                        facts.machine_id.trim()
                    )));
                }
                gate().await?;
                self.stop_k0s(host).await?;
                let p = self.paths(host);
                let cmd = k0s::reset(&p.bin, &p.data_dir, p.kubelet_root_dir.as_deref());
                self.exec_ok(host, cmd, "k0s reset").await?;
                Ok(vec![])
            }
            StepKind::Upgrade { to, .. } => {
                let hs = self.host_spec(host)?;
                gate().await?;
                let args = self.reinstall_args(host, hs).await;
                self.stop_k0s(host).await?;
                // Usually an UploadBinary step already put it there; uploading again is a no-op
                // for an identical file and covers plans that left that step out.
                if self.local_binary(hs, None, Some(to)).is_some() {
                    self.upload_binary(hs, None, Some(to)).await?;
                }
                self.install(hs, &args).await?;
                self.start_k0s(host).await?;
                self.wait_back(ctx, hs).await?;
                Ok(vec![StateChange::SetHostVersion {
                    host: host.clone(),
                    version: to.clone(),
                }])
            }
            StepKind::Reconfigure => {
                let hs = self.host_spec(host)?;
                gate().await?;
                if hs.role.is_controller() {
                    let yaml = desired::config_yaml(&self.spec, hs);
                    self.write(host, desired::CONFIG_FILE, yaml.into_bytes(), 0o600)
                        .await?;
                }
                let args = self.reinstall_args(host, hs).await;
                self.install(hs, &args).await?;
                self.stop_k0s(host).await?;
                self.start_k0s(host).await?;
                self.wait_back(ctx, hs).await?;
                Ok(vec![])
            }
            StepKind::RunHooks {
                action,
                stage,
                lines,
            } => {
                gate().await?;
                for line in lines {
                    ctx.progress(format!("hook {action}.{stage}: {line}"));
                    let cmd = RemoteCommand::new(["sh", "-c", line.as_str()])
                        .as_login_user()
                        .timeout(self.opts.wait_timeout);
                    let out = self.exec(host, cmd).await.map_err(failed)?;
                    if !out.success() {
                        let how = match out.status {
                            Some(c) => format!("exit {c}"),
                            None => "killed or timed out".to_string(),
                        };
                        return Err(failed(format!(
                            "{host}: hook {action}.{stage} `{line}` failed ({how}): {}",
                            out.error_line()
                        )));
                    }
                }
                Ok(vec![])
            }
            StepKind::UploadFiles { files } => {
                let hs = self.host_spec(host)?;
                // The bytes now, checked against what the plan saw.
                let now = crate::files::expand(hs).map_err(failed)?;
                let mut sources = Vec::with_capacity(files.len());
                for want in files {
                    // `expand` sorts by remote path.
                    let found = now.binary_search_by(|e| e.file.remote.cmp(&want.remote));
                    let Some(have) = found.ok().map(|i| &now[i]) else {
                        return Err(failed(format!(
                            "{host}: {} is no longer in the spec's files",
                            want.remote
                        )));
                    };
                    if have.file.sha256 != want.sha256 {
                        return Err(failed(format!(
                            "{host}: the content for {} changed since planning (sha256 {} now, {} planned)",
                            want.remote, have.file.sha256, want.sha256
                        )));
                    }
                    sources.push(&have.content);
                }
                gate().await?;
                // Missing folders in one command, in path order (a parent before its child), each
                // with its file's dirPerm.
                let mut mk = vec![
                    "sh".to_string(),
                    "-c".into(),
                    r#"while [ $# -gt 1 ]; do d=$(dirname -- "$1"); [ -d "$d" ] || install -d -m "$2" -- "$d" || exit; shift 2; done"#.into(),
                    "k0sform-folders".into(),
                ];
                for want in files {
                    mk.push(want.remote.clone());
                    mk.push(crate::files::mode_text(want.dir_mode));
                }
                self.exec_ok(host, RemoteCommand::new(mk), "creating the files' folders")
                    .await?;
                for (want, content) in files.iter().zip(sources) {
                    ctx.progress(format!("uploading {}", want.remote));
                    let got = match content {
                        crate::files::Content::Local(path) => {
                            self.upload_local(host, path, &want.remote, want.mode)
                                .await?
                        }
                        crate::files::Content::Inline(data) => {
                            self.write(host, &want.remote, data.clone(), want.mode)
                                .await?;
                            want.sha256.clone()
                        }
                    };
                    if got != want.sha256 {
                        return Err(failed(format!(
                            "{host}: {} has sha256 {got} after the upload, not {}",
                            want.remote, want.sha256
                        )));
                    }
                    let owner = match (&want.user, &want.group) {
                        (Some(u), Some(g)) => Some(format!("{u}:{g}")),
                        (Some(u), None) => Some(u.clone()),
                        (None, Some(g)) => Some(format!(":{g}")),
                        (None, None) => None,
                    };
                    if let Some(o) = owner {
                        self.exec_ok(
                            host,
                            RemoteCommand::new(["chown", "--", o.as_str(), want.remote.as_str()]),
                            &format!("chown {o} {}", want.remote),
                        )
                        .await?;
                    }
                }
                Ok(vec![])
            }
            StepKind::RecordHost => self.record_host(ctx, host).await,
            StepKind::ForgetHost => Ok(vec![StateChange::ForgetHost(host.clone())]),
        }
    }

    /// Arguments for reinstalling a host that runs: `--token-file` only where the running
    /// service has one (the bootstrap controller never had a token file).
    async fn reinstall_args(&self, host: &HostId, hs: &HostSpec) -> Vec<String> {
        let p = self.paths(host);
        let running: Vec<String> = match self.exec(host, k0s::status_json(&p.bin)).await {
            Ok(out) if out.success() => k0s::parse_status(&out.stdout_str())
                .map(|s| s.args)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        desired::reinstall_args(&self.spec, hs, &running)
    }

    async fn bootstrap(
        &self,
        step: &Step,
        ctx: &StepContext,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let host = &step.host;
        let hs = self.host_spec(host)?;
        if let Some(c) = &self.known.cluster {
            return Err(StepError::Unsafe(format!(
                "the state already names cluster \"{}\" (uid {}): never bootstrap over a known cluster",
                c.name, c.uid
            )));
        }
        let p = self.paths(host);
        let out = self
            .exec(host, k0s::status_json(&p.bin))
            .await
            .map_err(failed)?;
        // `k0s status` answering at all means a k0s process (and maybe a cluster) is there.
        if out.success() {
            return Err(StepError::Unsafe(format!(
                "k0s already runs on {host}: refusing to bootstrap a second cluster there"
            )));
        }
        gate().await?;
        // The first controller must not get a token file: with one it would try to join.
        let args: Vec<String> = desired::install_args(&self.spec, hs)
            .into_iter()
            .filter(|a| !a.starts_with("--token-file"))
            .collect();
        self.install(hs, &args).await?;
        self.start_k0s(host).await?;
        self.wait_ready(ctx, host).await?;
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        let uid = loop {
            let out = self
                .exec(host, k0s::get_cluster_uid(&p.bin, &p.data_dir))
                .await
                .map_err(failed)?;
            let why = if out.success() {
                match k0s::parse_uid(&out.stdout_str()) {
                    Ok(uid) => break uid,
                    Err(e) => e.to_string(),
                }
            } else {
                out.error_line()
            };
            dl.retry("the kube-system namespace uid", &why)
                .await
                .map_err(failed)?;
        };
        Ok(vec![StateChange::SetCluster(ClusterState {
            name: self.spec.name.clone(),
            uid,
            etcd_cluster_id: None,
            k0s_version: self.spec.k0s.version.clone(),
            config_sha256: None,
        })])
    }

    /// Create a token on `via`, hand it to the host as a 0600 file, install and start, wait for
    /// the member (controllers: `peer_addr` listed as started) or Node; then always invalidate
    /// the token and blank the file.
    async fn join(
        &self,
        ctx: &StepContext,
        hs: &HostSpec,
        via: &HostId,
        role: TokenRole,
        peer_addr: &str,
    ) -> Result<(), StepError> {
        let host = hs.id();
        // Known before the token exists, so a failed probe wastes no token.
        let node = if role == TokenRole::Worker {
            Some(self.node_name(hs).await?)
        } else {
            None
        };
        let (token, token_id) = self.take_token(via, role).await?;
        let joined = async {
            self.write(
                &host,
                desired::TOKEN_FILE,
                token.0.as_bytes().to_vec(),
                0o600,
            )
            .await?;
            self.install(hs, &desired::install_args(&self.spec, hs))
                .await?;
            self.start_k0s(&host).await?;
            match &node {
                None => {
                    self.wait_member(ctx, via, peer_addr).await?;
                    self.wait_ready(ctx, &host).await
                }
                Some(node) => self.wait_node_ready(ctx, via, node).await,
            }
        }
        .await;
        drop(token);

        // Clean up whatever happened: the token must not stay usable or lying around.
        self.give_back_token(ctx, via, role, &token_id).await;
        if let Err(e) = self
            .write(&host, desired::TOKEN_FILE, Vec::new(), 0o600)
            .await
        {
            ctx.progress(format!(
                "could not blank {} on {host}: {e}",
                desired::TOKEN_FILE
            ));
        }
        joined
    }

    /// A join token from controller `via` and its ID: a fresh one for a controller, the one the
    /// worker joins running now share for a worker (`SharedToken`).
    async fn take_token(
        &self,
        via: &HostId,
        role: TokenRole,
    ) -> Result<(Arc<JoinToken>, String), StepError> {
        if role != TokenRole::Worker {
            return self.create_token(via, role).await;
        }
        // Held while creating, so joins starting together wait for one token instead of each
        // creating their own.
        let mut shared = self.worker_tokens.lock().await;
        if let Some(t) = shared.get_mut(via) {
            t.users += 1;
            return Ok((t.token.clone(), t.id.clone()));
        }
        let (token, id) = self.create_token(via, role).await?;
        shared.insert(
            via.clone(),
            SharedToken {
                token: token.clone(),
                id: id.clone(),
                users: 1,
            },
        );
        Ok((token, id))
    }

    async fn create_token(
        &self,
        via: &HostId,
        role: TokenRole,
    ) -> Result<(Arc<JoinToken>, String), StepError> {
        let vp = self.paths(via);
        let out = self
            .exec(
                via,
                k0s::token_create(&vp.bin, &vp.data_dir, role, TOKEN_EXPIRY),
            )
            .await
            .map_err(failed)?;
        if !out.success() {
            // stderr only: stdout would be the token.
            return Err(failed(format!(
                "{via}: creating a join token failed: {}",
                out.error_line()
            )));
        }
        let token = JoinToken(out.stdout_str().trim().to_string());
        drop(out);
        let info = k0s::parse_token(&token.0)
            .map_err(|e| failed(format!("{via}: the join token is unusable: {e}")))?;
        Ok((Arc::new(token), info.id))
    }

    /// Done with a token: invalidated now, or, for a shared worker token, when the last join
    /// using it is done.
    async fn give_back_token(&self, ctx: &StepContext, via: &HostId, role: TokenRole, id: &str) {
        if role == TokenRole::Worker {
            let mut shared = self.worker_tokens.lock().await;
            match shared.get_mut(via) {
                Some(t) if t.id == id && t.users > 1 => {
                    t.users -= 1;
                    return;
                }
                Some(t) if t.id == id => {
                    shared.remove(via);
                }
                _ => {}
            }
        }
        let vp = self.paths(via);
        let out = self
            .exec(via, k0s::token_invalidate(&vp.bin, &vp.data_dir, id))
            .await;
        match out {
            Ok(o) if o.success() => {}
            Ok(o) => ctx.progress(format!(
                "could not invalidate join token {id} on {via} ({}); it expires within 30 minutes",
                o.error_line()
            )),
            Err(e) => ctx.progress(format!(
                "could not invalidate join token {id} on {via} ({e}); it expires within 30 minutes"
            )),
        }
    }

    async fn wait_member(
        &self,
        ctx: &StepContext,
        via: &HostId,
        addr: &str,
    ) -> Result<(), StepError> {
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        loop {
            let why = match self.member_list(via).await {
                Ok(m) => match m.iter().find(|(_, u)| peer_host(u) == addr) {
                    Some((name, _)) if !name.is_empty() => return Ok(()),
                    Some(_) => format!("member {addr} is added but not started"),
                    None => format!("{addr} is not an etcd member yet"),
                },
                Err(e) => e,
            };
            ctx.progress(format!("waiting for the new etcd member: {why}"));
            dl.retry(
                &format!("{addr} to be a started etcd member (via {via})"),
                &why,
            )
            .await
            .map_err(failed)?;
        }
    }

    async fn remove_member(
        &self,
        step: &Step,
        ctx: &StepContext,
        member_id: &str,
        peer_url: &str,
        via: &HostId,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let host = &step.host;
        let addr = peer_host(peer_url);
        let members = self.member_list(via).await.map_err(StepError::Unsafe)?;
        if !members.values().any(|u| peer_host(u) == addr) {
            ctx.progress(format!(
                "{peer_url} is no longer an etcd member; nothing to remove"
            ));
            return Ok(vec![StateChange::ClearEtcd(host.clone())]);
        }
        let objects = self.etcd_member_objects(via).await.map_err(|e| {
            StepError::Unsafe(format!(
                "cannot check which member ID {peer_url} carries: {e}"
            ))
        })?;
        let object = objects
            .iter()
            .find(|o| o.peer_address.as_deref() == Some(addr))
            .cloned()
            .or_else(|| {
                // Deleted earlier in this run (removal plans delete it first): use what it said.
                self.seen_object(addr).filter(|o| {
                    members
                        .iter()
                        .any(|(name, u)| peer_host(u) == addr && name == &o.name)
                })
            });
        match &object {
            None => {
                return Err(StepError::Unsafe(format!(
                    "cannot check that {peer_url} still carries member {member_id}: {via} shows no EtcdMember object for {addr}"
                )));
            }
            Some(o) => match &o.member_id {
                Some(id) if same_member_id(id, member_id) => {}
                Some(id) => {
                    return Err(StepError::Unsafe(format!(
                        "{peer_url} now carries etcd member {id}, not {member_id} as recorded in the state: refusing to remove it"
                    )));
                }
                None => {
                    return Err(StepError::Unsafe(format!(
                        "cannot check that {peer_url} still carries member {member_id}: EtcdMember \"{}\" has no member ID yet",
                        o.name
                    )));
                }
            },
        }
        self.require_health(ctx, via, Some(addr)).await?;
        gate().await?;
        let p = self.paths(via);
        // etcd's strict reconfiguration check refuses a removal ("unhealthy cluster") until the
        // serving member has seen every other voter for a few seconds; the health check above
        // cannot see that window, so such refusals are retried (as k0s's own reconciler does).
        let retry = Deadline::new(self.opts.health_grace, self.opts.poll_interval);
        loop {
            let out = self
                .exec(via, k0s::etcd_leave(&p.bin, &p.data_dir, addr))
                .await
                .map_err(failed)?;
            if out.success() || k0s::peer_not_found(&out) {
                break;
            }
            let why = out.error_line();
            if k0s::classify(&out) != Some(k0s::K0sFailure::EtcdUnhealthy) {
                return Err(failed(format!(
                    "{via}: removing etcd member {member_id} ({peer_url}) failed: {why}"
                )));
            }
            ctx.progress(format!("etcd refused the removal for now: {why}"));
            retry
                .retry(&format!("etcd to accept removing member {member_id}"), &why)
                .await
                .map_err(|e| failed(format!("{via}: {e}")))?;
        }
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        loop {
            let why = match self.member_list(via).await {
                Ok(m) if !m.values().any(|u| peer_host(u) == addr) => break,
                Ok(_) => format!("{peer_url} is still listed"),
                Err(e) => e,
            };
            dl.retry(&format!("member {member_id} to be gone"), &why)
                .await
                .map_err(failed)?;
        }
        Ok(vec![StateChange::ClearEtcd(host.clone())])
    }

    async fn record_host(
        &self,
        ctx: &StepContext,
        host: &HostId,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.spec.host(host);
        let before = self.known.host(host);
        let role = hs
            .map(|h| h.role)
            .or(before.map(|b| b.role))
            .ok_or_else(|| failed(format!("{host} is neither in the spec nor in the state")))?;
        let addr = hs.map(|h| h.peer_address().to_string()).or_else(|| {
            before
                .and_then(|b| b.etcd.as_ref())
                .map(|e| peer_host(&e.peer_url).to_string())
        });
        let dl = Deadline::new(self.opts.health_grace, self.opts.poll_interval);
        let (facts, etcd) = loop {
            let facts = self.probe(host).await?;
            if !role.is_controller() {
                break (facts, None);
            }
            let member = facts.view.as_ref().and_then(|v| {
                v.members.iter().find(|m| {
                    addr.as_deref() == Some(peer_host(&m.peer_url)) && m.member_id.is_some()
                })
            });
            if let Some(m) = member {
                let etcd = EtcdMemberState {
                    member_id: m.member_id.clone().unwrap_or_default(),
                    peer_url: m.peer_url.clone(),
                };
                break (facts, Some(etcd));
            }
            // EtcdMember objects appear a little after a join (and not at all before k0s 1.30).
            if dl
                .retry("the etcd member ID", "not shown yet")
                .await
                .is_err()
            {
                ctx.progress("etcd member ID unknown (no EtcdMember object); recorded without it");
                break (facts, None);
            }
        };
        let host_key = if facts.host_key.is_empty() {
            before.map(|b| b.host_key.clone()).unwrap_or_default()
        } else {
            facts.host_key.clone()
        };
        if host_key.is_empty() || facts.machine_id.trim().is_empty() {
            return Err(failed(format!(
                "{host}: the probe returned no machine-id or host key"
            )));
        }
        let mut changes = Vec::new();
        if let Some(uid) = facts.view.as_ref().and_then(|v| v.cluster_uid.clone()) {
            changes.push(StateChange::AdoptCluster(ClusterState {
                name: self.spec.name.clone(),
                uid,
                etcd_cluster_id: None,
                k0s_version: self.spec.k0s.version.clone(),
                config_sha256: None,
            }));
        }
        let node_name = hs
            .and_then(|h| h.hostname.clone())
            .unwrap_or_else(|| facts.hostname.trim().to_string());
        changes.push(StateChange::UpsertHost(Box::new(HostState {
            address: host.address.clone(),
            port: host.port,
            role,
            node_name: (!node_name.is_empty()).then(|| node_name.to_lowercase()),
            machine_id: facts.machine_id.trim().to_string(),
            host_key,
            host_public_key: facts
                .host_public_key
                .clone()
                .or_else(|| before.and_then(|b| b.host_public_key.clone())),
            etcd,
            k0s_version: facts.k0s_version.clone(),
            install_flags_sha256: facts
                .status
                .as_ref()
                .map(|s| desired::install_flags_sha256(s.args.get(2..).unwrap_or_default())),
            config_sha256: facts.config_sha256.clone(),
            access: hs
                .map(HostAccess::of)
                .or_else(|| before.and_then(|b| b.access.clone())),
        })));
        Ok(changes)
    }
}

impl<T: Transport + 'static> StepRunner for K0sRunner<T> {
    async fn run(
        self: Arc<Self>,
        step: Step,
        ctx: StepContext,
    ) -> Result<Vec<StateChange>, StepError> {
        self.run_step(&step, &ctx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_ids_compare_as_hex() {
        assert!(same_member_id("8E9E05C52164694D", "8e9e05c52164694d"));
        assert!(same_member_id("0d515f0157a56f3f", "d515f0157a56f3f"));
        assert!(!same_member_id("8e9e05c52164694d", "8e9e05c52164694e"));
    }

    #[test]
    fn token_debug_is_redacted() {
        let t = JoinToken("H4sIAAAA-secret".into());
        assert_eq!(format!("{t:?}"), "JoinToken(<redacted>)");
    }
}
