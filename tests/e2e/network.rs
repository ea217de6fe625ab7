//! Addresses: hosts on private networks or behind NAT, readdressed hosts moved (never removed and
//! joined), and peer-address changes refused.

use super::*;

/// Issue 16: a worker whose address changed (same machine: machine-id and host key) is planned
/// as a move, never a removal plus a join; its recorded key is checked (no first contact); the
/// apply moves the record (node name and identity kept) and reinstalls it for its new
/// `--node-ip` (privateAddress is its address in the lab), with a drain; then nothing to do.
#[test]
fn readdressed_worker_is_moved_never_removed_and_joined() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    bootstrap(&c);
    let old = c.lab.address("w1");
    let before = c.state_host("w1").expect("w1 recorded");
    let serial = c.state_serial();
    let new = c.lab.readdress("w1");
    assert_ne!(old, new);
    c.write_spec(&["c1", "w1"]);

    // With the new address excluded the move cannot be seen: the old record looks like a
    // removal, but its Node is in use (Ready, and reporting the new address), so it is not
    // drained and deleted.
    c.run(&["apply", "-auto-approve", "-exclude", &new])
        .expect(3)
        .contains(&format!("w1 ({old}) leaves the spec"))
        .contains("refusing to drain and delete that Node");
    assert_eq!(c.state_serial(), serial);
    assert_eq!(c.nodes("c1").get("w1"), Some(&true));

    let r = plan_changes_nothing(&c, &[]);
    r.expect(0)
        .contains(&format!("# worker w1 ({old}) has moved to {new}"))
        .contains(&format!("state record moved from {old} to {new}"))
        .contains(&format!("--node-ip={new}"))
        .contains("1 to move.");
    for never in [
        "will be removed",
        "will be added",
        "joins the cluster",
        "First contact",
    ] {
        assert!(!r.stdout.contains(never), "{never:?} in\n{}", r.stdout);
    }
    let j = c.run(&["plan", "-json"]);
    j.expect(0);
    let plan: serde_json::Value = serde_json::from_str(&j.stdout).expect("plan JSON");
    let changes = plan["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{}", j.stdout);
    assert_eq!(changes[0]["host"]["address"], new.as_str());
    assert_eq!(changes[0]["moved_from"]["address"], old.as_str());
    assert_eq!(changes[0]["action"], "reconfigure");

    c.apply().contains("Apply complete");
    let after = c.state_host("w1").expect("w1 recorded at its new address");
    for k in ["machine_id", "host_key", "node_name", "role"] {
        assert_eq!(after[k], before[k], "{k}");
    }
    let hosts = c.state_json()["hosts"].as_array().unwrap().clone();
    assert!(
        !hosts.iter().any(|h| h["address"] == old.as_str()),
        "old address still recorded: {hosts:?}"
    );
    assert_eq!(hosts.len(), 2);
    assert!(c.state_serial() > serial);
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    let unit = c
        .lab
        .exec_ok("w1", "cat /etc/systemd/system/k0sworker.service");
    assert!(unit.contains(&format!("--node-ip={new}")), "{unit}");
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");
}

/// Issue 16: a controller that moved to an address that changes its etcd peer address is
/// refused (exit 3) with the steps to take; nothing changes: not the state, not etcd.
#[test]
fn readdressed_controller_whose_peer_address_changes_is_refused_with_steps() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("c2", "controller")]);
    bootstrap(&c);
    let old = c.lab.address("c2");
    let state_before = std::fs::read(&c.state).unwrap();
    let members_before = c.members("c1");
    let new = c.lab.readdress("c2");
    c.write_spec(&["c1", "c2"]);
    let r = plan_changes_nothing(&c, &[]);
    r.expect(3)
        .contains(&format!(
            "controller c2 moved from {old} to {new} and its etcd peer address changes ({old} → {new})"
        ))
        .contains("member update")
        .contains(&format!("--peer-urls=https://{new}:2380"))
        .contains(&format!("k0sform state mv {old} {new}"));
    c.run(&["apply", "-auto-approve"]).expect(3);
    assert_eq!(std::fs::read(&c.state).unwrap(), state_before);
    assert_eq!(c.members("c1"), members_before);
}

/// Issue 16: a move with nothing else to do (no privateAddress, so no `--node-ip`) is a state
/// update only: planned, saved and applied from the file; then a second re-address is recorded
/// by `apply -refresh-only`. k0s never restarts on the host.
#[test]
fn pure_move_through_a_saved_plan_and_refresh_only() {
    require_lab!();
    let spec_opts = SpecOptions {
        private_address: false,
        ..SpecOptions::default()
    };
    let c = c1_w1_with(spec_opts);
    bootstrap(&c);
    let pid = || {
        c.lab
            .exec_ok("w1", "cat /run/k0s-service/k0sworker.service.pid")
    };
    let before = c.state_host("w1").expect("w1");
    let old = c.lab.address("w1");
    let new = c.lab.readdress("w1");
    c.write_spec(&["c1", "w1"]);
    let started = pid();
    let plan_file = c.lab.dir().join("move.plan");
    c.run(&["plan", "-out", plan_file.to_str().unwrap()])
        .expect(0)
        .contains(&format!("# worker w1 ({old}) has moved to {new}"))
        .contains("Plan: 0 to add, 0 to change, 0 to replace, 0 to remove, 1 to move.");
    c.run(&["apply", plan_file.to_str().unwrap()])
        .expect(0)
        .contains("Apply complete");
    let after = c.state_host("w1").expect("w1 at its new address");
    for k in ["machine_id", "host_key", "node_name"] {
        assert_eq!(after[k], before[k], "{k}");
    }
    assert_eq!(after["access"]["ssh"]["address"], new.as_str());
    assert_eq!(pid(), started, "k0s restarted on a pure move");
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");

    let newer = c.lab.readdress("w1");
    c.write_spec(&["c1", "w1"]);
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0)
        .contains(&format!("has moved to {newer}"));
    let hosts = c.state_json()["hosts"].as_array().unwrap().clone();
    let addrs: Vec<&str> = hosts.iter().filter_map(|h| h["address"].as_str()).collect();
    assert!(
        addrs.contains(&newer.as_str()) && !addrs.contains(&new.as_str()),
        "{addrs:?}"
    );
    assert_eq!(hosts.len(), 2);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");
}

/// Lab options putting every host of `hosts` in its own network namespace of `kind`.
fn cloud_hosts(hosts: &[(&str, &str)], kind: &str) -> LabOptions {
    hosts
        .iter()
        .fold(LabOptions::default(), |o, (n, _)| o.net(n, kind))
}

fn private_of(c: &Cluster, name: &str) -> String {
    c.lab
        .host(name)
        .private_address
        .expect("a host with its own network")
}

/// Every listed controller sees the members at these private addresses, and one identity.
#[track_caller]
fn assert_members_at_private(c: &Cluster, controllers: &[&str]) -> String {
    let want: BTreeSet<String> = controllers
        .iter()
        .map(|n| format!("http://{}:2380", private_of(c, n)))
        .collect();
    assert_one_cluster_of(c, controllers, want)
}

/// Issue 27.2: a cluster k0sctl built on cloud-like hosts ('public' eth0 where SSH goes, a
/// private network on eth1 with a global route) from a spec with no `privateAddress`: k0sctl
/// found each host's private address (`configurer/linux.go` `PrivateInterface`: the private
/// route's interface; `PrivateAddress`: its first IPv4 address) and wrote it as `peerAddress`,
/// a SAN after each controller's address (`phase/configure_k0s.go`) and each worker's
/// `--node-ip` (`cluster/host.go`). k0sform finds the same addresses: adoption is a no-op, the
/// plan after it exits 0, an upgrade and a controller replacement succeed, and the replaced
/// controller's join is awaited at its private address (where k0s registers it).
#[test]
fn k0sctl_cluster_on_private_networks_is_adopted_upgraded_and_a_controller_replaced() {
    require_lab!();
    let hosts = ["c1", "c2", "c3", "w1", "w2"];
    let spec_opts = SpecOptions {
        private_address: false,
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        k0s_config: Some("spec:\n  telemetry:\n    enabled: false".into()),
        ..SpecOptions::default()
    };
    let mut c = Cluster::with(
        THREE_PLUS_TWO,
        cloud_hosts(THREE_PLUS_TWO, "dual"),
        spec_opts,
    );
    for h in hosts {
        c.lab.install_double(h);
    }
    let sans: String = ["c1", "c2", "c3"]
        .iter()
        .map(|h| format!("    - {}\n    - {}\n", c.lab.address(h), private_of(&c, h)))
        .collect();
    let k0sctl_config = |i: usize| {
        format!(
            "# generated-by-k0sctl 2026-08-01T10:00:00Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    sans:\n{sans}  storage:\n    etcd:\n      peerAddress: {}\n  telemetry:\n    enabled: false\n",
            private_of(&c, ["c1", "c2", "c3"][i])
        )
    };
    controllers_as_k0sctl(&c, &k0sctl_config);
    for w in ["w1", "w2"] {
        join_worker_as_k0sctl_at(&c, w, "", &private_of(&c, w));
    }
    let uid = assert_members_at_private(&c, &["c1", "c2", "c3"]);

    let before: Vec<String> = hosts.iter().map(|h| c.host_snapshot(h)).collect();
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
    let r = plan_changes_nothing(&c, &["-detailed-exitcode"]);
    r.expect(0).contains("No changes").contains(&format!(
        "{}: {} (eth1)",
        c.lab.address("c2"),
        private_of(&c, "c2")
    ));
    let after: Vec<String> = hosts.iter().map(|h| c.host_snapshot(h)).collect();
    assert_eq!(before, after, "adoption changed a host");
    assert_eq!(
        c.state_host("w1").expect("w1")["access"]["cluster_address"],
        private_of(&c, "w1").as_str(),
        "the state records the private address k0s uses"
    );

    // An upgrade: every host, nothing else.
    let newer = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(newer);
    c.write_spec(&hosts);
    let r = plan_changes_nothing(&c, &[]);
    r.expect(0)
        .contains("v1.33.4+k0s.0 → v1.33.5+k0s.0")
        .contains("Plan: 0 to add, 5 to change");
    assert!(!r.text().contains("k0s.yaml differs"), "{}", r.text());
    c.apply().contains("Apply complete");
    for h in hosts {
        assert_eq!(c.lab.ssh_ok(h, "k0s version").trim(), "v1.33.5+k0s.0");
    }

    // A controller rebuilt on the same network is replaced; its join is awaited at its
    // private address, where k0s registers the member.
    c.lab.wipe("c3");
    c.run(&["apply", "-auto-approve", "-replace", &c.lab.address("c3")])
        .expect(0);
    assert_eq!(assert_members_at_private(&c, &["c1", "c2", "c3"]), uid);
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27: a cluster bootstrapped from scratch where every SSH address is NAT'd (the lab's
/// loopback address, DNAT'd to the host's private address; nothing on the host has it): each
/// host's private address is found as k0sctl finds it and is the etcd peer address, the API's
/// SAN and the worker's `--node-ip`; the next plan says "No changes". Then a `privateAddress`
/// that would move a running controller's peer address is refused (exit 3) with the steps.
#[test]
fn bootstrap_behind_nat_uses_private_addresses_and_refuses_a_peer_address_change() {
    require_lab!();
    let c = Cluster::with(
        THREE_PLUS_ONE,
        cloud_hosts(THREE_PLUS_ONE, "nat"),
        SpecOptions {
            private_address: false,
            ..SpecOptions::default()
        },
    );
    bootstrap(&c);
    assert_members_at_private(&c, &["c1", "c2", "c3"]);
    let unit = c
        .lab
        .ssh_ok("w1", "cat /etc/systemd/system/k0sworker.service");
    assert!(
        unit.contains(&format!("--node-ip={}", private_of(&c, "w1"))),
        "{unit}"
    );
    let cfg = c.lab.ssh_ok("c2", "cat /etc/k0s/k0s.yaml");
    assert!(
        cfg.contains(&format!("peerAddress: {}", private_of(&c, "c2"))),
        "{cfg}"
    );
    plan_changes_nothing(&c, &["-detailed-exitcode"])
        .expect(0)
        .contains("No changes");

    // privateAddress = the SSH address: the running member's peer address would change.
    let mut c = c;
    c.spec_opts.private_address = true;
    c.write_spec(&["c1", "c2", "c3", "w1"]);
    let r = plan_changes_nothing(&c, &[]);
    r.expect(3)
        .contains(&format!(
            "runs etcd with peer address {}; the spec would make it {}, the spec's privateAddress",
            private_of(&c, "c1"),
            c.lab.address("c1")
        ))
        .contains("member update");
}
