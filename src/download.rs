//! Downloads on the machine running k0sform: the version index and a release's checksums (small
//! texts, at plan time), and release binaries for `uploadBinary: true`, kept in a local cache
//! (`$XDG_CACHE_HOME/k0sform/k0s/linux/<arch>/k0s-<version>`, as k0sctl's
//! `pkg/k0s/binprovider/local_upload.go` keeps `$XDG_CACHE_HOME/k0sctl/k0s/…`), sha256-checked.
//!
//! Through the local `curl`, as k0sform already runs the local `ssh`: an HTTP client crate with
//! TLS (rustls + ring, or native-tls) would add minutes to a 2-core build and a second trust
//! store to configure, where curl already honours the machine's CA store and proxy variables
//! (`HTTPS_PROXY`, `NO_PROXY`). Where curl itself is missing the error says so.

use crate::version::K0sVersion;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Limit for fetching a small text (version index, checksums).
pub const TEXT_TIMEOUT: Duration = Duration::from_secs(30);

/// curl for `url`: `-q` first (no `~/.curlrc` may add options), https only, also through
/// redirects, when `url` is https (a mirror's redirect cannot fall back to plain http), and the
/// URL in a config on stdin (`-K -`; `feed` writes it) instead of the argv that every local
/// user sees in `ps` (a mirror URL may hold a token from the environment).
fn curl(url: &str, timeout: Duration) -> Command {
    let mut c = Command::new("curl");
    c.arg("-q");
    if crate::k0s::release::is_https(url) {
        c.args(["--proto", "=https", "--proto-redir", "=https"]);
    }
    c.args(["-fsSL", "--connect-timeout", "30", "--max-time"])
        .arg(timeout.as_secs().max(1).to_string())
        .args(["-K", "-"])
        .stdin(Stdio::piped());
    c
}

/// Start `c` (from `curl`) and give it its config with `url` on stdin.
fn spawn_curl(mut c: Command, url: &str) -> Result<std::process::Child, String> {
    let mut child = c.spawn().map_err(spawn_error)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A small write into an empty pipe; curl reads it before anything else.
        let _ = stdin.write_all(crate::k0s::release::curl_config(url).as_bytes());
    }
    Ok(child)
}

/// What curl's exit status means, for messages (curl's own stderr line is added when there is one).
fn curl_failure(url: &str, code: Option<i32>, stderr: &str, timeout: Duration) -> String {
    let url = crate::k0s::redact::hide_url_credentials(url);
    let detail = stderr.lines().rev().find(|l| !l.trim().is_empty());
    let what = match code {
        Some(28) => format!("timed out after {}s", timeout.as_secs()),
        Some(22) => "the server answered with an error".to_string(),
        Some(6) | Some(7) => "cannot connect".to_string(),
        Some(c) => format!("curl exited {c}"),
        None => "curl was killed".to_string(),
    };
    match detail {
        Some(d) => format!("cannot fetch {url}: {what} ({})", d.trim()),
        None => format!("cannot fetch {url}: {what}"),
    }
}

fn spawn_error(e: std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::NotFound {
        "curl is not installed on this machine: k0sform runs it to look up and download k0s".into()
    } else {
        format!("cannot run curl: {e}")
    }
}

/// GET a small text (at most 1 MiB).
pub fn fetch_text(url: &str, timeout: Duration) -> Result<String, String> {
    let mut c = curl(url, timeout);
    c.arg("--max-filesize")
        .arg("1048576")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = spawn_curl(c, url)?
        .wait_with_output()
        .map_err(|e| format!("cannot wait for curl: {e}"))?;
    if !out.status.success() {
        return Err(curl_failure(
            url,
            out.status.code(),
            &String::from_utf8_lossy(&out.stderr),
            timeout,
        ));
    }
    String::from_utf8(out.stdout).map_err(|_| {
        format!(
            "{} is not text",
            crate::k0s::redact::hide_url_credentials(url)
        )
    })
}

/// The local cache folder: `$XDG_CACHE_HOME/k0sform/k0s`, else `$HOME/.cache/k0sform/k0s`.
pub fn cache_dir() -> Result<PathBuf, String> {
    Ok(k0sform_cache_dir()?.join("k0s"))
}

/// k0sform's folder of the user's cache: `$XDG_CACHE_HOME/k0sform`, else
/// `$HOME/.cache/k0sform` (the k0s downloads, the debug log).
pub fn k0sform_cache_dir() -> Result<PathBuf, String> {
    let base =
        match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            Some(x) => PathBuf::from(x),
            None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(h) => PathBuf::from(h).join(".cache"),
                None => return Err(
                    "neither XDG_CACHE_HOME nor HOME is set: no place for k0sform's cache (k0s downloads, the debug log)"
                        .into(),
                ),
            },
        };
    Ok(base.join("k0sform"))
}

/// Where the cache keeps `version` for `arch` (the version without its `v`, as k0sctl).
pub fn cache_path(dir: &Path, version: &K0sVersion, arch: &str) -> PathBuf {
    let v = version.to_string();
    dir.join("linux")
        .join(arch)
        .join(format!("k0s-{}", v.strip_prefix('v').unwrap_or(&v)))
}

/// A cached binary whose sha256 is `sha256`, downloading it from `url` first when it is
/// missing or differs. The download goes to a temporary file beside the cache entry, is
/// hashed while it streams and renamed into place only when it matches. With `progress`,
/// a bar on stderr counts the bytes.
pub fn ensure_cached(
    url: &str,
    dest: &Path,
    sha256: &str,
    timeout: Duration,
    progress: bool,
) -> Result<PathBuf, String> {
    if dest.is_file() {
        let have = crate::hash::sha256_file(dest)
            .map_err(|e| format!("cannot read {}: {e}", dest.display()))?;
        if have == sha256 {
            return Ok(dest.to_path_buf());
        }
    }
    let dir = dest
        .parent()
        .ok_or_else(|| format!("{} has no folder", dest.display()))?;
    // Private (0700), as XDG wants a cache: other local users need not see what is cached.
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("cannot create a file in {}: {e}", dir.display()))?;
    let mut c = curl(url, timeout);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn_curl(c, url)?;
    let bar = progress.then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} downloading {msg}: {bytes} ({bytes_per_sec}, {elapsed})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        b.set_message(url.to_string());
        b.enable_steady_tick(Duration::from_millis(200));
        b
    });
    let mut hasher = crate::hash::Hasher::default();
    let copied = (|| -> std::io::Result<()> {
        let mut out = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no pipe from curl"))?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = out.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            hasher.update(&buf[..n]);
            tmp.write_all(&buf[..n])?;
            if let Some(b) = &bar {
                b.inc(n as u64);
            }
        }
    })();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for curl: {e}"))?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if !status.success() {
        return Err(curl_failure(url, status.code(), &stderr, timeout));
    }
    copied.map_err(|e| format!("cannot write {}: {e}", tmp.path().display()))?;
    let got = hasher.hex();
    if got != sha256 {
        return Err(format!(
            "checksum mismatch: {} has sha256 {got}, expected {sha256}",
            crate::k0s::redact::hide_url_credentials(url)
        ));
    }
    tmp.as_file()
        .sync_all()
        .map_err(|e| format!("cannot write {}: {e}", tmp.path().display()))?;
    tmp.persist(dest)
        .map_err(|e| format!("cannot store {}: {e}", dest.display()))?;
    Ok(dest.to_path_buf())
}

/// A cached entry's sha256 when it exists (for planning without a network).
pub fn cached_sha256(dest: &Path) -> Option<String> {
    dest.is_file()
        .then(|| crate::hash::sha256_file(dest).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::sha256_hex;

    /// curl reads `file://` URLs, so the cache is tested without a server.
    #[test]
    fn the_cache_keeps_only_verified_downloads_and_reuses_them() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("k0s-v1.33.4+k0s.0-amd64");
        std::fs::write(&src, "binary").unwrap();
        let url = format!("file://{}", src.display());
        let dest = cache_path(
            &d.path().join("cache"),
            &"v1.33.4+k0s.0".parse().unwrap(),
            "amd64",
        );
        assert!(dest.ends_with("linux/amd64/k0s-1.33.4+k0s.0"));
        let t = Duration::from_secs(5);
        let err = ensure_cached(&url, &dest, &"0".repeat(64), t, false).unwrap_err();
        assert!(err.contains("checksum mismatch"), "{err}");
        assert!(!dest.exists());
        assert_eq!(
            std::fs::read_dir(dest.parent().unwrap()).unwrap().count(),
            0,
            "no temporary file left behind"
        );
        let good = sha256_hex("binary");
        assert_eq!(ensure_cached(&url, &dest, &good, t, false).unwrap(), dest);
        // The folders it made are private.
        use std::os::unix::fs::PermissionsExt;
        for dir in [d.path().join("cache"), dest.parent().unwrap().to_path_buf()] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
        assert_eq!(cached_sha256(&dest), Some(good.clone()));
        // Cached: the source may go away.
        std::fs::remove_file(&src).unwrap();
        assert_eq!(ensure_cached(&url, &dest, &good, t, false).unwrap(), dest);
        let err = fetch_text(&url, t).unwrap_err();
        assert!(err.starts_with("cannot fetch file://"), "{err}");
    }

    /// curl runs with `-q` first (no `~/.curlrc`), https only (also through redirects) for an
    /// https URL, and the URL on stdin, not in its argv.
    #[test]
    fn curl_is_held_to_https_and_keeps_the_url_out_of_argv() {
        let args = |url: &str| -> Vec<String> {
            curl(url, Duration::from_secs(5))
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let url = "https://mirror.example/k0s?token=s3cret";
        let a = args(url);
        assert_eq!(a[0], "-q");
        assert!(
            a.windows(4)
                .any(|w| w == ["--proto", "=https", "--proto-redir", "=https"]),
            "{a:?}"
        );
        assert!(a.windows(2).any(|w| w == ["-K", "-"]), "{a:?}");
        assert!(!a.iter().any(|x| x.contains("s3cret")), "{a:?}");
        let a = args("http://127.0.0.1:9/releases");
        assert_eq!(a[0], "-q");
        assert!(!a.iter().any(|x| x.starts_with("--proto")), "{a:?}");
    }
}
