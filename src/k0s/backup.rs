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
    /// How many entries the archive holds.
    pub entries: usize,
    /// `spec.storage.etcd.peerAddress` of the archived k0s.yaml: `k0s restore` registers the
    /// restored etcd member at this address, whatever host it runs on.
    pub peer_address: Option<String>,
}

/// The largest k0s.yaml read from an archive (a ClusterConfig is a few KiB).
const MAX_CONFIG: u64 = 1 << 20;
/// Most bytes the tar reader may take in to find the next entry: its header and whatever
/// describes it (GNU long name and link, PAX records, sparse maps), which it holds in memory.
/// k0s writes none of these beyond a path or a size.
pub const MAX_ENTRY_METADATA: u64 = 1 << 20;
/// Most entries an archive may hold. A k0s backup holds the data dir's pki, manifests, images
/// and helm home: hundreds of files.
pub const MAX_ENTRIES: usize = 100_000;
/// Most bytes an archive may unpack to, headers included: a k0s backup is the etcd snapshot
/// (etcd's quota is 8 GiB at most) and the data dir's small trees; a gzip bomb stops here.
pub const MAX_UNPACKED: u64 = 64 << 30;

/// Read a k0s backup archive (gzip, tar). It must hold a k0s.yaml and, unless that config uses
/// kine, the etcd snapshot: `k0s restore` fails without them, after k0sform has prepared a host.
/// The archive may come from a host: what the tar reader may hold for one entry is bounded
/// (`MAX_ENTRY_METADATA`), and so are the number of entries and the bytes it unpacks to
/// (`MAX_UNPACKED`); bodies are only streamed through.
pub fn read_archive(gz: impl Read) -> Result<BackupArchive, K0sError> {
    read_archive_within(gz, MAX_UNPACKED)
}

/// `read_archive` with `max_unpacked` for `MAX_UNPACKED`.
fn read_archive_within(gz: impl Read, max_unpacked: u64) -> Result<BackupArchive, K0sError> {
    const WHAT: &str = "the backup archive";
    let bad = |m: &str| K0sError::parse(WHAT, m);
    let meter = std::rc::Rc::new(Meter {
        left: std::cell::Cell::new(max_unpacked),
        max_unpacked,
        ..Meter::default()
    });
    let mut archive = tar::Archive::new(Metered {
        inner: flate2::read::GzDecoder::new(gz),
        meter: meter.clone(),
    });
    let mut iter = archive
        .entries()
        .map_err(|e| bad(&meter.explain(&e, false)))?;
    let mut entries = 0;
    let mut config: Option<String> = None;
    let mut snapshot = false;
    loop {
        meter.budget.set(Some(MAX_ENTRY_METADATA));
        let next = iter.next();
        meter.budget.set(None);
        let mut entry = match next {
            None => break,
            Some(Ok(e)) => e,
            Some(Err(e)) => return Err(bad(&meter.explain(&e, entries == 0))),
        };
        entries += 1;
        if entries > MAX_ENTRIES {
            return Err(bad(&format!("more than {MAX_ENTRIES} entries")));
        }
        // A sparse entry's holes are made up while reading, as long as its header says: a
        // few bytes could stand for petabytes of zeros. Go's archive/tar (k0s) writes none.
        if entry.header().entry_type().is_gnu_sparse() {
            return Err(bad("a sparse entry (k0s writes none)"));
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let name = name.trim_start_matches("./").trim_end_matches('/');
        let size = entry.size();
        // Refused before its body is streamed: an entry said to be larger than what the whole
        // archive may unpack to still has to come.
        if size > meter.left.get() {
            return Err(bad(&format!(
                "an entry of {size} bytes, more than the {max_unpacked} bytes an archive may unpack to"
            )));
        }
        let mut read = 0;
        if name == CONFIG && entry.header().entry_type().is_file() && size <= MAX_CONFIG {
            let mut body = Vec::new();
            read = (&mut entry)
                .take(MAX_CONFIG)
                .read_to_end(&mut body)
                .map_err(|e| bad(&meter.explain(&e, false)))? as u64;
            config = Some(String::from_utf8_lossy(&body).into_owned());
        }
        snapshot |= name == ETCD_SNAPSHOT;
        read += std::io::copy(&mut entry, &mut std::io::sink())
            .map_err(|e| bad(&meter.explain(&e, false)))?;
        if read < size {
            return Err(bad("truncated"));
        }
    }
    if meter.eof.get() {
        return Err(bad(if entries == 0 {
            "empty or truncated"
        } else {
            "truncated (no end-of-archive marker)"
        }));
    }
    let config = config.ok_or_else(|| bad("no k0s.yaml in it (not a k0s backup)"))?;
    let doc: serde_json::Value =
        serde_saphyr::from_str(&config).map_err(|_| bad("its k0s.yaml is not YAML"))?;
    let storage = doc.pointer("/spec/storage");
    let kine = storage
        .and_then(|s| s.get("type"))
        .and_then(|t| t.as_str())
        .is_some_and(|t| t == "kine");
    if !kine && !snapshot {
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

/// What `Metered` saw of the decompressed stream.
#[derive(Default)]
struct Meter {
    /// Bytes the tar reader may still take in before it returns the next entry; `None` while
    /// an entry's body is read.
    budget: std::cell::Cell<Option<u64>>,
    /// The budget ran out.
    over: std::cell::Cell<bool>,
    /// The stream ended.
    eof: std::cell::Cell<bool>,
    /// Decompressed bytes the archive may still unpack to (`MAX_UNPACKED` at first).
    left: std::cell::Cell<u64>,
    max_unpacked: u64,
    /// `left` ran out.
    too_big: std::cell::Cell<bool>,
    /// How the decompressor failed (not gzip, damaged, cut short).
    gzip: std::cell::Cell<Option<std::io::ErrorKind>>,
}

impl Meter {
    /// The reason a read of the archive failed, told from what the stream showed.
    fn explain(&self, e: &std::io::Error, first: bool) -> String {
        if self.over.get() {
            format!("an entry's header records (long name, PAX) exceed {MAX_ENTRY_METADATA} bytes")
        } else if self.too_big.get() {
            format!("it unpacks to more than {} bytes", self.max_unpacked)
        } else if let Some(kind) = self.gzip.get()
            && kind != std::io::ErrorKind::UnexpectedEof
        {
            format!("not gzip-compressed, or damaged: {e}")
        } else if self.eof.get() || self.gzip.get().is_some() {
            if first {
                "empty or truncated"
            } else {
                "truncated"
            }
            .to_string()
        } else {
            format!("not a tar archive, or damaged: {e}")
        }
    }
}

/// The decompressed archive as the tar reader takes it in, metered (`Meter`).
struct Metered<R> {
    inner: R,
    meter: std::rc::Rc<Meter>,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let m = &self.meter;
        let want = match m.budget.get() {
            Some(0) if !buf.is_empty() => {
                m.over.set(true);
                return Err(std::io::Error::other("entry metadata over its limit"));
            }
            Some(left) => buf.len().min(usize::try_from(left).unwrap_or(usize::MAX)),
            None => buf.len(),
        };
        if m.left.get() == 0 && want > 0 {
            m.too_big.set(true);
            return Err(std::io::Error::other(
                "archive over its unpacked size limit",
            ));
        }
        let want = want.min(usize::try_from(m.left.get()).unwrap_or(usize::MAX));
        let n = self
            .inner
            .read(&mut buf[..want])
            .inspect_err(|e| m.gzip.set(Some(e.kind())))?;
        if n == 0 && want > 0 {
            m.eof.set(true);
        }
        m.left.set(m.left.get() - n as u64);
        if let Some(left) = m.budget.get() {
            m.budget.set(Some(left - n as u64));
        }
        Ok(n)
    }
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

/// The largest archive taken from a host: an etcd snapshot (etcd's quota is at most 8 GiB)
/// and the data dir's pki, manifests, images (airgap bundles) and helm home.
pub const MAX_ARCHIVE: u64 = 16 << 30;

/// `cat <file>`: the archive's bytes on stdout, streamed (`Transport::run_into`), up to
/// `MAX_ARCHIVE`.
pub fn read_file(path: &str) -> RemoteCommand {
    RemoteCommand::new(["cat", "--", path])
        .timeout(Duration::from_secs(3600))
        .output_limit(MAX_ARCHIVE)
}

/// `rm -rf <dir>`: the scratch directory and what k0s left in it.
pub fn remove_dir(dir: &str) -> RemoteCommand {
    RemoteCommand::new(["rm", "-rf", "--", dir]).timeout(QUICK)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tar.gz with these (name, content) entries in ustar headers, as Go's archive/tar writes
    /// them (a name too long for the header goes in a GNU long-name entry before it).
    pub(crate) fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut tar = tar::Builder::new(gz);
        for (name, body) in files {
            let mut h = tar::Header::new_ustar();
            h.set_mode(0o644);
            h.set_size(body.len() as u64);
            h.set_entry_type(if name.ends_with('/') {
                tar::EntryType::Directory
            } else {
                tar::EntryType::Regular
            });
            tar.append_data(&mut h, name, *body).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    }

    const CONFIG_YAML: &[u8] =
        b"apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  storage:\n    etcd:\n      peerAddress: 10.0.0.1\n";

    #[test]
    fn what_an_archive_unpacks_to_is_capped() {
        let valid = [(CONFIG, CONFIG_YAML), (ETCD_SNAPSHOT, b"snap".as_slice())];
        // Twenty empty entries: 512-byte headers, nothing else, 12 KiB in all.
        let names: Vec<String> = (0..20).map(|i| format!("manifests/f{i}")).collect();
        let mut many: Vec<(&str, &[u8])> = valid.to_vec();
        many.extend(names.iter().map(|n| (n.as_str(), b"".as_slice())));
        let many = archive(&many);
        assert!(read_archive_within(many.as_slice(), 64 << 10).is_ok());
        let e = read_archive_within(many.as_slice(), 4096).unwrap_err();
        assert!(
            e.to_string().contains("it unpacks to more than 4096 bytes"),
            "{e}"
        );
        // One entry larger than the whole archive may be is refused before its body is read.
        let zeros = vec![0u8; 1 << 20];
        let mut big: Vec<(&str, &[u8])> = valid.to_vec();
        big.push(("images/bundle.tar", &zeros));
        let big = archive(&big);
        assert!(read_archive_within(big.as_slice(), 2 << 20).is_ok());
        let e = read_archive_within(big.as_slice(), 64 << 10).unwrap_err();
        assert!(
            e.to_string().contains(
                "an entry of 1048576 bytes, more than the 65536 bytes an archive may unpack to"
            ),
            "{e}"
        );
    }

    #[test]
    fn reads_a_k0s_archive() {
        let a = archive(&[
            (ETCD_SNAPSHOT, b"snap"),
            ("pki/", b""),
            ("pki/ca.crt", b"-----BEGIN CERTIFICATE-----"),
            (CONFIG, CONFIG_YAML),
        ]);
        let got = read_archive(a.as_slice()).expect("reads");
        assert_eq!(got.entries, 4);
        assert_eq!(got.peer_address.as_deref(), Some("10.0.0.1"));
        // Names as tar writes them (`./`), long names (a GNU long-name entry, a PAX path).
        let long = format!("helmhome/cache/{}.tgz", "x".repeat(300));
        let a = archive(&[
            ("./etcd-snapshot.db", b"snap"),
            (&long, b"chart"),
            ("./k0s.yaml", CONFIG_YAML),
        ]);
        assert_eq!(read_archive(a.as_slice()).expect("reads").entries, 3);
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut tar = tar::Builder::new(gz);
        for (name, body) in [(ETCD_SNAPSHOT, &b"snap"[..]), (CONFIG, CONFIG_YAML)] {
            tar.append_pax_extensions([("path", format!("./{name}").as_bytes())])
                .unwrap();
            let mut h = tar::Header::new_ustar();
            h.set_size(body.len() as u64);
            tar.append_data(&mut h, "the-header-name", body).unwrap();
        }
        let a = tar.into_inner().unwrap().finish().unwrap();
        let got = read_archive(a.as_slice()).expect("PAX paths win");
        assert_eq!(got.peer_address.as_deref(), Some("10.0.0.1"));
    }

    /// Counts the compressed bytes the reader took.
    struct Counting<'a>(&'a [u8], usize);

    impl Read for Counting<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1 += n;
            Ok(n)
        }
    }

    /// A tar.gz of a header of `kind` claiming `claimed` bytes, then `body` bytes of `fill`
    /// (written in pieces: nothing here holds the whole body).
    fn hostile(kind: tar::EntryType, claimed: u64, body: usize, fill: u8) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut h = tar::Header::new_gnu();
        h.set_path("././@LongLink").unwrap();
        h.set_entry_type(kind);
        h.set_size(claimed);
        h.set_cksum();
        gz.write_all(h.as_bytes()).unwrap();
        let piece = vec![fill; 1 << 16];
        let mut left = body;
        while left > 0 {
            let n = left.min(piece.len());
            gz.write_all(&piece[..n]).unwrap();
            left -= n;
        }
        gz.finish().unwrap()
    }

    /// Issue 28, item 6: a long name or PAX record claiming a GiB, with 64 MiB of it present
    /// (a few hundred KB compressed), is refused after the reader took in at most
    /// `MAX_ENTRY_METADATA` of it: what it can hold stays bounded, and it stops early.
    #[test]
    fn hostile_header_records_are_refused_early() {
        for kind in [
            tar::EntryType::GNULongName,
            tar::EntryType::GNULongLink,
            tar::EntryType::XHeader,
        ] {
            let fill = if kind == tar::EntryType::XHeader {
                b'9'
            } else {
                b'a'
            };
            let a = hostile(kind, 1 << 30, 64 << 20, fill);
            let mut input = Counting(&a, 0);
            let e = read_archive(&mut input).expect_err("refused").to_string();
            assert!(e.contains("exceed 1048576 bytes"), "{kind:?}: {e}");
            assert!(
                input.1 < a.len() / 8,
                "{kind:?}: read {} of {} compressed bytes",
                input.1,
                a.len()
            );
        }
        // Within the limit, the records of one entry still pass (then the archive ends).
        let within = MAX_ENTRY_METADATA - 1024;
        let a = hostile(tar::EntryType::GNULongName, within, within as usize, b'a');
        let e = read_archive(a.as_slice())
            .expect_err("truncated")
            .to_string();
        assert!(e.contains("truncated"), "{e}");
    }

    /// A sparse entry whose one hole is a TiB long is refused at once, not read through.
    #[test]
    fn sparse_entries_are_refused() {
        use std::io::Write;
        let mut h = tar::Header::new_gnu();
        h.set_path(ETCD_SNAPSHOT).unwrap();
        h.set_entry_type(tar::EntryType::GNUSparse);
        h.set_size(0);
        let gnu = h.as_gnu_mut().unwrap();
        gnu.sparse[0].set_offset(1 << 40);
        gnu.sparse[0].set_length(0);
        gnu.set_real_size(1 << 40);
        h.set_cksum();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(h.as_bytes()).unwrap();
        gz.write_all(&[0; 1024]).unwrap();
        let a = gz.finish().unwrap();
        let started = std::time::Instant::now();
        let e = read_archive(a.as_slice()).expect_err("refused").to_string();
        assert!(e.contains("sparse"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// Issue 28, item 6: an archive of more than `MAX_ENTRIES` (empty) entries is refused once
    /// it passes the count.
    #[test]
    fn too_many_entries_are_refused() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut h = tar::Header::new_ustar();
        h.set_size(0);
        for i in 0..=MAX_ENTRIES + 10 {
            h.set_path(format!("manifests/{i}")).unwrap();
            h.set_cksum();
            gz.write_all(h.as_bytes()).unwrap();
        }
        gz.write_all(&[0; 1024]).unwrap();
        let a = gz.finish().unwrap();
        let e = read_archive(a.as_slice()).expect_err("refused").to_string();
        assert!(e.contains("more than 100000 entries"), "{e}");
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
