//! Where an etcd state lives and how to reach it: the `etcd://` / `etcds://` URL and the TLS files
//! and timings. Built with or without the `etcd-state` feature, so a build without the etcd
//! backend still recognises an etcd location and can say why it refuses it.

use super::error::StateError;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How many versions `PREFIX/history/` keeps.
pub const HISTORY_KEEP: u64 = 10;
/// Lease TTL of the lock when `K0SFORM_ETCD_LOCK_TTL` does not say otherwise.
pub const DEFAULT_LOCK_TTL: Duration = Duration::from_secs(30);
/// How long one etcd request may take when `K0SFORM_ETCD_TIMEOUT` does not say otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Is this `-state` value an etcd location (rather than a file path)?
pub fn is_etcd_location(location: &str) -> bool {
    location.starts_with("etcd://") || location.starts_with("etcds://")
}

/// A parsed `etcd://` / `etcds://` location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdUrl {
    pub tls: bool,
    /// `host:port`, as given.
    pub endpoints: Vec<String>,
    /// Key prefix, starting with `/`, without a trailing `/`.
    pub prefix: String,
}

impl EtcdUrl {
    pub fn parse(location: &str) -> Result<Self, StateError> {
        let bad = |detail: &str| StateError::Remote {
            location: location.to_string(),
            action: "parse",
            detail: format!(
                "{detail}; expected etcd://HOST:PORT[,HOST:PORT…]/PREFIX (etcds:// for TLS)"
            ),
        };
        let (tls, rest) = if let Some(r) = location.strip_prefix("etcds://") {
            (true, r)
        } else if let Some(r) = location.strip_prefix("etcd://") {
            (false, r)
        } else {
            return Err(bad("not an etcd:// or etcds:// URL"));
        };
        let (hosts, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = prefix.trim_end_matches('/');
        if prefix.is_empty() {
            return Err(bad("the key prefix is missing"));
        }
        let mut endpoints = Vec::new();
        for h in hosts.split(',') {
            let Some((host, port)) = h.rsplit_once(':') else {
                return Err(bad(&format!("endpoint {h:?} has no port")));
            };
            if host.is_empty() || port.parse::<u16>().is_err() {
                return Err(bad(&format!("endpoint {h:?} is not HOST:PORT")));
            }
            endpoints.push(h.to_string());
        }
        Ok(EtcdUrl {
            tls,
            endpoints,
            prefix: format!("/{}", prefix.trim_start_matches('/')),
        })
    }

    // Used by the etcd store only (feature `etcd-state`) and the tests.
    #[cfg_attr(not(feature = "etcd-state"), allow(dead_code))]
    pub(super) fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.prefix)
    }

    // Used by the etcd store only (feature `etcd-state`) and the tests.
    #[cfg_attr(not(feature = "etcd-state"), allow(dead_code))]
    pub(super) fn history_key(&self, serial: u64) -> String {
        // Zero-padded so keys sort by serial and a range delete can drop the oldest.
        format!("{}/history/{serial:020}", self.prefix)
    }
}

/// TLS files and timings for an etcd store. Flags win over `K0SFORM_ETCD_*` variables.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub lock_ttl: Duration,
    pub request_timeout: Duration,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            cacert: None,
            cert: None,
            key: None,
            lock_ttl: DEFAULT_LOCK_TTL,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

impl EtcdOptions {
    /// Options from flags, filled in from `K0SFORM_ETCD_CACERT/CERT/KEY`, and the lock TTL and
    /// request timeout from `K0SFORM_ETCD_LOCK_TTL` / `K0SFORM_ETCD_TIMEOUT` (e.g. `5s`).
    pub fn from_flags(cacert: Option<&Path>, cert: Option<&Path>, key: Option<&Path>) -> Self {
        let pick = |flag: Option<&Path>, var: &str| {
            flag.map(Path::to_path_buf).or_else(|| {
                std::env::var_os(var)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
        };
        let duration = |var: &str, default: Duration| {
            std::env::var(var)
                .ok()
                .and_then(|v| humantime::parse_duration(&v).ok())
                .filter(|d| !d.is_zero())
                .unwrap_or(default)
        };
        EtcdOptions {
            cacert: pick(cacert, "K0SFORM_ETCD_CACERT"),
            cert: pick(cert, "K0SFORM_ETCD_CERT"),
            key: pick(key, "K0SFORM_ETCD_KEY"),
            lock_ttl: duration("K0SFORM_ETCD_LOCK_TTL", DEFAULT_LOCK_TTL),
            request_timeout: duration("K0SFORM_ETCD_TIMEOUT", DEFAULT_REQUEST_TIMEOUT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_into_endpoints_and_prefix() {
        let u = EtcdUrl::parse("etcd://127.0.0.1:2379,127.0.0.2:2379/teams/prod/").unwrap();
        assert!(!u.tls);
        assert_eq!(u.endpoints, ["127.0.0.1:2379", "127.0.0.2:2379"]);
        assert_eq!(u.prefix, "/teams/prod");
        assert_eq!(u.key("state"), "/teams/prod/state");
        assert_eq!(
            u.history_key(12),
            "/teams/prod/history/00000000000000000012"
        );
        let u = EtcdUrl::parse("etcds://[::1]:2379/p").unwrap();
        assert!(u.tls);
        assert_eq!(u.endpoints, ["[::1]:2379"]);
        for bad in [
            "etcd://127.0.0.1:2379",
            "etcd://127.0.0.1:2379/",
            "etcd://127.0.0.1/p",
            "etcd://127.0.0.1:x/p",
            "etcd://:2379/p",
            "http://127.0.0.1:2379/p",
        ] {
            let err = EtcdUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains("etcd://HOST:PORT"), "{bad}: {err}");
        }
        assert!(is_etcd_location("etcds://a:1/p") && !is_etcd_location("./etcd/state.json"));
    }

    #[test]
    fn history_keys_sort_by_serial() {
        let u = EtcdUrl::parse("etcd://127.0.0.1:2379/p").unwrap();
        assert!(u.history_key(9) < u.history_key(10));
        assert!(u.history_key(99) < u.history_key(100));
    }
}
