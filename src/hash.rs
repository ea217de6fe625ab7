//! sha256 digests and the short fingerprints people read in plans ("3d12…", "SHA256:Qx…").
//! Full digests go into state and saved plans; the short forms are only for display.

use sha2::{Digest, Sha256};

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(sha256(bytes))
}

/// The raw sha256 of `bytes` (for fingerprints shown in other encodings).
pub fn sha256(bytes: impl AsRef<[u8]>) -> [u8; 32] {
    Sha256::digest(bytes.as_ref()).into()
}

/// A sha256 fed piece by piece (streams, large files), read out as lower-case hex.
#[derive(Default)]
pub struct Hasher(Sha256);

impl Hasher {
    pub fn update(&mut self, piece: &[u8]) {
        self.0.update(piece);
    }

    pub fn hex(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// Lower-case hex sha256 of the file at `path`, read in 64 KiB pieces (k0s binaries and
/// `files:` such as image bundles can be large).
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Hasher::default();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.hex())
}

/// A sha256 as hex: 64 hex digits (either case).
pub fn is_sha256(s: &str) -> bool {
    is_hex(s, 64, 64)
}

/// `min` to `max` hex digits (either case).
pub fn is_hex(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The first four characters of an identifier and an ellipsis (`3d12…`), as plan text shows
/// machine-ids, cluster uids and digests. Short values are returned whole.
pub fn short(id: &str) -> String {
    short_n(id, 4)
}

/// A host key fingerprint shortened to its scheme and two characters (`SHA256:Qx…`).
pub fn short_key(fingerprint: &str) -> String {
    match fingerprint.split_once(':') {
        Some((scheme, rest)) => format!("{scheme}:{}", short_n(rest, 2)),
        None => short_n(fingerprint, 6),
    }
}

/// The first `n` characters of `id`, with `…` when something was cut.
pub fn short_n(id: &str, n: usize) -> String {
    if id.chars().count() <= n {
        id.to_string()
    } else {
        let head: String = id.chars().take(n).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn short_forms() {
        assert_eq!(short("3d12aa77"), "3d12…");
        assert_eq!(short("ab"), "ab");
        assert_eq!(short_key("SHA256:Qx9zzzz"), "SHA256:Qx…");
    }
}
