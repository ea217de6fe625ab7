//! Putting bytes and local files on a host as root: atomic writes (temp file + rename) and staged
//! uploads checked by sha256 on the host, skipped when the remote file is already identical.

use super::exec::Input;
use super::session::{SshTransport, other};
use crate::hostid::HostId;
use crate::transport::{RemoteCommand, TransportError};
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

impl SshTransport {
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

    /// `Transport::write_file`: `data` to `path` with `mode`, as root, atomically.
    pub(super) async fn write_file_atomic(
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
