//! Running one command on a connected host: a session of its master (no ssh process per
//! command), the remote `timeout` with a local one behind it, a lost master told apart from a
//! failed command, and `sudo -n` refusals turned into a typed error.

use super::conn::{HostConn, Link};
use super::other;
use super::session::SshTransport;
use crate::hostid::HostId;
use crate::quote;
use crate::transport::{CommandOutput, OUTPUT_LIMIT, RemoteCommand, Streamed, TransportError};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Grace between the remote `timeout` firing and the local one, so the remote side normally
/// reports the timeout itself (and has killed the command).
const LOCAL_TIMEOUT_GRACE: Duration = Duration::from_secs(10);

/// Why reading a command's streams ended early.
enum Stop {
    /// A stream had more than its limit of bytes.
    Over(u64),
    Read(std::io::Error),
    Feed(std::io::Error),
    /// Writing stdout where it goes (`Transport::run_into`) failed.
    Write(std::io::Error),
}

/// Read `stream` to its end, or fail with `Stop::Over` past `limit` bytes.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    stream: Option<R>,
    limit: u64,
) -> Result<Vec<u8>, Stop> {
    let mut bytes = Vec::new();
    if let Some(s) = stream {
        s.take(limit + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(Stop::Read)?;
    }
    if bytes.len() as u64 > limit {
        return Err(Stop::Over(limit));
    }
    Ok(bytes)
}

/// Copy `stream` to `out` as it arrives, hashing it, or fail with `Stop::Over` past `limit`
/// bytes (nothing past the limit is written). Returns the bytes copied and their sha256.
async fn copy_capped<R: tokio::io::AsyncRead + Unpin>(
    stream: Option<R>,
    limit: u64,
    out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
) -> Result<(u64, String), Stop> {
    let mut hash = crate::hash::Hasher::default();
    let mut total = 0u64;
    if let Some(s) = stream {
        let mut s = s.take(limit + 1);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = s.read(&mut buf).await.map_err(Stop::Read)?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > limit {
                return Err(Stop::Over(limit));
            }
            hash.update(&buf[..n]);
            out.write_all(&buf[..n]).await.map_err(Stop::Write)?;
        }
    }
    out.flush().await.map_err(Stop::Write)?;
    Ok((total, hash.hex()))
}

/// Where a command's stdout goes.
pub(super) enum Output<'a> {
    /// Collected (`CommandOutput::stdout`).
    Collect,
    /// Written here as it arrives (`Transport::run_into`).
    Into(&'a mut (dyn tokio::io::AsyncWrite + Unpin + Send)),
}

/// What to feed a command's stdin.
pub(super) enum Input<'a> {
    None,
    Bytes(&'a [u8]),
    File(&'a Path),
}

impl SshTransport {
    pub(super) async fn run_with(
        &self,
        host: &HostId,
        cmd: &RemoteCommand,
        stdin: Input<'_>,
    ) -> Result<CommandOutput, TransportError> {
        Ok(self.run_to(host, cmd, stdin, Output::Collect).await?.0)
    }

    /// `Transport::run_into`.
    pub(super) async fn run_into_writer(
        &self,
        host: &HostId,
        cmd: &RemoteCommand,
        out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
    ) -> Result<Streamed, TransportError> {
        let input = cmd.stdin.as_deref().map_or(Input::None, Input::Bytes);
        let (o, copied) = self.run_to(host, cmd, input, Output::Into(out)).await?;
        let (bytes, sha256) = copied.unwrap_or_default();
        Ok(Streamed {
            status: o.status,
            bytes,
            sha256,
            stderr: o.stderr,
        })
    }

    /// Run `cmd` with `stdin`, its stdout going to `stdout`: the output, and for a stdout
    /// written elsewhere the bytes written and their sha256.
    async fn run_to(
        &self,
        host: &HostId,
        cmd: &RemoteCommand,
        stdin: Input<'_>,
        stdout: Output<'_>,
    ) -> Result<(CommandOutput, Option<(u64, String)>), TransportError> {
        let Prepared {
            link,
            sudo,
            line,
            shown,
        } = self.prepare(host, cmd)?;
        tracing::debug!(%host, command = ?shown, "run");
        let started = Instant::now();
        let result = self
            .exec_checked(host, cmd, (&link, sudo, &line, &shown), (stdin, stdout))
            .await;
        // The debug log's record of the command (`runlog`): its exit code, or why there is none.
        let ms = started.elapsed().as_millis();
        match &result {
            Ok((out, _)) => match out.status {
                Some(code) => {
                    tracing::debug!(%host, command = ?shown, exit_code = code, ms, "exit")
                }
                None => tracing::debug!(%host, command = ?shown, ms, "killed by a signal"),
            },
            Err(e) => {
                tracing::debug!(%host, command = ?shown, error = ?e.to_string(), ms, "failed")
            }
        }
        result
    }

    /// `run_to` once the command is prepared: the two timeouts, a lost master, sudo refusals.
    async fn exec_checked(
        &self,
        host: &HostId,
        cmd: &RemoteCommand,
        (link, sudo, line, shown): (&Link, bool, &str, &str),
        (stdin, stdout): (Input<'_>, Output<'_>),
    ) -> Result<(CommandOutput, Option<(u64, String)>), TransportError> {
        let remote_secs = quote::remote_timeout_secs(cmd.timeout);
        let started = Instant::now();
        let limit = Duration::from_secs(remote_secs) + LOCAL_TIMEOUT_GRACE;
        let output = (stdout, cmd.output_limit);
        let result = tokio::time::timeout(limit, link.exec(line, stdin, output)).await;
        let timed_out = || TransportError::Timeout {
            host: host.clone(),
            command: shown.to_string(),
            secs: remote_secs,
        };
        let out = match result {
            Err(_) => return Err(timed_out()),
            Ok(Err(e @ TransportError::Unreachable { .. })) => {
                // The master is gone (host down, network cut): forget it, so a later `connect`
                // opens a new one instead of failing forever. Nothing is retried here: the
                // command may have run.
                if let Link::Ssh(conn) = link {
                    self.forget(host, conn);
                    conn.shutdown().await;
                }
                return Err(e);
            }
            Ok(r) => r?,
        };
        let (out, copied) = out;
        // coreutils timeout: 124 after TERM, 137 after the -k KILL.
        if matches!(out.status, Some(124) | Some(137))
            && started.elapsed() + Duration::from_millis(500) >= Duration::from_secs(remote_secs)
        {
            return Err(timed_out());
        }
        if sudo && let Some(e) = sudo_denied(host, link.user(), &out) {
            return Err(e);
        }
        Ok((out, copied))
    }
}

/// Longest stdout line `run_streaming` passes on; longer ones are dropped whole.
const LINE_LIMIT: usize = 4096;

/// A command ready to send: the host's link, whether it goes through sudo, the line sent and
/// the text logs show.
struct Prepared {
    link: Link,
    sudo: bool,
    line: String,
    shown: String,
}

/// Each `Link` call handed to its kind: a session of the host's SSH master, or a process here.
impl Link {
    fn user(&self) -> &str {
        match self {
            Link::Ssh(conn) => &conn.user,
            Link::Local(local) => &local.user,
        }
    }

    /// Whether commands needing root go through `sudo -n` on this link.
    fn sudo(&self) -> bool {
        match self {
            Link::Ssh(conn) => conn.sudo,
            Link::Local(local) => local.sudo,
        }
    }

    async fn exec(
        &self,
        line: &str,
        input: Input<'_>,
        output: (Output<'_>, u64),
    ) -> Result<(CommandOutput, Option<(u64, String)>), TransportError> {
        match self {
            Link::Ssh(conn) => conn.exec(line, input, output).await,
            Link::Local(local) => local.exec(line, input, output).await,
        }
    }

    async fn stream(
        &self,
        line: &str,
        lines: tokio::sync::mpsc::Sender<String>,
    ) -> Result<Option<i32>, TransportError> {
        match self {
            Link::Ssh(conn) => conn.stream(line, lines).await,
            Link::Local(local) => local.stream(line, lines).await,
        }
    }
}

impl SshTransport {
    /// The same command line for both links (`quote`: `sudo -n`, `timeout`, `env`, quoting):
    /// sshd hands it to the login shell, this machine's `/bin/sh` runs it for a local host.
    fn prepare(&self, host: &HostId, cmd: &RemoteCommand) -> Result<Prepared, TransportError> {
        let link = match self.local(host) {
            Some(local) => Link::Local(local),
            None => Link::Ssh(self.conn(host)?),
        };
        let sudo = cmd.root && link.sudo();
        let line = quote::command_line(cmd, sudo).map_err(|e| other(host, e.to_string()))?;
        let shown = match &cmd.shown_as {
            Some(s) => s.clone(),
            None => display_command(&cmd.argv),
        };
        Ok(Prepared {
            link,
            sudo,
            line,
            shown,
        })
    }

    /// `Transport::run_lines`: no local timeout (the caller stops it by dropping the future; the
    /// remote `timeout` bounds it on the host).
    pub(super) async fn run_streaming(
        &self,
        host: &HostId,
        cmd: &RemoteCommand,
        lines: tokio::sync::mpsc::Sender<String>,
    ) -> Result<Option<i32>, TransportError> {
        let Prepared {
            link, line, shown, ..
        } = self.prepare(host, cmd)?;
        tracing::debug!(%host, command = ?shown, "stream");
        let status = link.stream(&line, lines).await;
        match &status {
            Ok(Some(code)) => tracing::debug!(%host, command = ?shown, exit_code = code, "exit"),
            Ok(None) => {
                tracing::debug!(%host, command = ?shown, "stream stopped or killed by a signal")
            }
            Err(e) => tracing::debug!(%host, command = ?shown, error = ?e.to_string(), "failed"),
        }
        status
    }
}

impl HostConn {
    /// Run `line` with an open stdin that is never written (closing it is the command's signal
    /// to stop, see `k0s::watch_nodes`) and pass its stdout on line by line.
    async fn stream(
        &self,
        line: &str,
        lines: tokio::sync::mpsc::Sender<String>,
    ) -> Result<Option<i32>, TransportError> {
        let _session = self.sessions.acquire().await.ok();
        let mut child = self
            .spawn(line, openssh::Stdio::piped(), openssh::Stdio::null())
            .await?;
        // Held until this returns or is dropped: its EOF tells the command to stop.
        let _stdin = child.stdin().take();
        let Some(stdout) = child.stdout().take() else {
            return Err(other(&self.host, "no stdout to read".to_string()));
        };
        if !forward_lines(&self.host, stdout, &lines).await? {
            return Ok(None);
        }
        drop(_stdin);
        self.exit_status(child).await
    }

    /// A session of the master opened over its control socket (ssh's mux protocol): no ssh
    /// process per command, and no way to open a connection of its own if the master is gone.
    async fn spawn(
        &self,
        line: &str,
        stdin: openssh::Stdio,
        stderr: openssh::Stdio,
    ) -> Result<openssh::RemoteChild<'_>, TransportError> {
        let mut command = self.session.raw_command(line);
        command
            .stdin(stdin)
            .stdout(openssh::Stdio::piped())
            .stderr(stderr);
        match command.spawn().await {
            Ok(c) => Ok(c),
            Err(e) => Err(self.lost_or(e, "cannot start the command").await),
        }
    }

    /// The exit code of a finished command; `None` when it died by a signal.
    async fn exit_status(
        &self,
        child: openssh::RemoteChild<'_>,
    ) -> Result<Option<i32>, TransportError> {
        match child.wait().await {
            Ok(st) => Ok(st.code()),
            // The mux protocol reports exit 127 as an error of its own.
            Err(openssh::Error::Remote(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Some(127))
            }
            // No exit code: the command died by a signal, or the connection is gone. The master
            // tells which.
            Err(e @ (openssh::Error::RemoteProcessTerminated | openssh::Error::Disconnected)) => {
                match self.session.check().await {
                    Ok(()) => Ok(None),
                    Err(_) => Err(self.lost(e)),
                }
            }
            Err(e) => Err(self.lost_or(e, "waiting for the command").await),
        }
    }

    fn lost(&self, e: openssh::Error) -> TransportError {
        TransportError::Unreachable {
            host: self.host.clone(),
            message: format!("connection lost: {e}"),
        }
    }

    /// A mux error: the connection is lost if the master no longer answers, else `what` failed.
    async fn lost_or(&self, e: openssh::Error, what: &str) -> TransportError {
        match self.session.check().await {
            Ok(()) => other(&self.host, format!("{what}: {e}")),
            Err(_) => self.lost(e),
        }
    }

    /// Run `line` with `input`; its stdout collected or written where `output` says, up to its
    /// limit. For a stdout written elsewhere, also the bytes written and their sha256.
    async fn exec(
        &self,
        line: &str,
        input: Input<'_>,
        (output, limit): (Output<'_>, u64),
    ) -> Result<(CommandOutput, Option<(u64, String)>), TransportError> {
        // Never closed, so acquiring cannot fail; a failure would only lift the limit.
        let _session = self.sessions.acquire().await.ok();
        let stdin = match input {
            Input::None => openssh::Stdio::null(),
            _ => openssh::Stdio::piped(),
        };
        let mut child = self.spawn(line, stdin, openssh::Stdio::piped()).await?;
        let streams = (
            child.stdin().take(),
            child.stdout().take(),
            child.stderr().take(),
        );
        let (stdout, copied, stderr) = pump(&self.host, streams, input, (output, limit)).await?;
        let status = self.exit_status(child).await?;
        Ok((
            CommandOutput {
                status,
                stdout,
                stderr,
            },
            copied,
        ))
    }
}

/// Send each line of `stdout` to `lines` as it comes (`Transport::run_lines`): without the
/// newline, overlong lines dropped whole. `false` when `lines` was closed. Shared by SSH
/// sessions and local processes (`super::local`).
pub(super) async fn forward_lines<R: tokio::io::AsyncRead + Unpin>(
    host: &HostId,
    stdout: R,
    lines: &tokio::sync::mpsc::Sender<String>,
) -> Result<bool, TransportError> {
    use tokio::io::AsyncBufReadExt;
    let mut reader = tokio::io::BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // At most one byte past the limit per read: a host cannot make k0sform hold more.
        let n = (&mut reader)
            .take(LINE_LIMIT as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await
            .map_err(|e| other(host, format!("reading output: {e}")))?;
        if n == 0 {
            return Ok(true);
        }
        if buf.last() != Some(&b'\n') {
            // An overlong line: skip to its end.
            if buf.len() > LINE_LIMIT {
                let mut rest = Vec::new();
                loop {
                    rest.clear();
                    let m = (&mut reader)
                        .take(LINE_LIMIT as u64)
                        .read_until(b'\n', &mut rest)
                        .await
                        .map_err(|e| other(host, format!("reading output: {e}")))?;
                    if m == 0 || rest.last() == Some(&b'\n') {
                        break;
                    }
                }
                continue;
            }
        } else {
            buf.pop();
        }
        if lines
            .send(String::from_utf8_lossy(&buf).into_owned())
            .await
            .is_err()
        {
            return Ok(false);
        }
    }
}

/// A running command's stdin, stdout and stderr, as far as they are piped.
pub(super) type Streams<W, O, E> = (Option<W>, Option<O>, Option<E>);

/// Feed `input` to a command's stdin while reading its stdout (collected or written where
/// `output` says, up to `limit`) and its stderr (up to `OUTPUT_LIMIT`): the stdout, for a
/// stdout written elsewhere the bytes written and their sha256, and the stderr. Shared by SSH
/// sessions and local processes (`super::local`).
pub(super) async fn pump<W, O, E>(
    host: &HostId,
    (stdin, stdout, stderr): Streams<W, O, E>,
    input: Input<'_>,
    (output, limit): (Output<'_>, u64),
) -> Result<(Vec<u8>, Option<(u64, String)>, Vec<u8>), TransportError>
where
    W: tokio::io::AsyncWrite + Unpin,
    O: tokio::io::AsyncRead + Unpin,
    E: tokio::io::AsyncRead + Unpin,
{
    let feed = async {
        let Some(mut w) = stdin else {
            return Ok(());
        };
        let fed = async {
            match input {
                Input::None => {}
                Input::Bytes(b) => w.write_all(b).await?,
                Input::File(p) => {
                    let mut f = tokio::fs::File::open(p).await?;
                    tokio::io::copy(&mut f, &mut w).await?;
                }
            }
            w.shutdown().await
        };
        match fed.await {
            // A command that exits without reading all its input breaks the pipe: not our
            // error.
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Stop::Feed(e)),
            _ => Ok(()),
        }
    };
    let stdout = async {
        match output {
            Output::Collect => read_capped(stdout, limit).await.map(|b| (b, None)),
            Output::Into(w) => copy_capped(stdout, limit, w)
                .await
                .map(|c| (Vec::new(), Some(c))),
        }
    };
    // The first stream over the limit ends the wait at once: the command may well keep
    // writing on the other one. It is not waited for (its `timeout` still holds).
    match tokio::try_join!(feed, stdout, read_capped(stderr, OUTPUT_LIMIT)) {
        Ok((_, (stdout, copied), stderr)) => Ok((stdout, copied, stderr)),
        Err(Stop::Over(limit)) => Err(other(
            host,
            format!(
                "the command wrote more than {} of output; k0sform stopped reading it",
                size(limit)
            ),
        )),
        Err(Stop::Write(e)) => Err(other(host, format!("writing its output here: {e}"))),
        Err(Stop::Read(e)) => Err(other(host, format!("reading output: {e}"))),
        Err(Stop::Feed(e)) => Err(other(host, format!("sending input: {e}"))),
    }
}

/// `sudo -n` refused (no passwordless right) or is missing: a typed error naming host and user.
fn sudo_denied(host: &HostId, user: &str, out: &CommandOutput) -> Option<TransportError> {
    let err = out.stderr_str();
    let refused = out.status == Some(1)
        && err.lines().any(|l| {
            l.starts_with("sudo: ")
                && (l.contains("password is required")
                    || l.contains("a terminal is required")
                    || l.contains("must have a tty")
                    || l.contains("not in the sudoers")
                    || l.contains("may not run sudo"))
        });
    let missing = out.status == Some(127) && err.contains("sudo") && err.contains("not found");
    (refused || missing).then(|| TransportError::Sudo {
        host: host.clone(),
        user: user.to_string(),
        message: err
            .lines()
            .find(|l| l.contains("sudo"))
            .unwrap_or("")
            .trim()
            .to_string(),
    })
}

/// `bytes` in MiB or GiB, as limits are set.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

/// A short form of a command for error messages.
fn display_command(argv: &[String]) -> String {
    let s = quote::join(argv);
    if s.chars().count() > 160 {
        let cut: String = s.chars().take(157).collect();
        format!("{cut}...")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(status: i32, stderr: &str) -> CommandOutput {
        CommandOutput {
            status: Some(status),
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    fn denied(out: &CommandOutput) -> Option<String> {
        let host = HostId::new("127.0.0.1", 22);
        match sudo_denied(&host, "ubuntu", out) {
            Some(TransportError::Sudo { user, message, .. }) => {
                assert_eq!(user, "ubuntu");
                Some(message)
            }
            _ => None,
        }
    }

    /// Issue 28, item 6: a streamed stdout is written and hashed as it comes, and stops at its
    /// limit with nothing past it written.
    #[tokio::test]
    async fn streamed_output_is_hashed_and_capped() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        let Ok((n, sha)) = copy_capped(Some(data.as_slice()), 200_000, &mut out).await else {
            panic!("copied");
        };
        assert_eq!((n, sha), (200_000, crate::hash::sha256_hex(&data)));
        assert_eq!(out, data);
        let mut out = Vec::new();
        match copy_capped(Some(data.as_slice()), 199_999, &mut out).await {
            Err(Stop::Over(199_999)) => {}
            _ => panic!("not stopped at the limit"),
        }
        assert!(out.len() < 199_999, "{}", out.len());
        match read_capped(Some(data.as_slice()), 199_999).await {
            Err(Stop::Over(199_999)) => {}
            _ => panic!("not stopped at the limit"),
        }
        assert_eq!(
            read_capped(Some(data.as_slice()), 200_000).await.ok(),
            Some(data)
        );
    }

    #[test]
    fn missing_sudo_rights_are_recognised() {
        assert_eq!(
            denied(&output(1, "sudo: a password is required\n")).as_deref(),
            Some("sudo: a password is required")
        );
        assert!(
            denied(&output(
                1,
                "sudo: a terminal is required to read the password\n"
            ))
            .is_some()
        );
        assert!(denied(&output(127, "sh: 1: sudo: not found\n")).is_some());
        assert!(denied(&output(1, "sudo: sorry, you must have a tty to run sudo\n")).is_some());
        assert!(
            denied(&output(1, "ubuntu is not in the sudoers file.  This incident will be reported.\nsudo: a password is required\n"))
                .is_some()
        );
        // k0s's own errors pass through untouched.
        assert!(denied(&output(1, "Error: already running\n")).is_none());
        assert!(denied(&output(0, "sudo: a password is required\n")).is_none());
    }
}
