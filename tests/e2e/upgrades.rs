//! Upgrades and reconfiguration: one healthy cluster throughout, workers drained in batches and
//! back only when Ready anew, a k0s killed before its turn, the environment and the version chosen
//! again at apply.

use super::*;

/// Upgrade and reconfigure: a new k0s version rolls through controllers one at a time, then the
/// workers; a changed k0s config is rewritten and the controllers restarted one at a time; the
/// cluster keeps its members and identity throughout.
#[test]
fn upgrade_then_reconfigure_keep_one_healthy_cluster() {
    require_lab!();
    let mut c = Cluster::with(
        THREE_PLUS_ONE,
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            ..SpecOptions::default()
        },
    );
    bootstrap(&c);
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    let hosts = ["c1", "c2", "c3", "w1"];

    // A newer version without a binary to upload (no k0sBinaryPath): the hosts would download
    // it, but its release cannot be checked (the harness points the release URL at a closed
    // port): an error at plan time, so apply restarts nothing on the old binary.
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.write_spec(&hosts);
    let text = std::fs::read_to_string(&c.spec).expect("spec");
    let without: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("k0sBinaryPath:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(text, without, "the lab spec names k0sBinaryPath");
    std::fs::write(&c.spec, without).expect("spec");
    plan_changes_nothing(&c, &[])
        .expect(1)
        .contains("checking k0s v1.33.5+k0s.0: cannot fetch http://127.0.0.1:9/releases/v1.33.5%2Bk0s.0/sha256sums.txt")
        .contains("K0SFORM_K0S_DOWNLOAD_URL");
    let before: Vec<String> = hosts.iter().map(|h| c.host_snapshot(h)).collect();
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains("checking k0s v1.33.5+k0s.0");
    let after: Vec<String> = hosts.iter().map(|h| c.host_snapshot(h)).collect();
    assert_eq!(before, after, "a refused apply changed a host");

    // Upgrade.
    plan_upgrade_to_v1_33_5(&mut c, &hosts);
    let r = c.apply();
    // Controllers strictly one after another: each upgrade finishes before the next starts.
    let order: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.contains(": Upgrading k0s") || l.contains(": Upgraded after"))
        .collect();
    assert_eq!(
        order.len(),
        8,
        "four upgrades, started and done: {order:#?}"
    );
    for pair in order.chunks(2) {
        assert!(
            pair.len() == 2 && pair[0].contains("Upgrading") && pair[1].contains("Upgraded"),
            "upgrades overlapped: {order:#?}"
        );
    }
    for h in hosts {
        assert_eq!(
            c.lab.ssh_ok(h, "k0s version").trim(),
            "v1.33.5+k0s.0",
            "{h}"
        );
        assert_eq!(
            c.state_host(h).expect("recorded")["k0s_version"],
            "v1.33.5+k0s.0",
            "{h}"
        );
    }
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // Reconfigure: a cluster-wide k0s config change.
    c.spec_opts.k0s_config = Some("spec:\n  telemetry:\n    enabled: false".into());
    c.write_spec(&hosts);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("reconfigured")
        .contains("+    enabled: false");
    c.apply();
    for h in ["c1", "c2", "c3"] {
        let cfg = c.lab.ssh_ok(h, "cat /etc/k0s/k0s.yaml");
        assert!(cfg.contains("enabled: false"), "{h}: {cfg}");
    }
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// k0s's unit restarts k0s by itself (Restart=always, RestartSec=10). A host whose upgrade is not
/// due yet keeps its old binary at the install path: killed, it comes back on its old version.
#[test]
fn k0s_killed_before_its_upgrade_turn_comes_back_on_its_old_version() {
    require_lab!();
    let hosts = [("c1", "controller"), ("w1", "worker")];
    let mut c = Cluster::with(
        &hosts,
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            ..SpecOptions::default()
        },
    );
    bootstrap(&c);
    let newer = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(newer);
    // c1's upgrade (controllers go first) waits in its hook until the test lets it go.
    c.spec_opts.host_yaml.insert(
        "c1".into(),
        "hooks:\n  upgrade:\n    before: ['touch /root/hook-started; while [ ! -e /root/go ]; do sleep 0.2; done']\n".into(),
    );
    c.write_spec(&["c1", "w1"]);
    let apply = c
        .command(&["apply", "-auto-approve"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("apply");
    let in_hook = c.lab.wait_until(std::time::Duration::from_secs(180), || {
        c.lab
            .exec("c1", "test -e /root/hook-started")
            .status
            .success()
    });
    assert!(in_hook, "c1's upgrade hook never ran");
    // The new binary reached w1 (staged, or at the install path).
    let uploaded = c.lab.wait_until(std::time::Duration::from_secs(120), || {
        c.lab
            .exec(
                "w1",
                "grep -l 'VERSION = \"v1.33.5+k0s.0\"' /usr/local/bin/* >/dev/null 2>&1",
            )
            .status
            .success()
    });
    assert!(uploaded, "the new binary never reached w1");
    let old_pid = c
        .lab
        .exec_ok("w1", "cat /run/k0s-service/k0sworker.service.pid");
    c.lab.exec_ok("w1", &format!("kill -9 {}", old_pid.trim()));
    let back = c.lab.wait_until(std::time::Duration::from_secs(40), || {
        let pid = c
            .lab
            .exec("w1", "cat /run/k0s-service/k0sworker.service.pid")
            .stdout;
        String::from_utf8_lossy(&pid).trim() != old_pid.trim()
            && c.lab.exec("w1", "k0s status").status.success()
    });
    assert!(back, "w1's k0s did not come back by itself");
    let status = c.lab.exec_ok("w1", "k0s status");
    assert!(
        status.contains("Version: v1.33.4+k0s.0"),
        "w1 restarted on the new binary before its upgrade turn:\n{status}"
    );

    c.lab.exec_ok("c1", "touch /root/go");
    let out = apply.wait_with_output().expect("apply");
    assert!(
        out.status.success(),
        "apply failed\n--- stdout\n{}\n--- stderr\n{}",
        lab::stdout(&out),
        lab::stderr(&out)
    );
    for h in ["c1", "w1"] {
        assert_eq!(
            c.lab.ssh_ok(h, "k0s version").trim(),
            "v1.33.5+k0s.0",
            "{h}"
        );
    }
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

const ONE_PLUS_FOUR: &[(&str, &str)] = &[
    ("c1", "controller"),
    ("w1", "worker"),
    ("w2", "worker"),
    ("w3", "worker"),
    ("w4", "worker"),
];

/// Issue 16: an upgrade of 4 workers with `workerDisruptionPercent: 50` cordons, taints, drains
/// and uncordons them in two batches of two (the double's log of Node operations and its Node
/// objects show it); a drain that a PodDisruptionBudget blocks stops the apply before that
/// worker restarts, and leaves its Node cordoned.
#[test]
fn upgrade_drains_workers_in_batches_and_a_failed_drain_stops() {
    require_lab!();
    let mut c = Cluster::with(
        ONE_PLUS_FOUR,
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            ..SpecOptions::default()
        },
    );
    let hosts = ["c1", "w1", "w2", "w3", "w4"];
    let options = "concurrency:\n  workerDisruptionPercent: 50\ndrain:\n  timeout: 3s\nevictTaint:\n  enabled: true\n";
    write_spec_with_options(&c, &hosts, options);
    bootstrap(&c);
    c.eventually(60, "workers Ready", || {
        let n = c.nodes("c1");
        ["w1", "w2", "w3", "w4"]
            .iter()
            .all(|w| n.get(*w) == Some(&true))
    });

    let newer = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(newer);
    write_spec_with_options(&c, &hosts, options);
    c.run(&["plan"])
        .expect(0)
        .contains("Node \"w1\" cordoned, tainted k0sctl.k0sproject.io/evict=true:NoExecute and drained via c1")
        .contains("Node \"w4\" uncordoned and k0sctl.k0sproject.io/evict=true:NoExecute removed once Ready")
        .contains("workers 2 at a time");
    c.apply().contains("Apply complete");

    let ops = node_ops(&c, "c1");
    let at = |verb: &str, node: &str| {
        ops.iter()
            .position(|(v, n, _)| v == verb && n == node)
            .unwrap_or_else(|| panic!("no {verb} of {node}: {ops:#?}"))
    };
    for w in ["w1", "w2", "w3", "w4"] {
        assert!(at("cordon", w) < at("taint", w), "{w}: {ops:#?}");
        assert!(at("taint", w) < at("drain", w), "{w}: {ops:#?}");
        assert!(at("drain", w) < at("uncordon", w), "{w}: {ops:#?}");
    }
    // Two batches: neither of w3, w4 is cordoned before both of w1, w2 are uncordoned.
    let first_done = at("uncordon", "w1").max(at("uncordon", "w2"));
    let second_start = at("cordon", "w3").min(at("cordon", "w4"));
    assert!(first_done < second_start, "batches overlapped: {ops:#?}");
    // And the batch is two at once: w2 is cordoned before w1 is uncordoned.
    assert!(
        at("cordon", "w2") < at("uncordon", "w1"),
        "one at a time: {ops:#?}"
    );
    // The Node objects: schedulable again, no evict taint left.
    for w in ["w1", "w2", "w3", "w4"] {
        let node = c.lab.ssh_ok(
            "c1",
            &format!("KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get node {w} -o json"),
        );
        let node: serde_json::Value = serde_json::from_str(&node).expect("node json");
        assert!(node["spec"]["unschedulable"].is_null(), "{w}: {node}");
        assert!(
            !node["spec"]
                .to_string()
                .contains("k0sctl.k0sproject.io/evict"),
            "{w}: {node}"
        );
        assert_eq!(
            c.lab.ssh_ok(w, "k0s version").trim(),
            "v1.33.5+k0s.0",
            "{w}"
        );
    }
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // A drain that fails: a pod on w3 whose disruption budget refuses eviction.
    let newest = c.lab.k0s_double_with_version("v1.33.6+k0s.0");
    c.spec_opts.k0s_version = Some("v1.33.6+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(newest);
    write_spec_with_options(&c, &hosts, options);
    c.lab.ssh_ok(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl patch node/w3 --type=merge \
         -p '{\"metadata\":{\"annotations\":{\"k0s-lab/drain-blocked-by\":\"web-0\"}}}'",
    );
    let w3_pid = c
        .lab
        .ssh_ok("w3", "cat /run/k0s-service/k0sworker.service.pid");
    let r = c.run(&["apply", "-auto-approve"]);
    r.expect(1)
        .contains("draining Node \"w3\" failed")
        .contains("stays cordoned")
        .contains("k0s kubectl uncordon w3");
    let w3 = c.lab.ssh_ok(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get node w3 -o json",
    );
    let w3: serde_json::Value = serde_json::from_str(&w3).expect("node json");
    assert_eq!(w3["spec"]["unschedulable"], true, "w3 left cordoned: {w3}");
    assert_eq!(
        c.lab
            .ssh_ok("w3", "cat /run/k0s-service/k0sworker.service.pid"),
        w3_pid,
        "w3's k0s was not restarted"
    );
    // The state does not claim the upgrade of w3.
    assert_eq!(
        c.state_host("w3").expect("recorded")["k0s_version"],
        "v1.33.5+k0s.0"
    );
}

/// Issue 28, item 4: the k0s version a saved plan chose (the spec names none) is chosen again
/// at apply, never taken from the file: when the version index moved since the plan, the file
/// is stale (exit 5) and nothing is installed; planned again, it applies the new version.
#[test]
fn saved_plan_version_is_chosen_again_at_apply() {
    require_lab!();
    let (c, mirror) = from_mirror(
        &[("c1", "controller")],
        SpecOptions::default(),
        &["v1.33.4+k0s.0", "v1.33.5+k0s.0"],
    );
    mirror.set_index("v1.33.4+k0s.0", "v1.33.5+k0s.0");
    let file = c.lab.dir().join("version.plan");
    let file = file.to_str().expect("utf-8");
    c.run(&["plan", "-out", file])
        .expect(0)
        .contains("k0s version v1.33.4+k0s.0 (latest stable release");
    mirror.set_index("v1.33.5+k0s.0", "v1.33.5+k0s.0");
    c.run(&["apply", file])
        .expect(5)
        .contains("the file installs k0s v1.33.4+k0s.0 (latest stable release")
        .contains("k0s v1.33.5+k0s.0 (latest stable release")
        .contains("is chosen now");
    assert_eq!(
        mirror.downloads("v1.33.4+k0s.0"),
        0,
        "the file's version was installed"
    );
    assert!(!c.state.exists(), "a stale plan wrote the state");
    c.run(&["plan", "-out", file]).expect(0);
    c.run(&["apply", file]).expect(0).contains("Apply complete");
    assert_eq!(c.state_json()["cluster"]["k0s_version"], "v1.33.5+k0s.0");
}

/// The Node operations on `via` with their times (the double's kubectl.log): (time, verb, node).
fn timed_node_ops(c: &Cluster, via: &str) -> Vec<(f64, String, String)> {
    kubectl_log(c, via)
        .into_iter()
        .filter_map(|w| {
            Some((
                w.first()?.parse().ok()?,
                w.get(1)?.clone(),
                w.get(2)?.clone(),
            ))
        })
        .collect()
}

/// Issue 13: after a kubelet stops, the cluster keeps showing its Node Ready with the old
/// heartbeat for node-monitor-grace-period (here 60 s); a restarted worker's kubelet posts
/// again only seconds after k0s is up (here 6 s). An upgrade counts the worker back, and
/// uncordons it, only once its Node turned Ready anew: never on the Ready cached from before.
#[test]
fn upgraded_worker_is_back_only_when_its_node_reports_ready_anew() {
    require_lab!();
    let mut c = c1_w1_on_v1_33_4_ready();
    const LATENCY: f64 = 6.0;
    for h in ["c1", "w1"] {
        c.lab.exec_ok(
            h,
            &format!(
                "printf 'node_grace 60\\nkubelet_latency {LATENCY}\\n' > /etc/k0s-lab/k0s-knobs"
            ),
        );
    }
    to_k0s_version(&mut c, "v1.33.5+k0s.0", &["c1", "w1"]);
    c.apply().contains("Apply complete");

    let ops = timed_node_ops(&c, "c1");
    let at = |verb: &str| {
        ops.iter()
            .rev()
            .find(|(_, v, n)| v == verb && n == "w1")
            .map(|(t, _, _)| *t)
            .unwrap_or_else(|| panic!("no {verb} of w1: {ops:#?}"))
    };
    // The restart comes after the drain; the new kubelet reports LATENCY s after k0s is up.
    let gap = at("uncordon") - at("drain");
    assert!(
        gap >= LATENCY,
        "w1 was uncordoned {gap:.1}s after its drain, before its kubelet reported again: {ops:#?}"
    );
    let status = c.lab.exec_ok("w1", "k0s status");
    assert!(status.contains("Version: v1.33.5+k0s.0"), "{status}");
    // Uncordoned, Ready from a heartbeat of the new kubelet.
    let node = c.lab.ssh_ok(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get node w1 -o json",
    );
    let node: serde_json::Value = serde_json::from_str(&node).expect("node json");
    assert!(node["spec"]["unschedulable"].is_null(), "{node}");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 16: `environment` reaches the service as `k0s install -e` writes it; an unchanged
/// environment plans nothing; a changed one is a reinstall and restart (values hidden in the
/// plan), after which the service runs with the new values.
#[test]
fn environment_change_reinstalls_the_service_and_unchanged_plans_nothing() {
    require_lab!();
    let mut c = Cluster::new(C1_W1);
    let env = |token: &str| {
        format!("environment:\n  HTTP_PROXY: http://proxy.invalid:3128\n  TOKEN: {token}")
    };
    c.spec_opts.host_yaml.insert("w1".into(), env("s3cret-one"));
    c.write_spec(&["c1", "w1"]);
    bootstrap(&c);
    let unit = || {
        c.lab
            .exec_ok("w1", "cat /etc/systemd/system/k0sworker.service")
    };
    assert!(
        unit().contains("Environment=\"TOKEN=s3cret-one\""),
        "{}",
        unit()
    );
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");
    // As k0sctl leaves it: the environment in its systemd drop-in (rig v2), not in the unit.
    // The same values plan nothing.
    c.lab.exec_ok(
        "w1",
        "sed -i '/^Environment=/d' /etc/systemd/system/k0sworker.service && \
         mkdir -p /etc/systemd/system/k0sworker.service.d && \
         printf '[Service]\\nEnvironment=HTTP_PROXY=http://proxy.invalid:3128\\nEnvironment=TOKEN=s3cret-one\\n' \
         > /etc/systemd/system/k0sworker.service.d/env.conf",
    );
    assert!(!unit().contains("Environment="), "{}", unit());
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");

    c.spec_opts.host_yaml.insert("w1".into(), env("s3cret-two"));
    c.write_spec(&["c1", "w1"]);
    let r = plan_changes_nothing(&c, &[]);
    r.expect(0)
        .contains("the service environment differs (changed: TOKEN, values hidden (-show-secrets))")
        .contains("reinstalled with the spec's flags and environment");
    assert!(!r.text().contains("s3cret"), "{}", r.text());
    // A reconfigure restarts without a drain, as k0sctl does (issue 27).
    assert!(!r.text().contains("drained"), "{}", r.text());
    c.apply();
    assert!(
        unit().contains("Environment=\"TOKEN=s3cret-two\""),
        "{}",
        unit()
    );
    assert!(!unit().contains("s3cret-one"), "{}", unit());
    // k0sctl's drop-in would override the unit's values: it is gone.
    let dropin = c.lab.exec(
        "w1",
        "test -e /etc/systemd/system/k0sworker.service.d/env.conf",
    );
    assert!(!dropin.status.success(), "k0sctl's env.conf is still there");
    let environ = c.lab.exec_ok(
        "w1",
        "pid=$(k0s status -o json | sed -n 's/.*\"Pid\": *\\([0-9]*\\).*/\\1/p'); tr '\\0' '\\n' < /proc/$pid/environ",
    );
    assert!(environ.contains("TOKEN=s3cret-two"), "{environ}");
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");
    // Issue 28, item 11: a drop-in of the administrator's (no install writes or removes it)
    // with an `Environment=` line is not the service environment k0sform manages: no change.
    c.lab.exec_ok(
        "w1",
        "mkdir -p /etc/systemd/system/k0sworker.service.d && \
         printf '[Service]\\nEnvironment=GODEBUG=x509sha1=1\\n' \
         > /etc/systemd/system/k0sworker.service.d/10-admin.conf",
    );
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");
}
