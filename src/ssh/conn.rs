//! One host's connection: its ssh master (a child process leading its own process group), the
//! openssh session resumed on the master's socket, and the key the host was accepted with.
//! Started by `master`, used by `exec`, held by `session`'s table.

use crate::hostid::HostId;
use crate::transport::ConnectedHost;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// Commands in flight per host, below sshd's default `MaxSessions 10`; more wait their turn.
pub(super) const MAX_SESSIONS: usize = 8;

pub(super) struct HostConn {
    pub(super) host: HostId,
    pub(super) user: String,
    pub(super) sudo: bool,
    pub(super) session: openssh::Session,
    pub(super) ctl: PathBuf,
    pub(super) log: PathBuf,
    pub(super) info: ConnectedHost,
    pub(super) master: Mutex<Option<tokio::process::Child>>,
    /// sshd refuses more than `MaxSessions` (default 10) sessions on one connection.
    pub(super) sessions: tokio::sync::Semaphore,
}

/// A `localhost` host of this run (`super::local`): who k0sform runs as here, and whether root
/// commands go through `sudo -n`. Its commands are processes here, not sessions.
pub(super) struct LocalHost {
    pub(super) host: HostId,
    pub(super) user: String,
    pub(super) sudo: bool,
}

/// How a host's commands run: a session of its SSH master, or a process on this machine (a
/// `localhost` host).
pub(super) enum Link {
    Ssh(std::sync::Arc<HostConn>),
    Local(std::sync::Arc<LocalHost>),
}

impl Drop for HostConn {
    fn drop(&mut self) {
        // Best effort on paths that skipped `close`: kill the master, drop its socket.
        if let Ok(mut m) = self.master.lock()
            && let Some(mut child) = m.take()
        {
            kill_group(&mut child);
        }
        let _ = std::fs::remove_file(&self.ctl);
    }
}

impl HostConn {
    pub(super) async fn shutdown(&self) {
        let child = self.master.lock().ok().and_then(|mut m| m.take());
        if let Some(mut child) = child {
            // SIGTERM makes the master leave as `ssh -O exit` would, without starting one more
            // ssh per host; its group includes a bastion's ProxyCommand.
            signal_group(&child, libc::SIGTERM);
            let exited = tokio::time::timeout(Duration::from_secs(3), child.wait()).await;
            if exited.is_err() {
                kill_group(&mut child);
                let _ = child.wait().await;
            }
        }
        let _ = std::fs::remove_file(&self.ctl);
        tracing::debug!(host = %self.host, log = %self.log.display(), "closed");
    }
}

/// Signal an ssh master's process group (a bastion ProxyCommand runs in it).
pub(super) fn signal_group(child: &tokio::process::Child, signal: libc::c_int) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a negative pid signals the group the master leads (it was started
        // with process_group(0)); no memory is involved.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// Kill an ssh master and its process group.
pub(super) fn kill_group(child: &mut tokio::process::Child) {
    signal_group(child, libc::SIGKILL);
    let _ = child.start_kill();
}

/// Keep an ssh process out of the terminal's process group, so the first Ctrl-C (which the
/// executor turns into "let running steps finish") does not kill connections and commands in
/// flight, and have the kernel end it when k0sform dies, so nothing outlives k0sform.
pub(super) fn shield(cmd: &mut tokio::process::Command) {
    cmd.process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2), which is
    // async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
