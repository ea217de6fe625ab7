//! Running one command on a connected host: a session of its master (no ssh process per
//! command), the remote `timeout` with a local one behind it, a lost master told apart from a
//! failed command, and `sudo -n` refusals turned into a typed error.

use super::master::HostConn;
use super::quote;
use super::session::{SshTransport, other};
use crate::hostid::HostId;
use crate::transport::{CommandOutput, RemoteCommand, TransportError};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Grace between the remote `timeout` firing and the local one, so the remote side normally
/// reports the timeout itself (and has killed the command).
const LOCAL_TIMEOUT_GRACE: Duration = Duration::from_secs(10);

/// Most bytes read from one output stream of one command: a host cannot make k0sform hold more.
pub const OUTPUT_LIMIT: usize = 16 << 20;

/// Why reading a command's streams ended early.
enum Stop {
    /// A stream had more than `OUTPUT_LIMIT` bytes.
    Over,
    Read(std::io::Error),
    Feed(std::io::Error),
}

/// Read `stream` to its end, or fail with `Stop::Over` past `OUTPUT_LIMIT` bytes.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(stream: Option<R>) -> Result<Vec<u8>, Stop> {
    let mut bytes = Vec::new();
    if let Some(s) = stream {
        s.take(OUTPUT_LIMIT as u64 + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(Stop::Read)?;
    }
    if bytes.len() > OUTPUT_LIMIT {
        return Err(Stop::Over);
    }
    Ok(bytes)
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
        let conn = self.conn(host)?;
        let sudo = cmd.root && conn.sudo;
        let line = quote::command_line(cmd, sudo).map_err(|e| other(host, e.to_string()))?;
        let shown = match &cmd.shown_as {
            Some(s) => s.clone(),
            None => display_command(&cmd.argv),
        };
        let remote_secs = quote::remote_timeout_secs(cmd.timeout);
        let started = Instant::now();
        let limit = Duration::from_secs(remote_secs) + LOCAL_TIMEOUT_GRACE;
        tracing::debug!(%host, command = %shown, "run");
        let result = tokio::time::timeout(limit, conn.exec(&line, stdin)).await;
        let timed_out = || TransportError::Timeout {
            host: host.clone(),
            command: shown.clone(),
            secs: remote_secs,
        };
        let out = match result {
            Err(_) => return Err(timed_out()),
            Ok(Err(e @ TransportError::Unreachable { .. })) => {
                // The master is gone (host down, network cut): forget it, so a later `connect`
                // opens a new one instead of failing forever. Nothing is retried here: the
                // command may have run.
                self.forget(host, &conn);
                conn.shutdown().await;
                return Err(e);
            }
            Ok(r) => r?,
        };
        // coreutils timeout: 124 after TERM, 137 after the -k KILL.
        if matches!(out.status, Some(124) | Some(137))
            && started.elapsed() + Duration::from_millis(500) >= Duration::from_secs(remote_secs)
        {
            return Err(timed_out());
        }
        if sudo {
            check_sudo(&conn, &out)?;
        }
        Ok(out)
    }
}

impl HostConn {
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

    async fn exec(&self, line: &str, input: Input<'_>) -> Result<CommandOutput, TransportError> {
        // Never closed, so acquiring cannot fail; a failure would only lift the limit.
        let _session = self.sessions.acquire().await.ok();
        // A session of the master opened over its control socket (ssh's mux protocol): no ssh
        // process per command, and no way to open a connection of its own if the master is gone.
        let mut command = self.session.raw_command(line);
        command
            .stdin(match input {
                Input::None => openssh::Stdio::null(),
                _ => openssh::Stdio::piped(),
            })
            .stdout(openssh::Stdio::piped())
            .stderr(openssh::Stdio::piped());
        let mut child = match command.spawn().await {
            Ok(c) => c,
            Err(e) => return Err(self.lost_or(e, "cannot start the command").await),
        };
        let stdin = child.stdin().take();
        let stdout = child.stdout().take();
        let stderr = child.stderr().take();
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
        // The first stream over the limit ends the wait at once: the command may well keep
        // writing on the other one. It is not waited for (its remote `timeout` still holds).
        let (_, stdout, stderr) = match tokio::try_join!(
            feed,
            read_capped(stdout),
            read_capped(stderr)
        ) {
            Ok(all) => all,
            Err(Stop::Over) => {
                return Err(other(
                    &self.host,
                    format!(
                        "the command wrote more than {} MiB of output; k0sform stopped reading it",
                        OUTPUT_LIMIT >> 20
                    ),
                ));
            }
            Err(Stop::Read(e)) => {
                return Err(other(&self.host, format!("reading output: {e}")));
            }
            Err(Stop::Feed(e)) => {
                return Err(other(&self.host, format!("sending input: {e}")));
            }
        };
        let status = match child.wait().await {
            Ok(st) => st.code(),
            // The mux protocol reports exit 127 as an error of its own.
            Err(openssh::Error::Remote(e)) if e.kind() == std::io::ErrorKind::NotFound => Some(127),
            // No exit code: the command died by a signal, or the connection is gone. The master
            // tells which.
            Err(e @ (openssh::Error::RemoteProcessTerminated | openssh::Error::Disconnected)) => {
                match self.session.check().await {
                    Ok(()) => None,
                    Err(_) => return Err(self.lost(e)),
                }
            }
            Err(e) => return Err(self.lost_or(e, "waiting for the command").await),
        };
        Ok(CommandOutput {
            status,
            stdout,
            stderr,
        })
    }
}

fn check_sudo(conn: &HostConn, out: &CommandOutput) -> Result<(), TransportError> {
    match sudo_denied(&conn.host, &conn.user, out) {
        Some(e) => Err(e),
        None => Ok(()),
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
