//! SSH transport (openssh crate): ControlMaster sessions, host-key pinning, sudo, uploads; and
//! `localhost` hosts, whose commands run on this machine through the same paths (`local`).
//! Everything ssh-specific lives here; the rest of k0sform talks to hosts through
//! `crate::transport::Transport` (plus `upload_file_report`/`close_all` on `SshTransport`).

mod conn;
mod dispatch;
mod exec;
pub mod hostkey;
mod keys;
mod local;
mod master;
mod passphrase;
mod session;
mod upload;

pub use local::local_runs_as;
pub use session::{SshOptions, SshTransport};
pub use upload::Uploaded;

use crate::hostid::HostId;
use crate::transport::TransportError;

/// A `TransportError::Other` for `host`.
fn other(host: &HostId, message: impl Into<String>) -> TransportError {
    TransportError::Other {
        host: host.clone(),
        message: message.into(),
    }
}
