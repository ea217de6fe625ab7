//! `localhost` hosts (k0sctl's `localhost: {enabled: true}`): the machine k0sform runs on. Its
//! commands run here as processes (as rig's `protocol/localhost/connection.go` runs
//! `sh -c -- CMD`), as root when k0sform runs as root, else through `sudo -n` (rig
//! `sudo/noop.go` `RegisterUID0Noop`, then `sudo/sudo.go` `RegisterSudo`). Everything else is
//! the SSH path's: the same command line (`quote::command_line`: `sudo -n`, `timeout`, `env`,
//! quoting), the same output limits and stdin feeding (`exec::pump`), the same timeouts and
//! `sudo` refusals (`exec`), the same atomic, sha256-checked file placing (`upload`). There is
//! no SSH host key: the host is identified by its machine-id alone
//! (`transport::LOCAL_HOST_KEY`).

use super::conn::{LocalHost, kill_group, shield};
use super::exec::{Input, Output, forward_lines, pump};
use super::other;
use super::session::SshTransport;
use crate::hostid::HostId;
use crate::transport::{CommandOutput, ConnectedHost, LOCAL_HOST_KEY, TransportError};
use std::process::Stdio;
use std::sync::Arc;

/// A local command's process group, killed when the command is dropped unfinished (a local
/// timeout, an output over its limit, a cancelled run); its `timeout` ends what runs as root.
struct Running(tokio::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            kill_group(&mut self.0);
        }
    }
}

/// The user k0sform runs as, for messages.
fn user_name(euid: u32) -> String {
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|u| crate::spec::is_user_name(u))
        .unwrap_or_else(|| format!("uid {euid}"))
}

/// k0sform's effective uid and user name here.
fn who() -> (u32, String) {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let euid = unsafe { libc::geteuid() };
    (euid, user_name(euid))
}

/// How a `localhost` host's commands run, for the plan: `as root`, or `through sudo -n as
/// user "alice"`.
pub fn local_runs_as() -> String {
    match who() {
        (0, _) => "as root".to_string(),
        (_, user) => format!("through `sudo -n` as user {user:?}"),
    }
}

impl SshTransport {
    /// `Transport::connect` for a `localhost` host: nothing to open; what identifies it is its
    /// machine-id (the probe reads it), so the "key" is `LOCAL_HOST_KEY` and there is no first
    /// contact to trust.
    pub(super) fn open_local(&self, host: &HostId) -> Result<ConnectedHost, TransportError> {
        let (euid, user) = who();
        let local = LocalHost {
            host: host.clone(),
            user,
            sudo: euid != 0,
        };
        tracing::debug!(%host, user = %local.user, sudo = local.sudo, "local host");
        self.inner
            .local
            .lock()
            .map_err(|_| other(host, "connection table poisoned"))?
            .entry(host.clone())
            .or_insert_with(|| Arc::new(local));
        Ok(ConnectedHost {
            fingerprint: LOCAL_HOST_KEY.to_string(),
            public_key: String::new(),
            first_contact: false,
            bastions: Vec::new(),
        })
    }

    /// The host's local link, when it is a `localhost` host of this run.
    pub(super) fn local(&self, host: &HostId) -> Option<Arc<LocalHost>> {
        self.inner.local.lock().ok()?.get(host).cloned()
    }
}

impl LocalHost {
    fn spawn(&self, line: &str, stdin: Stdio, stderr: Stdio) -> Result<Running, TransportError> {
        let mut c = tokio::process::Command::new("/bin/sh");
        c.arg("-c")
            .arg(line)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(stderr);
        // Its own process group, as an ssh master: the first Ctrl-C lets it finish.
        shield(&mut c);
        c.spawn()
            .map(Running)
            .map_err(|e| other(&self.host, format!("cannot start /bin/sh: {e}")))
    }

    async fn wait(&self, mut child: Running) -> Result<Option<i32>, TransportError> {
        child
            .0
            .wait()
            .await
            .map(|st| st.code())
            .map_err(|e| other(&self.host, format!("waiting for the command: {e}")))
    }

    /// `HostConn::exec` for this machine.
    pub(super) async fn exec(
        &self,
        line: &str,
        input: Input<'_>,
        output: (Output<'_>, u64),
    ) -> Result<(CommandOutput, Option<(u64, String)>), TransportError> {
        let stdin = match input {
            Input::None => Stdio::null(),
            _ => Stdio::piped(),
        };
        let mut child = self.spawn(line, stdin, Stdio::piped())?;
        let streams = (
            child.0.stdin.take(),
            child.0.stdout.take(),
            child.0.stderr.take(),
        );
        let (stdout, copied, stderr) = pump(&self.host, streams, input, output).await?;
        let status = self.wait(child).await?;
        Ok((
            CommandOutput {
                status,
                stdout,
                stderr,
            },
            copied,
        ))
    }

    /// `HostConn::stream` for this machine: stdin held open until this returns or is dropped.
    pub(super) async fn stream(
        &self,
        line: &str,
        lines: tokio::sync::mpsc::Sender<String>,
    ) -> Result<Option<i32>, TransportError> {
        let mut child = self.spawn(line, Stdio::piped(), Stdio::null())?;
        let stdin = child.0.stdin.take();
        let Some(stdout) = child.0.stdout.take() else {
            return Err(other(&self.host, "no stdout to read"));
        };
        if !forward_lines(&self.host, stdout, &lines).await? {
            return Ok(None);
        }
        drop(stdin);
        self.wait(child).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SshTarget;
    use crate::transport::{FileAttrs, RemoteCommand, Transport};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::time::Duration;

    /// The local transport, or None (the test is skipped, saying so) when these tests cannot
    /// become root here: not root and no passwordless `sudo` (`cargo test` as an ordinary
    /// user). With K0SFORM_REQUIRE_LAB=1 (CI) that is a failure instead.
    async fn local() -> Option<(SshTransport, HostId, tempfile::TempDir)> {
        if who().0 != 0 {
            let sudo = std::process::Command::new("sudo")
                .args(["-n", "true"])
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !sudo {
                let why =
                    "not root and no passwordless sudo: the local transport runs commands as root";
                assert!(
                    std::env::var_os("K0SFORM_REQUIRE_LAB").is_none_or(|v| v != "1"),
                    "{why}"
                );
                // Past the test harness's capture, as the integration tests' `require_lab!`.
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!(
                        "skipped: {}: {why}\n",
                        std::thread::current().name().unwrap_or("ssh::local test")
                    )
                    .as_bytes(),
                );
                return None;
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let t = SshTransport::new(super::super::SshOptions {
            runtime_dir: dir.path().to_path_buf(),
            ..Default::default()
        })
        .unwrap();
        let host = HostId::new("127.0.0.1", 22);
        let c = t
            .connect(&host, &SshTarget::local(), None, false, &[])
            .await
            .unwrap();
        assert_eq!(c.fingerprint, LOCAL_HOST_KEY);
        assert!(c.public_key.is_empty() && !c.first_contact);
        Some((t, host, dir))
    }

    fn sh(script: &str) -> RemoteCommand {
        RemoteCommand::new(["sh", "-c", script])
    }

    /// Commands run here through the SSH path's command line: argv quoted (a hostile argument
    /// stays one word), env set, stdin fed, exit codes and stderr kept.
    #[tokio::test]
    async fn runs_argv_env_and_stdin_here() {
        let Some((t, host, _d)) = local().await else {
            return;
        };
        let o = t
            .run(
                &host,
                RemoteCommand::new(["printf", "%s|", "a b", "$(id)", "'"]),
            )
            .await
            .unwrap();
        assert_eq!((o.status, o.stdout_str()), (Some(0), "a b|$(id)|'|".into()));
        let o = t
            .run(
                &host,
                sh("echo \"$K0SFORM_X\"; cat; echo oops >&2; exit 3")
                    .env("K0SFORM_X", "v 1")
                    .stdin("in\n"),
            )
            .await
            .unwrap();
        assert_eq!(o.status, Some(3));
        assert_eq!(o.stdout_str(), "v 1\nin\n");
        assert_eq!(o.stderr_str(), "oops\n");
        // The machine's own files: this is the machine k0sform runs on.
        let o = t
            .run(&host, RemoteCommand::new(["cat", "/proc/self/status"]))
            .await
            .unwrap();
        assert!(o.stdout_str().contains("PPid:"), "{o:?}");
    }

    /// The command's `timeout` ends it and the run reports a timeout, as over SSH.
    #[tokio::test]
    async fn a_command_past_its_timeout_is_a_timeout() {
        let Some((t, host, _d)) = local().await else {
            return;
        };
        let started = std::time::Instant::now();
        let e = t
            .run(
                &host,
                RemoteCommand::new(["sleep", "30"]).timeout(Duration::from_secs(1)),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(e, TransportError::Timeout { secs: 1, .. }),
            "{e:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    /// Output past the command's limit fails the command; stdout streams line by line.
    #[tokio::test]
    async fn output_limit_and_lines() {
        let Some((t, host, _d)) = local().await else {
            return;
        };
        let e = t
            .run(&host, sh("head -c 5000 /dev/zero").output_limit(4096))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let status = t
            .run_lines(&host, sh("echo one; echo two"), tx)
            .await
            .unwrap();
        assert_eq!(status, Some(0));
        assert_eq!(rx.recv().await.as_deref(), Some("one"));
        assert_eq!(rx.recv().await.as_deref(), Some("two"));
        let mut out = Vec::new();
        let s = t.run_into(&host, sh("printf abc"), &mut out).await.unwrap();
        assert_eq!((s.bytes, out), (3, b"abc".to_vec()));
        assert_eq!(s.sha256, crate::hash::sha256_hex(b"abc"));
    }

    /// Files are written through a private temp folder beside the destination and renamed in
    /// place, with their mode (and owner: root only); a wrong planned sha256 changes nothing.
    #[tokio::test]
    async fn write_file_is_atomic_with_mode_and_owner() {
        let Some((t, host, d)) = local().await else {
            return;
        };
        let dst = d.path().join("sub/app.conf");
        let path = dst.to_str().unwrap();
        t.write_file(&host, path, b"one\n".to_vec(), &FileAttrs::mode(0o640))
            .await
            .unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), b"one\n");
        let meta = std::fs::metadata(&dst).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
        let names = || -> Vec<String> {
            std::fs::read_dir(dst.parent().unwrap())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(), ["app.conf"]);
        let wrong = FileAttrs::mode(0o600).expecting(crate::hash::sha256_hex(b"other"));
        assert!(
            t.write_file(&host, path, b"two\n".to_vec(), &wrong)
                .await
                .is_err()
        );
        assert_eq!(std::fs::read(&dst).unwrap(), b"one\n");
        if unsafe { libc::geteuid() } == 0 {
            let owned = FileAttrs::mode(0o600).owned_by(Some("65534".into()), Some("65534".into()));
            t.write_file(&host, path, b"three\n".to_vec(), &owned)
                .await
                .unwrap();
            let meta = std::fs::metadata(&dst).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
            assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
        }
        assert_eq!(names(), ["app.conf"]);
    }

    /// A local file is put in place sha256-checked, and skipped when already there.
    #[tokio::test]
    async fn upload_checks_and_skips() {
        let Some((t, host, d)) = local().await else {
            return;
        };
        let src = d.path().join("k0s");
        std::fs::write(&src, b"binary").unwrap();
        let dst = d.path().join("bin/k0s");
        let attrs = FileAttrs::mode(0o755);
        let up = t
            .upload_file_report(&host, &src, dst.to_str().unwrap(), &attrs)
            .await
            .unwrap();
        assert_eq!(up.sha256, crate::hash::sha256_hex(b"binary"));
        assert!(!up.skipped);
        assert_eq!(std::fs::read(&dst).unwrap(), b"binary");
        let again = t
            .upload_file_report(&host, &src, dst.to_str().unwrap(), &attrs)
            .await
            .unwrap();
        assert!(again.skipped);
        let stale = attrs.clone().expecting(crate::hash::sha256_hex(b"planned"));
        assert!(
            t.upload_file(&host, &src, dst.to_str().unwrap(), &stale)
                .await
                .is_err()
        );
    }

    /// A host never connected as `localhost` does not run here.
    #[tokio::test]
    async fn other_hosts_are_not_local() {
        let Some((t, _host, _d)) = local().await else {
            return;
        };
        let e = t
            .run(&HostId::new("127.0.0.2", 22), RemoteCommand::new(["true"]))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not connected"), "{e}");
    }
}
