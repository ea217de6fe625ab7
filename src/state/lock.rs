//! The state lock: the backend-neutral `LockGuard` over a `LockHolder`, and the local
//! implementation, an OS file lock (flock) on `<state>.lock` with the holder's details inside.
//!
//! The OS releases a file lock when its holder exits, however it exits, so a lock left by a killed
//! process never blocks the next run: the stale holder text is simply overwritten. The lock file
//! is never deleted, because deleting a lock file lets two processes lock two different inodes.

use super::error::StateError;
use super::holder::{LockHolder, hostname};
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Releases a held lock. Each backend implements it; `LockGuard` calls it once.
pub trait LockRelease: Send {
    fn release(self: Box<Self>) -> Result<(), StateError>;
}

/// A held state lock. Dropping it releases the lock; `unlock` does the same and reports errors.
pub struct LockGuard {
    holder: LockHolder,
    release: Option<Box<dyn LockRelease>>,
}

impl LockGuard {
    pub fn new(holder: LockHolder, release: Box<dyn LockRelease>) -> Self {
        LockGuard {
            holder,
            release: Some(release),
        }
    }

    pub fn holder(&self) -> &LockHolder {
        &self.holder
    }

    /// The lock ID.
    pub fn id(&self) -> &str {
        &self.holder.id
    }

    /// Release now, reporting any error (dropping the guard releases silently).
    pub fn unlock(mut self) -> Result<(), StateError> {
        match self.release.take() {
            Some(r) => r.release(),
            None => Ok(()),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            // Nothing useful to do with an error here: the OS frees the lock at exit anyway.
            let _ = r.release();
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

/// How often a waiting writer retries the lock.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The local lock: flock on `<state>.lock`.
pub(crate) struct FileLock {
    file: File,
    path: PathBuf,
    /// Shared with the store so it can check that writes happen under the lock.
    held: Arc<AtomicBool>,
}

impl LockRelease for FileLock {
    fn release(self: Box<Self>) -> Result<(), StateError> {
        self.held.store(false, Ordering::SeqCst);
        // Clear the holder text while still holding the lock, so nobody reads a finished holder.
        let cleared = self.file.set_len(0).map_err(|source| StateError::Io {
            path: self.path.clone(),
            action: "clear lock file",
            source,
        });
        let unlocked = self.file.unlock().map_err(|source| StateError::Io {
            path: self.path.clone(),
            action: "unlock",
            source,
        });
        cleared.and(unlocked)
    }
}

/// Open the lock file without following a symlink at its path: whoever can write the state's
/// folder could otherwise make k0sform (often root) create, truncate or chmod the link's target.
/// A lock path that is not a plain file (a link, a FIFO, a folder) is refused.
fn open_lock_file(path: &Path) -> Result<File, StateError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| lock_open_error(path, source))?;
    check_plain_file(path, &file, "open lock file")?;
    // A lock file made by something else (or an older build) may be wider; holder details are
    // nobody else's business. Not our file to change when another user owns it: ignore failure.
    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    Ok(file)
}

/// `open` of a file k0sform never follows links to (the lock, the state file, its backup) failed:
/// an `O_NOFOLLOW` refusal says so in words rather than as "Too many levels of symbolic links".
pub(super) fn no_follow_error(
    path: &Path,
    action: &'static str,
    source: std::io::Error,
) -> StateError {
    let source = if source.raw_os_error() == Some(libc::ELOOP) {
        std::io::Error::other(
            "it is a symbolic link, which k0sform never follows; remove it or give the real path",
        )
    } else {
        source
    };
    StateError::Io {
        path: path.to_path_buf(),
        action,
        source,
    }
}

fn lock_open_error(path: &Path, source: std::io::Error) -> StateError {
    no_follow_error(path, "open lock file", source)
}

/// Refuse anything but a regular file at `path` (a FIFO, a device, a folder), opened for `action`.
pub(super) fn check_plain_file(
    path: &Path,
    file: &File,
    action: &'static str,
) -> Result<(), StateError> {
    let meta = file.metadata().map_err(|source| StateError::Io {
        path: path.to_path_buf(),
        action,
        source,
    })?;
    if meta.is_file() {
        return Ok(());
    }
    Err(StateError::Io {
        path: path.to_path_buf(),
        action,
        source: std::io::Error::other("not a regular file; remove it"),
    })
}

/// Read the holder recorded in a lock file; `None` when empty or unreadable.
pub(crate) fn read_holder(file: &mut File) -> Option<LockHolder> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// Read the holder of a lock someone else holds. The holder writes its details just after
/// taking the lock, so an empty file may only mean "not written yet": retry briefly.
fn read_other_holder(file: &mut File) -> Option<LockHolder> {
    for _ in 0..10 {
        if let Some(h) = read_holder(file) {
            return Some(h);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Take the lock at `path`, waiting up to `timeout`.
pub(crate) fn acquire(
    path: &Path,
    operation: &str,
    timeout: Duration,
    held: Arc<AtomicBool>,
) -> Result<LockGuard, StateError> {
    let mut file = open_lock_file(path)?;
    let deadline = Instant::now() + timeout;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(StateError::Locked {
                        lock_path: path.to_path_buf(),
                        holder: read_other_holder(&mut file).map(Box::new),
                    });
                }
                std::thread::sleep(POLL_INTERVAL.min(deadline - now));
            }
            Err(TryLockError::Error(source)) => {
                return Err(StateError::Io {
                    path: path.to_path_buf(),
                    action: "lock",
                    source,
                });
            }
        }
    }
    let holder = LockHolder::this_process(operation);
    // A killed holder's text may still be there: replace it.
    write_holder(&mut file, path, &holder)?;
    held.store(true, Ordering::SeqCst);
    Ok(LockGuard::new(
        holder,
        Box::new(FileLock {
            file,
            path: path.to_path_buf(),
            held,
        }),
    ))
}

fn write_holder(file: &mut File, path: &Path, holder: &LockHolder) -> Result<(), StateError> {
    let io = |action| {
        move |source| StateError::Io {
            path: path.to_path_buf(),
            action,
            source,
        }
    };
    let text = serde_json::to_string(holder).map_err(|source| StateError::Serialize {
        path: path.to_path_buf(),
        source,
    })?;
    file.set_len(0).map_err(io("truncate lock file"))?;
    file.seek(SeekFrom::Start(0))
        .map_err(io("write lock file"))?;
    file.write_all(format!("{text}\n").as_bytes())
        .map_err(io("write lock file"))?;
    file.flush().map_err(io("write lock file"))
}

/// What `force_unlock` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForceUnlockOutcome {
    /// Nobody holds the lock. `stale` is what a holder that died left behind in the lock file
    /// (now cleared), if anything.
    NotLocked { stale: Option<LockHolder> },
    /// A remote backend's lock was broken.
    Released { holder: LockHolder },
}

/// `force-unlock` for the local backend. A live flock cannot (and must not) be broken from
/// outside; a dead holder's flock is already gone. So this only clears stale holder text, and
/// refuses when the ID names a holder that is still alive.
pub(crate) fn force_unlock(path: &Path, id: &str) -> Result<ForceUnlockOutcome, StateError> {
    let mut file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(ForceUnlockOutcome::NotLocked { stale: None });
        }
        Err(source) => return Err(lock_open_error(path, source)),
    };
    check_plain_file(path, &file, "open lock file")?;
    match file.try_lock() {
        Ok(()) => {
            let stale = read_holder(&mut file);
            if let Some(h) = &stale
                && h.id != id
            {
                let _ = file.unlock();
                return Err(StateError::LockIdMismatch {
                    lock_path: path.to_path_buf(),
                    given: id.to_string(),
                    holder: stale.map(Box::new),
                });
            }
            let cleared = file.set_len(0).map_err(|source| StateError::Io {
                path: path.to_path_buf(),
                action: "clear lock file",
                source,
            });
            let _ = file.unlock();
            cleared?;
            Ok(ForceUnlockOutcome::NotLocked { stale })
        }
        Err(TryLockError::WouldBlock) => {
            let holder = read_other_holder(&mut file);
            match holder {
                Some(h) if h.id == id => {
                    let hint = if h.host == hostname() && !pid_alive(h.pid) {
                        format!(
                            ". Process {} no longer exists, yet the lock is held: another process \
                             inherited it; find it with `fuser {}`",
                            h.pid,
                            path.display()
                        )
                    } else {
                        format!(
                            " (pid {} on host {})",
                            h.pid,
                            crate::escape::escape(&h.host)
                        )
                    };
                    Err(StateError::LockHeldByLiveProcess {
                        lock_path: path.to_path_buf(),
                        holder: Box::new(h),
                        hint,
                    })
                }
                other => Err(StateError::LockIdMismatch {
                    lock_path: path.to_path_buf(),
                    given: id.to_string(),
                    holder: other.map(Box::new),
                }),
            }
        }
        Err(TryLockError::Error(source)) => Err(StateError::Io {
            path: path.to_path_buf(),
            action: "lock",
            source,
        }),
    }
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_in_same_process_is_refused_and_names_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.lock");
        let g = acquire(&path, "apply", Duration::ZERO, Arc::default()).unwrap();
        let err = acquire(&path, "plan", Duration::from_millis(250), Arc::default()).unwrap_err();
        match &err {
            StateError::Locked {
                holder: Some(h), ..
            } => assert_eq!(**h, *g.holder()),
            other => panic!("unexpected {other:?}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("\"apply\""), "{msg}");
        assert!(msg.contains(g.id()), "{msg}");
        g.unlock().unwrap();
        // Released: the text is cleared and the lock is free again.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        acquire(&path, "plan", Duration::ZERO, Arc::default()).unwrap();
    }

    #[test]
    fn force_unlock_refuses_a_live_holder_and_checks_the_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.lock");
        let g = acquire(&path, "apply", Duration::ZERO, Arc::default()).unwrap();
        let err = force_unlock(&path, g.id()).unwrap_err();
        assert!(
            matches!(err, StateError::LockHeldByLiveProcess { .. }),
            "{err}"
        );
        let err = force_unlock(&path, "not-the-id").unwrap_err();
        assert!(matches!(err, StateError::LockIdMismatch { .. }), "{err}");
        drop(g);
        assert_eq!(
            force_unlock(&path, "anything").unwrap(),
            ForceUnlockOutcome::NotLocked { stale: None }
        );
    }
}
