//! Encrypted key files (`ssh.keyPath` of a host or a bastion). rig asks for the passphrase of
//! such a key on the terminal, or uses the agent that holds it. k0sform's ssh masters cannot
//! ask: each runs in a process group of its own (a Ctrl-C must not cut steps that are let
//! finish), so reading the terminal would stop it (SIGTTIN), and masters connect in parallel,
//! so every host would ask again. Instead, before the first master that needs it, OpenSSH's own
//! `ssh-add` runs in k0sform's foreground and asks once per key, the way ssh asks: on the
//! terminal, or through `SSH_ASKPASS` (with `SSH_ASKPASS_REQUIRE=force`, or `prefer` with a
//! display). The key goes into an ssh-agent private to this run (its socket in the run's 0700
//! control folder, killed with k0sform), and the masters that use the key are pointed at it
//! (`IdentityAgent`), still with `BatchMode=yes`: no master ever prompts. A key the user's own
//! agent (`SSH_AUTH_SOCK`) holds is left to that agent, as ssh does. With no agent holding it and
//! no way to ask, connecting fails naming the host and the key.

use super::keys::KeyWork;
use super::other;
use super::session::SshTransport;
use crate::hostid::HostId;
use crate::spec::SshTarget;
use crate::transport::TransportError;
use base64::Engine;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long a person (or an askpass program) has to give a passphrase.
const PROMPT_TIMEOUT: Duration = Duration::from_secs(300);

/// What a private key file says about itself without its passphrase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyFile {
    pub(super) encrypted: bool,
    /// The public key's base64 blob, as `ssh-add -L` prints it, when the file (or `<path>.pub`)
    /// gives it.
    pub(super) public_blob: Option<String>,
}

/// Read an OpenSSH (`openssh-key-v1`) or PEM private key's header: encrypted or not, and the
/// public key an OpenSSH-format file carries in the clear. None: not a key file this knows.
pub(super) fn inspect_key(text: &str) -> Option<KeyFile> {
    if let Some(body) = pem_body(text, "OPENSSH PRIVATE KEY") {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(body)
            .ok()?;
        let mut r = raw.strip_prefix(b"openssh-key-v1\0")?;
        let cipher = take_string(&mut r)?;
        let _kdf = take_string(&mut r)?;
        let _kdf_options = take_string(&mut r)?;
        let n = take_u32(&mut r)?;
        let public = if n >= 1 { take_string(&mut r) } else { None };
        return Some(KeyFile {
            encrypted: cipher != b"none",
            public_blob: public.map(|p| base64::engine::general_purpose::STANDARD.encode(p)),
        });
    }
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        return Some(KeyFile {
            encrypted: true,
            public_blob: None,
        });
    }
    if text.contains("PRIVATE KEY-----") {
        return Some(KeyFile {
            encrypted: text.contains("Proc-Type: 4,ENCRYPTED"),
            public_blob: None,
        });
    }
    None
}

fn pem_body(text: &str, label: &str) -> Option<String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    Some(text[start..stop].split_whitespace().collect())
}

fn take_u32(r: &mut &[u8]) -> Option<u32> {
    let (n, rest) = r.split_first_chunk::<4>()?;
    *r = rest;
    Some(u32::from_be_bytes(*n))
}

fn take_string<'a>(r: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = take_u32(r)? as usize;
    if r.len() < n {
        return None;
    }
    let (s, rest) = r.split_at(n);
    *r = rest;
    Some(s)
}

/// Can `ssh-add` ask for a passphrase here: through SSH_ASKPASS as ssh decides it
/// (readpass.c: `force`, or `prefer` with a display), or on a terminal?
fn can_ask(env: impl Fn(&str) -> Option<String>) -> bool {
    let set = |k: &str| env(k).is_some_and(|v| !v.is_empty());
    let display = set("DISPLAY") || set("WAYLAND_DISPLAY");
    let askpass = set("SSH_ASKPASS")
        && match env("SSH_ASKPASS_REQUIRE").as_deref() {
            Some(r) if r.eq_ignore_ascii_case("force") => true,
            Some(r) if r.eq_ignore_ascii_case("never") => false,
            _ => display,
        };
    askpass || (std::io::stdin().is_terminal() && std::fs::File::open("/dev/tty").is_ok())
}

/// The key paths of a host and its bastion hops.
fn key_paths(target: &SshTarget) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut t = Some(target);
    while let Some(h) = t {
        out.extend(h.key_path.clone());
        t = h.bastion.as_deref();
    }
    out
}

impl SshTransport {
    /// The private agent's socket when `key` was added to it (`IdentityAgent` for its masters).
    pub(super) fn key_agent(&self, key: &Path) -> Option<PathBuf> {
        let added = self.inner.keys.added.lock().ok()?;
        added.iter().find(|(k, _)| k == key).map(|(_, s)| s.clone())
    }

    /// Make every encrypted key of `target` (and its bastions) usable before its master starts:
    /// held by the user's agent, else added to the run's private agent after `ssh-add` asked
    /// for its passphrase (see the module). One key at a time, each asked for once per run.
    pub(super) async fn unlock_keys(
        &self,
        host: &HostId,
        target: &SshTarget,
    ) -> Result<(), TransportError> {
        for path in key_paths(target) {
            // Unreadable or not a key: ssh says why when it tries it.
            let Some(key) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| inspect_key(&t))
            else {
                continue;
            };
            if !key.encrypted {
                continue;
            }
            let mut keys = self.inner.keys.work.lock().await;
            if self.key_agent(&path).is_some() || keys.in_user_agent.contains(&path) {
                continue;
            }
            if let Some((_, why)) = keys.failed.iter().find(|(k, _)| *k == path) {
                return Err(other(host, why.clone()));
            }
            let blob = key.public_blob.or_else(|| {
                let text = std::fs::read_to_string(format!("{}.pub", path.display())).ok()?;
                text.split_whitespace().nth(1).map(str::to_string)
            });
            if let Some(blob) = blob
                && user_agent_holds(&blob).await
            {
                keys.in_user_agent.push(path);
                continue;
            }
            if !can_ask(|k| std::env::var(k).ok()) {
                return Err(other(
                    host,
                    format!(
                        "the SSH key {} is encrypted, no ssh-agent holds it, and there is no terminal or SSH_ASKPASS to ask for its passphrase: add it to your agent (`ssh-add {}`) or run k0sform on a terminal",
                        path.display(),
                        path.display()
                    ),
                ));
            }
            let sock = self.private_agent(host, &mut keys).await?;
            let askpass = self.askpass_wrapper(host)?;
            if let Err(why) = ssh_add(&path, &sock, askpass.as_deref()).await {
                keys.failed.push((path, why.clone()));
                return Err(other(host, why));
            }
            if let Ok(mut added) = self.inner.keys.added.lock() {
                added.push((path, sock));
            }
        }
        Ok(())
    }

    /// With `SSH_ASKPASS` and no terminal: a wrapper around it (in the run's 0700 folder) that
    /// gives up after three answers, because `ssh-add` asks again after every wrong passphrase,
    /// and an askpass program gives the same one each time.
    fn askpass_wrapper(&self, host: &HostId) -> Result<Option<PathBuf>, TransportError> {
        if std::io::stdin().is_terminal() || std::env::var_os("SSH_ASKPASS").is_none() {
            return Ok(None);
        }
        use std::os::unix::fs::PermissionsExt;
        let path = self.control_dir().join("askpass");
        let script = "#!/bin/sh\nc=$(cat \"$0.count\" 2>/dev/null || echo 0)\n[ \"$c\" -lt 3 ] || exit 1\necho $((c + 1)) > \"$0.count\"\nexec \"$SSH_ASKPASS_WRAPPED\" \"$@\"\n";
        std::fs::write(&path, script)
            .and_then(|_| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)))
            .and_then(
                |_| match std::fs::remove_file(path.with_extension("count")) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                },
            )
            .map_err(|e| other(host, format!("writing {}: {e}", path.display())))?;
        Ok(Some(path))
    }

    /// The run's private ssh-agent (started on first use), as its socket.
    async fn private_agent(
        &self,
        host: &HostId,
        keys: &mut KeyWork,
    ) -> Result<PathBuf, TransportError> {
        if let Some((sock, _)) = &keys.agent {
            return Ok(sock.clone());
        }
        let sock = self.control_dir().join("agent.sock");
        let mut c = tokio::process::Command::new("ssh-agent");
        c.arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        super::conn::shield(&mut c);
        let child = c
            .spawn()
            .map_err(|e| other(host, format!("cannot run ssh-agent: {e}")))?;
        let ready = tokio::time::timeout(Duration::from_secs(10), async {
            while !sock.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        if ready.is_err() {
            return Err(other(host, "ssh-agent did not create its socket in 10s"));
        }
        keys.agent = Some((sock.clone(), child));
        Ok(sock)
    }
}

/// Does the agent at `SSH_AUTH_SOCK` hold the key with this public blob (`ssh-add -L`)?
async fn user_agent_holds(blob: &str) -> bool {
    if std::env::var_os("SSH_AUTH_SOCK").is_none_or(|s| s.is_empty()) {
        return false;
    }
    let mut c = tokio::process::Command::new("ssh-add");
    c.arg("-L").stdin(Stdio::null()).kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(10), c.output()).await {
        Ok(Ok(out)) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(blob)),
        _ => false,
    }
}

/// `ssh-add KEY` into the agent at `sock`, in k0sform's own process group and with its
/// terminal (when stdin is one), so that it can ask; its stderr is kept for the error.
async fn ssh_add(path: &Path, sock: &Path, askpass: Option<&Path>) -> Result<(), String> {
    let mut c = tokio::process::Command::new("ssh-add");
    if let (Some(wrapper), Some(orig)) = (askpass, std::env::var_os("SSH_ASKPASS")) {
        c.env("SSH_ASKPASS", wrapper)
            .env("SSH_ASKPASS_WRAPPED", orig);
    }
    c.arg("--")
        .arg(path)
        .env("SSH_AUTH_SOCK", sock)
        .stdin(if std::io::stdin().is_terminal() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(PROMPT_TIMEOUT, c.output()).await;
    let why = match out {
        Ok(Ok(o)) if o.status.success() => return Ok(()),
        Ok(Ok(o)) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let line = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("ssh-add failed")
                .trim()
                .to_string();
            line.chars().filter(|c| !c.is_control()).collect()
        }
        Ok(Err(e)) => format!("cannot run ssh-add: {e}"),
        Err(_) => format!(
            "no passphrase within {}s (ssh-add asked again after a wrong one?)",
            PROMPT_TIMEOUT.as_secs()
        ),
    };
    Err(format!(
        "the encrypted SSH key {} could not be unlocked: {why}",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn keygen(dir: &Path, name: &str, pass: &str, format: &[&str]) -> PathBuf {
        let p = dir.join(name);
        let ok = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", pass, "-C", "t", "-f"])
            .arg(&p)
            .args(format)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        p
    }

    /// Keys made by ssh-keygen: encrypted or not, and the public blob of the `.pub` file.
    #[test]
    fn encrypted_keys_are_told_apart_and_their_public_key_read() {
        let dir = tempfile::tempdir().unwrap();
        for (name, pass) in [("plain", ""), ("locked", "s3cret pass")] {
            let p = keygen(dir.path(), name, pass, &[]);
            let k = inspect_key(&std::fs::read_to_string(&p).unwrap()).expect("a key");
            assert_eq!(k.encrypted, !pass.is_empty(), "{name}");
            let public = std::fs::read_to_string(p.with_extension("pub")).unwrap();
            assert_eq!(
                k.public_blob.as_deref(),
                public.split_whitespace().nth(1),
                "{name}"
            );
        }
        let rsa = dir.path().join("pem");
        assert!(
            Command::new("ssh-keygen")
                .args([
                    "-q", "-t", "rsa", "-b", "1024", "-m", "PEM", "-N", "pw-long", "-f"
                ])
                .arg(&rsa)
                .status()
                .unwrap()
                .success()
        );
        let k = inspect_key(&std::fs::read_to_string(&rsa).unwrap()).unwrap();
        assert!(k.encrypted);
        assert_eq!(inspect_key("not a key"), None);
        assert_eq!(
            inspect_key(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n!!!\n-----END OPENSSH PRIVATE KEY-----\n"
            ),
            None
        );
    }

    #[test]
    fn askpass_counts_as_ssh_decides() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        // (No terminal in tests: stdin is not one.)
        if std::io::stdin().is_terminal() {
            return;
        }
        assert!(can_ask(env(&[
            ("SSH_ASKPASS", "/bin/x"),
            ("SSH_ASKPASS_REQUIRE", "force")
        ])));
        assert!(can_ask(env(&[
            ("SSH_ASKPASS", "/bin/x"),
            ("DISPLAY", ":0")
        ])));
        assert!(!can_ask(env(&[("SSH_ASKPASS", "/bin/x")])));
        assert!(!can_ask(env(&[
            ("SSH_ASKPASS", "/bin/x"),
            ("SSH_ASKPASS_REQUIRE", "never"),
            ("DISPLAY", ":0")
        ])));
        assert!(!can_ask(env(&[("SSH_ASKPASS_REQUIRE", "force")])));
    }
}
