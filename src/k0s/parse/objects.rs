//! Kubernetes objects read with `k0s kubectl … -o json`: EtcdMember objects, Nodes and their
//! readiness, the probe's one list of cluster objects, names and the kube-system uid.

use super::super::{EtcdMemberObject, K0sError, NodeReady};
use crate::reality::NodeView;
use serde_json::Value;

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
                .and_then(crate::k0s::invocation_id),
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
    crate::spec::is_object_name(name).then_some(name)
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

/// The `spec` of a ClusterConfig object as `kubectl get -o json` printed it; None when the
/// answer is not a `k0s.k0sproject.io/v1beta1` ClusterConfig with a mapping as its spec.
pub fn live_spec(json: &str) -> Option<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(json).ok()?;
    let is = |k: &str, want: &str| doc.get(k).and_then(|v| v.as_str()) == Some(want);
    if !is("apiVersion", crate::spec::K0S_API_VERSION) || !is("kind", "ClusterConfig") {
        return None;
    }
    doc.get("spec").filter(|s| s.is_object()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn live_spec_takes_only_a_cluster_config() {
        let ok = r#"{"apiVersion": "k0s.k0sproject.io/v1beta1", "kind": "ClusterConfig", "spec": {"a": 1}}"#;
        assert_eq!(live_spec(ok), Some(json!({"a": 1})));
        assert_eq!(
            live_spec(r#"{"apiVersion": "v1", "kind": "ConfigMap", "spec": {}}"#),
            None
        );
        assert_eq!(live_spec("not json"), None);
    }

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
}
