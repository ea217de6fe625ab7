//! Where each host's k0s binary comes from, decided before the planner runs (which stays pure):
//! the version to install when the spec names none, and per host either `k0sBinaryPath`, a
//! release downloaded locally and uploaded (`uploadBinary: true`), or a release the host
//! downloads itself (k0sctl's default), each with the sha256 it must have.
//!
//! k0sctl's rules (`phase/default_k0s_version.go`, `phase/validate_facts.go`): no version →
//! the newest release of `versionChannel`, but a running cluster keeps its version (no implicit
//! upgrade). Checksums: the host's `k0sDownloadSha256` (k0sform's extension; k0sctl verifies
//! nothing), else the release's published `sha256sums.txt`; with neither (a `k0sDownloadURL`,
//! or a release before v1.28.2) the host's own hash of its download is recorded, and the plan
//! says so.

use crate::download;
use crate::k0s::quirks;
use crate::k0s::release::{self, Channel, Mirror};
use crate::plan::{
    Desired, DesiredHost, HostDownload, LocalBinary, Plan, ResolvedVersion, StepKind,
};
use crate::reality::{Probe, Reality};
use crate::spec::{HostSpec, Spec};
use crate::state::State;
use crate::version::K0sVersion;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A k0s binary on this machine that steps may upload besides the hosts' `k0sBinaryPath`:
/// releases downloaded into the local cache for `uploadBinary: true` (`cache_uploads`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalK0s {
    pub path: PathBuf,
    pub sha256: String,
    pub version: Option<K0sVersion>,
}

/// Does this host get k0s from a release (on the host or through the local cache)?
fn from_release(h: &HostSpec) -> bool {
    !h.reset && h.k0s_binary_path.is_none() && !h.use_existing_k0s
}

/// The version to install when `spec.k0s.version` is empty; None when the spec names one (or
/// nothing needs a version): what the cluster runs; then what the state records; then, for a
/// new cluster with hosts that get k0s from a release, the version index.
pub fn resolve_version(
    spec: &Spec,
    state: &State,
    reality: &Reality,
    mirror: &Mirror,
) -> Result<Option<ResolvedVersion>, String> {
    if spec.k0s.version.is_some() {
        return Ok(None);
    }
    // k0sctl takes the leader's running version; controllers first, in spec order.
    let probes = reality.probe_index();
    let running = spec
        .controllers()
        .chain(spec.hosts.iter().filter(|h| !h.role.is_controller()))
        .find_map(|h| {
            let probe = probes.at(&h.ssh.address, h.ssh.port)?;
            let v = &probe.facts()?.status.as_ref()?.version;
            Some((v.clone(), h.id()))
        });
    if let Some((v, on)) = running {
        return Ok(Some(ResolvedVersion {
            version: v,
            source: format!("the version the cluster runs (on {on})"),
        }));
    }
    if let Some(v) = state.cluster.as_ref().and_then(|c| c.k0s_version.clone()) {
        return Ok(Some(ResolvedVersion {
            version: v,
            source: "the version the state records".into(),
        }));
    }
    if !spec.hosts.iter().any(from_release) {
        return Ok(None);
    }
    let channel = Channel::from_spec(spec.k0s.version_channel.as_deref());
    let url = mirror.version_index_url(channel);
    let text = download::fetch_text(&url, download::TEXT_TIMEOUT).map_err(|e| {
        format!(
            "looking up the k0s version: {e}; set spec.k0s.version, or point {} at a mirror",
            release::VERSION_URL_ENV
        )
    })?;
    // Messages and the plan name the URL without its credentials, if it has any.
    let url = crate::k0s::redact::hide_url_credentials(&url);
    let version = release::parse_version_index(&text)
        .map_err(|e| format!("looking up the k0s version at {url}: {e}"))?;
    Ok(Some(ResolvedVersion {
        version,
        source: format!("{}, from {url}", channel.describe()),
    }))
}

/// Does the host (its probe) already have what it needs (installed and running `version`)?
fn has_version(probe: Option<&Probe>, version: &K0sVersion) -> bool {
    let Some(f) = probe.and_then(Probe::facts) else {
        // Unreachable: the planner refuses or skips it; nothing to fetch.
        return true;
    };
    f.k0s_version.as_ref() == Some(version)
        && f.status.as_ref().is_none_or(|s| &s.version == version)
}

/// Fill in the release binary of every host that gets k0s from a release and does not have
/// `spec.k0s.version` yet: a `HostDownload`, or with `uploadBinary` a `LocalBinary` with its
/// URL. Checksums are fetched once per version. Errors name the host.
pub fn release_binaries(
    spec: &Spec,
    reality: &Reality,
    desired: &mut Desired,
    mirror: &Mirror,
) -> Result<(), String> {
    let Some(wanted) = spec.k0s.version.as_ref() else {
        return Ok(());
    };
    // Release URLs and asset names spell the version with its `v` (k0sproject/version
    // `DownloadURL`), whatever the spec wrote.
    let version = &wanted.to_string();
    let mut sums: BTreeMap<String, String> = BTreeMap::new();
    let probes = reality.probe_index();
    for h in spec.hosts.iter().filter(|h| from_release(h)) {
        let id = h.id();
        let probe = probes.get(&id);
        if has_version(probe, wanted) {
            continue;
        }
        let Some(facts) = probe.and_then(Probe::facts) else {
            continue;
        };
        let arch = release::k0s_arch(&facts.arch);
        if arch.is_empty() {
            return Err(format!(
                "{id}: the probe did not report the host's architecture"
            ));
        }
        let url = match &h.k0s_download_url {
            Some(t) => release::expand_tokens(t, version, &arch),
            None => mirror.binary_url(version, &arch),
        };
        // Without a sha256 to check against, the host hashes what it downloaded and that
        // hash is recorded (an empty `sha256`). k0sctl checks none (`pkg/k0s/binprovider/
        // download.go`): a `k0sDownloadURL` is often a mirror on a network without internet
        // (its sums may be elsewhere or nowhere, and a custom build has none), and k0s
        // publishes `sha256sums.txt` only from v1.28.2 on (`k0s::quirks::publishes_checksums`).
        let sha256 = match &h.k0s_download_sha256 {
            Some(s) => s.clone(),
            None if h.k0s_download_url.is_some() || !quirks::publishes_checksums(wanted) => {
                if h.upload_binary {
                    return Err(format!(
                        "{id}: uploadBinary with {}: set k0sDownloadSha256 on the host, the sha256 k0sform checks its local download against",
                        if h.k0s_download_url.is_some() {
                            "k0sDownloadURL".to_string()
                        } else {
                            format!(
                                "k0s {version}, which publishes no {}",
                                release::CHECKSUMS_FILE
                            )
                        }
                    ));
                }
                String::new()
            }
            None => {
                let sums_url = mirror.checksums_url(version);
                if !sums.contains_key(&sums_url) {
                    let text = download::fetch_text(&sums_url, download::TEXT_TIMEOUT)
                        .map_err(|e| format!("{id}: checking k0s {version}: {e}; set k0sDownloadSha256 on the host, or point {} at a mirror", release::DOWNLOAD_URL_ENV))?;
                    sums.insert(sums_url.clone(), text);
                }
                let asset = release::asset_name(version, &arch);
                release::checksum_for(&sums[&sums_url], &asset).ok_or_else(|| {
                    format!(
                        "{id}: {} lists no sha256 for {asset}; set k0sDownloadSha256 on the host",
                        crate::k0s::redact::hide_url_credentials(&sums_url)
                    )
                })?
            }
        };
        let entry = match desired.hosts.binary_search_by(|d| d.host.cmp(&id)) {
            Ok(i) => &mut desired.hosts[i],
            Err(i) => {
                desired.hosts.insert(
                    i,
                    DesiredHost {
                        host: id.clone(),
                        local_binary: None,
                        host_download: None,
                        files: Vec::new(),
                    },
                );
                &mut desired.hosts[i]
            }
        };
        if h.upload_binary {
            entry.local_binary = Some(LocalBinary {
                sha256,
                version: Some(wanted.clone()),
                url: Some(url),
            });
        } else {
            entry.host_download = Some(HostDownload {
                url,
                sha256,
                version: wanted.clone(),
            });
        }
    }
    Ok(())
}

/// Download (or find in the cache) every release binary the plan uploads, once per URL and
/// sha256, so the upload steps find them by sha256.
pub fn cache_uploads(
    plan: &Plan,
    desired: &Desired,
    mirror: &Mirror,
    progress: bool,
) -> Result<Vec<LocalK0s>, String> {
    let mut out: Vec<LocalK0s> = Vec::new();
    for s in &plan.steps {
        let StepKind::UploadBinary { sha256, .. } = &s.kind else {
            continue;
        };
        let Some(bin) = desired.local_binary(&s.host) else {
            continue;
        };
        let (Some(url), Some(version)) = (&bin.url, &bin.version) else {
            continue;
        };
        if &bin.sha256 != sha256 || out.iter().any(|l| &l.sha256 == sha256) {
            continue;
        }
        let arch = url_arch(url, &version.to_string());
        let dest: PathBuf = download::cache_path(&download::cache_dir()?, version, &arch);
        let path = download::ensure_cached(url, &dest, sha256, mirror.timeout, progress)
            .map_err(|e| format!("{}: downloading k0s {version} locally: {e}", s.host))?;
        out.push(LocalK0s {
            path,
            sha256: sha256.clone(),
            version: Some(version.clone()),
        });
    }
    Ok(out)
}

/// The cache keys entries by version and architecture; the architecture is the asset name's
/// suffix (`k0s-<version>-<arch>`), or the sha256's start for a custom URL of another shape.
fn url_arch(url: &str, version: &str) -> String {
    let file = url.rsplit('/').next().unwrap_or(url);
    let prefix = format!("k0s-{version}-");
    match file.strip_prefix(&prefix) {
        Some(a) if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric()) => a.to_string(),
        _ => format!("url-{}", &crate::hash::sha256_hex(url)[..12]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reality::{HostFacts, HostReality};
    use crate::spec::{Role, SshTarget};

    /// Hosts that download k0s where nothing publishes a sha256 (k0sctl checks none,
    /// `pkg/k0s/binprovider/download.go`): nothing is fetched to plan (the mirror below is a
    /// closed port), and the download carries no sha256 (the host's hash is recorded).
    #[test]
    fn no_checksums_are_fetched_where_none_are_published() {
        let mut spec = Spec::default();
        for (i, url) in [None, Some("http://mirror.internal/k0s-%v-%p")]
            .into_iter()
            .enumerate()
        {
            let mut h = HostSpec::new(
                Role::Worker,
                SshTarget::new(format!("127.0.0.{}", i + 1), 22),
                i + 1,
            );
            h.k0s_download_url = url.map(String::from);
            spec.hosts.push(h);
        }
        let mut reality = Reality::default();
        for h in &spec.hosts {
            reality.hosts.push(HostReality {
                id: h.id(),
                probe: Probe::Reached(Box::new(HostFacts {
                    arch: "x86_64".into(),
                    ..HostFacts::default()
                })),
            });
        }
        reality.sort();
        let mirror = Mirror {
            download_base: "http://127.0.0.1:9/releases".into(),
            ..Mirror::default()
        };
        let downloads = |spec: &Spec| {
            let mut desired = Desired::default();
            release_binaries(spec, &reality, &mut desired, &mirror).map(|()| {
                desired
                    .hosts
                    .iter()
                    .map(|d| d.host_download.clone().unwrap())
                    .collect::<Vec<_>>()
            })
        };
        // Before v1.28.2: no sums for either host.
        spec.k0s.version = Some("v1.27.5+k0s.0".parse().unwrap());
        let d = downloads(&spec).unwrap();
        assert_eq!(
            d[0].url,
            "http://127.0.0.1:9/releases/v1.27.5%2Bk0s.0/k0s-v1.27.5+k0s.0-amd64"
        );
        assert_eq!(d[1].url, "http://mirror.internal/k0s-v1.27.5%2Bk0s.0-amd64");
        assert!(d.iter().all(|d| d.sha256.is_empty()), "{d:?}");
        // A release that publishes them: the k0sDownloadURL host still asks nothing; the
        // other one's sums are looked up (and here, unreachable, refused with its name).
        spec.k0s.version = Some("v1.33.4+k0s.0".parse().unwrap());
        let e = downloads(&spec).unwrap_err();
        assert!(
            e.starts_with("127.0.0.1: checking k0s v1.33.4+k0s.0"),
            "{e}"
        );
        spec.hosts.remove(0);
        let d = downloads(&spec).unwrap();
        assert_eq!(d[0].sha256, "");
        // k0sDownloadSha256 pins it.
        spec.hosts[0].k0s_download_sha256 = Some("a".repeat(64));
        assert_eq!(downloads(&spec).unwrap()[0].sha256, "a".repeat(64));
        // uploadBinary downloads locally and must check what it uploads.
        spec.hosts[0].k0s_download_sha256 = None;
        spec.hosts[0].upload_binary = true;
        let e = downloads(&spec).unwrap_err();
        assert!(e.contains("set k0sDownloadSha256"), "{e}");
    }

    #[test]
    fn cache_entries_are_keyed_by_architecture() {
        assert_eq!(
            url_arch(
                "http://m/v1.2.3%2Bk0s.0/k0s-v1.2.3+k0s.0-arm64",
                "v1.2.3+k0s.0"
            ),
            "arm64"
        );
        assert!(url_arch("http://m/custom/k0s", "v1.2.3+k0s.0").starts_with("url-"));
    }
}
