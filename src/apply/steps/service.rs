//! The k0s service on one host: stop (and wait until it is down), start, wait until it is back
//! (ready, its Node Ready), and the Node name a host goes by.

use super::deadline::Deadline;
use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s::{self, K0sFailure};
use crate::spec::HostSpec;
use crate::transport::Transport;
use crate::version::K0sVersion;

impl<T: Transport + 'static> K0sRunner<T> {
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

    pub(super) async fn stop_k0s(&self, host: &HostId) -> Result<(), StepError> {
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

    pub(super) async fn start_k0s(&self, host: &HostId) -> Result<(), StepError> {
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

    /// Start k0s and take the host's clock, read just before in the same session, as the moment
    /// its k0s (re)started, after the old process stopped: from then on its Node counts as back
    /// only on a Ready posted later (`NodeReady`), never on the Ready condition the cluster
    /// keeps for up to 40 s after a kubelet stops.
    pub(super) async fn restart_k0s(&self, host: &HostId) -> Result<(), StepError> {
        let p = self.paths(host);
        let out = self
            .exec(host, k0s::start_at_host_time(&p.bin))
            .await
            .map_err(failed)?;
        let stdout = out.stdout_str();
        let t = match k0s::parse_started_at(&stdout) {
            Ok((t, _)) => t,
            // `date` failed: k0s was not started.
            Err(_) if !out.success() && stdout.trim().is_empty() => {
                return Err(failed(format!(
                    "{host}: cannot read the host's clock: {}",
                    out.error_line()
                )));
            }
            Err(e) => return Err(failed(format!("{host}: {e}"))),
        };
        if let Ok(mut r) = self.restarts.lock() {
            r.insert(host.clone(), t);
        }
        if let Ok(mut v) = self.versions.lock() {
            v.remove(host);
        }
        if !out.success() && !k0s::already_running(&out) {
            return Err(failed(format!(
                "{host}: k0s start failed: {}",
                out.error_line()
            )));
        }
        Ok(())
    }

    /// When k0s was (re)started on `host` in this run (`restart_k0s`), by its clock.
    pub(super) fn restarted_at(&self, host: &HostId) -> Option<i64> {
        self.restarts.lock().ok()?.get(host).copied()
    }

    /// Wait until `k0s status` on the host reports a running k0s, of `version` when given.
    async fn wait_running(
        &self,
        ctx: &StepContext,
        host: &HostId,
        version: Option<&K0sVersion>,
    ) -> Result<(), StepError> {
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        let p = self.paths(host);
        loop {
            let why = match self.exec(host, k0s::status_json(&p.bin)).await {
                Ok(out) if out.success() => match k0s::parse_status(&out.stdout_str()) {
                    Ok(s) => match version {
                        Some(v) if &s.version != v => {
                            format!("k0s reports version {}, not {v}", s.version)
                        }
                        _ => return Ok(()),
                    },
                    Err(e) => e.to_string(),
                },
                Ok(out) => out.error_line(),
                Err(e) => e,
            };
            ctx.progress(format!("waiting for k0s to run on {host}: {why}"));
            let what = match version {
                Some(v) => format!("k0s {v} to run on {host}"),
                None => format!("k0s to run on {host}"),
            };
            dl.retry(&what, &why).await.map_err(failed)?;
        }
    }

    /// Wait until the host runs k0s again (of `version` when given), and, where it has one, its
    /// Node turned Ready after the restart (`restart_k0s`).
    pub(super) async fn wait_back(
        &self,
        ctx: &StepContext,
        hs: &HostSpec,
        version: Option<&K0sVersion>,
    ) -> Result<(), StepError> {
        let id = hs.id();
        self.wait_running(ctx, &id, version).await?;
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
                self.wait_node_ready(ctx, &via, &node, self.restarted_at(&id))
                    .await?;
            }
        }
        Ok(())
    }

    /// The Node name to wait for: the spec's `hostname`, else the hostname the plan's probe saw
    /// (checked by the planner against the other hosts' names), else the state's record, else
    /// (a host new in this run, never probed) the hostname the host shows now. Only waits use
    /// this; the destructive calls (drain, delete) take their names from the plan's steps.
    pub(super) async fn node_name(&self, hs: &HostSpec) -> Result<String, StepError> {
        let id = hs.id();
        let recorded = self.recorded(&id).and_then(|h| h.node_name.as_ref());
        match hs
            .node_name()
            .as_ref()
            .or(self.opts.hostnames.get(&id))
            .or(recorded)
        {
            Some(h) => Ok(h.trim().to_lowercase()),
            None => Ok(self.probe(&id).await?.hostname.trim().to_lowercase()),
        }
    }
}
