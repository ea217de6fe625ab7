//! Every k0s command line k0sform sends and every parser of k0s output. Nothing else builds k0s commands.
//! `cmdline` builds `RemoteCommand`s (argv + timeout), `parse` reads k0s's outputs and error lines,
//! `probe_script` is the one batched read-only command the probe runs per host, `desired` (the
//! planner's) computes what a host should have, `redact` keeps k0s.yaml's secrets out of diffs,
//! `kubeconfig` rewrites the admin kubeconfig as k0sctl does, `backup` reads backup archives,
//! `release` says where k0s releases are and how a host downloads one.

pub mod backup;
pub mod cmdline;
pub mod desired;
pub mod facts;
pub mod host_env;
pub mod kubeconfig;
pub mod parse;
pub mod private_address;
pub mod probe_script;
pub mod quirks;
pub mod redact;
pub mod release;
pub mod token_file;

pub use cmdline::*;
pub use parse::*;
pub use probe_script::{
    GENERATED_MACHINE_ID, ProbeCommand, ProbeError, ProbeReader, STATUS_BOUND_SECS, merge_members,
    peer_url_host, probe,
};
pub use token_file::placeholder_token;

use serde::{Deserialize, Serialize};

/// The role a join token is for (`k0s token create --role`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TokenRole {
    Controller,
    Worker,
}

impl TokenRole {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenRole::Controller => "controller",
            TokenRole::Worker => "worker",
        }
    }
}

/// What a join token says about itself (never the secret part).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    /// Bootstrap token ID (the part before the dot), for `k0s token invalidate`.
    pub id: String,
    /// The join URL (`https://<controller>:9443` or `:6443` for workers).
    pub server_url: String,
    pub kind: TokenRole,
}

/// One `etcdmembers.etcd.k0sproject.io` object (k0s ≥ 1.30).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdMemberObject {
    pub name: String,
    /// Hex member ID (`status.memberID`).
    pub member_id: Option<String>,
    /// Bare peer address (`status.peerAddress`).
    pub peer_address: Option<String>,
    /// The `Joined` condition; None when absent.
    pub joined: Option<bool>,
    /// `spec.leave`.
    pub leave: bool,
    /// `metadata.labels["k0s.k0sproject.io/shutdown-on-leave"]`: the InvocationID of the k0s
    /// that last (re)joined as this member (pkg/component/controller/etcd_member_reconciler.go
    /// `createMemberObject`); hex, else None.
    pub invocation: Option<String>,
}

/// An InvocationID as k0s makes it (16 random bytes, hex: pkg/config/cfgvars.go); anything
/// else a host prints there is not one.
pub fn invocation_id(s: &str) -> Option<String> {
    (!s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| s.to_ascii_lowercase())
}

/// Does a controller of k0s `version` add joining controllers to etcd as learners, to be
/// promoted by the leader's EtcdMember reconciler? From v1.35.5 and v1.36.1 on (cmd/api/api.go
/// `AddMemberAsLearner`, pkg/component/controller/etcd_member_reconciler.go `promoteLearners`),
/// pre-releases of those included. Such a member serves nothing until promoted; its EtcdMember
/// object shows Joined=True only once it is a voter.
pub fn learner_joins(version: &crate::version::K0sVersion) -> bool {
    let v = version.numbers();
    ((1, 35, 5)..(1, 36, 0)).contains(&v) || v >= (1, 36, 1)
}

/// A Node's Ready condition as `kubectl get nodes -o json` shows it, with its times (seconds
/// since the epoch; `None` when absent or unreadable). `lastHeartbeatTime` is set by the kubelet
/// from its host's clock at every status post; the Node lifecycle controller keeps a Ready=True
/// condition for `node-monitor-grace-period` (40 s) after the kubelet stops posting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReady {
    pub name: String,
    pub ready: bool,
    pub last_heartbeat: Option<i64>,
    pub last_transition: Option<i64>,
}

impl NodeReady {
    /// Ready, as posted by a kubelet that started after `restarted` (seconds, the Node's host
    /// clock, taken once the old k0s was stopped): its Ready condition was posted or turned
    /// True in a later second. A condition from the second of the restart itself may still be
    /// the old kubelet's (RFC 3339 times in Node objects have whole seconds), so it waits for
    /// the next post.
    pub fn ready_since(&self, restarted: i64) -> bool {
        self.ready
            && self
                .last_heartbeat
                .into_iter()
                .chain(self.last_transition)
                .any(|t| t > restarted)
    }
}

/// A k0s output k0sform could not read. Messages never quote secrets (tokens).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum K0sError {
    #[error("cannot read {what}: {message}")]
    Parse { what: &'static str, message: String },
    /// `k0s status` answered but reports no running process (k0sctl's rule).
    #[error("k0s is not running")]
    NotRunning,
}

impl K0sError {
    pub(crate) fn parse(what: &'static str, message: impl std::fmt::Display) -> Self {
        K0sError::Parse {
            what,
            message: message.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::learner_joins;

    #[test]
    fn learner_joins_from_v1_35_5_and_v1_36_1() {
        for v in [
            "v1.35.5+k0s.0",
            "v1.35.5-rc.0+k0s.0",
            "v1.35.7+k0s.0",
            "v1.36.1+k0s.0",
            "v1.36.3+k0s.2",
            "v1.37.0-alpha.1+k0s.0-258-gdff90cee9a",
            "v2.0.0",
        ] {
            assert!(learner_joins(&v.parse().unwrap()), "{v}");
        }
        for v in [
            "v1.35.4+k0s.0",
            "v1.35.1+k0s.1",
            "v1.36.0+k0s.0",
            "v1.34.9+k0s.0",
            "v1.30.0+k0s.0",
        ] {
            assert!(!learner_joins(&v.parse().unwrap()), "{v}");
        }
    }
}
