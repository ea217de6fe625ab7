//! Join tokens. They live only in `JoinToken` values: inside one step for a controller, shared by
//! the worker joins running at the same time for a worker (`SharedToken`), and are invalidated
//! when the last step using one is done.

use super::join_token::{JoinToken, SharedToken};
use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s::{self, TokenRole};
use crate::transport::Transport;
use std::sync::Arc;
use std::time::Duration;

/// Join tokens live 30 minutes at most, even if invalidation fails.
const TOKEN_EXPIRY: Duration = Duration::from_secs(30 * 60);

impl<T: Transport + 'static> K0sRunner<T> {
    /// A join token from controller `via` and its ID: a fresh one for a controller, the one the
    /// worker joins running now share for a worker (`SharedToken`).
    pub(super) async fn take_token(
        &self,
        via: &HostId,
        role: TokenRole,
    ) -> Result<(Arc<JoinToken>, String), StepError> {
        if role != TokenRole::Worker {
            return self.create_token(via, role).await;
        }

        // Held while creating, so joins starting together wait for one token instead of each
        // creating their own.
        let mut shared = self.worker_tokens.lock().await;
        if let Some(t) = shared.get_mut(via) {
            t.users += 1;
            return Ok((t.token.clone(), t.id.clone()));
        }
        let (token, id) = self.create_token(via, role).await?;
        shared.insert(
            via.clone(),
            SharedToken {
                token: token.clone(),
                id: id.clone(),
                users: 1,
            },
        );
        Ok((token, id))
    }

    async fn create_token(
        &self,
        via: &HostId,
        role: TokenRole,
    ) -> Result<(Arc<JoinToken>, String), StepError> {
        let vp = self.paths(via);
        let out = self
            .exec(
                via,
                k0s::token_create(&vp.bin, &vp.data_dir, role, TOKEN_EXPIRY),
            )
            .await
            .map_err(failed)?;
        if !out.success() {
            // stderr only: stdout would be the token.
            return Err(failed(format!(
                "{via}: creating a join token failed: {}",
                out.error_line()
            )));
        }
        let token = JoinToken(out.stdout_str().trim().to_string());
        drop(out);
        let info = k0s::parse_token(&token.0)
            .map_err(|e| failed(format!("{via}: the join token is unusable: {e}")))?;
        Ok((Arc::new(token), info.id))
    }

    /// Done with a token: invalidated now, or, for a shared worker token, when the last join
    /// using it is done.
    pub(super) async fn give_back_token(
        &self,
        ctx: &StepContext,
        via: &HostId,
        role: TokenRole,
        id: &str,
    ) {
        if role == TokenRole::Worker {
            let mut shared = self.worker_tokens.lock().await;
            match shared.get_mut(via) {
                Some(t) if t.id == id && t.users > 1 => {
                    t.users -= 1;
                    return;
                }
                Some(t) if t.id == id => {
                    shared.remove(via);
                }
                _ => {}
            }
        }
        let vp = self.paths(via);
        let out = self
            .exec(via, k0s::token_invalidate(&vp.bin, &vp.data_dir, id))
            .await;
        match out {
            Ok(o) if o.success() => {}
            Ok(o) => ctx.progress(format!(
                "could not invalidate join token {id} on {via} ({}); it expires within 30 minutes",
                o.error_line()
            )),
            Err(e) => ctx.progress(format!(
                "could not invalidate join token {id} on {via} ({e}); it expires within 30 minutes"
            )),
        }
    }
}
