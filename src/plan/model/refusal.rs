//! Why no plan was made (`Refusal`, `RefusalKind`) and the exit code it means.

use serde::{Deserialize, Serialize};

/// Why no plan was made. Unsafe situations exit 3, an unreachable host exits 1.
#[derive(
    Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, schemars::JsonSchema,
)]
#[error("{message}")]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
    /// One line per host or fact behind the refusal (who sees what, the quorum arithmetic).
    pub details: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// Running controllers disagree on the cluster identity or membership.
    SplitBrain,
    /// The state names a cluster but none of its controllers answers.
    NoController,
    /// A membership change would leave fewer healthy members than quorum.
    Quorum,
    /// A host offered another SSH key than recorded, and nothing accepted it.
    HostKeyChanged,
    /// A host in the spec could not be reached.
    Unreachable,
    /// The cluster shows an identity k0sform did not record (e.g. another member ID at a
    /// recorded peer address): acting on it could remove the wrong member.
    UnknownIdentity,
    /// A host must install or upgrade k0s, and k0sform has no binary of the wanted version for
    /// it: no `k0sBinaryPath`, and the one on the host (if any) is another version. k0sform does
    /// not download k0s.
    NoK0sBinary,
    /// `-restore-from` where a cluster exists (in the state or on a host), or where the restored
    /// etcd member could not work.
    Restore,
    /// The spec's version is older than what a host runs, and `-allow-downgrade` was not given.
    Downgrade,
    /// A controller moved to an address that changes its etcd peer address: k0s has no command
    /// to change a member's peer URL, so it is left to the operator (steps in the details).
    PeerAddressChange,
    /// k0s runs on a host in another role than the spec gives it: k0sform does not turn a
    /// running host into another role (steps to do it by hand in the details).
    RoleChange,
    /// The spec would move a running controller between etcd and kine: k0s keeps the data where
    /// it was, and the cluster would start over empty.
    DatastoreSwitch,
}

impl RefusalKind {
    /// Exit 1 for what the operator fixes in the spec or the network; exit 3 for the unsafe.
    pub fn exit(self) -> crate::exit::Exit {
        match self {
            RefusalKind::Unreachable | RefusalKind::NoK0sBinary | RefusalKind::Downgrade => {
                crate::exit::Exit::Error
            }
            _ => crate::exit::Exit::Refused,
        }
    }
}

impl Refusal {
    pub fn exit(&self) -> crate::exit::Exit {
        self.kind.exit()
    }
    pub fn exit_code(&self) -> u8 {
        self.exit().code()
    }
}

#[cfg(test)]
mod tests {
    use super::RefusalKind::*;
    use crate::exit::Exit;

    /// DESIGN.md "Commands and exit codes" and README "Exit codes": 3 for what is unsafe to act
    /// on, 1 for what the operator fixes in the spec or the network (as an unreachable host, the
    /// design's decision table). A downgrade is fixed in the spec (or allowed with
    /// `-allow-downgrade`): exit 1, as README ("refused (exit 1, naming the hosts)") says.
    #[test]
    fn each_refusal_exits_as_documented() {
        for (kind, exit) in [
            (SplitBrain, Exit::Refused),
            (NoController, Exit::Refused),
            (Quorum, Exit::Refused),
            (HostKeyChanged, Exit::Refused),
            (UnknownIdentity, Exit::Refused),
            (Restore, Exit::Refused),
            (PeerAddressChange, Exit::Refused),
            (RoleChange, Exit::Refused),
            (DatastoreSwitch, Exit::Refused),
            (Unreachable, Exit::Error),
            (NoK0sBinary, Exit::Error),
            (Downgrade, Exit::Error),
        ] {
            assert_eq!(kind.exit(), exit, "{kind:?}");
        }
    }
}
