//! `Deadline`: how a step waits for a condition on the hosts (k0s ready, a member started, a Node
//! Ready): poll at `poll_interval` until a total time is spent, then fail with the last reason;
//! `K0sRunner::poll_until`, the loop the steps wait with.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StepContext, StepError};
use crate::transport::Transport;
use std::time::{Duration, Instant};

/// Polls a condition until a deadline.
pub(super) struct Deadline {
    until: Instant,
    total: Duration,
    interval: Duration,
}

impl Deadline {
    pub(super) fn new(total: Duration, interval: Duration) -> Self {
        Deadline {
            until: Instant::now() + total,
            total,
            interval,
        }
    }

    /// Sleep before the next try, or give up with the last reason.
    pub(super) async fn retry(&self, what: &str, last: &str) -> Result<(), String> {
        self.retry_after(what, last, Instant::now()).await
    }

    /// `retry`, sleeping until one interval after `since` (when the last answer was asked)
    /// rather than after now: waiters that share one answer wake together for the next.
    pub(super) async fn retry_after(
        &self,
        what: &str,
        last: &str,
        since: Instant,
    ) -> Result<(), String> {
        self.retry_after_every(what, last, since, self.interval)
            .await
    }

    /// `retry_after` with another interval than the deadline's.
    pub(super) async fn retry_after_every(
        &self,
        what: &str,
        last: &str,
        since: Instant,
        interval: Duration,
    ) -> Result<(), String> {
        self.check(what, last)?;
        tokio::time::sleep_until((since + interval).into()).await;
        Ok(())
    }

    /// Fail with the last reason once the deadline has passed.
    pub(super) fn check(&self, what: &str, last: &str) -> Result<(), String> {
        if Instant::now() >= self.until {
            return Err(format!(
                "timed out after {} waiting for {what}: {last}",
                humantime::format_duration(Duration::from_secs(self.total.as_secs().max(1)))
            ));
        }
        Ok(())
    }
}

impl<T: Transport + 'static> K0sRunner<T> {
    /// Poll `check` every `poll_interval` until it passes (`Ok`), for at most `wait_timeout`.
    /// Each time it does not (`Err(why)`), the step's progress shows `{waiting}: {why}`; at the
    /// deadline the step fails with `timed out after … waiting for {what}: {why}`.
    pub(super) async fn poll_until<F>(
        &self,
        ctx: &StepContext,
        (waiting, what): (&str, &str),
        mut check: impl FnMut() -> F,
    ) -> Result<(), StepError>
    where
        F: std::future::Future<Output = Result<(), String>>,
    {
        let dl = Deadline::new(self.opts.wait_timeout, self.opts.poll_interval);
        loop {
            let why = match check().await {
                Ok(()) => return Ok(()),
                Err(why) => why,
            };
            ctx.progress(format!("{waiting}: {why}"));
            dl.retry(what, &why).await.map_err(failed)?;
        }
    }
}
