//! `Transport` for `SshTransport`: each call handed to the file that does it (`master`, `exec`,
//! `upload`). A `localhost` host (`SshTarget::localhost`) is connected by `local`, and its
//! commands then run on this machine; every other host goes over SSH, in the same run.

use super::exec::Input;
use super::session::SshTransport;
use crate::hostid::HostId;
use crate::spec::SshTarget;
use crate::transport::{BastionTrust, ConnectedHost};
use crate::transport::{
    CommandOutput, FileAttrs, RemoteCommand, Streamed, Transport, TransportError,
};
use std::path::Path;

impl Transport for SshTransport {
    async fn connect(
        &self,
        host: &HostId,
        target: &SshTarget,
        recorded_key: Option<&str>,
        accept_changed: bool,
        bastions: &[BastionTrust],
    ) -> Result<ConnectedHost, TransportError> {
        if target.localhost {
            return self.open_local(host);
        }
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
