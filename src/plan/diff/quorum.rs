//! The etcd quorum arithmetic: replays the plan's membership changes in order, refuses the
//! first that would leave fewer healthy members than quorum, and sums up the plan's worst
//! moment for the plan text.

use super::Planner;
use super::cluster::{Member, same_member_id};
use super::host_plan::HostPlan;
use super::hosts::peer_key;
use crate::plan::model::{QuorumSummary, Refusal, RefusalKind};

pub(super) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Replays the membership changes in order and refuses the first that would leave fewer
/// healthy members than quorum.
pub(super) struct QuorumSim {
    /// (member id or peer URL, healthy)
    members: Vec<(String, String, bool)>,
    before: usize,
    min_healthy: usize,
    max_quorum: usize,
    changed: bool,
    /// A kine cluster: no etcd, nothing to count.
    off: bool,
}

impl QuorumSim {
    pub(super) fn new(members: &[Member]) -> Self {
        let members: Vec<(String, String, bool)> = members
            .iter()
            .map(|m| {
                (
                    m.member_id.clone().unwrap_or_default(),
                    m.peer_url.clone(),
                    m.healthy,
                )
            })
            .collect();
        let n = members.len();
        let healthy = members.iter().filter(|m| m.2).count();
        QuorumSim {
            before: n,
            min_healthy: healthy,
            max_quorum: if n == 0 { 0 } else { quorum(n) },
            members,
            changed: false,
            off: false,
        }
    }
    /// For a kine cluster: membership changes are no etcd changes, so none is counted or
    /// refused, and the summary shows no etcd members.
    pub(super) fn off() -> Self {
        let mut q = Self::new(&[]);
        q.off = true;
        q
    }
    fn healthy(&self) -> usize {
        self.members.iter().filter(|m| m.2).count()
    }
    /// (members, healthy members) now.
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.members.len(), self.healthy())
    }
    /// No members, or at least quorum of them healthy: a membership change is possible.
    pub(super) fn has_quorum(&self) -> bool {
        self.members.is_empty() || self.healthy() >= quorum(self.members.len())
    }
    fn check_start(&self, what: &str) -> Result<(), Refusal> {
        let n = self.members.len();
        if n > 0 && self.healthy() < quorum(n) {
            return Err(Refusal {
                kind: RefusalKind::Quorum,
                message: format!(
                    "etcd has {} healthy of {n} members; quorum is {}: {what} is not possible",
                    self.healthy(),
                    quorum(n)
                ),
                details: vec![format!(
                    "{} healthy < quorum {} of {n} members",
                    self.healthy(),
                    quorum(n)
                )],
            });
        }
        Ok(())
    }
    pub(super) fn remove(
        &mut self,
        member_id: &str,
        peer_url: &str,
        name: &str,
    ) -> Result<(), Refusal> {
        if self.off {
            return Ok(());
        }
        self.check_start(&format!("removing {name}"))?;
        let Some(pos) = self
            .members
            .iter()
            .position(|m| same_member_id(&m.0, member_id) || peer_key(&m.1) == peer_key(peer_url))
        else {
            return Ok(());
        };
        let was_healthy = self.members[pos].2;
        let n = self.members.len() - 1;
        let healthy = self.healthy() - usize::from(was_healthy);
        if n == 0 || healthy < quorum(n) {
            let q = if n == 0 { 1 } else { quorum(n) };
            return Err(Refusal {
                kind: RefusalKind::Quorum,
                message: format!(
                    "removing {name} would leave {healthy} healthy of {n} members; quorum is {q}"
                ),
                details: vec![format!(
                    "{} members now, {} healthy; {name} is {}; after: {n} members, {healthy} healthy, quorum {q}",
                    n + 1,
                    self.healthy(),
                    if was_healthy { "healthy" } else { "down" }
                )],
            });
        }
        self.members.remove(pos);
        self.changed = true;
        self.min_healthy = self.min_healthy.min(healthy);
        self.max_quorum = self.max_quorum.max(quorum(n));
        Ok(())
    }
    pub(super) fn join(&mut self, name: &str, bootstrap: bool) -> Result<(), Refusal> {
        if self.off {
            return Ok(());
        }
        if !bootstrap {
            self.check_start(&format!("adding {name}"))?;
            let n = self.members.len() + 1;
            let healthy = self.healthy();
            // etcd refuses to add while a voter is down (strict reconfig check), and the new
            // member only helps once it runs: dead members must be removed first.
            let down = self.members.len() - healthy;
            if down > 0 || healthy + 1 < quorum(n) {
                return Err(Refusal {
                    kind: RefusalKind::Quorum,
                    message: format!(
                        "adding {name} would make {n} members of which {} can be healthy; quorum is {}{}",
                        healthy + 1,
                        quorum(n),
                        if down > 0 {
                            format!(" and {down} existing member(s) are down")
                        } else {
                            String::new()
                        }
                    ),
                    details: vec![format!(
                        "{} members now, {healthy} healthy; after adding {name}: {n} members, quorum {}",
                        n - 1,
                        quorum(n)
                    )],
                });
            }
            // Between the member add and its start, etcd counts it as a down voter.
            self.min_healthy = self.min_healthy.min(healthy);
            self.max_quorum = self.max_quorum.max(quorum(n));
        } else {
            self.max_quorum = self.max_quorum.max(1);
            if self.members.is_empty() {
                self.min_healthy = 0;
            }
        }
        self.members
            .push((String::new(), format!("new:{name}"), true));
        self.changed = true;
        Ok(())
    }

    /// A member restarting (upgrade, reconfigure) is down until it is back.
    pub(super) fn restart(&mut self) {
        let n = self.members.len();
        if n == 0 {
            return;
        }
        self.min_healthy = self.min_healthy.min(self.healthy().saturating_sub(1));
        self.max_quorum = self.max_quorum.max(quorum(n));
    }

    pub(super) fn summary(&self) -> QuorumSummary {
        QuorumSummary {
            members_before: self.before,
            members_after: self.members.len(),
            min_healthy: if self.changed || self.before > 0 {
                self.min_healthy
            } else {
                0
            },
            quorum: self.max_quorum,
            kine: self.off,
        }
    }
}

impl Planner<'_> {
    /// Two etcd members are no more available than one: while either restarts, the other
    /// alone has no quorum, so etcd and the API stop. Not refused (there is no safer order, and
    /// k0sctl does the same), but said.
    pub(super) fn two_member_restarts(&mut self, plans: &[HostPlan]) {
        if self.cluster.members.len() != 2 {
            return;
        }
        let names: Vec<String> = plans
            .iter()
            .filter(|p| self.hosts[p.idx].role().is_controller() && p.decision.restarts())
            .map(|p| self.hosts[p.idx].name())
            .collect();
        if !names.is_empty() {
            self.warnings.push(format!(
                "restarting {} in a cluster of 2 etcd members: while each restarts the other has no quorum, so etcd and the Kubernetes API are unavailable until it is back (3 controllers keep quorum)",
                names.join(", ")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_arithmetic_in_refusal() {
        let m = |id: &str, healthy| Member {
            name: id.into(),
            peer_url: format!("https://{id}:2380"),
            member_id: Some(id.into()),
            host: None,
            healthy,
            seen_by: vec![],
        };
        let mut q = QuorumSim::new(&[m("c1", true), m("c2", true), m("c3", false)]);
        let r = q.remove("c2", "https://c2:2380", "c2").unwrap_err();
        assert_eq!(
            r.message,
            "removing c2 would leave 1 healthy of 2 members; quorum is 2"
        );
        assert_eq!(r.exit_code(), 3);
        // A dead member can go: 2 members, 2 healthy.
        q.remove("c3", "https://c3:2380", "c3").unwrap();
        assert_eq!(q.summary().members_after, 2);
    }
}
