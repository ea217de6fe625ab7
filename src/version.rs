//! `K0sVersion`: a k0s version as k0sctl reads, orders and prints it
//! (github.com/k0sproject/version `version.go`: `NewVersion`, `Compare`, `String`). The one
//! place a version string is parsed; every file, host answer and index that names a version
//! goes through [`K0sVersion::parse`], and it is always printed with its leading `v`.
//!
//! The numbers are a `semver::Version` and compare as semver compares them. The rest is not
//! semver's: k0sproject/version compares pre-releases as plain strings (`rc.10` sorts before
//! `rc.2`, where semver compares numeric identifiers as numbers, and semver refuses `rc.01`,
//! which k0sctl accepts) and orders `+k0s.N` build numbers, which semver ignores for precedence.
//! The ordering here is k0sctl's, so a downgrade k0sctl refuses is refused here.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Longer is not a version any host or index prints (a dev build's is under 50 characters).
const MAX_LEN: usize = 64;

/// `v<major>.<minor>.<patch>[-<pre>][+<build>]`, e.g. `v1.33.4+k0s.0`, `v1.34.0-rc.1+k0s.0`.
/// Equality is k0sctl's `Version.Equal`: numbers, pre-release and the `k0s.N` build number;
/// other build metadata (a dev build's `-258-gdff90cee9a`) does not count.
#[derive(Debug, Clone)]
pub struct K0sVersion {
    /// major.minor.patch, no pre-release, no build: semver's order is k0sproject/version's
    /// segment order. Each number fits a `u32` ([`K0sVersion::parse`] checks).
    core: semver::Version,
    /// After the `-`, before any `+`; empty for a release.
    pre: String,
    /// N of `+k0s.N`, when the build part has one.
    k0s: Option<u32>,
    /// Everything after the `+`, kept to print the version as written.
    build: String,
}

impl K0sVersion {
    /// Parse `v1.33.4+k0s.0` or `1.33.4+k0s.0` (k0sctl accepts both and prints the `v`). Only
    /// `a-z 0-9 . + -` (k0sproject/version refuses anything else), exactly three numbers, at
    /// most 64 characters: nothing a shell, a URL or a terminal reads specially.
    pub fn parse(text: &str) -> Result<K0sVersion, String> {
        let bad = |why: &str| {
            format!(
                "{:?} is not a k0s version ({why}; e.g. v1.33.4+k0s.0)",
                crate::hash::short_n(text, 80)
            )
        };
        if text.len() > MAX_LEN {
            return Err(bad("too long"));
        }
        let s = text.strip_prefix('v').unwrap_or(text);
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(*c)))
        {
            return Err(bad(&format!("it can't contain {c:?}")));
        }
        let (rest, build) = match s.split_once('+') {
            Some((r, b)) => (r, Some(b)),
            None => (s, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (rest, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() != 3
            || parts
                .iter()
                .any(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(bad("expected MAJOR.MINOR.PATCH"));
        }
        let mut numbers = [0u32; 3];
        for (i, p) in parts.iter().enumerate() {
            numbers[i] = p.parse().map_err(|_| bad("number too large"))?;
        }
        let [major, minor, patch] = numbers.map(u64::from);
        let idents_ok = |s: &str| !s.is_empty() && s.split('.').all(|p| !p.is_empty());
        if pre.is_some_and(|p| !idents_ok(p)) {
            return Err(bad("bad pre-release part"));
        }
        if build.is_some_and(|b| b.contains('+') || !idents_ok(b)) {
            return Err(bad("bad build part"));
        }
        let build = build.unwrap_or_default();
        // k0sproject/version: `k0s` followed by a number anywhere in the build part.
        let words: Vec<&str> = build.split('.').collect();
        let k0s = words
            .windows(2)
            .find(|w| w[0] == "k0s")
            .and_then(|w| w[1].parse().ok());
        Ok(K0sVersion {
            core: semver::Version::new(major, minor, patch),
            pre: pre.unwrap_or_default().to_string(),
            k0s,
            build: build.to_string(),
        })
    }

    /// (major, minor, patch).
    pub fn numbers(&self) -> (u32, u32, u32) {
        // `parse` stores only numbers that fit a u32.
        let n = |x: u64| u32::try_from(x).unwrap_or(u32::MAX);
        (n(self.core.major), n(self.core.minor), n(self.core.patch))
    }

    /// Is this version at least `major.minor.patch`, pre-releases of that release included
    /// (k0s's own feature gates count from the first release candidate)?
    pub fn at_least(&self, major: u32, minor: u32, patch: u32) -> bool {
        self.numbers() >= (major, minor, patch)
    }

    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }
}

impl fmt::Display for K0sVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.core)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

impl FromStr for K0sVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        K0sVersion::parse(s)
    }
}

impl Ord for K0sVersion {
    /// k0sproject/version `Compare`: the numbers (semver's order); then a release above its
    /// pre-releases, and pre-releases as plain strings; then a `k0s.N` build above none, and by N.
    fn cmp(&self, other: &Self) -> Ordering {
        self.core
            .cmp(&other.core)
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                _ => self.pre.cmp(&other.pre),
            })
            .then_with(|| self.k0s.cmp(&other.k0s))
    }
}

impl PartialOrd for K0sVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for K0sVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for K0sVersion {}

/// The version as printed (`v` included) equals this text; for tests and lookups by name.
impl PartialEq<&str> for K0sVersion {
    fn eq(&self, other: &&str) -> bool {
        self.to_string().as_str() == *other
    }
}

impl Serialize for K0sVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for K0sVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        K0sVersion::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for K0sVersion {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "K0sVersion".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(s: &str) -> K0sVersion {
        K0sVersion::parse(s).unwrap()
    }

    #[test]
    fn with_or_without_the_v_is_the_same_version_printed_with_it() {
        assert_eq!(v("1.33.4+k0s.0"), v("v1.33.4+k0s.0"));
        assert_eq!(v("1.33.4+k0s.0").to_string(), "v1.33.4+k0s.0");
        assert_eq!(
            v("v1.37.0-alpha.1+k0s.0-258-gdff90cee9a").to_string(),
            "v1.37.0-alpha.1+k0s.0-258-gdff90cee9a"
        );
    }

    #[test]
    fn orders_as_k0sproject_version() {
        // version_test.go's cases.
        let ordered = [
            "v1.2.3-alpha.1+k0s.0",
            "v1.2.3-beta.1+k0s.0",
            "v1.2.3-rc.1+k0s.0",
            "v1.2.3-rc.10+k0s.0",
            "v1.2.3-rc.2+k0s.0",
            "v1.2.3",
            "v1.2.3+k0s.0",
            "v1.2.3+k0s.1",
            "v1.2.4+k0s.0",
            "v1.10.0+k0s.0",
        ];
        for (i, a) in ordered.iter().enumerate() {
            for b in &ordered[i + 1..] {
                assert!(v(a) < v(b), "{a} < {b}");
                assert!(v(b) > v(a), "{b} > {a}");
                assert_ne!(v(a), v(b));
            }
        }
        assert_eq!(v("v1.2.3+k0s.1.abc"), v("v1.2.3+k0s.1"));
        assert!(v("v1.35.0-rc.1+k0s.0").at_least(1, 35, 0));
        assert!(!v("v1.34.9+k0s.0").at_least(1, 35, 0));
    }

    #[test]
    fn refuses_what_k0sctl_refuses_and_what_no_release_is() {
        for bad in [
            "",
            "v",
            "1.33",
            "1.33.4.1",
            "v1.33.x",
            "V1.33.4",
            "v1.33.4+K0S.0",
            "v1.33.4 ",
            "v1.33.4;rm",
            "v1.33.4-",
            "v1.33.4+",
            "v1.33.4+k0s..0",
            "v1.33.4+a+b",
            "v99999999999.1.1",
            "<html>",
        ] {
            assert!(K0sVersion::parse(bad).is_err(), "{bad:?}");
        }
        assert!(K0sVersion::parse(&format!("v1.2.3-{}", "a".repeat(60))).is_err());
    }

    #[test]
    fn serde_validates_and_prints_the_v() {
        let x: K0sVersion = serde_json::from_str("\"1.33.4+k0s.0\"").unwrap();
        assert_eq!(serde_json::to_string(&x).unwrap(), "\"v1.33.4+k0s.0\"");
        assert!(serde_json::from_str::<K0sVersion>("\"v1.33.4;reboot\"").is_err());
    }

    fn version() -> impl Strategy<Value = String> {
        // Few numbers: pairs often differ only in their pre-release or build part.
        (
            0u32..2,
            0u32..3,
            0u32..3,
            proptest::option::of("(alpha|beta|rc)\\.[0-9]{1,2}"),
            proptest::option::of(0u32..3),
        )
            .prop_map(|(a, b, c, pre, k)| {
                let mut s = format!("v{a}.{b}.{c}");
                if let Some(p) = pre {
                    s += &format!("-{p}");
                }
                if let Some(k) = k {
                    s += &format!("+k0s.{k}");
                }
                s
            })
    }

    #[test]
    fn orders_as_k0sproject_versions_total_order_test() {
        // version_test.go `generateVersionOrdering` (testdata/version-ordering.txt), the
        // three-number spellings: one group per line, equal within a group, groups ascending.
        let mut groups: Vec<Vec<K0sVersion>> = Vec::new();
        for maj in 0..2 {
            for min in 0..2 {
                for pat in 0..2 {
                    for pre in ["-0", "-z", ""] {
                        for k0s in ["", "+k0s.0", "+k0s.1"] {
                            let metas = if k0s.is_empty() {
                                vec!["", "+0", "+z"]
                            } else {
                                vec![k0s]
                            };
                            groups.push(
                                metas
                                    .iter()
                                    .map(|m| v(&format!("{maj}.{min}.{pat}{pre}{m}")))
                                    .collect(),
                            );
                        }
                    }
                }
            }
        }
        for (i, gi) in groups.iter().enumerate() {
            for (j, gj) in groups.iter().enumerate() {
                for (a, b) in gi.iter().flat_map(|a| gj.iter().map(move |b| (a, b))) {
                    assert_eq!(a.cmp(b), i.cmp(&j), "{a} vs {b}");
                }
            }
        }
    }

    /// The ordering before it used `semver`: the oracle for the property below.
    fn old_cmp(a: &K0sVersion, b: &K0sVersion) -> Ordering {
        a.numbers()
            .cmp(&b.numbers())
            .then_with(|| match (a.pre.is_empty(), b.pre.is_empty()) {
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                _ => a.pre.cmp(&b.pre),
            })
            .then_with(|| a.k0s.cmp(&b.k0s))
    }

    type Parts = ((u32, u32, u32), Option<String>, Option<String>);

    /// Any version `parse` accepts, weighted to the parts where semver and k0sctl could differ:
    /// numeric, leading-zero and mixed pre-release identifiers, build metadata around `k0s.N`.
    fn any_parts() -> impl Strategy<Value = Parts> {
        let number = prop_oneof![8 => 0u32..2, 1 => Just(u32::MAX), 1 => any::<u32>()];
        let ident = "[0-9]{1,3}|[a-z0-9-]{1,4}|alpha|beta|rc|k0s";
        let idents = proptest::collection::vec(ident, 1..4).prop_map(|p| p.join("."));
        (
            (number.clone(), number.clone(), number),
            proptest::option::of(idents.clone()),
            proptest::option::of(idents),
        )
    }

    fn format_parts(((a, b, c), pre, build): &Parts) -> String {
        let mut s = format!("v{a}.{b}.{c}");
        if let Some(p) = pre {
            s += &format!("-{p}");
        }
        if let Some(b) = build {
            s += &format!("+{b}");
        }
        s
    }

    proptest! {
        // A failing case is printed; nothing is written into the source tree.
        #![proptest_config(ProptestConfig {
            cases: 2000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]
        #[test]
        fn orders_as_before_semver(a in any_parts(), mut b in any_parts(), same in any::<bool>()) {
            // Half the pairs share their numbers: then the pre-release and build decide.
            if same {
                b.0 = a.0;
            }
            let (a, b) = (format_parts(&a), format_parts(&b));
            prop_assume!(a.len() <= MAX_LEN && b.len() <= MAX_LEN);
            let (x, y) = (v(&a), v(&b));
            prop_assert_eq!(x.cmp(&y), old_cmp(&x, &y), "{} vs {}", a, b);
            prop_assert_eq!(x.cmp(&x), Ordering::Equal);
            prop_assert_eq!(x.to_string(), a);
        }
    }

    proptest! {
        #[test]
        fn a_total_order_that_round_trips(a in version(), b in version(), c in version()) {
            let (x, y, z) = (v(&a), v(&b), v(&c));
            prop_assert_eq!(v(&x.to_string()), x.clone());
            prop_assert_eq!(x.to_string(), a.clone());
            prop_assert_eq!(v(a.trim_start_matches('v')), x.clone());
            prop_assert_eq!(x.cmp(&y), y.cmp(&x).reverse());
            if x <= y && y <= z {
                prop_assert!(x <= z);
            }
            // A release sorts after every pre-release of its numbers.
            if x.numbers() == y.numbers() && !x.is_prerelease() && y.is_prerelease() {
                prop_assert!(x > y);
            }
        }
    }
}
