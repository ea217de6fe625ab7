//! Parsers of k0s output and classifiers of k0s error lines (reference/k0s-cli.md §1–5).

use super::{EtcdMemberObject, K0sError, NodeReady, TokenInfo, TokenRole};
use crate::reality::{K0sStatus, NodeView};
use crate::transport::CommandOutput;
use crate::version::K0sVersion;
use base64::Engine;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;

/// `k0s version` (plain `v1.30.1+k0s.0`) or `k0s version -j` (`{"k0s": "v…", …}`).
pub fn parse_version(out: &str) -> Result<K0sVersion, K0sError> {
    let t = out.trim();
    let v = if t.starts_with('{') {
        let j: Value = serde_json::from_str(t).map_err(|e| K0sError::parse("k0s version -j", e))?;
        j.get("k0s")
            .and_then(Value::as_str)
            .ok_or_else(|| K0sError::parse("k0s version -j", "no \"k0s\" key"))?
            .trim()
            .to_string()
    } else {
        t.to_string()
    };
    // k0s prints its version with the `v`; one without is not k0s's answer.
    if !v.starts_with('v') {
        return Err(K0sError::parse(
            "k0s version",
            format!("unexpected output {:?}", crate::hash::short_n(&v, 80)),
        ));
    }
    K0sVersion::parse(&v).map_err(|e| K0sError::parse("k0s version", e))
}

/// `k0s status -o json`. A status without Version, Role or Pid means "not running" (k0sctl's
/// rule) and is `K0sError::NotRunning`. Legacy roles `server`/`server+worker` read as controller.
pub fn parse_status(out: &str) -> Result<K0sStatus, K0sError> {
    let v: Value =
        serde_json::from_str(out.trim()).map_err(|e| K0sError::parse("k0s status -o json", e))?;
    if !v.is_object() {
        return Err(K0sError::parse("k0s status -o json", "not a JSON object"));
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let b = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    let version = s("Version");
    let pid = v.get("Pid").and_then(Value::as_u64).unwrap_or(0);
    let mut role = s("Role");
    if version.is_empty() || role.is_empty() || pid == 0 {
        return Err(K0sError::NotRunning);
    }
    let version =
        K0sVersion::parse(&version).map_err(|e| K0sError::parse("k0s status -o json", e))?;
    let mut workloads = b("Workloads");
    if let Some(legacy) = role.strip_prefix("server") {
        workloads |= legacy == "+worker";
        role = "controller".into();
    }
    let args = match v.get("Args") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(String::from)
                    .ok_or_else(|| K0sError::parse("k0s status -o json", "Args holds a non-string"))
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => Vec::new(),
    };
    let peer_address = v
        .pointer("/ClusterConfig/spec/storage/etcd/peerAddress")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .map(String::from);
    let storage_type = v
        .pointer("/ClusterConfig/spec/storage/type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(String::from);
    Ok(K0sStatus {
        version,
        pid,
        role,
        workloads,
        single_node: b("SingleNode"),
        args,
        peer_address,
        storage_type,
        invocation_id: v
            .pointer("/K0sVars/InvocationID")
            .and_then(Value::as_str)
            .and_then(super::invocation_id),
    })
}

/// Did `k0s status` fail because nothing is running (no or dead status socket)? Covers the error
/// lines of every version: ≥1.28 `can't get "status" via "…/status.sock"`, 1.27 `can't do http
/// request: …/status.sock status`, ≤1.26 `Get "http://localhost/status": dial unix …`.
pub fn is_not_running(out: &CommandOutput) -> bool {
    if out.success() {
        return false;
    }
    let line = out.error_line();
    line.starts_with("Error: ")
        && (line.contains("status.sock") || line.contains("can't do http request"))
}

/// `k0s etcd …` on a controller whose storage is kine: k0s refuses before it touches etcd, with
/// `Error: wrong storage type: kine` and exit 1 (`cmd/etcd/etcd.go` `PersistentPreRunE`; the
/// storage comes from the running controller's runtime config, so `--single` without a
/// `storage:` key counts). Such a controller has no etcd membership at all.
pub fn etcd_refused_for_kine(out: &CommandOutput) -> bool {
    out.status == Some(1) && out.error_line().trim() == "Error: wrong storage type: kine"
}

/// `k0s etcd member-list`: `{"members":{"<name>":"<first peer URL>",…}}` on stdout, or (k0s
/// 1.21/1.22) inside a logrus JSON line on stderr — pass either. An unstarted member has name "".
pub fn parse_member_list(out: &str) -> Result<BTreeMap<String, String>, K0sError> {
    const WHAT: &str = "k0s etcd member-list";
    let candidates = std::iter::once(out.trim()).chain(out.lines().map(str::trim));
    for text in candidates {
        let Some(start) = text.find('{') else {
            continue;
        };
        let mut it = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        let Some(Ok(v)) = it.next() else {
            continue;
        };
        let Some(members) = v.get("members") else {
            continue;
        };
        let Some(obj) = members.as_object() else {
            return Err(K0sError::parse(WHAT, "\"members\" is not an object"));
        };
        return obj
            .iter()
            .map(|(name, url)| {
                url.as_str()
                    .map(|u| (name.clone(), u.to_string()))
                    .ok_or_else(|| K0sError::parse(WHAT, format!("member {name:?} has no URL")))
            })
            .collect();
    }
    Err(K0sError::parse(
        WHAT,
        format!(
            "no {{\"members\":…}} object in {:?}",
            crate::hash::short_n(out, 120)
        ),
    ))
}

fn items<'a>(v: &'a Value, what: &'static str) -> Result<&'a Vec<Value>, K0sError> {
    v.get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| K0sError::parse(what, "no \"items\" list"))
}

fn json(out: &str, what: &'static str) -> Result<Value, K0sError> {
    serde_json::from_str(out.trim()).map_err(|e| K0sError::parse(what, e))
}

fn name_of(item: &Value) -> Option<String> {
    item.pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(String::from)
}

fn condition(item: &Value, kind: &str) -> Option<bool> {
    item.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        .and_then(|c| c.get("status").and_then(Value::as_str))
        .map(|s| s == "True")
}

/// `kubectl get etcdmembers.etcd.k0sproject.io -o json`, sorted by name.
pub fn parse_etcd_members(out: &str) -> Result<Vec<EtcdMemberObject>, K0sError> {
    const WHAT: &str = "EtcdMember objects";
    etcd_members_of(items(&json(out, WHAT)?, WHAT)?, WHAT)
}

fn etcd_members_of<'a>(
    items: impl IntoIterator<Item = &'a Value>,
    what: &'static str,
) -> Result<Vec<EtcdMemberObject>, K0sError> {
    by_name(items, what, "an item has no name", |name, item| {
        let status = |k: &str| {
            item.pointer(&format!("/status/{k}"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        EtcdMemberObject {
            name,
            member_id: status("memberID"),
            peer_address: status("peerAddress"),
            joined: condition(item, "Joined"),
            leave: item
                .pointer("/spec/leave")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            invocation: item
                .pointer("/metadata/labels/k0s.k0sproject.io~1shutdown-on-leave")
                .and_then(Value::as_str)
                .and_then(super::invocation_id),
        }
    })
}

/// Every item turned into a `T` by `make(name, item)`, sorted by name; an item without a name
/// is a parse error (`nameless`).
fn by_name<'a, T>(
    items: impl IntoIterator<Item = &'a Value>,
    what: &'static str,
    nameless: &'static str,
    make: impl Fn(String, &'a Value) -> T,
) -> Result<Vec<T>, K0sError> {
    let mut named = items
        .into_iter()
        .map(|item| {
            name_of(item)
                .map(|name| (name, item))
                .ok_or_else(|| K0sError::parse(what, nameless))
        })
        .collect::<Result<Vec<_>, K0sError>>()?;
    named.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(named
        .into_iter()
        .map(|(name, item)| make(name, item))
        .collect())
}

/// `kubectl get nodes -o json`, sorted by name; ready = condition Ready is "True".
pub fn parse_nodes(out: &str) -> Result<Vec<NodeView>, K0sError> {
    const WHAT: &str = "Node objects";
    nodes_of(items(&json(out, WHAT)?, WHAT)?, WHAT)
}

fn nodes_of<'a>(
    items: impl IntoIterator<Item = &'a Value>,
    what: &'static str,
) -> Result<Vec<NodeView>, K0sError> {
    by_name(items, what, "a node has no name", |name, item| NodeView {
        name,
        ready: condition(item, "Ready").unwrap_or(false),
        internal_ips: internal_ips(item),
    })
}

/// A Node's `status.addresses` of type InternalIP, each checked to be an IP address (host
/// output: anything else is dropped).
fn internal_ips(item: &Value) -> Vec<String> {
    let mut ips: Vec<String> = item
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
        .filter_map(|a| a.get("address").and_then(Value::as_str))
        .filter_map(|a| a.parse::<std::net::IpAddr>().ok())
        .map(|ip| ip.to_string())
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

/// `kubectl get nodes -o json`, sorted by name, with each Node's Ready condition and its
/// `lastHeartbeatTime` / `lastTransitionTime` (`NodeReady::ready_since`).
pub fn parse_node_ready(out: &str) -> Result<Vec<NodeReady>, K0sError> {
    const WHAT: &str = "Node objects";
    let v = json(out, WHAT)?;
    by_name(
        items(&v, WHAT)?,
        WHAT,
        "a node has no name",
        |name, item| {
            let cond = item
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                });
            let time = |k: &str| {
                cond.and_then(|c| c.get(k))
                    .and_then(Value::as_str)
                    .and_then(parse_kube_time)
            };
            NodeReady {
                name,
                ready: cond.and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True"),
                last_heartbeat: time("lastHeartbeatTime"),
                last_transition: time("lastTransitionTime"),
            }
        },
    )
}

/// A Kubernetes `metav1.Time` (RFC 3339, `2026-12-03T12:00:00Z`) as seconds since the epoch.
fn parse_kube_time(s: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(s.trim()).ok()?;
    let secs = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok()
}

/// `date -u +%s` (`cmdline::start_at_host_time`): the host's clock, seconds since the epoch.
pub fn parse_host_time(out: &str) -> Result<i64, K0sError> {
    let t = out.trim();
    t.parse::<i64>()
        .ok()
        .filter(|s| *s > 0 && t.chars().all(|c| c.is_ascii_digit()))
        .ok_or_else(|| {
            K0sError::parse(
                "the host's clock (date -u +%s)",
                format!("unexpected output {:?}", crate::hash::short_n(t, 40)),
            )
        })
}

/// `cmdline::start_at_host_time`: the host's clock from the first stdout line, and k0s
/// start's own stdout after it.
pub fn parse_started_at(out: &str) -> Result<(i64, &str), K0sError> {
    let (first, rest) = out.split_once('\n').unwrap_or((out, ""));
    Ok((parse_host_time(first)?, rest))
}

/// The stat line `install_service` or `swap_in_binary` printed after moving a staged binary
/// into place (`cmdline::MOVED_STAT_PREFIX`): the first stdout line, when it is one. Nothing
/// moved, or anything else there, is `None`.
pub fn parse_moved_binary_stat(out: &str) -> Option<String> {
    let first = out.lines().next()?;
    let stat = first.strip_prefix(super::cmdline::MOVED_STAT_PREFIX)?;
    super::is_binary_stat(stat).then(|| stat.to_string())
}

/// What the probe reads from a controller's API in one `kubectl get` of several types
/// (`CLUSTER_OBJECTS`): kubectl prints one List whose items carry their own `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterObjects {
    pub etcd_members: Vec<EtcdMemberObject>,
    /// The kube-system namespace's uid (the cluster's identity); an error when it is missing.
    pub cluster_uid: Result<String, K0sError>,
    pub nodes: Vec<NodeView>,
    pub control_nodes: Vec<String>,
}

/// The resource types of the probe's one `kubectl get` (see `ClusterObjects`).
pub const CLUSTER_OBJECTS: &str =
    "etcdmembers.etcd.k0sproject.io,namespaces,nodes,controlnodes.autopilot.k0sproject.io";

/// `kubectl get <CLUSTER_OBJECTS> -o json`: the items sorted out by `kind`.
pub fn parse_cluster_objects(out: &str) -> Result<ClusterObjects, K0sError> {
    const WHAT: &str = "cluster objects";
    let v = json(out, WHAT)?;
    let all = items(&v, WHAT)?;
    let kind = |i: &Value| i.get("kind").and_then(Value::as_str).map(String::from);
    let of_kind = |k: &'static str| {
        all.iter()
            .filter(move |i| i.get("kind").and_then(Value::as_str) == Some(k))
    };
    if let Some(i) = all.iter().find(|i| kind(i).is_none()) {
        return Err(K0sError::parse(
            WHAT,
            format!(
                "an item has no kind: {:?}",
                crate::hash::short_n(&i.to_string(), 80)
            ),
        ));
    }
    let cluster_uid = all
        .iter()
        .find(|i| {
            kind(i).as_deref() == Some("Namespace") && name_of(i).as_deref() == Some("kube-system")
        })
        .ok_or_else(|| K0sError::parse("kube-system namespace", "not in the namespace list"))
        .and_then(|ns| parse_uid(&ns.to_string()));
    let mut control_nodes: Vec<String> = of_kind("ControlNode").filter_map(name_of).collect();
    control_nodes.sort();
    Ok(ClusterObjects {
        etcd_members: etcd_members_of(of_kind("EtcdMember"), "EtcdMember objects")?,
        cluster_uid,
        nodes: nodes_of(of_kind("Node"), "Node objects")?,
        control_nodes,
    })
}

/// The Node named by one line of `watch_nodes` (`node/NAME`), or `None` for anything else: a
/// line from the host is only ever a name to look up, never trusted further.
pub fn parse_watched_node(line: &str) -> Option<&str> {
    let name = line.trim_end_matches(['\r', '\n']).strip_prefix("node/")?;
    crate::k0s::facts::is_object_name(name).then_some(name)
}

/// Names of the objects of a `kubectl get … -o json` list, sorted; empty when unreadable.
pub fn parse_names(out: &str) -> Vec<String> {
    parse_names_checked(out).unwrap_or_default()
}

/// Names of the objects of a `kubectl get … -o json` list, sorted.
pub fn parse_names_checked(out: &str) -> Result<Vec<String>, K0sError> {
    const WHAT: &str = "object list";
    let v = json(out, WHAT)?;
    let mut names: Vec<String> = items(&v, WHAT)?.iter().filter_map(name_of).collect();
    names.sort();
    Ok(names)
}

/// The kube-system namespace's uid from `kubectl get namespace kube-system -o json` (or a bare
/// uid, as `-o jsonpath={.metadata.uid}` prints it).
pub fn parse_uid(out: &str) -> Result<String, K0sError> {
    const WHAT: &str = "kube-system namespace";
    let t = out.trim();
    let uid = if t.starts_with('{') {
        json(t, WHAT)?
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    } else {
        t.to_string()
    };
    let valid = !uid.is_empty() && uid.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if !valid {
        return Err(K0sError::parse(
            WHAT,
            format!("no uid in {:?}", crate::hash::short_n(t, 80)),
        ));
    }
    Ok(uid)
}

#[derive(Deserialize)]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
}

#[derive(Deserialize)]
struct NamedCluster {
    cluster: ClusterEntry,
}

#[derive(Deserialize)]
struct ClusterEntry {
    server: String,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    user: UserEntry,
}

#[derive(Deserialize)]
struct UserEntry {
    #[serde(default)]
    token: Option<String>,
}

/// A join token: base64(gzip(kubeconfig YAML)). Error messages never include the token.
pub fn parse_token(token: &str) -> Result<TokenInfo, K0sError> {
    const WHAT: &str = "join token";
    let compact: String = token.chars().filter(|c| !c.is_whitespace()).collect();
    let gz = base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|_| K0sError::parse(WHAT, "not base64"))?;
    let mut yaml = String::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_string(&mut yaml)
        .map_err(|_| K0sError::parse(WHAT, "not gzip-compressed text"))?;
    let kc: Kubeconfig =
        serde_saphyr::from_str(&yaml).map_err(|_| K0sError::parse(WHAT, "not a kubeconfig"))?;
    let user = kc
        .users
        .first()
        .ok_or_else(|| K0sError::parse(WHAT, "kubeconfig has no user"))?;
    let kind = match user.name.as_str() {
        "controller-bootstrap" => TokenRole::Controller,
        "kubelet-bootstrap" => TokenRole::Worker,
        other => {
            return Err(K0sError::parse(
                WHAT,
                format!("unknown token type {other:?}"),
            ));
        }
    };
    let id = user
        .user
        .token
        .as_deref()
        .and_then(|t| t.split_once('.'))
        .map(|(id, _)| id.to_string())
        .filter(|id| !id.is_empty())
        .ok_or_else(|| K0sError::parse(WHAT, "no bootstrap token in the kubeconfig"))?;
    let server_url = kc
        .clusters
        .first()
        .map(|c| c.cluster.server.clone())
        .ok_or_else(|| K0sError::parse(WHAT, "kubeconfig has no cluster"))?;
    Ok(TokenInfo {
        id,
        server_url,
        kind,
    })
}

/// k0s failures the tool reacts to, recognised from the `Error: …` line (and etcd's texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum K0sFailure {
    /// The k0s binary is missing (shell 127) or not executable (126).
    BinaryMissing,
    /// `k0s status`: nothing runs.
    NotRunning,
    /// `k0s start`: `Error: already running`.
    AlreadyRunning,
    /// `k0s stop`: `Error: already stopped`.
    AlreadyStopped,
    /// start/stop: `Error: k0s has not been installed as a service`.
    NotInstalled,
    /// install without --force: `Init already exists: …`.
    AlreadyInstalled,
    /// reset while k0s runs (all versions' wording).
    ResetWhileRunning,
    /// `k0s etcd leave`: `Error: peer not found: <url>`.
    PeerNotFound,
    /// `etcdserver: unhealthy cluster` (strict reconfiguration check).
    EtcdUnhealthy,
    /// `etcdserver: Peer URLs already exists` (stale member at the same URL).
    PeerUrlsExist,
    /// `etcdserver: re-configuration failed due to not enough started members`.
    NotEnoughStartedMembers,
    /// `etcdserver: too many learner members in cluster`.
    TooManyLearners,
    /// `context deadline exceeded` / `etcdserver: request timed out`: likely no quorum.
    EtcdTimeout,
    /// `must be run as root`.
    NotRoot,
}

/// Classify a failed k0s command; None for success or an unrecognised error.
pub fn classify(out: &CommandOutput) -> Option<K0sFailure> {
    use K0sFailure::*;
    match out.status {
        Some(0) => return None,
        Some(126) | Some(127) => return Some(BinaryMissing),
        _ => {}
    }
    if is_not_running(out) {
        return Some(NotRunning);
    }
    let err = out.stderr_str();
    let line = out.error_line();
    let has = |s: &str| line.contains(s) || err.contains(s);
    let table: &[(&str, K0sFailure)] = &[
        ("Error: already running", AlreadyRunning),
        ("Error: already stopped", AlreadyStopped),
        ("k0s has not been installed as a service", NotInstalled),
        ("Init already exists", AlreadyInstalled),
        ("please stop k0s before reset", ResetWhileRunning),
        ("Error: peer not found", PeerNotFound),
        ("Peer URLs already exists", PeerUrlsExist),
        ("unhealthy cluster", EtcdUnhealthy),
        ("not enough started members", NotEnoughStartedMembers),
        ("too many learner members", TooManyLearners),
        ("context deadline exceeded", EtcdTimeout),
        ("etcdserver: request timed out", EtcdTimeout),
        ("must be run as root", NotRoot),
    ];
    table.iter().find(|(s, _)| has(s)).map(|(_, f)| *f)
}

/// `k0s etcd leave` found no member with that peer URL (already gone).
pub fn peer_not_found(out: &CommandOutput) -> bool {
    classify(out) == Some(K0sFailure::PeerNotFound)
}

/// `k0s start` on a running service.
pub fn already_running(out: &CommandOutput) -> bool {
    classify(out) == Some(K0sFailure::AlreadyRunning)
}

/// `k0s stop` on a stopped service.
pub fn already_stopped(out: &CommandOutput) -> bool {
    classify(out) == Some(K0sFailure::AlreadyStopped)
}

/// `kubectl get --raw=/readyz` answered `ok`.
pub fn readyz_ok(out: &CommandOutput) -> bool {
    out.success() && out.stdout_str().trim() == "ok"
}

/// kubectl failed because the object does not exist (`Error from server (NotFound): …`): for
/// drain/delete there is nothing left to do.
pub fn kubectl_not_found(out: &CommandOutput) -> bool {
    let e = out.stderr_str();
    !out.success() && (e.contains("(NotFound)") || e.contains(" not found"))
}

/// `k0s reset` ran every clean-up step, and some failed (`Error: errors occurred during
/// clean-up: …`, exit 1; k0s `pkg/cleanup/cleanup.go` `Cleanup`): k0s is uninstalled, some
/// leftover stayed (a busy mount). A warning in k0sctl's reset phases, not a failure.
pub fn reset_cleanup_incomplete(out: &CommandOutput) -> bool {
    out.status == Some(1) && out.stderr_str().contains("errors occurred during clean-up")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watched_node_lines_name_a_node_or_nothing() {
        assert_eq!(parse_watched_node("node/w1"), Some("w1"));
        assert_eq!(
            parse_watched_node("node/w-1.example.com\r"),
            Some("w-1.example.com")
        );
        for bad in [
            "",
            "node/",
            "w1",
            "pod/w1",
            "nodes/w1",
            "node/W1",
            "node/w1 ",
            "node/w1/x",
            "node/-w1",
            "node/w\u{1b}[2Jx",
            "node/../etc",
        ] {
            assert_eq!(parse_watched_node(bad), None, "{bad:?}");
        }
    }

    fn failed(stderr: &str) -> CommandOutput {
        CommandOutput {
            status: Some(1),
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    /// reference/k0s-cli.md §2, k0sctl issue #471 (v1.26.2), with the abbreviated parts filled in.
    const STATUS_SAMPLE: &str = r#"{
   "Version": "v1.26.2+k0s.1",
   "Pid": 719,
   "PPid": 0,
   "Role": "controller",
   "SysInit": "",
   "StubFile": "",
   "Output": "",
   "Workloads": true,
   "SingleNode": false,
   "Args": [
      "/usr/local/bin/k0s",
      "controller",
      "--config=/etc/k0s/k0s.yaml",
      "--data-dir=/var/lib/k0s",
      "--enable-worker=true",
      "--kubelet-extra-args=--node-ip=192.168.0.236",
      "--no-taints=true"
   ],
   "WorkerToAPIConnectionStatus": {
      "Message": "",
      "Success": true
   },
   "ClusterConfig": {
      "metadata": { "name": "k0s", "creationTimestamp": null },
      "kind": "ClusterConfig",
      "apiVersion": "k0s.k0sproject.io/v1beta1",
      "spec": { "api": { "address": "192.168.0.236", "k0sApiPort": 9443, "port": 6443, "sans": ["192.168.0.236"] },
                "storage": { "etcd": { "externalCluster": null, "peerAddress": "192.168.0.236" }, "type": "etcd" } }
   },
   "K0sVars": { "InvocationID": "b554e12873e13f7f30ccbb4ebcd101c0", "DataDir": "/var/lib/k0s", "EtcdDataDir": "/var/lib/k0s/etcd" }
}
"#;

    #[test]
    fn status_sample_is_read() {
        let s = parse_status(STATUS_SAMPLE).unwrap();
        assert_eq!(s.version, "v1.26.2+k0s.1");
        assert_eq!(s.pid, 719);
        assert_eq!(s.role, "controller");
        assert!(s.workloads);
        assert!(!s.single_node);
        assert_eq!(s.args.len(), 7);
        assert_eq!(s.args[1], "controller");
        assert_eq!(
            s.args[2..],
            [
                "--config=/etc/k0s/k0s.yaml",
                "--data-dir=/var/lib/k0s",
                "--enable-worker=true",
                "--kubelet-extra-args=--node-ip=192.168.0.236",
                "--no-taints=true"
            ]
        );
        assert_eq!(s.peer_address.as_deref(), Some("192.168.0.236"));
    }

    #[test]
    fn worker_status_has_null_cluster_config() {
        let w = r#"{"Version":"v1.35.2+k0s.0","Pid":1125,"PPid":0,"Role":"worker","Workloads":true,
            "SingleNode":false,"Args":["/usr/local/bin/k0s","worker","--token-file=/etc/k0s/k0stoken"],
            "ClusterConfig":null}"#;
        let s = parse_status(w).unwrap();
        assert_eq!(s.role, "worker");
        assert_eq!(s.peer_address, None);
    }

    #[test]
    fn empty_status_means_not_running_and_legacy_roles_map() {
        assert_eq!(
            parse_status(r#"{"Version":"","Pid":0,"Role":""}"#),
            Err(K0sError::NotRunning)
        );
        let legacy =
            parse_status(r#"{"Version":"v1.21.0+k0s.0","Pid":5,"Role":"server+worker","Args":[]}"#)
                .unwrap();
        assert_eq!(legacy.role, "controller");
        assert!(legacy.workloads);
        assert!(matches!(
            parse_status("not json"),
            Err(K0sError::Parse { .. })
        ));
    }

    #[test]
    fn not_running_lines_of_all_versions() {
        let lines = [
            // >= v1.28
            r#"Error: status: can't get "status" via "/run/k0s/status.sock": Get "http://localhost/status": dial unix /run/k0s/status.sock: connect: no such file or directory"#,
            // stale socket
            r#"Error: status: can't get "status" via "/run/k0s/status.sock": Get "http://localhost/status": dial unix /run/k0s/status.sock: connect: connection refused"#,
            // v1.27
            "Error: status: can't do http request: /run/k0s/status.sock status",
            // <= v1.26
            r#"Error: Get "http://localhost/status": dial unix /run/k0s/status.sock: connect: no such file or directory"#,
        ];
        for l in lines {
            assert!(is_not_running(&failed(&format!("{l}\n"))), "{l}");
            assert_eq!(classify(&failed(l)), Some(K0sFailure::NotRunning));
        }
        assert!(!is_not_running(&failed("Error: unknown flag: --datadir\n")));
        assert!(!is_not_running(&CommandOutput {
            status: Some(0),
            ..Default::default()
        }));
    }

    #[test]
    fn member_list_line_and_legacy_stderr() {
        let m = parse_member_list(
            r#"{"members":{"controller0":"https://172.17.0.2:2380","controller1":"https://172.17.0.3:2380"}}
"#,
        )
        .unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m["controller0"], "https://172.17.0.2:2380");
        assert_eq!(m["controller1"], "https://172.17.0.3:2380");
        // unstarted member: name ""
        let u = parse_member_list(
            r#"{"members":{"":"https://10.0.0.3:2380","c0":"https://10.0.0.1:2380"}}"#,
        )
        .unwrap();
        assert_eq!(u[""], "https://10.0.0.3:2380");
        // v1.21/1.22: logrus JSON on stderr
        let legacy = r#"{"level":"info","members":{"c0":"https://10.0.0.1:2380"},"msg":"done","time":"2021-05-01T10:00:00Z"}"#;
        assert_eq!(
            parse_member_list(legacy).unwrap()["c0"],
            "https://10.0.0.1:2380"
        );
        assert!(parse_member_list("Error: can't list etcd cluster members: x").is_err());
        assert!(parse_member_list(r#"{"members":{"a":1}}"#).is_err());
    }

    #[test]
    fn leave_errors_are_classified() {
        let not_found = failed(
            "time=\"2024-05-01 10:00:00\" level=error msg=\"Failed to get peer name\" peerURL=\"https://10.0.0.9:2380\"\nError: peer not found: https://10.0.0.9:2380\n",
        );
        assert!(peer_not_found(&not_found));
        let unhealthy = failed(
            "time=\"2024-05-01 10:00:00\" level=error msg=\"Failed to delete node from cluster\" peerID=ddc94412dde9164d peerURL=\"https://10.0.0.2:2380\"\nError: etcdserver: unhealthy cluster\n",
        );
        assert_eq!(classify(&unhealthy), Some(K0sFailure::EtcdUnhealthy));
        assert!(!peer_not_found(&unhealthy));
        assert_eq!(
            classify(&failed("Error: context deadline exceeded\n")),
            Some(K0sFailure::EtcdTimeout)
        );
        assert_eq!(
            classify(&failed(
                "Error: invalid argument \"https://1.2.3.4:2380\" for \"--peer-address\" flag: neither an IP address nor a DNS name\n"
            )),
            None
        );
    }

    #[test]
    fn service_errors_are_classified() {
        assert!(already_running(&failed("Error: already running\n")));
        assert!(already_stopped(&failed("Error: already stopped\n")));
        assert_eq!(
            classify(&failed("Error: k0s has not been installed as a service\n")),
            Some(K0sFailure::NotInstalled)
        );
        assert_eq!(
            classify(&failed(
                "Error: failed to install controller service: Init already exists: /etc/systemd/system/k0scontroller.service\n"
            )),
            Some(K0sFailure::AlreadyInstalled)
        );
        for l in [
            "Error: another k0s process is still running, please stop k0s before reset",
            "Error: k0s seems to be running, please stop k0s before reset",
            "Error: k0s seems to be running! please stop k0s before reset.",
            "time=\"2024-05-01 10:00:00\" level=fatal msg=\"k0s seems to be running! please stop k0s before reset.\"",
        ] {
            assert_eq!(
                classify(&failed(l)),
                Some(K0sFailure::ResetWhileRunning),
                "{l}"
            );
        }
        assert_eq!(
            classify(&CommandOutput {
                status: Some(127),
                ..Default::default()
            }),
            Some(K0sFailure::BinaryMissing)
        );
        assert_eq!(
            classify(&failed("Error: etcdserver: Peer URLs already exists\n")),
            Some(K0sFailure::PeerUrlsExist)
        );
    }

    #[test]
    fn kubectl_outcomes() {
        let ok = CommandOutput {
            status: Some(0),
            stdout: b"ok".to_vec(),
            stderr: Vec::new(),
        };
        assert!(readyz_ok(&ok));
        assert!(!readyz_ok(&failed(
            "The connection to the server localhost:6443 was refused"
        )));
        assert!(kubectl_not_found(&failed(
            "Error from server (NotFound): nodes \"w3\" not found\n"
        )));
        assert!(!kubectl_not_found(&failed(
            "The connection to the server localhost:6443 was refused - did you specify the right host or port?"
        )));
    }

    fn token_of(yaml: &str) -> String {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(yaml.as_bytes()).unwrap();
        base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap())
    }

    /// reference/k0s-cli.md §3.4, as client-go writes it.
    const TOKEN_KUBECONFIG: &str = "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    server: https://10.0.0.1:9443
  name: k0s
contexts:
- context:
    cluster: k0s
    user: controller-bootstrap
  name: k0s
current-context: k0s
kind: Config
preferences: {}
users:
- name: controller-bootstrap
  user:
    token: abcdef.0123456789abcdef
";

    #[test]
    fn token_format() {
        let t = parse_token(&format!("{}\n", token_of(TOKEN_KUBECONFIG))).unwrap();
        assert_eq!(t.id, "abcdef");
        assert_eq!(t.server_url, "https://10.0.0.1:9443");
        assert_eq!(t.kind, TokenRole::Controller);
        let worker = TOKEN_KUBECONFIG
            .replace("controller-bootstrap", "kubelet-bootstrap")
            .replace(":9443", ":6443")
            .replace("abcdef.", "zyx123.");
        let w = parse_token(&token_of(&worker)).unwrap();
        assert_eq!((w.kind, w.id.as_str()), (TokenRole::Worker, "zyx123"));
        let err = parse_token("abcdef.0123456789abcdef")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("0123456789abcdef"), "secret leaked: {err}");
        assert!(parse_token(&token_of("kind: Config\nusers: []\n")).is_err());
    }

    #[test]
    fn etcdmember_objects() {
        let out = r#"{"apiVersion":"v1","kind":"List","items":[
          {"apiVersion":"etcd.k0sproject.io/v1beta1","kind":"EtcdMember",
           "metadata":{"name":"controller2","labels":{"k0s.k0sproject.io/controller-lease":"k0s-ctrl-controller2"}},
           "spec":{"leave":true},
           "status":{"peerAddress":"172.17.0.4","memberID":"9c90504b1bc867bb","reconcileStatus":"Success",
                     "message":"Member removed from cluster",
                     "conditions":[{"type":"Joined","status":"False","lastTransitionTime":"2024-05-01T10:00:00Z"}]}},
          {"apiVersion":"etcd.k0sproject.io/v1beta1","kind":"EtcdMember",
           "metadata":{"name":"controller0"},
           "spec":{"leave":false},
           "status":{"peerAddress":"172.17.0.2","memberID":"8e9e05c52164694d",
                     "conditions":[{"type":"Joined","status":"True"}]}},
          {"apiVersion":"etcd.k0sproject.io/v1beta1","kind":"EtcdMember","metadata":{"name":"controller1"},"spec":{}}
        ]}"#;
        let m = parse_etcd_members(out).unwrap();
        assert_eq!(
            m,
            vec![
                EtcdMemberObject {
                    name: "controller0".into(),
                    member_id: Some("8e9e05c52164694d".into()),
                    peer_address: Some("172.17.0.2".into()),
                    joined: Some(true),
                    leave: false,
                    invocation: None,
                },
                EtcdMemberObject {
                    name: "controller1".into(),
                    member_id: None,
                    peer_address: None,
                    joined: None,
                    leave: false,
                    invocation: None,
                },
                EtcdMemberObject {
                    name: "controller2".into(),
                    member_id: Some("9c90504b1bc867bb".into()),
                    peer_address: Some("172.17.0.4".into()),
                    joined: Some(false),
                    leave: true,
                    invocation: None,
                },
            ]
        );
        assert!(parse_etcd_members("error: the server doesn't have a resource type").is_err());
    }

    #[test]
    fn nodes_names_and_uid() {
        let nodes = r#"{"kind":"List","items":[
            {"metadata":{"name":"w2"},"status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"False"}]}},
            {"metadata":{"name":"w1"},"status":{"conditions":[{"type":"Ready","status":"True"}],
             "addresses":[{"type":"InternalIP","address":"10.0.0.7"},{"type":"Hostname","address":"w1"},
                          {"type":"InternalIP","address":"--all"},{"type":"InternalIP","address":"fd00::07"}]}}]}"#;
        assert_eq!(
            parse_nodes(nodes).unwrap(),
            vec![
                NodeView {
                    name: "w1".into(),
                    ready: true,
                    internal_ips: vec!["10.0.0.7".into(), "fd00::7".into()],
                },
                NodeView {
                    name: "w2".into(),
                    ready: false,
                    ..Default::default()
                }
            ]
        );
        assert_eq!(
            parse_names(r#"{"items":[{"metadata":{"name":"c2"}},{"metadata":{"name":"c0"}}]}"#),
            ["c0", "c2"]
        );
        assert!(parse_names("garbage").is_empty());
        assert!(parse_names_checked("garbage").is_err());
        let ns = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system","uid":"7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"}}"#;
        assert_eq!(
            parse_uid(ns).unwrap(),
            "7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"
        );
        assert_eq!(
            parse_uid("7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f\n").unwrap(),
            "7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"
        );
        assert!(parse_uid("").is_err());
        assert!(parse_uid("Error from server (NotFound)").is_err());
    }

    #[test]
    fn node_ready_times_and_restart_rule() {
        let nodes = r#"{"kind":"List","items":[
            {"metadata":{"name":"w2"},"status":{"conditions":[{"type":"Ready","status":"Unknown","lastHeartbeatTime":"2026-12-03T12:00:00Z","lastTransitionTime":"2026-12-03T12:00:40Z"}]}},
            {"metadata":{"name":"w1"},"status":{"conditions":[{"type":"MemoryPressure","status":"False","lastHeartbeatTime":"2026-12-03T13:00:00Z"},{"type":"Ready","status":"True","lastHeartbeatTime":"2026-12-03T12:00:10Z","lastTransitionTime":"2026-12-01T08:00:00Z"}]}},
            {"metadata":{"name":"w3"},"status":{}}]}"#;
        let n = parse_node_ready(nodes).unwrap();
        assert_eq!(
            n.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["w1", "w2", "w3"]
        );
        // 2026-12-03T12:00:10Z
        let beat = 1_796_299_210;
        assert_eq!(n[0].last_heartbeat, Some(beat));
        assert!(n[0].ready);
        assert!(!n[1].ready && !n[2].ready);
        assert_eq!(n[2].last_heartbeat, None);
        // Ready with a heartbeat posted after the restart: back. From the restart's own second
        // or before (a cached Ready of the old kubelet): not yet.
        assert!(n[0].ready_since(beat - 1));
        assert!(!n[0].ready_since(beat));
        assert!(!n[0].ready_since(beat + 5));
        // Not Ready: never back, whatever its times.
        assert!(!n[1].ready_since(0));
        assert!(parse_node_ready("error: You must be logged in").is_err());
        assert!(parse_node_ready(r#"{"items":[{"metadata":{}}]}"#).is_err());
    }

    #[test]
    fn invocation_ids_from_status_and_etcd_member_labels() {
        let st = parse_status(
            r#"{"Version":"v1.33.4+k0s.0","Pid":7,"Role":"controller","K0sVars":{"InvocationID":"0A1b2c3d4e5f60718293a4b5c6d7e8f9"}}"#,
        )
        .unwrap();
        assert_eq!(
            st.invocation_id.as_deref(),
            Some("0a1b2c3d4e5f60718293a4b5c6d7e8f9")
        );
        let hostile = parse_status(
            r#"{"Version":"v1.33.4+k0s.0","Pid":7,"Role":"controller","K0sVars":{"InvocationID":"ab; rm -rf /"}}"#,
        )
        .unwrap();
        assert_eq!(hostile.invocation_id, None);
        let m = parse_etcd_members(
            r#"{"items":[{"metadata":{"name":"c1","labels":{"k0s.k0sproject.io/shutdown-on-leave":"ff00"}},"status":{"memberID":"1"}},
                         {"metadata":{"name":"c2","labels":{"k0s.k0sproject.io/shutdown-on-leave":"\u001b[31m"}},"status":{"memberID":"2"}},
                         {"metadata":{"name":"c3"},"status":{"memberID":"3"}}]}"#,
        )
        .unwrap();
        let inv: Vec<_> = m.iter().map(|o| o.invocation.as_deref()).collect();
        assert_eq!(inv, vec![Some("ff00"), None, None]);
    }

    #[test]
    fn host_time() {
        assert_eq!(parse_host_time("1796299210\n").unwrap(), 1_796_299_210);
        assert!(parse_host_time("").is_err());
        assert!(parse_host_time("-5").is_err());
        assert!(parse_host_time("Thu Dec  3 12:00:10 UTC 2026").is_err());
        assert_eq!(
            parse_started_at("1796299210\n").unwrap(),
            (1_796_299_210, "")
        );
        assert_eq!(
            parse_started_at("1796299210\nsome k0s output\n").unwrap(),
            (1_796_299_210, "some k0s output\n")
        );
        assert!(parse_started_at("").is_err());
        assert!(parse_started_at("\n1796299210\n").is_err());
        assert!(parse_started_at("12x\n").is_err());
    }

    #[test]
    fn moved_binary_stat_is_the_first_line_and_a_stat_line() {
        let line = "2417 2049 77 2026-12-04 10:00:00.123456789 +0000 2026-12-04 10:00:01.5 +0000";
        let out = format!("k0sform-binary-stat {line}\nthe install's output\n");
        assert_eq!(parse_moved_binary_stat(&out).as_deref(), Some(line));
        // Nothing moved, or the line not first: nothing is known.
        assert_eq!(parse_moved_binary_stat(""), None);
        assert_eq!(parse_moved_binary_stat("installed\n"), None);
        assert_eq!(
            parse_moved_binary_stat(&format!("x\nk0sform-binary-stat {line}\n")),
            None
        );
        // `stat` failed (empty), or the host printed something else than a stat line.
        assert_eq!(parse_moved_binary_stat("k0sform-binary-stat \n"), None);
        assert_eq!(
            parse_moved_binary_stat("k0sform-binary-stat 1 2 3 \u{1b}[2J\n"),
            None
        );
        assert_eq!(
            parse_moved_binary_stat(&format!("k0sform-binary-stat {}\n", "9".repeat(201))),
            None
        );
    }

    #[test]
    fn version_plain_and_json() {
        assert_eq!(parse_version("v1.30.1+k0s.0\n").unwrap(), "v1.30.1+k0s.0");
        assert_eq!(
            parse_version("v1.37.0-alpha.1+k0s.0-258-gdff90cee9a\n").unwrap(),
            "v1.37.0-alpha.1+k0s.0-258-gdff90cee9a"
        );
        let j = "{\n   \"k0s\": \"v1.33.4+k0s.0\",\n   \"runc\": \"v1.2.6\",\n   \"containerd\": \"v1.7.27\",\n   \"kubernetes\": \"v1.33.4\",\n   \"kine\": \"v0.13.14\",\n   \"etcd\": \"v3.5.21\",\n   \"konnectivity\": \"v0.31.4\"\n}\n";
        assert_eq!(parse_version(j).unwrap(), "v1.33.4+k0s.0");
        assert!(parse_version("").is_err());
        assert!(parse_version("k0s : v1.30.1+k0s.0").is_err());
        assert!(parse_version("sh: k0s: not found").is_err());
    }
}
