//! How steps reach hosts: the transport and prober (`Remote`), at most `per_host_limit` commands
//! per host, the k0s paths of a host, and the exec/write/probe/upload calls every step family
//! shares.

use super::runner::K0sRunner;
use crate::apply::StepError;
use crate::hostid::HostId;
use crate::k0s::{self, desired};
use crate::reality::{HostFacts, Probe};
use crate::spec::HostSpec;
use crate::state::{BinaryRecord, HostState};
use crate::transport::{CommandOutput, FileAttrs, RemoteCommand, Transport};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
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

pub(super) struct Paths {
    pub(super) bin: String,
    pub(super) data_dir: String,
    pub(super) kubelet_root_dir: Option<String>,
}

pub(super) fn failed(e: impl std::fmt::Display) -> StepError {
    StepError::Failed(e.to_string())
}

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) fn paths(&self, id: &HostId) -> Paths {
        match self.spec_host(id) {
            Some(h) => Paths {
                bin: h.k0s_install_path.clone(),
                data_dir: h.data_dir.clone(),
                kubelet_root_dir: h.kubelet_root_dir.clone(),
            },
            // A host no longer in the spec: the paths recorded for it.
            None => {
                let (bin, data_dir, kubelet_root_dir) = HostState::k0s_paths(self.known_host(id));
                Paths {
                    bin,
                    data_dir,
                    kubelet_root_dir,
                }
            }
        }
    }

    pub(super) fn host_spec(&self, id: &HostId) -> Result<&HostSpec, StepError> {
        self.spec_host(id)
            .ok_or_else(|| failed(format!("{id} is not in the spec")))
    }

    pub(super) async fn exec(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
    ) -> Result<CommandOutput, String> {
        let _permit = self.limits.permit(host).await;
        self.remote
            .transport
            .run(host, cmd)
            .await
            .map_err(|e| e.to_string())
    }

    /// Run and require exit 0.
    pub(super) async fn exec_ok(
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

    pub(super) async fn write(
        &self,
        host: &HostId,
        path: &str,
        data: Vec<u8>,
        attrs: &FileAttrs,
    ) -> Result<(), StepError> {
        let _permit = self.limits.permit(host).await;
        self.remote
            .transport
            .write_file(host, path, data, attrs)
            .await
            .map_err(failed)
    }

    /// Write a new k0s.yaml as k0sctl does: staged beside the old one, checked with `k0s config
    /// validate` by the host's binary, then renamed in place (k0sctl `phase/configure_k0s.go`).
    /// A config k0s refuses never replaces the one the host runs with. When this run staged a
    /// new binary on the host, that binary checks it, as k0sctl checks with its staged binary.
    pub(super) async fn put_config(&self, host: &HostId, yaml: String) -> Result<(), StepError> {
        let mut bin = self.paths(host).bin;
        // Where the host's installFlags put it (`--config`/`-c`), as k0sctl writes it.
        let hs = self.host_spec(host)?;
        let (config, staged) = (desired::config_file(hs), desired::staged_config_file(hs));
        // A binary staged for an upgrade or install is the one that will read this config.
        if self
            .staged_binaries
            .lock()
            .is_ok_and(|s| s.contains_key(host))
        {
            bin = k0s::staged_binary_path(&bin);
        }
        self.write(host, &staged, yaml.into_bytes(), &FileAttrs::mode(0o600))
            .await?;
        let out = self
            .exec(host, k0s::config_validate(&bin, &staged))
            .await
            .map_err(failed)?;
        if !out.success() {
            let _ = self.exec(host, k0s::remove_staged_config(&staged)).await;
            return Err(failed(format!(
                "{host}: k0s refused the new k0s.yaml (`k0s config validate`), the old one stays: {}",
                out.stderr_str().trim()
            )));
        }
        self.exec_ok(
            host,
            k0s::install_staged_config(&staged, &config),
            "putting the new k0s.yaml in place",
        )
        .await?;
        Ok(())
    }

    /// Probe `host` again; a binary this run moved into place is hashed only if its stat line
    /// changed since (`placed_binaries`). A host (or bastion) offering another key than the one
    /// it was accepted with is refused as unsafe (exit 3): nothing runs on it.
    pub(super) async fn probe(&self, host: &HostId) -> Result<HostFacts, StepError> {
        let placed = self
            .placed_binaries
            .lock()
            .ok()
            .and_then(|p| p.get(host).cloned());
        match self.remote.prober.probe(host, placed.as_ref()).await {
            Probe::Reached(facts) => Ok(*facts),
            Probe::Unreachable { error } | Probe::K0sNotAnswering { error } => {
                Err(failed(format!("{host}: probe failed: {error}")))
            }
            Probe::HostKeyChanged {
                expected,
                offered,
                bastion,
            } => Err(StepError::Unsafe(format!(
                "{host}: {}",
                crate::reality::key_change_text(&expected, &offered, bastion.as_ref())
            ))),
        }
    }

    /// Upload a local file (at most `uploads` at once, within the host's command limit) and
    /// return the sha256 of what is now at `remote`. `fresh`: nothing at `remote` is worth
    /// keeping, so the host is not asked first whether it has the bytes
    /// (`Transport::upload_new_file`).
    pub(super) async fn upload_local(
        &self,
        host: &HostId,
        local: &std::path::Path,
        remote: &str,
        attrs: &FileAttrs,
        fresh: bool,
    ) -> Result<String, StepError> {
        let _upload = self.uploads.clone().acquire_owned().await.ok();
        let _permit = self.limits.permit(host).await;
        let t = &self.remote.transport;
        if fresh {
            t.upload_new_file(host, local, remote, attrs).await
        } else {
            t.upload_file(host, local, remote, attrs).await
        }
        .map_err(failed)
    }
}
