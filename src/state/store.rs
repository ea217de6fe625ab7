//! Where the state lives: the backend-neutral `StateStore` trait and `LocalStore`, the state file
//! on disk. Every byte of the state file is written here, and only by replacing the whole file
//! (temp file, fsync, rename, directory fsync), so a crash leaves the old or the new version.

use super::error::StateError;
use super::lock::{self, ForceUnlockOutcome, LockGuard};
use super::model::{FORMAT_VERSION, State};
use std::fs::{File, Permissions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod check;

pub use check::parse;

/// A place that keeps the state. The local file is one; remote backends (etcd) come later.
pub trait StateStore: Send {
    /// Where the state is, for messages (a path, a URL).
    fn location(&self) -> String;

    /// Refuse states of any other lineage from now on (e.g. when applying a saved plan).
    fn expect_lineage(&mut self, lineage: &str);

    /// The current state; `None` when there is none yet. A state that cannot be read is an
    /// error, and writes are refused afterwards.
    fn load(&mut self) -> Result<Option<State>, StateError>;

    /// Save `state` under the lock. Its `serial` is ignored: the store sets it, growing by one
    /// only when the content changed since the stored version; an unchanged state is not written.
    fn write(&mut self, state: &State) -> Result<WriteOutcome, StateError>;

    /// Take the lock for `operation`, waiting up to `timeout`.
    fn lock(&self, operation: &str, timeout: Duration) -> Result<LockGuard, StateError>;

    /// Break the lock with this ID, where the backend allows it. Remote backends (whose locks
    /// outlive a dead holder) release it. The local backend never breaks a lock: its OS file lock
    /// is freed the moment the holder exits, even when killed, so a held lock always has a live
    /// holder (refused, `LockHeldByLiveProcess`); a free lock only has its stale holder record
    /// cleared (`NotLocked`). An ID that is not the recorded holder's is `LockIdMismatch`.
    fn force_unlock(&self, id: &str) -> Result<ForceUnlockOutcome, StateError>;

    /// `state push`: store `state` as it is, its serial kept, under the lock (see `decide_push`
    /// for what is refused without `force`).
    fn push(&mut self, state: &State, force: bool) -> Result<WriteOutcome, StateError>;

    /// The kept version with this serial (`state pull -serial N`): the current one or a previous
    /// one (the local backend keeps one, `<state>.backup`; etcd keeps the last 10).
    fn load_serial(&mut self, serial: u64) -> Result<State, StateError>;

    /// Where the previous versions are kept, for messages.
    fn history_hint(&self) -> String;
}

/// What `push` does with a state it was given.
pub(super) enum PushDecision {
    /// The store already holds exactly this.
    Unchanged { serial: u64 },
    /// Store this (normalized; its serial is the pushed one unless forced over a newer one).
    Write(Box<State>),
}

/// The rules of `state push`, the same for every backend: refuse another lineage, an older
/// serial, or the same serial with other content, unless `force`. A forced push over a stored
/// serial that is not older gets that serial + 1, so saved plans made against the stored state go
/// stale rather than apply to the pushed one.
pub(super) fn decide_push(
    location: &str,
    current: Option<&State>,
    pushed: &State,
    force: bool,
) -> Result<PushDecision, StateError> {
    let refuse = |detail: String| {
        Err(StateError::PushRefused {
            location: location.to_string(),
            detail,
        })
    };
    let mut next = pushed.clone();
    next.format_version = FORMAT_VERSION;
    next.sort();
    if let Some(cur) = current {
        if next == *cur {
            return Ok(PushDecision::Unchanged { serial: cur.serial });
        }
        if !force {
            if cur.lineage != pushed.lineage {
                return refuse(format!(
                    "it holds lineage {}, the pushed state has lineage {} (another cluster's state)",
                    cur.lineage, pushed.lineage
                ));
            }
            if pushed.serial < cur.serial {
                return refuse(format!(
                    "it is at serial {}, the pushed state has the older serial {}",
                    cur.serial, pushed.serial
                ));
            }
            if pushed.serial == cur.serial {
                return refuse(format!(
                    "it is at serial {} with other content than the pushed state of the same serial",
                    cur.serial
                ));
            }
        }
        if next.serial <= cur.serial {
            next.serial = cur.serial + 1;
        }
    }
    if let Some((field, what)) = find_secret(&next) {
        return Err(StateError::SecretRefused {
            path: PathBuf::from(location),
            field,
            what,
        });
    }
    Ok(PushDecision::Write(Box::new(next)))
}

/// "serials 3, 4" or "no versions", for `NoSuchSerial`.
pub(super) fn describe_kept(serials: &[u64]) -> String {
    if serials.is_empty() {
        return "no versions are kept".to_string();
    }
    let list: Vec<String> = serials.iter().map(u64::to_string).collect();
    format!("kept serials: {}", list.join(", "))
}

/// What `write` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Same content as stored: nothing was touched.
    Unchanged { serial: u64 },
    /// A new version was written with this serial.
    Written { serial: u64 },
}

impl WriteOutcome {
    /// The serial of the stored state after the write.
    pub fn serial(self) -> u64 {
        match self {
            WriteOutcome::Unchanged { serial } | WriteOutcome::Written { serial } => serial,
        }
    }
}

/// The points inside a local write, in order. A crash between any two leaves the old state file
/// (before `Renamed`) or the new one (from `Renamed` on). Observable through
/// `LocalStore::observe_write_stages` so tests can stop a writer at each point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteStage {
    /// The new content is in the temp file, not yet synced.
    TempWritten,
    /// The temp file is synced to disk.
    TempSynced,
    /// The previous version is in `<state>.backup`.
    BackupWritten,
    /// The temp file has replaced the state file.
    Renamed,
    /// The directory is synced: the rename is durable.
    DirSynced,
}

impl WriteStage {
    pub const ALL: [WriteStage; 5] = [
        WriteStage::TempWritten,
        WriteStage::TempSynced,
        WriteStage::BackupWritten,
        WriteStage::Renamed,
        WriteStage::DirSynced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WriteStage::TempWritten => "temp-written",
            WriteStage::TempSynced => "temp-synced",
            WriteStage::BackupWritten => "backup-written",
            WriteStage::Renamed => "renamed",
            WriteStage::DirSynced => "dir-synced",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

type StageObserver = Box<dyn FnMut(WriteStage) + Send>;

/// The version a write stores: normalized (format, tool version, sorted hosts) with the serial
/// one past the current one; `None` when its content equals the current version (nothing to write).
pub(super) fn next_version(state: &State, current: Option<&State>) -> Option<State> {
    let mut next = state.clone();
    next.format_version = FORMAT_VERSION;
    next.tool_version = env!("CARGO_PKG_VERSION").to_string();
    next.sort();
    if let Some(cur) = current {
        next.serial = cur.serial;
        if next == *cur {
            return None;
        }
    }
    next.serial = current.map_or(state.serial, |c| c.serial) + 1;
    Some(next)
}

/// The state as a local file, `<state>.backup` beside it and the lock on `<state>.lock`.
pub struct LocalStore {
    path: PathBuf,
    expected_lineage: Option<String>,
    /// Serial of the version last loaded or written, to notice writes by others.
    base_serial: Option<u64>,
    /// Set when a load failed: the file is bad and must not be overwritten.
    refused: Option<String>,
    /// True while a `LockGuard` from this store is alive.
    lock_held: Arc<AtomicBool>,
    observer: Option<StageObserver>,
}

impl LocalStore {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        LocalStore {
            path: path.into(),
            expected_lineage: None,
            base_serial: None,
            refused: None,
            lock_held: Arc::default(),
            observer: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `<state>.backup`: the version before the last write.
    pub fn backup_path(&self) -> PathBuf {
        sibling(&self.path, ".backup")
    }

    /// `<state>.lock`.
    pub fn lock_path(&self) -> PathBuf {
        sibling(&self.path, ".lock")
    }

    /// `read_current` for a write: refused unless this process holds the lock.
    fn read_current_locked(&self) -> Result<Option<Vec<u8>>, StateError> {
        if !self.lock_held.load(Ordering::SeqCst) {
            return Err(StateError::NotLocked {
                path: self.path.clone(),
                lock_path: self.lock_path(),
            });
        }
        self.read_current()
    }

    /// The stored bytes, `None` when there is no state file yet.
    fn read_current(&self) -> Result<Option<Vec<u8>>, StateError> {
        read_no_follow(&self.path)
    }

    /// Call `observer` at each point of every write (crash tests stop the writer there).
    pub fn observe_write_stages(&mut self, observer: impl FnMut(WriteStage) + Send + 'static) {
        self.observer = Some(Box::new(observer));
    }

    fn stage(&mut self, stage: WriteStage) {
        if let Some(o) = self.observer.as_mut() {
            o(stage);
        }
    }

    fn io(&self, action: &'static str) -> impl FnOnce(std::io::Error) -> StateError + '_ {
        move |source| StateError::Io {
            path: self.path.clone(),
            action,
            source,
        }
    }

    /// Read and check the file, without touching the store's bookkeeping.
    fn read(&self) -> Result<Option<State>, StateError> {
        let Some(bytes) = self.read_current()? else {
            return Ok(None);
        };
        let state = parse(&self.path, &bytes)?;
        if let Some(expected) = &self.expected_lineage
            && &state.lineage != expected
        {
            return Err(StateError::LineageMismatch {
                path: self.path.clone(),
                found: state.lineage,
                expected: expected.clone(),
            });
        }
        Ok(Some(state))
    }

    /// Temp files of writers that died mid-write. Only called under the lock, when no other
    /// writer can be between creating and renaming one.
    fn remove_leftover_temp_files(&self) {
        let (Some(dir), Some(prefix)) = (self.dir(), temp_prefix(&self.path)) else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if is_own_temp_file(&name.to_string_lossy(), &prefix) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    fn dir(&self) -> Option<&Path> {
        match self.path.parent() {
            Some(p) if p.as_os_str().is_empty() => Some(Path::new(".")),
            other => other,
        }
    }

    fn check_before_write(&self, state: &State, current: Option<&State>) -> Result<(), StateError> {
        if let Some(expected) = &self.expected_lineage
            && &state.lineage != expected
        {
            return Err(StateError::LineageMismatch {
                path: self.path.clone(),
                found: state.lineage.clone(),
                expected: expected.clone(),
            });
        }
        match (current, self.base_serial) {
            (Some(cur), _) if cur.lineage != state.lineage => Err(StateError::LineageMismatch {
                path: self.path.clone(),
                found: cur.lineage.clone(),
                expected: state.lineage.clone(),
            }),
            (Some(cur), Some(base)) if cur.serial != base => Err(StateError::Conflict {
                path: self.path.clone(),
                detail: format!("serial is now {}, was {base}", cur.serial),
            }),
            // Never loaded through this store: the caller's copy must be the stored version.
            (Some(cur), None) if cur.serial != state.serial => Err(StateError::Conflict {
                path: self.path.clone(),
                detail: format!(
                    "stored serial is {}, the state being written was read at serial {}",
                    cur.serial, state.serial
                ),
            }),
            (None, Some(base)) => Err(StateError::Conflict {
                path: self.path.clone(),
                detail: format!("the file was removed; it was at serial {base}"),
            }),
            _ => Ok(()),
        }
    }

    /// Keep the current file as `<state>.backup`, replacing the old backup in one rename.
    /// A hard link costs nothing and is exact; where links are not possible, copy `current`.
    fn write_backup(&self, current: &[u8]) -> Result<(), StateError> {
        let backup = self.backup_path();
        let dir = self.dir().unwrap_or(Path::new("."));
        let prefix = temp_prefix(&self.path).unwrap_or_else(|| ".k0sform-state.".into());
        let link = dir.join(format!(
            "{prefix}{}{TEMP_SUFFIX}",
            uuid::Uuid::new_v4().simple()
        ));
        let staged = match std::fs::hard_link(&self.path, &link) {
            Ok(()) => {
                // The link shares the current file's inode: tightening it also tightens the
                // state file, which the rename is about to replace anyway.
                let _ = std::fs::set_permissions(&link, Permissions::from_mode(0o600));
                link
            }
            Err(_) => {
                let mut tmp = tempfile::Builder::new()
                    .prefix(&prefix)
                    .suffix(TEMP_SUFFIX)
                    .permissions(Permissions::from_mode(0o600))
                    .tempfile_in(dir)
                    .map_err(|source| StateError::Io {
                        path: backup.clone(),
                        action: "create backup",
                        source,
                    })?;
                tmp.write_all(current)
                    .and_then(|()| tmp.as_file().sync_all())
                    .map_err(|source| StateError::Io {
                        path: backup.clone(),
                        action: "write backup",
                        source,
                    })?;
                tmp.into_temp_path().keep().map_err(|e| StateError::Io {
                    path: backup.clone(),
                    action: "write backup",
                    source: e.error,
                })?
            }
        };
        std::fs::rename(&staged, &backup).map_err(|source| {
            let _ = std::fs::remove_file(&staged);
            StateError::Io {
                path: backup.clone(),
                action: "replace backup",
                source,
            }
        })?;
        // A writer killed between this rename and its own leaves the backup a second name of
        // the state file's inode; the next link is a third, and rename(2) of a name onto another
        // name of its own inode succeeds without doing anything: the link stays behind.
        match std::fs::remove_file(&staged) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r.map_err(|source| StateError::Io {
                path: staged,
                action: "remove backup link",
                source,
            }),
        }
    }
}

const TEMP_SUFFIX: &str = ".tmp";

/// Temp files are named `.<state file name>.<random>.tmp` in the state's own directory, so the
/// rename never crosses a filesystem.
fn temp_prefix(path: &Path) -> Option<String> {
    path.file_name()
        .map(|n| format!(".{}.", n.to_string_lossy()))
}

/// `.<name>.<random>.tmp` exactly: the random part has no dot, so the temp files of a state
/// named `<name>.other` in the same folder are not mistaken for ours.
fn is_own_temp_file(file_name: &str, prefix: &str) -> bool {
    file_name
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(TEMP_SUFFIX))
        .is_some_and(|random| {
            !random.is_empty() && random.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// The bytes of a state file (or its backup), `None` when there is none. A symbolic link at the
/// path is refused, never followed (`O_NOFOLLOW`, as the lock is opened): whoever can write the
/// state's folder could otherwise make k0sform read another file as its state (and keep it as the
/// backup of its next write). Anything but a regular file is refused too (a FIFO would block).
fn read_no_follow(path: &Path) -> Result<Option<Vec<u8>>, StateError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    const ACTION: &str = "read state file";
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(lock::no_follow_error(path, ACTION, source)),
    };
    lock::check_plain_file(path, &file, ACTION)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|source| StateError::Io {
            path: path.to_path_buf(),
            action: ACTION,
            source,
        })?;
    Ok(Some(bytes))
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Strings that must never reach the state: k0s join tokens are base64 of a gzipped kubeconfig
/// (`H4sI…`); private keys and kubeconfig credentials have well-known markers.
pub(super) fn find_secret(state: &State) -> Option<(String, &'static str)> {
    fn walk(v: &serde_json::Value, at: &str, out: &mut Option<(String, &'static str)>) {
        if out.is_some() {
            return;
        }
        match v {
            serde_json::Value::String(s) => {
                let what = if s.starts_with("H4sI") {
                    Some("a k0s join token (base64 gzip)")
                } else if s.contains("PRIVATE KEY") {
                    Some("a private key")
                } else if s.contains("client-key-data") || s.contains("token:") {
                    Some("kubeconfig credentials")
                } else {
                    None
                };
                if let Some(w) = what {
                    *out = Some((at.to_string(), w));
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}[{i}]"), out);
                }
            }
            serde_json::Value::Object(o) => {
                for (k, x) in o {
                    walk(x, &format!("{at}.{k}"), out);
                }
            }
            _ => {}
        }
    }
    let value = serde_json::to_value(state).ok()?;
    let mut found = None;
    walk(&value, "state", &mut found);
    found
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl StateStore for LocalStore {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn expect_lineage(&mut self, lineage: &str) {
        self.expected_lineage = Some(lineage.to_string());
    }

    fn load(&mut self) -> Result<Option<State>, StateError> {
        match self.read() {
            Ok(state) => {
                self.base_serial = state.as_ref().map(|s| s.serial);
                Ok(state)
            }
            Err(e) => {
                self.refused = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn write(&mut self, state: &State) -> Result<WriteOutcome, StateError> {
        if let Some(reason) = &self.refused {
            return Err(StateError::WriteRefused {
                path: self.path.clone(),
                reason: reason.clone(),
            });
        }
        let current_bytes = self.read_current_locked()?;
        let current = match &current_bytes {
            Some(b) => Some(parse(&self.path, b).inspect_err(|e| {
                self.refused = Some(e.to_string());
            })?),
            None => None,
        };
        self.check_before_write(state, current.as_ref())?;

        let Some(next) = next_version(state, current.as_ref()) else {
            let serial = current.as_ref().map_or(state.serial, |c| c.serial);
            self.base_serial = Some(serial);
            return Ok(WriteOutcome::Unchanged { serial });
        };
        if let Some((field, what)) = find_secret(&next) {
            return Err(StateError::SecretRefused {
                path: self.path.clone(),
                field,
                what,
            });
        }
        self.replace(&next, current_bytes.as_deref())
    }

    fn lock(&self, operation: &str, timeout: Duration) -> Result<LockGuard, StateError> {
        lock::acquire(
            &self.lock_path(),
            operation,
            timeout,
            Arc::clone(&self.lock_held),
        )
    }

    fn force_unlock(&self, id: &str) -> Result<ForceUnlockOutcome, StateError> {
        lock::force_unlock(&self.lock_path(), id)
    }

    fn push(&mut self, state: &State, force: bool) -> Result<WriteOutcome, StateError> {
        let current_bytes = self.read_current_locked()?;
        // A file that cannot be read is only replaced when forced (it is kept as the backup).
        let current = match &current_bytes {
            Some(b) => match parse(&self.path, b) {
                Ok(s) => Some(s),
                Err(_) if force => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        match decide_push(&self.location(), current.as_ref(), state, force)? {
            PushDecision::Unchanged { serial } => {
                self.base_serial = Some(serial);
                Ok(WriteOutcome::Unchanged { serial })
            }
            PushDecision::Write(next) => {
                self.refused = None;
                self.replace(&next, current_bytes.as_deref())
            }
        }
    }

    fn load_serial(&mut self, serial: u64) -> Result<State, StateError> {
        let mut kept = Vec::new();
        for p in [self.path.clone(), self.backup_path()] {
            if let Some(b) = read_no_follow(&p)? {
                let s = parse(&p, &b)?;
                if s.serial == serial {
                    return Ok(s);
                }
                kept.push(s.serial);
            }
        }
        kept.sort_unstable();
        Err(StateError::NoSuchSerial {
            location: self.location(),
            serial,
            kept: describe_kept(&kept),
        })
    }

    fn history_hint(&self) -> String {
        self.backup_path().display().to_string()
    }
}

impl LocalStore {
    /// Replace the file with `next` (serial already set): temp file, fsync, backup of
    /// `current_bytes`, rename, directory fsync.
    fn replace(
        &mut self,
        next: &State,
        current_bytes: Option<&[u8]>,
    ) -> Result<WriteOutcome, StateError> {
        let text = next
            .to_canonical_json()
            .map_err(|source| StateError::Serialize {
                path: self.path.clone(),
                source,
            })?;

        self.remove_leftover_temp_files();
        let dir = self.dir().unwrap_or(Path::new(".")).to_path_buf();
        let prefix = temp_prefix(&self.path).unwrap_or_else(|| ".k0sform-state.".into());
        // Created 0600, a mode the renamed state file keeps.
        let mut tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(TEMP_SUFFIX)
            .permissions(Permissions::from_mode(0o600))
            .tempfile_in(&dir)
            .map_err(self.io("create a temp file beside state file"))?;
        tmp.write_all(text.as_bytes())
            .map_err(self.io("write temp file for state file"))?;
        self.stage(WriteStage::TempWritten);
        tmp.as_file()
            .sync_all()
            .map_err(self.io("fsync temp file for state file"))?;
        self.stage(WriteStage::TempSynced);
        if let Some(bytes) = current_bytes {
            self.write_backup(bytes)?;
            self.stage(WriteStage::BackupWritten);
        }
        tmp.persist(&self.path).map_err(|e| StateError::Io {
            path: self.path.clone(),
            action: "rename temp file over state file",
            source: e.error,
        })?;
        self.stage(WriteStage::Renamed);
        // The rename is durable only once the directory entry is.
        sync_dir(&dir).map_err(|source| StateError::Io {
            path: dir.clone(),
            action: "fsync directory",
            source,
        })?;
        self.stage(WriteStage::DirSynced);
        self.base_serial = Some(next.serial);
        Ok(WriteOutcome::Written {
            serial: next.serial,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_own_temp_files_are_swept() {
        let prefix = temp_prefix(Path::new("dir/a.json")).unwrap();
        assert_eq!(prefix, ".a.json.");
        assert!(is_own_temp_file(".a.json.Xy12Ab.tmp", &prefix));
        assert!(is_own_temp_file(
            ".a.json.0f1e2d3c4b5a69788796a5b4c3d2e1f0.tmp",
            &prefix
        ));
        assert!(
            !is_own_temp_file(".a.json.x.Xy12Ab.tmp", &prefix),
            "state a.json.x"
        );
        assert!(!is_own_temp_file(".a.json..tmp", &prefix));
        assert!(!is_own_temp_file("a.json", &prefix));
        assert!(!is_own_temp_file(".a.json.Xy12Ab.tmp.keep", &prefix));
    }
}
