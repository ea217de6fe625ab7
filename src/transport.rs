//! The one door to the hosts. The probe and the executor talk to hosts only through `Transport`,
//! so both are testable without SSH and the same code runs against real hosts (`ssh::SshTransport`).

use crate::hostid::HostId;
use std::future::Future;
use std::time::Duration;

/// A command to run on a host: an argv, never a shell string. The transport quotes every
/// argument with one function, so hostile strings cannot run anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteCommand {
    pub argv: Vec<String>,
    /// Run as root (through `sudo -n` when the login user is not root).
    pub root: bool,
    /// Bytes fed to the command's stdin.
    pub stdin: Option<Vec<u8>>,
    /// Hard limit for the whole command on the remote side and locally.
    pub timeout: Duration,
    /// Environment variables set for the command (`env K=V … argv`).
    pub env: Vec<(String, String)>,
    /// How logs and errors name the command instead of `argv` (whose values may be secrets).
    pub shown_as: Option<String>,
    /// Most bytes of stdout taken from the command (`OUTPUT_LIMIT` unless set): past that the
    /// command fails, and a host cannot make k0sform hold or write more.
    pub output_limit: u64,
}

/// The stdout limit of a command that does not set its own (`RemoteCommand::output_limit`), and
/// the stderr limit of every command.
pub const OUTPUT_LIMIT: u64 = 16 << 20;

impl RemoteCommand {
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RemoteCommand {
            argv: argv.into_iter().map(Into::into).collect(),
            root: true,
            stdin: None,
            timeout: Duration::from_secs(60),
            env: Vec::new(),
            shown_as: None,
            output_limit: OUTPUT_LIMIT,
        }
    }
    /// Take up to `bytes` of stdout from the command instead of `OUTPUT_LIMIT`.
    pub fn output_limit(mut self, bytes: u64) -> Self {
        self.output_limit = bytes;
        self
    }
    /// Name the command `text` in logs and errors (its argv holds a secret).
    pub fn shown_as(mut self, text: impl Into<String>) -> Self {
        self.shown_as = Some(text.into());
        self
    }
    /// Run as the login user, never through sudo.
    pub fn as_login_user(mut self) -> Self {
        self.root = false;
        self
    }
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(data.into());
        self
    }
    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }
}

/// Permission bits and owner a written file gets while it is still a fresh temp file, before it
/// is renamed into place: nothing is ever chmod-ed or chown-ed by its final name, which a user
/// owning the folder could have turned into a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileAttrs {
    pub mode: u32,
    /// `chown` user (name or number); None keeps root.
    pub user: Option<String>,
    /// `chown` group (name or number); None keeps the user's (or root's) group.
    pub group: Option<String>,
    /// The sha256 (hex) the caller planned for the content: the host checks the bytes it got
    /// against this one, not against a hash taken at upload time, before anything is moved
    /// into place. None: the hash of the local bytes as they are read.
    pub sha256: Option<String>,
}

impl FileAttrs {
    /// Owned by root, with `mode`.
    pub fn mode(mode: u32) -> Self {
        FileAttrs {
            mode,
            user: None,
            group: None,
            sha256: None,
        }
    }
    /// Only content with this sha256 may be put in place (`sha256`).
    pub fn expecting(mut self, sha256: impl Into<String>) -> Self {
        self.sha256 = Some(sha256.into());
        self
    }
    /// Err(the message) when `got`, the sha256 of the bytes at hand, is not the one expected.
    pub fn check(&self, got: &str) -> Result<(), String> {
        match &self.sha256 {
            Some(want) if want != got => Err(format!(
                "the content has sha256 {got}, the plan expected {want} (it changed since planning)"
            )),
            _ => Ok(()),
        }
    }
    pub fn owned_by(mut self, user: Option<String>, group: Option<String>) -> Self {
        self.user = user;
        self.group = group;
        self
    }
    /// The `chown` argument (`user`, `user:group`, `:group`), when an owner is set.
    pub fn chown_spec(&self) -> Option<String> {
        match (&self.user, &self.group) {
            (Some(u), Some(g)) => Some(format!("{u}:{g}")),
            (Some(u), None) => Some(u.clone()),
            (None, Some(g)) => Some(format!(":{g}")),
            (None, None) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandOutput {
    /// Exit status; None when killed by a signal or the timeout.
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.status == Some(0)
    }
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    /// The last `Error: …` line k0s printed, else kubectl's last `error: …`, else the last stderr
    /// line.
    pub fn error_line(&self) -> String {
        let err = self.stderr_str();
        err.lines()
            .rev()
            .find(|l| l.starts_with("Error: "))
            // kubectl's own (`error: invalid argument …` above its `See 'kubectl … --help'`).
            .or_else(|| err.lines().rev().find(|l| l.starts_with("error: ")))
            .or_else(|| err.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .to_string()
    }
}

/// A command whose stdout went to a writer (`Transport::run_into`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Streamed {
    /// Exit status; None when killed by a signal or the timeout.
    pub status: Option<i32>,
    /// Bytes of stdout written.
    pub bytes: u64,
    /// Lower-case hex sha256 of those bytes.
    pub sha256: String,
    pub stderr: Vec<u8>,
}

impl Streamed {
    /// As `CommandOutput::error_line`.
    pub fn error_line(&self) -> String {
        CommandOutput {
            stderr: self.stderr.clone(),
            ..CommandOutput::default()
        }
        .error_line()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("{host}: cannot connect: {message}")]
    Unreachable { host: HostId, message: String },
    #[error("{host}: host key changed: recorded {expected}, offered {offered}")]
    HostKeyChanged {
        host: HostId,
        expected: String,
        offered: String,
    },
    /// A bastion the host is reached through offered another key than the one recorded for it.
    #[error("{host}: bastion {bastion} host key changed: recorded {expected}, offered {offered}")]
    BastionKeyChanged {
        host: HostId,
        bastion: HostId,
        expected: String,
        offered: String,
    },
    #[error("{host}: `{command}` timed out after {secs}s")]
    Timeout {
        host: HostId,
        command: String,
        secs: u64,
    },
    /// A command needing root could not go through `sudo -n` (no passwordless sudo right).
    #[error("{host}: user {user:?} cannot run commands as root with `sudo -n`: {message}")]
    Sudo {
        host: HostId,
        user: String,
        message: String,
    },
    #[error("{host}: {message}")]
    Other { host: HostId, message: String },
}

pub use crate::spec::LOCAL_HOST_KEY;

/// Do a recorded and an offered host key (fingerprints, or `LOCAL_HOST_KEY`) say the host is
/// another machine? Not when either side is `LOCAL_HOST_KEY`: a host reached locally and over
/// SSH has no two keys to compare, and its machine-id decides (a host that moves between the
/// two keeps its record when the machine-id is the recorded one).
pub fn host_keys_differ(recorded: &str, offered: &str) -> bool {
    recorded != offered && recorded != LOCAL_HOST_KEY && offered != LOCAL_HOST_KEY
}

/// The key a host was accepted with (`LOCAL_HOST_KEY` and no key for a `localhost` host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectedHost {
    /// `SHA256:…`
    pub fingerprint: String,
    /// `<type> <base64>`
    pub public_key: String,
    /// No key was recorded (or the old one was dropped on request): this run trusted it on first use.
    pub first_contact: bool,
    /// The bastion hops the connection went through, in hop order:
    /// `ssh.bastion` first, then its own bastion.
    pub bastions: Vec<ConnectedBastion>,
}

/// How one bastion hop's key is checked: strictly against `recorded_key` (the state's
/// `<type> <base64>`), unless `accept_changed` (`-replace` names the bastion, or its
/// `ssh.hostKey` pin names another key) or nothing is recorded: then trusted on first use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BastionTrust {
    pub recorded_key: Option<String>,
    pub accept_changed: bool,
}

/// The key a bastion hop was accepted with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectedBastion {
    pub id: HostId,
    /// `SHA256:…`
    pub fingerprint: String,
    /// `<type> <base64>`
    pub public_key: String,
    pub first_contact: bool,
}

pub trait Transport: Send + Sync {
    /// Open the connection to `host` at `target`, its host key checked, before anything runs on
    /// it (once per run; later calls return the first result). `recorded_key` is the state's
    /// `<type> <base64>` key: any other is refused (`HostKeyChanged`). With `accept_changed`
    /// (`-replace`, or a `ssh.hostKey` pin naming the new key) the recorded key is left out and
    /// the offered one trusted, subject to the pin. `bastions[i]` says how hop `i + 1` of
    /// `target.bastion` is checked, the same way. Transports that need no connection (test
    /// fakes) fail at once (the default).
    fn connect(
        &self,
        host: &HostId,
        target: &crate::spec::SshTarget,
        recorded_key: Option<&str>,
        accept_changed: bool,
        bastions: &[BastionTrust],
    ) -> impl Future<Output = Result<ConnectedHost, TransportError>> + Send {
        let _ = (target, recorded_key, accept_changed, bastions);
        async move {
            Err(TransportError::Other {
                host: host.clone(),
                message: "this transport cannot connect".into(),
            })
        }
    }

    /// Close `host`'s connection (nothing when there is none).
    fn close(&self, host: &HostId) -> impl Future<Output = ()> + Send {
        let _ = host;
        async {}
    }

    /// Run one command and collect its output. A non-zero exit is not an error here.
    fn run(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
    ) -> impl Future<Output = Result<CommandOutput, TransportError>> + Send;

    /// Start a command that runs until stopped (a watch) and send each line of its stdout to
    /// `lines` as it comes (without the newline; overlong lines are dropped). Returns the exit
    /// status when the command ends, or as soon as `lines` is closed. Dropping the future closes
    /// the session, and a command started through `k0s::watch_nodes` then ends on the host.
    /// Transports that cannot stream (the default) fail at once, and callers go on without.
    fn run_lines(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
        lines: tokio::sync::mpsc::Sender<String>,
    ) -> impl Future<Output = Result<Option<i32>, TransportError>> + Send {
        let _ = (cmd, lines);
        async move {
            Err(TransportError::Other {
                host: host.clone(),
                message: "this transport cannot stream a command's output".into(),
            })
        }
    }

    /// Run one command and write its stdout to `out` as it arrives (never held whole), hashing
    /// it on the way; at most `cmd.output_limit` bytes, past that this fails. For outputs of
    /// any size, such as a backup archive. A non-zero exit is not an error here. The default
    /// collects the output with `run` first (fine for tests and fakes).
    fn run_into(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
        out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
    ) -> impl Future<Output = Result<Streamed, TransportError>> + Send {
        async move {
            use tokio::io::AsyncWriteExt;
            let limit = cmd.output_limit;
            let o = self.run(host, cmd).await?;
            let other = |message: String| TransportError::Other {
                host: host.clone(),
                message,
            };
            if o.stdout.len() as u64 > limit {
                return Err(other(format!(
                    "the command wrote more than {limit} bytes of output"
                )));
            }
            out.write_all(&o.stdout)
                .await
                .map_err(|e| other(format!("writing output: {e}")))?;
            Ok(Streamed {
                status: o.status,
                bytes: o.stdout.len() as u64,
                sha256: crate::hash::sha256_hex(&o.stdout),
                stderr: o.stderr,
            })
        }
    }

    /// Write `data` to `path` on the host with `attrs`, atomically (a fresh temp file in the
    /// same folder, given its owner and mode, then renamed over `path`), as root.
    fn write_file(
        &self,
        host: &HostId,
        path: &str,
        data: Vec<u8>,
        attrs: &FileAttrs,
    ) -> impl Future<Output = Result<(), TransportError>> + Send;

    /// Put the local file `local` at `remote` with `attrs` (as root) and return the sha256 (hex)
    /// of what is now at `remote`. A real transport stages the upload, verifies the sha256 on the
    /// host and skips it when the remote file is already identical (`ssh::SshTransport`); this
    /// default reads the whole file and goes through `write_file` (fine for tests and fakes).
    fn upload_file(
        &self,
        host: &HostId,
        local: &std::path::Path,
        remote: &str,
        attrs: &FileAttrs,
    ) -> impl Future<Output = Result<String, TransportError>> + Send {
        async move {
            let data = tokio::fs::read(local)
                .await
                .map_err(|e| TransportError::Other {
                    host: host.clone(),
                    message: format!("reading {}: {e}", local.display()),
                })?;
            let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data));
            attrs.check(&sha).map_err(|message| TransportError::Other {
                host: host.clone(),
                message: format!("{remote}: {message}"),
            })?;
            self.write_file(host, remote, data, attrs).await?;
            Ok(sha)
        }
    }

    /// `upload_file` to a destination the caller knows holds nothing worth keeping (a staging
    /// path this run has not written yet): a real transport skips the round trip that asks
    /// whether the host already has the bytes. Whatever is there is replaced.
    fn upload_new_file(
        &self,
        host: &HostId,
        local: &std::path::Path,
        remote: &str,
        attrs: &FileAttrs,
    ) -> impl Future<Output = Result<String, TransportError>> + Send {
        self.upload_file(host, local, remote, attrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_line_is_k0s_or_kubectl_error_before_any_hint() {
        let out = |stderr: &str| CommandOutput {
            status: Some(1),
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
        };
        assert_eq!(
            out("error: invalid argument \"30s\" for \"--x\" flag\nSee 'kubectl drain --help' for usage.\n")
                .error_line(),
            "error: invalid argument \"30s\" for \"--x\" flag"
        );
        assert_eq!(
            out("time=… level=warning msg=x\nError: errors occurred during clean-up: y\n")
                .error_line(),
            "Error: errors occurred during clean-up: y"
        );
        assert_eq!(out("boom\n\n").error_line(), "boom");
    }
}
