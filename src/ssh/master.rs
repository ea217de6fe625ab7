//! The ssh master of each host: started with k0sform's options (known_hosts, bastion hops as
//! ProxyCommand, the user's `-o`), waited for until its control socket answers, and shut down with
//! its whole process group.
//!
//! The openssh crate's `SessionBuilder` is not used for the master: it has no generic `-o` (we
//! need GlobalKnownHostsFile, HostKeyAlias, HashKnownHosts, the user's options and a ProxyCommand
//! carrying all of them to the bastion) and daemonizes the master, and does not let us choose its
//! process group. The master runs in its own process group (a Ctrl-C in the terminal must not cut
//! steps the executor lets finish) and dies with k0sform (PR_SET_PDEATHSIG); `openssh::Session`
//! resumed on its socket runs the commands and checks the master's health.

use super::conn::{HostConn, MAX_SESSIONS, kill_group, shield};
use super::hostkey::{self, BASTION_ALIAS, TARGET_ALIAS};
use super::other;
use super::session::SshTransport;
use crate::hostid::HostId;
use crate::quote::quote;
use crate::spec::SshTarget;
use crate::ssh_key::PublicKey;
use crate::transport::TransportError;
use crate::transport::{BastionTrust, ConnectedHost};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    "hostkeyalgorithms",
    "knownhostscommand",
    "localcommand",
    "permitlocalcommand",
    "stricthostkeychecking",
    "updatehostkeys",
    "userknownhostsfile",
    "verifyhostkeydns",
];

/// The private files of one host's master, beside each other in the control folder.
struct MasterFiles {
    /// `h<slot>`: the other files' name without its extension (bastion hops add their own).
    base: PathBuf,
    ctl: PathBuf,
    log: PathBuf,
    known_hosts: PathBuf,
    /// The state's recorded key of the host, parsed.
    recorded: Option<PublicKey>,
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
    /// Open the host's master connection (`Transport::connect`, which documents the host-key
    /// policy): prepare its private files, start the master, wait until its control socket
    /// answers, then check the keys ssh accepted (a `target.host_key` pin before this returns,
    /// so no command ever runs on a host with the wrong key) and keep the connection.
    pub(super) async fn open(
        &self,
        host: &HostId,
        target: &SshTarget,
        recorded_key: Option<&str>,
        accept_changed: bool,
        bastions: &[BastionTrust],
    ) -> Result<ConnectedHost, TransportError> {
        if let Ok(c) = self.conn(host) {
            return Ok(c.info.clone());
        }
        let files = self.master_files(host, target, recorded_key, accept_changed)?;
        // An encrypted key is unlocked first: no master ever prompts.
        self.unlock_keys(host, target).await?;
        let trusted = files.recorded.as_ref().filter(|_| !accept_changed);
        let (child, login_user) = self
            .start_master(host, target, &files, trusted, bastions)
            .await?;
        let (child, session) = self
            .wait_ready(host, target, &files, child, bastions)
            .await?;
        let conn = HostConn {
            host: host.clone(),
            sudo: login_user != "root",
            user: login_user,
            session,
            ctl: files.ctl,
            log: files.log,
            info: ConnectedHost {
                fingerprint: String::new(),
                public_key: String::new(),
                first_contact: trusted.is_none(),
                bastions: Vec::new(),
            },
            master: Mutex::new(Some(child)),
            sessions: tokio::sync::Semaphore::new(MAX_SESSIONS),
        };
        let kh = (files.known_hosts.as_path(), files.base.as_path(), trusted);
        self.keep_checked(host, target, kh, conn, bastions).await
    }

    /// The master's private files (control socket, log, known_hosts holding only the trusted
    /// key) and the recorded key, checked to be a key.
    fn master_files(
        &self,
        host: &HostId,
        target: &SshTarget,
        recorded_key: Option<&str>,
        accept_changed: bool,
    ) -> Result<MasterFiles, TransportError> {
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
        let known_hosts = base.with_extension("known_hosts");
        let kh_text = recorded
            .as_ref()
            .filter(|_| !accept_changed)
            .map(|k| k.known_hosts_line(TARGET_ALIAS))
            .unwrap_or_default();
        std::fs::write(&known_hosts, kh_text)
            .map_err(|e| other(host, format!("writing {}: {e}", known_hosts.display())))?;
        Ok(MasterFiles {
            ctl: base.with_extension("sock"),
            log: base.with_extension("log"),
            known_hosts,
            base,
            recorded,
        })
    }

    /// Start the ssh master (in its own process group, `shield`) and find the login user.
    async fn start_master(
        &self,
        host: &HostId,
        target: &SshTarget,
        files: &MasterFiles,
        trusted: Option<&PublicKey>,
        bastions: &[BastionTrust],
    ) -> Result<(tokio::process::Child, String), TransportError> {
        let mut args: Vec<String> = vec![
            "-M".into(),
            "-N".into(),
            "-S".into(),
            path_str(&files.ctl),
            "-E".into(),
            path_str(&files.log),
        ];
        let common = self.common_args(
            host,
            target,
            &files.known_hosts,
            (TARGET_ALIAS, trusted),
            (&files.base, 0, bastions),
        )?;
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
        let child = master
            .spawn()
            .map_err(|e| other(host, format!("cannot run ssh: {e}")))?;
        Ok((child, login_user))
    }

    /// Wait until the master's control socket answers; a master that exits first failed, and
    /// its log says why (a changed key of the host or of a bastion, or anything else).
    async fn wait_ready(
        &self,
        host: &HostId,
        target: &SshTarget,
        files: &MasterFiles,
        mut child: tokio::process::Child,
        bastions: &[BastionTrust],
    ) -> Result<(tokio::process::Child, openssh::Session), TransportError> {
        let (ctl, log) = (&files.ctl, &files.log);
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
        let log_text = || std::fs::read_to_string(log).unwrap_or_default();
        match ready {
            Ok(Ok(())) => Ok((child, session)),
            Ok(Err(_code)) => {
                let text = log_text();
                // A bastion that refused its key fails the hop: its own log says why.
                if let Some(e) = bastion_key_changed(host, target, bastions, &files.base) {
                    return Err(e);
                }
                if let Some(offered) = hostkey::changed_key_offered(&text) {
                    return Err(TransportError::HostKeyChanged {
                        host: host.clone(),
                        expected: files
                            .recorded
                            .as_ref()
                            .map(|k| k.fingerprint())
                            .unwrap_or_default(),
                        offered,
                    });
                }
                Err(TransportError::Unreachable {
                    host: host.clone(),
                    message: log_message(&text),
                })
            }
            Err(_) => {
                kill_group(&mut child);
                let _ = child.wait().await;
                let _ = std::fs::remove_file(ctl);
                let text = log_text();
                Err(TransportError::Unreachable {
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
                })
            }
        }
    }

    /// Which key did ssh accept, and does it (and every bastion's) match its pin? Kept in the
    /// connection table when they do; shut down when not.
    async fn keep_checked(
        &self,
        host: &HostId,
        target: &SshTarget,
        (known_hosts, base, trusted): (&Path, &Path, Option<&PublicKey>),
        mut conn: HostConn,
        bastions: &[BastionTrust],
    ) -> Result<ConnectedHost, TransportError> {
        let kh_now = std::fs::read_to_string(known_hosts).unwrap_or_default();
        let checked = hostkey::accepted_key(host, &kh_now, trusted, target.host_key.as_deref())
            .and_then(|key| {
                hostkey::accepted_bastion_keys(host, target, bastions, base).map(|b| (key, b))
            });
        let (accepted, hops) = match checked {
            Ok(found) => found,
            Err(e) => {
                conn.shutdown().await;
                return Err(e);
            }
        };
        conn.info.fingerprint = accepted.fingerprint();
        conn.info.public_key = accepted.to_line();
        conn.info.bastions = hops;
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
        // `-G` only reads configuration, but a Match exec or a blocking Include could hang it.
        let limit = self.inner.opts.connect_timeout;
        let out = tokio::time::timeout(limit, c.output())
            .await
            .map_err(|_| {
                other(
                    host,
                    format!("ssh -G did not finish within {}s", limit.as_secs()),
                )
            })?
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

    /// ssh options shared by the master and every bastion hop. `depth` 0 is the target. With a
    /// `recorded` key, ssh checks strictly and asks for that key type only; without, the offered
    /// key is trusted on first use (and shown in the plan).
    fn common_args(
        &self,
        host: &HostId,
        target: &SshTarget,
        known_hosts: &Path,
        (alias, recorded): (&str, Option<&PublicKey>),
        (base, depth, bastions): (&Path, usize, &[BastionTrust]),
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
        match recorded {
            Some(k) => {
                o("StrictHostKeyChecking=yes".into());
                o(format!(
                    "HostKeyAlgorithms={}",
                    host_key_algorithms(&k.key_type)
                ));
            }
            None => o("StrictHostKeyChecking=accept-new".into()),
        }
        // Whatever the user's ssh_config says: no command runs here on k0sform's behalf, host
        // keys come only from k0sform's own file, and the master lives exactly as long as the
        // run (a ControlPersist master would fork away, fail the connect and stay as root).
        o("KnownHostsCommand=none".into());
        o("VerifyHostKeyDNS=no".into());
        o("PermitLocalCommand=no".into());
        // Sessions go through the mux protocol, which never asks for agent or X11 forwarding;
        // forced off as well so that no future change hands hosts the user's agent.
        o("ForwardAgent=no".into());
        o("ForwardX11=no".into());
        if depth == 0 {
            o("ControlMaster=yes".into());
        } else {
            // A bastion hop is a plain `ssh -W`: never a master, never someone else's.
            o("ControlMaster=no".into());
            o("ControlPath=none".into());
        }
        o("ControlPersist=no".into());
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
                self.proxy_command(host, target, b, (base, depth + 1, bastions))?
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
            // An encrypted key unlocked into the run's agent (`passphrase`).
            if let Some(sock) = self.key_agent(k) {
                a.extend(["-o".into(), format!("IdentityAgent={}", path_str(&sock))]);
            }
        }
        if let Some(c) = &target.config_path {
            a.extend(["-F".into(), path_str(c)]);
        }
        Ok(a)
    }

    /// `ssh -W '[ADDRESS]:PORT' … bastion` as a ProxyCommand to reach `target` through
    /// `bastion`, carrying our known_hosts, identity and options (ProxyJump would not pass
    /// command-line options to the jump connection).
    fn proxy_command(
        &self,
        host: &HostId,
        target: &SshTarget,
        bastion: &SshTarget,
        (base, depth, bastions): (&Path, usize, &[BastionTrust]),
    ) -> Result<String, TransportError> {
        let (kh, log) = hostkey::bastion_files(base, depth);
        // The key the state records for the bastion, checked strictly; none: trusted on first
        // use (the plan says so) and checked against its pin after connecting.
        let id = HostId::new(bastion.address.clone(), bastion.port);
        let trusted = hostkey::bastion_trusted(host, &id, bastions.get(depth - 1))?;
        let line = trusted
            .as_ref()
            .map(|k| k.known_hosts_line(BASTION_ALIAS))
            .unwrap_or_default();
        std::fs::write(&kh, line).map_err(|e| TransportError::Other {
            host: id.clone(),
            message: format!("writing {}: {e}", kh.display()),
        })?;
        let mut words = vec![
            path_str(&self.inner.opts.ssh_program),
            "-E".into(),
            path_str(&log),
        ];
        words.extend(self.common_args(
            host,
            bastion,
            &kh,
            (BASTION_ALIAS, trusted.as_ref()),
            (base, depth, bastions),
        )?);
        words.push("--".into());
        words.push(bastion.address.clone());
        // The -W target is written out, never `%h`: ssh substitutes `%h` into the line after
        // our quoting and runs it with $SHELL -c, so an address with a quote in it would run
        // here (clients before OpenSSH 9.6, CVE-2023-51385, do not refuse such names). The
        // address was checked (`spec::address_problem`) wherever it came from; quoted all the
        // same. ssh expands %-tokens in the whole line: every literal % is doubled.
        // Unlike `%h`, this is the address as written: a `Hostname` from ssh_config or
        // `options` for the target is not applied behind a bastion.
        words.insert(1, "-W".into());
        words.insert(2, format!("[{}]:{}", target.address, target.port));
        Ok(words
            .iter()
            .map(|w| quote(w).replace('%', "%%"))
            .collect::<Vec<_>>()
            .join(" "))
    }

    /// Close one host's connection (master exits, socket removed).
    pub(super) async fn disconnect(&self, host: &HostId) {
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
}

/// The first bastion hop whose ssh refused the key it was offered ("REMOTE HOST IDENTIFICATION
/// HAS CHANGED" in its log), as a `BastionKeyChanged`.
fn bastion_key_changed(
    host: &HostId,
    target: &SshTarget,
    bastions: &[BastionTrust],
    base: &Path,
) -> Option<TransportError> {
    let mut hop = target.bastion.as_deref();
    let mut depth = 0;
    while let Some(b) = hop {
        depth += 1;
        let (_, log) = hostkey::bastion_files(base, depth);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(offered) = hostkey::changed_key_offered(&text) {
            let id = HostId::new(b.address.clone(), b.port);
            let expected = hostkey::bastion_trusted(host, &id, bastions.get(depth - 1))
                .ok()
                .flatten()
                .map(|k| k.fingerprint())
                .unwrap_or_default();
            return Some(TransportError::BastionKeyChanged {
                host: host.clone(),
                bastion: id,
                expected,
                offered,
            });
        }
        hop = b.bastion.as_deref();
    }
    None
}

/// `HostKeyAlgorithms` for a recorded key of this type: RSA keys sign with SHA-2 (plain
/// `ssh-rsa` is SHA-1, which current servers no longer offer).
fn host_key_algorithms(key_type: &str) -> String {
    match key_type {
        "ssh-rsa" => "rsa-sha2-512,rsa-sha2-256".to_string(),
        t => t.to_string(),
    }
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

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
