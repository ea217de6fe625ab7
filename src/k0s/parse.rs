//! Parsers of k0s output and classifiers of k0s error lines (testdata/reference/k0s-cli.md §1–5).

use super::K0sError;
use crate::reality::K0sStatus;
use crate::transport::CommandOutput;
use crate::version::K0sVersion;
use serde_json::Value;
use std::collections::BTreeMap;

mod objects;
mod token;

pub use objects::*;
pub use token::*;

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
    crate::state::is_binary_stat(stat).then(|| stat.to_string())
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

    fn failed(stderr: &str) -> CommandOutput {
        CommandOutput {
            status: Some(1),
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    /// testdata/reference/k0s-cli.md §2, k0sctl issue #471 (v1.26.2), with the abbreviated parts filled in.
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
