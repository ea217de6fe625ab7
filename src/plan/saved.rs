//! Saved plans (`plan -out FILE`): the plan plus what it was made against (state lineage and
//! serial, spec sha256, each host's identity), sealed with a sha256 so `apply FILE` can refuse a
//! plan that is stale or was altered (exit 5).

use super::model::{Plan, PlanOptions};
use crate::hostid::HostId;
use crate::reality::{Probe, Reality};
use crate::state::State;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SavedPlan {
    pub plan: Plan,
    pub state_lineage: String,
    pub state_serial: u64,
    pub spec_sha256: String,
    pub tool_version: String,
    /// The options the plan was made with (`-replace` etc.): `apply FILE` probes with the same.
    #[serde(default)]
    pub options: PlanOptions,
    /// Every probed host's identity when the plan was made, sorted by host.
    pub identities: Vec<HostIdentity>,
    /// sha256 over the canonical JSON of all the fields above.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostIdentity {
    pub host: HostId,
    /// None when the host could not be reached (or offered an unaccepted key).
    pub machine_id: Option<String>,
    pub host_key: Option<String>,
    /// The etcd member ID the host's own view names for it, when it runs a controller.
    pub member_id: Option<String>,
}

/// Why a saved plan cannot be applied. Each entry names one thing that moved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the saved plan is stale: {}", .reasons.join("; "))]
pub struct Stale {
    pub reasons: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SavedPlanError {
    #[error("the saved plan is not valid JSON of a k0sform plan: {0}")]
    Parse(#[from] serde_json::Error),
}

/// The fields that are sealed, in a fixed order.
#[derive(Serialize)]
struct Sealed<'a> {
    plan: &'a Plan,
    state_lineage: &'a str,
    state_serial: u64,
    spec_sha256: &'a str,
    tool_version: &'a str,
    options: &'a PlanOptions,
    identities: &'a [HostIdentity],
}

impl SavedPlan {
    /// Record what `plan` was made against and seal it.
    pub fn new(plan: Plan, state: &State, spec_sha256: &str, reality: &Reality) -> Self {
        Self::with_options(plan, state, spec_sha256, reality, PlanOptions::default())
    }

    /// Like `new`, recording the options the plan was made with.
    pub fn with_options(
        plan: Plan,
        state: &State,
        spec_sha256: &str,
        reality: &Reality,
        options: PlanOptions,
    ) -> Self {
        let mut saved = SavedPlan {
            plan,
            state_lineage: state.lineage.clone(),
            state_serial: state.serial,
            spec_sha256: spec_sha256.to_string(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            options,
            identities: identities(reality),
            sha256: String::new(),
        };
        saved.seal();
        saved
    }

    fn digest(&self) -> String {
        let sealed = Sealed {
            plan: &self.plan,
            state_lineage: &self.state_lineage,
            state_serial: self.state_serial,
            spec_sha256: &self.spec_sha256,
            tool_version: &self.tool_version,
            options: &self.options,
            identities: &self.identities,
        };
        // Serializing plain data cannot fail; an empty digest input would only ever mismatch.
        let bytes = serde_json::to_vec(&sealed).unwrap_or_default();
        crate::hash::sha256_hex(bytes)
    }

    /// Compute and store the seal over everything else.
    pub fn seal(&mut self) {
        self.sha256 = self.digest();
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    pub fn from_json(text: &str) -> Result<Self, SavedPlanError> {
        Ok(serde_json::from_str(text)?)
    }

    /// Is this plan still applicable to this state, spec and probed reality?
    pub fn verify(&self, state: &State, spec_sha256: &str, reality: &Reality) -> Result<(), Stale> {
        let mut reasons = Vec::new();
        let actual = self.digest();
        if actual != self.sha256 {
            reasons.push(format!(
                "the file was altered (sha256 {} recorded, {} computed)",
                self.sha256, actual
            ));
        }
        if state.lineage != self.state_lineage {
            reasons.push(format!(
                "the state has lineage {}, the plan was made for {}",
                state.lineage, self.state_lineage
            ));
        }
        if state.serial != self.state_serial {
            reasons.push(format!(
                "the state moved from serial {} to {}",
                self.state_serial, state.serial
            ));
        }
        if spec_sha256 != self.spec_sha256 {
            reasons.push(format!(
                "the spec changed (sha256 {} when planned, {} now)",
                crate::hash::short(&self.spec_sha256),
                crate::hash::short(spec_sha256)
            ));
        }
        let now = identities(reality);
        for old in &self.identities {
            match now.iter().find(|n| n.host == old.host) {
                None => reasons.push(format!("{} was not probed now", old.host)),
                Some(n) => {
                    for (what, a, b) in [
                        ("machine-id", &old.machine_id, &n.machine_id),
                        ("host key", &old.host_key, &n.host_key),
                        ("etcd member", &old.member_id, &n.member_id),
                    ] {
                        if a != b {
                            reasons.push(format!(
                                "{}: {what} changed ({} → {})",
                                old.host,
                                a.as_deref().unwrap_or("none"),
                                b.as_deref().unwrap_or("none")
                            ));
                        }
                    }
                }
            }
        }
        for n in &now {
            if !self.identities.iter().any(|o| o.host == n.host) {
                reasons.push(format!("{} was not part of the plan's probe", n.host));
            }
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(Stale { reasons })
        }
    }
}

/// Each probed host's identity, sorted by host.
pub fn identities(reality: &Reality) -> Vec<HostIdentity> {
    let mut v: Vec<HostIdentity> = reality
        .hosts
        .iter()
        .map(|h| match &h.probe {
            Probe::Reached(f) => {
                let me = f.hostname.to_lowercase();
                let member_id = f.view.as_ref().and_then(|v| {
                    v.members
                        .iter()
                        .find(|m| m.name == me)
                        .and_then(|m| m.member_id.clone())
                });
                HostIdentity {
                    host: h.id.clone(),
                    machine_id: Some(f.machine_id.clone()),
                    host_key: Some(f.host_key.clone()),
                    member_id,
                }
            }
            Probe::HostKeyChanged { offered, .. } => HostIdentity {
                host: h.id.clone(),
                machine_id: None,
                host_key: Some(offered.clone()),
                member_id: None,
            },
            Probe::Unreachable { .. } => HostIdentity {
                host: h.id.clone(),
                machine_id: None,
                host_key: None,
                member_id: None,
            },
        })
        .collect();
    v.sort_by(|a, b| a.host.cmp(&b.host));
    v
}
