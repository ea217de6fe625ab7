//! `SshTransport`: one ControlMaster connection per host for the whole run, host keys checked
//! against a private known_hosts file built from the state, every command a session opened over
//! the master's control socket (openssh's native mux client: no ssh process per command).

use super::exec::Input;
use super::hostkey::ConnectedHost;
use super::master::HostConn;
use crate::hostid::HostId;
use crate::transport::{
    CommandOutput, FileAttrs, RemoteCommand, Streamed, Transport, TransportError,
};
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

/// SSH to every host of a run. Cheap to clone (shared connections).
#[derive(Clone)]
pub struct SshTransport {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    // Field order matters: connections (their masters) go before the directory holding sockets.
    pub(super) hosts: Mutex<BTreeMap<HostId, Arc<HostConn>>>,
    pub(super) next_slot: AtomicUsize,
    pub(super) opts: SshOptions,
    pub(super) dir: tempfile::TempDir,
}

pub(super) fn other(host: &HostId, message: impl Into<String>) -> TransportError {
    TransportError::Other {
        host: host.clone(),
        message: message.into(),
    }
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
                next_slot: AtomicUsize::new(0),
                opts,
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

impl Transport for SshTransport {
    async fn connect(
        &self,
        host: &HostId,
        target: &crate::spec::SshTarget,
        recorded_key: Option<&str>,
        accept_changed: bool,
        bastions: &[super::hostkey::BastionTrust],
    ) -> Result<ConnectedHost, TransportError> {
        self.open(host, target, recorded_key, accept_changed, bastions)
            .await
    }

    async fn close(&self, host: &HostId) {
        self.disconnect(host).await
    }

    /// Staged, sha256-verified upload, skipped when the remote file is already identical
    /// (`upload_file_report`).
    async fn upload_file(
        &self,
        host: &HostId,
        local: &Path,
        remote: &str,
        attrs: &FileAttrs,
    ) -> Result<String, TransportError> {
        Ok(self
            .upload_file_report(host, local, remote, attrs)
            .await?
            .sha256)
    }

    /// Staged, sha256-verified upload without asking first whether the host has the bytes.
    async fn upload_new_file(
        &self,
        host: &HostId,
        local: &Path,
        remote: &str,
        attrs: &FileAttrs,
    ) -> Result<String, TransportError> {
        Ok(self.upload(host, local, remote, attrs, false).await?.sha256)
    }

    async fn run(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
    ) -> Result<CommandOutput, TransportError> {
        let input = cmd.stdin.clone();
        match &input {
            Some(b) => self.run_with(host, &cmd, Input::Bytes(b)).await,
            None => self.run_with(host, &cmd, Input::None).await,
        }
    }

    async fn run_into(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
        out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
    ) -> Result<Streamed, TransportError> {
        self.run_into_writer(host, &cmd, out).await
    }

    async fn run_lines(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
        lines: tokio::sync::mpsc::Sender<String>,
    ) -> Result<Option<i32>, TransportError> {
        self.run_streaming(host, &cmd, lines).await
    }

    async fn write_file(
        &self,
        host: &HostId,
        path: &str,
        data: Vec<u8>,
        attrs: &FileAttrs,
    ) -> Result<(), TransportError> {
        self.write_file_atomic(host, path, data, attrs).await
    }
}

impl std::fmt::Debug for SshTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshTransport")
            .field("control_dir", &self.control_dir())
            .finish_non_exhaustive()
    }
}
