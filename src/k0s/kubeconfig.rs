//! The admin kubeconfig k0s prints (`k0s kubeconfig admin`), rewritten the way k0sctl hands it
//! to users: the API server URL chosen by k0sctl's rules, the cluster and user renamed. The
//! kubeconfig holds the admin's client key: nothing here puts any of its content in an error.
//!
//! Rules: k0sctl `pkg/apis/k0sctl.k0sproject.io/v1beta1/cluster/spec.go` (`KubeAPIURL`,
//! `clusterExternalAddress`, `APIPort`, `formatIPV6`) and `phase/get_kubeconfig.go` (`kubeConfig`).

use super::K0sError;
use crate::spec::Spec;
use serde_json::{Map, Value};

/// The kube-apiserver port when `spec.k0s.config.spec.api.port` is not set.
pub const DEFAULT_API_PORT: u16 = 6443;
/// The kubeconfig user name when `metadata.user` is not set (k0sctl's default).
pub const DEFAULT_USER: &str = "admin";

/// k0sctl's `KubeAPIURL`: `https://<address>:<port>` where the address is
/// `spec.api.externalAddress`, else the first keepalived virtual server of an enabled control
/// plane load balancer, else `leader_address` (the controller the kubeconfig came from); the port
/// is `spec.api.port` (6443). IPv6 addresses are bracketed.
pub fn api_server_url(spec: &Spec, leader_address: &str) -> String {
    let config = spec.k0s.config.as_ref();
    let dig = |path: &[&str]| -> Option<&Value> {
        path.iter()
            .try_fold(config?, |v, key| v.as_object()?.get(*key))
    };
    let external = dig(&["spec", "api", "externalAddress"])
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty());
    let cplb = dig(&["spec", "network", "controlPlaneLoadBalancing"]);
    let virtual_server = cplb
        .filter(|c| {
            c.get("enabled").and_then(Value::as_bool) == Some(true)
                && c.get("type").and_then(Value::as_str) == Some("Keepalived")
        })
        .and_then(|c| c.get("keepalived")?.get("virtualServers")?.as_array())
        .and_then(|vs| {
            vs.iter()
                .filter_map(|v| v.get("ipAddress")?.as_str())
                .find(|a| !a.is_empty())
        });
    let address = external.or(virtual_server).unwrap_or(leader_address);
    // k0sctl takes the port only when it is an integer (a quoted "6444" falls back to 6443).
    let port = dig(&["spec", "api", "port"])
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(DEFAULT_API_PORT);
    let host = if address.contains(':') {
        format!("[{address}]")
    } else {
        address.to_string()
    };
    format!("https://{host}:{port}")
}

/// What the rewritten kubeconfig names: its one cluster and context (`-cluster`, else
/// `metadata.name`), its user (`-user`, else `metadata.user`) and the API server URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigNames {
    pub cluster: String,
    pub user: String,
    pub server: String,
}

/// k0sctl's `kubeConfig`: take the current context (or the only one), point its cluster at
/// `names.server`, and return a kubeconfig with exactly that cluster, user and context, renamed
/// to `names.cluster` / `names.user`, as the current context.
pub fn rewrite_admin_kubeconfig(raw: &str, names: &KubeconfigNames) -> Result<String, K0sError> {
    const WHAT: &str = "the admin kubeconfig";
    let doc: Value = serde_saphyr::from_str(raw).map_err(|_| K0sError::parse(WHAT, "not YAML"))?;
    let named = |list: &str, key: &str, name: &str| -> Option<Value> {
        doc.get(list)?
            .as_array()?
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(name))?
            .get(key)
            .cloned()
    };
    let contexts: Vec<&Value> = doc
        .get("contexts")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let current = doc
        .get("current-context")
        .and_then(Value::as_str)
        .unwrap_or("");
    let context = match named("contexts", "context", current) {
        Some(c) => c,
        // A single context may go without current-context (k0sctl's fallback).
        None if contexts.len() == 1 => contexts[0]
            .get("context")
            .cloned()
            .ok_or_else(|| K0sError::parse(WHAT, "its context has no body"))?,
        None if current.is_empty() => {
            return Err(K0sError::parse(
                WHAT,
                "no current-context and not exactly one context",
            ));
        }
        None => {
            return Err(K0sError::parse(
                WHAT,
                "the current context is not in the file",
            ));
        }
    };
    let cluster_ref = context.get("cluster").and_then(Value::as_str).unwrap_or("");
    let user_ref = context.get("user").and_then(Value::as_str).unwrap_or("");
    let mut cluster = named("clusters", "cluster", cluster_ref)
        .and_then(|c| c.as_object().cloned())
        .ok_or_else(|| K0sError::parse(WHAT, "the context's cluster is not in the file"))?;
    let user = named("users", "user", user_ref)
        .ok_or_else(|| K0sError::parse(WHAT, "the context's user is not in the file"))?;
    cluster.insert("server".into(), Value::String(names.server.clone()));
    let mut context = context.as_object().cloned().unwrap_or_default();
    context.insert("cluster".into(), Value::String(names.cluster.clone()));
    context.insert("user".into(), Value::String(names.user.clone()));

    // Keys in alphabetical order, as clientcmd.Write puts them.
    let entry = |key: &str, body: Value, name: &str| {
        let mut m = Map::new();
        if key > "name" {
            m.insert("name".into(), Value::String(name.into()));
            m.insert(key.into(), body);
        } else {
            m.insert(key.into(), body);
            m.insert("name".into(), Value::String(name.into()));
        }
        Value::Array(vec![Value::Object(m)])
    };
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String("v1".into()));
    out.insert(
        "clusters".into(),
        entry("cluster", Value::Object(cluster), &names.cluster),
    );
    out.insert(
        "contexts".into(),
        entry("context", Value::Object(context), &names.cluster),
    );
    out.insert(
        "current-context".into(),
        Value::String(names.cluster.clone()),
    );
    out.insert("kind".into(), Value::String("Config".into()));
    out.insert("preferences".into(), Value::Object(Map::new()));
    out.insert("users".into(), entry("user", user, &names.user));
    Ok(super::desired::to_yaml(&Value::Object(out)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{HostSpec, K0sSpec, Options, Role, SshTarget};
    use serde_json::json;

    fn spec(config: Option<Value>) -> Spec {
        Spec {
            name: "prod".into(),
            user: DEFAULT_USER.into(),
            hosts: vec![HostSpec::new(
                Role::Controller,
                SshTarget::new("10.0.0.1", 22),
                1,
            )],
            k0s: K0sSpec {
                version: None,
                version_channel: None,
                dynamic_config: false,
                config,
            },
            options: Options::default(),
            manifests: Vec::new(),
            env_values: Vec::new(),
        }
    }

    // The cases of k0sctl's TestKubeAPIURL (spec_test.go), and the fallbacks around them.
    #[test]
    fn server_follows_k0sctl_rules() {
        let external = spec(Some(
            json!({"spec": {"api": {"port": 6444, "externalAddress": "test.example.com"}}}),
        ));
        assert_eq!(
            api_server_url(&external, "10.0.0.1"),
            "https://test.example.com:6444"
        );
        assert_eq!(
            api_server_url(&spec(None), "192.168.0.1"),
            "https://192.168.0.1:6443"
        );
        let cplb = json!({"spec": {"network": {"controlPlaneLoadBalancing": {
            "enabled": true, "type": "Keepalived",
            "keepalived": {"vrrpInstances": [{"virtualIPs": ["192.168.0.10/24"]}],
                           "virtualServers": [{"ipAddress": "192.168.0.10"}]}}}}});
        assert_eq!(
            api_server_url(&spec(Some(cplb.clone())), "192.168.0.1"),
            "https://192.168.0.10:6443"
        );
        let mut disabled = cplb;
        disabled["spec"]["network"]["controlPlaneLoadBalancing"]["enabled"] = json!(false);
        assert_eq!(
            api_server_url(&spec(Some(disabled)), "192.168.0.1"),
            "https://192.168.0.1:6443"
        );
        // externalAddress wins over the load balancer; an empty one does not count.
        let both = json!({"spec": {"api": {"externalAddress": "lb.example"}, "network": {"controlPlaneLoadBalancing": {
            "enabled": true, "type": "Keepalived", "keepalived": {"virtualServers": [{"ipAddress": "10.9.9.9"}]}}}}});
        assert_eq!(
            api_server_url(&spec(Some(both)), "10.0.0.1"),
            "https://lb.example:6443"
        );
        let empty = json!({"spec": {"api": {"externalAddress": "", "port": "6444"}}});
        assert_eq!(
            api_server_url(&spec(Some(empty)), "10.0.0.1"),
            "https://10.0.0.1:6443"
        );
        assert_eq!(
            api_server_url(&spec(None), "fd00::1"),
            "https://[fd00::1]:6443"
        );
    }

    const ADMIN: &str = "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0EK\n    server: https://localhost:6443\n  name: local\ncontexts:\n- context:\n    cluster: local\n    namespace: default\n    user: user\n  name: Default\ncurrent-context: Default\nkind: Config\npreferences: {}\nusers:\n- name: user\n  user:\n    client-certificate-data: Q0VSVAo=\n    client-key-data: S0VZCg==\n";

    fn names() -> KubeconfigNames {
        KubeconfigNames {
            cluster: "prod".into(),
            user: "ops".into(),
            server: "https://10.0.0.1:6443".into(),
        }
    }

    #[test]
    fn rewrite_renames_and_points_at_the_server() {
        let out = rewrite_admin_kubeconfig(ADMIN, &names()).expect("rewrites");
        let v: Value = serde_saphyr::from_str(&out).expect("YAML");
        assert_eq!(v["current-context"], "prod");
        assert_eq!(v["clusters"][0]["name"], "prod");
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://10.0.0.1:6443"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority-data"],
            "Q0EK"
        );
        assert_eq!(v["contexts"][0]["name"], "prod");
        assert_eq!(v["contexts"][0]["context"]["cluster"], "prod");
        assert_eq!(v["contexts"][0]["context"]["user"], "ops");
        assert_eq!(v["contexts"][0]["context"]["namespace"], "default");
        assert_eq!(v["users"][0]["name"], "ops");
        assert_eq!(v["users"][0]["user"]["client-key-data"], "S0VZCg==");
        assert_eq!(v["kind"], "Config");
        assert_eq!(rewrite_admin_kubeconfig(ADMIN, &names()).unwrap(), out);
    }

    #[test]
    fn a_lone_context_needs_no_current_context() {
        let raw = ADMIN.replace("current-context: Default\n", "");
        let out = rewrite_admin_kubeconfig(&raw, &names()).expect("falls back");
        assert!(out.contains("current-context: prod\n"), "{out}");
    }

    #[test]
    fn broken_kubeconfigs_are_errors_that_quote_nothing() {
        for raw in [
            "::: not yaml [".to_string(),
            ADMIN.replace("current-context: Default", "current-context: Other")
                .replace("contexts:\n- context:", "contexts:\n- name: Second\n  context: {cluster: local, user: user}\n- context:"),
            ADMIN.replace("    cluster: local\n", "    cluster: gone\n"),
            ADMIN.replace("    user: user\n", "    user: gone\n"),
        ] {
            let e = rewrite_admin_kubeconfig(&raw, &names())
                .expect_err("refused")
                .to_string();
            assert!(!e.contains("S0VZ") && !e.contains("Q0VS"), "{e}");
        }
    }
}
