//! `K0sRunner`: the `StepRunner` that runs a plan's steps on the hosts. It holds what every step
//! shares during a run (remote access, per-host limits, the state as it began, tokens and polls in
//! flight) and hands each step to its family's file by kind. The step files add methods to it;
//! it imports none of them but the types of what it holds (`join_token`, `node_watch`).

use super::join_token::SharedToken;
use super::node_watch::NodeWatches;
use crate::apply::{
    ExecOptions, StateChange, StepContext, StepError, StepRunner, intent_for, needs_intent,
};
use crate::hostid::HostId;
use crate::k0s;
use crate::plan::{Step, StepKind};
use crate::reality::Probe;
use crate::spec::{HostSpec, Spec};
use crate::state::{BinaryRecord, HostState, State};
use crate::transport::Transport;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Semaphore;

/// Probes one host again for its identity (machine-id, host key, k0s status, the cluster as
/// it sees it), over the connection the plan's probe opened, its host key checked again: the
/// operations layer supplies the real probe over the run's transport (`ops::apply::Reprober`).
/// `dyn`, so the executor is not generic over it: the future is boxed.
pub trait HostProber: Send + Sync + 'static {
    /// `known_binary`: the k0s binary at the host's install path as this run placed it, its
    /// stat line and sha256; hashed again only if the host's stat line differs. `None`: as
    /// the state records it.
    fn probe<'a>(
        &'a self,
        host: &'a HostId,
        known_binary: Option<&'a BinaryRecord>,
    ) -> Pin<Box<dyn Future<Output = Probe> + Send + 'a>>;
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

/// At most `limit` commands at once per host, however many steps talk to it.
pub(super) struct HostLimits {
    limit: usize,
    sems: Mutex<HashMap<HostId, Arc<Semaphore>>>,
}

impl HostLimits {
    pub(super) fn new(limit: usize) -> Self {
        HostLimits {
            limit,
            sems: Mutex::new(HashMap::new()),
        }
    }

    pub(super) async fn permit(&self, host: &HostId) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let sem = {
            let mut m = self.sems.lock().ok()?;
            m.entry(host.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(self.limit.max(1))))
                .clone()
        };
        sem.acquire_owned().await.ok()
    }
}

/// The last `kubectl get nodes` asked through a controller: when, and its answer.
pub(super) type NodePoll = (Instant, Result<Arc<Vec<k0s::NodeReady>>, String>);

/// Runs plan steps against real (or fake) hosts.
pub struct K0sRunner<T> {
    pub(super) remote: Remote<T>,
    pub(super) limits: HostLimits,
    /// `options.concurrentUploads`: binary uploads in flight at once (bandwidth, not safety).
    pub(super) uploads: Arc<Semaphore>,
    pub(super) spec: Spec,
    /// The state as it was when the run began: who holds which peer address.
    pub(super) known: State,
    /// Where each host is in `spec.hosts` and `known.hosts` (`spec_host`, `known_host`): steps
    /// look hosts up all the time, and a scan each time is quadratic in hosts. Neither list
    /// changes during a run.
    spec_at: HashMap<HostId, usize>,
    known_at: HashMap<HostId, usize>,
    /// The EtcdMember objects seen during this run, by peer address. A removal plan deletes the
    /// object before it removes the member; the member-ID check then uses what the object said
    /// moments before it was deleted.
    pub(super) seen_objects: Mutex<HashMap<String, k0s::EtcdMemberObject>>,
    /// Every member ID an EtcdMember object showed at a peer address during this run, by that
    /// address (from the same listings as `seen_objects`, which keeps only the last object).
    pub(super) seen_member_ids: Mutex<HashMap<String, Vec<String>>>,
    /// Controllers joined in this run whose address had EtcdMember objects before the join,
    /// with the member IDs they showed then. The new member never has one of them (etcd makes
    /// a new ID for every member added), and k0s rewrites an existing object in two API calls
    /// (etcd_member_reconciler.go `createMemberObject`: labels with the new InvocationID first,
    /// the status with the new member ID after, retried 3 s later on failure): until the second
    /// lands, the object shows this start's InvocationID beside the old ID. `wait_promoted` and
    /// `RecordHost` wait that out instead of taking the old ID for the new member.
    pub(super) replaced_member_ids: Mutex<HashMap<HostId, Vec<String>>>,
    /// Hosts with a new k0s binary staged in this run and not yet moved into place, with its
    /// sha256 as checked on the host: a new k0s.yaml is checked by the binary that will read
    /// it, the staged one.
    pub(super) staged_binaries: Mutex<HashMap<HostId, String>>,
    /// The binaries this run moved into place: their stat line after the move and the sha256
    /// checked when they were staged. A re-probe (`RecordHost`) does not hash them again while
    /// their stat line is that one.
    pub(super) placed_binaries: Mutex<HashMap<HostId, crate::state::BinaryRecord>>,
    /// The last `kubectl get nodes` per controller and when it was asked (see `nodes_via`).
    pub(super) node_polls: Mutex<HashMap<HostId, Arc<tokio::sync::Mutex<Option<NodePoll>>>>>,
    /// Node watches running on controllers while steps wait for Nodes (`watch_nodes`).
    pub(super) node_watches: NodeWatches,
    /// When k0s was last (re)started on a host in this run, by that host's clock (seconds):
    /// a Node counts as back only when its kubelet posted Ready after that (`NodeReady`).
    pub(super) restarts: Mutex<HashMap<HostId, i64>>,
    /// `k0s version` of controllers asked during this run, until their next (re)start: whether
    /// they add joining controllers as etcd learners (`k0s::learner_joins`).
    pub(super) versions: Mutex<HashMap<HostId, crate::version::K0sVersion>>,
    /// Worker join tokens in use, per controller (see `take_token`).
    pub(super) worker_tokens: tokio::sync::Mutex<HashMap<HostId, SharedToken>>,
    pub(super) opts: ExecOptions,
    /// Hosts whose state record moved in this run: new address → recorded one.
    pub(super) moves: Mutex<HashMap<HostId, HostId>>,
}

/// Uploads in flight at once for `options.concurrency.uploads` (or `--concurrent-uploads`): 0 is
/// no upload limit of its own, as k0sctl's phase/generic_phase.go `parallelDoUpload` (batches of
/// `Concurrency` then), so only the hosts-at-once limit applies.
fn upload_slots(uploads: usize) -> usize {
    if uploads == 0 {
        Semaphore::MAX_PERMITS
    } else {
        uploads
    }
}

impl<T: Transport + 'static> K0sRunner<T> {
    pub fn new(remote: Remote<T>, spec: &Spec, state: &State, opts: &ExecOptions) -> Self {
        K0sRunner {
            remote,
            limits: HostLimits::new(opts.per_host_limit),
            uploads: Arc::new(Semaphore::new(upload_slots(
                spec.options.concurrent_uploads,
            ))),
            spec: spec.clone(),
            known: state.clone(),
            spec_at: positions(spec.hosts.iter().map(|h| h.id())),
            known_at: positions(state.hosts.iter().map(|h| h.id())),
            seen_objects: Mutex::new(HashMap::new()),
            seen_member_ids: Mutex::new(HashMap::new()),
            replaced_member_ids: Mutex::new(HashMap::new()),
            staged_binaries: Mutex::new(HashMap::new()),
            placed_binaries: Mutex::new(HashMap::new()),
            node_polls: Mutex::new(HashMap::new()),
            node_watches: NodeWatches::default(),
            restarts: Mutex::new(HashMap::new()),
            versions: Mutex::new(HashMap::new()),
            worker_tokens: tokio::sync::Mutex::new(HashMap::new()),
            opts: opts.clone(),
            moves: Mutex::new(HashMap::new()),
        }
    }

    /// `Spec::host`, looked up in the index.
    pub(super) fn spec_host(&self, id: &HostId) -> Option<&HostSpec> {
        self.spec_at.get(id).and_then(|&i| self.spec.hosts.get(i))
    }

    /// `State::host` of the state as the run began, looked up in the index.
    pub(super) fn known_host(&self, id: &HostId) -> Option<&HostState> {
        self.known_at.get(id).and_then(|&i| self.known.hosts.get(i))
    }

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
                self.upload_binary(hs, Some(sha256), version.as_ref())
                    .await?;
                Ok(vec![])
            }
            StepKind::DownloadBinary {
                url,
                sha256,
                version,
            } => self.download_binary(ctx, host, url, sha256, version).await,
            StepKind::WriteConfig { sha256 } => self.write_config(host, sha256).await,
            StepKind::RestoreBackup { archive, sha256 } => {
                self.restore_backup(host, archive, sha256, gate).await
            }
            StepKind::Bootstrap => self.bootstrap(step, ctx, gate).await,
            StepKind::JoinController { via } => self.join_controller(ctx, host, via, gate).await,
            StepKind::JoinWorker { via } => self.join_worker(ctx, host, via, gate).await,
            StepKind::WaitHealthy { via } => self.wait_healthy(ctx, via).await,
            StepKind::RemoveMember {
                member_id,
                peer_url,
                via,
            } => {
                self.remove_member(step, ctx, member_id, peer_url, via, gate)
                    .await
            }
            StepKind::RemoveUnknownMember {
                member_id,
                peer_url,
                via,
                ..
            } => {
                self.remove_unknown_member(ctx, member_id.as_deref(), peer_url, via, gate)
                    .await
            }
            StepKind::Drain {
                node,
                via,
                evict_taint,
            } => {
                self.drain(ctx, host, node, via, evict_taint.as_deref())
                    .await
            }
            StepKind::Uncordon {
                node,
                via,
                evict_taint,
            } => {
                self.uncordon(ctx, host, node, via, evict_taint.as_deref())
                    .await
            }
            StepKind::DeleteObjects { via, .. } => {
                self.delete_objects(&step.kind.object_names(), via).await
            }
            StepKind::ResetHost {
                machine_id,
                uninstall,
            } => {
                self.reset_host(ctx, host, machine_id, *uninstall, gate)
                    .await
            }
            StepKind::Upgrade { to, .. } => self.upgrade(ctx, host, to, gate).await,
            StepKind::Reconfigure => self.reconfigure(ctx, host, gate).await,
            StepKind::WriteTokenPlaceholder => self.write_token_placeholder(ctx, host, gate).await,
            StepKind::RunHooks {
                action,
                stage,
                lines,
            } => self.run_hooks(ctx, host, action, stage, lines, gate).await,
            StepKind::WriteHostEnvironment { names } => {
                self.write_host_environment(host, names).await
            }
            StepKind::UploadFiles { files } => self.upload_files(ctx, host, files, gate).await,
            StepKind::MoveHost { from } => self.move_host(host, from).await,
            StepKind::RecordHost => self.record_host(ctx, host).await,
            StepKind::ApplyManifest { manifest, sha256 } => {
                self.apply_manifest(host, manifest, sha256).await
            }
            StepKind::ForgetManifest { manifest } => {
                Ok(vec![StateChange::ForgetManifest(manifest.clone())])
            }
            StepKind::ForgetHost => Ok(vec![StateChange::ForgetHost(host.clone())]),
            StepKind::ForgetCluster => Ok(vec![StateChange::ForgetCluster]),
            StepKind::RecordBastion {
                fingerprint,
                public_key,
            } => Ok(vec![StateChange::UpsertBastion(
                crate::state::BastionState {
                    address: host.address.clone(),
                    port: host.port,
                    host_key: fingerprint.clone(),
                    host_public_key: public_key.clone(),
                },
            )]),
        }
    }
}

/// Each id's first position in a list (the entry a linear `find` would return).
fn positions(ids: impl Iterator<Item = HostId>) -> HashMap<HostId, usize> {
    let mut at = HashMap::new();
    for (i, id) in ids.enumerate() {
        at.entry(id).or_insert(i);
    }
    at
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
    fn uploads_zero_is_no_limit_as_k0sctl() {
        assert_eq!(upload_slots(0), Semaphore::MAX_PERMITS);
        assert_eq!(upload_slots(1), 1);
        assert_eq!(upload_slots(5), 5);
    }
}
