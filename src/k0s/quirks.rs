//! Facts about particular k0s releases that k0sform works around, in one place: each takes a
//! version as the spec, a host or the state spells it (`v1.35.1+k0s.0`, `1.35.1+k0s.0`).

/// MAJOR.MINOR.PATCH, the pre-release (empty for a release) and the build (`k0s.0`, empty when
/// absent) of a version; None when it is not one.
fn parts(version: &str) -> Option<((u64, u64, u64), &str, &str)> {
    let v = version.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    let (rest, build) = v.split_once('+').unwrap_or((v, ""));
    let (core, pre) = rest.split_once('-').unwrap_or((rest, ""));
    let mut it = core.split('.').map(|n| n.parse::<u64>().ok());
    let nums = (it.next()??, it.next()??, it.next()??);
    it.next().is_none().then_some((nums, pre, build))
}

/// Does a k0s worker of `version` read and decode its `--token-file` at every start, joined or
/// not, and exit when the file is not a join token (k0s issue #7202)? v1.35.1+k0s.0 and the
/// v1.35.1 release candidates built before it (k0s `cmd/worker/worker.go` and
/// `cmd/internal/tokendata.go` at v1.35.1+k0s.0; fixed in v1.35.1+k0s.1 by "Delay join token
/// parsing on worker until it is known that it is needed"). k0sctl works around the release
/// (`phase/ensure_join_token_workaround.go`, `workerTokenWorkaroundVersion`).
pub fn worker_decodes_token_file_at_start(version: &str) -> bool {
    parts(version).is_some_and(|(n, _, build)| n == (1, 35, 1) && build == "k0s.0")
}

/// Does the k0s release `version` publish `sha256sums.txt` beside its assets? From
/// v1.28.2+k0s.0 on (k0s `.github/workflows/release.yml` gained the step then); k0sctl checks
/// no checksum at all (`pkg/k0s/binprovider/download.go`). An unreadable version: no.
pub fn publishes_checksums(version: &str) -> bool {
    parts(version).is_some_and(|(n, _, _)| n >= (1, 28, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_v1_35_1_k0s_0_workers_decode_the_token_file_at_start() {
        for v in ["v1.35.1+k0s.0", "1.35.1+k0s.0", "v1.35.1-rc.3+k0s.0"] {
            assert!(worker_decodes_token_file_at_start(v), "{v}");
        }
        for v in [
            "v1.35.1+k0s.1",
            "v1.35.1-rc.0+k0s.1",
            "v1.35.0+k0s.0",
            "v1.35.2+k0s.0",
            "v1.34.3+k0s.0",
            "v1.35.10+k0s.0",
            "garbage",
        ] {
            assert!(!worker_decodes_token_file_at_start(v), "{v}");
        }
    }

    #[test]
    fn checksums_are_published_from_v1_28_2() {
        for v in ["v1.28.2+k0s.0", "v1.33.4+k0s.0", "1.30.0", "v2.0.0"] {
            assert!(publishes_checksums(v), "{v}");
        }
        for v in ["v1.28.1+k0s.0", "v1.27.9+k0s.0", "v0.11.0", "nope"] {
            assert!(!publishes_checksums(v), "{v}");
        }
    }
}
