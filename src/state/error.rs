//! Everything that can go wrong reading, writing or locking the state. Every message names the
//! file (or lock) involved, because the user has to go and look at it.

use super::holder::LockHolder;
use crate::exit::Exit;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        path: PathBuf,
        /// What was being done, e.g. "read state file", "fsync directory".
        action: &'static str,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "state file {} is truncated ({detail}); it was not written completely. \
         The previous version may be in {}.backup",
        path.display(), path.display()
    )]
    Truncated { path: PathBuf, detail: String },

    #[error("state file {} is not JSON: {detail}", path.display())]
    NotJson { path: PathBuf, detail: String },

    #[error("state file {} is not a valid k0sform state: {detail}", path.display())]
    Invalid { path: PathBuf, detail: String },

    #[error(
        "state file {} has format_version {found}, newer than this k0sform understands \
         (up to {supported}); upgrade k0sform. The file was left untouched",
        path.display()
    )]
    NewerFormat {
        path: PathBuf,
        found: u64,
        supported: u32,
    },

    #[error(
        "state file {} belongs to lineage {found}, but lineage {expected} was expected; \
         it is another cluster's state and will not be overwritten",
        path.display()
    )]
    LineageMismatch {
        path: PathBuf,
        found: String,
        expected: String,
    },

    #[error(
        "state file {} changed since it was read ({detail}); another process wrote it. \
         Run again to work from the current state",
        path.display()
    )]
    Conflict { path: PathBuf, detail: String },

    #[error(
        "refusing to write state file {}: it could not be read earlier ({reason}); \
         fix or move the file first",
        path.display()
    )]
    WriteRefused { path: PathBuf, reason: String },

    #[error(
        "refusing to write state file {}: {field} looks like a secret ({what}); \
         the state never holds secrets",
        path.display()
    )]
    SecretRefused {
        path: PathBuf,
        field: String,
        what: &'static str,
    },

    #[error(
        "internal error: state file {} written without holding its lock {}",
        path.display(), lock_path.display()
    )]
    NotLocked { path: PathBuf, lock_path: PathBuf },

    #[error(
        "the state is locked, held by {} (lock file {}). Retry when it has finished, \
         or wait for it with -lock-timeout DURATION",
        describe_holder(holder.as_deref()), lock_path.display()
    )]
    Locked {
        lock_path: PathBuf,
        /// `None` when the lock file held no readable holder information.
        holder: Option<Box<LockHolder>>,
    },

    #[error(
        "lock ID {given} does not match the lock on {}, held by {}",
        lock_path.display(), describe_holder(holder.as_deref())
    )]
    LockIdMismatch {
        lock_path: PathBuf,
        given: String,
        holder: Option<Box<LockHolder>>,
    },

    #[error(
        "will not break the lock on {}: it is held by a live process, {}. \
         A local lock is an OS file lock that is freed the moment its holder exits, even when \
         killed; stop that process instead{hint}",
        lock_path.display(), describe_holder(Some(&**holder))
    )]
    LockHeldByLiveProcess {
        lock_path: PathBuf,
        holder: Box<LockHolder>,
        /// Extra advice, e.g. when the recorded pid is gone but the lock is still held.
        hint: String,
    },

    #[error("cannot {action} the state at {location}: {detail}")]
    Remote {
        location: String,
        /// What was being done, e.g. "read", "take the lock on".
        action: &'static str,
        detail: String,
    },

    #[error(
        "cannot use the state at {location}: this k0sform was built without the etcd state \
         backend (cargo feature `etcd-state`). Build one with it: `cargo install --locked --path .` \
         (the feature is on by default) or add `--features etcd-state` to a build with \
         --no-default-features; or use a state file"
    )]
    NoEtcdBackend { location: String },

    #[error(
        "the state lock on {location} was lost ({detail}); nothing was written. Another run may \
         hold the lock now: check the state, then run again"
    )]
    LockLost { location: String, detail: String },

    #[error("refusing to push to {location}: {detail}; use -force to overwrite it anyway")]
    PushRefused { location: String, detail: String },

    #[error("the state at {location} keeps no version with serial {serial} ({kept})")]
    NoSuchSerial {
        location: String,
        serial: u64,
        /// What is kept, e.g. "serials 3 to 12".
        kept: String,
    },

    #[error("cannot serialize the state for {}: {source}", path.display())]
    Serialize {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl StateError {
    /// The exit status this error ends the process with.
    pub fn exit(&self) -> Exit {
        match self {
            StateError::Locked { .. } | StateError::LockHeldByLiveProcess { .. } => Exit::Locked,
            _ => Exit::Error,
        }
    }
}

fn describe_holder(holder: Option<&LockHolder>) -> String {
    match holder {
        Some(h) => h.to_string(),
        None => "a process that recorded no holder information".to_string(),
    }
}
