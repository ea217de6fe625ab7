//! An SSH public key as ssh prints it (`<type> <base64>`) and its fingerprint, computed the way
//! `ssh-keygen -lf` does. Plain data: the spec's pins, the state's recorded keys and a probed
//! host's answer are checked with it; connecting and pinning live in `ssh::hostkey`.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostKeyError {
    #[error("not an SSH public key (expected `<type> <base64>`): {0:?}")]
    Malformed(String),
}

/// A public key as ssh prints it: `ssh-ed25519 AAAAC3…` (a trailing comment is dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    pub key_type: String,
    pub blob_base64: String,
}

impl PublicKey {
    pub fn parse(text: &str) -> Result<Self, HostKeyError> {
        let mut it = text.split_whitespace();
        let (Some(key_type), Some(blob)) = (it.next(), it.next()) else {
            return Err(HostKeyError::Malformed(text.to_string()));
        };
        if STANDARD.decode(blob).is_err() || key_type.is_empty() {
            return Err(HostKeyError::Malformed(text.to_string()));
        }
        Ok(PublicKey {
            key_type: key_type.to_string(),
            blob_base64: blob.to_string(),
        })
    }

    /// `SHA256:` + unpadded base64 of sha256(key blob), as `ssh-keygen -lf` and ssh print it.
    pub fn fingerprint(&self) -> String {
        // The blob was checked to be base64 in `parse`.
        let blob = STANDARD.decode(&self.blob_base64).unwrap_or_default();
        format!(
            "SHA256:{}",
            STANDARD_NO_PAD.encode(crate::hash::sha256(&blob))
        )
    }

    /// `<type> <base64>`, the form stored in state.
    pub fn to_line(&self) -> String {
        format!("{} {}", self.key_type, self.blob_base64)
    }

    /// A known_hosts line for `alias`.
    pub fn known_hosts_line(&self, alias: &str) -> String {
        format!("{alias} {}\n", self.to_line())
    }
}

/// Fingerprint of a key given as text (`ssh-ed25519 AAAA…`).
pub fn fingerprint(public_key: &str) -> Result<String, HostKeyError> {
    Ok(PublicKey::parse(public_key)?.fingerprint())
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real ed25519 host key and its `ssh-keygen -lf` fingerprint.
    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvZ/q36TdInhTZoW5bXPQ/Hey6Hm97hfZmb+65XdDbu comment@host";
    const FP: &str = "SHA256:ZCtcFOh8vMSvn0x0cRTf/Lk5y5381qr56Z8Pi9bFzfU";

    #[test]
    fn fingerprint_matches_ssh_keygen() {
        // Cross-checked against the local ssh-keygen so the constant cannot be wrong.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.pub");
        std::fs::write(&p, KEY).unwrap();
        let out = std::process::Command::new("ssh-keygen")
            .arg("-lf")
            .arg(&p)
            .output()
            .unwrap();
        let keygen = String::from_utf8(out.stdout).unwrap();
        let keygen_fp = keygen.split_whitespace().nth(1).unwrap();
        assert_eq!(keygen_fp, FP);
        assert_eq!(fingerprint(KEY).unwrap(), FP);
    }

    #[test]
    fn malformed_keys_are_rejected() {
        assert!(fingerprint("").is_err());
        assert!(fingerprint("ssh-ed25519").is_err());
        assert!(fingerprint("ssh-ed25519 not*base64").is_err());
    }
}
