//! Bootstrapping clusters and joining hosts: 3+2 and single hosts (kine or etcd), joins that wait
//! on the Node, learners, one session per host, concurrent applies and refused requests.

use super::*;

/// Scenario 1 and 2: bootstrap from nothing, then idempotence.
#[test]
fn bootstrap_three_controllers_two_workers_then_nothing_to_do() {
    require_lab!();
    let c = Cluster::new(THREE_PLUS_TWO);
    // `plan` on fresh hosts shows a new cluster and changes nothing.
    let before: Vec<String> = ["c1", "w1"].iter().map(|n| c.host_snapshot(n)).collect();
    c.run(&["plan", "-detailed-exitcode"])
        .expect(2)
        .contains("bootstraps a new cluster")
        .contains("Plan: 5 to add");
    let after: Vec<String> = ["c1", "w1"].iter().map(|n| c.host_snapshot(n)).collect();
    assert_eq!(before, after, "plan changed a host");
    assert!(!c.state.exists(), "plan wrote a state file");

    bootstrap(&c);
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    let nodes = c.nodes("c2");
    assert_eq!(nodes.get("w1"), Some(&true), "w1 Ready: {nodes:?}");
    assert_eq!(nodes.get("w2"), Some(&true), "w2 Ready: {nodes:?}");

    let state = c.state_json();
    assert_eq!(state["cluster"]["uid"], uid.as_str());
    for h in c.lab.hosts() {
        let rec = c.state_host(&h.name).expect("host recorded");
        assert_eq!(rec["machine_id"], h.machine_id.as_str(), "{}", h.name);
        assert_eq!(
            rec["host_key"],
            h.host_key_fingerprint.as_str(),
            "{}",
            h.name
        );
        if h.role == "controller" {
            let id = rec["etcd"]["member_id"].as_str().expect("member id");
            assert!(
                u64::from_str_radix(id, 16).is_ok_and(|v| v != 0),
                "hex member id for {}: {id}",
                h.name
            );
        }
    }

    // Idempotence: no changes, and apply touches nothing.
    let serial = c.state_serial();
    let snaps: Vec<String> = ["c1", "c2", "c3", "w1", "w2"]
        .iter()
        .map(|n| c.host_snapshot(n))
        .collect();
    c.run(&["plan", "-detailed-exitcode"])
        .expect(0)
        .contains("No changes");
    c.apply().contains("No changes");
    let again: Vec<String> = ["c1", "c2", "c3", "w1", "w2"]
        .iter()
        .map(|n| c.host_snapshot(n))
        .collect();
    assert_eq!(snaps, again, "a no-op apply changed a host");
    assert_eq!(c.state_serial(), serial, "a no-op apply rewrote the state");
}

/// Scenario 7 and the plan refusals: unsafe requests are refused with nothing changed.
#[test]
fn unsafe_requests_are_refused_and_change_nothing() {
    require_lab!();
    let c = three_controllers();
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);

    // An unreachable host is named, exit 1.
    c.lab.power_off("c3");
    plan_changes_nothing(&c, &[])
        .expect(1)
        .contains(&c.lab.address("c3"));
    // Removing a healthy controller while another is down breaks quorum: refused.
    c.write_spec(&["c1", "c3"]);
    let serial = c.state_serial();
    let snaps: Vec<String> = ["c1", "c2"].iter().map(|n| c.host_snapshot(n)).collect();
    c.run(&["apply", "-auto-approve", "-exclude", &c.lab.address("c3")])
        .expect(3)
        .contains("quorum");
    assert_eq!(
        snaps,
        ["c1", "c2"]
            .iter()
            .map(|n| c.host_snapshot(n))
            .collect::<Vec<_>>()
    );
    assert_eq!(c.state_serial(), serial);
    c.lab.power_on("c3");
    c.write_spec(&["c1", "c2", "c3"]);
    c.eventually(60, "c3 back", || {
        c.run(&["plan", "-detailed-exitcode"]).code == 0
    });

    // Split brain made by hand, k0sctl's failure mode: c1 reset and started again without a
    // token bootstraps a second cluster at the same address.
    c.lab.ssh_ok(
        "c1",
        "k0s stop && k0s reset && k0s install controller --config=/etc/k0s/k0s.yaml && k0s start",
    );
    c.eventually(60, "c1 to run its own cluster", || {
        c.lab
            .ssh("c1", "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl --data-dir=/var/lib/k0s get --raw=/readyz")
            .status
            .success()
            && c.try_uid("c1").is_ok_and(|u| u != uid)
    });
    let snaps: Vec<String> = ["c1", "c2", "c3"]
        .iter()
        .map(|n| c.host_snapshot(n))
        .collect();
    let serial = c.state_serial();
    let r = plan_changes_nothing(&c, &[]);
    r.expect(3)
        .contains(&c.lab.address("c1"))
        .contains(&c.lab.address("c2"));
    c.run(&["apply", "-auto-approve"]).expect(3);
    assert_eq!(
        snaps,
        ["c1", "c2", "c3"]
            .iter()
            .map(|n| c.host_snapshot(n))
            .collect::<Vec<_>>()
    );
    assert_eq!(c.state_serial(), serial);
    // Naming the impostor with -replace turns it into a replacement: one cluster again.
    c.run(&["apply", "-auto-approve", "-replace", &c.lab.address("c1")])
        .expect(0);
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
}

/// Scenario 9: two applies at once: one runs, the other exits 4 naming the holder.
#[test]
fn concurrent_applies_one_waits_out() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    let mut first = c
        .command(&["apply", "-auto-approve"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn apply");
    let lock = c.state.with_file_name("k0sform.state.json.lock");
    c.eventually(20, "the first apply to take the lock", || {
        std::fs::read_to_string(&lock).is_ok_and(|s| s.contains("apply"))
    });
    let second = c.run(&["apply", "-auto-approve"]);
    second
        .expect(4)
        .contains(&first.id().to_string())
        .contains("apply");
    let status = first.wait().expect("first apply");
    assert!(status.success(), "the first apply failed");
    // With a lock timeout the next one waits its turn and finds nothing to do.
    c.run(&["apply", "-auto-approve", "-lock-timeout", "60s"])
        .expect(0);
}

/// (connections, sessions) each host's sshd logged while `run` ran: one "Accepted publickey"
/// per connection, one "Starting session" per command (as testdata/lab/bench figure 2 counts).
fn sshd_counts_during(
    c: &Cluster,
    names: &[&str],
    run: impl FnOnce(),
) -> BTreeMap<String, (usize, usize)> {
    let counts = |n: &str| {
        let log = c.lab.sshd_log(n);
        (
            log.matches("Accepted publickey").count(),
            log.matches("Starting session").count(),
        )
    };
    let before: Vec<(usize, usize)> = names.iter().map(|n| counts(n)).collect();
    run();
    names
        .iter()
        .zip(before)
        .map(|(n, (c0, s0))| {
            let (c1, s1) = counts(n);
            (n.to_string(), (c1 - c0, s1 - s0))
        })
        .collect()
}

/// A no-op apply costs one SSH session per host, the probe's: the cleanup of what an earlier
/// run left opens a second session only on a host whose probe found upload staging files, or
/// whose join an earlier run began and did not see finish (an intent), and cleans up there.
#[test]
fn no_op_apply_opens_one_session_per_host() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker"), ("w2", "worker")]);
    let names = ["c1", "w1", "w2"];
    bootstrap(&c);
    let expect = |sessions: [usize; 3]| -> BTreeMap<String, (usize, usize)> {
        names
            .iter()
            .zip(sessions)
            .map(|(n, s)| (n.to_string(), (1, s)))
            .collect()
    };
    // An apply, with one connection to each host and `sessions` sessions.
    let apply_with_sessions = |sessions: [usize; 3], what: &str| -> e2e::Run {
        let mut r = None;
        let counts = sshd_counts_during(&c, &names, || r = Some(c.apply()));
        assert_eq!(counts, expect(sessions), "{what}");
        r.unwrap()
    };

    apply_with_sessions([1, 1, 1], "(connections, sessions) per host").contains("No changes");

    // A staging file a killed upload left beside w1's binary (planted from inside the host,
    // not over SSH): only w1 gets a second session, and the file is removed there.
    c.lab
        .exec_ok("w1", "touch /usr/local/bin/k0s.k0sform-Ab12Cd");
    apply_with_sessions([1, 2, 1], "(connections, sessions) per host").contains(&format!(
        "{}: cleaned up /usr/local/bin/k0s.k0sform-Ab12Cd, left by an earlier run",
        c.lab.address("w1")
    ));
    c.lab
        .exec_ok("w1", "test ! -e /usr/local/bin/k0s.k0sform-Ab12Cd");
    apply_with_sessions([1, 1, 1], "nothing left to clean up").contains("No changes");

    // An interrupted join of w2 (its intent in the state) with a join token left behind and no
    // staging file: w2 gets the second session, the token becomes the placeholder.
    c.lab
        .exec_ok("w2", "printf 'H4sIleftover\\n' > /etc/k0s/k0stoken");
    let mut st = c.state_json();
    st["intents"] = serde_json::json!([{
        "step": "join_worker w2", "address": c.lab.address("w2"), "port": 22,
        "kind": "join_worker", "started_at": "2026-01-01T00:00:00Z"
    }]);
    std::fs::write(&c.state, serde_json::to_string_pretty(&st).unwrap()).unwrap();
    apply_with_sessions([1, 1, 2], "(connections, sessions) per host")
        .contains("cleaned up /etc/k0s/k0stoken, left by an earlier run");
    let token = c.lab.exec_ok("w2", "cat /etc/k0s/k0stoken");
    assert!(
        !token.contains("H4sIleftover") && !token.is_empty(),
        "{token}"
    );
}

/// The `time="…"` of each line of `path` on `host` that contains `needle`.
fn log_times(c: &Cluster, host: &str, path: &str, needle: &str) -> Vec<String> {
    let out = c.lab.exec(host, &format!("cat {path}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| Some(l.strip_prefix("time=\"")?.split('"').next()?.to_string()))
        .collect()
}

/// Issue 13: k0s v1.35.5+ adds a joining controller to etcd as a learner; the leader promotes
/// it (here every 6 s, once it has caught up). k0sform starts the next membership step only
/// once the learner is a voter: c3's k0s starts after c2's promotion, and never meets etcd's
/// "too many learner members".
#[test]
fn controllers_joining_as_learners_join_one_after_the_others_promotion() {
    require_lab!();
    let hosts = [
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
    ];
    let mut c = Cluster::with(&hosts, LabOptions::default(), SpecOptions::default());
    for h in ["c1", "c2", "c3"] {
        c.lab
            .exec_ok(h, "printf 'promote_every 6\\n' > /etc/k0s-lab/k0s-knobs");
    }
    let v = "v1.35.5+k0s.0";
    c.spec_opts.k0s_version = Some(v.into());
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version(v));
    c.write_spec(&["c1", "c2", "c3"]);
    c.apply().contains("Apply complete");

    let log = "/var/lib/k0s/logs/k0scontroller.log";
    // The promotion of c2, as the leader logged it.
    let c2_promoted: String = ["c1", "c2", "c3"]
        .iter()
        .flat_map(|h| {
            let text = lab::stdout(&c.lab.exec(h, &format!("cat {log}")));
            text.lines()
                .filter(|l| l.contains("promoted learner") && l.contains("memberName=c2"))
                .filter_map(|l| Some(l.strip_prefix("time=\"")?.split('"').next()?.to_string()))
                .collect::<Vec<_>>()
        })
        .min()
        .expect("c2 was promoted by the leader");
    let c3_first: String = log_times(&c, "c3", log, "time=")
        .into_iter()
        .next()
        .expect("c3 logged");
    assert!(
        c3_first >= c2_promoted,
        "c3's k0s started at {c3_first}, before c2 was promoted at {c2_promoted}"
    );
    // etcd refuses a second learner with "too many learner members in cluster". Other refused
    // attempts are not about the order: for 5 s after c2 became a voter etcd answers any member
    // add with "unhealthy cluster" (its health interval), and k0s retries through that, as
    // real k0s does (pkg/component/controller/etcd.go, syncEtcdConfig).
    let c3_log = lab::stdout(&c.lab.exec("c3", &format!("cat {log}")));
    assert!(
        !c3_log
            .lines()
            .any(|l| l.contains("Failed to join etcd cluster") && l.contains("learner")),
        "c3 tried to join while c2 was a learner:\n{c3_log}"
    );
    // No learner left: every member is a voter.
    let out = c.lab.ssh_ok(
        "c1",
        &format!(
            "ETCDCTL_API=3 etcdctl --endpoints=http://{}:2379 member list -w json",
            c.lab.address("c1")
        ),
    );
    let m: serde_json::Value = serde_json::from_str(&out).expect("etcdctl JSON");
    let members = m["members"].as_array().expect("members");
    assert_eq!(members.len(), 3, "{m}");
    assert!(
        members
            .iter()
            .all(|x| !x["isLearner"].as_bool().unwrap_or(false)),
        "{m}"
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 30: a running worker that the spec now calls a `controller+worker` is refused (exit 3)
/// as k0sctl refuses a role change, naming the host, both roles and the steps; `plan` and
/// `apply` change nothing: not the host, not the state.
#[test]
fn role_flip_of_a_running_host_is_refused_and_changes_nothing() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    bootstrap(&c);
    let spec = std::fs::read_to_string(&c.spec).unwrap();
    assert_eq!(spec.matches("- role: worker").count(), 1, "{spec}");
    std::fs::write(
        &c.spec,
        spec.replace("- role: worker", "- role: controller+worker"),
    )
    .unwrap();
    let state_before = std::fs::read(&c.state).unwrap();
    let hosts_before: Vec<String> = ["c1", "w1"].iter().map(|n| c.host_snapshot(n)).collect();
    let addr = c.lab.address("w1");
    plan_changes_nothing(&c, &[])
        .expect(3)
        .contains(&format!(
            "w1 ({addr}) runs k0s as worker but the spec gives it role controller+worker"
        ))
        .contains("set `role: worker` on it in the spec")
        .contains(
            "remove it from the spec (or set `reset: true` on it, with `role: worker`) and apply",
        )
        .contains("add it back with `role: controller+worker`");
    c.run(&["apply", "-auto-approve"])
        .expect(3)
        .contains("runs k0s as worker but the spec gives it role controller+worker");
    assert_eq!(std::fs::read(&c.state).unwrap(), state_before);
    let hosts_after: Vec<String> = ["c1", "w1"].iter().map(|n| c.host_snapshot(n)).collect();
    assert_eq!(
        hosts_before, hosts_after,
        "a refused role change changed a host"
    );
}

/// Issue 30: with `options.wait.enabled: false` (k0sctl's `--no-wait`), a joining worker's step
/// ends once its Node registered, not once it is Ready: here the controller shows every Node
/// NotReady (`node_grace -1`: no heartbeat is recent enough), and the join still completes.
#[test]
fn join_without_wait_completes_when_the_node_registers_but_is_not_ready() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    c.write_spec(&["c1"]);
    bootstrap(&c);
    // Read where `kubectl get` runs: on c1, every Node shows Ready=Unknown.
    c.lab
        .exec_ok("c1", "printf 'node_grace -1\\n' > /etc/k0s-lab/k0s-knobs");
    c.write_spec(&["c1", "w1"]);
    let mut spec = std::fs::read_to_string(&c.spec).unwrap();
    spec.push_str("  options:\n    wait:\n      enabled: false\n");
    std::fs::write(&c.spec, spec).unwrap();
    c.apply().contains("Apply complete");
    assert_eq!(c.nodes("c1").get("w1"), Some(&false), "{:?}", c.nodes("c1"));
    assert!(c.state_host("w1").is_some(), "w1 is not recorded");
}

/// Issue 13: a `single` host with a `spec.k0s.config` that names no storage runs kine. k0sform
/// writes it no `storage:` section (any such key switches k0s to etcd, k0s
/// `pkg/apis/k0s/v1beta1/storage.go`), so k0s reports kine, keeps no etcd member and has no
/// EtcdMember objects; `k0s etcd member-list` refuses as k0s does; the next plan changes
/// nothing. (Without any `spec.k0s.config` it runs etcd, as k0sctl builds it: issue 27.)
#[test]
fn single_host_runs_kine_and_plans_no_changes() {
    require_lab!();
    let spec_opts = SpecOptions {
        k0s_config: Some("spec:\n  telemetry:\n    enabled: false".into()),
        ..SpecOptions::default()
    };
    let c = Cluster::with(&[("s1", "single")], LabOptions::default(), spec_opts);
    bootstrap(&c);
    let cfg = c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml");
    assert!(!cfg.contains("storage"), "{cfg}");
    let status = c.lab.ssh_ok("s1", "k0s status -o json");
    let st: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(
        st["ClusterConfig"]["spec"]["storage"]["type"], "kine",
        "{status}"
    );
    assert_eq!(st["SingleNode"], true);
    let ml = c
        .lab
        .ssh("s1", "k0s etcd member-list --data-dir=/var/lib/k0s");
    assert_eq!(ml.status.code(), Some(1));
    assert!(
        lab::stderr(&ml).contains("wrong storage type: kine"),
        "{}",
        lab::stderr(&ml)
    );
    // No etcd data and no EtcdMember CRD: k0s applies it only with its own etcd.
    c.lab.ssh_ok("s1", "test ! -e /var/lib/k0s/etcd");
    let crd = c.lab.ssh(
        "s1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get etcdmembers.etcd.k0sproject.io",
    );
    assert!(!crd.status.success(), "{}", lab::stdout(&crd));
    assert!(c.objects("s1", "controlnodes").contains(&"s1".to_string()));
    assert!(c.state_host("s1").expect("recorded")["etcd"].is_null());
    assert_eq!(c.nodes("s1").get("s1"), Some(&true));
    plan_changes_nothing(&c, &["-detailed-exitcode"])
        .expect(0)
        .contains("No changes");

    // Destroyed without an etcd leave (there is no etcd): reset, and the state ends empty.
    c.lab
        .ssh_ok("s1", "test -e /var/lib/k0s/db && test -e /etc/k0s/k0s.yaml");
    let p = c.run(&["plan", "-destroy"]);
    p.expect(0).contains("s1");
    assert!(!p.text().contains("etcd member"), "{}", p.text());
    c.run(&["destroy", "-auto-approve"]).expect(0);
    c.lab.ssh_ok("s1", "test ! -e /var/lib/k0s/db");
    c.lab.ssh_ok("s1", "test ! -e /etc/k0s/k0s.yaml");
    assert!(c.state_host("s1").is_none());
    assert!(c.state_json()["cluster"].is_null(), "{}", c.state_json());
}

/// The questions an operator answers on a terminal: `apply` runs only on `yes`, `destroy` only
/// on the cluster's name; any other answer changes no host and not the state.
#[test]
fn terminal_confirmations_guard_apply_and_destroy() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    let r = c.run_on_terminal(&["apply"], "no");
    assert_ne!(r.code, 0);
    r.contains("Do you want to perform these actions?")
        .contains("apply cancelled");
    assert!(!c.state.exists(), "a cancelled apply wrote the state");
    c.lab
        .exec_ok("c1", "test ! -e /etc/systemd/system/k0scontroller.service");

    c.run_on_terminal(&["apply"], "yes")
        .expect(0)
        .contains("Apply complete");
    let serial = c.state_serial();
    assert_eq!(c.nodes("c1").get("w1"), Some(&true));
    c.lab
        .exec_ok("c1", "test -e /etc/systemd/system/k0scontroller.service");

    let r = c.run_on_terminal(&["destroy"], "yes");
    assert_ne!(r.code, 0);
    r.contains("Enter the cluster's name")
        .contains("destroy cancelled");
    assert_eq!(
        c.state_serial(),
        serial,
        "a cancelled destroy wrote the state"
    );
    assert_eq!(c.nodes("c1").get("w1"), Some(&true));

    let name = c.state_json()["cluster"]["name"]
        .as_str()
        .expect("cluster name")
        .to_string();
    c.run_on_terminal(&["destroy"], &name).expect(0);
    assert!(
        c.state_json()["hosts"]
            .as_array()
            .expect("hosts")
            .is_empty()
    );
    c.lab
        .exec_ok("c1", "test ! -e /etc/systemd/system/k0scontroller.service");
}

/// A worker join waits for its Node on a watch: one `kubectl get nodes --watch-only` on the
/// controller wakes the step as soon as the Node changes (here the kubelet registers 1 s after
/// the join), where its polls would come every 5 s while the watch runs. The watch is gone from
/// the controller when the apply ends: nothing is left running there.
#[test]
fn worker_join_waits_on_a_node_watch_and_leaves_none_running() {
    require_lab!();
    let c = c1_up_w1_w2_to_join();
    c.lab
        .exec_ok("w1", "printf 'join_latency 1\\n' > /etc/k0s-lab/k0s-knobs");
    c.lab.exec_ok(
        "c1",
        "printf 'count_starts 1\\n' > /etc/k0s-lab/k0s-knobs; rm -f /run/k0s-lab/starts",
    );
    c.write_spec(&["c1", "w1"]);
    let r = c.run(&["apply", "-auto-approve", "-json"]);
    r.expect(0);
    assert_eq!(c.nodes("c1").get("w1"), Some(&true));
    let joined = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "step_finished" && e["step"]["kind"] == "join_worker")
        .and_then(|e| e["elapsed"].as_f64())
        .unwrap_or_else(|| panic!("no join_worker step_finished event:\n{}", r.text()));
    // Token, install and start take well under a second here; a wait that missed the Node's
    // registration would end at the next poll, 5 s after the first.
    assert!(
        joined < 4.5,
        "the join took {joined:.1}s: the watch did not wake it\n{}",
        r.text()
    );

    let starts = c.lab.exec_ok("c1", "cat /run/k0s-lab/starts");
    let watches = starts
        .lines()
        .filter(|l| l.contains("--watch-only"))
        .count();
    let polls = starts
        .lines()
        // The steps' query (the probe's has no --data-dir).
        .filter(|l| l.starts_with("kubectl --data-dir=") && l.ends_with("get nodes -o json"))
        .count();
    assert_eq!(watches, 1, "one watch for the join: {starts}");
    assert!(
        (1..=3).contains(&polls),
        "{polls} `get nodes` during the wait: {starts}"
    );
    let watching = || node_watches_on(&c, "c1");
    assert_eq!(watching(), Vec::<String>::new(), "a watch still runs on c1");

    // k0sform killed -9 while a join waits on the watch: its ssh master dies with it, sshd
    // closes the session, and the watch ends on the controller.
    c.lab
        .exec_ok("w2", "printf 'join_latency 60\\n' > /etc/k0s-lab/k0s-knobs");
    c.write_spec(&["c1", "w1", "w2"]);
    let killed = kill_apply_when(&c, &["apply", "-auto-approve"], || !watching().is_empty());
    assert!(killed, "no watch ran on c1 while w2 joined");
    let gone = c
        .lab
        .wait_until(std::time::Duration::from_secs(15), || watching().is_empty());
    assert!(gone, "the watch outlived k0sform on c1: {:?}", watching());
}

/// Issue 27: a new `single` host without `spec.k0s.config` is built as k0sctl builds it: on
/// etcd (k0sform writes `storage.type: etcd`, which `--single` would otherwise turn into kine),
/// recorded with its etcd member; the next plan changes nothing.
#[test]
fn single_host_without_a_config_bootstraps_on_etcd() {
    require_lab!();
    let c = Cluster::new(&[("s1", "single")]);
    bootstrap(&c);
    let status = c.lab.ssh_ok("s1", "k0s status -o json");
    let st: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(
        st["ClusterConfig"]["spec"]["storage"]["type"], "etcd",
        "{status}"
    );
    assert_eq!(st["SingleNode"], true);
    assert_eq!(c.members("s1").len(), 1);
    assert!(!c.state_host("s1").expect("recorded")["etcd"].is_null());
    assert_eq!(c.nodes("s1").get("s1"), Some(&true));
    plan_changes_nothing(&c, &["-detailed-exitcode"])
        .expect(0)
        .contains("No changes");
}

/// Issue 27: k0sctl's base without `spec.k0s.config` is the leader's existing k0s.yaml; only
/// without one it is `k0s config create`. A `single` host that runs kine from a k0s.yaml with no
/// `storage:` key (as earlier k0sform versions wrote it) stays on kine: no switch, no refusal.
#[test]
fn single_kine_host_without_a_config_keeps_kine() {
    require_lab!();
    let c = Cluster::new(&[("s1", "single")]);
    c.lab.install_double("s1");
    let addr = c.lab.address("s1");
    let cfg = format!(
        "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nmetadata:\n  name: k0s\nspec:\n  api:\n    sans:\n      - {addr}\n"
    );
    start_single_as_k0sctl_then_adopt(&c, Some(&cfg), "kine");
    assert_eq!(c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml"), cfg);
}

/// `spec.options.concurrency.limit` sets how many hosts are worked on at once, as k0sctl's
/// `Concurrency` (cmd/flags.go `initManager`); `-parallelism` was its own default (32) whatever
/// the spec said.
#[test]
fn options_concurrency_limit_sets_hosts_at_once() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    write_spec_with_options(&c, &["c1", "w1"], "concurrency:\n  limit: 1\n");
    let r = c.run(&["apply", "-auto-approve", "-json", "--no-wait"]);
    let begin = begin_event(&r.expect(0).stdout);
    assert_eq!(begin["parallelism"], 1, "{begin}");
}
