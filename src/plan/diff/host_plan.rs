//! What the planner decided for one host (the rules that decide are in `table` and `running`):
//! the `Decision` (one row of the decision table, with the member to remove and the machine to
//! reset), and the host plan that carries it with its reasons, config diff and files to the
//! step builder.

use crate::plan::model::{Action, Reason};

/// A member to remove, by the ID recorded in state (or, for a host k0sform never recorded, the
/// ID the cluster reports).
#[derive(Debug, Clone)]
pub(super) struct MemberRef {
    pub(super) member_id: String,
    pub(super) peer_url: String,
    pub(super) healthy: bool,
}

/// What happens to one host.
#[derive(Debug, Clone)]
pub(super) enum Decision {
    Noop,
    Adopt,
    Add {
        bootstrap: bool,
        stale: Option<MemberRef>,
        reset: Option<String>,
    },
    Upgrade {
        from: Option<String>,
        to: String,
        write_config: bool,
    },
    Reconfigure {
        write_config: bool,
    },
    Rejoin {
        stale: Option<MemberRef>,
        reset: Option<String>,
    },
    Replace {
        stale: Option<MemberRef>,
        reset: Option<String>,
    },
    Remove {
        member: Option<MemberRef>,
        reset: Option<String>,
    },
    /// Only `files:` (or /etc/environment, a token placeholder) differ.
    Files,
    /// Only the address changed: the state record follows the host.
    Move,
}

impl Decision {
    pub(super) fn action(&self) -> Option<Action> {
        Some(match self {
            Decision::Noop => return None,
            Decision::Adopt => Action::Adopt,
            Decision::Add { .. } => Action::Add,
            Decision::Upgrade { .. } => Action::Upgrade,
            Decision::Reconfigure { .. } => Action::Reconfigure,
            Decision::Rejoin { .. } => Action::Rejoin,
            Decision::Replace { .. } => Action::Replace,
            Decision::Remove { .. } => Action::Remove,
            Decision::Files => Action::UpdateFiles,
            Decision::Move => Action::Move,
        })
    }
    /// Restarts k0s in place (upgrade or reconfigure).
    pub(super) fn restarts(&self) -> bool {
        matches!(
            self,
            Decision::Upgrade { .. } | Decision::Reconfigure { .. }
        )
    }
    pub(super) fn installs(&self) -> bool {
        matches!(
            self,
            Decision::Add { .. } | Decision::Rejoin { .. } | Decision::Replace { .. }
        )
    }
    pub(super) fn stale(&self) -> Option<&MemberRef> {
        match self {
            Decision::Add { stale, .. }
            | Decision::Rejoin { stale, .. }
            | Decision::Replace { stale, .. } => stale.as_ref(),
            Decision::Remove { member, .. } => member.as_ref(),
            _ => None,
        }
    }
}

pub(super) struct HostPlan {
    pub(super) idx: usize,
    pub(super) decision: Decision,
    pub(super) reasons: Vec<Reason>,
    pub(super) config_diff: Option<String>,
    /// The spec's `files:` to upload (missing or different on the host).
    pub(super) files: Vec<crate::files::DesiredFile>,
    /// The worker's token file gets a decodable placeholder without a restart
    /// (`StepKind::WriteTokenPlaceholder`).
    pub(super) token_placeholder: bool,
    /// The variables of `environment` to set in the host's /etc/environment
    /// (`StepKind::WriteHostEnvironment`).
    pub(super) etc_environment: Vec<String>,
}

impl HostPlan {
    /// The plan for host `idx` before a config diff or files are known.
    pub(super) fn new(idx: usize, decision: Decision, reasons: Vec<Reason>) -> Self {
        HostPlan {
            idx,
            decision,
            reasons,
            config_diff: None,
            files: Vec::new(),
            token_placeholder: false,
            etc_environment: Vec::new(),
        }
    }
}
