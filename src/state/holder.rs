//! Who holds the state lock: the record a lock carries (in the local lock file or the remote lock
//! key), which errors name and `force-unlock` takes the ID of.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::SystemTime;

/// Who holds a lock. Written as JSON into the lock file (local) or the lock record (remote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Lock ID (uuid), the argument `force-unlock` takes.
    pub id: String,
    pub pid: u32,
    pub host: String,
    pub user: String,
    /// The command holding the lock, e.g. `apply`, `state rm`.
    pub operation: String,
    /// RFC 3339 UTC.
    pub started_at: String,
}

impl LockHolder {
    /// Holder details of this process for `operation`, with a fresh lock ID.
    pub fn this_process(operation: &str) -> Self {
        LockHolder {
            id: uuid::Uuid::new_v4().to_string(),
            pid: std::process::id(),
            host: hostname(),
            user: username(),
            operation: operation.to_string(),
            started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        }
    }
}

/// The holder's text fields come from the lock file or a remote lock record, which anyone who can
/// write there may have filled in: shown escaped (`escape::escape`), so no terminal control in them
/// reaches the terminal through a lock or `force-unlock` message.
impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::escape::escape;
        write!(
            f,
            "pid {} on host {} (user {}), operation \"{}\" since {}, lock ID {}",
            self.pid,
            escape(&self.host),
            escape(&self.user),
            escape(&self.operation),
            escape(&self.started_at),
            escape(&self.id)
        )
    }
}

/// This machine's name, as a holder records it (the lock compares it to tell a local holder).
pub(super) fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

fn username() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Ok(u) = std::env::var(var)
            && !u.is_empty()
        {
            return u;
        }
    }
    // No login variables (cron, containers): fall back to the numeric uid.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|rest| rest.split_whitespace().next().map(|u| format!("uid {u}")))
        })
        .unwrap_or_else(|| "unknown".to_string())
}
