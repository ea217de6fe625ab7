//! SSH transport (openssh crate): ControlMaster sessions, host-key pinning, sudo, uploads.
//! Everything ssh-specific lives here; the rest of k0sform talks to hosts through
//! `crate::transport::Transport` (plus `upload_file_report`/`close_all` on `SshTransport`).

mod exec;
pub mod hostkey;
mod master;
mod session;
mod upload;

pub use crate::ssh_key::{PublicKey, fingerprint};
pub use hostkey::{BastionTrust, ConnectedBastion, ConnectedHost};
pub use session::{SshOptions, SshTransport};
pub use upload::Uploaded;
