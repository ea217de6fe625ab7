//! What the user asked for on the command line, beyond the spec (`PlanOptions`).

use crate::hostid::HostId;
use serde::{Deserialize, Serialize};

/// What the user asked for on the command line, beyond the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanOptions {
    /// `-replace`: treat these hosts as rebuilt (`ADDR` or `ADDR:PORT`).
    #[serde(default)]
    pub replace: Vec<String>,
    /// `-target`: change only these hosts (and what they need).
    #[serde(default)]
    pub target: Vec<String>,
    /// `-exclude`: leave these hosts out entirely.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// `-refresh-only`: record reality into state, change no host.
    #[serde(default)]
    pub refresh_only: bool,
    /// `-trust-new-host-keys=false`: refuse the plan when a host or bastion would be trusted on
    /// first contact (no key recorded in the state, no `ssh.hostKey` pin).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse_first_contact: bool,
    /// `-no-drain`: restart hosts without cordoning and draining their Nodes first (as
    /// k0sctl's `--no-drain`; `options.drain.enabled: false` does the same).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_drain: bool,
    /// `-restore-from`: bootstrap the cluster from this backup archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreArchive>,
    /// `-allow-downgrade`: plan a spec version older than what a host runs (refused otherwise).
    #[serde(default)]
    pub allow_downgrade: bool,
    /// `plan -destroy` / `destroy`: reset every host of the spec and the state (workers first,
    /// then controllers one at a time) and empty the state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destroy: bool,
    /// `-show-secrets`: the k0s.yaml diff shows secret values (kine DSN passwords, tokens)
    /// instead of `(secret)`. Never saved: a saved plan holds no secrets, and its plan
    /// is derived again without them.
    #[serde(skip)]
    #[schemars(skip)]
    pub show_secrets: bool,
}

/// A k0s backup archive on the machine running k0sform (`apply -restore-from FILE`), as read
/// before planning (`k0s::backup::read_archive`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RestoreArchive {
    /// Absolute path.
    pub path: String,
    pub sha256: String,
    /// The etcd peer address recorded in the archive's k0s.yaml, if any: `k0s restore`
    /// registers the restored member there.
    pub peer_address: Option<String>,
}

impl PlanOptions {
    pub fn is_replaced(&self, id: &HostId) -> bool {
        self.replace.iter().any(|s| id.matches(s))
    }
    pub fn is_excluded(&self, id: &HostId) -> bool {
        self.exclude.iter().any(|s| id.matches(s))
    }
    /// Without `-target` every host is targeted.
    pub fn is_targeted(&self, id: &HostId) -> bool {
        self.target.is_empty() || self.target.iter().any(|s| id.matches(s))
    }
}
