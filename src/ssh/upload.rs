//! Putting bytes and local files on a host as root: a fresh file in a private folder beside the
//! destination, checked on the host against the planned sha256, given its owner and mode there,
//! renamed out into place; skipped when the remote file is already identical.

use super::exec::Input;
use super::other;
use super::session::SshTransport;
use crate::hostid::HostId;
use crate::transport::{FileAttrs, RemoteCommand, TransportError};
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Result of `upload_file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// sha256 (hex) of the file now at the remote path.
    pub sha256: String,
    /// The remote file already had this content; nothing was sent.
    pub skipped: bool,
}

/// Shell shared by the scripts below. Arguments: `$1` destination, `$2` mode (octal), `$3`
/// sha256 (the planned one), `$4` chown argument or empty, `$5`/`$6` the owner's user and group
/// as `find` takes them. `fresh` makes a private folder (`mktemp -d`: root's, 0700) beside the
/// destination and names `$tmp` in it: the bytes are written, checked, chown-ed and chmod-ed
/// there, where no other user can reach them, even once they own the file. `place` gives
/// `$tmp` its owner and mode (`chown -h`: never through a link) and renames it out over the
/// destination (`mv -T`: a folder or link planted at the destination is replaced, never
/// followed). The traps remove the folder whatever happens, also when the connection drops
/// (HUP) or the command is killed (TERM).
const PLACE: &str = r#"set -e
umask 077
dst=$1 mode=$2 sum=$3 owner=$4
fresh() {
  tmpd=$(mktemp -d -- "$dst.k0sform-XXXXXX")
  trap 'rm -rf -- "$tmpd"' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  tmp=$tmpd/f
}
sum_of() { sha256sum < "$1" | cut -d' ' -f1; }
place() {
  if [ -n "$owner" ]; then chown -h -- "$owner" "$tmp"; fi
  chmod -- "$mode" "$tmp"
  mv -fT -- "$tmp" "$dst"
}
"#;

/// Prints `same` when the destination already has the bytes, owner and mode: a regular file,
/// not a link. Same bytes with another owner or mode: a copy made on the host gets them.
const CHECK: &str = r#"[ -f "$dst" ] && [ ! -L "$dst" ] || exit 0
[ "$(sum_of "$dst")" = "$sum" ] || exit 0
if [ -n "$(find "$dst" -maxdepth 0 -type f -perm "$mode" -user "$5" -group "$6")" ]; then
  echo same
  exit 0
fi
fresh
cp -- "$dst" "$tmp"
[ "$(sum_of "$tmp")" = "$sum" ] || exit 0
place
echo same"#;

/// Stdin to a fresh file in a private folder beside the destination, checked against the
/// planned sha256, placed only when it matches.
const PUT: &str = r#"mkdir -p -- "$(dirname -- "$dst")"
fresh
cat > "$tmp"
got=$(sum_of "$tmp")
if [ "$got" != "$sum" ]; then
  echo "sha256 mismatch after upload: expected $sum, got $got" >&2
  exit 3
fi
place"#;

/// The argv of one of the scripts above for `remote` with `attrs`.
fn place_command(
    script: &str,
    name: &str,
    remote: &str,
    sha256: &str,
    attrs: &FileAttrs,
) -> RemoteCommand {
    let mode = format!("{:o}", attrs.mode);
    // Without an owner the file stays root's (uid and gid 0), as a fresh file of root is.
    let user = attrs.user.clone().unwrap_or_else(|| "0".into());
    let group = attrs.group.clone().unwrap_or_else(|| "0".into());
    RemoteCommand::new([
        "sh".to_string(),
        "-c".into(),
        format!("{PLACE}{script}"),
        name.into(),
        remote.into(),
        mode,
        sha256.into(),
        attrs.chown_spec().unwrap_or_default(),
        user,
        group,
    ])
}

impl SshTransport {
    /// Write `local` to `remote` (with `attrs`, as root): streamed to a fresh temp file beside
    /// it, sha256-checked on the host, given its owner and mode, then renamed into place, so a
    /// half upload is never at `remote`. Skipped when the remote file already has the same
    /// sha256 (its owner and mode are still set, on a copy). `Transport::upload_file` returns
    /// only the sha256; this also says whether it was skipped.
    pub async fn upload_file_report(
        &self,
        host: &HostId,
        local: &Path,
        remote: &str,
        attrs: &FileAttrs,
    ) -> Result<Uploaded, TransportError> {
        self.upload(host, local, remote, attrs, true).await
    }

    /// `upload_file_report`; with `check` false the host is not asked first whether `remote`
    /// already has the bytes (`Transport::upload_new_file`): one session, not two.
    pub(super) async fn upload(
        &self,
        host: &HostId,
        local: &Path,
        remote: &str,
        attrs: &FileAttrs,
        check: bool,
    ) -> Result<Uploaded, TransportError> {
        let (local_sum, size) = local_sha256(local)
            .await
            .map_err(|e| other(host, format!("reading {}: {e}", local.display())))?;
        // The host checks the planned sha256 (when there is one), not the hash of the moment:
        // a file changed while it is sent is refused on the host, before it is moved.
        attrs
            .check(&local_sum)
            .map_err(|e| other(host, format!("{}: {e}", local.display())))?;
        let sha256 = attrs.sha256.clone().unwrap_or(local_sum);
        if check {
            let check = place_command(CHECK, "k0sform-upload-check", remote, &sha256, attrs)
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
        }

        // Generous: 2 minutes plus 1 s per MiB.
        let secs = 120 + size / (1024 * 1024);
        let put = place_command(PUT, "k0sform-upload", remote, &sha256, attrs)
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

    /// `Transport::write_file`: `data` to `path` with `attrs`, as root, atomically.
    pub(super) async fn write_file_atomic(
        &self,
        host: &HostId,
        path: &str,
        data: Vec<u8>,
        attrs: &FileAttrs,
    ) -> Result<(), TransportError> {
        let sha256 = crate::hash::sha256_hex(&data);
        attrs
            .check(&sha256)
            .map_err(|e| other(host, format!("{path}: {e}")))?;
        let cmd = place_command(PUT, "k0sform-write", path, &sha256, attrs)
            .timeout(Duration::from_secs(60));
        let out = self.run_with(host, &cmd, Input::Bytes(&data)).await?;
        if !out.success() {
            return Err(other(host, format!("writing {path}: {}", out.error_line())));
        }
        Ok(())
    }
}

async fn local_sha256(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = tokio::fs::File::open(path).await?;
    let mut h = crate::hash::Hasher::default();
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
    Ok((h.hex(), size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// Runs `script` (after `PLACE`) locally with a real `sh`, `input` on stdin.
    fn run(script: &str, dst: &Path, sum: &str, input: &[u8]) -> std::process::Output {
        let cmd = place_command(
            script,
            "k0sform-test",
            dst.to_str().unwrap(),
            sum,
            &FileAttrs::mode(0o640),
        );
        let mut child = Command::new(&cmd.argv[0])
            .args(&cmd.argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Bytes that are not the planned ones (a file replaced after it was hashed) are refused
    /// on the host and nothing is moved into place; the private folder is gone either way.
    #[test]
    fn put_checks_the_planned_sha256_before_the_move() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dst = d.path().join("app.conf");
        std::fs::write(&dst, "old\n").unwrap();
        let planned = crate::hash::sha256_hex(b"planned\n");

        let out = run(PUT, &dst, &planned, b"replaced\n");
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("sha256 mismatch"),
            "{out:?}"
        );
        assert_eq!(std::fs::read_to_string(&dst).unwrap(), "old\n");
        assert_eq!(names(d.path()), ["app.conf"]);

        let out = run(PUT, &dst, &planned, b"planned\n");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(std::fs::read_to_string(&dst).unwrap(), "planned\n");
        let mode = std::fs::metadata(&dst).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        assert_eq!(names(d.path()), ["app.conf"]);
    }

    /// The file is written, chown-ed and chmod-ed in a folder only root can enter.
    #[test]
    fn the_staging_folder_is_private() {
        let d = tempfile::tempdir().unwrap();
        let dst = d.path().join("bin");
        let out = run(
            r#"fresh
: > "$tmp"
stat -c '%a %F' -- "$tmpd"
[ "$(dirname -- "$tmp")" = "$tmpd" ] && echo inside"#,
            &dst,
            "",
            b"",
        );
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "700 directory\ninside\n"
        );
        assert_eq!(names(d.path()), Vec::<String>::new());
    }
}
