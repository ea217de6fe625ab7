//! `-timeout` (k0sctl's --timeout, cmd/flags.go `timeoutFlag`): one deadline for a whole
//! operation, counted from its start; none when 0 or not given (k0sctl's `veryLongTime`).

use super::Failure;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    started: Instant,
    limit: Option<Duration>,
}

impl Deadline {
    /// From now; `None` or 0: no limit.
    pub fn starting_now(limit: Option<Duration>) -> Self {
        Deadline {
            started: Instant::now(),
            limit: limit.filter(|d| !d.is_zero()),
        }
    }

    /// When it is reached, and the limit it was given; `None`: never.
    pub fn at(&self) -> Option<(Instant, Duration)> {
        self.limit.map(|d| (self.started + d, d))
    }

    /// The run's failure once it is reached: `-timeout D reached` and `what` (the rest of the
    /// sentence: where it was reached, what was left undone).
    fn reached(d: Duration, what: &str) -> Failure {
        Failure::error(format!(
            "-timeout {} reached{what}",
            humantime::format_duration(d)
        ))
    }

    /// Fails when it has been reached (`reached` says what with `what`).
    pub fn check(&self, what: &str) -> Result<(), Failure> {
        match self.at() {
            Some((at, d)) if Instant::now() >= at => Err(Self::reached(d, what)),
            _ => Ok(()),
        }
    }

    /// `work` under the deadline: reached, the work is dropped and the run fails (`what` says
    /// what with `reached`).
    pub async fn bounded<T>(
        &self,
        work: impl std::future::Future<Output = T>,
        what: &str,
    ) -> Result<T, Failure> {
        let Some((at, d)) = self.at() else {
            return Ok(work.await);
        };
        // Already past: the work does not start (tokio's timeout polls the work before its
        // timer, and work that ends on the timer's first turn would win the race).
        self.check(what)?;
        tokio::time::timeout_at(at, work)
            .await
            .map_err(|_| Self::reached(d, what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_is_bounded_and_a_passed_deadline_starts_nothing() {
        let none = Deadline::starting_now(Some(Duration::ZERO));
        assert!(none.at().is_none(), "0: no limit");
        let slow = tokio::time::sleep(Duration::from_secs(3600));
        assert!(none.bounded(slow, "").await.is_ok());
        let dl = Deadline::starting_now(Some(Duration::from_secs(2)));
        assert!(dl.check(": x").is_ok());
        let quick = dl.bounded(async { 7 }, ": x").await.expect("in time");
        assert_eq!(quick, 7);
        let slow = tokio::time::sleep(Duration::from_secs(3));
        let e = dl.bounded(slow, " while waiting").await.unwrap_err();
        assert!(
            e.message().contains("-timeout 2s reached while waiting"),
            "{}",
            e.message()
        );
        assert!(dl.check(": x").is_err());
        let mut started = false;
        let e = dl
            .bounded(async { started = true }, ": y")
            .await
            .unwrap_err();
        assert!(!started, "work started after the deadline");
        assert!(
            e.message().contains("-timeout 2s reached: y"),
            "{}",
            e.message()
        );
    }
}
