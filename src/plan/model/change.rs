//! What the plan says about each host: the action (`Action`), why (`Reason`, `ReasonCode`), and
//! the lines shown under it (`Detail`), together a `HostChange`.

use crate::hostid::HostId;
use crate::spec::Role;
use serde::{Deserialize, Serialize};

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
pub enum Action {
    Add,
    Adopt,
    Upgrade,
    Reconfigure,
    Rejoin,
    Replace,
    Remove,
    /// Only the spec's `files:` differ: they are uploaded, k0s is not restarted.
    UpdateFiles,
    /// The recorded host answers at a new address (same machine-id and host key): its state
    /// record follows it, nothing runs on the host.
    Move,
}

impl Action {
    /// The plan text's symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Action::Add => "+",
            Action::Adopt => "<=",
            Action::Upgrade
            | Action::Reconfigure
            | Action::Rejoin
            | Action::UpdateFiles
            | Action::Move => "~",
            Action::Replace => "-/+",
            Action::Remove => "-",
        }
    }
}

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
pub enum ReasonCode {
    NewHost,
    Bootstrap,
    FoundRunning,
    VersionChange,
    ConfigChange,
    InstallFlagsChange,
    /// The installed service's environment (`k0s install -e`) differs from `environment`.
    EnvironmentChange,
    LeftCluster,
    NotRunning,
    MachineIdChanged,
    HostKeyChanged,
    ReplaceRequested,
    NotInSpec,
    ResetRequested,
    UnknownMember,
    UnknownNode,
    /// A file of the spec's `files:` is missing or differs on the host.
    FilesChange,
    /// A variable of `environment` is missing from or differs in the host's /etc/environment.
    HostEnvironmentChange,
    /// The host answers at a new address with the recorded machine-id and host key.
    Moved,
    /// `destroy`: the whole cluster is reset.
    Destroy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reason {
    pub code: ReasonCode,
    /// A human sentence, e.g. "the host was rebuilt (machine-id changed)".
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostChange {
    pub host: HostId,
    pub role: Role,
    /// Node name (hostname) as shown in the plan.
    pub name: String,
    pub action: Action,
    pub reasons: Vec<Reason>,
    /// Sub-steps as shown under the host, each `+`, `-` or `~` and a text.
    pub details: Vec<Detail>,
    /// Unified diff of k0s.yaml (reconfigure), if any.
    pub config_diff: Option<String>,
    /// The address the state recorded this host at, when it moved (`host` is the new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<HostId>,
    /// Ids of this change's steps.
    pub steps: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Detail {
    pub sign: char,
    pub text: String,
}
