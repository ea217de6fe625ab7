//! `Drain` and `Uncordon`: a Node is cordoned, tainted with `options.evictTaint` where the plan
//! says so, and drained through a controller before its host is removed or restarted, and
//! uncordoned and untainted once it is Ready again (k0sctl phase/upgrade_workers.go
//! `cordonWorker`, `drainWorker`, `uncordonWorker`).

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s;
use crate::transport::Transport;

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn drain(
        &self,
        ctx: &StepContext,
        host: &HostId,
        node: &str,
        via: &HostId,
        evict_taint: Option<&str>,
    ) -> Result<Vec<StateChange>, StepError> {
        if !self.spec.options.drain.enabled {
            ctx.progress("drain disabled (options.drain.enabled: false)");
            return Ok(vec![]);
        }
        let p = self.paths(via);
        // What a failure leaves behind, and the way out: kubectl drain cordons before it evicts.
        let left = format!(
            "Node \"{node}\" stays cordoned and nothing further was done to {host}; fix what blocks \
             the eviction (a PodDisruptionBudget, pods without a controller, a podSelector) and run \
             apply again, or give the Node back as it is with `k0s kubectl uncordon {node}`"
        );
        if let Some(taint) = evict_taint {
            self.kubectl_on_node(
                via,
                k0s::cordon(&p.bin, &p.data_dir, node),
                &format!("cordoning Node \"{node}\""),
                "",
            )
            .await?;
            self.kubectl_on_node(
                via,
                k0s::add_taint(&p.bin, &p.data_dir, node, taint),
                &format!("tainting Node \"{node}\" with {taint}"),
                &left,
            )
            .await?;
        }
        ctx.progress(format!("draining Node \"{node}\""));
        self.kubectl_on_node(
            via,
            k0s::drain(&p.bin, &p.data_dir, node, &self.spec.options.drain),
            &format!("draining Node \"{node}\""),
            &left,
        )
        .await?;
        Ok(vec![])
    }

    /// Wait until the Node is Ready (the host is back: Ready posted after its restart in this
    /// run, if it was restarted), then uncordon it and take the evict
    /// taint off (only if it is there: kubectl fails on a taint the Node lacks).
    pub(super) async fn uncordon(
        &self,
        ctx: &StepContext,
        host: &HostId,
        node: &str,
        via: &HostId,
        evict_taint: Option<&str>,
    ) -> Result<Vec<StateChange>, StepError> {
        self.wait_node_ready(ctx, via, node, self.restarted_at(host))
            .await?;
        let p = self.paths(via);
        let out = self
            .exec(via, k0s::uncordon(&p.bin, &p.data_dir, node))
            .await
            .map_err(failed)?;
        if !out.success() {
            return Err(failed(format!(
                "{via}: uncordoning Node \"{node}\" failed: {}",
                out.error_line()
            )));
        }
        if let Some(taint) = evict_taint {
            self.kubectl_on_node(
                via,
                k0s::remove_taint(&p.bin, &p.data_dir, node, taint),
                &format!("removing taint {taint} from Node \"{node}\""),
                "",
            )
            .await?;
        }
        Ok(vec![])
    }

    /// Run a kubectl command on a Node through `via`; a Node that is gone already is no error.
    /// A failure names `what` and adds `left` (what it leaves behind), when there is any.
    async fn kubectl_on_node(
        &self,
        via: &HostId,
        cmd: crate::transport::RemoteCommand,
        what: &str,
        left: &str,
    ) -> Result<(), StepError> {
        let out = self.exec(via, cmd).await.map_err(failed)?;
        if out.success() || k0s::kubectl_not_found(&out) {
            return Ok(());
        }
        let sep = if left.is_empty() { "" } else { ". " };
        Err(failed(format!(
            "{via}: {what} failed: {}{sep}{left}",
            out.error_line()
        )))
    }
}
