//! The double's workers, tokens, Node objects and service: heartbeats, object names by version,
//! restarts, token files, stale Ready.

use super::*;

#[test]
fn double_workers_tokens_and_heartbeats() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker"), ("w2", "worker")]);
    bootstrap(&lab, "c1");
    start_joining(&lab, "c1", "w1", "worker");
    let ready = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes")
            .contains("w1     Ready")
    });
    assert!(ready, "{}", lab.ssh_ok("c1", "k0s kubectl get nodes"));
    let st: serde_json::Value =
        serde_json::from_str(&lab.ssh_ok("w1", "k0s status -o json")).unwrap();
    assert_eq!(st["Role"], "worker");
    assert_eq!(st["ClusterConfig"], serde_json::Value::Null);
    assert_eq!(st["Args"][2], "--token-file=/etc/k0s/k0stoken");
    let node: serde_json::Value =
        serde_json::from_str(&lab.ssh_ok("c1", "k0s kubectl get node w1 -o json")).unwrap();
    assert_eq!(
        node["status"]["nodeInfo"]["machineID"],
        lab.host("w1").machine_id.as_str()
    );

    // An invalidated token is rejected on join.
    lab.install_double("w2");
    let token = lab.ssh_ok("c1", "k0s token create --role worker");
    let id = decode_token(token.trim()).rsplit("token: ").next().unwrap()[..6].to_string();
    lab.ssh_ok("c1", &format!("k0s token invalidate {id}"));
    lab.ssh_ok("w2", &format!("mkdir -p /etc/k0s && echo {} > /etc/k0s/k0stoken && k0s install worker --token-file /etc/k0s/k0stoken && k0s start", token.trim()));
    assert!(wait_exited(&lab, "w2", Duration::from_secs(30)));
    assert!(!lab.ssh_ok("c1", "k0s kubectl get nodes").contains("w2"));

    // So is an expired one.
    let expired = lab.ssh_ok("c1", "k0s token create --role worker --expiry 1s");
    std::thread::sleep(Duration::from_secs(2));
    lab.ssh_ok(
        "w2",
        &format!("echo {} > /etc/k0s/k0stoken && k0s start", expired.trim()),
    );
    assert!(wait_exited(&lab, "w2", Duration::from_secs(30)));
    assert!(!lab.ssh_ok("c1", "k0s kubectl get nodes").contains("w2"));
    let wlog = stdout(&lab.exec("w2", "cat /var/lib/k0s/logs/k0sworker.log"));
    assert!(
        wlog.contains("Error: failed to bootstrap kubelet client configuration"),
        "{wlog}"
    );

    // Heartbeats stop with the worker: NotReady after ~10 s.
    lab.ssh_ok("w1", "k0s stop");
    let not_ready = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes")
            .contains("w1     NotReady")
    });
    assert!(not_ready);
    let node: serde_json::Value =
        serde_json::from_str(&lab.ssh_ok("c1", "k0s kubectl get node w1 -o json")).unwrap();
    assert_eq!(node["status"]["conditions"][0]["status"], "Unknown");
    lab.ssh_ok("w1", "k0s start");
    let back = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes")
            .contains("w1     Ready")
    });
    assert!(back);
}

/// Names of the objects of `kind` as `via` lists them.
fn object_names(lab: &Lab, via: &str, kind: &str) -> Result<BTreeSet<String>, String> {
    let o = lab.ssh(via, &format!("k0s kubectl get {kind} -o json"));
    if !o.status.success() {
        return Err(stderr(&o));
    }
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("list JSON");
    Ok(v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect())
}

/// The pid k0s reports, or None while `k0s status` fails.
fn k0s_pid(lab: &Lab, host: &str) -> Option<u64> {
    let o = lab.ssh(host, "k0s status -o json");
    if !o.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).ok()?;
    v["Pid"].as_u64()
}

/// etcd keeps the hostname's case; EtcdMember objects do not exist before v1.30, carry the raw
/// hostname (refused by the API with capitals) up to v1.34.0 and the lower-cased one from
/// v1.34.1; ControlNode and Node are lower-cased, Node after --hostname-override.
#[test]
fn double_object_names_follow_k0s_by_version() {
    require_lab!();
    let lab = Lab::create(&[("Ctl-A", "controller"), ("w1", "worker")]);
    bootstrap(&lab, "Ctl-A");
    assert_eq!(member_names(&lab, "Ctl-A"), set(&["Ctl-A"]));
    let registered = lab.wait_until(Duration::from_secs(20), || {
        object_names(&lab, "Ctl-A", "controlnodes").is_ok_and(|n| n == set(&["ctl-a"]))
    });
    assert!(
        registered,
        "no ControlNode ctl-a; log:\n{}",
        log(&lab, "Ctl-A")
    );
    assert_eq!(
        object_names(&lab, "Ctl-A", "etcdmembers").unwrap(),
        BTreeSet::new(),
        "v1.33.4: an EtcdMember named \"Ctl-A\" is not a valid object"
    );
    assert!(log(&lab, "Ctl-A").contains("failed to create EtcdMember object"));

    // v1.34.1: lower-cased.
    let v1341 = lab.k0s_double_with_version("v1.34.1+k0s.0");
    lab.ssh_ok("Ctl-A", "k0s stop");
    lab.install_binary("Ctl-A", &v1341);
    lab.ssh_ok("Ctl-A", "k0s start");
    wait_ready(&lab, "Ctl-A");
    let named = lab.wait_until(Duration::from_secs(20), || {
        object_names(&lab, "Ctl-A", "etcdmembers").is_ok_and(|n| n == set(&["ctl-a"]))
    });
    assert!(named, "no EtcdMember ctl-a; log:\n{}", log(&lab, "Ctl-A"));
    assert_eq!(member_names(&lab, "Ctl-A"), set(&["Ctl-A"]));

    // A worker's Node is named after --hostname-override, lower-cased.
    lab.install_binary("w1", &v1341);
    let token = lab.ssh_ok("Ctl-A", "k0s token create --role worker");
    lab.ssh_ok("w1", &format!("mkdir -p /etc/k0s && echo {} > /etc/k0s/k0stoken && k0s install worker --token-file /etc/k0s/k0stoken --kubelet-extra-args=--hostname-override=W-One && k0s start", token.trim()));
    let node = lab.wait_until(Duration::from_secs(20), || {
        object_names(&lab, "Ctl-A", "nodes").is_ok_and(|n| n.contains("w-one"))
    });
    assert!(node, "{:?}", object_names(&lab, "Ctl-A", "nodes"));

    // Before v1.30 there is no EtcdMember type at all.
    let v129 = lab.k0s_double_with_version("v1.29.9+k0s.0");
    lab.ssh_ok("Ctl-A", "k0s stop");
    lab.install_binary("Ctl-A", &v129);
    lab.ssh_ok("Ctl-A", "k0s start");
    wait_ready(&lab, "Ctl-A");
    let err = object_names(&lab, "Ctl-A", "etcdmembers").unwrap_err();
    assert!(
        err.contains("the server doesn't have a resource type \"etcdmembers\""),
        "{err}"
    );
}

/// Restart=always, RestartSec=10: a k0s killed from outside comes back after about 10 s with
/// whatever binary is at the install path; `k0s stop` keeps it down.
#[test]
fn double_service_restarts_by_itself_unless_stopped() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller")]);
    bootstrap(&lab, "c1");
    let pid = k0s_pid(&lab, "c1").expect("running");
    let newer = lab.k0s_double_with_version("v1.33.5+k0s.0");
    lab.install_binary("c1", &newer);
    lab.exec_ok(
        "c1",
        "kill -9 $(cat /run/k0s-service/k0scontroller.service.pid)",
    );
    let killed = Instant::now();
    assert!(lab.wait_until(Duration::from_secs(5), || k0s_pid(&lab, "c1").is_none()));
    let back = lab.wait_until(Duration::from_secs(30), || {
        k0s_pid(&lab, "c1").is_some_and(|p| p != pid)
    });
    assert!(back, "k0s did not come back; log:\n{}", log(&lab, "c1"));
    assert!(
        killed.elapsed() >= Duration::from_secs(9),
        "restarted after {:?}, not RestartSec=10",
        killed.elapsed()
    );
    assert!(
        lab.ssh_ok("c1", "k0s status")
            .contains("Version: v1.33.5+k0s.0"),
        "the restart runs the binary at the install path"
    );
    wait_ready(&lab, "c1");

    lab.ssh_ok("c1", "k0s stop");
    std::thread::sleep(Duration::from_secs(13));
    assert_eq!(k0s_pid(&lab, "c1"), None, "a stopped service came back");
}

/// v1.35.1+k0s.0 workers read and decode the token file at every start: an empty one or
/// k0sctl's comment makes a joined worker exit (+k0s.1 and earlier releases start); a
/// placeholder token (k0sctl's workaround, k0sform's too) keeps it starting.
#[test]
fn double_v1_35_1_worker_needs_a_token_in_its_file() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&lab, "c1");
    let v1351 = lab.k0s_double_with_version("v1.35.1+k0s.0");
    start_joining(&lab, "c1", "w1", "worker");
    let ready = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes")
            .contains("w1     Ready")
    });
    assert!(ready);
    lab.ssh_ok("w1", "k0s stop && : > /etc/k0s/k0stoken");
    lab.install_binary("w1", &v1351);
    let o = lab.ssh("w1", "k0s start; sleep 1; k0s status");
    assert!(
        !o.status.success(),
        "a v1.35.1 worker ran with an empty token file"
    );
    let wlog = stdout(&lab.exec("w1", "cat /var/lib/k0s/logs/k0sworker.log"));
    assert!(
        wlog.contains("Error: token file \"/etc/k0s/k0stoken\" is empty: obtain a new token via \"k0s token create ...\""),
        "{wlog}"
    );
    // What k0sctl leaves in the file after a join (k0sctl phase/install_workers.go): Go's
    // base64 refuses the `#` (k0s #7202).
    lab.ssh_ok(
        "w1",
        "k0s stop 2>/dev/null; echo '# overwritten by k0sctl after join' > /etc/k0s/k0stoken",
    );
    let o = lab.ssh("w1", "k0s start; sleep 1; k0s status");
    assert!(
        !o.status.success(),
        "a v1.35.1+k0s.0 worker ran with k0sctl's comment"
    );
    let wlog = stdout(&lab.exec("w1", "cat /var/lib/k0s/logs/k0sworker.log"));
    assert!(
        wlog.contains("Error: failed to decode join token: illegal base64 data at input byte 0"),
        "{wlog}"
    );
    // v1.35.1+k0s.1 parses the token only when it needs one (k0s 81049b30b8), and v1.33.4
    // never did: a joined worker starts with the comment.
    for v in ["v1.35.1+k0s.1", "v1.33.4+k0s.0"] {
        lab.install_binary("w1", &lab.k0s_double_with_version(v));
        lab.ssh_ok("w1", "k0s stop 2>/dev/null; k0s start");
        assert!(
            lab.wait_until(Duration::from_secs(5), || k0s_pid(&lab, "w1").is_some()),
            "{v} refused k0sctl's comment"
        );
    }
    lab.ssh_ok("w1", "k0s stop");

    lab.install_binary("w1", &v1351);
    let placeholder = k0sform::k0s::placeholder_token(k0sform::k0s::TokenRole::Worker);
    lab.ssh_ok(
        "w1",
        &format!("echo {placeholder} > /etc/k0s/k0stoken && k0s start"),
    );
    assert!(
        lab.wait_until(Duration::from_secs(5), || k0s_pid(&lab, "w1").is_some()),
        "log:\n{}",
        stdout(&lab.exec("w1", "cat /var/lib/k0s/logs/k0sworker.log"))
    );
}

/// Knobs `node_grace` and `kubelet_latency`: a stopped kubelet's Node keeps showing Ready with
/// its old heartbeat for the grace time; a restarted worker posts again only after the latency,
/// and the Ready condition keeps its lastTransitionTime (it never showed otherwise).
#[test]
fn double_stale_ready_until_the_restarted_kubelet_posts() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&lab, "c1");
    start_joining(&lab, "c1", "w1", "worker");
    let ready_of = || -> serde_json::Value {
        let node: serde_json::Value =
            serde_json::from_str(&lab.ssh_ok("c1", "k0s kubectl get node w1 -o json")).unwrap();
        node["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .cloned()
            .unwrap()
    };
    assert!(lab.wait_until(Duration::from_secs(20), || ready_of()["status"] == "True"));
    for h in ["c1", "w1"] {
        lab.exec_ok(
            h,
            "printf 'node_grace 30\\nkubelet_latency 4\\n' > /etc/k0s-lab/k0s-knobs",
        );
    }
    lab.ssh_ok("w1", "k0s stop");
    let before = ready_of();
    std::thread::sleep(Duration::from_secs(3));
    // Past the 2 s heartbeat: still Ready, the heartbeat of the stopped kubelet.
    let stale = ready_of();
    assert_eq!(stale["status"], "True", "{stale}");
    assert_eq!(stale["lastHeartbeatTime"], before["lastHeartbeatTime"]);
    lab.ssh_ok("w1", "k0s start");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        ready_of()["lastHeartbeatTime"],
        before["lastHeartbeatTime"],
        "posted before kubelet_latency"
    );
    assert!(
        lab.wait_until(Duration::from_secs(10), || ready_of()["lastHeartbeatTime"]
            != before["lastHeartbeatTime"]),
        "the restarted kubelet never posted"
    );
    let fresh = ready_of();
    assert_eq!(fresh["status"], "True");
    assert_eq!(
        fresh["lastTransitionTime"], before["lastTransitionTime"],
        "{fresh}"
    );
}
