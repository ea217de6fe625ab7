//! SSH transport (openssh crate): ControlMaster sessions, host-key pinning, quoting, sudo, uploads.
//! Everything ssh-specific lives here; the rest of k0sform talks to hosts through
//! `crate::transport::Transport` (plus `connect`/`upload_file`/`close_all` on `SshTransport`).

pub mod hostkey;
pub mod quote;
mod session;

pub use hostkey::fingerprint;
pub use quote::quote;
pub use session::{ConnectedHost, SshOptions, SshTransport, Uploaded};
