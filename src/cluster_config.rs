//! The dynamic config (`spec.k0s.dynamicConfig`): with it, k0s keeps the cluster-wide part of
//! its config in the ClusterConfig object `k0s` of kube-system once the cluster exists
//! (k0s pkg/component/controller/clusterconfig.go). `config status` and `config edit` read and
//! change that object through a healthy controller, as k0sctl's `action/config_status.go` and
//! `action/config_edit.go` do; `drift` compares it with `spec.k0s.config` for the plan.

use crate::k0s;

/// The part of spec.k0s.config's `spec` k0s keeps in the ClusterConfig object (k0s
/// pkg/apis/k0s/v1beta1/clusterconfig_types.go `GetClusterWideConfig`: no api, storage or
/// install; network without serviceCIDR, clusterDomain, controlPlaneLoadBalancing and
/// primaryAddressFamily, which stay node settings).
fn cluster_wide(spec_config: &serde_json::Value) -> serde_json::Value {
    let mut spec = spec_config
        .get("spec")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    if let Some(m) = spec.as_object_mut() {
        for k in ["api", "storage", "install"] {
            m.remove(k);
        }
        if let Some(n) = m.get_mut("network").and_then(|n| n.as_object_mut()) {
            for k in [
                "serviceCIDR",
                "clusterDomain",
                "controlPlaneLoadBalancing",
                "primaryAddressFamily",
            ] {
                n.remove(k);
            }
        }
    }
    spec
}

/// Where the live ClusterConfig differs from what spec.k0s.config sets (only the settings the
/// spec names: the object also holds k0s's defaults), each `spec.PATH: X in the spec, Y in the
/// cluster` (`absent` when the object lacks it). Values shown are shortened.
pub fn drift(spec_config: &serde_json::Value, live: &serde_json::Value) -> Vec<String> {
    // Secrets stay out (k0s::redact's rules): a value under a secret key, multi-line text
    // (Helm chart values) and URL credentials are not shown.
    fn shown(path: &str, v: Option<&serde_json::Value>) -> String {
        let Some(v) = v else {
            return "absent".into();
        };
        if path.split('.').any(k0s::redact::is_secret_key) {
            return "(secret)".into();
        }
        match v {
            serde_json::Value::String(t) if t.contains('\n') => return "(text)".into(),
            // Their content may hold secrets under any key: named, not shown.
            serde_json::Value::Object(_) => return "(a mapping)".into(),
            serde_json::Value::Array(a) => return format!("(a list of {})", a.len()),
            _ => {}
        }
        let s = k0s::redact::hide_url_credentials(&v.to_string());
        if s.chars().count() > 60 {
            format!("{}…", s.chars().take(60).collect::<String>())
        } else {
            s
        }
    }
    fn walk(
        path: &str,
        want: &serde_json::Value,
        got: Option<&serde_json::Value>,
        out: &mut Vec<String>,
    ) {
        match (want, got) {
            (serde_json::Value::Object(w), Some(serde_json::Value::Object(g))) => {
                for (k, v) in w {
                    walk(&format!("{path}.{k}"), v, g.get(k), out);
                }
            }
            (serde_json::Value::Null, None) => {}
            (w, g) if Some(w) != g => out.push(format!(
                "{path}: {} in the spec, {} in the cluster",
                shown(path, Some(w)),
                shown(path, g)
            )),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let serde_json::Value::Object(w) = cluster_wide(spec_config) {
        for (k, v) in &w {
            walk(&format!("spec.{k}"), v, live.get(k), &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drift_names_what_the_spec_sets_and_the_object_differs_in() {
        let spec = json!({"spec": {
            "api": {"address": "10.0.0.1"},
            "telemetry": {"enabled": false},
            "network": {"provider": "calico", "serviceCIDR": "10.96.0.0/12"},
        }});
        let live = json!({"telemetry": {"enabled": true}, "network": {"provider": "calico", "podCIDR": "10.244.0.0/16"}});
        assert_eq!(
            drift(&spec, &live),
            ["spec.telemetry.enabled: false in the spec, true in the cluster"]
        );
        let secret = json!({"spec": {"extensions": {"helm": {"repositories": [{"password": "hunter2"}]}, "x": {"password": "hunter2", "url": "https://u:p@h"}}}});
        let got = drift(
            &secret,
            &json!({"extensions": {"x": {"password": "other", "url": "https://u:q@h"}}}),
        );
        assert!(
            got.iter()
                .all(|l| !l.contains("hunter2") && !l.contains("u:p@")),
            "{got:?}"
        );
        let same = json!({"telemetry": {"enabled": false}, "network": {"provider": "calico"}});
        assert!(drift(&spec, &same).is_empty());
        let missing = json!({"network": {"provider": "calico"}});
        assert_eq!(
            drift(&spec, &missing),
            ["spec.telemetry: (a mapping) in the spec, absent in the cluster"]
        );
    }
}
