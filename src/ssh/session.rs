//! `SshTransport`: one ControlMaster connection per host for the whole run, host keys checked
//! against a private known_hosts file built from the state, every command a session opened over
//! the master's control socket (openssh's native mux client: no ssh process per command).
//!
//! The openssh crate's `SessionBuilder` is not used for the master: it has no generic `-o` (we
//! need GlobalKnownHostsFile, HostKeyAlias, HashKnownHosts, the user's options and a ProxyCommand
//! carrying all of them to the bastion) and daemonizes the master, and does not let us choose its
//! process group. The master runs in its own process group (a Ctrl-C in the terminal must not cut
//! steps the executor lets finish) and dies with k0sform (PR_SET_PDEATHSIG); `openssh::Session`
//! resumed on its socket runs the commands and checks the master's health.

use super::hostkey::{self, BASTION_ALIAS, PublicKey, TARGET_ALIAS};
use super::quote::{self, quote};
use crate::hostid::HostId;
use crate::spec::SshTarget;
use crate::transport::{CommandOutput, RemoteCommand, Transport, TransportError};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Options of `-o` the user may not override: they carry k0sform's host-key and multiplexing
/// guarantees (first value wins in ssh, and ours come first).
const PROTECTED_OPTIONS: &[&str] = &[
    "batchmode",
    "checkhostip",
    "controlmaster",
    "controlpath",
    "controlpersist",
    "globalknownhostsfile",
    "hashknownhosts",
    "hostkeyalias",
    "knownhostscommand",
    "stricthostkeychecking",
    "updatehostkeys",
    "userknownhostsfile",
];

/// Grace between the remote `timeout` firing and the local one, so the remote side normally
/// reports the timeout itself (and has killed the command).
const LOCAL_TIMEOUT_GRACE: Duration = Duration::from_secs(10);

/// Commands in flight per host, below sshd's default `MaxSessions 10`; more wait their turn.
const MAX_SESSIONS: usize = 8;

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

/// The key a host was accepted with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectedHost {
    /// `SHA256:…`
    pub fingerprint: String,
    /// `<type> <base64>`
    pub public_key: String,
    /// No key was recorded (or the old one was dropped on request): this run trusted it on first use.
    pub first_contact: bool,
}

/// Result of `upload_file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// sha256 (hex) of the file now at the remote path.
    pub sha256: String,
    /// The remote file already had this content; nothing was sent.
    pub skipped: bool,
}

/// SSH to every host of a run. Cheap to clone (shared connections).
#[derive(Clone)]
pub struct SshTransport {
    inner: Arc<Inner>,
}

struct Inner {
    // Field order matters: connections (their masters) go before the directory holding sockets.
    hosts: Mutex<BTreeMap<HostId, Arc<HostConn>>>,
    next_slot: AtomicUsize,
    opts: SshOptions,
    dir: tempfile::TempDir,
}

struct HostConn {
    host: HostId,
    user: String,
    sudo: bool,
    session: openssh::Session,
    ctl: PathBuf,
    log: PathBuf,
    info: ConnectedHost,
    master: Mutex<Option<tokio::process::Child>>,
    /// sshd refuses more than `MaxSessions` (default 10) sessions on one connection.
    sessions: tokio::sync::Semaphore,
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

fn other(host: &HostId, message: impl Into<String>) -> TransportError {
    TransportError::Other {
        host: host.clone(),
        message: message.into(),
    }
}

/// Last meaningful lines of an ssh log, without the noise ssh adds on every TOFU.
fn log_message(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Warning: Permanently added"))
        .collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        "ssh exited without a message".to_string()
    } else {
        tail.join("; ")
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

    fn conn(&self, host: &HostId) -> Result<Arc<HostConn>, TransportError> {
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

    /// Open the host's master connection (once per run; later calls return the first result).
    ///
    /// `recorded_key` is the state's `<type> <base64>` key: ssh then refuses any other key. With
    /// `accept_changed` (`-replace`, or a `ssh.hostKey` pin naming the new key) the recorded key
    /// is left out and the offered one is trusted, subject to the pin. A `target.host_key` pin is
    /// checked before this returns, so no command ever runs on a host with the wrong key.
    pub async fn connect(
        &self,
        host: &HostId,
        target: &SshTarget,
        recorded_key: Option<&str>,
        accept_changed: bool,
    ) -> Result<ConnectedHost, TransportError> {
        if let Ok(c) = self.conn(host) {
            return Ok(c.info.clone());
        }
        if target.address.is_empty() || target.address.starts_with('-') {
            return Err(other(
                host,
                format!("invalid SSH address {:?}", target.address),
            ));
        }
        let recorded = match recorded_key {
            Some(k) => Some(PublicKey::parse(k).map_err(|e| {
                other(
                    host,
                    format!("the state's recorded host key is unusable: {e}"),
                )
            })?),
            None => None,
        };
        let slot = self.inner.next_slot.fetch_add(1, Ordering::Relaxed);
        let base = self.control_dir().join(format!("h{slot}"));
        let ctl = base.with_extension("sock");
        let log = base.with_extension("log");
        let known_hosts = base.with_extension("known_hosts");
        let trusted = recorded.as_ref().filter(|_| !accept_changed);
        let kh_text = trusted
            .map(|k| k.known_hosts_line(TARGET_ALIAS))
            .unwrap_or_default();
        std::fs::write(&known_hosts, kh_text)
            .map_err(|e| other(host, format!("writing {}: {e}", known_hosts.display())))?;

        let mut args: Vec<String> = vec![
            "-M".into(),
            "-N".into(),
            "-S".into(),
            path_str(&ctl),
            "-E".into(),
            path_str(&log),
        ];
        let common = self.common_args(target, &known_hosts, TARGET_ALIAS, &base, 0)?;
        // The login user decides sudo. `-l` beats any ssh config; without it (an `openSSH:`
        // host left to its config) only ssh knows (`-G` resolves the configuration locally,
        // without connecting).
        let login_user = match common.iter().position(|a| a == "-l") {
            Some(i) => common[i + 1].clone(),
            None => self.resolve_user(host, &common, &target.address).await?,
        };
        args.extend(common);
        args.push("--".into());
        args.push(target.address.clone());
        tracing::debug!(%host, ?args, %login_user, "starting ssh master");

        let mut master = tokio::process::Command::new(&self.inner.opts.ssh_program);
        master
            .args(&args)
            // ProxyCommand is run by $SHELL; our quoting is POSIX.
            .env("SHELL", "/bin/sh")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        shield(&mut master);
        let mut child = master
            .spawn()
            .map_err(|e| other(host, format!("cannot run ssh: {e}")))?;

        let session = openssh::Session::resume_mux(
            ctl.clone().into_boxed_path(),
            Some(log.clone().into_boxed_path()),
        );
        let limit = self.inner.opts.connect_timeout * 2 + Duration::from_secs(5);
        let ready = tokio::time::timeout(limit, async {
            loop {
                tokio::select! {
                    st = child.wait() => return Err(st.ok().and_then(|s| s.code())),
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
                if ctl.exists() && session.check().await.is_ok() {
                    return Ok(());
                }
            }
        })
        .await;
        let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
        match ready {
            Ok(Ok(())) => {}
            Ok(Err(_code)) => {
                let text = log_text();
                if let Some(offered) = hostkey::changed_key_offered(&text) {
                    return Err(TransportError::HostKeyChanged {
                        host: host.clone(),
                        expected: recorded.map(|k| k.fingerprint()).unwrap_or_default(),
                        offered,
                    });
                }
                return Err(TransportError::Unreachable {
                    host: host.clone(),
                    message: log_message(&text),
                });
            }
            Err(_) => {
                kill_group(&mut child);
                let _ = child.wait().await;
                let _ = std::fs::remove_file(&ctl);
                let text = log_text();
                return Err(TransportError::Unreachable {
                    host: host.clone(),
                    message: format!(
                        "no SSH session after {}s{}",
                        limit.as_secs(),
                        if text.trim().is_empty() {
                            String::new()
                        } else {
                            format!(": {}", log_message(&text))
                        }
                    ),
                });
            }
        }

        let conn = HostConn {
            host: host.clone(),
            sudo: login_user != "root",
            user: login_user,
            session,
            ctl,
            log,
            info: ConnectedHost {
                fingerprint: String::new(),
                public_key: String::new(),
                first_contact: trusted.is_none(),
            },
            master: Mutex::new(Some(child)),
            sessions: tokio::sync::Semaphore::new(MAX_SESSIONS),
        };

        // Which key did ssh accept? With a recorded key, ssh refuses a different key of the same
        // type but would add a key of another type as "new": that is a change too.
        let kh_now = std::fs::read_to_string(&known_hosts).unwrap_or_default();
        let keys = hostkey::keys_for(&kh_now, TARGET_ALIAS);
        let accepted = match (trusted, keys.last()) {
            (_, None) => {
                conn.shutdown().await;
                return Err(other(host, "ssh connected but recorded no host key"));
            }
            (Some(rec), Some(last)) if last != rec => {
                conn.shutdown().await;
                return Err(TransportError::HostKeyChanged {
                    host: host.clone(),
                    expected: rec.fingerprint(),
                    offered: last.fingerprint(),
                });
            }
            (_, Some(last)) => last.clone(),
        };
        let fingerprint = accepted.fingerprint();
        if let Some(pin) = &target.host_key
            && pin != &fingerprint
        {
            conn.shutdown().await;
            return Err(TransportError::HostKeyChanged {
                host: host.clone(),
                expected: pin.clone(),
                offered: fingerprint,
            });
        }
        if let Err(e) = self.check_bastion_pins(host, target, &base, 0) {
            conn.shutdown().await;
            return Err(e);
        }
        let mut conn = conn;
        conn.info.fingerprint = fingerprint;
        conn.info.public_key = accepted.to_line();
        let info = conn.info.clone();
        let conn = Arc::new(conn);
        let mut hosts = self
            .inner
            .hosts
            .lock()
            .map_err(|_| other(host, "connection table poisoned"))?;
        hosts.insert(host.clone(), conn);
        tracing::debug!(%host, fingerprint = %info.fingerprint, "connected");
        Ok(info)
    }

    /// The user ssh will log in as (`ssh -G … | user`).
    async fn resolve_user(
        &self,
        host: &HostId,
        common: &[String],
        address: &str,
    ) -> Result<String, TransportError> {
        let mut c = tokio::process::Command::new(&self.inner.opts.ssh_program);
        c.arg("-G")
            .args(common)
            .arg("--")
            .arg(address)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = c
            .output()
            .await
            .map_err(|e| other(host, format!("cannot run ssh -G: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(other(
                host,
                format!(
                    "ssh rejects the connection settings: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        text.lines()
            .find_map(|l| l.strip_prefix("user "))
            .map(|u| u.trim().to_string())
            .ok_or_else(|| other(host, "ssh -G printed no user"))
    }

    /// ssh options shared by the master and every bastion hop. `depth` 0 is the target.
    fn common_args(
        &self,
        target: &SshTarget,
        known_hosts: &Path,
        alias: &str,
        base: &Path,
        depth: usize,
    ) -> Result<Vec<String>, TransportError> {
        let opts = &self.inner.opts;
        let mut a: Vec<String> = Vec::new();
        let mut o = |kv: String| {
            a.push("-o".into());
            a.push(kv);
        };
        // The user's options first so they can tune timeouts and ciphers; protected ones dropped.
        for (k, v) in &target.options {
            if PROTECTED_OPTIONS.contains(&k.to_ascii_lowercase().as_str()) {
                tracing::warn!(option = %k, "ignoring ssh option: k0sform manages it");
                continue;
            }
            if target.bastion.is_some()
                && matches!(
                    k.to_ascii_lowercase().as_str(),
                    "proxyjump" | "proxycommand"
                )
            {
                tracing::warn!(option = %k, "ignoring ssh option: the host has a bastion");
                continue;
            }
            o(format!("{k}={v}"));
        }
        o("BatchMode=yes".into());
        o("StrictHostKeyChecking=accept-new".into());
        o(format!("UserKnownHostsFile={}", path_str(known_hosts)));
        o("GlobalKnownHostsFile=/dev/null".into());
        o(format!("HostKeyAlias={alias}"));
        o("HashKnownHosts=no".into());
        o("UpdateHostKeys=no".into());
        o("CheckHostIP=no".into());
        o(format!(
            "ConnectTimeout={}",
            opts.connect_timeout.as_secs().max(1)
        ));
        o(format!(
            "ServerAliveInterval={}",
            opts.server_alive_interval.as_secs().max(1)
        ));
        o("ServerAliveCountMax=3".into());
        if depth == 0 {
            o("ClearAllForwardings=yes".into());
        }
        if let Some(b) = &target.bastion {
            o(format!(
                "ProxyCommand={}",
                self.proxy_command(b, base, depth + 1)?
            ));
        }
        // An `openSSH:` address may be a Host alias whose config sets Port/User: k0sctl's
        // defaults (22, root) are then left to ssh, which falls back to the same values.
        if !(target.openssh && target.port == 22) {
            a.extend(["-p".into(), target.port.to_string()]);
        }
        if !(target.openssh && target.user == "root") {
            a.extend(["-l".into(), target.user.clone()]);
        }
        if let Some(k) = &target.key_path {
            a.extend([
                "-i".into(),
                path_str(k),
                "-o".into(),
                "IdentitiesOnly=yes".into(),
            ]);
        }
        if let Some(c) = &target.config_path {
            a.extend(["-F".into(), path_str(c)]);
        }
        Ok(a)
    }

    fn bastion_files(base: &Path, depth: usize) -> (PathBuf, PathBuf) {
        let stem = format!(
            "{}.b{depth}",
            base.file_name().and_then(|s| s.to_str()).unwrap_or("h")
        );
        let dir = base.parent().unwrap_or(Path::new("/tmp"));
        (
            dir.join(format!("{stem}.known_hosts")),
            dir.join(format!("{stem}.log")),
        )
    }

    /// `ssh -W [%h]:%p … bastion` as a ProxyCommand, carrying our known_hosts, identity and
    /// options (ProxyJump would not pass command-line options to the jump connection).
    fn proxy_command(
        &self,
        bastion: &SshTarget,
        base: &Path,
        depth: usize,
    ) -> Result<String, TransportError> {
        let (kh, log) = Self::bastion_files(base, depth);
        // The bastion has no state: trusted on first use for this run, or checked against its pin.
        std::fs::write(&kh, "").map_err(|e| TransportError::Other {
            host: HostId::new(bastion.address.clone(), bastion.port),
            message: format!("writing {}: {e}", kh.display()),
        })?;
        let mut words = vec![
            path_str(&self.inner.opts.ssh_program),
            "-E".into(),
            path_str(&log),
        ];
        words.extend(self.common_args(bastion, &kh, BASTION_ALIAS, base, depth)?);
        words.push("--".into());
        words.push(bastion.address.clone());
        // ssh expands %-tokens in ProxyCommand: literal % doubled, except in the -W target.
        let mut line = quote(&words[0]).replace('%', "%%");
        line.push_str(" -W '[%h]:%p'");
        for w in &words[1..] {
            line.push(' ');
            line.push_str(&quote(w).replace('%', "%%"));
        }
        Ok(line)
    }

    fn check_bastion_pins(
        &self,
        host: &HostId,
        target: &SshTarget,
        base: &Path,
        depth: usize,
    ) -> Result<(), TransportError> {
        let Some(b) = &target.bastion else {
            return Ok(());
        };
        let depth = depth + 1;
        if let Some(pin) = &b.host_key {
            let (kh, _) = Self::bastion_files(base, depth);
            let text = std::fs::read_to_string(&kh).unwrap_or_default();
            let offered = hostkey::keys_for(&text, BASTION_ALIAS)
                .last()
                .map(PublicKey::fingerprint)
                .unwrap_or_default();
            if &offered != pin {
                return Err(other(
                    host,
                    format!(
                        "bastion {}:{} offered host key {offered}, but ssh.hostKey pins {pin}",
                        b.address, b.port
                    ),
                ));
            }
        }
        self.check_bastion_pins(host, b, base, depth)
    }

    fn forget(&self, host: &HostId, conn: &Arc<HostConn>) {
        if let Ok(mut hosts) = self.inner.hosts.lock()
            && hosts.get(host).is_some_and(|c| Arc::ptr_eq(c, conn))
        {
            hosts.remove(host);
        }
    }

    /// Close one host's connection (master exits, socket removed).
    pub async fn close(&self, host: &HostId) {
        let conn = match self.inner.hosts.lock() {
            Ok(mut h) => h.remove(host),
            Err(_) => None,
        };
        if let Some(c) = conn {
            c.shutdown().await;
        }
    }

    /// Close every connection. Call on every exit path; `Drop` is only a best-effort fallback.
    pub async fn close_all(&self) {
        let conns: Vec<Arc<HostConn>> = match self.inner.hosts.lock() {
            Ok(mut h) => std::mem::take(&mut *h).into_values().collect(),
            Err(_) => Vec::new(),
        };
        // All at once: each close waits for its master to exit; one after the other they added
        // ~10 ms per host (more under load) to the end of every run.
        let mut closing = tokio::task::JoinSet::new();
        for c in conns {
            closing.spawn(async move { c.shutdown().await });
        }
        while closing.join_next().await.is_some() {}
    }

    async fn run_with(
        &self,
        host: &HostId,
        cmd: &RemoteCommand,
        stdin: Input<'_>,
    ) -> Result<CommandOutput, TransportError> {
        let conn = self.conn(host)?;
        let sudo = cmd.root && conn.sudo;
        let line = quote::command_line(cmd, sudo).map_err(|e| other(host, e.to_string()))?;
        let shown = display_command(&cmd.argv);
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

    /// Write `local` to `remote` (mode `mode`, as root): streamed to `<remote>.k0sform-tmp`,
    /// sha256-checked on the host, then renamed into place, so a half upload is never at
    /// `remote`. Skipped when the remote file already has the same sha256 (its mode is still set).
    /// `Transport::upload_file` returns only the sha256; this also says whether it was skipped.
    pub async fn upload_file_report(
        &self,
        host: &HostId,
        local: &Path,
        remote: &str,
        mode: u32,
    ) -> Result<Uploaded, TransportError> {
        let (sha256, size) = local_sha256(local)
            .await
            .map_err(|e| other(host, format!("reading {}: {e}", local.display())))?;
        let mode_s = format!("{mode:o}");
        let check = RemoteCommand::new([
            "sh",
            "-c",
            r#"if [ -f "$1" ] && [ "$(sha256sum < "$1" | cut -d' ' -f1)" = "$3" ]; then chmod "$2" "$1" && echo same; fi"#,
            "k0sform-upload-check",
            remote,
            &mode_s,
            &sha256,
        ])
        .timeout(Duration::from_secs(120));
        let out = self.run_with(host, &check, Input::None).await?;
        if !out.success() {
            return Err(other(
                host,
                format!("checking {remote}: {}", out.error_line()),
            ));
        }
        if out.stdout_str().trim() == "same" {
            return Ok(Uploaded {
                sha256,
                skipped: true,
            });
        }
        // Generous: 2 minutes plus 1 s per MiB.
        let secs = 120 + size / (1024 * 1024);
        let put = RemoteCommand::new([
            "sh",
            "-c",
            r#"set -e
umask 077
mkdir -p "$(dirname -- "$1")"
tmp="$1.k0sform-tmp"
cat > "$tmp"
sum=$(sha256sum < "$tmp" | cut -d' ' -f1)
if [ "$sum" != "$3" ]; then
  rm -f "$tmp"
  echo "sha256 mismatch after upload: expected $3, got $sum" >&2
  exit 3
fi
chmod "$2" "$tmp"
mv -f "$tmp" "$1""#,
            "k0sform-upload",
            remote,
            &mode_s,
            &sha256,
        ])
        .timeout(Duration::from_secs(secs));
        let out = self.run_with(host, &put, Input::File(local)).await?;
        if !out.success() {
            return Err(other(
                host,
                format!(
                    "uploading {} to {remote}: {}",
                    local.display(),
                    out.error_line()
                ),
            ));
        }
        Ok(Uploaded {
            sha256,
            skipped: false,
        })
    }
}

/// What to feed a command's stdin.
enum Input<'a> {
    None,
    Bytes(&'a [u8]),
    File(&'a Path),
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
        let mut stdout = child.stdout().take();
        let mut stderr = child.stderr().take();
        let feed = async {
            let Some(mut w) = stdin else {
                return Ok::<(), std::io::Error>(());
            };
            match input {
                Input::None => {}
                Input::Bytes(b) => w.write_all(b).await?,
                Input::File(p) => {
                    let mut f = tokio::fs::File::open(p).await?;
                    tokio::io::copy(&mut f, &mut w).await?;
                }
            }
            w.shutdown().await?;
            Ok(())
        };
        let read_out = async {
            let mut v = Vec::new();
            if let Some(s) = stdout.as_mut() {
                s.read_to_end(&mut v).await?;
            }
            Ok::<Vec<u8>, std::io::Error>(v)
        };
        let read_err = async {
            let mut v = Vec::new();
            if let Some(s) = stderr.as_mut() {
                s.read_to_end(&mut v).await?;
            }
            Ok::<Vec<u8>, std::io::Error>(v)
        };
        let (fed, out, err) = tokio::join!(feed, read_out, read_err);
        let stdout = out.map_err(|e| other(&self.host, format!("reading output: {e}")))?;
        let stderr = err.map_err(|e| other(&self.host, format!("reading output: {e}")))?;
        // A command that exits without reading all its input breaks the pipe: not our error.
        if let Err(e) = fed
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(other(&self.host, format!("sending input: {e}")));
        }
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

    async fn shutdown(&self) {
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

/// Keep an ssh process out of the terminal's process group, so the first Ctrl-C (which the
/// executor turns into "let running steps finish") does not kill connections and commands in
/// flight, and have the kernel end it when k0sform dies, so nothing outlives k0sform.
fn shield(cmd: &mut tokio::process::Command) {
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

/// Signal an ssh master's process group (a bastion ProxyCommand runs in it).
fn signal_group(child: &tokio::process::Child, signal: libc::c_int) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a negative pid signals the group the master leads (it was started
        // with process_group(0)); no memory is involved.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// Kill an ssh master and its process group.
fn kill_group(child: &mut tokio::process::Child) {
    signal_group(child, libc::SIGKILL);
    let _ = child.start_kill();
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
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

async fn local_sha256(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = tokio::fs::File::open(path).await?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((hex::encode(h.finalize()), size))
}

impl Transport for SshTransport {
    /// Staged, sha256-verified upload, skipped when the remote file is already identical
    /// (`upload_file_report`).
    async fn upload_file(
        &self,
        host: &HostId,
        local: &Path,
        remote: &str,
        mode: u32,
    ) -> Result<String, TransportError> {
        Ok(self
            .upload_file_report(host, local, remote, mode)
            .await?
            .sha256)
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

    async fn write_file(
        &self,
        host: &HostId,
        path: &str,
        data: Vec<u8>,
        mode: u32,
    ) -> Result<(), TransportError> {
        let mode_s = format!("{mode:o}");
        // mktemp creates the temp file 0600 in the target's directory; rename is atomic there.
        let cmd = RemoteCommand::new([
            "sh",
            "-c",
            r#"set -e
mkdir -p "$(dirname -- "$1")"
tmp=$(mktemp "$1.k0sform-XXXXXX")
trap 'rm -f "$tmp"' EXIT
cat > "$tmp"
chmod "$2" "$tmp"
mv -f "$tmp" "$1"
trap - EXIT"#,
            "k0sform-write",
            path,
            &mode_s,
        ])
        .timeout(Duration::from_secs(60));
        let out = self.run_with(host, &cmd, Input::Bytes(&data)).await?;
        if !out.success() {
            return Err(other(host, format!("writing {path}: {}", out.error_line())));
        }
        Ok(())
    }
}

impl std::fmt::Debug for SshTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshTransport")
            .field("control_dir", &self.control_dir())
            .finish_non_exhaustive()
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

    #[test]
    fn log_message_keeps_the_last_meaningful_lines() {
        let log = "Warning: Permanently added 'k0sform-host' (ED25519) to the list of known hosts.\r\nroot@127.0.0.1: Permission denied (publickey).\r\n";
        assert_eq!(
            log_message(log),
            "root@127.0.0.1: Permission denied (publickey)."
        );
        assert_eq!(log_message(""), "ssh exited without a message");
    }
}
