//! Reading a state file's bytes: its format version first, then the state, each field that
//! reaches a command, ssh's command line or the terminal held to its rule.

use super::super::error::StateError;
use super::super::model::{FORMAT_VERSION, HostState, Intent, State};
use std::fmt::Display;
use std::path::Path;

/// Parse state file bytes, telling truncation, non-JSON, newer formats and bad content apart.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<State, StateError> {
    let invalid = |detail: String| StateError::Invalid {
        path: path.to_path_buf(),
        detail,
    };
    check_format_version(path, bytes)?;
    let state: State = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    // First, as later messages name hosts by their address.
    check_fields(&state).map_err(invalid)?;
    check_versions(&state).map_err(invalid)?;
    check_hosts(&state).map_err(invalid)?;
    check_bastions(&state).map_err(invalid)?;
    Ok(state)
}

/// The file is a JSON object whose `format_version` this build reads.
fn check_format_version(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(StateError::Truncated {
            path: path.to_path_buf(),
            detail: "the file is empty".into(),
        });
    }
    // First only the top level's format_version (the rest is parsed and skipped, nothing is
    // kept): a newer format may have fields this build does not know, and syntax errors are
    // told apart from content errors. Then the state itself, straight from the bytes (a
    // `serde_json::Value` of a 50,000-host state would be several times its size).
    #[derive(serde::Deserialize)]
    struct Header {
        format_version: Option<serde_json::Value>,
    }
    let invalid = |detail: String| StateError::Invalid {
        path: path.to_path_buf(),
        detail,
    };
    let syntax = |e: serde_json::Error| {
        if e.is_eof() {
            StateError::Truncated {
                path: path.to_path_buf(),
                detail: format!("JSON ends early at line {} column {}", e.line(), e.column()),
            }
        } else {
            StateError::NotJson {
                path: path.to_path_buf(),
                detail: e.to_string(),
            }
        }
    };
    // Anything but an object: JSON or not? (A JSON array would fill the struct below.)
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(syntax)?;
        return Err(invalid("the top level is not a JSON object".into()));
    }
    let header: Header = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            invalid(e.to_string())
        } else {
            syntax(e)
        }
    })?;
    let version = match header.format_version {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| invalid(format!("format_version is {v}, not a positive integer")))?,
        None => return Err(invalid("format_version is missing".into())),
    };
    if version > u64::from(FORMAT_VERSION) {
        return Err(StateError::NewerFormat {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(invalid("format_version 0 does not exist".into()));
    }
    Ok(())
}

/// A recorded version may become the one installed (`binaries::resolve_version`): in a
/// download URL and a path on the hosts.
fn check_versions(state: &State) -> Result<(), String> {
    let versions = state
        .cluster
        .iter()
        .map(|c| ("cluster".to_string(), &c.k0s_version));
    let versions = versions.chain(
        state
            .hosts
            .iter()
            .map(|h| (format!("host {}", h.id()), &h.k0s_version)),
    );
    for (what, v) in versions {
        if let Some(v) = v {
            crate::spec::check_k0s_version(v).map_err(|e| format!("{what}: k0s_version: {e}"))?;
        }
    }
    Ok(())
}

/// Each host once; its binary record a stat line and a sha256.
fn check_hosts(state: &State) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for h in &state.hosts {
        if !seen.insert((h.address.as_str(), h.port)) {
            return Err(format!("host {} appears more than once", h.id()));
        }
        // Given to the host's probe as an argument and trusted as the binary's hash.
        if let Some(b) = &h.k0s_binary {
            if !crate::state::is_binary_stat(&b.stat) {
                return Err(format!(
                    "host {}: k0s_binary.stat {:?} is not a stat line",
                    h.id(),
                    b.stat
                ));
            }
            if b.sha256.len() != 64
                || !b
                    .sha256
                    .bytes()
                    .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
            {
                return Err(format!(
                    "host {}: k0s_binary.sha256 {:?} is not a lower-case hex sha256",
                    h.id(),
                    b.sha256
                ));
            }
        }
    }
    Ok(())
}

/// Each bastion once; its key a key, with the recorded fingerprint.
fn check_bastions(state: &State) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for b in &state.bastions {
        if !seen.insert((b.address.as_str(), b.port)) {
            return Err(format!("bastion {} appears more than once", b.id()));
        }
        // The key is used as a known_hosts line: it must be a key, and the one fingerprinted.
        let key = crate::ssh_key::PublicKey::parse(&b.host_public_key)
            .map_err(|e| format!("bastion {}: host_public_key: {e}", b.id()))?;
        if !key
            .key_type
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-@.".contains(c))
        {
            return Err(format!(
                "bastion {}: host_public_key has an unknown key type {:?}",
                b.id(),
                key.key_type
            ));
        }
        if key.fingerprint() != b.host_key {
            return Err(format!(
                "bastion {}: host_public_key does not have the fingerprint host_key {:?}",
                b.id(),
                b.host_key
            ));
        }
    }
    Ok(())
}

/// Every field of a state that reaches a command, ssh's command line or the terminal is held to
/// its rule when the state is read: a state is anyone's to edit. Addresses follow the spec's
/// rule (`spec::address_problem`: an IP address or an RFC 1123 name; a removed host is reached
/// at its recorded address, its bastions too); peer URLs (`k0s etcd leave --peer-address`),
/// member IDs, machine-ids (`k0s reset` is guarded by it), node names (kubectl), host key
/// fingerprints and users follow `spec::recorded_field_problem` and the spec's user rule; hashes
/// are hex, and the free texts (cluster name, intents' step names) have no control characters.
/// The error names the field, e.g. `hosts[2].access.ssh.bastion.address`; values are escaped.
fn check_fields(state: &State) -> Result<(), String> {
    for (i, h) in state.hosts.iter().enumerate() {
        check_host_fields(&format!("hosts[{i}]"), h)?;
    }
    for (i, b) in state.bastions.iter().enumerate() {
        let at = format!("bastions[{i}]");
        check(&at, "address", &b.address)?;
        check(&at, "host_key", &b.host_key)?;
    }
    for (i, intent) in state.intents.iter().enumerate() {
        check_intent_fields(&format!("intents[{i}]"), intent)?;
    }
    if let Some(c) = &state.cluster {
        text(&"cluster", "name", &c.name)?;
        rule(
            c.uid.len() <= 64 && c.uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'),
            &"cluster",
            "uid",
            &c.uid,
            "a Kubernetes uid",
        )?;
        if let Some(id) = &c.etcd_cluster_id {
            hex(&"cluster", "etcd_cluster_id", id, 1..=16)?;
        }
        if let Some(v) = &c.config_sha256 {
            hex(&"cluster", "config_sha256", v, 64..=64)?;
        }
    }
    text(&"state", "lineage", &state.lineage)?;
    text(&"state", "tool_version", &state.tool_version)?;
    Ok(())
}

fn check_host_fields(at: &str, h: &HostState) -> Result<(), String> {
    check(&at, "address", &h.address)?;
    if let Some(n) = &h.node_name {
        check(&at, "node_name", n)?;
    }
    check(&at, "machine_id", &h.machine_id)?;
    check(&at, "host_key", &h.host_key)?;
    if let Some(e) = &h.etcd {
        let at = format!("{at}.etcd");
        check(&at, "member_id", &e.member_id)?;
        check(&at, "peer_url", &e.peer_url)?;
    }
    for (key, v) in [
        ("install_flags_sha256", &h.install_flags_sha256),
        ("config_sha256", &h.config_sha256),
    ] {
        if let Some(v) = v {
            hex(&at, key, v, 64..=64)?;
        }
    }
    let mut at = format!("{at}.access.ssh");
    let mut hop = h.access.as_ref().map(|a| &a.ssh);
    while let Some(t) = hop {
        check(&at, "address", &t.address)?;
        rule(
            crate::spec::is_user_name(&t.user),
            &at,
            "user",
            &t.user,
            "a user name",
        )?;
        if let Some(k) = &t.host_key {
            check(&at, "host_key", k)?;
        }
        at.push_str(".bastion");
        hop = t.bastion.as_deref();
    }
    Ok(())
}

fn check_intent_fields(at: &str, intent: &Intent) -> Result<(), String> {
    check(&at, "address", &intent.address)?;
    text(&at, "step", &intent.step)?;
    rule(
        !intent.kind.is_empty()
            && intent.kind.len() <= 64
            && intent
                .kind
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_'),
        &at,
        "kind",
        &intent.kind,
        "a step kind (lower-case letters and `_`)",
    )?;
    if let Some(m) = &intent.member_id {
        check(&at, "member_id", m)?;
    }
    if let Some(p) = &intent.peer_url {
        check(&at, "peer_url", p)?;
    }
    rule(
        !intent.started_at.is_empty()
            && intent.started_at.len() <= 64
            && intent
                .started_at
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-:+.".contains(&b)),
        &at,
        "started_at",
        &intent.started_at,
        "an RFC 3339 time",
    )
}

/// `spec::recorded_field_problem`'s rule for the field `key` at `at`.
fn check(at: &dyn Display, key: &str, v: &str) -> Result<(), String> {
    match crate::spec::recorded_field_problem(key, v) {
        Some(problem) => Err(format!("{at}.{key}: {problem}")),
        None => Ok(()),
    }
}

/// `ok`, else an error naming the field and showing its value escaped.
fn rule(ok: bool, at: &dyn Display, key: &str, v: &str, what: &str) -> Result<(), String> {
    let shown = |v: &str| crate::escape::escape(&crate::hash::short_n(v, 80)).into_owned();
    if ok {
        Ok(())
    } else {
        Err(format!("{at}.{key}: `{}` is not {what}", shown(v)))
    }
}

fn hex(
    at: &dyn Display,
    key: &str,
    v: &str,
    len: std::ops::RangeInclusive<usize>,
) -> Result<(), String> {
    rule(
        crate::hash::is_hex(v, *len.start(), *len.end())
            && !v.bytes().any(|b| b.is_ascii_uppercase()),
        at,
        key,
        v,
        "lower-case hex",
    )
}

fn text(at: &dyn Display, key: &str, v: &str) -> Result<(), String> {
    rule(
        v.len() <= 256 && crate::escape::escape(v) == v,
        at,
        key,
        v,
        "plain text (no control characters, at most 256 bytes)",
    )
}
