//! `JoinController` and `JoinWorker`: a token from a running controller, install and start with
//! it, wait for the new etcd member or Node; the token is given back and its file overwritten with
//! a placeholder (never left empty), whatever happened.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s::probe_script::peer_url_host as peer_host;
use crate::k0s::{self, TokenRole, desired};
use crate::spec::HostSpec;
use crate::transport::{FileAttrs, Transport};

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn join_controller(
        &self,
        ctx: &StepContext,
        host: &HostId,
        via: &HostId,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        let addr = hs.peer_address().to_string();
        // The more specific refusal first: a stale member at this address is also an
        // unhealthy one.
        // None: `via` runs kine (a shared external datasource), there is no etcd membership.
        let members = self.etcd_members(via).await.map_err(StepError::Unsafe)?;
        if let Some((name, url)) = members.iter().flatten().find(|(_, u)| peer_host(u) == addr) {
            return Err(StepError::Unsafe(format!(
                "{url} is still registered as etcd member \"{name}\": the stale member must be removed before {host} joins"
            )));
        }
        self.require_health(ctx, via, None).await?;
        gate().await?;
        // An EtcdMember object of the host's earlier life (its member left by hand, or restored
        // from a backup) shows that life's member ID until the new k0s rewrites it; remember
        // the IDs seen at this address so far (the health check above just listed the objects
        // on `via`; also of an object deleted earlier in this run) so no wait below takes one
        // for the new member's. k0s before 1.30 has no such objects.
        let old = self.seen_member_ids(&addr);
        if !old.is_empty()
            && let Ok(mut m) = self.replaced_member_ids.lock()
        {
            m.insert(host.clone(), old);
        }
        self.join(ctx, hs, via, TokenRole::Controller, &addr)
            .await?;
        if k0s::learner_joins(&self.k0s_version(via).await.map_err(failed)?) {
            self.wait_promoted(ctx, host, via, &addr).await?;
        }
        Ok(vec![])
    }

    pub(super) async fn join_worker(
        &self,
        ctx: &StepContext,
        host: &HostId,
        via: &HostId,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        gate().await?;
        self.join(ctx, hs, via, TokenRole::Worker, "").await?;
        Ok(vec![])
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
        let token_file = desired::token_file(hs);
        let (token, token_id) = self.take_token(via, role).await?;
        let joined = async {
            self.write(
                &host,
                &token_file,
                token.0.as_bytes().to_vec(),
                &FileAttrs::mode(0o600),
            )
            .await?;
            self.install(hs, &desired::install_args(&self.spec, hs), true)
                .await?;
            // A Node of that name may be left from the host's earlier life, still Ready.
            self.restart_k0s(&host).await?;
            match &node {
                None => {
                    self.wait_member(ctx, via, peer_addr).await?;
                    self.wait_ready(ctx, &host).await
                }
                // `options.wait.enabled: false` (k0sctl's --no-wait, which waits for no Node
                // at all: phase/install_workers.go): the Node registered, Ready or not.
                Some(node) if !self.spec.options.wait => {
                    let ready = false;
                    self.wait_node(ctx, via, node, self.restarted_at(&host), ready)
                        .await
                }
                Some(node) => {
                    self.wait_node_ready(ctx, via, node, self.restarted_at(&host))
                        .await
                }
            }
        }
        .await;
        drop(token);

        // Clean up whatever happened: the token must not stay usable or lying around. Nor may
        // the file be left empty: k0s v1.35.1 workers exit at start on an empty token file.
        self.give_back_token(ctx, via, role, &token_id).await;
        let placeholder = k0s::placeholder_token(role).into_bytes();
        if let Err(e) = self
            .write(&host, &token_file, placeholder, &FileAttrs::mode(0o600))
            .await
        {
            ctx.progress(format!(
                "could not overwrite the join token in {token_file} on {host}: {e}"
            ));
        }
        joined
    }

    /// k0s v1.35.5+/v1.36.1+: the join API added the member at `addr` as a learner; wait until
    /// the leader promoted it to a voter (its EtcdMember object shows Joined=True, which k0s
    /// stamps on promotion) before the step ends, so the next membership change (another join
    /// or a removal) starts from voters only.
    async fn wait_promoted(
        &self,
        ctx: &StepContext,
        host: &HostId,
        via: &HostId,
        addr: &str,
    ) -> Result<(), StepError> {
        let waiting = format!("waiting for etcd learner {addr} to be promoted");
        let what = format!(
            "etcd member {addr} to be promoted from learner to voter (via {via}); k0s's leader promotes one learner about every 10 s once it has caught up, see its log (\"learner not ready for promotion yet\")"
        );
        self.poll_until(ctx, (&waiting, &what), move || async move {
            let objects = self.etcd_member_objects(via).await?;
            let mut here = objects
                .iter()
                .filter(|o| o.peer_address.as_deref() == Some(addr));
            // An object of the host's earlier life, not yet rewritten, may say Joined=True: that
            // was the old member's, not a promotion of the new one.
            let old = |o: &&k0s::EtcdMemberObject| {
                o.member_id
                    .as_deref()
                    .is_some_and(|id| self.is_replaced_member_id(host, id))
            };
            let Some(first) = here.clone().next() else {
                return Err(format!("no EtcdMember object for {addr} yet"));
            };
            if here.any(|o| o.joined == Some(true) && o.member_id.is_some() && !old(&o)) {
                return Ok(());
            }
            Err(match first.member_id.as_deref() {
                Some(id) if old(&first) => format!(
                    "EtcdMember \"{}\" still shows member {id}, the one {host} had before it joined anew",
                    first.name
                ),
                _ => format!("EtcdMember \"{}\" does not show Joined=True yet", first.name),
            })
        })
        .await
    }

    async fn wait_member(
        &self,
        ctx: &StepContext,
        via: &HostId,
        addr: &str,
    ) -> Result<(), StepError> {
        let what = format!("{addr} to be a started etcd member (via {via})");
        self.poll_until(
            ctx,
            ("waiting for the new etcd member", &what),
            move || async move {
                match self.etcd_members(via).await? {
                    // kine: a joining controller adds no member; its API server answers.
                    None => Ok(()),
                    Some(m) => match m.iter().find(|(_, u)| peer_host(u) == addr) {
                        Some((name, _)) if !name.is_empty() => Ok(()),
                        Some(_) => Err(format!("member {addr} is added but not started")),
                        None => Err(format!("{addr} is not an etcd member yet")),
                    },
                }
            },
        )
        .await
    }
}
