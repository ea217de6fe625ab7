//! What a host should have, computed from the spec alone: the k0s.yaml written on a controller and
//! the `k0s install` service arguments. Pure functions; the planner compares them with what the
//! probe saw, the executor writes and installs exactly these.

use super::install_flags::{self, FlagUse};
use crate::spec::{HostSpec, Role, Spec};
use serde_json::{Map, Value};

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

/// k0sctl's base when `spec.k0s.config` is empty is the leader's existing k0s.yaml, and only
/// without one `k0s config create` (k0sctl `phase/configure_k0s.go` `Prepare`). Of that file
/// k0sform keeps the datastore: where the first running controller of the spec runs kine (a
/// `single` host whose k0s.yaml has no `storage:` key, as earlier k0sform versions wrote it),
/// the spec's config becomes `spec.storage.type: kine`, which k0s reads the same. Run after
/// the probe, before planning; the planner and the executor then see the same spec.
pub fn keep_running_storage(spec: &mut Spec, reality: &crate::reality::Reality) {
    if spec.k0s.config.is_some() {
        return;
    }
    let probes = reality.probe_index();
    let leader = spec.controllers().filter(|h| !h.reset).find_map(|h| {
        let f = probes.at(&h.ssh.address, h.ssh.port)?.facts()?;
        f.status.as_ref()?.storage_type.clone()
    });
    if leader.as_deref() == Some("kine") {
        spec.k0s.config = Some(serde_json::json!({"spec": {"storage": {"type": "kine"}}}));
    }
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
/// as `(secret)` (`(secret, changed: …)` where they differ) unless `show_secrets` (`super::redact`).
pub fn config_difference(
    have: Option<&str>,
    want: &Value,
    cx: ConfigContext<'_>,
    show_secrets: bool,
) -> Option<String> {
    let unified = |have: &str, want: &str| {
        super::redact::config_diff(have, want, "on the host", "from k0sctl.yaml", show_secrets)
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

/// Where a new k0s.yaml is staged and checked with `k0s config validate` before it replaces the
/// old one (k0sctl `phase/configure_k0s.go` validates a staged copy, then renames it in place):
/// beside it.
pub fn staged_config_file(host: &HostSpec) -> String {
    format!("{}.k0sform-new", config_file(host))
}

/// The value of the install flag `name` (long name; shorthands resolved) in the host's
/// `installFlags`, when given with one.
fn install_flag(host: &HostSpec, name: &str) -> Option<String> {
    install_flags::parse_words(&host.install_args())
        .into_iter()
        .find(|f| f.name == name)
        .and_then(|f| f.value)
        .filter(|v| !v.is_empty())
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

/// The value with every mapping's keys sorted (a canonical form to hash or compare).
pub fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// A normal form as YAML text (for diffs).
pub fn render(v: &Value) -> String {
    crate::yaml::to_yaml(v)
}

/// The `k0s install` flags for `host` as k0sctl builds them (k0sctl
/// `pkg/apis/k0sctl.k0sproject.io/v1beta1/cluster/host.go` `K0sInstallFlags`): the user's
/// `installFlags` as written, `--data-dir` (and `--kubelet-root-dir`) replaced by the host's,
/// `--enable-worker=true`/`--no-taints=true`/`--single=true` by role, `--token-file` (every host
/// joins with a token but the bootstrap controller: see [`reinstall_args`]), `--config` on
/// controllers, `--enable-dynamic-config=true` on controllers with dynamic config, and on hosts
/// that run a kubelet `--kubelet-extra-args` with `--node-ip=PRIVATE` (unless
/// `--enable-cloud-provider`) and `--hostname-override`. Each flag already given by the user
/// is left as the user wrote it.
pub fn install_args(spec: &Spec, host: &HostSpec) -> Vec<String> {
    let mut flags: Vec<FlagUse> = install_flags::parse_words(&host.install_args());
    let has = |flags: &[FlagUse], name: &str| flags.iter().any(|f| f.name == name);
    let replace =
        |flags: &mut Vec<FlagUse>, f: FlagUse| match flags.iter().position(|x| x.name == f.name) {
            Some(i) => {
                flags[i] = f.clone();
                let mut seen = false;
                flags.retain(|x| {
                    if x.name != f.name {
                        return true;
                    }
                    let keep = !seen;
                    seen = true;
                    keep
                });
            }
            None => flags.push(f),
        };
    let add_unless = |flags: &mut Vec<FlagUse>, f: FlagUse| {
        if !has(flags, &f.name) {
            flags.push(f);
        }
    };
    replace(&mut flags, FlagUse::new("data-dir", &host.data_dir));
    if let Some(k) = &host.kubelet_root_dir {
        replace(&mut flags, FlagUse::new("kubelet-root-dir", k));
    }
    match host.role {
        Role::ControllerWorker => {
            add_unless(&mut flags, FlagUse::new("enable-worker", "true"));
            if host.no_taints {
                add_unless(&mut flags, FlagUse::new("no-taints", "true"));
            }
        }
        Role::Single => add_unless(&mut flags, FlagUse::new("single", "true")),
        Role::Controller | Role::Worker => {}
    }
    if host.role != Role::Single {
        add_unless(&mut flags, FlagUse::new("token-file", TOKEN_FILE));
    }
    if host.role.is_controller() {
        add_unless(&mut flags, FlagUse::new("config", CONFIG_FILE));
        if spec.k0s.dynamic_config {
            replace(&mut flags, FlagUse::new("enable-dynamic-config", "true"));
        }
    }
    // k0sctl: roles ending in "worker" (worker, controller+worker).
    if matches!(host.role, Role::Worker | Role::ControllerWorker) {
        let mut extra: Vec<FlagUse> = flags
            .iter()
            .find(|f| f.name == "kubelet-extra-args")
            .and_then(|f| f.value.as_deref())
            .map(|v| {
                crate::spec::shell_words(v)
                    .unwrap_or_else(|_| v.split_whitespace().map(str::to_string).collect())
            })
            .map(|words| words.iter().map(|w| kubelet_flag(w)).collect())
            .unwrap_or_default();
        let cloud = flags
            .iter()
            .find(|f| f.name == "enable-cloud-provider")
            .is_some_and(|f| {
                f.value
                    .as_deref()
                    .is_none_or(|v| install_flags::parse_go_bool(v) == Some(true))
            });
        if !cloud
            && let Some(p) = &host.private_address
            && !extra.iter().any(|f| f.name == "--node-ip")
        {
            extra.push(FlagUse::new("--node-ip", p));
        }
        if let Some(h) = &host.hostname {
            match extra.iter_mut().find(|f| f.name == "--hostname-override") {
                Some(f) => f.value = Some(h.clone()),
                None => extra.push(FlagUse::new("--hostname-override", h)),
            }
        }
        if !extra.is_empty() {
            let joined = extra
                .iter()
                .map(|f| match &f.value {
                    Some(v) => format!("{}={v}", f.name),
                    None => f.name.clone(),
                })
                .collect::<Vec<_>>()
                .join(" ");
            replace(&mut flags, FlagUse::new("kubelet-extra-args", joined));
        }
    }
    flags.iter().map(FlagUse::word).collect()
}

/// One word of a kubelet argument string, split as k0sctl's `Flags.Each` does (at the first
/// `=` or space), the name keeping its dashes.
fn kubelet_flag(word: &str) -> FlagUse {
    match word.split_once('=') {
        Some((k, v)) => FlagUse::new(k, v),
        None => FlagUse {
            name: word.to_string(),
            value: None,
        },
    }
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

/// Service arguments reduced to what must match between desired and running: both as k0s
/// records them ([`install_flags::recorded`]), `--token-file` dropped (the bootstrap controller
/// legitimately runs without one) and the words of `--kubelet-extra-args` sorted (kubelet reads
/// them as a set of flags).
pub fn comparable_args<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    install_flags::recorded(args)
        .into_iter()
        .filter(|a| !a.starts_with("--token-file="))
        .map(|a| match a.strip_prefix("--kubelet-extra-args=") {
            Some(v) => {
                let mut words: Vec<&str> = v.split_whitespace().collect();
                words.sort_unstable();
                format!("--kubelet-extra-args={}", words.join(" "))
            }
            None => a,
        })
        .collect()
}

/// sha256 of the comparable install arguments, as recorded in state (`install_flags_sha256`).
pub fn install_flags_sha256<S: AsRef<str>>(args: &[S]) -> String {
    crate::hash::sha256_hex(comparable_args(args).join("\n"))
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
    use crate::spec::{K0sSpec, Options, SshTarget};
    use serde_json::json;

    fn host(role: Role, addr: &str) -> HostSpec {
        HostSpec::new(role, SshTarget::new(addr, 22), 1)
    }

    fn spec(hosts: Vec<HostSpec>, config: Option<Value>) -> Spec {
        Spec {
            name: "t".into(),
            user: "admin".into(),
            hosts,
            k0s: K0sSpec {
                version: None,
                version_channel: None,
                dynamic_config: false,
                config,
                controllers_run: false,
            },
            options: Options::default(),
            manifests: vec![],
            env_values: vec![],
        }
    }

    fn private(mut h: HostSpec, p: &str) -> HostSpec {
        h.private_address = Some(p.into());
        h
    }

    const NO_DEFAULTS: ConfigContext<'static> = ConfigContext {
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
        keep_running_storage(&mut s, &reality("etcd"));
        assert_eq!(s.k0s.config, None);
        keep_running_storage(&mut s, &reality("kine"));
        assert_eq!(host_storage_type(&s, &single), "kine");
        assert!(!config_yaml(&s, &single).contains("etcd"));
        // A config of the spec's own is the user's word.
        let mut s = spec(
            vec![single.clone()],
            Some(json!({"spec": {"storage": {"type": "etcd"}}})),
        );
        keep_running_storage(&mut s, &reality("kine"));
        assert_eq!(host_storage_type(&s, &single), "etcd");
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

    /// Table: a host of the spec and the flags k0sctl v0.32 passes to `k0s install`, compared as
    /// k0s records them.
    #[test]
    fn install_flags_as_k0sctl_builds_them() {
        let c1 = host(Role::Controller, "10.0.0.1");
        let mut cw = private(host(Role::ControllerWorker, "10.0.0.2"), "192.168.0.2");
        cw.no_taints = true;
        let single = host(Role::Single, "10.0.0.3");
        let mut w = private(host(Role::Worker, "10.0.0.4"), "192.168.0.4");
        w.hostname = Some("node-4".into());
        w.install_flags = vec![
            "--kubelet-extra-args=\"--max-pods=150\"".into(),
            "--labels=zone=a,app=x".into(),
        ];
        let mut cloud = private(host(Role::Worker, "10.0.0.5"), "192.168.0.5");
        cloud.install_flags = vec!["--enable-cloud-provider".into()];
        let mut own_ip = private(host(Role::Worker, "10.0.0.6"), "192.168.0.6");
        own_ip.install_flags = vec![
            "--kubelet-extra-args=--node-ip=10.1.1.1".into(),
            "--data-dir=/srv/x".into(),
        ];
        own_ip.data_dir = "/srv/k0s".into();
        let s = spec(
            vec![
                c1.clone(),
                cw.clone(),
                single.clone(),
                w.clone(),
                cloud.clone(),
                own_ip.clone(),
            ],
            None,
        );
        let cases: &[(&HostSpec, &[&str])] = &[
            (
                &c1,
                &["--config=/etc/k0s/k0s.yaml", "--data-dir=/var/lib/k0s"],
            ),
            (
                &cw,
                &[
                    "--config=/etc/k0s/k0s.yaml",
                    "--data-dir=/var/lib/k0s",
                    "--enable-worker=true",
                    "--kubelet-extra-args=--node-ip=192.168.0.2",
                    "--no-taints=true",
                ],
            ),
            (
                &single,
                &[
                    "--config=/etc/k0s/k0s.yaml",
                    "--data-dir=/var/lib/k0s",
                    "--single=true",
                ],
            ),
            (
                &w,
                &[
                    "--data-dir=/var/lib/k0s",
                    "--kubelet-extra-args=--hostname-override=node-4 --max-pods=150 --node-ip=192.168.0.4",
                    "--labels=app=x,zone=a",
                ],
            ),
            (
                &cloud,
                &["--data-dir=/var/lib/k0s", "--enable-cloud-provider=true"],
            ),
            (
                &own_ip,
                &[
                    "--data-dir=/srv/k0s",
                    "--kubelet-extra-args=--node-ip=10.1.1.1",
                ],
            ),
        ];
        for (h, want) in cases {
            assert_eq!(
                comparable_args(&install_args(&s, h)),
                *want,
                "{}",
                h.ssh.address
            );
            if h.role != Role::Single {
                assert!(install_args(&s, h).contains(&format!("--token-file={TOKEN_FILE}")));
            }
        }
        // k0sctl's order inside --kubelet-extra-args: the user's, then --node-ip, then the name.
        assert!(install_args(&s, &w).contains(
            &"--kubelet-extra-args=--max-pods=150 --node-ip=192.168.0.4 --hostname-override=node-4".to_string()
        ));
    }

    /// What k0s recorded for k0sctl's install compares equal to what k0sform wants: the labels
    /// sorted, the logging levels expanded, the order of kubelet's arguments.
    #[test]
    fn running_args_as_k0s_recorded_them_match() {
        let mut w = private(host(Role::Worker, "10.0.0.4"), "192.168.0.4");
        w.install_flags = vec![
            "--labels=zone=a,app=x".into(),
            "--labels=tier=web".into(),
            "-l kubelet=2".into(),
            "--kubelet-extra-args='--max-pods=150'".into(),
        ];
        let s = spec(vec![host(Role::Controller, "10.0.0.1"), w.clone()], None);
        let running = [
            "--data-dir=/var/lib/k0s",
            "--kubelet-extra-args=--max-pods=150 --node-ip=192.168.0.4",
            "--labels=app=x,tier=web,zone=a",
            "--logging=containerd=info,etcd=info,konnectivity-server=1,kube-apiserver=1,kube-controller-manager=1,kube-scheduler=1,kubelet=2",
            "--token-file=/etc/k0s/k0stoken",
        ];
        assert_eq!(
            comparable_args(&install_args(&s, &w)),
            comparable_args(&running)
        );
        assert_eq!(
            install_flags_sha256(&install_args(&s, &w)),
            install_flags_sha256(&running)
        );
        let relabelled = [
            "--data-dir=/var/lib/k0s",
            "--kubelet-extra-args=--max-pods=150 --node-ip=192.168.0.4",
            "--labels=app=x,zone=a",
        ];
        assert_ne!(
            comparable_args(&install_args(&s, &w)),
            comparable_args(&relabelled)
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

    /// k0sctl `cluster/host.go` `K0sConfigPath`, `K0sJoinTokenPath`: installFlags move where
    /// k0s.yaml and the join token are written, and the service is given those paths.
    #[test]
    fn install_flags_move_the_config_and_token_files() {
        let mut c = host(Role::Controller, "10.0.0.1");
        let mut w = host(Role::Worker, "10.0.0.2");
        assert_eq!(config_file(&c), CONFIG_FILE);
        assert_eq!(token_file(&w), TOKEN_FILE);
        for flags in [
            vec!["--config=/srv/k0s.yaml".to_string()],
            vec!["--config /srv/k0s.yaml".into()],
            vec!["-c /srv/k0s.yaml".into()],
        ] {
            c.install_flags = flags.clone();
            assert_eq!(config_file(&c), "/srv/k0s.yaml", "{flags:?}");
            assert_eq!(staged_config_file(&c), "/srv/k0s.yaml.k0sform-new");
        }
        w.install_flags = vec!["--token-file=/srv/join.tok".into()];
        assert_eq!(token_file(&w), "/srv/join.tok");
        let s = spec(vec![c.clone(), w.clone()], None);
        let wargs = install_args(&s, &w);
        assert!(
            wargs.contains(&"--token-file=/srv/join.tok".to_string()),
            "{wargs:?}"
        );
        assert_eq!(
            wargs
                .iter()
                .filter(|a| a.starts_with("--token-file"))
                .count(),
            1
        );
        let cargs = install_args(&s, &c);
        assert_eq!(
            cargs
                .iter()
                .filter(|a| a.starts_with("--config") || a.starts_with("-c"))
                .count(),
            1,
            "{cargs:?}"
        );
    }

    /// `hostname:` goes into `--hostname-override` as written (k0sctl `cluster/host.go`
    /// `K0sInstallFlags`); the Node name is lower-cased, as kubelet does. A
    /// `--hostname-override` in installFlags' `--kubelet-extra-args` names the Node too.
    #[test]
    fn hostname_keeps_its_case_in_the_flag_and_the_node_name_is_lower_case() {
        let mut w = host(Role::Worker, "10.0.0.2");
        w.hostname = Some("Worker-1".into());
        let s = spec(vec![w.clone()], None);
        assert!(
            install_args(&s, &w)
                .contains(&"--kubelet-extra-args=--hostname-override=Worker-1".to_string())
        );
        assert_eq!(w.node_name().as_deref(), Some("worker-1"));
        w.hostname = None;
        assert_eq!(w.node_name(), None);
        for flag in [
            "--kubelet-extra-args=\"--max-pods=10 --hostname-override=Node-7\"",
            "--kubelet-extra-args='--hostname-override Node-7'",
            "--kubelet-extra-args=--hostname-override=Node-7",
        ] {
            w.install_flags = vec![flag.into()];
            assert_eq!(w.node_name().as_deref(), Some("node-7"), "{flag}");
        }
    }
}
