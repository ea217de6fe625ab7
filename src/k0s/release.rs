//! Where k0s releases live and how a host fetches one: the release download URL of a version
//! and architecture, k0sctl's `k0sDownloadURL` tokens, the published `sha256sums.txt`, the
//! version index (`stable.txt` / `latest.txt`), and the shell line a host runs to download k0s
//! into its staging path. Pure text in, text out; `crate::download` does the local I/O.
//!
//! Behaviour follows k0sctl (`pkg/k0s/binprovider/download.go`, `phase/default_k0s_version.go`,
//! `cluster/host.go ExpandTokens`) and its version library (`k0sproject/version`
//! `version.go DownloadURL`, `latest.go LatestByPrerelease`).

use crate::hash::is_sha256;
use crate::transport::RemoteCommand;
use crate::version::K0sVersion;
use std::time::Duration;

/// GitHub's release downloads, as k0sproject/version's `BaseUrl` + `releases/download/`.
pub const DEFAULT_DOWNLOAD_BASE: &str = "https://github.com/k0sproject/k0s/releases/download";
/// Where k0sctl looks up the newest version (`stable.txt`, `latest.txt`).
pub const DEFAULT_VERSION_BASE: &str = "https://docs.k0sproject.io";
/// Environment variables that point the two bases at a mirror (named in `--help`).
pub const DOWNLOAD_URL_ENV: &str = "K0SFORM_K0S_DOWNLOAD_URL";
pub const VERSION_URL_ENV: &str = "K0SFORM_K0S_VERSION_URL";
/// Limit for one binary download, on a host or locally (seconds).
pub const DOWNLOAD_TIMEOUT_ENV: &str = "K0SFORM_K0S_DOWNLOAD_TIMEOUT";
/// The file of published checksums in each release (`sha256sum` output).
// k0s publishes it with every release: `.github/workflows/release.yml` runs
// `sha256sum -b -- * >../sha256sums.txt` over the release assets and uploads it.
pub const CHECKSUMS_FILE: &str = "sha256sums.txt";

/// The release endpoints of one run: GitHub and docs.k0sproject.io, or a mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// Base of `<base>/<version>/<asset>`, no trailing slash.
    pub download_base: String,
    /// Base of `<base>/stable.txt`, no trailing slash.
    pub version_base: String,
    pub timeout: Duration,
}

impl Default for Mirror {
    fn default() -> Self {
        Mirror {
            download_base: DEFAULT_DOWNLOAD_BASE.into(),
            version_base: DEFAULT_VERSION_BASE.into(),
            timeout: Duration::from_secs(600),
        }
    }
}

impl Mirror {
    /// From `K0SFORM_K0S_DOWNLOAD_URL`, `K0SFORM_K0S_VERSION_URL` and
    /// `K0SFORM_K0S_DOWNLOAD_TIMEOUT` (a duration like `10m` or `30s`), defaults otherwise.
    pub fn from_env() -> Result<Self, String> {
        let mut m = Mirror::default();
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        if let Some(v) = var(DOWNLOAD_URL_ENV) {
            m.download_base = v.trim().trim_end_matches('/').to_string();
        }
        if let Some(v) = var(VERSION_URL_ENV) {
            m.version_base = v.trim().trim_end_matches('/').to_string();
        }
        if let Some(v) = var(DOWNLOAD_TIMEOUT_ENV) {
            m.timeout = humantime::parse_duration(v.trim())
                .map_err(|e| format!("{DOWNLOAD_TIMEOUT_ENV}={v}: {e} (examples: 30s, 10m)"))?;
        }
        Ok(m)
    }

    /// Warnings about bases that are not https: anyone on the way can replace what comes
    /// from there, binaries and `sha256sums.txt` alike (only `k0sDownloadSha256` still holds).
    pub fn warnings(&self) -> Vec<String> {
        let plain = |base: &str| {
            base.get(..7)
                .is_some_and(|s| s.eq_ignore_ascii_case("http://"))
        };
        let mut w = Vec::new();
        if plain(&self.download_base) {
            w.push(format!(
                "Warning: {DOWNLOAD_URL_ENV} is plain http ({}): k0s binaries and their checksums from there can be replaced on the way; use https, or set k0sDownloadSha256 on the hosts",
                super::redact::hide_url_credentials(&self.download_base)
            ));
        }
        if plain(&self.version_base) {
            w.push(format!(
                "Warning: {VERSION_URL_ENV} is plain http ({}): the k0s version looked up there can be replaced on the way; use https, or set spec.k0s.version",
                super::redact::hide_url_credentials(&self.version_base)
            ));
        }
        w
    }

    /// The release directory of `version` (the tag's `+` percent-encoded, as GitHub wants it).
    fn release_dir(&self, version: &str) -> String {
        format!("{}/{}", self.download_base, version.replace('+', "%2B"))
    }

    /// k0s's binary for `version` and a k0s architecture (`amd64`, `arm64`, …).
    pub fn binary_url(&self, version: &str, arch: &str) -> String {
        format!(
            "{}/{}",
            self.release_dir(version),
            asset_name(version, arch)
        )
    }

    pub fn checksums_url(&self, version: &str) -> String {
        format!("{}/{CHECKSUMS_FILE}", self.release_dir(version))
    }

    /// `stable.txt` (latest release) or `latest.txt` (pre-releases too), as k0sctl's
    /// `versionChannel` chooses.
    pub fn version_index_url(&self, channel: Channel) -> String {
        format!("{}/{}", self.version_base, channel.file())
    }
}

/// `spec.k0s.versionChannel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Stable,
    Latest,
}

impl Channel {
    /// k0sctl: empty or `stable` is stable, anything else (validation allows `latest`) latest.
    pub fn from_spec(c: Option<&str>) -> Self {
        match c {
            None | Some("stable") | Some("") => Channel::Stable,
            Some(_) => Channel::Latest,
        }
    }
    fn file(self) -> &'static str {
        match self {
            Channel::Stable => "stable.txt",
            Channel::Latest => "latest.txt",
        }
    }
    pub fn describe(self) -> &'static str {
        match self {
            Channel::Stable => "latest stable release",
            Channel::Latest => "latest release, pre-releases included",
        }
    }
}

/// The release asset name: `k0s-v1.33.4+k0s.0-amd64`.
pub fn asset_name(version: &str, arch: &str) -> String {
    format!("k0s-{version}-{arch}")
}

/// `uname -m` → k0s's architecture names (the release assets' suffixes, k0sctl's `%p`).
pub fn k0s_arch(uname_m: &str) -> String {
    match uname_m.trim() {
        "x86_64" | "amd64" => "amd64".into(),
        "aarch64" | "arm64" => "arm64".into(),
        m if m.starts_with("armv") || m == "arm" => "arm".into(),
        other => other.to_string(),
    }
}

/// k0sctl's `k0sDownloadURL` tokens (`cluster/host.go ExpandTokens`): `%%` a literal `%`, `%p`
/// the architecture, `%v` the version (query-escaped: `+` → `%2B`), `%x` the binary extension
/// (empty: k0sform drives Linux hosts only). Unknown tokens and a trailing `%` stay as written.
pub fn expand_tokens(template: &str, version: &str, arch: &str) -> String {
    let mut out = String::with_capacity(template.len() + version.len());
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('p') => out.push_str(arch),
            Some('v') => out.push_str(&query_escape(version)),
            Some('x') => {}
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Go's `url.QueryEscape` for the characters a k0s version can hold.
fn query_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The sha256 that a `sha256sum`-style file gives for `file` (`<hex>  <name>` or `<hex> *<name>`,
/// the name possibly with a leading `./` or folder).
pub fn checksum_for(sums: &str, file: &str) -> Option<String> {
    sums.lines().find_map(|l| {
        let (hex, name) = l.trim().split_once(char::is_whitespace)?;
        let name = name.trim_start().trim_start_matches('*');
        let base = name.rsplit('/').next().unwrap_or(name);
        (base == file && is_sha256(hex)).then(|| hex.to_ascii_lowercase())
    })
}

/// `stable.txt`/`latest.txt` hold one version (`v1.33.4+k0s.0`, sometimes without the `v`).
pub fn parse_version_index(text: &str) -> Result<K0sVersion, String> {
    K0sVersion::parse(text.trim())
}

/// Is `url` an https URL (curl is then held to https, also through redirects)?
pub fn is_https(url: &str) -> bool {
    url.get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
}

/// `url` as a line of a curl config (`curl -K`): `url = "…"`, with every byte a quoted
/// config string could not hold as it is (`"`, `\`, spaces, controls, non-ASCII) percent-encoded, as curl
/// would send them anyway. Passed on stdin, the URL stays out of the argv other users see.
pub fn curl_config(url: &str) -> String {
    let mut out = String::from("url = \"");
    for b in url.bytes() {
        if b <= b' ' || b >= 0x7f || b == b'"' || b == b'\\' {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out.push_str("\"\n");
    out
}

/// The shell line a host runs to fetch k0s into its staging path: curl (else wget) into
/// `<staged>.part`, sha256 checked (unless `sha256` is empty: nothing to check against), then
/// renamed to the staging path; prints `sha256 <hex>` of what it staged. Nothing else on the host
/// changes; every failure removes the partial file and ends with one `k0sform: …` line that
/// says what went wrong (no curl/wget, HTTP error, timeout, checksum mismatch). The URL comes
/// on stdin and reaches curl in a config on its stdin (wget: its list of URLs on stdin), never
/// in an argv other users of the host can read; curl runs with `-q` (no `~/.curlrc`) and, for
/// an https URL, only https, also through redirects.
pub fn download_on_host(url: &str, staged: &str, sha256: &str, timeout: Duration) -> RemoteCommand {
    const SCRIPT: &str = r#"dst=$1 want=$2 t=$3
IFS= read -r url || { echo "k0sform: no URL given" >&2; exit 1; }
part="$dst.part"
rm -f -- "$part"
mkdir -p -- "$(dirname -- "$dst")" || exit 1
rc=0
if command -v curl >/dev/null 2>&1; then
  set -- -q
  case $url in [Hh][Tt][Tt][Pp][Ss]://*) set -- "$@" --proto =https --proto-redir =https ;; esac
  printf 'url = "%s"\n' "$url" | curl "$@" -fsSL --connect-timeout 30 --max-time "$t" -o "$part" -K - || rc=$?
  if [ "$rc" -eq 28 ]; then echo "k0sform: the download timed out after ${t}s (curl): $url" >&2; fi
elif command -v wget >/dev/null 2>&1; then
  printf '%s\n' "$url" | wget -nv -t 1 -T "$t" -O "$part" -i - || rc=$?
else
  echo "k0sform: neither curl nor wget is installed on this host: cannot download k0s from $url" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  rm -f -- "$part"
  echo "k0sform: downloading $url failed (exit $rc)" >&2
  exit 1
fi
got=$(sha256sum -- "$part" | cut -d ' ' -f 1)
if [ -n "$want" ] && [ "$got" != "$want" ]; then
  rm -f -- "$part"
  echo "k0sform: checksum mismatch: $url has sha256 $got, expected $want" >&2
  exit 1
fi
chmod 755 -- "$part" && mv -f -- "$part" "$dst" && printf 'sha256 %s\n' "$got"
"#;
    let secs = timeout.as_secs().max(1);
    // The config line's URL (`curl_config`): nothing in it the shell's `printf` or curl's
    // quoting could take for syntax.
    let safe = curl_config(url);
    let safe = &safe["url = \"".len()..safe.len() - 2];
    RemoteCommand::new([
        "sh".to_string(),
        "-c".into(),
        SCRIPT.into(),
        "k0sform-download".into(),
        staged.to_string(),
        sha256.to_string(),
        secs.to_string(),
    ])
    .stdin(format!("{safe}\n"))
    // The download's own limit, plus room to hash and rename.
    .timeout(Duration::from_secs(secs + 60))
}

/// The sha256 `download_on_host` printed for what it staged (`sha256 <hex>`), when it is one.
pub fn staged_sha256(stdout: &str) -> Option<String> {
    stdout
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("sha256 "))
        .filter(|h| is_sha256(h))
        .map(str::to_ascii_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: &str = "v1.33.4+k0s.0";

    #[test]
    fn release_urls_follow_github_layout() {
        let m = Mirror::default();
        assert_eq!(
            m.binary_url(V, "amd64"),
            "https://github.com/k0sproject/k0s/releases/download/v1.33.4%2Bk0s.0/k0s-v1.33.4+k0s.0-amd64"
        );
        assert_eq!(
            m.checksums_url(V),
            "https://github.com/k0sproject/k0s/releases/download/v1.33.4%2Bk0s.0/sha256sums.txt"
        );
        assert_eq!(
            m.version_index_url(Channel::Stable),
            "https://docs.k0sproject.io/stable.txt"
        );
        assert_eq!(
            m.version_index_url(Channel::from_spec(Some("latest"))),
            "https://docs.k0sproject.io/latest.txt"
        );
    }

    #[test]
    fn tokens_expand_as_k0sctl_does() {
        assert_eq!(
            expand_tokens("https://m/%v/k0s-%v-%p%x?x=100%%&y=%q%", V, "arm64"),
            "https://m/v1.33.4%2Bk0s.0/k0s-v1.33.4%2Bk0s.0-arm64?x=100%&y=%q%"
        );
        assert_eq!(expand_tokens("", V, "amd64"), "");
    }

    #[test]
    fn urls_reach_curl_in_a_config_line_it_cannot_misread() {
        assert_eq!(
            curl_config("https://u:p@m.example/a b\"c\\d\né"),
            "url = \"https://u:p@m.example/a%20b%22c%5Cd%0A%C3%A9\"\n"
        );
        assert!(is_https("HTTPS://x") && is_https("https://x"));
        assert!(!is_https("http://x") && !is_https("file:///x"));
    }

    #[test]
    fn a_plain_http_mirror_is_warned_about() {
        assert!(Mirror::default().warnings().is_empty());
        let m = Mirror {
            download_base: "http://mirror.example/k0s".into(),
            version_base: "HTTP://mirror.example".into(),
            ..Mirror::default()
        };
        let w = m.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains(DOWNLOAD_URL_ENV) && w[0].contains("plain http"),
            "{w:?}"
        );
        assert!(w[1].contains(VERSION_URL_ENV), "{w:?}");
    }

    #[test]
    fn uname_maps_to_k0s_arch() {
        assert_eq!(k0s_arch("x86_64\n"), "amd64");
        assert_eq!(k0s_arch("aarch64"), "arm64");
        assert_eq!(k0s_arch("armv7l"), "arm");
        assert_eq!(k0s_arch("riscv64"), "riscv64");
    }

    #[test]
    fn checksums_are_found_by_asset_name() {
        let a = "a".repeat(64);
        let b = "B".repeat(64);
        let sums = format!(
            "{a}  k0s-v1.33.4+k0s.0-amd64\n{b} *./k0s-v1.33.4+k0s.0-arm64\nzz  k0s-v1.33.4+k0s.0-arm\n"
        );
        assert_eq!(checksum_for(&sums, "k0s-v1.33.4+k0s.0-amd64"), Some(a));
        assert_eq!(
            checksum_for(&sums, "k0s-v1.33.4+k0s.0-arm64"),
            Some("b".repeat(64))
        );
        assert_eq!(checksum_for(&sums, "k0s-v1.33.4+k0s.0-arm"), None);
        assert_eq!(checksum_for(&sums, "k0s-v1.33.4+k0s.0"), None);
    }

    #[test]
    fn version_index_holds_one_version() {
        assert_eq!(
            parse_version_index("v1.34.1+k0s.0\n").unwrap().to_string(),
            "v1.34.1+k0s.0"
        );
        assert_eq!(
            parse_version_index("1.34.1+k0s.0").unwrap().to_string(),
            "v1.34.1+k0s.0"
        );
        assert_eq!(
            parse_version_index("v1.35.0-rc.1+k0s.0")
                .unwrap()
                .to_string(),
            "v1.35.0-rc.1+k0s.0"
        );
        assert!(parse_version_index("<html>oops</html>").is_err());
        assert!(parse_version_index("v1.2").is_err());
        assert!(parse_version_index("v1.2.3;rm -rf /").is_err());
    }

    /// The host's download script, run locally against files (curl and wget both read
    /// `file://`): a good download is staged, a bad checksum or a missing file leaves nothing.
    #[test]
    fn the_download_script_stages_only_a_verified_binary() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("k0s-src");
        std::fs::write(&src, "binary").unwrap();
        let good = crate::hash::sha256_hex("binary");
        let staged = d.path().join("bin/k0s.k0sform-new");
        let staged_s = staged.to_str().unwrap();
        let url = format!("file://{}", src.display());
        let run = |url: &str, sha: &str| {
            use std::io::Write;
            let c = download_on_host(url, staged_s, sha, Duration::from_secs(5));
            // The URL is not in the argv (other users of the host see that), only on stdin.
            assert!(!c.argv.iter().any(|a| a.contains(url)), "{:?}", c.argv);
            let mut child = std::process::Command::new(&c.argv[0])
                .args(&c.argv[1..])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let input = c.stdin.clone().unwrap_or_default();
            child.stdin.take().unwrap().write_all(&input).unwrap();
            child.wait_with_output().unwrap()
        };
        let bad = run(&url, &"0".repeat(64));
        assert!(!bad.status.success());
        assert!(
            String::from_utf8_lossy(&bad.stderr).contains("k0sform: checksum mismatch"),
            "{}",
            String::from_utf8_lossy(&bad.stderr)
        );
        assert!(!staged.exists());
        assert!(!d.path().join("bin/k0s.k0sform-new.part").exists());
        let missing = run(&format!("file://{}/nope", d.path().display()), &good);
        assert!(!missing.status.success());
        assert!(String::from_utf8_lossy(&missing.stderr).contains("k0sform: downloading"));
        assert!(!staged.exists());
        let ok = run(&url, &good);
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        assert_eq!(std::fs::read_to_string(&staged).unwrap(), "binary");
        assert_eq!(
            staged_sha256(&String::from_utf8_lossy(&ok.stdout)),
            Some(good.clone())
        );
        // Nothing to check against (a k0sDownloadURL, a release before v1.28.2): staged, and
        // its hash printed to be recorded.
        std::fs::remove_file(&staged).unwrap();
        let unchecked = run(&url, "");
        assert!(unchecked.status.success());
        assert_eq!(std::fs::read_to_string(&staged).unwrap(), "binary");
        assert_eq!(
            staged_sha256(&String::from_utf8_lossy(&unchecked.stdout)),
            Some(good)
        );
        assert_eq!(staged_sha256("sha256 nothex\n"), None);
    }
}
