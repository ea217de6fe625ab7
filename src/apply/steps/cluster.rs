//! Cluster checks and waits, asked through a controller: the etcd member list and EtcdMember
//! objects, API server readiness, the health gate before a membership change, Nodes becoming
//! Ready, and the `WaitHealthy` step.

use super::deadline::Deadline;
use super::node_watch::{WATCHED_POLL, WatchGuard};
use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s;
use crate::k0s::probe_script::peer_url_host as peer_host;
use crate::spec::HostSpec;
use crate::state::HostState;
use crate::transport::Transport;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl<T: Transport + 'static> K0sRunner<T> {
    /// The host (spec or state) that carries etcd peer address `addr`.
    pub(super) fn host_for_peer(&self, addr: &str) -> Option<HostId> {
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

    pub(super) async fn member_list(
        &self,
        via: &HostId,
    ) -> Result<BTreeMap<String, String>, String> {
        self.etcd_members(via).await?.ok_or_else(|| {
            format!("cannot list etcd members on {via}: it runs kine (no etcd membership)")
        })
    }

    /// The etcd members as `via` lists them, or None when `via` runs kine: k0s refuses `k0s
    /// etcd` there (`wrong storage type: kine`) and there is no membership to check.
    pub(super) async fn etcd_members(
        &self,
        via: &HostId,
    ) -> Result<Option<BTreeMap<String, String>>, String> {
        let p = self.paths(via);
        let out = self
            .exec(via, k0s::member_list(&p.bin, &p.data_dir))
            .await?;
        if k0s::etcd_refused_for_kine(&out) {
            return Ok(None);
        }
        if !out.success() {
            return Err(format!(
                "cannot list etcd members on {via}: {}",
                out.error_line()
            ));
        }
        k0s::parse_member_list(&out.stdout_str())
            .map(Some)
            .map_err(|e| format!("{via}: {e}"))
    }

    pub(super) async fn etcd_member_objects(
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
        if let Ok(mut ids) = self.seen_member_ids.lock() {
            for o in &objects {
                if let (Some(a), Some(id)) = (&o.peer_address, &o.member_id) {
                    let at = ids.entry(a.clone()).or_default();
                    if !at.contains(id) {
                        at.push(id.clone());
                    }
                }
            }
        }
        Ok(objects)
    }

    pub(super) fn seen_object(&self, addr: &str) -> Option<k0s::EtcdMemberObject> {
        self.seen_objects.lock().ok()?.get(addr).cloned()
    }

    /// The member IDs EtcdMember objects showed at peer address `addr` so far in this run.
    pub(super) fn seen_member_ids(&self, addr: &str) -> Vec<String> {
        let ids = self.seen_member_ids.lock().ok();
        ids.and_then(|m| m.get(addr).cloned()).unwrap_or_default()
    }

    /// Is `member_id` an ID that EtcdMember objects showed for `host`'s address before this run
    /// joined it anew (`replaced_member_ids`)? Then k0s has not rewritten the object's status
    /// yet: the ID is the old member's, not the new one's.
    pub(super) fn is_replaced_member_id(&self, host: &HostId, member_id: &str) -> bool {
        self.replaced_member_ids
            .lock()
            .ok()
            .and_then(|m| {
                m.get(host).map(|old| {
                    old.iter()
                        .any(|o| super::remove::same_member_id(o, member_id))
                })
            })
            .unwrap_or(false)
    }

    /// The k0s version of `host` (`k0s version`; cached for the run until the host restarts).
    pub(super) async fn k0s_version(
        &self,
        host: &HostId,
    ) -> Result<crate::version::K0sVersion, String> {
        if let Some(v) = self.versions.lock().ok().and_then(|v| v.get(host).cloned()) {
            return Ok(v);
        }
        let p = self.paths(host);
        let out = self.exec(host, k0s::version(&p.bin)).await?;
        if !out.success() {
            return Err(format!(
                "cannot read the k0s version on {host}: {}",
                out.error_line()
            ));
        }
        let v = k0s::parse_version(&out.stdout_str()).map_err(|e| format!("{host}: {e}"))?;
        if let Ok(mut m) = self.versions.lock() {
            m.insert(host.clone(), v.clone());
        }
        Ok(v)
    }

    /// Is every etcd member (except the one at `exclude`, which is being removed) healthy, as
    /// seen through `via`? Healthy: listed as started, its EtcdMember object (if any) joined, and
    /// the API server on its host ready; where `via`'s k0s adds joiners as learners
    /// (v1.35.5+/v1.36.1+), also a voter: its EtcdMember object shows Joined=True (k0s stamps
    /// it only once the member is promoted), so a learner never counts toward quorum. Returns
    /// the member list (name → peer URL). A kine controller has no members: its API server
    /// being ready is all there is.
    async fn health(
        &self,
        via: &HostId,
        exclude: Option<&str>,
    ) -> Result<BTreeMap<String, String>, String> {
        self.readyz(via).await?;
        let Some(members) = self.etcd_members(via).await? else {
            return Ok(BTreeMap::new());
        };
        let learners = k0s::learner_joins(&self.k0s_version(via).await?);
        // Objects exist from k0s 1.30 on; older clusters are judged on the other checks. Where
        // joiners are learners, only an object tells a voter from a learner.
        let objects = if learners {
            self.etcd_member_objects(via).await?
        } else {
            self.etcd_member_objects(via).await.unwrap_or_default()
        };
        for (name, url) in &members {
            let addr = peer_host(url);
            if exclude == Some(addr) {
                continue;
            }
            if name.is_empty() {
                return Err(format!("etcd member {url} was added but has not started"));
            }
            if learners {
                let object = objects
                    .iter()
                    .find(|o| o.peer_address.as_deref() == Some(addr));
                if object.is_none_or(|o| o.joined != Some(true)) {
                    return Err(format!(
                        "etcd member \"{name}\" ({url}) is not a voter yet: {}; k0s v1.35.5+/v1.36.1+ adds a joining controller as a learner, and the leader promotes it once it has caught up",
                        match object {
                            None => "it has no EtcdMember object".to_string(),
                            Some(o) =>
                                format!("EtcdMember \"{}\" does not show Joined=True", o.name),
                        }
                    ));
                }
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
    pub(super) async fn require_health(
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

    pub(super) async fn wait_ready(
        &self,
        ctx: &StepContext,
        host: &HostId,
    ) -> Result<(), StepError> {
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

    /// Wait until Node `node` is Ready; with `since` (its host's k0s restarted then, by that
    /// host's clock), Ready as posted by a kubelet that started after it, not the Ready the
    /// cluster keeps showing for up to 40 s (node-monitor-grace-period) after a kubelet stops.
    pub(super) async fn wait_node_ready(
        &self,
        ctx: &StepContext,
        via: &HostId,
        node: &str,
        since: Option<i64>,
    ) -> Result<(), StepError> {
        self.wait_node(ctx, via, node, since, true).await
    }

    /// Join the Node watch on controller `via`, starting it if none runs. `limit` bounds it on
    /// the host (the longest the caller will wait).
    fn watch_nodes(&self, via: &HostId, limit: Duration) -> Option<WatchGuard<'_>> {
        let p = self.paths(via);
        let cmd = k0s::watch_nodes(&p.bin, &p.data_dir, limit);
        self.node_watches.join(&self.remote.transport, via, cmd)
    }

    /// Wait until Node `node` is registered, Ready or not (`ready: false`, for
    /// `options.wait.enabled: false`), or Ready (as `wait_node_ready`). With `since`, registered
    /// or posted by a kubelet that started after it: a Node left from the host's earlier life
    /// does not count.
    pub(super) async fn wait_node(
        &self,
        ctx: &StepContext,
        via: &HostId,
        node: &str,
        since: Option<i64>,
        ready: bool,
    ) -> Result<(), StepError> {
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        // Woken as soon as the Node changes, where a watch runs (`node_watch`).
        let mut watch = self.watch_nodes(via, self.opts.wait_timeout);
        // An answer asked after this wait began, then one asked after the last one seen, one
        // interval later (`retry_after`): waiters of one controller wake together and share
        // one query per round, each answer fresh when it is read. Woken by the watch, one asked
        // after the wake-up.
        let mut not_before = Instant::now();
        loop {
            let (asked, answer) = self.nodes_via(via, not_before).await;
            not_before = asked + std::time::Duration::from_nanos(1);
            let why = match answer {
                Ok(nodes) => match nodes.iter().find(|n| n.name == node) {
                    Some(n)
                        if !ready
                            && since.is_none_or(|t| n.last_heartbeat.is_none_or(|h| h > t)) =>
                    {
                        return Ok(());
                    }
                    Some(_) if !ready => format!(
                        "Node \"{node}\" is from before its restart; waiting for its kubelet to register"
                    ),
                    Some(n) if since.map_or(n.ready, |t| n.ready_since(t)) => return Ok(()),
                    Some(n) if n.ready => format!(
                        "Node \"{node}\" shows Ready from before its restart; waiting for its kubelet to report again"
                    ),
                    Some(_) => format!("Node \"{node}\" is not Ready yet"),
                    None => format!("Node \"{node}\" does not exist yet"),
                },
                Err(e) => e,
            };
            ctx.progress(format!("waiting for Node \"{node}\": {why}"));
            let what = if ready {
                format!("Node \"{node}\" to be Ready (via {via})")
            } else {
                format!("Node \"{node}\" to register (via {via})")
            };
            let Some(w) = watch.as_mut().filter(|w| w.alive()) else {
                dl.retry_after(&what, &why, asked).await.map_err(failed)?;
                continue;
            };
            let every = self.opts.poll_interval.max(WATCHED_POLL);
            tokio::select! {
                polled = dl.retry_after_every(&what, &why, asked, every) => polled.map_err(failed)?,
                () = w.changed(node) => {
                    dl.check(&what, &why).map_err(failed)?;
                    not_before = not_before.max(Instant::now());
                }
            }
        }
    }

    /// The Nodes as controller `via` lists them, asked no earlier than `not_before`, and when
    /// that query was asked. Steps waiting for Nodes at the same time share one `kubectl get
    /// nodes` (single flight): many workers joining cost the controller one query per poll,
    /// not one per worker.
    async fn nodes_via(
        &self,
        via: &HostId,
        not_before: Instant,
    ) -> (Instant, Result<Arc<Vec<k0s::NodeReady>>, String>) {
        let slot = {
            let Ok(mut polls) = self.node_polls.lock() else {
                return (Instant::now(), Err("node poll table poisoned".into()));
            };
            polls.entry(via.clone()).or_default().clone()
        };
        let mut last = slot.lock().await;
        if let Some((asked, result)) = &*last
            && *asked >= not_before
        {
            return (*asked, result.clone());
        }
        let asked = Instant::now();
        let p = self.paths(via);
        let result = match self.exec(via, k0s::get_nodes(&p.bin, &p.data_dir)).await {
            Ok(out) if out.success() => k0s::parse_node_ready(&out.stdout_str())
                .map(Arc::new)
                .map_err(|e| e.to_string()),
            Ok(out) => Err(out.error_line()),
            Err(e) => Err(e),
        };
        *last = Some((asked, result.clone()));
        (asked, result)
    }

    pub(super) async fn wait_healthy(
        &self,
        ctx: &StepContext,
        via: &HostId,
    ) -> Result<Vec<StateChange>, StepError> {
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
}
