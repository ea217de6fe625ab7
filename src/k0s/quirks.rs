//! Facts about particular k0s releases that k0sform works around, in one place.

use crate::version::K0sVersion;

/// Does a k0s worker of `version` read and decode its `--token-file` at every start, joined or
/// not, and exit when the file is not a join token (k0s issue #7202)? v1.35.1+k0s.0 and the
/// v1.35.1 release candidates built before it (k0s `cmd/worker/worker.go` and
/// `cmd/internal/tokendata.go` at v1.35.1+k0s.0; fixed in v1.35.1+k0s.1 by "Delay join token
/// parsing on worker until it is known that it is needed"). k0sctl works around the release
/// (`phase/ensure_join_token_workaround.go`, `workerTokenWorkaroundVersion`).
pub fn worker_decodes_token_file_at_start(version: &K0sVersion) -> bool {
    version.numbers() == (1, 35, 1) && version.to_string().ends_with("+k0s.0")
}

/// Does the k0s release `version` publish `sha256sums.txt` beside its assets? From
/// v1.28.2+k0s.0 on (k0s `.github/workflows/release.yml` gained the step then); k0sctl checks
/// no checksum at all (`pkg/k0s/binprovider/download.go`).
pub fn publishes_checksums(version: &K0sVersion) -> bool {
    version.at_least(1, 28, 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> K0sVersion {
        K0sVersion::parse(s).unwrap()
    }

    #[test]
    fn only_v1_35_1_k0s_0_workers_decode_the_token_file_at_start() {
        for s in ["v1.35.1+k0s.0", "1.35.1+k0s.0", "v1.35.1-rc.3+k0s.0"] {
            assert!(worker_decodes_token_file_at_start(&v(s)), "{s}");
        }
        for s in [
            "v1.35.1+k0s.1",
            "v1.35.1-rc.0+k0s.1",
            "v1.35.0+k0s.0",
            "v1.35.2+k0s.0",
            "v1.34.3+k0s.0",
            "v1.35.10+k0s.0",
        ] {
            assert!(!worker_decodes_token_file_at_start(&v(s)), "{s}");
        }
    }

    #[test]
    fn checksums_are_published_from_v1_28_2() {
        for s in [
            "v1.28.2+k0s.0",
            "v1.28.2-rc.0+k0s.0",
            "v1.33.4+k0s.0",
            "1.30.0",
            "v2.0.0",
        ] {
            assert!(publishes_checksums(&v(s)), "{s}");
        }
        for s in ["v1.28.1+k0s.0", "v1.27.9+k0s.0", "v0.11.0"] {
            assert!(!publishes_checksums(&v(s)), "{s}");
        }
    }
}
