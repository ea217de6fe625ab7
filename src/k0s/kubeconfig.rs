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

/// Why the admin kubeconfig a controller printed is not handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminKubeconfigError {
    /// Not a kubeconfig k0sform can read (not YAML, the current context's parts missing).
    #[error(transparent)]
    Unreadable(#[from] K0sError),
    /// It holds what k0s never writes there (the keys' paths, never their values): a client
    /// could act on it, e.g. run an `exec` plugin's command, send its credentials through a
    /// proxy or skip the server's certificate check.
    #[error(
        "its admin kubeconfig holds {}, which k0s never writes there and a client would act on \
         (k0sform passes on only the cluster's CA data and the client certificate and key data)",
        .0.join(", ")
    )]
    Forbidden(Vec<String>),
}

/// What the admin kubeconfig may hold, by where in it: k0s `cmd/kubeconfig/admin.go` builds it
/// from the PKI files since v1.36.1 and printed `pki/admin.conf` before, as
/// `cmd/controller/certificates.go` wrote it (before v1.26 from a template that also had
/// `namespace: default`); through clientcmd.Write, which writes `preferences: {}`.
const TOP_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "preferences",
    "clusters",
    "contexts",
    "current-context",
    "users",
];
const CLUSTER_KEYS: &[&str] = &["server", "certificate-authority-data"];
const CONTEXT_KEYS: &[&str] = &["cluster", "user", "namespace"];
const USER_KEYS: &[&str] = &["client-certificate-data", "client-key-data"];

/// Most forbidden keys an error names.
const MAX_NAMED: usize = 8;

/// The paths of everything in `doc` outside the allow-list: unknown keys at any level, a
/// `preferences` that is not empty, a namespace other than `default`, a wrong apiVersion/kind.
fn forbidden_keys(doc: &Map<String, Value>) -> Vec<String> {
    // A key from the host, shown quoted (escapes and all) and cut short.
    let show = |k: &str| {
        let cut: String = k.chars().take(64).collect();
        if cut.len() < k.len() || !k.chars().all(|c| c.is_ascii_graphic()) {
            format!("{cut:?}")
        } else {
            cut
        }
    };
    let mut out = Vec::new();
    let unknown = |out: &mut Vec<String>, at: &str, m: &Map<String, Value>, allowed: &[&str]| {
        for k in m.keys().filter(|k| !allowed.contains(&k.as_str())) {
            out.push(format!("{at}{}", show(k)));
        }
    };
    unknown(&mut out, "", doc, TOP_KEYS);
    let lists = [
        ("clusters", "cluster", CLUSTER_KEYS),
        ("contexts", "context", CONTEXT_KEYS),
        ("users", "user", USER_KEYS),
    ];
    for (list, key, allowed) in lists {
        let Some(items) = doc.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            let Some(item) = item.as_object() else {
                continue;
            };
            unknown(&mut out, &format!("{list}[{i}]."), item, &["name", key]);
            if let Some(body) = item.get(key).and_then(Value::as_object) {
                unknown(&mut out, &format!("{list}[{i}].{key}."), body, allowed);
                if body
                    .get("namespace")
                    .is_some_and(|n| n.as_str() != Some("default"))
                {
                    out.push(format!("{list}[{i}].{key}.namespace (not default)"));
                }
            }
        }
    }
    if doc
        .get("preferences")
        .is_some_and(|p| !p.is_null() && p.as_object().is_none_or(|m| !m.is_empty()))
    {
        out.push("preferences (not empty)".into());
    }
    for (key, want) in [("apiVersion", "v1"), ("kind", "Config")] {
        if doc.get(key).is_some_and(|v| v.as_str() != Some(want)) {
            out.push(format!("{key} (not {want})"));
        }
    }
    out
}

/// What the errors of [`rewrite_admin_kubeconfig`] name.
const ADMIN_KUBECONFIG: &str = "the admin kubeconfig";

/// k0sctl's `kubeConfig` over an allow-list: take the current context (or the only one), and
/// build a new kubeconfig of exactly that cluster's CA data with `names.server`, the user's
/// client certificate and key data, and one context, renamed to `names.cluster` /
/// `names.user`, as the current context. An answer with anything else in it (an `exec` plugin,
/// `auth-provider`, `tokenFile`, `proxy-url`, `insecure-skip-tls-verify`, …, in any entry) is
/// refused, never cleaned: k0s writes none of it, so the controller is not what it should be.
pub fn rewrite_admin_kubeconfig(
    raw: &str,
    names: &KubeconfigNames,
) -> Result<String, AdminKubeconfigError> {
    let broken = |m: &str| AdminKubeconfigError::Unreadable(K0sError::parse(ADMIN_KUBECONFIG, m));
    let doc: Value = serde_saphyr::from_str(raw).map_err(|_| broken("not YAML"))?;
    let doc = doc.as_object().ok_or_else(|| broken("not a mapping"))?;
    let mut forbidden = forbidden_keys(doc);
    if !forbidden.is_empty() {
        if forbidden.len() > MAX_NAMED {
            let more = forbidden.len() - MAX_NAMED;
            forbidden.truncate(MAX_NAMED);
            forbidden.push(format!("{more} more"));
        }
        return Err(AdminKubeconfigError::Forbidden(forbidden));
    }
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
            .ok_or_else(|| broken("its context has no body"))?,
        None if current.is_empty() => {
            return Err(broken("no current-context and not exactly one context"));
        }
        None => return Err(broken("the current context is not in the file")),
    };
    let cluster_ref = context.get("cluster").and_then(Value::as_str).unwrap_or("");
    let user_ref = context.get("user").and_then(Value::as_str).unwrap_or("");
    let cluster = named("clusters", "cluster", cluster_ref)
        .ok_or_else(|| broken("the context's cluster is not in the file"))?;
    let user = named("users", "user", user_ref)
        .ok_or_else(|| broken("the context's user is not in the file"))?;
    Ok(crate::yaml::to_yaml(&admin_kubeconfig(
        &cluster, &user, names,
    )?))
}

/// The new kubeconfig of [`rewrite_admin_kubeconfig`]: the CA data of `cluster`, the client
/// certificate and key data of `user`, under `names`.
fn admin_kubeconfig(
    cluster: &Value,
    user: &Value,
    names: &KubeconfigNames,
) -> Result<Value, AdminKubeconfigError> {
    // Each piece of data: base64 (what kubeconfigs carry), so nothing else rides along.
    let data = |body: &Value, key: &'static str| -> Result<Value, AdminKubeconfigError> {
        use base64::Engine;
        let text = body.get(key).and_then(Value::as_str).unwrap_or("");
        match base64::engine::general_purpose::STANDARD.decode(text) {
            Ok(bytes) if !bytes.is_empty() => Ok(Value::String(text.to_string())),
            _ => Err(AdminKubeconfigError::Unreadable(K0sError::parse(
                ADMIN_KUBECONFIG,
                format!("its {key} is missing or not base64"),
            ))),
        }
    };
    let object = |pairs: Vec<(&str, Value)>| {
        Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    };
    let str = |s: &str| Value::String(s.to_string());
    // Keys in alphabetical order, as clientcmd.Write puts them.
    let out = object(vec![
        ("apiVersion", str("v1")),
        (
            "clusters",
            Value::Array(vec![object(vec![
                (
                    "cluster",
                    object(vec![
                        (
                            "certificate-authority-data",
                            data(cluster, "certificate-authority-data")?,
                        ),
                        ("server", str(&names.server)),
                    ]),
                ),
                ("name", str(&names.cluster)),
            ])]),
        ),
        (
            "contexts",
            Value::Array(vec![object(vec![
                (
                    "context",
                    object(vec![
                        ("cluster", str(&names.cluster)),
                        ("user", str(&names.user)),
                    ]),
                ),
                ("name", str(&names.cluster)),
            ])]),
        ),
        ("current-context", str(&names.cluster)),
        ("kind", str("Config")),
        ("preferences", Value::Object(Map::new())),
        (
            "users",
            Value::Array(vec![object(vec![
                ("name", str(&names.user)),
                (
                    "user",
                    object(vec![
                        (
                            "client-certificate-data",
                            data(user, "client-certificate-data")?,
                        ),
                        ("client-key-data", data(user, "client-key-data")?),
                    ]),
                ),
            ])]),
        ),
    ]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{HostSpec, K0sSpec, Role, SshTarget};
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
                config,
                ..K0sSpec::default()
            },
            ..Spec::default()
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
        assert_eq!(v["users"][0]["name"], "ops");
        assert_eq!(v["users"][0]["user"]["client-key-data"], "S0VZCg==");
        assert_eq!(v["kind"], "Config");
        assert_eq!(rewrite_admin_kubeconfig(ADMIN, &names()).unwrap(), out);
        // What k0s writes since v1.26 (no namespace) reads the same.
        let now = ADMIN.replace("    namespace: default\n", "");
        assert_eq!(rewrite_admin_kubeconfig(&now, &names()).unwrap(), out);
    }

    /// Every leaf of a YAML document, as `a.b[0].c` paths.
    fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, x) in m {
                    let p = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    leaves(x, p, out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    leaves(x, format!("{at}[{i}]"), out);
                }
            }
            _ => out.push(at),
        }
    }

    /// Issue 28, item 3: the kubeconfig handed out holds the allowed fields and nothing else,
    /// whatever extra entries (all within the allow-list) the answer had.
    #[test]
    fn output_holds_only_the_allowed_fields() {
        let raw = ADMIN.replace(
            "users:\n",
            "users:\n- name: other\n  user:\n    client-certificate-data: T1RIRVIK\n    client-key-data: T1RIRVIK\n",
        );
        let out = rewrite_admin_kubeconfig(&raw, &names()).expect("rewrites");
        let v: Value = serde_saphyr::from_str(&out).expect("YAML");
        let mut got = Vec::new();
        leaves(&v, String::new(), &mut got);
        got.sort();
        assert_eq!(
            got,
            [
                "apiVersion",
                "clusters[0].cluster.certificate-authority-data",
                "clusters[0].cluster.server",
                "clusters[0].name",
                "contexts[0].context.cluster",
                "contexts[0].context.user",
                "contexts[0].name",
                "current-context",
                "kind",
                "preferences",
                "users[0].name",
                "users[0].user.client-certificate-data",
                "users[0].user.client-key-data",
            ]
        );
        assert!(!out.contains("T1RIRVIK"), "{out}");
    }

    /// Issue 28, item 3: an answer carrying anything a client acts on, in any entry (the one
    /// used or another), is refused, naming the key and never its value.
    #[test]
    fn every_forbidden_key_is_refused() {
        let cases: &[(&str, &str, &str)] = &[
            // (after this line of ADMIN, insert this, expect this path)
            (
                "    client-key-data: S0VZCg==\n",
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /tmp/pwn\n",
                "users[0].user.exec",
            ),
            (
                "    client-key-data: S0VZCg==\n",
                "    auth-provider:\n      name: oidc\n",
                "users[0].user.auth-provider",
            ),
            (
                "    client-key-data: S0VZCg==\n",
                "    tokenFile: /tmp/pwn\n",
                "users[0].user.tokenFile",
            ),
            (
                "    client-key-data: S0VZCg==\n",
                "    token: pwn\n",
                "users[0].user.token",
            ),
            (
                "    client-key-data: S0VZCg==\n",
                "    username: pwn\n    password: pwn\n",
                "users[0].user.password",
            ),
            (
                "    client-key-data: S0VZCg==\n",
                "    client-certificate: /tmp/pwn\n",
                "users[0].user.client-certificate",
            ),
            (
                "    client-key-data: S0VZCg==\n",
                "    client-key: /tmp/pwn\n",
                "users[0].user.client-key",
            ),
            (
                "    client-key-data: S0VZCg==\n",
                "    as: pwn\n",
                "users[0].user.as",
            ),
            (
                "    client-key-data: S0VZCg==\n",
                "    extensions: []\n",
                "users[0].user.extensions",
            ),
            (
                "    server: https://localhost:6443\n",
                "    proxy-url: socks5://10.9.9.9:1080\n",
                "clusters[0].cluster.proxy-url",
            ),
            (
                "    server: https://localhost:6443\n",
                "    insecure-skip-tls-verify: true\n",
                "clusters[0].cluster.insecure-skip-tls-verify",
            ),
            (
                "    server: https://localhost:6443\n",
                "    tls-server-name: pwn\n",
                "clusters[0].cluster.tls-server-name",
            ),
            (
                "    server: https://localhost:6443\n",
                "    certificate-authority: /tmp/pwn\n",
                "clusters[0].cluster.certificate-authority",
            ),
            (
                "    server: https://localhost:6443\n",
                "    disable-compression: true\n",
                "clusters[0].cluster.disable-compression",
            ),
            (
                "  name: local\n",
                "  extensions: []\n",
                "clusters[0].extensions",
            ),
            (
                "    user: user\n",
                "    extensions: []\n",
                "contexts[0].context.extensions",
            ),
            (
                "    namespace: default\n",
                "",
                "contexts[0].context.namespace (not default)",
            ),
            ("kind: Config\n", "extensions: []\n", "extensions"),
            ("preferences: {}\n", "", "preferences (not empty)"),
            (
                "users:\n",
                "- name: unused\n  user:\n    exec: {command: /tmp/pwn}\n",
                "users[0].user.exec",
            ),
            (
                "kind: Config\n",
                "\"\\e]0;x\\a\": 1\n",
                "\"\\u{1b}]0;x\\u{7}\"",
            ),
        ];
        for (after, insert, path) in cases {
            assert!(ADMIN.contains(after), "{after}");
            let mut raw = ADMIN.replace(after, &format!("{after}{insert}"));
            if path.starts_with("contexts[0].context.namespace") {
                raw = raw.replace("namespace: default", "namespace: kube-system");
            }
            if path.starts_with("preferences") {
                raw = raw.replace("preferences: {}", "preferences: {colors: true}");
            }
            match rewrite_admin_kubeconfig(&raw, &names()) {
                Err(AdminKubeconfigError::Forbidden(keys)) => {
                    assert!(keys.iter().any(|k| k == path), "{path}: {keys:?}");
                    let e = AdminKubeconfigError::Forbidden(keys).to_string();
                    for secret in ["/tmp/pwn", "10.9.9.9", "S0VZ", "oidc"] {
                        assert!(!e.contains(secret), "{e}");
                    }
                }
                other => panic!("{path}: {other:?}"),
            }
        }
        assert!(matches!(
            rewrite_admin_kubeconfig(&ADMIN.replace("apiVersion: v1", "apiVersion: v2"), &names()),
            Err(AdminKubeconfigError::Forbidden(k)) if k == ["apiVersion (not v1)"]
        ));
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
            "a: [not closed".to_string(),
            ADMIN.replace("current-context: Default", "current-context: Other")
                .replace("contexts:\n- context:", "contexts:\n- name: Second\n  context: {cluster: local, user: user}\n- context:"),
            ADMIN.replace("    cluster: local\n", "    cluster: gone\n"),
            ADMIN.replace("    user: user\n", "    user: gone\n"),
            ADMIN.replace("    client-key-data: S0VZCg==\n", ""),
            ADMIN.replace("client-certificate-data: Q0VSVAo=", "client-certificate-data: \"not base64!\""),
            ADMIN.replace("certificate-authority-data: Q0EK", "certificate-authority-data: \"\""),
            "- just a list".to_string(),
        ] {
            let e = rewrite_admin_kubeconfig(&raw, &names()).expect_err("refused");
            assert!(
                matches!(e, AdminKubeconfigError::Unreadable(_)),
                "{raw}: {e:?}"
            );
            let e = e.to_string();
            assert!(!e.contains("S0VZ") && !e.contains("Q0VS"), "{e}");
        }
    }
}
