//! `SshTransport`: one ControlMaster connection per host for the whole run, host keys checked
//! against a private known_hosts file built from the state, every command a session opened over
//! the master's control socket (openssh's native mux client: no ssh process per command).

use super::conn::HostConn;
use super::other;
use crate::hostid::HostId;
use crate::transport::ConnectedHost;
use crate::transport::TransportError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct SshOptions {
    /// `ConnectTimeout` (TCP connect and SSH handshake).
    pub connect_timeout: Duration,
    /// `ServerAliveInterval`; three missed answers drop the connection.
    pub server_alive_interval: Duration,
    /// The ssh client to run (default `ssh` from PATH).
    pub ssh_program: PathBuf,
    /// Parent of the private control directory (default /tmp: short socket paths).
    pub runtime_dir: PathBuf,
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            connect_timeout: Duration::from_secs(10),
            server_alive_interval: Duration::from_secs(15),
            ssh_program: PathBuf::from("ssh"),
            runtime_dir: PathBuf::from("/tmp"),
        }
    }
}

/// SSH to every host of a run, and local processes for a `localhost` host (`super::local`).
/// Cheap to clone (shared connections).
#[derive(Clone)]
pub struct SshTransport {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    // Field order matters: connections (their masters) go before the directory holding sockets.
    pub(super) hosts: Mutex<BTreeMap<HostId, Arc<HostConn>>>,
    /// The `localhost` hosts of the run (`super::local`): no connection, commands run here.
    pub(super) local: Mutex<BTreeMap<HostId, Arc<super::conn::LocalHost>>>,
    pub(super) next_slot: AtomicUsize,
    pub(super) opts: SshOptions,
    /// Encrypted keys unlocked in this run and the private agent holding them.
    pub(super) keys: super::keys::Keys,
    pub(super) dir: tempfile::TempDir,
}

impl SshTransport {
    pub fn new(opts: SshOptions) -> Result<Self, std::io::Error> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("k0sform-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&opts.runtime_dir)?;
        Ok(SshTransport {
            inner: Arc::new(Inner {
                hosts: Mutex::new(BTreeMap::new()),
                local: Mutex::new(BTreeMap::new()),
                next_slot: AtomicUsize::new(0),
                opts,
                keys: Default::default(),
                dir,
            }),
        })
    }

    /// The private directory holding control sockets, known_hosts files and ssh logs.
    pub fn control_dir(&self) -> &Path {
        self.inner.dir.path()
    }

    /// The key a connected host was accepted with.
    pub fn connected(&self, host: &HostId) -> Option<ConnectedHost> {
        self.conn(host).ok().map(|c| c.info.clone())
    }

    pub(super) fn conn(&self, host: &HostId) -> Result<Arc<HostConn>, TransportError> {
        let hosts = self
            .inner
            .hosts
            .lock()
            .map_err(|_| other(host, "connection table poisoned"))?;
        hosts
            .get(host)
            .cloned()
            .ok_or_else(|| other(host, "not connected (connect before running commands)"))
    }

    pub(super) fn forget(&self, host: &HostId, conn: &Arc<HostConn>) {
        if let Ok(mut hosts) = self.inner.hosts.lock()
            && hosts.get(host).is_some_and(|c| Arc::ptr_eq(c, conn))
        {
            hosts.remove(host);
        }
    }
}

impl std::fmt::Debug for SshTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshTransport")
            .field("control_dir", &self.control_dir())
            .finish_non_exhaustive()
    }
}
