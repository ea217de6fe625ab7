//! `Upgrade` and `Reconfigure`: reinstall a host that runs (new binary, or new flags and config)
//! and restart it, waiting until it is back before the step ends.

use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s::{self, desired};
use crate::spec::{HostSpec, Role};
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
        let (args, _) = self.reinstall_args(host, hs).await;
        self.stop_k0s(host).await?;
        if let Some(v) = &to {
            self.token_file_workaround(ctx, hs, &args, v).await?;
        }
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
        let (args, running) = self.reinstall_args(host, hs).await;
        self.install(hs, &args, false).await?;
        self.stop_k0s(host).await?;
        if let Some(v) = running {
            self.token_file_workaround(ctx, hs, &args, &v).await?;
        }
        self.restart_k0s(host).await?;
        self.wait_back(ctx, hs, None).await?;
        Ok(vec![])
    }

    /// `WriteTokenPlaceholder`: a running worker's token file gets the placeholder where it
    /// holds no join token its running k0s could decode at its next start; k0s is not
    /// restarted (k0s reads the file only at start; k0sctl `phase/ensure_join_token_workaround.go`
    /// does not restart either).
    pub(super) async fn write_token_placeholder(
        &self,
        ctx: &StepContext,
        host: &HostId,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        gate().await?;
        let (args, running) = self.reinstall_args(host, hs).await;
        if let Some(v) = running {
            self.token_file_workaround(ctx, hs, &args, &v).await?;
        }
        Ok(vec![])
    }

    /// Arguments for reinstalling a host that runs: `--token-file` only where the running
    /// service has one (the bootstrap controller never had a token file); and the version it
    /// runs, when its status answered.
    async fn reinstall_args(
        &self,
        host: &HostId,
        hs: &HostSpec,
    ) -> (Vec<String>, Option<K0sVersion>) {
        let p = self.paths(host);
        let status = match self.exec(host, k0s::status_json(&p.bin)).await {
            Ok(out) if out.success() => k0s::parse_status(&out.stdout_str()).ok(),
            _ => None,
        };
        let (running, version) = status
            .map(|s| (s.args, Some(s.version)))
            .unwrap_or_default();
        (desired::reinstall_args(&self.spec, hs, &running), version)
    }

    /// k0s issue #7202: a worker about to start k0s `version` that decodes its token file at
    /// every start gets a decodable placeholder there first, where the file is not one (a host
    /// k0sctl joined says `# overwritten by k0sctl after join`): k0sctl
    /// `phase/ensure_join_token_workaround.go`. The file is the one the service is given
    /// (`--token-file` of `args`); k0s is stopped.
    async fn token_file_workaround(
        &self,
        ctx: &StepContext,
        hs: &HostSpec,
        args: &[String],
        version: &K0sVersion,
    ) -> Result<(), StepError> {
        if hs.role != Role::Worker || !k0s::quirks::worker_decodes_token_file_at_start(version) {
            return Ok(());
        }
        let Some(path) = args.iter().find_map(|a| a.strip_prefix("--token-file=")) else {
            return Ok(());
        };
        let id = hs.id();
        let out = self
            .exec_ok(
                &id,
                k0s::token_file::ensure_decodable(path),
                "writing a decodable placeholder into the token file (k0s #7202)",
            )
            .await?;
        if !out.stdout_str().trim().is_empty() {
            ctx.progress(format!("{path} held no join token k0s {version} can decode: a placeholder was written (k0s #7202)"));
        }
        Ok(())
    }
}
