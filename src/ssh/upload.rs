//! Putting bytes and local files on a host as root: a fresh temp file beside the destination,
//! checked by sha256 on the host, given its owner and mode, renamed into place; skipped when the
//! remote file is already identical.

use super::exec::Input;
use super::session::{SshTransport, other};
use crate::hostid::HostId;
use crate::transport::{FileAttrs, RemoteCommand, TransportError};
use sha2::{Digest, Sha256};
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
/// sha256, `$4` chown argument or empty, `$5`/`$6` the owner's user and group as `find` takes
/// them. `place` gives the fresh temp file `$tmp` its owner and mode (`chown -h`: never through
/// a link) and renames it over the destination (`mv -T`: a folder or link planted at the
/// destination is replaced, never followed). The traps remove the temp file whatever happens,
/// also when the connection drops (HUP) or the command is killed (TERM).
const PLACE: &str = r#"set -e
umask 077
dst=$1 mode=$2 sum=$3 owner=$4
fresh() {
  tmp=$(mktemp -- "$dst.k0sform-XXXXXX")
  trap 'rm -f -- "$tmp"' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
sum_of() { sha256sum < "$1" | cut -d' ' -f1; }
place() {
  if [ -n "$owner" ]; then chown -h -- "$owner" "$tmp"; fi
  chmod -- "$mode" "$tmp"
  mv -fT -- "$tmp" "$dst"
  trap - EXIT
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

/// Stdin to a fresh temp file beside the destination, checked, placed.
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
        let (sha256, size) = local_sha256(local)
            .await
            .map_err(|e| other(host, format!("reading {}: {e}", local.display())))?;
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
        let sha256 = hex::encode(Sha256::digest(&data));
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
