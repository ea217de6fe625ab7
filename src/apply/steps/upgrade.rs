//! `Upgrade` and `Reconfigure`: reinstall a host that runs (new binary, or new flags and config)
//! and restart it, waiting until it is back before the step ends.

use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s::{self, desired};
use crate::spec::HostSpec;
use crate::transport::Transport;
use crate::version::K0sVersion;

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn upgrade(
        &self,
        ctx: &StepContext,
        host: &HostId,
        to: &str,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        gate().await?;
        // `to` names a version, or for a rebuilt binary of the same version its sha256.
        let to = K0sVersion::parse(to).ok();
        let args = self.reinstall_args(host, hs).await;
        self.stop_k0s(host).await?;
        // Usually an UploadBinary step already put it there; uploading again is a no-op
        // for an identical file and covers plans that left that step out.
        if let Some(v) = &to
            && self.local_binary(hs, None, Some(v)).is_some()
        {
            self.upload_binary(hs, None, Some(v)).await?;
        }
        self.install(hs, &args, true).await?;
        self.restart_k0s(host).await?;
        self.wait_back(ctx, hs, to.as_ref()).await?;
        Ok(to
            .map(|version| StateChange::SetHostVersion {
                host: host.clone(),
                version,
            })
            .into_iter()
            .collect())
    }

    pub(super) async fn reconfigure(
        &self,
        ctx: &StepContext,
        host: &HostId,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        gate().await?;
        if hs.role.is_controller() {
            let yaml = desired::config_yaml(&self.spec, hs);
            self.put_config(host, yaml).await?;
        }
        let args = self.reinstall_args(host, hs).await;
        self.install(hs, &args, false).await?;
        self.stop_k0s(host).await?;
        self.restart_k0s(host).await?;
        self.wait_back(ctx, hs, None).await?;
        Ok(vec![])
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
}
