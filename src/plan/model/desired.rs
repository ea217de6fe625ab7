//! What the planner is given beside spec, state and reality: the binaries and files each host
//! should have (`Desired`), computed by the caller because it needs I/O.

use crate::hostid::HostId;
use crate::version::K0sVersion;
use serde::{Deserialize, Serialize};

/// A k0s binary on the machine running k0sform, to be uploaded to a host: `k0sBinaryPath`, or
/// with `uploadBinary: true` a release downloaded into the local cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LocalBinary {
    pub sha256: String,
    /// `k0s version` of that binary, when known.
    pub version: Option<K0sVersion>,
    /// The release URL it is downloaded from (`uploadBinary: true`); None for `k0sBinaryPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A k0s release the host downloads itself (k0sctl's default), and the sha256 it must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostDownload {
    pub url: String,
    /// Empty where nothing publishes one (a `k0sDownloadURL` without `k0sDownloadSha256`, a
    /// release before v1.28.2): the host's hash of its download is recorded.
    pub sha256: String,
    pub version: K0sVersion,
}

/// Facts about the desired outcome that need I/O to compute (hashing local files); the caller
/// computes them so `plan::diff` stays pure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Desired {
    /// Per host; a host without an entry (or without a binary) uses the binary already on it.
    #[serde(default)]
    pub hosts: Vec<DesiredHost>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DesiredHost {
    pub host: HostId,
    pub local_binary: Option<LocalBinary>,
    /// The release the host downloads itself when it needs a binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_download: Option<HostDownload>,
    /// The host's `files:`, expanded (sorted by remote path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::files::DesiredFile>,
}

impl Desired {
    pub fn host(&self, id: &HostId) -> Option<&DesiredHost> {
        // The planner asks once per host: a scan made 5,000-host plans quadratic. Built sorted
        // (engine::desired, same_binary), the list is binary-searched; a miss still scans, so
        // any order stays correct.
        match self.hosts.binary_search_by(|h| h.host.cmp(id)) {
            Ok(i) => self.hosts.get(i),
            Err(_) => self.hosts.iter().find(|h| &h.host == id),
        }
    }

    pub fn local_binary(&self, id: &HostId) -> Option<&LocalBinary> {
        self.host(id).and_then(|h| h.local_binary.as_ref())
    }

    pub fn host_download(&self, id: &HostId) -> Option<&HostDownload> {
        self.host(id).and_then(|h| h.host_download.as_ref())
    }

    /// The files the host should have (none when the spec names none).
    pub fn files(&self, id: &HostId) -> &[crate::files::DesiredFile] {
        self.host(id).map(|h| h.files.as_slice()).unwrap_or(&[])
    }

    /// The same binary for every listed host.
    pub fn same_binary<'a>(hosts: impl IntoIterator<Item = &'a HostId>, bin: LocalBinary) -> Self {
        let mut hosts: Vec<DesiredHost> = hosts
            .into_iter()
            .map(|h| DesiredHost {
                host: h.clone(),
                local_binary: Some(bin.clone()),
                host_download: None,
                files: Vec::new(),
            })
            .collect();
        hosts.sort_by(|a, b| a.host.cmp(&b.host));
        Desired { hosts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: &str, sha: &str) -> DesiredHost {
        DesiredHost {
            host: HostId::new(addr, 22),
            local_binary: Some(LocalBinary {
                sha256: sha.into(),
                version: None,
                url: None,
            }),
            host_download: None,
            files: Vec::new(),
        }
    }

    #[test]
    fn local_binary_is_found_in_any_order() {
        let sha = |d: &Desired, a: &str| {
            d.local_binary(&HostId::new(a, 22))
                .map(|b| b.sha256.clone())
        };
        let sorted = Desired {
            hosts: vec![
                entry("10.0.0.1", "a"),
                entry("10.0.0.2", "b"),
                entry("10.0.0.3", "c"),
            ],
        };
        let unsorted = Desired {
            hosts: vec![
                entry("10.0.0.3", "c"),
                entry("10.0.0.1", "a"),
                entry("10.0.0.2", "b"),
            ],
        };
        for d in [&sorted, &unsorted] {
            assert_eq!(sha(d, "10.0.0.1").as_deref(), Some("a"));
            assert_eq!(sha(d, "10.0.0.2").as_deref(), Some("b"));
            assert_eq!(sha(d, "10.0.0.3").as_deref(), Some("c"));
            assert_eq!(sha(d, "10.0.0.4"), None);
        }
        let same = Desired::same_binary(
            [HostId::new("10.0.0.9", 22), HostId::new("10.0.0.1", 22)].iter(),
            LocalBinary {
                sha256: "s".into(),
                version: None,
                url: None,
            },
        );
        assert!(same.hosts.windows(2).all(|w| w[0].host < w[1].host));
        assert!(same.local_binary(&HostId::new("10.0.0.9", 22)).is_some());
    }
}
