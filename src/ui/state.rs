//! The state as `state list`, `state show` and `show` print it, and what `state rm|mv|push`
//! and `force-unlock` did: for people, every value a state file holds shown escaped.

use crate::escape::escape;
use crate::ops::state::{Moved, Pushed, Removed, Unlocked};
use crate::state::{ForceUnlockOutcome, HostState, State, WriteOutcome};
use std::fmt::Write as _;
use std::path::Path;

/// One line per host under a header; columns padded so they line up.
pub fn list(state: &State) -> String {
    if state.hosts.is_empty() {
        return "No hosts in state.\n".to_string();
    }
    let header = ["ADDRESS", "ROLE", "NODE", "MACHINE-ID", "MEMBER-ID"].map(String::from);
    let mut rows = vec![header];
    for h in &state.hosts {
        // A state file is anyone's to edit: what it says is shown escaped.
        rows.push(
            [
                h.id().to_string(),
                h.role.to_string(),
                h.node_name.clone().unwrap_or_else(|| "-".into()),
                short(&h.machine_id).to_string(),
                h.etcd
                    .as_ref()
                    .map_or_else(|| "-".into(), |e| e.member_id.clone()),
            ]
            .map(|c| escape(&c).into_owned()),
        );
    }
    let mut widths = [0usize; 5];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if !state.bastions.is_empty() {
        out.push_str("\nBASTION  HOST KEY\n");
        for b in &state.bastions {
            let _ = writeln!(
                out,
                "{}  {}",
                escape(&b.id().to_string()),
                escape(&b.host_key)
            );
        }
    }
    out
}

/// Machine IDs are 32 hex digits; 12 tell hosts apart, like short git hashes.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// Every recorded field of one host, then the intents that concern it.
pub fn host(state: &State, h: &HostState) -> String {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut fields: Vec<(&str, String)> = vec![
        ("address", h.address.clone()),
        ("port", h.port.to_string()),
        ("role", h.role.to_string()),
        ("node name", opt(&h.node_name)),
        ("machine-id", h.machine_id.clone()),
        ("host key", h.host_key.clone()),
        ("host public key", opt(&h.host_public_key)),
    ];
    match &h.etcd {
        Some(e) => {
            fields.push(("etcd member ID", e.member_id.clone()));
            fields.push(("etcd peer URL", e.peer_url.clone()));
        }
        None => fields.push(("etcd member", "-".into())),
    }
    fields.push((
        "k0s version",
        opt(&h.k0s_version.as_ref().map(ToString::to_string)),
    ));
    fields.push(("install flags sha256", opt(&h.install_flags_sha256)));
    fields.push(("config sha256", opt(&h.config_sha256)));
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (k, v) in fields {
        let _ = writeln!(out, "{:<width$} {}", format!("{k}:"), escape(&v));
    }
    let intents: Vec<_> = state
        .intents
        .iter()
        .filter(|i| i.address == h.address && i.port == h.port)
        .collect();
    if !intents.is_empty() {
        out.push_str("unfinished steps:\n");
        for i in intents {
            let line = format!("{} ({}), started {}", i.step, i.kind, i.started_at);
            let _ = writeln!(out, "  {}", escape(&line));
        }
    }
    out
}

/// `state rm`: what was removed, and where the previous version is kept.
pub fn removed(r: &Removed) -> String {
    let w = &r.written;
    let mut out = format!(
        "Removed host {} from the state (serial {} -> {}). The previous version is kept in {}.\n",
        r.id, w.before, w.after, w.history
    );
    if r.unfinished_steps {
        out.push_str(
            "Note: the state still records unfinished steps for this host (see `state pull`).\n",
        );
    }
    out
}

/// `state mv`: from where to where, and the etcd peer URL still recorded for the host.
pub fn moved(m: &Moved) -> String {
    let w = &m.written;
    let mut out = format!(
        "Moved host {} to {} in the state (serial {} -> {}). The previous version is kept in {}.\n",
        m.from, m.to, w.before, w.after, w.history
    );
    if let Some(p) = &m.peer_url {
        let _ = writeln!(
            out,
            "Note: its etcd peer URL is still recorded as {}; `apply` records the one the cluster shows.",
            escape(p)
        );
    }
    out
}

/// `state push`: what the store at `location` did with `file`.
pub fn pushed(p: &Pushed, file: &Path, location: &str) -> String {
    let lineage = &p.state.lineage;
    match p.outcome {
        WriteOutcome::Unchanged { serial } => format!(
            "{location} already holds this state (lineage {lineage}, serial {serial}); nothing written.\n"
        ),
        WriteOutcome::Written { serial } => format!(
            "Pushed {} to {location}: lineage {lineage}, serial {serial}.\n",
            escape(&file.display().to_string())
        ),
    }
}

/// `force-unlock`: the lock released, or why there was none to break (for a local state, why
/// there never is).
pub fn unlocked(u: &Unlocked) -> String {
    match &u.outcome {
        ForceUnlockOutcome::NotLocked { stale } => {
            let mut out = match stale {
                // What a lock file says is anyone's to write: shown escaped.
                Some(h) => format!(
                    "The state is not locked: lock {} was left by pid {} on {} ({}, since {}), \
                     and the OS released it when that process ended. Cleared its record.\n",
                    escape(&h.id),
                    h.pid,
                    escape(&h.host),
                    escape(&h.operation),
                    escape(&h.started_at)
                ),
                None => "The state is not locked; nothing to unlock.\n".to_string(),
            };
            if let Some(lock) = &u.local_lock {
                let _ = writeln!(
                    out,
                    "Local state locks are OS file locks on {}: they are freed automatically when \
                     the holding process exits, even when it is killed. force-unlock is needed \
                     only for remote state backends.",
                    escape(&lock.display().to_string())
                );
            }
            out
        }
        ForceUnlockOutcome::Released { holder } => {
            format!("Lock {} released ({holder}).\n", escape(&holder.id))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LockHolder;

    fn holder() -> LockHolder {
        LockHolder {
            id: "id\u{1b}1".into(),
            pid: 7,
            host: "h\u{202e}".into(),
            user: "u".into(),
            operation: "apply".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
        }
    }

    /// The texts `force-unlock` printed before it was an operation, byte for byte, holder
    /// fields escaped.
    #[test]
    fn force_unlock_texts() {
        let local = Some(std::path::PathBuf::from("s.json.lock"));
        let note = "Local state locks are OS file locks on s.json.lock: they are freed \
                    automatically when the holding process exits, even when it is killed. \
                    force-unlock is needed only for remote state backends.\n";
        let not_locked = |stale, local_lock| Unlocked {
            outcome: ForceUnlockOutcome::NotLocked { stale },
            local_lock,
        };
        assert_eq!(
            unlocked(&not_locked(None, local.clone())),
            format!("The state is not locked; nothing to unlock.\n{note}")
        );
        assert_eq!(
            unlocked(&not_locked(Some(holder()), None)),
            "The state is not locked: lock id\\x1b1 was left by pid 7 on h\\u{202e} (apply, since \
             2026-01-01T00:00:00Z), and the OS released it when that process ended. Cleared its \
             record.\n"
        );
        let released = Unlocked {
            outcome: ForceUnlockOutcome::Released { holder: holder() },
            local_lock: local,
        };
        assert_eq!(
            unlocked(&released),
            "Lock id\\x1b1 released (pid 7 on host h\\u{202e} (user u), operation \"apply\" since \
             2026-01-01T00:00:00Z, lock ID id\\x1b1).\n"
        );
    }

    /// The lock file's path is the user's `-state` plus `.lock`: a path with control
    /// characters in it is shown escaped, never sent to the terminal as it is.
    #[test]
    fn force_unlock_escapes_the_lock_path() {
        let u = Unlocked {
            outcome: ForceUnlockOutcome::NotLocked { stale: None },
            local_lock: Some(std::path::PathBuf::from("s\u{1b}]0;x\u{7}.json.lock")),
        };
        let text = unlocked(&u);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(text.contains("s\\x1b]0;x\\x07.json.lock"), "{text:?}");
    }
}
