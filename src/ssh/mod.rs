//! SSH transport (openssh crate): ControlMaster sessions, host-key pinning, quoting, sudo, uploads.
//! Everything ssh-specific lives here; the rest of k0sform talks to hosts through
//! `crate::transport::Transport` (plus `connect`/`upload_file`/`close_all` on `SshTransport`).

mod exec;
pub mod hostkey;
mod master;
mod passphrase;
pub mod quote;
mod session;
mod upload;

pub use hostkey::{BastionTrust, ConnectedBastion, ConnectedHost, PublicKey, fingerprint};
pub use quote::quote;
pub use session::{SshOptions, SshTransport};
pub use upload::Uploaded;
