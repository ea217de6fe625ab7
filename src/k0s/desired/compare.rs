//! A controller's k0s.yaml compared as k0sctl and k0s read it: parsed, in a normal form with
//! k0s's defaults taken as absent, and shown as a diff.

use super::*;

/// What the comparison of a controller's k0s.yaml needs besides the two texts.
#[derive(Debug, Clone, Copy)]
pub struct ConfigContext<'a> {
    /// `k0s config create` of the host's k0s binary: a value equal to k0s's own default counts
    /// as absent. None: compare without (only comments, order and empty sections are ignored).
    pub defaults: Option<&'a str>,
    /// The host runs with `--single`: without a `storage:` key it runs kine.
    pub single: bool,
    /// Dynamic config: k0s reads only the node part of the file once the cluster exists.
    pub dynamic: bool,
}

/// Compare the k0s.yaml on a host (`have`; None = no file) with the desired one, semantically
/// as k0sctl does (parse both, ignore comments and key order; k0sctl `phase/configure_k0s.go`
/// re-marshals both and compares the bytes) and with k0s's defaults taken as absent. None when
/// they mean the same; else a unified diff of the two in [`normal_form`], secret values shown
/// as `(secret)` (`(secret, changed: …)` where they differ) unless `show_secrets` (`k0s::redact`).
pub fn config_difference(
    have: Option<&str>,
    want: &Value,
    cx: ConfigContext<'_>,
    show_secrets: bool,
) -> Option<String> {
    let unified = |have: &str, want: &str| {
        crate::k0s::redact::config_diff(have, want, "on the host", "from k0sctl.yaml", show_secrets)
    };
    // Without `k0s config create` output, at least the header k0s fills in itself.
    let defaults = cx.defaults.and_then(parse_config).or_else(|| {
        Some(serde_json::json!({"apiVersion": API_VERSION, "kind": "ClusterConfig", "metadata": {"name": "k0s"}}))
    });
    let want_n = normal_form(want, defaults.as_ref(), cx);
    let have_n = match have.map(|t| (t, parse_config(t))) {
        Some((_, Some(doc))) => Some(normal_form(&doc, defaults.as_ref(), cx)),
        // Not YAML k0s could read: shown as it is.
        Some((text, None)) => return Some(unified(text, &render(&want_n))),
        None => None,
    };
    if have_n
        .as_ref()
        .is_some_and(|h| same_but_extra_sans(h, &want_n))
    {
        return None;
    }
    Some(unified(
        &have_n.as_ref().map(render).unwrap_or_default(),
        &render(&want_n),
    ))
}

/// Equal normal forms, or equal but for `spec.api.sans` names the host has beyond the wanted
/// ones. Extra certificate names do no harm (a removed controller's address stays valid until
/// the next rewrite), while taking them out would restart every controller one by one on each
/// controller removal; a missing name is a real difference.
fn same_but_extra_sans(have: &Value, want: &Value) -> bool {
    if have == want {
        return true;
    }
    let sans = |v: &Value| {
        v.pointer("/spec/api/sans")
            .and_then(Value::as_array)
            .cloned()
    };
    let (Some(have_sans), want_sans) = (sans(have), sans(want).unwrap_or_default()) else {
        return false;
    };
    if !want_sans.iter().all(|n| have_sans.contains(n)) {
        return false;
    }
    let mut have = have.clone();
    match (
        have.pointer_mut("/spec/api"),
        want.pointer("/spec/api/sans"),
    ) {
        (Some(Value::Object(api)), Some(w)) => {
            api.insert("sans".into(), w.clone());
        }
        (Some(Value::Object(api)), None) => {
            api.remove("sans");
            if api.is_empty()
                && let Some(Value::Object(spec)) = have.pointer_mut("/spec")
            {
                spec.remove("api");
            }
        }
        _ => return false,
    }
    &have == want
}

/// [`config_difference`] for a controller of the spec as the probe found it, with the diff's
/// header naming the host. None: nothing to write.
pub fn controller_config_difference(
    spec: &Spec,
    host: &HostSpec,
    facts: &crate::reality::HostFacts,
    host_name: &str,
    show_secrets: bool,
) -> Option<String> {
    let cx = ConfigContext {
        defaults: facts.config_defaults.as_deref(),
        single: host.role == Role::Single,
        dynamic: spec.k0s.dynamic_config,
    };
    let d = config_difference(
        facts.config_text.as_deref(),
        &config_value(spec, host),
        cx,
        show_secrets,
    )?;
    let path = config_file(host);
    Some(d.replacen(
        "--- on the host\n+++ from k0sctl.yaml\n",
        &format!("--- {path} (on {host_name})\n+++ {path} (from k0sctl.yaml)\n"),
        1,
    ))
}

/// A k0s.yaml as a JSON value; None when it is not a YAML mapping.
pub fn parse_config(text: &str) -> Option<Value> {
    match serde_saphyr::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Some(v),
        Ok(Value::Null) => Some(Value::Object(Map::new())),
        _ => None,
    }
}

/// A k0s.yaml reduced to what decides k0s's behaviour: null values and values equal to k0s's
/// default at the same path dropped, then empty mappings (an empty section reads back as its
/// defaults); `spec.api.sans` sorted and de-duplicated (a set of certificate names);
/// `spec.storage.type` always spelled out as k0s resolves it (any `storage:` key means etcd
/// unless it names another type; no key means kine on a `single` host); with dynamic config
/// only the node part (`spec.api`, `spec.network`, `spec.storage`). Keys sorted.
pub fn normal_form(doc: &Value, defaults: Option<&Value>, cx: ConfigContext<'_>) -> Value {
    let mut doc = doc.clone();
    let storage_type = resolved_storage_type(&doc, cx.single);
    if cx.dynamic
        && let Some(Value::Object(s)) = doc.pointer_mut("/spec")
    {
        s.retain(|k, _| matches!(k.as_str(), "api" | "network" | "storage"));
    }
    if let Some(Value::Array(sans)) = doc.pointer_mut("/spec/api/sans") {
        sort_dedup(sans);
    }
    let mut defaults = defaults.cloned();
    if let Some(Value::Array(sans)) = defaults
        .as_mut()
        .and_then(|d| d.pointer_mut("/spec/api/sans"))
    {
        sort_dedup(sans);
    }
    // Top-level header strings left empty (k0sctl's node config writes `apiVersion: ""`) read
    // back as k0s's own.
    if let Value::Object(m) = &mut doc {
        m.retain(|k, v| !(matches!(k.as_str(), "apiVersion" | "kind") && v.as_str() == Some("")));
        m.remove("status");
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            meta.remove("creationTimestamp");
        }
    }
    prune(&mut doc, defaults.as_ref());
    let spec_obj = object_entry(as_object(&mut doc), "spec");
    let storage = object_entry(spec_obj, "storage");
    storage.insert("type".into(), Value::String(storage_type.clone()));
    if storage_type != "etcd" {
        storage.remove("etcd");
    }
    sorted(&doc)
}

fn sort_dedup(v: &mut Vec<Value>) {
    v.sort_by_key(|a| a.to_string());
    v.dedup();
}

fn as_object(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

/// Drop nulls and values equal to the default at the same path, then mappings left empty.
fn prune(v: &mut Value, defaults: Option<&Value>) {
    let Value::Object(m) = v else { return };
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        let d = defaults.and_then(|d| d.get(&k));
        let remove = match m.get_mut(&k) {
            None | Some(Value::Null) => true,
            Some(child) => {
                if d.is_some_and(|d| same_value(child, d)) {
                    true
                } else {
                    prune(child, d);
                    matches!(child, Value::Object(c) if c.is_empty())
                }
            }
        };
        if remove {
            m.remove(&k);
        }
    }
}

/// JSON equality with numbers compared by value (`9443` read as i64 or u64 is the same port).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, a)| y.get(k).is_some_and(|b| same_value(a, b)))
        }
        _ => a == b,
    }
}

use crate::yaml::sorted;

/// A normal form as YAML text (for diffs).
pub fn render(v: &Value) -> String {
    crate::yaml::to_yaml(v)
}

#[cfg(test)]
mod tests {
    use super::super::tests::NO_DEFAULTS;
    use super::*;
    use serde_json::json;

    /// k0s config create of a host at 10.0.0.2 (abridged; the lab double prints the same shape).
    const DEFAULTS: &str = "apiVersion: k0s.k0sproject.io/v1beta1
kind: ClusterConfig
metadata:
  name: k0s
spec:
  api:
    address: 10.0.0.2
    k0sApiPort: 9443
    port: 6443
    sans:
    - 10.0.0.2
    - fe80::1
  controllerManager: {}
  installConfig:
    users:
      etcdUser: etcd
  network:
    kubeProxy:
      mode: iptables
    podCIDR: 10.244.0.0/16
    provider: kuberouter
  scheduler: {}
  storage:
    etcd:
      peerAddress: 10.0.0.2
    type: etcd
  telemetry:
    enabled: true
";

    /// Table: the file on a host, what k0sform wants, and whether they differ once compared as
    /// k0sctl and k0s see them.
    #[test]
    fn config_comparison_is_semantic() {
        let want = json!({"apiVersion": "k0s.k0sproject.io/v1beta1", "kind": "ClusterConfig", "metadata": {"name": "k0s"},
                          "spec": {"api": {"sans": ["10.0.0.1", "10.0.0.2"]}, "telemetry": {"enabled": false}}});
        let with_defaults = ConfigContext {
            defaults: Some(DEFAULTS),
            single: false,
            dynamic: false,
        };
        let cases: &[(&str, &str, ConfigContext<'_>, bool)] = &[
            (
                "comments, key order and flow style do not count",
                "# generated-by-k0sctl 2026-08-01T10:00:00Z\nspec:\n  telemetry: {enabled: false}\n  api:\n    sans: [10.0.0.2, 10.0.0.1]\nkind: ClusterConfig\napiVersion: k0s.k0sproject.io/v1beta1\nmetadata:\n  name: k0s\n",
                NO_DEFAULTS,
                false,
            ),
            (
                "k0s's defaults written out equal their absence",
                "# generated-by-k0sctl 2026-08-01T10:00:00Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nmetadata:\n  name: k0s\nspec:\n  api:\n    k0sApiPort: 9443\n    port: 6443\n    sans:\n    - 10.0.0.1\n    - 10.0.0.2\n  controllerManager: {}\n  network:\n    kubeProxy:\n      mode: iptables\n    podCIDR: 10.244.0.0/16\n    provider: kuberouter\n  scheduler: {}\n  storage:\n    type: etcd\n    etcd:\n      peerAddress: 10.0.0.2\n  telemetry:\n    enabled: false\n",
                with_defaults,
                false,
            ),
            (
                "without the defaults, written-out defaults are a difference",
                "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nmetadata:\n  name: k0s\nspec:\n  api:\n    port: 6443\n    sans: [10.0.0.1, 10.0.0.2]\n  telemetry:\n    enabled: false\n",
                NO_DEFAULTS,
                true,
            ),
            (
                "a real difference stays one",
                "spec:\n  api:\n    sans: [10.0.0.1, 10.0.0.2]\n  telemetry:\n    enabled: true\n",
                with_defaults,
                true,
            ),
            (
                "a missing SAN is a difference",
                "spec:\n  api:\n    sans: [10.0.0.1]\n  telemetry:\n    enabled: false\n",
                with_defaults,
                true,
            ),
            (
                "an extra SAN (a removed controller's address) is not a difference",
                "spec:\n  api:\n    sans: [10.0.0.1, 10.0.0.2, 10.0.0.3]\n  telemetry:\n    enabled: false\n",
                with_defaults,
                false,
            ),
            (
                "an extra SAN next to a real difference still shows the difference",
                "spec:\n  api:\n    sans: [10.0.0.1, 10.0.0.2, 10.0.0.3]\n  telemetry:\n    enabled: true\n",
                with_defaults,
                true,
            ),
            (
                "a storage section on a single host switches kine to etcd",
                "spec:\n  api:\n    sans: [10.0.0.1, 10.0.0.2]\n  storage:\n    etcd:\n      peerAddress: 10.0.0.2\n  telemetry:\n    enabled: false\n",
                ConfigContext {
                    defaults: Some(DEFAULTS),
                    single: true,
                    dynamic: false,
                },
                true,
            ),
            (
                "on a single host no storage section is kine on both sides",
                "spec:\n  api:\n    sans: [10.0.0.1, 10.0.0.2]\n  telemetry:\n    enabled: false\n",
                ConfigContext {
                    defaults: Some(DEFAULTS),
                    single: true,
                    dynamic: false,
                },
                false,
            ),
            (
                "with dynamic config only the node part counts",
                "spec:\n  api:\n    sans: [10.0.0.1, 10.0.0.2]\n  telemetry:\n    enabled: true\n",
                ConfigContext {
                    defaults: Some(DEFAULTS),
                    single: false,
                    dynamic: true,
                },
                false,
            ),
            ("not YAML at all", "spec: [\n", NO_DEFAULTS, true),
        ];
        for (what, have, cx, differs) in cases {
            let d = config_difference(Some(have), &want, *cx, false);
            assert_eq!(d.is_some(), *differs, "{what}: {d:?}");
        }
        assert!(
            config_difference(None, &want, NO_DEFAULTS, false).is_some(),
            "no file"
        );
    }

    #[test]
    fn config_diff_shows_only_real_differences() {
        let want =
            json!({"spec": {"api": {"sans": ["10.0.0.1"]}, "telemetry": {"enabled": false}}});
        let have = "# generated-by-k0sctl 2026-08-01T10:00:00Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nmetadata:\n  name: k0s\nspec:\n  api:\n    k0sApiPort: 9443\n    sans:\n    - 10.0.0.1\n  scheduler: {}\n  telemetry:\n    enabled: true\n";
        let cx = ConfigContext {
            defaults: Some(DEFAULTS),
            single: false,
            dynamic: false,
        };
        let d = config_difference(Some(have), &want, cx, false).expect("differs");
        let changed: Vec<&str> = d
            .lines()
            .filter(|l| {
                (l.starts_with('-') || l.starts_with('+'))
                    && !l.starts_with("---")
                    && !l.starts_with("+++")
            })
            .collect();
        // `enabled: true` is k0s's default, so on the host it reads as absent.
        assert_eq!(changed, ["+  telemetry:", "+    enabled: false"], "{d}");
    }
}
