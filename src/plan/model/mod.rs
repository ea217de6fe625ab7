//! The plan as data: per-host changes with reasons (what people read, `change`) and a DAG of
//! typed steps (what `apply` runs, `step`). Serialized as the versioned plan JSON
//! (schema/plan.schema.json). This file holds the `Plan` and its cluster-wide parts; the
//! others, one kind of type each, are re-exported here.

mod change;
mod desired;
mod options;
mod refusal;
mod step;

pub use change::*;
pub use desired::*;
pub use options::*;
pub use refusal::*;
pub use step::*;

use crate::hostid::HostId;
use crate::spec::Role;
use crate::version::K0sVersion;
use serde::{Deserialize, Serialize};

pub const PLAN_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    pub format_version: u32,
    pub cluster_name: String,
    /// The cluster identity (kube-system uid) the plan works on; None before bootstrap.
    pub cluster_uid: Option<String>,
    /// How the cluster itself is treated.
    pub cluster_action: ClusterAction,
    /// `-refresh-only`: the plan only records reality into state.
    pub refresh_only: bool,
    /// `plan -destroy` / `destroy`: every host is reset and the state ends empty (k0sctl reset).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destroy: bool,
    /// Identities that changed since the state was written ("Changed outside k0sform").
    pub outside_changes: Vec<OutsideChange>,
    /// One entry per host that changes, sorted by host id.
    pub changes: Vec<HostChange>,
    /// Members or Nodes that neither the spec nor the state know (reported, not touched).
    pub drift: Vec<Drift>,
    /// The steps, in a topological order; `Step::after` holds the DAG's edges.
    pub steps: Vec<Step>,
    pub etcd: QuorumSummary,
    pub warnings: Vec<String>,
    /// The state serial the plan was made against (None: no state yet).
    #[serde(default)]
    pub state_serial: Option<u64>,
    /// Hosts whose SSH key this run trusted on first use: no key recorded in the state, no
    /// `ssh.hostKey` pin (or `-replace` dropped the recorded one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_contacts: Vec<FirstContact>,
    /// The k0s version the plan installs where the spec names none, and where it came from;
    /// `apply FILE` chooses it again and refuses (exit 5) when that is another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k0s_version: Option<ResolvedVersion>,
    /// `apply.*` and `connect.after` hooks of spec hosts this plan runs nothing on: k0sform
    /// runs them only on hosts an apply changes, where k0sctl runs them at every apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks_not_run: Vec<HooksNotRun>,
    /// The spec's extra manifests and those the state recorded that the spec lost, each with
    /// what happens to it (`crate::manifests`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<crate::manifests::ManifestChange>,
    /// Hosts without `privateAddress` whose private address k0s uses (peerAddress, SAN,
    /// `--node-ip`) was found on the host as k0sctl finds it (`k0s::private_address`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_addresses: Vec<FoundAddress>,
}

/// A private address found on a host (or kept from the state for a host not reached).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FoundAddress {
    pub host: HostId,
    pub address: String,
    /// The interface it is on, or "recorded in the state".
    pub found_on: String,
}

/// A host's hooks that do not run because the plan changes nothing on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HooksNotRun {
    pub host: HostId,
    pub name: String,
    /// `action.stage`, e.g. `apply.before`.
    pub hooks: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FirstContact {
    pub host: HostId,
    /// The host's name as it reported it.
    pub name: String,
    /// `SHA256:…` of the key it offered and this run trusts.
    pub fingerprint: String,
    /// `host` is a bastion (`ssh.bastion`) other hosts are reached through, not a host.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bastion: bool,
}

/// A k0s version k0sform chose because `spec.k0s.version` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResolvedVersion {
    pub version: K0sVersion,
    /// Why this one, e.g. "the version the cluster runs", "latest stable release (…/stable.txt)".
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClusterAction {
    /// A cluster known to the state (or adopted earlier) is managed.
    Existing,
    /// No state; a running cluster was found and is adopted (no remote change).
    Adopt,
    /// No state and nothing running: bootstrap on this controller.
    Bootstrap { host: HostId },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutsideChange {
    pub host: HostId,
    pub role: Role,
    pub name: String,
    /// e.g. "machine-id 3d12…→9ab4…", "host key SHA256:Qx…→SHA256:mZ…".
    pub changes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Drift {
    pub code: ReasonCode,
    /// e.g. `etcd member "x" (https://127.0.0.9:2380)` or `Node "w9"`.
    pub what: String,
    pub seen_by: Vec<HostId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuorumSummary {
    pub members_before: usize,
    pub members_after: usize,
    /// The fewest healthy voting members at any point of the plan.
    pub min_healthy: usize,
    /// The largest quorum required at any point of the plan.
    pub quorum: usize,
    /// The cluster keeps its data in kine (a `single` host, or `storage.type: kine`): it has
    /// no etcd members and the counts above are all 0.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kine: bool,
}

impl Plan {
    pub fn has_changes(&self) -> bool {
        !self.steps.is_empty()
    }
}
