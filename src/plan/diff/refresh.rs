//! What changed without k0sform and what runs that it does not know: the "Changed outside
//! k0sform" lines and the drift of every plan, and the `-refresh-only` plan that records what
//! runs into state without touching a host.

use super::cluster::same_member_id;
use super::details::identity_text;
use super::hosts::HostCtx;
use super::quorum::quorum;
use super::{PlanBody, PlanKind, Planner, reason};
use crate::hash::{short, short_key};
use crate::plan::model::{
    Action, Detail, Drift, HostChange, OutsideChange, Plan, QuorumSummary, Reason, ReasonCode,
    Step, StepKind,
};
use crate::reality::{HostFacts, Probe};
use crate::transport::host_keys_differ;
use std::collections::BTreeSet;

impl Planner<'_> {
    pub(super) fn outside_changes(&self) -> Vec<OutsideChange> {
        let mut out = Vec::new();
        for h in self.hosts.iter().filter(|h| !h.excluded) {
            let Some(st) = h.state else { continue };
            let mut changes = Vec::new();
            match h.probe {
                Some(Probe::HostKeyChanged {
                    expected,
                    offered,
                    bastion,
                }) => {
                    let whose = match bastion {
                        Some(b) => format!("bastion {b} host key"),
                        None => "host key".to_string(),
                    };
                    changes.push(format!(
                        "{whose} {}→{}",
                        short_key(expected),
                        short_key(offered)
                    ));
                }
                Some(Probe::Reached(f)) => {
                    changes.extend(identity_changes(st, f));
                    let running = f.status.as_ref().map(|s| s.version.clone());
                    if let (Some(rec), Some(now)) = (&st.k0s_version, &running)
                        && rec != now
                    {
                        changes.push(format!("k0s {rec}→{now}"));
                    }
                    if !f.is_running() {
                        changes.push("k0s not running".into());
                    }
                    if let Some(rec) = &st.etcd
                        && self.cluster.uid.is_some()
                        && !self.cluster.members.iter().any(|m| {
                            m.member_id
                                .as_deref()
                                .is_some_and(|id| same_member_id(id, &rec.member_id))
                        })
                    {
                        changes.push(format!("etcd member {} gone", rec.member_id));
                    }
                }
                _ => {}
            }
            if !changes.is_empty() {
                out.push(OutsideChange {
                    host: h.id.clone(),
                    role: h.role(),
                    name: h.name(),
                    changes,
                });
            }
        }
        out
    }

    pub(super) fn drift(&self) -> Vec<Drift> {
        let mut out = Vec::new();
        for m in self.cluster.members.iter().filter(|m| m.host.is_none()) {
            out.push(Drift {
                code: ReasonCode::UnknownMember,
                what: format!(
                    "etcd member \"{}\" ({}{})",
                    m.name,
                    m.peer_url,
                    m.member_id
                        .as_ref()
                        .map(|i| format!(", id {i}"))
                        .unwrap_or_default()
                ),
                seen_by: m.seen_by.clone(),
            });
        }
        let known: BTreeSet<String> = self.hosts.iter().map(|h| h.name()).collect();
        for (node, seen_by) in &self.cluster.nodes {
            if !known.contains(node) {
                out.push(Drift {
                    code: ReasonCode::UnknownNode,
                    what: format!("Node \"{node}\""),
                    seen_by: seen_by.clone(),
                });
            }
        }
        out
    }

    /// `-refresh-only`: record what runs, touch nothing.
    pub(super) fn refresh_plan(
        &mut self,
        outside_changes: Vec<OutsideChange>,
        drift: Vec<Drift>,
    ) -> Plan {
        let mut steps = Vec::new();
        let mut changes = Vec::new();
        for h in self
            .hosts
            .iter()
            .filter(|h| !h.excluded && h.facts().is_some())
        {
            if !self.in_cluster(h) {
                if h.state.is_some() || h.in_spec() {
                    self.warnings.push(format!(
                        "{} ({}) is not running in the cluster; not recorded",
                        h.name(),
                        h.id
                    ));
                }
                continue;
            }
            let f = h.facts().map(|f| (*f).clone()).unwrap_or_default();
            let member_id = self.member_of(&h.id).and_then(|m| m.member_id.clone());
            let mut reasons = refresh_reasons(h, &f, member_id.as_deref());
            if reasons.is_empty() && h.moved_from.is_none() {
                continue;
            }
            let mut own = Vec::new();
            if let Some(from) = &h.moved_from {
                reasons.insert(
                    0,
                    reason(
                        ReasonCode::Moved,
                        format!("the host recorded at {from} answers here"),
                    ),
                );
                own.push(steps.len());
                steps.push(Step {
                    id: steps.len(),
                    host: h.id.clone(),
                    kind: StepKind::MoveHost { from: from.clone() },
                    after: vec![],
                });
            }
            let id = steps.len();
            steps.push(Step {
                id,
                host: h.id.clone(),
                kind: StepKind::RecordHost,
                after: own.clone(),
            });
            own.push(id);
            changes.push(HostChange {
                host: h.id.clone(),
                role: h.role(),
                name: h.name(),
                action: Action::Adopt,
                reasons,
                details: vec![Detail {
                    sign: '+',
                    text: identity_text(&f, member_id.as_deref()),
                }],
                config_diff: None,
                moved_from: h.moved_from.clone(),
                steps: own,
            });
        }
        let n = self.cluster.members.len();
        let healthy = self.cluster.members.iter().filter(|m| m.healthy).count();
        let etcd = QuorumSummary {
            members_before: n,
            members_after: n,
            min_healthy: healthy,
            quorum: if n == 0 { 0 } else { quorum(n) },
            kine: self.kine(),
        };
        self.finish(
            PlanKind::RefreshOnly,
            PlanBody {
                outside_changes,
                changes,
                drift,
                steps,
                etcd,
                hooks_not_run: Vec::new(),
            },
        )
    }
}

/// Why `-refresh-only` records a host: found unrecorded, or seen otherwise than recorded.
fn refresh_reasons(h: &HostCtx, f: &HostFacts, member_id: Option<&str>) -> Vec<Reason> {
    match h.state {
        None => vec![reason(
            ReasonCode::FoundRunning,
            "found running in the cluster; recorded",
        )],
        Some(st) => {
            let mut r = Vec::new();
            if st.machine_id != f.machine_id {
                r.push(reason(
                    ReasonCode::MachineIdChanged,
                    "machine-id recorded as seen",
                ));
            }
            if st.host_key != f.host_key {
                r.push(reason(
                    ReasonCode::HostKeyChanged,
                    "host key recorded as seen",
                ));
            }
            let running = f.status.as_ref().map(|s| s.version.clone());
            if st.k0s_version != running {
                r.push(reason(
                    ReasonCode::VersionChange,
                    "k0s version recorded as seen",
                ));
            }
            if h.role().is_controller()
                && st.etcd.as_ref().map(|e| e.member_id.as_str()) != member_id
            {
                r.push(reason(
                    ReasonCode::LeftCluster,
                    "etcd member recorded as seen",
                ));
            }
            r
        }
    }
}

/// How a probed machine differs from its record: `machine-id 3d12…→9ab4…`,
/// `host key SHA256:Qx…→SHA256:mZ…` (empty when it is the recorded machine).
pub(super) fn identity_changes(st: &crate::state::HostState, f: &HostFacts) -> Vec<String> {
    let mut what = Vec::new();
    if f.machine_id != st.machine_id {
        what.push(format!(
            "machine-id {}→{}",
            short(&st.machine_id),
            short(&f.machine_id)
        ));
    }
    if host_keys_differ(&st.host_key, &f.host_key) {
        what.push(format!(
            "host key {}→{}",
            short_key(&st.host_key),
            short_key(&f.host_key)
        ));
    }
    what
}
