//! `k0s install` flags the way k0s reads and records them. k0s parses the install command line
//! with pflag and writes every explicitly set flag into the service's `ExecStart` in its own
//! string form, sorted by name (k0s `cmd/install/util.go` `cmdFlagsToArgs`, flag types from
//! `pkg/config/cli.go`). Comparing the arguments k0sform wants with the ones a service runs with
//! is only meaningful after both went through the same rules, so this module applies them.

use crate::version::K0sVersion;
use std::collections::{BTreeMap, BTreeSet};

/// Does k0s `v` know `--kubelet-root-dir` (install, worker, reset)? Added in v1.32.1
/// (`9852172ac0`, `pkg/config/cfgvars.go`) and backported to v1.31.8 (`f9a3757687`).
pub fn has_kubelet_root_dir(v: &K0sVersion) -> bool {
    v.at_least(1, 32, 1) || (v.numbers().0, v.numbers().1) == (1, 31) && v.at_least(1, 31, 8)
}

/// pflag value types of the flags `k0s install controller|worker` knows (`pkg/config/cli.go`,
/// `cmd/install/install.go`, `cmd/internal/debug.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Str,
    /// A path: k0s records it made absolute (`filepath.Abs`).
    Path,
    Int,
    /// `time.Duration`: recorded in Go's canonical form (`2m` → `2m0s`).
    Duration,
    /// Like Duration, recorded empty when not positive (`positiveDurationFlag`).
    PositiveDuration,
    /// `StringSlice`: repeated flags append, values split on commas.
    Slice,
    /// `--labels` (`cliflag.ConfigurationMap`): repeated flags merge, recorded sorted.
    Labels,
    /// `-l/--logging` (`logLevelsFlag`): every component, defaults for the ones not named; each
    /// occurrence starts again from the defaults.
    Logging,
    /// `--feature-gates` (`featuregate.FeatureGates`): sorted `name=bool`.
    FeatureGates,
    /// `--force`, `--start`, `--env`: used by `k0s install` itself, never recorded.
    Dropped,
}

/// (long name, shorthand, type). Persistent and debug flags included: k0s records `--debug`.
const FLAGS: &[(&str, Option<char>, Kind)] = &[
    ("api-server-stop-timeout", None, Kind::PositiveDuration),
    ("cidr-range", None, Kind::Str),
    ("config", Some('c'), Kind::Path),
    ("cri-socket", None, Kind::Str),
    ("data-dir", None, Kind::Path),
    ("debug", Some('d'), Kind::Bool),
    ("debugListenOn", None, Kind::Str),
    ("disable-components", None, Kind::Slice),
    ("enable-cloud-provider", None, Kind::Bool),
    ("enable-dynamic-config", None, Kind::Bool),
    ("enable-k0s-cloud-provider", None, Kind::Bool),
    ("enable-metrics-scraper", None, Kind::Bool),
    ("enable-worker", None, Kind::Bool),
    ("env", Some('e'), Kind::Dropped),
    ("feature-gates", None, Kind::FeatureGates),
    ("force", None, Kind::Dropped),
    ("ignore-pre-flight-checks", None, Kind::Bool),
    ("init-only", None, Kind::Bool),
    ("iptables-mode", None, Kind::Str),
    ("k0s-cloud-provider-port", None, Kind::Int),
    ("k0s-cloud-provider-update-frequency", None, Kind::Duration),
    ("kube-controller-manager-extra-args", None, Kind::Str),
    ("kubelet-extra-args", None, Kind::Str),
    ("kubelet-root-dir", None, Kind::Path),
    ("labels", None, Kind::Labels),
    ("logging", Some('l'), Kind::Logging),
    ("no-taints", None, Kind::Bool),
    ("profile", None, Kind::Str),
    ("single", None, Kind::Bool),
    ("start", None, Kind::Dropped),
    ("status-socket", None, Kind::Str),
    ("taints", None, Kind::Slice),
    ("token-file", None, Kind::Path),
    ("verbose", Some('v'), Kind::Bool),
];

/// k0s's default log levels, in the order `logLevelsFlag.String` prints them.
const LOG_COMPONENTS: &[(&str, &str)] = &[
    ("containerd", "info"),
    ("etcd", "info"),
    ("konnectivity-server", "1"),
    ("kube-apiserver", "1"),
    ("kube-controller-manager", "1"),
    ("kube-scheduler", "1"),
    ("kubelet", "1"),
];

fn kind_of(name: &str) -> Option<Kind> {
    FLAGS.iter().find(|(n, _, _)| *n == name).map(|f| f.2)
}

fn long_of(short: char) -> Option<&'static str> {
    FLAGS
        .iter()
        .find(|(_, s, _)| *s == Some(short))
        .map(|f| f.0)
}

/// One flag occurrence on a command line: its long name (shorthands resolved) and its value as
/// written (`None`: a bare flag, `true` for a bool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagUse {
    pub name: String,
    pub value: Option<String>,
}

impl FlagUse {
    pub fn new(name: &str, value: impl Into<String>) -> Self {
        FlagUse {
            name: name.into(),
            value: Some(value.into()),
        }
    }
    /// As one argv word, `--name=value`.
    pub fn word(&self) -> String {
        match &self.value {
            Some(v) => format!("--{}={v}", self.name),
            None => format!("--{}", self.name),
        }
    }
    fn bool_value(&self) -> Option<bool> {
        match &self.value {
            None => Some(true),
            Some(v) => parse_go_bool(v),
        }
    }
}

/// Argv words (already shell-split) into flag uses, as pflag reads them: `--x=v`, `--x v` for
/// a flag that takes a value, bare `--x` for a bool, `-l v`/`-lv`/`-l=v` shorthands. Words
/// that are not flags are skipped (k0s would refuse them: `k0s install` takes no arguments).
pub fn parse_words<S: AsRef<str>>(words: &[S]) -> Vec<FlagUse> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_ref();
        i += 1;
        let (name, inline) = if let Some(body) = w.strip_prefix("--") {
            match body.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (body.to_string(), None),
            }
        } else if let Some(body) = w.strip_prefix('-')
            && let Some(c) = body.chars().next()
        {
            let rest = &body[c.len_utf8()..];
            let name = long_of(c).map_or_else(|| c.to_string(), str::to_string);
            let value = (!rest.is_empty()).then(|| rest.strip_prefix('=').unwrap_or(rest).into());
            (name, value)
        } else {
            continue;
        };
        let takes_value = !matches!(kind_of(&name), Some(Kind::Bool) | None);
        let value = match inline {
            Some(v) => Some(v),
            None if takes_value && i < words.len() => {
                i += 1;
                Some(words[i - 1].as_ref().to_string())
            }
            // An unknown flag followed by a value word: read it as its value, as k0sctl does.
            None if kind_of(&name).is_none()
                && i < words.len()
                && !words[i].as_ref().starts_with('-') =>
            {
                i += 1;
                Some(words[i - 1].as_ref().to_string())
            }
            None => None,
        };
        out.push(FlagUse { name, value });
    }
    out
}

/// The value of the flag `name` (long name; shorthands resolved) in argv words, when given with
/// one (an empty value is none).
pub fn value_of<S: AsRef<str>>(words: &[S], name: &str) -> Option<String> {
    parse_words(words)
        .into_iter()
        .find(|f| f.name == name)
        .and_then(|f| f.value)
        .filter(|v| !v.is_empty())
}

/// The service arguments k0s records for these install flags: every flag once, sorted by name,
/// as `--name=value` in the flag type's string form; `--force`, `--start` and `--env` dropped.
/// Already-recorded arguments come back unchanged, so both sides of a comparison can go
/// through it.
pub fn recorded<S: AsRef<str>>(words: &[S]) -> Vec<String> {
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    let mut slices: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut labels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut label_maps: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut bare: BTreeSet<String> = BTreeSet::new();
    for f in parse_words(words) {
        let raw = f.value.clone().unwrap_or_default();
        match kind_of(&f.name) {
            Some(Kind::Dropped) => {}
            Some(Kind::Bool) => {
                let v = f.bool_value().map_or(raw, |b| b.to_string());
                values.insert(f.name, v);
            }
            Some(Kind::Path) => {
                values.insert(f.name, clean_path(&raw));
            }
            Some(Kind::Int) => {
                let v = raw.parse::<i64>().map_or(raw, |n| n.to_string());
                values.insert(f.name, v);
            }
            Some(Kind::Duration) => {
                let v = parse_go_duration(&raw).map_or(raw, go_duration_string);
                values.insert(f.name, v);
            }
            Some(Kind::PositiveDuration) => {
                let v = match parse_go_duration(&raw) {
                    Ok(d) if d > 0 => go_duration_string(d),
                    Ok(_) => String::new(),
                    Err(_) => raw,
                };
                values.insert(f.name, v);
            }
            Some(Kind::Slice) => slices
                .entry(f.name)
                .or_default()
                .extend(raw.split(',').filter(|s| !s.is_empty()).map(str::to_string)),
            Some(Kind::Labels) => {
                // ConfigurationMap.Set: comma-separated, `k=v` (or bare `k`), spaces trimmed,
                // merged into one map across occurrences; String() sorts the `k=v` pairs.
                let map = label_maps.entry(f.name.clone()).or_default();
                for pair in raw.split(',').filter(|s| !s.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    map.insert(k.trim().to_string(), v.trim().to_string());
                }
                labels.entry(f.name).or_default();
            }
            Some(Kind::Logging) => {
                values.insert(f.name, logging_string(&raw));
            }
            Some(Kind::FeatureGates) => {
                values.insert(f.name, feature_gates_string(&raw));
            }
            Some(Kind::Str) => {
                values.insert(f.name, raw);
            }
            // Not a flag k0s knows (k0s would refuse it): kept as written.
            None => match f.value {
                Some(v) => {
                    values.insert(f.name, v);
                }
                None => {
                    bare.insert(f.name);
                }
            },
        }
    }
    for (name, items) in slices {
        values.insert(name, items.join(","));
    }
    for (name, _) in labels {
        let pairs: BTreeSet<String> = label_maps
            .remove(&name)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        values.insert(name, pairs.into_iter().collect::<Vec<_>>().join(","));
    }
    let mut out: Vec<(String, String)> = values
        .into_iter()
        .map(|(k, v)| (k.clone(), format!("--{k}={v}")))
        .chain(bare.into_iter().map(|k| (k.clone(), format!("--{k}"))))
        .collect();
    out.sort();
    out.into_iter().map(|(_, w)| w).collect()
}

/// `logLevelsFlag.Set` then `String()` without the brackets: all seven components, the ones not
/// named at their defaults. A value k0s would refuse is kept as written.
fn logging_string(raw: &str) -> String {
    let mut levels: Vec<(&str, String)> = LOG_COMPONENTS
        .iter()
        .map(|(c, d)| (*c, d.to_string()))
        .collect();
    let val = raw.trim_start_matches('[').trim_end_matches(']');
    for pair in val.split(',').filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return raw.to_string();
        };
        match levels.iter_mut().find(|(c, _)| *c == k) {
            Some(slot) => slot.1 = v.to_string(),
            None => return raw.to_string(),
        }
    }
    levels
        .iter()
        .map(|(c, v)| format!("{c}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `FeatureGates.String()`: sorted `name=bool`. (k0s also lists the gates not named, at their
/// defaults; which gates exist depends on the version, so only the named ones are kept.)
fn feature_gates_string(raw: &str) -> String {
    let mut gates: BTreeMap<&str, String> = BTreeMap::new();
    for pair in raw.split(',').filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return raw.to_string();
        };
        let v = parse_go_bool(v.trim()).map_or_else(|| v.trim().to_string(), |b| b.to_string());
        gates.insert(k.trim(), v);
    }
    gates
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// `filepath.Abs` of an absolute path is `filepath.Clean`: no `//`, `.`, `..` or trailing `/`.
/// A relative path depends on the remote working directory and is kept.
fn clean_path(p: &str) -> String {
    if !p.starts_with('/') {
        return p.to_string();
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// `time.ParseDuration`, in nanoseconds; the error says what is wrong.
pub fn parse_go_duration(s: &str) -> Result<i128, &'static str> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err("empty");
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() {
            return Err("expected a number");
        }
        let n: f64 = num.parse().map_err(|_| "bad number")?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale: f64 = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err("missing unit"),
            _ => return Err("unknown unit"),
        };
        total += n * scale;
        rest = tail;
    }
    let ns = total.round() as i128;
    Ok(if neg { -ns } else { ns })
}

/// `time.Duration.String()`.
pub fn go_duration_string(ns: i128) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    if u < 1_000_000_000 {
        let (div, unit) = if u < 1_000 {
            (1, "ns")
        } else if u < 1_000_000 {
            (1_000, "µs")
        } else {
            (1_000_000, "ms")
        };
        return format!("{sign}{}{unit}", fraction(u, div));
    }
    let h = u / 3_600_000_000_000;
    let m = (u / 60_000_000_000) % 60;
    let s = u % 60_000_000_000;
    let secs = format!("{}s", fraction(s, 1_000_000_000));
    match (h, m) {
        (0, 0) => format!("{sign}{secs}"),
        (0, m) => format!("{sign}{m}m{secs}"),
        (h, m) => format!("{sign}{h}h{m}m{secs}"),
    }
}

/// `n / div` with the fraction's trailing zeros dropped (`1500, 1000` → `1.5`).
fn fraction(n: u128, div: u128) -> String {
    let whole = n / div;
    let rem = n % div;
    if rem == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{rem:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(words: &[&str]) -> Vec<String> {
        recorded(words)
    }

    /// Each case: the flags given to `k0s install`, and what k0s writes into ExecStart (after
    /// the role), per `cmd/install/util.go` and the flag types of `pkg/config/cli.go`.
    #[test]
    fn recorded_like_k0s() {
        let cases: &[(&[&str], &[&str])] = &[
            // Sorted by name; bools as true/false; a bare bool is true.
            (
                &[
                    "--enable-worker",
                    "--data-dir=/var/lib/k0s",
                    "--no-taints=1",
                ],
                &[
                    "--data-dir=/var/lib/k0s",
                    "--enable-worker=true",
                    "--no-taints=true",
                ],
            ),
            (&["--enable-worker=false"], &["--enable-worker=false"]),
            // Labels merged across occurrences and sorted (ConfigurationMap.String).
            (&["--labels=zone=a,app=x"], &["--labels=app=x,zone=a"]),
            (
                &["--labels=zone=a", "--labels", "app=x", "--labels=zone=b"],
                &["--labels=app=x,zone=b"],
            ),
            // -l/--logging: every component; the last occurrence wins, from the defaults.
            (
                &["-l", "kubelet=2"],
                &[
                    "--logging=containerd=info,etcd=info,konnectivity-server=1,kube-apiserver=1,kube-controller-manager=1,kube-scheduler=1,kubelet=2",
                ],
            ),
            (
                &["--logging=etcd=debug", "-lkubelet=3"],
                &[
                    "--logging=containerd=info,etcd=info,konnectivity-server=1,kube-apiserver=1,kube-controller-manager=1,kube-scheduler=1,kubelet=3",
                ],
            ),
            // String slices append.
            (
                &["--taints=a=b:NoSchedule", "--taints=c=d:NoExecute"],
                &["--taints=a=b:NoSchedule,c=d:NoExecute"],
            ),
            (
                &[
                    "--disable-components=metrics-server",
                    "--disable-components",
                    "konnectivity-server,helm",
                ],
                &["--disable-components=metrics-server,konnectivity-server,helm"],
            ),
            // Durations in Go's form.
            (
                &["--k0s-cloud-provider-update-frequency=2m"],
                &["--k0s-cloud-provider-update-frequency=2m0s"],
            ),
            (
                &["--api-server-stop-timeout=90s"],
                &["--api-server-stop-timeout=1m30s"],
            ),
            // Paths made absolute (cleaned); install-only flags dropped; debug kept.
            (
                &[
                    "--data-dir=/var/lib/k0s/",
                    "--force",
                    "--start",
                    "-e",
                    "HTTP_PROXY=x",
                    "--debug",
                ],
                &["--data-dir=/var/lib/k0s", "--debug=true"],
            ),
            (
                &["-c", "/etc/k0s//k0s.yaml", "-v"],
                &["--config=/etc/k0s/k0s.yaml", "--verbose=true"],
            ),
            (
                &["--feature-gates=IPv6SingleStack=1"],
                &["--feature-gates=IPv6SingleStack=true"],
            ),
            (
                &["--kubelet-extra-args", "--node-ip=10.0.0.5 --max-pods=50"],
                &["--kubelet-extra-args=--node-ip=10.0.0.5 --max-pods=50"],
            ),
            (
                &["--k0s-cloud-provider-port=010"],
                &["--k0s-cloud-provider-port=10"],
            ),
        ];
        for (given, want) in cases {
            assert_eq!(rec(given), *want, "{given:?}");
            // What k0s recorded reads back the same (both sides of a comparison go through it).
            assert_eq!(
                rec(&rec(given).iter().map(String::as_str).collect::<Vec<_>>()),
                *want
            );
        }
    }

    #[test]
    fn go_durations() {
        for (given, want) in [
            ("2m", "2m0s"),
            ("90s", "1m30s"),
            ("1h", "1h0m0s"),
            ("1.5h", "1h30m0s"),
            ("500ms", "500ms"),
            ("1500ms", "1.5s"),
            ("0", "0s"),
            ("30m0s", "30m0s"),
            ("87600h", "87600h0m0s"),
        ] {
            let ns = parse_go_duration(given).expect(given);
            assert_eq!(go_duration_string(ns), want, "{given}");
        }
        assert_eq!(parse_go_duration("2x"), Err("unknown unit"));
        assert_eq!(parse_go_duration(""), Err("empty"));
    }
}
