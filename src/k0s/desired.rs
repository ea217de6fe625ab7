//! What a host should have, computed from the spec alone: the k0s.yaml written on a controller and
//! the `k0s install` service arguments. Pure functions; the planner compares them with what the
//! probe saw, the executor writes and installs exactly these.

use crate::spec::{HostSpec, Role, Spec};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Where a joining host's token is written (0600) just before `k0s install`.
pub const TOKEN_FILE: &str = "/etc/k0s/k0stoken";
/// Where a controller's k0s.yaml is written.
pub const CONFIG_FILE: &str = "/etc/k0s/k0s.yaml";

/// The k0s.yaml to write on `host`: `spec.k0s.config` with this host's `api.address` and
/// `storage.etcd.peerAddress`, and `api.sans` extended with this host's own addresses (sorted).
/// Other controllers' addresses are deliberately left out (k0sctl adds them): with them, adding or
/// removing one controller would change every other controller's config and restart them all.
/// Deterministic, so its sha256 can be compared with the file on the host.
pub fn config_yaml(spec: &Spec, host: &HostSpec) -> String {
    let user = match &spec.k0s.config {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    // The header keys first, whatever order the user wrote them in.
    let mut doc = Map::new();
    for (key, default) in [
        (
            "apiVersion",
            Value::String("k0s.k0sproject.io/v1beta1".into()),
        ),
        ("kind", Value::String("ClusterConfig".into())),
        ("metadata", Value::Object(Map::new())),
    ] {
        let v = user.get(key).cloned().unwrap_or(default);
        doc.insert(key.into(), v);
    }
    for (k, v) in user {
        doc.entry(k).or_insert(v);
    }
    let meta = object_entry(&mut doc, "metadata");
    meta.entry("name")
        .or_insert_with(|| Value::String("k0s".into()));
    let spec_obj = object_entry(&mut doc, "spec");

    let api = object_entry(spec_obj, "api");
    api.insert("address".into(), Value::String(host.peer_address().into()));
    let mut sans: Vec<String> = match api.get("sans") {
        Some(Value::Array(v)) => v
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    sans.push(host.ssh.address.clone());
    sans.push(host.peer_address().to_string());
    sans.sort();
    sans.dedup();
    api.insert(
        "sans".into(),
        Value::Array(sans.into_iter().map(Value::String).collect()),
    );

    let storage = object_entry(spec_obj, "storage");
    let is_etcd = match storage.get("type") {
        None => true,
        Some(t) => t.as_str() == Some("etcd"),
    };
    if is_etcd {
        let etcd = object_entry(storage, "etcd");
        etcd.insert(
            "peerAddress".into(),
            Value::String(host.peer_address().into()),
        );
    }
    let mut out = String::new();
    write_yaml(&mut out, &Value::Object(doc), 0);
    out
}

/// The sorted `--name=value` service arguments `k0s install` records for `host` when it joins with
/// a token (`K0sStatus::args[2..]` of the running service). The bootstrap controller runs without
/// `--token-file`; compare with [`comparable_args`] to ignore that difference.
pub fn install_args(spec: &Spec, host: &HostSpec) -> Vec<String> {
    let _ = spec;
    let mut flags: BTreeMap<String, String> = BTreeMap::new();
    let mut kubelet_extra: Vec<String> = Vec::new();
    for (name, value) in normalized_user_flags(&host.install_flags) {
        if name == "kubelet-extra-args" {
            kubelet_extra.push(value);
        } else {
            flags.insert(name, value);
        }
    }
    if let Some(h) = &host.hostname {
        kubelet_extra.push(format!("--hostname-override={}", h.to_lowercase()));
    }
    if !kubelet_extra.is_empty() {
        flags.insert("kubelet-extra-args".into(), kubelet_extra.join(" "));
    }
    flags.insert("data-dir".into(), host.data_dir.clone());
    if let Some(k) = &host.kubelet_root_dir {
        flags.insert("kubelet-root-dir".into(), k.clone());
    }
    match host.role {
        Role::Controller => {
            flags.insert("config".into(), CONFIG_FILE.into());
        }
        Role::ControllerWorker => {
            flags.insert("config".into(), CONFIG_FILE.into());
            flags.insert("enable-worker".into(), "true".into());
            if host.no_taints {
                flags.insert("no-taints".into(), "true".into());
            }
        }
        Role::Single => {
            flags.insert("config".into(), CONFIG_FILE.into());
            flags.insert("single".into(), "true".into());
        }
        Role::Worker => {}
    }
    if host.role != Role::Single {
        flags.insert("token-file".into(), TOKEN_FILE.into());
    }
    flags
        .into_iter()
        .map(|(k, v)| format!("--{k}={v}"))
        .collect()
}

/// The arguments for reinstalling a host that already runs (upgrade, reconfigure): the desired
/// ones, with `--token-file` kept only when the running service has one. The bootstrap
/// controller never had a token; giving it one on reinstall would make k0s read a missing file.
pub fn reinstall_args<S: AsRef<str>>(spec: &Spec, host: &HostSpec, running: &[S]) -> Vec<String> {
    let had_token = running
        .iter()
        .any(|a| a.as_ref().starts_with("--token-file"));
    install_args(spec, host)
        .into_iter()
        .filter(|a| had_token || !a.starts_with("--token-file="))
        .collect()
}

/// Service arguments reduced to what must match between desired and running: `--token-file`
/// is dropped because the bootstrap controller legitimately runs without one.
pub fn comparable_args<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    let mut v: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string())
        .filter(|a| !a.starts_with("--token-file=") && a != "--token-file")
        .collect();
    v.sort();
    v
}

/// sha256 of the comparable install arguments, as recorded in state (`install_flags_sha256`).
pub fn install_flags_sha256<S: AsRef<str>>(args: &[S]) -> String {
    crate::hash::sha256_hex(comparable_args(args).join("\n"))
}

/// User `installFlags` as `(name, value)` pairs: `--x=v`, `--x v` and bare `--x` (= `true`) all
/// become one pair, surrounding quotes removed. Later flags win, as with k0s's own parsing.
fn normalized_user_flags(raw: &[String]) -> Vec<(String, String)> {
    let words: Vec<String> = raw.iter().flat_map(|f| split_words(f)).collect();
    let mut out: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        let Some(body) = w.strip_prefix("--") else {
            continue;
        };
        if let Some((n, v)) = body.split_once('=') {
            out.push((n.to_string(), v.to_string()));
        } else if i < words.len() && !words[i].starts_with('-') {
            out.push((body.to_string(), words[i].clone()));
            i += 1;
        } else {
            out.push((body.to_string(), "true".into()));
        }
    }
    out
}

/// Split on unquoted whitespace, removing single and double quotes (k0sctl joins installFlags
/// into one shell line, so this is how k0s receives them).
fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

fn object_entry<'a>(m: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = m
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(o) => o,
        // Just made an object above.
        _ => unreachable!("slot was replaced by an object"),
    }
}

/// A small, infallible YAML emitter for JSON values: block style, strings double-quoted only when
/// plain style would change their meaning. Our own so the bytes (and so the sha256) never depend
/// on a serializer's version.
fn write_yaml(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, val) in m {
                pad(out, indent);
                out.push_str(&yaml_scalar_str(k));
                out.push(':');
                write_child(out, val, indent);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for val in a {
                pad(out, indent);
                out.push('-');
                match val {
                    Value::Object(m) if !m.is_empty() => {
                        // First key on the dash line, the rest aligned under it.
                        let mut first = true;
                        for (k, inner) in m {
                            if first {
                                out.push(' ');
                                first = false;
                            } else {
                                pad(out, indent + 2);
                            }
                            out.push_str(&yaml_scalar_str(k));
                            out.push(':');
                            write_child(out, inner, indent + 2);
                        }
                    }
                    _ => write_child(out, val, indent),
                }
            }
        }
        other => {
            pad(out, indent);
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
}

fn write_child(out: &mut String, val: &Value, indent: usize) {
    match val {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_yaml(out, val, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_yaml(out, val, indent + 2);
        }
        _ => {
            out.push(' ');
            out.push_str(&inline(val));
            out.push('\n');
        }
    }
}

fn inline(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => yaml_scalar_str(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn pad(out: &mut String, n: usize) {
    let _ = write!(out, "{:n$}", "");
}

/// A string as a YAML scalar: plain when that reads back as the same string, else JSON-quoted
/// (a JSON string is a valid YAML double-quoted scalar).
fn yaml_scalar_str(s: &str) -> String {
    let plain_ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        && !s.starts_with(['-', '.'])
        && s.parse::<f64>().is_err()
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n" | "~"
        );
    if plain_ok {
        s.to_string()
    } else {
        serde_json::Value::String(s.to_string()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{K0sSpec, Options, SshTarget};

    fn host(role: Role, addr: &str) -> HostSpec {
        HostSpec::new(role, SshTarget::new(addr, 22), 1)
    }

    fn spec(hosts: Vec<HostSpec>, config: Option<Value>) -> Spec {
        Spec {
            name: "t".into(),
            hosts,
            k0s: K0sSpec {
                version: None,
                version_channel: None,
                dynamic_config: false,
                config,
            },
            options: Options::default(),
            manifests: vec![],
        }
    }

    #[test]
    fn config_sets_per_host_addresses_and_sorted_sans() {
        let mut c2 = host(Role::Controller, "10.0.0.2");
        c2.private_address = Some("192.168.0.2".into());
        let s = spec(
            vec![host(Role::Controller, "10.0.0.1"), c2.clone()],
            Some(
                serde_json::json!({"spec": {"api": {"sans": ["k8s.example.com"]}, "telemetry": {"enabled": false}}}),
            ),
        );
        let y = config_yaml(&s, &c2);
        assert_eq!(
            y,
            "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nmetadata:\n  name: k0s\nspec:\n  api:\n    sans:\n      - 10.0.0.2\n      - 192.168.0.2\n      - k8s.example.com\n    address: 192.168.0.2\n  telemetry:\n    enabled: false\n  storage:\n    etcd:\n      peerAddress: 192.168.0.2\n"
        );
        // It must read back as the same document.
        let back: Value = serde_saphyr::from_str(&y).expect("valid yaml");
        assert_eq!(back["spec"]["api"]["address"], "192.168.0.2");
        assert_eq!(back["spec"]["telemetry"]["enabled"], false);
        assert_eq!(config_yaml(&s, &c2), y, "deterministic");
    }

    #[test]
    fn kine_storage_gets_no_peer_address() {
        let h = host(Role::Single, "10.0.0.1");
        let s = spec(
            vec![h.clone()],
            Some(serde_json::json!({"spec": {"storage": {"type": "kine"}}})),
        );
        assert!(!config_yaml(&s, &h).contains("peerAddress"));
    }

    #[test]
    fn install_args_sorted_and_normalized() {
        let mut h = host(Role::ControllerWorker, "10.0.0.1");
        h.no_taints = true;
        h.hostname = Some("CP-1".into());
        h.install_flags = vec![
            "--labels=tier=control".into(),
            "--kubelet-extra-args=\"--max-pods=150\"".into(),
            "--enable-metrics-scraper".into(),
            "--debug true".into(),
        ];
        let s = spec(vec![h.clone()], None);
        assert_eq!(
            install_args(&s, &h),
            vec![
                "--config=/etc/k0s/k0s.yaml",
                "--data-dir=/var/lib/k0s",
                "--debug=true",
                "--enable-metrics-scraper=true",
                "--enable-worker=true",
                "--kubelet-extra-args=--max-pods=150 --hostname-override=cp-1",
                "--labels=tier=control",
                "--no-taints=true",
                "--token-file=/etc/k0s/k0stoken",
            ]
        );
    }

    #[test]
    fn reinstall_keeps_token_file_only_for_joiners() {
        let h = host(Role::Controller, "10.0.0.1");
        let s = spec(vec![h.clone()], None);
        let bootstrap = [
            "/usr/local/bin/k0s",
            "controller",
            "--data-dir=/var/lib/k0s",
        ];
        assert!(
            !reinstall_args(&s, &h, &bootstrap)
                .iter()
                .any(|a| a.starts_with("--token-file"))
        );
        let joiner = [
            "/usr/local/bin/k0s",
            "controller",
            "--token-file=/etc/k0s/k0stoken",
        ];
        assert!(
            reinstall_args(&s, &h, &joiner).contains(&"--token-file=/etc/k0s/k0stoken".to_string())
        );
    }

    #[test]
    fn bootstrap_args_compare_equal_without_token_file() {
        let h = host(Role::Controller, "10.0.0.1");
        let s = spec(vec![h.clone()], None);
        let running = ["--config=/etc/k0s/k0s.yaml", "--data-dir=/var/lib/k0s"];
        assert_eq!(
            install_flags_sha256(&install_args(&s, &h)),
            install_flags_sha256(&running)
        );
        let changed = ["--config=/etc/k0s/k0s.yaml", "--data-dir=/srv/k0s"];
        assert_ne!(
            install_flags_sha256(&install_args(&s, &h)),
            install_flags_sha256(&changed)
        );
    }
}
