//! What a host should have, computed from the spec alone: the k0s.yaml written on a controller and
//! the `k0s install` service arguments. Pure functions; the planner compares them with what the
//! probe saw, the executor writes and installs exactly these.

use crate::install_flags::{self, FlagUse};
use crate::spec::{HostSpec, Role, Spec};
use serde_json::{Map, Value};

mod compare;
mod install;

pub use compare::*;
pub use install::*;

/// Where a joining host's token is written (0600) just before `k0s install`.
pub const TOKEN_FILE: &str = "/etc/k0s/k0stoken";
/// Where a controller's k0s.yaml is written.
pub const CONFIG_FILE: &str = "/etc/k0s/k0s.yaml";
const API_VERSION: &str = "k0s.k0sproject.io/v1beta1";

/// The controller k0sctl calls the leader when nothing runs yet: the first controller of the
/// spec that is not being reset. It bootstraps the cluster and is the one host installed
/// without `--token-file`; with dynamic config it is the one that gets the full config.
pub fn first_controller(spec: &Spec) -> Option<&HostSpec> {
    spec.controllers().find(|h| !h.reset)
}

/// The storage type the cluster's controllers run with, as k0s resolves the k0s.yaml k0sctl
/// writes. `spec.storage.type` of the config when set. With no `spec.k0s.config` at all, k0sctl
/// builds on `k0s config create` (k0sctl `phase/configure_k0s.go` `Prepare`), which says
/// `storage.type: etcd`: etcd, a `single` host included (its `Cluster.StorageType` says kine,
/// but the file it writes wins). Else a `single` host without a `storage:` key runs kine
/// (`--single`), and any other etcd.
pub fn storage_type(spec: &Spec) -> String {
    let Some(config) = &spec.k0s.config else {
        return "etcd".into();
    };
    let single = first_controller(spec).is_some_and(|h| h.role == Role::Single);
    resolved_storage_type(config, single)
}

/// k0sctl's base when `spec.k0s.config` is empty (absent or `{}`) is the leader's existing
/// k0s.yaml, and only without one `k0s config create` (k0sctl `phase/configure_k0s.go`
/// `Prepare`). The leader is the first controller of the spec, not being reset, that runs k0s,
/// else the first one (k0sctl `cluster/spec.go` `K0sLeader`). So on a cluster k0sctl built
/// from such a spec every controller carries what `k0s config create` printed on the leader
/// (its `api.address` included) and whatever was added to the leader's file by hand: that file
/// becomes the spec's config here, and every controller's k0s.yaml is built on it as k0sctl
/// builds it (SANs, peer address). A running leader without a k0s.yaml keeps its datastore:
/// where it runs kine (a `single` host started with no config), the config becomes
/// `spec.storage.type: kine`, which k0s reads the same. Not with `dynamicConfig` (k0sctl gives
/// running clusters only the node part of the spec's own config there). Run after the probe,
/// before planning; the planner and the executor then see the same spec. The file is host
/// output: it must be a YAML mapping, and one a `-probe-out` file kept whole (not redacted).
pub fn keep_running_storage(
    spec: &mut Spec,
    reality: &crate::reality::Reality,
) -> Result<(), String> {
    let empty = match &spec.k0s.config {
        None => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(_) => false,
    };
    if !empty || spec.k0s.dynamic_config {
        return Ok(());
    }
    let probes = reality.probe_index();
    let facts = |h: &HostSpec| probes.at(&h.ssh.address, h.ssh.port)?.facts();
    let leader = spec
        .controllers()
        .filter(|h| !h.reset)
        .find(|h| facts(h).is_some_and(|f| f.status.is_some()))
        .or_else(|| spec.controllers().find(|h| !h.reset));
    let Some(leader) = leader else {
        return Ok(());
    };
    let Some(f) = facts(leader) else {
        return Ok(());
    };
    let config = match (&f.config_text, &f.config_sha256) {
        (Some(text), Some(_)) => {
            let doc: Value = serde_saphyr::from_str(text).map_err(|e| {
                format!(
                    "{}: its k0s.yaml, the base of every controller's k0s.yaml while \
                     spec.k0s.config is empty (as k0sctl), is not YAML: {}",
                    leader.id(),
                    crate::escape::escape(&e.to_string())
                )
            })?;
            if !doc.is_object() {
                return Err(format!(
                    "{}: its k0s.yaml, the base of every controller's k0s.yaml while \
                     spec.k0s.config is empty (as k0sctl), is not a mapping",
                    leader.id()
                ));
            }
            doc
        }
        (Some(_), None) => {
            return Err(format!(
                "{}: its k0s.yaml is the base of every controller's k0s.yaml while \
                 spec.k0s.config is empty (as k0sctl), but the probe file has it redacted",
                leader.id()
            ));
        }
        (None, _) => {
            let kine = f.status.as_ref().and_then(|s| s.storage_type.as_deref()) == Some("kine");
            if !kine {
                return Ok(());
            }
            serde_json::json!({"spec": {"storage": {"type": "kine"}}})
        }
    };
    spec.k0s.config = Some(config);
    Ok(())
}

/// Record whether a controller of the spec runs k0s (`K0sSpec::controllers_run`): with dynamic
/// config, the full config goes only to the first controller of a cluster that does not run yet
/// (k0sctl `phase/configure_k0s.go` `configFor`). Run after the probe, before planning, as
/// [`keep_running_storage`].
pub fn note_running_controllers(spec: &mut Spec, reality: &crate::reality::Reality) {
    let probes = reality.probe_index();
    let runs = spec.controllers().any(|h| {
        probes
            .at(&h.ssh.address, h.ssh.port)
            .and_then(|p| p.facts())
            .is_some_and(|f| f.status.is_some())
    });
    spec.k0s.controllers_run = runs;
}

/// The storage type `host` runs with once it has the k0s.yaml k0sform writes for it.
pub fn host_storage_type(spec: &Spec, host: &HostSpec) -> String {
    resolved_storage_type(&config_value(spec, host), host.role == Role::Single)
}

/// `spec.storage.type` of a k0s.yaml as k0s reads it: any `storage:` key means etcd unless it
/// names another type (`pkg/apis/k0s/v1beta1/storage.go` `UnmarshalJSON`); no key means kine
/// under `--single`, else etcd.
fn resolved_storage_type(doc: &Value, single: bool) -> String {
    match doc.pointer("/spec/storage") {
        Some(Value::Object(s)) => s
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .unwrap_or("etcd")
            .to_string(),
        _ if single => "kine".into(),
        _ => "etcd".into(),
    }
}

/// The k0s.yaml for `host` as k0sctl builds it (k0sctl `phase/configure_k0s.go`, `Prepare` and
/// `configFor`): `spec.k0s.config` with `spec.api.sans` extended by every controller's address
/// and private address (after the user's, in spec order); `spec.api.address` only when
/// `onlyBindToAddress` or IPv6 node-local load balancing needs it; and
/// `spec.storage.etcd.peerAddress` only for etcd storage when the host has a private address or
/// the config names a peer address. A `storage:` section is added only where k0s would
/// otherwise pick another type than [`storage_type`]: `storage.type: etcd` on a `single` host
/// without `spec.k0s.config` (k0sctl's base, `k0s config create`, has it); elsewhere any
/// `storage:` key would switch a `single` host's kine to etcd (`pkg/apis/k0s/v1beta1/storage.go`
/// `UnmarshalJSON`). With `dynamicConfig`, controllers after the first
/// get only the node part (k0sctl `cluster/k0s.go` `NodeConfig`): the rest lives in the
/// ClusterConfig object.
pub fn config_value(spec: &Spec, host: &HostSpec) -> Value {
    let user = match &spec.k0s.config {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    // k0sctl `phase/configure_k0s.go` `configFor`: only the leader of a cluster that does
    // not run yet gets the full config; once a controller runs, every one gets the node part.
    let node_only = spec.k0s.dynamic_config
        && (spec.k0s.controllers_run
            || first_controller(spec).is_some_and(|f| f.id() != host.id()));
    let mut doc = Map::new();
    // The header keys first, whatever order the user wrote them in.
    doc.insert(
        "apiVersion".into(),
        user.get("apiVersion")
            .cloned()
            .unwrap_or_else(|| Value::String(API_VERSION.into())),
    );
    doc.insert(
        "kind".into(),
        user.get("kind")
            .cloned()
            .unwrap_or_else(|| Value::String("ClusterConfig".into())),
    );
    if node_only {
        let mut meta = Map::new();
        if let Some(name) = user.get("metadata").and_then(|m| m.get("name")) {
            meta.insert("name".into(), name.clone());
        }
        doc.insert("metadata".into(), Value::Object(meta));
        let mut node_spec = Map::new();
        if let Some(Value::Object(s)) = user.get("spec") {
            for key in ["api", "network", "storage"] {
                if let Some(v) = s.get(key) {
                    node_spec.insert(key.into(), v.clone());
                }
            }
        }
        doc.insert("spec".into(), Value::Object(node_spec));
    } else {
        for (k, v) in &user {
            doc.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let meta = object_entry(&mut doc, "metadata");
    meta.entry("name")
        .or_insert_with(|| Value::String("k0s".into()));

    let addr = host.peer_address().to_string();
    let storage = storage_type(spec);
    let spec_obj = object_entry(&mut doc, "spec");
    let force_address = {
        let only_bind = spec_obj
            .get("api")
            .and_then(|a| a.get("onlyBindToAddress"))
            .and_then(Value::as_bool)
            == Some(true);
        only_bind || ipv6_node_local_lb(spec_obj)
    };
    let api = object_entry(spec_obj, "api");
    if !node_only {
        let mut sans: Vec<Value> = match api.get("sans") {
            Some(Value::Array(v)) => v.iter().filter(|s| s.is_string()).cloned().collect(),
            _ => Vec::new(),
        };
        for c in spec.controllers().filter(|c| !c.reset) {
            for a in std::iter::once(&c.ssh.address).chain(c.private_address.as_ref()) {
                let a = Value::String(a.clone());
                if !sans.contains(&a) {
                    sans.push(a);
                }
            }
        }
        api.insert("sans".into(), Value::Array(sans));
    }
    let has_address = api
        .get("address")
        .and_then(Value::as_str)
        .is_some_and(|a| !a.is_empty());
    if !has_address && force_address {
        api.insert("address".into(), Value::String(addr.clone()));
    }
    if api.is_empty() {
        spec_obj.remove("api");
    }
    if storage == "etcd" && host.role == Role::Single && !spec_obj.contains_key("storage") {
        object_entry(spec_obj, "storage").insert("type".into(), Value::String(storage.clone()));
    }
    if storage == "etcd" {
        let named = spec_obj
            .get("storage")
            .and_then(|s| s.get("etcd"))
            .and_then(|e| e.get("peerAddress"))
            .is_some_and(|p| !p.is_null());
        if named || host.private_address.is_some() {
            let etcd = object_entry(object_entry(spec_obj, "storage"), "etcd");
            etcd.insert("peerAddress".into(), Value::String(addr));
        }
    }
    Value::Object(doc)
}

/// k0sctl `requiresIPv6NodeLocalAPIAddress`.
fn ipv6_node_local_lb(spec_obj: &Map<String, Value>) -> bool {
    let network = spec_obj.get("network");
    let family = network
        .and_then(|n| n.pointer("/dualStack/primaryAddressFamily"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    family.eq_ignore_ascii_case("ipv6")
        && network
            .and_then(|n| n.pointer("/nodeLocalLoadBalancing/enabled"))
            .and_then(Value::as_bool)
            == Some(true)
}

/// The k0s.yaml text to write on `host` ([`config_value`] as YAML). Deterministic.
pub fn config_yaml(spec: &Spec, host: &HostSpec) -> String {
    crate::yaml::to_yaml(&config_value(spec, host))
}

/// Where a new k0s.yaml is staged and checked with `k0s config validate` before it replaces the
/// old one (k0sctl `phase/configure_k0s.go` validates a staged copy, then renames it in place):
/// beside it.
pub fn staged_config_file(host: &HostSpec) -> String {
    format!("{}.k0sform-new", config_file(host))
}

/// The value of the install flag `name` (long name; shorthands resolved) in the host's
/// `installFlags`, when given with one.
fn install_flag(host: &HostSpec, name: &str) -> Option<String> {
    install_flags::value_of(&host.install_args(), name)
}

/// Where the host's join token is written: `--token-file` of its `installFlags`, else
/// [`TOKEN_FILE`] (k0sctl `cluster/host.go` `K0sJoinTokenPath`).
pub fn token_file(host: &HostSpec) -> String {
    install_flag(host, "token-file").unwrap_or_else(|| TOKEN_FILE.to_string())
}

/// Where a controller's k0s.yaml is written: `--config` (or `-c`) of its `installFlags`, else
/// [`CONFIG_FILE`] (k0sctl `cluster/host.go` `K0sConfigPath`).
pub fn config_file(host: &HostSpec) -> String {
    install_flag(host, "config").unwrap_or_else(|| CONFIG_FILE.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{K0sSpec, SshTarget};
    use serde_json::json;

    pub(super) fn host(role: Role, addr: &str) -> HostSpec {
        HostSpec::new(role, SshTarget::new(addr, 22), 1)
    }

    pub(super) fn spec(hosts: Vec<HostSpec>, config: Option<Value>) -> Spec {
        Spec {
            name: "t".into(),
            user: "admin".into(),
            hosts,
            k0s: K0sSpec {
                config,
                ..K0sSpec::default()
            },
            ..Spec::default()
        }
    }

    pub(super) fn private(mut h: HostSpec, p: &str) -> HostSpec {
        h.private_address = Some(p.into());
        h
    }

    pub(super) const NO_DEFAULTS: ConfigContext<'static> = ConfigContext {
        defaults: None,
        single: false,
        dynamic: false,
    };

    #[test]
    fn config_as_k0sctl_builds_it() {
        let c1 = host(Role::Controller, "10.0.0.1");
        let c2 = private(host(Role::Controller, "10.0.0.2"), "192.168.0.2");
        let mut gone = host(Role::Controller, "10.0.0.9");
        gone.reset = true;
        let w1 = private(host(Role::Worker, "10.0.0.4"), "192.168.0.4");
        let s = spec(
            vec![c1.clone(), c2.clone(), gone, w1],
            Some(
                json!({"spec": {"api": {"sans": ["k8s.example.com", "10.0.0.2"]}, "telemetry": {"enabled": false}}}),
            ),
        );
        // The user's SANs first, then every controller's address and private address (not the
        // one being reset, not workers), in spec order; no api.address; peerAddress only where a
        // private address is set.
        let y = config_yaml(&s, &c2);
        assert_eq!(
            y,
            "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    sans:\n      - k8s.example.com\n      - 10.0.0.2\n      - 10.0.0.1\n      - 192.168.0.2\n  telemetry:\n    enabled: false\n  storage:\n    etcd:\n      peerAddress: 192.168.0.2\nmetadata:\n  name: k0s\n"
        );
        let back: Value = serde_saphyr::from_str(&y).expect("valid yaml");
        assert_eq!(
            back,
            config_value(&s, &c2),
            "reads back as the same document"
        );
        let v1 = config_value(&s, &c1);
        assert!(v1.pointer("/spec/storage").is_none(), "{v1}");
        assert!(v1.pointer("/spec/api/address").is_none(), "{v1}");
        assert_eq!(v1.pointer("/spec/api/sans"), v1.pointer("/spec/api/sans"));
        assert_eq!(
            v1.pointer("/spec/api/sans"),
            config_value(&s, &c2).pointer("/spec/api/sans"),
            "every controller gets the same SANs"
        );
        assert_eq!(config_yaml(&s, &c2), y, "deterministic");
        // The probe skips `k0s config create` when the host's file is this text: without
        // k0s's defaults it must still compare equal.
        assert_eq!(
            config_difference(Some(&y), &config_value(&s, &c2), NO_DEFAULTS, false),
            None
        );
    }

    #[test]
    fn peer_address_when_the_config_names_one() {
        let c1 = host(Role::Controller, "10.0.0.1");
        let s = spec(
            vec![c1.clone()],
            Some(
                json!({"spec": {"storage": {"type": "etcd", "etcd": {"peerAddress": "1.2.3.4"}}}}),
            ),
        );
        assert_eq!(
            config_value(&s, &c1).pointer("/spec/storage/etcd/peerAddress"),
            Some(&json!("10.0.0.1"))
        );
    }

    #[test]
    fn api_address_only_when_k0s_needs_it() {
        let c1 = private(host(Role::Controller, "10.0.0.1"), "192.168.0.1");
        let cases = [
            (
                json!({"spec": {"api": {"onlyBindToAddress": true}}}),
                Some("192.168.0.1"),
            ),
            (json!({"spec": {"api": {"onlyBindToAddress": false}}}), None),
            (
                json!({"spec": {"network": {"dualStack": {"primaryAddressFamily": "IPv6"}, "nodeLocalLoadBalancing": {"enabled": true}}}}),
                Some("192.168.0.1"),
            ),
            (
                json!({"spec": {"network": {"dualStack": {"primaryAddressFamily": "IPv6"}}}}),
                None,
            ),
            (
                json!({"spec": {"api": {"address": "10.9.9.9", "onlyBindToAddress": true}}}),
                Some("10.9.9.9"),
            ),
        ];
        for (cfg, want) in cases {
            let s = spec(vec![c1.clone()], Some(cfg.clone()));
            assert_eq!(
                config_value(&s, &c1)
                    .pointer("/spec/api/address")
                    .and_then(Value::as_str),
                want,
                "{cfg}"
            );
        }
    }

    #[test]
    fn single_runs_etcd_without_a_config_as_k0sctl_builds_it() {
        // k0sctl's base is `k0s config create`, which says `storage.type: etcd`.
        let single = private(host(Role::Single, "10.0.0.1"), "192.168.0.1");
        let s = spec(vec![single.clone()], None);
        assert_eq!(storage_type(&s), "etcd");
        assert_eq!(host_storage_type(&s, &single), "etcd");
        assert_eq!(
            config_value(&s, &single).pointer("/spec/storage"),
            Some(&json!({"type": "etcd", "etcd": {"peerAddress": "192.168.0.1"}}))
        );
    }

    #[test]
    fn a_running_kine_leader_keeps_kine_without_a_config() {
        use crate::reality::{HostFacts, HostReality, K0sStatus, Probe, Reality};
        let single = host(Role::Single, "10.0.0.1");
        let reality = |storage: &str| Reality {
            hosts: vec![HostReality {
                id: single.id(),
                probe: Probe::Reached(Box::new(HostFacts {
                    status: Some(K0sStatus {
                        storage_type: Some(storage.into()),
                        ..K0sStatus::running("v1.33.4+k0s.0".parse().unwrap(), 1, "controller")
                    }),
                    ..Default::default()
                })),
            }],
        };
        let mut s = spec(vec![single.clone()], None);
        keep_running_storage(&mut s, &reality("etcd")).unwrap();
        assert_eq!(s.k0s.config, None);
        keep_running_storage(&mut s, &reality("kine")).unwrap();
        assert_eq!(host_storage_type(&s, &single), "kine");
        assert!(!config_yaml(&s, &single).contains("etcd"));
        // A config of the spec's own is the user's word.
        let mut s = spec(
            vec![single.clone()],
            Some(json!({"spec": {"storage": {"type": "etcd"}}})),
        );
        keep_running_storage(&mut s, &reality("kine")).unwrap();
        assert_eq!(host_storage_type(&s, &single), "etcd");
    }

    #[test]
    fn the_running_leaders_k0s_yaml_is_the_base_without_a_config() {
        use crate::reality::{HostFacts, HostReality, K0sStatus, Probe, Reality};
        let c1 = host(Role::Controller, "10.0.0.1");
        let c2 = host(Role::Controller, "10.0.0.2");
        let facts = |running: bool, text: Option<&str>, sha: bool| {
            Probe::Reached(Box::new(HostFacts {
                status: running
                    .then(|| K0sStatus::running("v1.33.4+k0s.0".parse().unwrap(), 1, "controller")),
                config_text: text.map(str::to_string),
                config_sha256: sha.then(|| "0".repeat(64)),
                ..Default::default()
            }))
        };
        let leader_yaml = "# generated-by-k0sctl\nspec:\n  api:\n    address: 10.0.0.1\n  telemetry:\n    enabled: false\n";
        // c1 is not running: c2, the first running controller, is k0sctl's leader.
        let reality = |c2_text: &str, sha: bool| Reality {
            hosts: vec![
                HostReality {
                    id: c1.id(),
                    probe: facts(false, Some("spec: {}\n"), true),
                },
                HostReality {
                    id: c2.id(),
                    probe: facts(true, Some(c2_text), sha),
                },
            ],
        };
        let mut s = spec(vec![c1.clone(), c2.clone()], Some(json!({})));
        keep_running_storage(&mut s, &reality(leader_yaml, true)).unwrap();
        for h in [&c1, &c2] {
            let v = config_value(&s, h);
            assert_eq!(v.pointer("/spec/api/address"), Some(&json!("10.0.0.1")));
            assert_eq!(v.pointer("/spec/telemetry/enabled"), Some(&json!(false)));
            assert_eq!(
                v.pointer("/spec/api/sans"),
                Some(&json!(["10.0.0.1", "10.0.0.2"]))
            );
        }
        // A spec config of its own wins; host output that is not a mapping, or was redacted,
        // is refused naming the leader.
        let mut own = spec(vec![c1.clone(), c2.clone()], Some(json!({"spec": {}})));
        keep_running_storage(&mut own, &reality(leader_yaml, true)).unwrap();
        assert_eq!(own.k0s.config, Some(json!({"spec": {}})));
        let mut s = spec(vec![c1.clone(), c2.clone()], None);
        let err = keep_running_storage(&mut s, &reality("- a list\n", true)).unwrap_err();
        assert!(
            err.starts_with("10.0.0.2") && err.contains("not a mapping"),
            "{err}"
        );
        let err = keep_running_storage(&mut s, &reality(leader_yaml, false)).unwrap_err();
        assert!(err.contains("redacted"), "{err}");
    }

    #[test]
    fn single_and_kine_get_no_storage_section() {
        let single = private(host(Role::Single, "10.0.0.1"), "192.168.0.1");
        let s = spec(
            vec![single.clone()],
            Some(json!({"spec": {"telemetry": {"enabled": false}}})),
        );
        assert_eq!(storage_type(&s), "kine");
        assert_eq!(host_storage_type(&s, &single), "kine");
        let v = config_value(&s, &single);
        assert!(v.pointer("/spec/storage").is_none(), "{v}");
        assert!(!config_yaml(&s, &single).contains("storage"));

        let c = private(host(Role::Controller, "10.0.0.1"), "192.168.0.1");
        let s = spec(
            vec![c.clone()],
            Some(json!({"spec": {"storage": {"type": "kine"}}})),
        );
        assert_eq!(storage_type(&s), "kine");
        assert_eq!(
            config_value(&s, &c).pointer("/spec/storage"),
            Some(&json!({"type": "kine"}))
        );
    }

    #[test]
    fn dynamic_config_gives_later_controllers_the_node_config() {
        let c1 = host(Role::Controller, "10.0.0.1");
        let c2 = host(Role::Controller, "10.0.0.2");
        let mut s = spec(
            vec![c1.clone(), c2.clone()],
            Some(
                json!({"spec": {"api": {"sans": ["lb"]}, "network": {"podCIDR": "10.1.0.0/16"}, "telemetry": {"enabled": false}}}),
            ),
        );
        s.k0s.dynamic_config = true;
        let full = config_value(&s, &c1);
        assert_eq!(full.pointer("/spec/telemetry/enabled"), Some(&json!(false)));
        assert_eq!(
            full.pointer("/spec/api/sans"),
            Some(&json!(["lb", "10.0.0.1", "10.0.0.2"]))
        );
        let node = config_value(&s, &c2);
        assert_eq!(
            node,
            json!({"apiVersion": "k0s.k0sproject.io/v1beta1", "kind": "ClusterConfig", "metadata": {"name": "k0s"},
                   "spec": {"api": {"sans": ["lb"]}, "network": {"podCIDR": "10.1.0.0/16"}}})
        );
        assert!(install_args(&s, &c2).contains(&"--enable-dynamic-config=true".to_string()));
        assert!(
            !install_args(&s, &host(Role::Worker, "10.0.0.3"))
                .iter()
                .any(|a| a.contains("dynamic"))
        );
        // Once a controller runs, every later apply gives each controller, the first too, only
        // the node part (k0sctl `phase/configure_k0s.go` `configFor`).
        s.k0s.controllers_run = true;
        assert_eq!(
            config_value(&s, &c1).pointer("/spec/telemetry"),
            None,
            "the first controller of a running cluster gets the node part"
        );
        assert_eq!(
            config_value(&s, &c1).pointer("/spec/network/podCIDR"),
            Some(&json!("10.1.0.0/16"))
        );
    }
}
