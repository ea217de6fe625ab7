//! How steps reach hosts: the k0s paths of a host, and the exec/write/probe/upload calls every
//! step family shares, through the runner's `Remote` and within its per-host limits.

use super::runner::K0sRunner;
use crate::apply::StepError;
use crate::hostid::HostId;
use crate::k0s::{self, desired};
use crate::reality::{HostFacts, Probe};
use crate::spec::HostSpec;
use crate::state::HostState;
use crate::transport::{CommandOutput, FileAttrs, RemoteCommand, Transport};

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
