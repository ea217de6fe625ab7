//! The encrypted keys of a run (`passphrase`): what `SshTransport` holds of them.

use std::path::PathBuf;

/// The encrypted keys of a run: one unlock at a time (`work`), and what masters read
/// (`added`) without waiting for a prompt in progress.
#[derive(Default)]
pub(super) struct Keys {
    pub(super) work: tokio::sync::Mutex<KeyWork>,
    /// Keys in the private agent, with its socket: their masters are pointed at it.
    pub(super) added: std::sync::Mutex<Vec<(PathBuf, PathBuf)>>,
}

#[derive(Default)]
pub(super) struct KeyWork {
    pub(super) agent: Option<(PathBuf, tokio::process::Child)>,
    /// Encrypted keys the user's agent holds, left to it (as ssh does).
    pub(super) in_user_agent: Vec<PathBuf>,
    /// Keys that could not be unlocked, with why: not asked for again in this run.
    pub(super) failed: Vec<(PathBuf, String)>,
}
