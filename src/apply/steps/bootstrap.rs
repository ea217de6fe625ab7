//! `Bootstrap`: the first controller of a new cluster, installed without a token. Refused when the
//! state already names a cluster or k0s already runs there: never a second cluster.

use super::deadline::Deadline;
use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::k0s::{self, desired};
use crate::plan::Step;
use crate::state::ClusterState;
use crate::transport::Transport;

impl<T: Transport + 'static> K0sRunner<T> {
    /// Refused (`Unsafe`) when the state names a cluster or k0s answers on `host`: `what` (a
    /// bootstrap, a restore) must never land on a cluster.
    pub(super) async fn refuse_where_a_cluster_is(
        &self,
        host: &crate::hostid::HostId,
        what: &str,
    ) -> Result<(), StepError> {
        if let Some(c) = &self.known.cluster {
            return Err(StepError::Unsafe(format!(
                "the state already names cluster \"{}\" (uid {}): never {what} over a known cluster",
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
                "k0s already runs on {host}: refusing to {what} a second cluster there"
            )));
        }
        Ok(())
    }

    pub(super) async fn bootstrap(
        &self,
        step: &Step,
        ctx: &StepContext,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let host = &step.host;
        let hs = self.host_spec(host)?;
        self.refuse_where_a_cluster_is(host, "bootstrap").await?;
        let p = self.paths(host);
        gate().await?;
        // The first controller must not get a token file: with one it would try to join.
        let args: Vec<String> = desired::install_args(&self.spec, hs)
            .into_iter()
            .filter(|a| !a.starts_with("--token-file"))
            .collect();
        self.install(hs, &args, true).await?;
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
}
