//! k0s backup archives: what `k0s backup` writes (k0s `pkg/backup/manager_unix.go`,
//! `util_unix.go`): a gzipped tar with `etcd-snapshot.db`, the data dir's `pki/`, `manifests/`,
//! `images/` and `helmhome/` relative to the data dir, and the node's `k0s.yaml`. Plus the
//! plain remote commands around `k0s backup`/`k0s restore`: a private scratch directory, finding
//! the archive k0s named, reading it back, removing it.

use super::K0sError;
use crate::transport::RemoteCommand;
use std::io::Read;
use std::time::Duration;

/// The etcd snapshot inside an archive (k0s `pkg/backup/etcd_unix.go`).
pub const ETCD_SNAPSHOT: &str = "etcd-snapshot.db";
/// The node configuration inside an archive (k0s `pkg/backup/config_unix.go`).
pub const CONFIG: &str = "k0s.yaml";

/// What k0sform checks in an archive before it restores from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupArchive {
    /// Entry names in archive order.
    pub entries: Vec<String>,
    /// `spec.storage.etcd.peerAddress` of the archived k0s.yaml: `k0s restore` registers the
    /// restored etcd member at this address, whatever host it runs on.
    pub peer_address: Option<String>,
}

/// The largest k0s.yaml read from an archive (a ClusterConfig is a few KiB).
const MAX_CONFIG: u64 = 1 << 20;

/// Read a k0s backup archive (gzip, tar). It must hold a k0s.yaml and, unless that config uses
/// kine, the etcd snapshot: `k0s restore` fails without them, after k0sform has prepared a host.
pub fn read_archive(gz: impl Read) -> Result<BackupArchive, K0sError> {
    const WHAT: &str = "the backup archive";
    let bad = |m: &str| K0sError::parse(WHAT, m);
    let mut tar = flate2::read::GzDecoder::new(gz);
    let mut entries = Vec::new();
    let mut config: Option<String> = None;
    // A PAX or GNU long-name record names the entry after it.
    let mut long_name: Option<String> = None;
    loop {
        let mut header = [0u8; 512];
        if let Err(e) = tar.read_exact(&mut header) {
            return Err(bad(&match e.kind() {
                std::io::ErrorKind::UnexpectedEof if entries.is_empty() => {
                    "empty or truncated".to_string()
                }
                std::io::ErrorKind::UnexpectedEof => "truncated (no end-of-archive marker)".into(),
                _ => format!("not gzip-compressed: {e}"),
            }));
        }
        if header.iter().all(|&b| b == 0) {
            break;
        }
        // The checksum is taken with its own field read as spaces.
        let sum: u32 = header
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u32::from(b)
                }
            })
            .sum();
        if octal(&header[148..156]) != Some(u64::from(sum)) {
            return Err(bad("not a tar archive (header checksum)"));
        }
        let size = octal(&header[124..136]).ok_or_else(|| bad("a tar header has no size"))?;
        let kind = header[156];
        let mut name = text(&header[0..100]);
        if &header[257..262] == b"ustar" {
            let prefix = text(&header[345..500]);
            if !prefix.is_empty() {
                name = format!("{prefix}/{name}");
            }
        }
        let padded = size.div_ceil(512) * 512;
        match kind {
            b'x' | b'L' => {
                let body = read_body(&mut tar, size, padded).map_err(|_| bad("truncated"))?;
                long_name = if kind == b'L' {
                    Some(text(&body))
                } else {
                    pax_path(&body)
                };
                continue;
            }
            b'g' => {
                skip(&mut tar, padded).map_err(|_| bad("truncated"))?;
                continue;
            }
            _ => {}
        }
        if let Some(n) = long_name.take() {
            name = n;
        }
        let name = name
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_string();
        if name == CONFIG && matches!(kind, b'0' | 0) && size <= MAX_CONFIG {
            let body = read_body(&mut tar, size, padded).map_err(|_| bad("truncated"))?;
            config = Some(String::from_utf8_lossy(&body).into_owned());
        } else {
            skip(&mut tar, padded).map_err(|_| bad("truncated"))?;
        }
        entries.push(name);
    }
    let config = config.ok_or_else(|| bad("no k0s.yaml in it (not a k0s backup)"))?;
    let doc: serde_json::Value =
        serde_saphyr::from_str(&config).map_err(|_| bad("its k0s.yaml is not YAML"))?;
    let storage = doc.pointer("/spec/storage");
    let kine = storage
        .and_then(|s| s.get("type"))
        .and_then(|t| t.as_str())
        .is_some_and(|t| t == "kine");
    if !kine && !entries.iter().any(|e| e == ETCD_SNAPSHOT) {
        return Err(bad("no etcd-snapshot.db in it"));
    }
    let peer_address = storage
        .and_then(|s| s.pointer("/etcd/peerAddress"))
        .and_then(|p| p.as_str())
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    Ok(BackupArchive {
        entries,
        peer_address,
    })
}

fn octal(field: &[u8]) -> Option<u64> {
    let s = text(field);
    let s = s.trim_matches(|c: char| c == ' ' || c == '\0');
    if s.is_empty() {
        return None;
    }
    u64::from_str_radix(s, 8).ok()
}

fn text(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// The `path` record of a PAX extended header (`<len> path=<value>\n` records).
fn pax_path(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    text.lines().find_map(|l| {
        let (_, rec) = l.split_once(' ')?;
        rec.strip_prefix("path=").map(str::to_string)
    })
}

/// An entry's `size` bytes, its padding to `padded` consumed.
fn read_body(r: &mut impl Read, size: u64, padded: u64) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    r.take(padded).read_to_end(&mut body)?;
    if (body.len() as u64) < padded {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    body.truncate(size as usize);
    Ok(body)
}

fn skip(r: &mut impl Read, n: u64) -> std::io::Result<()> {
    let copied = std::io::copy(&mut r.take(n), &mut std::io::sink())?;
    if copied < n {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// The local file name of a backup: k0s's `k0s_backup_` prefix (which `k0s restore` strips when
/// it names the restored k0s.yaml), the cluster name (anything but letters, digits, `.`, `-` and
/// `_` becomes `_`) and the UTC time, e.g. `k0s_backup_prod_2026-12-03T10_15_00Z.tar.gz`.
pub fn archive_name(cluster: &str, at: std::time::SystemTime) -> String {
    let safe: String = cluster
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let time = humantime::format_rfc3339_seconds(at)
        .to_string()
        .replace(':', "_");
    format!("k0s_backup_{}_{time}.tar.gz", safe.trim_start_matches('.'))
}

const QUICK: Duration = Duration::from_secs(30);

/// `mkdir -m 0700 <dir>`: a scratch directory only root reads; fails if anything is there.
pub fn make_private_dir(dir: &str) -> RemoteCommand {
    RemoteCommand::new(["mkdir", "-m", "0700", "--", dir]).timeout(QUICK)
}

/// The archives `k0s backup` left in `dir`, one path per line.
pub fn list_archives(dir: &str) -> RemoteCommand {
    RemoteCommand::new([
        "find",
        dir,
        "-maxdepth",
        "1",
        "-type",
        "f",
        "-name",
        "k0s_backup_*.tar.gz",
    ])
    .timeout(QUICK)
}

/// The archive paths `list_archives` printed; exactly one is expected.
pub fn parse_archive_list(out: &str) -> Result<String, K0sError> {
    let paths: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match paths.as_slice() {
        [one] => Ok((*one).to_string()),
        [] => Err(K0sError::parse(
            "k0s backup's output",
            "no archive was written",
        )),
        _ => Err(K0sError::parse(
            "k0s backup's output",
            format!("{} archives instead of one", paths.len()),
        )),
    }
}

/// `sha256sum <file>`: the host's own digest, compared with what arrives here.
pub fn sha256sum(path: &str) -> RemoteCommand {
    RemoteCommand::new(["sha256sum", "--", path]).timeout(Duration::from_secs(600))
}

/// The digest `sha256sum` printed.
pub fn parse_sha256sum(out: &str) -> Result<String, K0sError> {
    let digest = out.split_whitespace().next().unwrap_or("");
    if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(digest.to_ascii_lowercase())
    } else {
        Err(K0sError::parse("sha256sum's output", "no sha256 digest"))
    }
}

/// `cat <file>`: the archive's bytes on stdout.
pub fn read_file(path: &str) -> RemoteCommand {
    RemoteCommand::new(["cat", "--", path]).timeout(Duration::from_secs(1800))
}

/// `rm -rf <dir>`: the scratch directory and what k0s left in it.
pub fn remove_dir(dir: &str) -> RemoteCommand {
    RemoteCommand::new(["rm", "-rf", "--", dir]).timeout(QUICK)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tar.gz with these (name, content) entries, as Go's archive/tar writes them.
    pub(crate) fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
        use std::io::Write;
        let mut tar = Vec::new();
        for (name, body) in files {
            let mut h = [0u8; 512];
            h[..name.len()].copy_from_slice(name.as_bytes());
            h[100..107].copy_from_slice(b"0000644");
            h[124..135].copy_from_slice(format!("{:011o}", body.len()).as_bytes());
            h[156] = if name.ends_with('/') { b'5' } else { b'0' };
            h[257..263].copy_from_slice(b"ustar\0");
            h[263..265].copy_from_slice(b"00");
            h[148..156].copy_from_slice(b"        ");
            let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
            h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
            tar.extend_from_slice(&h);
            tar.extend_from_slice(body);
            tar.resize(tar.len().div_ceil(512) * 512, 0);
        }
        tar.resize(tar.len() + 1024, 0);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&tar).unwrap();
        gz.finish().unwrap()
    }

    const CONFIG_YAML: &[u8] =
        b"apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  storage:\n    etcd:\n      peerAddress: 10.0.0.1\n";

    #[test]
    fn reads_a_k0s_archive() {
        let a = archive(&[
            (ETCD_SNAPSHOT, b"snap"),
            ("pki/", b""),
            ("pki/ca.crt", b"-----BEGIN CERTIFICATE-----"),
            (CONFIG, CONFIG_YAML),
        ]);
        let got = read_archive(a.as_slice()).expect("reads");
        assert_eq!(got.entries, [ETCD_SNAPSHOT, "pki", "pki/ca.crt", CONFIG]);
        assert_eq!(got.peer_address.as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn refuses_what_k0s_restore_would_refuse() {
        let no_config = archive(&[(ETCD_SNAPSHOT, b"snap")]);
        assert!(
            read_archive(no_config.as_slice())
                .unwrap_err()
                .to_string()
                .contains("no k0s.yaml")
        );
        let no_snapshot = archive(&[(CONFIG, CONFIG_YAML)]);
        assert!(
            read_archive(no_snapshot.as_slice())
                .unwrap_err()
                .to_string()
                .contains("etcd-snapshot.db")
        );
        let kine = archive(&[(CONFIG, b"spec:\n  storage:\n    type: kine\n")]);
        assert_eq!(read_archive(kine.as_slice()).unwrap().peer_address, None);
        assert!(read_archive(&b"not gzip at all"[..]).is_err());
        let full = archive(&[(ETCD_SNAPSHOT, &[7u8; 2000]), (CONFIG, CONFIG_YAML)]);
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(full.as_slice())
            .read_to_end(&mut raw)
            .unwrap();
        let mut cut = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut cut, &raw[..1500]).unwrap();
        let cut = cut.finish().unwrap();
        assert!(
            read_archive(cut.as_slice())
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
        let mut garbage = vec![b'x'; 1024];
        garbage[..4].copy_from_slice(b"junk");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &garbage).unwrap();
        let gz = gz.finish().unwrap();
        assert!(
            read_archive(gz.as_slice())
                .unwrap_err()
                .to_string()
                .contains("not a tar")
        );
    }

    #[test]
    fn archive_names_carry_cluster_and_utc_time() {
        let at = std::time::UNIX_EPOCH + Duration::from_secs(1_796_292_900);
        assert_eq!(
            archive_name("prod-eu1", at),
            "k0s_backup_prod-eu1_2026-12-03T10_15_00Z.tar.gz"
        );
        assert_eq!(
            archive_name("../a b/c", at),
            "k0s_backup__a_b_c_2026-12-03T10_15_00Z.tar.gz"
        );
    }

    #[test]
    fn remote_outputs_are_read_strictly() {
        assert_eq!(
            parse_archive_list("/tmp/x/k0s_backup_2026.tar.gz\n").unwrap(),
            "/tmp/x/k0s_backup_2026.tar.gz"
        );
        assert!(parse_archive_list("").is_err());
        assert!(parse_archive_list("/a\n/b\n").is_err());
        let d = "a".repeat(64);
        assert_eq!(parse_sha256sum(&format!("{d}  /tmp/x\n")).unwrap(), d);
        assert!(parse_sha256sum("sha256sum: /tmp/x: No such file").is_err());
    }
}
