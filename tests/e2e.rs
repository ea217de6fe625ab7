//! End-to-end scenarios in the lab: real sshd, real OpenSSH client, real etcd, the k0s double.
//! Each scenario starts from its own lab. They are the k0sctl #603 cases and the safety rules of
//! testdata/reference/DESIGN.md, run through the k0sform binary exactly as an operator would.

use crate::support::e2e::{self, Cluster};
use crate::support::lab::{self, LabOptions, SpecOptions};
use crate::support::prereq::require_lab;
use std::collections::{BTreeMap, BTreeSet};

const THREE_PLUS_TWO: &[(&str, &str)] = &[
    ("c1", "controller"),
    ("c2", "controller"),
    ("c3", "controller"),
    ("w1", "worker"),
    ("w2", "worker"),
];

const THREE_PLUS_ONE: &[(&str, &str)] = &[
    ("c1", "controller"),
    ("c2", "controller"),
    ("c3", "controller"),
    ("w1", "worker"),
];

fn peer_urls(c: &Cluster, names: &[&str]) -> BTreeSet<String> {
    names
        .iter()
        .map(|n| format!("http://{}:2380", c.lab.address(n)))
        .collect()
}

/// Every listed controller sees exactly `expected` members (by peer URL) and one identity.
#[track_caller]
fn assert_one_cluster(c: &Cluster, controllers: &[&str], expected: &[&str]) -> String {
    assert_one_cluster_of(c, controllers, peer_urls(c, expected))
}

/// Every listed controller sees exactly the members at the peer URLs `want`, and one identity.
#[track_caller]
fn assert_one_cluster_of(c: &Cluster, controllers: &[&str], want: BTreeSet<String>) -> String {
    let mut uids = BTreeSet::new();
    for name in controllers {
        let seen: BTreeSet<String> = c.members(name).into_values().collect();
        assert_eq!(seen, want, "{name} lists other members");
        uids.insert(c.uid(name));
    }
    assert_eq!(uids.len(), 1, "controllers disagree on identity: {uids:?}");
    uids.into_iter().next().unwrap_or_default()
}

/// Run `plan` with `args` and prove it changed nothing: the files k0sform could touch on every
/// host, whether k0s runs there, and etcd membership as every answering controller sees it.
#[track_caller]
fn plan_changes_nothing(c: &Cluster, args: &[&str]) -> e2e::Run {
    let world = || -> Vec<String> {
        c.lab
            .hosts()
            .iter()
            .filter(|h| c.lab.is_on(&h.name))
            .map(|h| {
                let members = c
                    .lab
                    .ssh(&h.name, "timeout 10 k0s etcd member-list 2>/dev/null");
                format!(
                    "{}\n{}\n{}",
                    h.name,
                    c.host_snapshot(&h.name),
                    lab::stdout(&members)
                )
            })
            .collect()
    };
    let before = world();
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    let r = c.run(&all);
    assert_eq!(
        before,
        world(),
        "`plan` changed a host or etcd\n{}",
        r.text()
    );
    r
}

/// Wait until the controller's API answers `/readyz` (a cluster started by hand).
fn wait_api_ready(c: &Cluster, name: &str) {
    c.eventually(60, &format!("{name} ready"), || {
        c.lab
            .ssh(
                name,
                "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get --raw=/readyz",
            )
            .status
            .success()
    });
}

/// Point the spec of `hosts` at v1.33.5 (the double of that version as k0sBinaryPath) and
/// plan: every host upgrades, and planning changed nothing.
#[track_caller]
fn plan_upgrade_to_v1_33_5(c: &mut Cluster, hosts: &[&str]) -> e2e::Run {
    let newer = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(newer);
    c.write_spec(hosts);
    let r = plan_changes_nothing(c, &[]);
    r.expect(0)
        .contains("v1.33.4+k0s.0 → v1.33.5+k0s.0")
        .contains(&format!("Plan: 0 to add, {} to change", hosts.len()));
    r
}

fn bootstrap(c: &Cluster) {
    c.apply().contains("Apply complete");
}

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

/// Seed scenario 1: a controller left etcd and was reset by hand: apply rejoins it.
#[test]
fn controller_that_left_and_was_reset_by_hand_rejoins() {
    require_lab!();
    let c = Cluster::new(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
    ]);
    bootstrap(&c);
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    // As an operator would: etcd refuses a removal within seconds of the last membership
    // change (its strict reconfiguration check, "unhealthy cluster"); try again until it takes.
    // A leave can also take effect and still fail ("etcdserver: server stopped": c1's etcd
    // stops as it leaves, before it answers), so what counts is the member list.
    c.eventually(30, "c1 to leave etcd", || {
        c.lab.ssh("c1", "k0s etcd leave").status.success() || !c.members("c2").contains_key("c1")
    });
    c.lab.ssh_ok("c1", "k0s stop && k0s reset");
    c.eventually(30, "c1 gone from the member list", || {
        !c.members("c2").contains_key("c1")
    });
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("c1")
        .contains("left the cluster");
    let old_id = c.state_host("c1").expect("c1")["etcd"]["member_id"].clone();
    c.apply();
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    let new_id = c.state_host("c1").expect("c1")["etcd"]["member_id"].clone();
    assert_ne!(
        new_id, old_id,
        "the earlier member's ID was recorded for c1"
    );
    assert_eq!(
        new_id.as_str(),
        Some(etcd_member_id(&c, "c2", "c1").as_str())
    );
}

/// The member ID the EtcdMember object `name` shows, asked on `via`.
fn object_member_id(c: &Cluster, via: &str, name: &str) -> Option<String> {
    let out = c.lab.ssh_ok(
        via,
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf timeout 20 k0s kubectl --data-dir=/var/lib/k0s get etcdmembers -o json",
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("EtcdMember list JSON");
    v["items"]
        .as_array()?
        .iter()
        .find(|o| o["metadata"]["name"] == name)?["status"]["memberID"]
        .as_str()
        .map(String::from)
}

/// The ID etcd itself gives member `name` (hex, as k0s writes it), asked with etcdctl on `via`.
fn etcd_member_id(c: &Cluster, via: &str, name: &str) -> String {
    let out = c.lab.ssh_ok(
        via,
        &format!(
            "ETCDCTL_API=3 etcdctl --endpoints=http://{}:2379 member list -w json",
            c.lab.address(via)
        ),
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("etcdctl JSON");
    let m = v["members"].as_array().expect("members");
    let id = m
        .iter()
        .find(|x| x["name"] == name)
        .expect("a member so named")["ID"]
        .as_u64()
        .expect("a numeric ID");
    format!("{id:x}")
}

/// Seed scenario 2: a controller removed from the spec is removed from the cluster in one run;
/// adding it back joins it fresh.
#[test]
fn controller_removed_from_spec_leaves_the_cluster_then_rejoins_fresh() {
    require_lab!();
    let c = Cluster::new(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
        ("w1", "worker"),
    ]);
    bootstrap(&c);
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    let old_id = c.state_host("c1").expect("c1")["etcd"]["member_id"].clone();

    c.write_spec(&["c2", "c3", "w1"]);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("no longer in")
        .contains("Plan: 0 to add, 0 to change, 0 to replace, 1 to remove");
    c.apply();
    assert_eq!(assert_one_cluster(&c, &["c2", "c3"], &["c2", "c3"]), uid);
    assert!(!c.objects("c2", "etcdmembers").contains(&"c1".to_string()));
    assert!(!c.objects("c2", "controlnodes").contains(&"c1".to_string()));
    assert!(c.state_host("c1").is_none(), "state still has c1");
    // The host was reset: no etcd data, not running.
    let snap = c.host_snapshot("c1");
    assert!(snap.trim_end().ends_with("stopped"), "{snap}");
    assert!(
        !c.lab
            .exec("c1", "test -e /var/lib/k0s/etcd")
            .status
            .success(),
        "c1 still has etcd data"
    );

    c.write_spec(&["c1", "c2", "c3", "w1"]);
    c.apply();
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    let new_id = c.state_host("c1").expect("c1")["etcd"]["member_id"].clone();
    assert_ne!(old_id, new_id, "c1 rejoined with its old member id");
}

/// Seed scenario 3: a controller wiped and rebuilt at the same address is replaced in one apply;
/// never a second cluster. Once with `-replace`, once with a new host key pin.
#[test]
fn wiped_controller_is_replaced_never_a_second_cluster() {
    require_lab!();
    let c = Cluster::new(THREE_PLUS_TWO);
    bootstrap(&c);
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    let workers_before: Vec<String> = ["w1", "w2"].iter().map(|n| c.host_snapshot(n)).collect();

    c.lab.wipe("c1");
    // Without -replace the changed host key is refused, nothing changes.
    let r = plan_changes_nothing(&c, &[]);
    r.expect(3).contains("host key");
    plan_changes_nothing(&c, &["-replace", &c.lab.address("c1")])
        .expect(0)
        .contains("replaced")
        .contains("machine-id");
    c.run(&["apply", "-auto-approve", "-replace", &c.lab.address("c1")])
        .expect(0);
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    let rec = c.state_host("c1").expect("c1");
    assert_eq!(rec["machine_id"], c.lab.host("c1").machine_id.as_str());
    assert_eq!(
        rec["host_key"],
        c.lab.host("c1").host_key_fingerprint.as_str()
    );
    let workers_after: Vec<String> = ["w1", "w2"].iter().map(|n| c.host_snapshot(n)).collect();
    assert_eq!(workers_before, workers_after, "workers were touched");

    // Again with a pin of the new key instead of -replace.
    c.lab.wipe("c2");
    c.lab.write_spec_with(
        &c.spec,
        &["c1", "c2", "c3", "w1", "w2"],
        &SpecOptions::default().pin_host_keys(true),
    );
    c.apply();
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
}

/// Issue 30: `ssh.hostKey` as k0sctl writes it (`<type> <base64>`, the key itself, compared
/// as text by rig's `StaticKeyCallback`) pins that key: a rebuilt worker pinned with another
/// host's key is refused and nothing changes; pinned with its new key it is replaced.
#[test]
fn host_key_pinned_in_k0sctl_form_accepts_only_that_key() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&c);
    c.lab.wipe("w1");
    let key = |n: &str| {
        let pub_file = c
            .lab
            .dir()
            .join("hosts")
            .join(n)
            .join("ssh_host_ed25519_key.pub");
        let text = std::fs::read_to_string(pub_file).unwrap();
        text.split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let addr = c.lab.address("w1");
    let pin = |k: &str| {
        c.write_spec(&["c1", "w1"]);
        let spec = std::fs::read_to_string(&c.spec).unwrap();
        let at = format!("      address: {addr}\n");
        assert!(spec.contains(&at), "{spec}");
        std::fs::write(
            &c.spec,
            spec.replace(&at, &format!("{at}      hostKey: \"{k}\"\n")),
        )
        .unwrap();
    };
    let state_before = std::fs::read(&c.state).unwrap();
    pin(&key("c1"));
    c.run(&["apply", "-auto-approve"])
        .expect(3)
        .contains(&format!(
            "w1 ({addr}) offered another SSH host key than recorded"
        ));
    assert_eq!(std::fs::read(&c.state).unwrap(), state_before);
    assert!(c.host_snapshot("w1").trim_end().ends_with("stopped"));

    pin(&key("w1"));
    c.apply().contains("Apply complete");
    assert_eq!(
        c.state_host("w1").expect("w1")["host_key"],
        c.lab.host("w1").host_key_fingerprint.as_str()
    );
    c.eventually(30, "w1 Ready again", || {
        c.nodes("c1").get("w1") == Some(&true)
    });
}

/// Scenario 6: a worker removed from the spec is drained, deleted and reset; a wiped worker is
/// re-joined.
#[test]
fn worker_removed_and_worker_wiped() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker"), ("w2", "worker")]);
    bootstrap(&c);
    c.write_spec(&["c1", "w1"]);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("- worker w2")
        .contains("drained and deleted");
    c.apply();
    let nodes = c.nodes("c1");
    assert!(!nodes.contains_key("w2"), "w2 Node still there: {nodes:?}");
    assert!(c.host_snapshot("w2").trim_end().ends_with("stopped"));
    assert!(c.state_host("w2").is_none());

    c.lab.wipe("w1");
    c.run(&["apply", "-auto-approve", "-replace", &c.lab.address("w1")])
        .expect(0);
    c.eventually(30, "w1 Ready again", || {
        c.nodes("c1").get("w1") == Some(&true)
    });
    assert_eq!(
        c.state_host("w1").expect("w1")["machine_id"],
        c.lab.host("w1").machine_id.as_str()
    );
}

/// Scenario 7 and the plan refusals: unsafe requests are refused with nothing changed.
#[test]
fn unsafe_requests_are_refused_and_change_nothing() {
    require_lab!();
    let c = Cluster::new(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
    ]);
    bootstrap(&c);
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
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
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

/// Scenario 10: a non-root SSH user with sudo, and hosts reached through a bastion.
#[test]
fn sudo_user_and_bastion() {
    require_lab!();
    let c = Cluster::with(
        &[("b1", "bastion"), ("c1", "controller"), ("w1", "worker")],
        LabOptions::default()
            .sudo_user("c1")
            .sudo_user("w1")
            .bastion("b1"),
        SpecOptions {
            sudo_user: true,
            via_bastion: true,
            // Hooks run as the login user, not through sudo (as k0sctl's do).
            host_yaml: [(
                "w1".to_string(),
                "hooks:\n  install:\n    after: ['id -un > /tmp/k0sform-hook-user']\n".to_string(),
            )]
            .into(),
            ..SpecOptions::default()
        },
    );
    c.lab
        .exec_ok("c1", "printf 'count_starts 1\\n' > /etc/k0s-lab/k0s-knobs");
    bootstrap(&c);
    assert_one_cluster(&c, &["c1"], &["c1"]);
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    // w1's join waited on a Node watch run through sudo and the bastion, gone with its session.
    let starts = c.lab.exec_ok("c1", "cat /run/k0s-lab/starts");
    assert!(starts.contains("--watch-only"), "{starts}");
    assert_eq!(node_watches_on(&c, "c1"), Vec::<String>::new());
    assert_eq!(
        c.lab.exec_ok("w1", "cat /tmp/k0sform-hook-user"),
        format!("{}\n", lab::SUDO_USER)
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    // The hosts are reached only through the bastion: without it no controller answers, and
    // k0sform refuses to plan rather than take the cluster for gone.
    c.lab.power_off("b1");
    c.run(&["plan"])
        .expect(3)
        .contains(&c.lab.address("c1"))
        .contains("unreachable");
}

/// One controller, c1, reached only through the bastion b1.
fn controller_behind_bastion() -> Cluster {
    Cluster::with(
        &[("b1", "bastion"), ("c1", "controller")],
        LabOptions::default().bastion("b1"),
        SpecOptions {
            via_bastion: true,
            ..SpecOptions::default()
        },
    )
}

/// Issue 14, item 3: a bastion's host key is shown on first contact, refused unpinned with
/// `-trust-new-host-keys=false`, recorded in the state, checked on later runs (a rebuilt bastion
/// is refused with exit 3 naming it, nothing changes), and accepted again only with `-replace`
/// naming the bastion. A state from before bastions were recorded (format 2) still loads.
#[test]
fn bastion_host_key_is_recorded_and_checked() {
    require_lab!();
    let c = controller_behind_bastion();
    let b = c.lab.host("b1");
    let addr = b.address.clone();
    let old_fp = b.host_key_fingerprint.clone();
    assert!(old_fp.starts_with("SHA256:"), "{old_fp}");

    // First contact: shown, and refused on request.
    c.run(&["plan"])
        .expect(0)
        .contains(&format!(
            "bastion ({addr}): first contact: trusting {old_fp}"
        ))
        .contains("1 bastion host key to record");
    c.run(&["plan", "-trust-new-host-keys=false"])
        .expect(3)
        .contains(&format!("bastion {addr}: offers {old_fp}"));

    // Recorded by apply; quiet and strict from then on.
    bootstrap(&c);
    let st = c.state_json();
    assert_eq!(st["format_version"], 3);
    assert_eq!(st["bastions"][0]["address"], addr.as_str());
    assert_eq!(st["bastions"][0]["host_key"], old_fp.as_str());
    c.run(&["state", "list"])
        .expect(0)
        .contains(&format!("{addr}  {old_fp}"));
    let r = c.run(&["plan", "-detailed-exitcode", "-trust-new-host-keys=false"]);
    r.expect(0);
    assert!(!r.text().contains("first contact"), "{}", r.text());

    // A state written before bastions were recorded (format 2) loads: the bastion is a first
    // contact again.
    let mut v2 = c.state_json();
    v2["format_version"] = 2.into();
    v2.as_object_mut().unwrap().remove("bastions");
    let old_state = c.lab.dir().join("format2.state.json");
    std::fs::write(&old_state, serde_json::to_string_pretty(&v2).unwrap()).unwrap();
    c.run_with_state(&old_state, &["plan"])
        .expect(0)
        .contains(&format!(
            "bastion ({addr}): first contact: trusting {old_fp}"
        ));

    // The bastion is rebuilt (new host key): refused, naming it; the state is left alone.
    c.lab.wipe("b1");
    let new_fp = c.lab.host("b1").host_key_fingerprint;
    assert_ne!(new_fp, old_fp);
    let serial = c.state_serial();
    c.run(&["plan"])
        .expect(3)
        .contains(&format!("bastion {addr}"))
        .contains(&format!("{old_fp} recorded, {new_fp} offered"));
    c.run(&["apply", "-auto-approve"])
        .expect(3)
        .contains(&format!("bastion {addr}"));
    // -replace naming the host behind it does not accept the bastion's key.
    c.run(&["plan", "-replace", &c.lab.address("c1")])
        .expect(3)
        .contains(&format!("bastion {addr}"));
    assert_eq!(c.state_serial(), serial, "a refused run wrote the state");

    // -replace naming the bastion trusts the new key (shown) and records it.
    c.run(&["plan", "-replace", &addr])
        .expect(0)
        .contains(&format!(
            "bastion ({addr}): first contact: trusting {new_fp}"
        ));
    c.run(&["apply", "-auto-approve", "-replace", &addr])
        .expect(0);
    assert_eq!(c.state_json()["bastions"][0]["host_key"], new_fp.as_str());
    c.run(&["plan", "-detailed-exitcode", "-trust-new-host-keys=false"])
        .expect(0);
}

/// Issue 28, item 10: with `-trust-new-host-keys=false` a host whose key nothing records or
/// pins is refused (exit 3) right after the key exchange, before any command runs on it: its
/// sshd starts no session, and the probe does not get to generate /etc/k0s/k0sform-machine-id
/// on a host without a machine-id. By default the same host is trusted and probed.
#[test]
fn first_contact_is_refused_before_any_command_runs() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    let names = ["c1", "w1"];
    for n in names {
        // No machine-id anywhere: the probe would write one.
        c.lab.hide(n, &["/var/lib/dbus/machine-id"]);
        c.lab
            .exec_ok(n, ": > /etc/machine-id; rm -f /etc/k0s/k0sform-machine-id");
    }
    let generated = |n: &str| {
        c.lab
            .exec(n, "test -e /etc/k0s/k0sform-machine-id")
            .status
            .success()
    };
    let sessions = |n: &str| c.lab.sshd_log(n).matches("Starting session").count();
    let before: Vec<usize> = names.iter().map(|n| sessions(n)).collect();
    for args in [
        &["plan", "-trust-new-host-keys=false"][..],
        &["apply", "-auto-approve", "--trust-new-host-keys", "false"][..],
    ] {
        let r = c.run(args);
        r.expect(3).contains("-trust-new-host-keys=false");
        for n in names {
            let h = c.lab.host(n);
            r.contains(&format!("{}: offers {}", h.address, h.host_key_fingerprint));
        }
    }
    for (n, before) in names.iter().zip(&before) {
        assert!(
            c.lab.sshd_log(n).contains("Accepted publickey"),
            "{n}: {}",
            c.lab.sshd_log(n)
        );
        assert_eq!(
            sessions(n),
            *before,
            "a command ran on {n}:\n{}",
            c.lab.sshd_log(n)
        );
        assert!(!generated(n), "the probe ran on {n}");
    }
    assert!(!c.state.exists(), "a refused run wrote the state");

    // Trusted by default: the probe runs (and generates the id the checks above look for).
    c.run(&["plan"])
        .expect(0)
        .contains("first contact: trusting");
    for (n, before) in names.iter().zip(&before) {
        assert!(sessions(n) > *before, "{n}: no session");
        assert!(generated(n), "{n}: no generated machine-id");
    }
}

/// `kubeconfig` and `backup` take `-trust-new-host-keys` as `plan` does: with `=false`, a
/// controller (or its bastion) whose key the state does not record is refused with exit 3,
/// naming it and the key it offered, and nothing is printed or written; by default it is
/// trusted on first contact; with every key recorded, `=false` works.
#[test]
fn kubeconfig_and_backup_refuse_first_contact_on_request() {
    require_lab!();
    let c = controller_behind_bastion();
    bootstrap(&c);
    let (c1, b1) = (c.lab.host("c1"), c.lab.host("b1"));
    // States that do not record c1's key, or the bastion's.
    let mut no_host_key = c.state_json();
    let hosts = no_host_key["hosts"].as_array_mut().expect("hosts");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert_eq!(hosts[0]["address"], c1.address.as_str());
    hosts[0]["host_key"] = "".into();
    hosts[0]
        .as_object_mut()
        .expect("host")
        .remove("host_public_key");
    let mut no_bastion_key = c.state_json();
    assert_eq!(
        no_bastion_key["bastions"][0]["address"],
        b1.address.as_str()
    );
    no_bastion_key
        .as_object_mut()
        .expect("state")
        .remove("bastions");
    let write = |name: &str, v: &serde_json::Value| {
        let p = c.lab.dir().join(name);
        std::fs::write(&p, serde_json::to_string_pretty(v).expect("json")).expect("write");
        p
    };
    let no_host_key = write("no-host-key.state.json", &no_host_key);
    let no_bastion_key = write("no-bastion-key.state.json", &no_bastion_key);
    let backups = c.lab.dir().join("backups");
    std::fs::create_dir_all(&backups).expect("mkdir");
    let out = backups.to_str().expect("utf-8");
    let kubeconfig = &["kubeconfig", "-trust-new-host-keys=false"][..];
    let backup = &["backup", "-out", out, "--trust-new-host-keys", "false"][..];
    // Refused right after the key exchange: no command runs on c1 (issue 28, item 10).
    let sessions = || c.lab.sshd_log("c1").matches("Starting session").count();
    let before = sessions();

    for args in [kubeconfig, backup] {
        let r = c.run_with_state(&no_host_key, args);
        r.expect(3)
            .contains("-trust-new-host-keys=false")
            .contains(&format!(
                "{}: offers {}",
                c1.address, c1.host_key_fingerprint
            ));
        assert!(r.stdout.is_empty(), "{args:?} printed {}", r.stdout);
        let bastion = format!("bastion {}:", b1.address);
        assert!(!r.text().contains(&bastion), "{}", r.text());
        let r = c.run_with_state(&no_bastion_key, args);
        r.expect(3).contains(&format!(
            "bastion {}: offers {}",
            b1.address, b1.host_key_fingerprint
        ));
        assert!(r.stdout.is_empty(), "{args:?} printed {}", r.stdout);
    }
    assert_eq!(
        std::fs::read_dir(&backups).expect("backups").count(),
        0,
        "a refused backup wrote an archive"
    );
    assert_eq!(
        sessions(),
        before,
        "a command ran on c1:\n{}",
        c.lab.sshd_log("c1")
    );

    // By default the unrecorded key is trusted on first contact, as before.
    let r = c.run_with_state(&no_host_key, &["kubeconfig"]);
    r.expect(0);
    let (_, _, server, _) = kubeconfig_parts(&r.stdout);
    assert_eq!(server, format!("https://{}:6443", c1.address));

    // Every key recorded: -trust-new-host-keys=false changes nothing.
    let r = c.run(kubeconfig);
    r.expect(0);
    let (_, _, server, key) = kubeconfig_parts(&r.stdout);
    assert_eq!(server, format!("https://{}:6443", c1.address));
    assert!(key.len() > 100, "{}", r.stdout);
    let r = c.run(backup);
    r.expect(0);
    let (_, archive) = backup_line(&r);
    assert!(archive.starts_with(&backups), "{}", archive.display());
    assert_eq!(mode_of(&archive), 0o600);
}

/// Issue 14, item 7: a hook line written with `${SECRET}` runs on the host with the value from
/// the environment, and the value appears in none of the plan text, `-json` plan, saved plan,
/// apply progress or `-json` events: they show the line as written. `-show-secrets` shows it.
#[test]
fn hook_secrets_from_the_environment_stay_out_of_output() {
    require_lab!();
    const SECRET: &str = "s3cr3t-Hook-Value-4711";
    let hook = "hooks:\n  install:\n    after: ['echo \"${K0SFORM_TEST_SECRET}\" > /tmp/k0sform-hook-secret']\n";
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker"), ("w2", "worker")],
        LabOptions::default(),
        SpecOptions {
            host_yaml: [
                ("w1".to_string(), hook.to_string()),
                ("w2".to_string(), hook.to_string()),
            ]
            .into(),
            ..SpecOptions::default()
        },
    );
    c.env.push(("K0SFORM_TEST_SECRET".into(), SECRET.into()));
    c.write_spec(&["c1", "w1"]);
    let written = "echo \"${K0SFORM_TEST_SECRET}\" > /tmp/k0sform-hook-secret";
    let clean = |what: &str, text: &str| {
        assert!(!text.contains(SECRET), "{what} shows the secret:\n{text}");
    };

    let r = c.run(&["plan"]);
    r.expect(0).contains(written);
    clean("plan", &r.text());
    let r = c.run(&["plan", "-json"]);
    r.expect(0).contains("${K0SFORM_TEST_SECRET}");
    clean("plan -json", &r.text());
    let saved = c.lab.dir().join("hooks.plan");
    let saved_arg = saved.to_str().unwrap();
    let r = c.run(&["plan", "-out", saved_arg]);
    r.expect(0);
    clean("plan -out", &r.text());
    let file = std::fs::read_to_string(&saved).unwrap();
    assert!(file.contains("${K0SFORM_TEST_SECRET}"), "{file}");
    clean("the saved plan", &file);

    // Applied from the saved plan: progress shows the line as written; the host ran the value.
    let r = c.run(&["apply", saved_arg]);
    r.expect(0)
        .contains(&format!("hook install.after: {written}"));
    clean("apply progress", &r.text());
    assert_eq!(
        c.lab.exec_ok("w1", "cat /tmp/k0sform-hook-secret"),
        format!("{SECRET}\n")
    );
    clean("the state", &std::fs::read_to_string(&c.state).unwrap());

    // -json events of the next apply (w2 joins and runs the hook). Asked for, the plan shows
    // the value (so the checks above would see it if it leaked).
    c.write_spec(&["c1", "w1", "w2"]);
    c.run(&["plan", "-show-secrets"]).expect(0).contains(SECRET);
    let r = c.run(&["apply", "-auto-approve", "-json"]);
    r.expect(0).contains("${K0SFORM_TEST_SECRET}");
    clean("apply -json events", &r.text());
    assert_eq!(
        c.lab.exec_ok("w2", "cat /tmp/k0sform-hook-secret"),
        format!("{SECRET}\n")
    );
}

/// Start `apply` with `args`, and kill -9 it as soon as its progress shows `marker`. Returns
/// whether the marker was seen before the run ended on its own.
fn kill_apply_at(c: &Cluster, args: &[&str], marker: &str) -> bool {
    use std::io::BufRead;
    let mut child = c
        .command(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn apply");
    let out = child.stdout.take().expect("stdout");
    let mut seen = false;
    for line in std::io::BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        if line.contains(marker) {
            seen = true;
            let _ = child.kill(); // SIGKILL
            break;
        }
    }
    let _ = child.wait();
    seen
}

/// Scenario 8: apply killed with -9 at several points of a bootstrap and of a replacement; each
/// time the next apply converges to one healthy cluster and a valid state.
#[test]
fn apply_killed_at_any_point_converges() {
    require_lab!();
    let c = Cluster::new(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
        ("w1", "worker"),
    ]);
    let mut kills = 0;
    for marker in [
        "Bootstrapping the cluster",
        "Joining the cluster as controller",
        "Joining the cluster as worker",
    ] {
        let seen = kill_apply_at(&c, &["apply", "-auto-approve"], marker);
        kills += usize::from(seen);
        // The state on disk is always a complete, parseable version.
        if c.state.exists() {
            c.run(&["state", "list"]).expect(0);
        }
        if !seen {
            break;
        }
    }
    assert!(kills >= 2, "the bootstrap was killed only {kills} times");
    c.apply();
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // A replacement killed at each of its stages, each time on a freshly wiped c1.
    let addr = c.lab.address("c1");
    for marker in [
        "Removing etcd member",
        "Joining the cluster as controller",
        "Recording the host in the state",
    ] {
        c.lab.wipe("c1");
        assert!(
            kill_apply_at(&c, &["apply", "-auto-approve", "-replace", &addr], marker),
            "the replacement never reached {marker}"
        );
        c.run(&["state", "list"]).expect(0);
        c.run(&["apply", "-auto-approve", "-replace", &addr])
            .expect(0);
        assert_eq!(
            assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
            uid,
            "after a kill at {marker}"
        );
        c.run(&["plan", "-detailed-exitcode"]).expect(0);
    }
    let rec = c.state_host("c1").expect("c1");
    assert_eq!(rec["machine_id"], c.lab.host("c1").machine_id.as_str());
    assert!(
        c.state_json()["intents"]
            .as_array()
            .is_none_or(|i| i.is_empty()),
        "intents left: {}",
        c.state_json()["intents"]
    );
}

/// Moving from k0sctl: a cluster built by hand (as k0sctl would) is adopted. `plan` shows the
/// adoption and changes nothing; `apply -refresh-only` records every identity without touching
/// a host; afterwards there is nothing to do.
#[test]
fn cluster_built_by_hand_is_adopted_with_refresh_only() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("c2", "controller"), ("w1", "worker")]);
    for h in ["c1", "c2", "w1"] {
        c.lab.install_double(h);
    }
    let a1 = c.lab.address("c1");
    c.lab.ssh_ok(
        "c1",
        &format!("mkdir -p /etc/k0s && printf 'apiVersion: k0s.k0sproject.io/v1beta1\\nkind: ClusterConfig\\nspec:\\n  storage:\\n    etcd:\\n      peerAddress: {a1}\\n' > /etc/k0s/k0s.yaml && k0s install controller --config=/etc/k0s/k0s.yaml && k0s start"),
    );
    wait_api_ready(&c, "c1");
    let ctoken = c
        .lab
        .ssh_ok("c1", "k0s token create --role=controller --expiry=30m");
    let wtoken = c
        .lab
        .ssh_ok("c1", "k0s token create --role=worker --expiry=30m");
    let a2 = c.lab.address("c2");
    c.lab.ssh_ok(
        "c2",
        &format!("mkdir -p /etc/k0s && printf '%s' '{}' > /etc/k0s/k0stoken && printf 'apiVersion: k0s.k0sproject.io/v1beta1\\nkind: ClusterConfig\\nspec:\\n  storage:\\n    etcd:\\n      peerAddress: {a2}\\n' > /etc/k0s/k0s.yaml && k0s install controller --config=/etc/k0s/k0s.yaml --token-file=/etc/k0s/k0stoken && k0s start", ctoken.trim()),
    );
    c.lab.ssh_ok(
        "w1",
        &format!("mkdir -p /etc/k0s && printf '%s' '{}' > /etc/k0s/k0stoken && k0s install worker --token-file=/etc/k0s/k0stoken && k0s start", wtoken.trim()),
    );
    c.eventually(60, "two members", || c.members("c1").len() == 2);
    c.eventually(60, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    let uid = assert_one_cluster(&c, &["c1", "c2"], &["c1", "c2"]);

    let snaps: Vec<String> = ["c1", "c2", "w1"]
        .iter()
        .map(|n| c.host_snapshot(n))
        .collect();
    c.run(&["plan"])
        .expect(0)
        .contains("<=")
        .contains("found running");
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
    assert_eq!(
        snaps,
        ["c1", "c2", "w1"]
            .iter()
            .map(|n| c.host_snapshot(n))
            .collect::<Vec<_>>(),
        "adoption changed a host"
    );
    let state = c.state_json();
    assert_eq!(state["cluster"]["uid"], uid.as_str());
    for h in c.lab.hosts() {
        let rec = c.state_host(&h.name).expect("host adopted into the state");
        assert_eq!(rec["machine_id"], h.machine_id.as_str());
        assert_eq!(rec["host_key"], h.host_key_fingerprint.as_str());
    }
    assert!(c.state_host("c2").expect("c2")["etcd"]["member_id"].is_string());
}

/// Ctrl-C during an apply: running steps finish, nothing new starts, the state is saved and the
/// run says what it did; the next apply finishes the job.
#[test]
fn interrupted_apply_stops_cleanly_and_resumes() {
    require_lab!();
    use std::io::BufRead;
    let c = Cluster::new(&[("c1", "controller"), ("c2", "controller"), ("w1", "worker")]);
    let mut child = c
        .command(&["apply", "-auto-approve"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn apply");
    let out = child.stdout.take().expect("stdout");
    let mut lines = Vec::new();
    let mut interrupted_at = None;
    let mut reader = std::io::BufReader::new(out);
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        lines.push(line.clone());
        if interrupted_at.is_none() && line.contains("Bootstrapping the cluster") {
            // SIGINT, as a terminal's Ctrl-C would send.
            let pid = i32::try_from(child.id()).expect("pid");
            assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
            interrupted_at = Some(lines.len());
        }
        line.clear();
    }
    let status = child.wait().expect("wait");
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .ok();
    let all = format!("{}{err}", lines.concat());
    assert_eq!(status.code(), Some(1), "{all}");
    let after = &lines[interrupted_at.expect("the bootstrap never started")..];
    assert!(
        // A start line ends with "..."; so does a "Still …" line, which is not a start.
        !after
            .iter()
            .any(|l| l.trim_end().ends_with("...") && !l.contains(": Still ")),
        "a step started after Ctrl-C:\n{all}"
    );
    assert!(
        all.contains("Apply cancelled") && all.contains("interrupted"),
        "{all}"
    );
    if c.state.exists() {
        c.run(&["state", "list"]).expect(0);
    }
    // The next run completes the cluster.
    c.apply();
    assert_one_cluster(&c, &["c1", "c2"], &["c1", "c2"]);
}

/// Saved plans: `apply FILE` runs exactly the reviewed plan, probing as it was made (its
/// `-replace`), and refuses one that is stale (state, spec or a host identity moved) or altered.
#[test]
fn saved_plans_apply_exactly_or_refuse_when_stale() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker"), ("w2", "worker")]);
    c.write_spec(&["c1", "w1"]);
    let dir = c.lab.dir().to_path_buf();
    let p = |n: &str| dir.join(n).display().to_string();

    // Made before any state existed, applied as is.
    c.run(&["plan", "-out", &p("p1.json")])
        .expect(0)
        .contains("Saved the plan");
    c.run(&["apply", &p("p1.json")])
        .expect(0)
        .contains("Apply complete");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // Stale: the spec changed after the plan was saved.
    c.write_spec(&["c1", "w1", "w2"]);
    c.run(&["plan", "-out", &p("p2.json")]).expect(0);
    c.write_spec(&["c1", "w1"]);
    c.run(&["apply", &p("p2.json")])
        .expect(5)
        .contains("spec changed");
    c.write_spec(&["c1", "w1", "w2"]);

    // Altered: any edit breaks the seal.
    let text = std::fs::read_to_string(p("p2.json")).expect("saved plan");
    std::fs::write(
        p("p3.json"),
        text.replacen("\"worker\"", "\"controller\"", 1),
    )
    .expect("write");
    c.run(&["apply", &p("p3.json")])
        .expect(5)
        .contains("altered");

    // Stale: a host was rebuilt after the plan was saved.
    c.lab.wipe("w2");
    c.run(&["apply", &p("p2.json")])
        .expect(5)
        .contains("machine-id");
    // A fresh plan of the rebuilt host applies.
    c.run(&["plan", "-out", &p("p4.json")]).expect(0);
    c.run(&["apply", &p("p4.json")]).expect(0);

    // A plan made with -replace is applied only with the same -replace on the command line: a
    // plan file cannot switch off a host-key check by itself.
    c.lab.wipe("w1");
    let w1 = c.lab.address("w1");
    c.run(&["plan", "-replace", &w1, "-out", &p("p5.json")])
        .expect(0)
        .contains("replaced");
    c.run(&["apply", &p("p5.json")])
        .expect(5)
        .contains(&format!(
            "made with -replace {w1} but apply was given no -replace"
        ));
    c.run(&["apply", "-replace", &w1, &p("p5.json")]).expect(0);
    // Applying it a second time: the state moved on.
    c.run(&["apply", "-replace", &w1, &p("p5.json")])
        .expect(5)
        .contains("serial");
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// A saved plan is only a review artefact (issue 14, High 1). Anyone who can write the file can
/// recompute its sha256 seal: steps swapped for a hook line that writes a file, resealed, must
/// not run (exit 5, the file not created anywhere); `options.replace` in a file, resealed, must
/// not accept a host's new key without `-replace` on the command line.
#[test]
fn tampered_and_resealed_saved_plans_run_nothing() {
    require_lab!();
    use k0sform::plan::{SavedPlan, Step, StepKind};
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker"), ("w2", "worker")]);
    c.write_spec(&["c1", "w1"]);
    c.apply();
    let dir = c.lab.dir().to_path_buf();
    let p = |n: &str| dir.join(n).display().to_string();
    let marker = dir.join("pwned");
    let reseal = |from: &str, to: &str, edit: &dyn Fn(&mut SavedPlan)| {
        let text = std::fs::read_to_string(p(from)).expect("saved plan");
        let mut saved = SavedPlan::from_json(&text).expect("saved plan JSON");
        edit(&mut saved);
        saved.seal();
        std::fs::write(p(to), saved.to_json()).expect("write plan");
    };

    // Steps replaced by a hook line on c1, resealed.
    c.write_spec(&["c1", "w1", "w2"]);
    c.run(&["plan", "-out", &p("good.json")]).expect(0);
    let serial = c.state_serial();
    let c1 = c.lab.host("c1");
    let line = format!("id > {}", marker.display());
    reseal("good.json", "evil.json", &|s| {
        let host = k0sform::hostid::HostId::new(c1.address.clone(), c1.port);
        s.plan.steps = vec![Step {
            id: 0,
            host,
            kind: StepKind::RunHooks {
                action: "apply".into(),
                stage: "before".into(),
                lines: vec![line.clone()],
            },
            after: vec![],
        }];
    });
    let r = c.run(&["apply", "-auto-approve", &p("evil.json")]);
    r.expect(5)
        .contains("is not the plan the spec, the state and the hosts give now");
    assert!(!r.text().contains("Apply complete"), "{}", r.text());
    assert!(!marker.exists(), "the injected hook line ran");
    let on_host = c.lab.exec("c1", &format!("test -e {}", marker.display()));
    assert!(
        !on_host.status.success(),
        "the injected hook line ran on c1"
    );
    assert_eq!(c.state_serial(), serial, "the state was written");
    // The untampered file still applies.
    c.run(&["apply", &p("good.json")]).expect(0);

    // w1 rebuilt (for all k0sform can tell, a man in the middle): a plan file that says
    // `-replace w1` is not enough to trust its new key.
    c.lab.wipe("w1");
    let w1 = c.lab.address("w1");
    let key_before = c.state_host("w1").expect("w1 in state")["host_key"].clone();
    c.run(&["plan", "-replace", &w1, "-out", &p("replace.json")])
        .expect(0);
    reseal("replace.json", "replace-evil.json", &|s| {
        assert_eq!(s.options.replace, vec![w1.clone()]);
    });
    c.run(&["apply", "-auto-approve", &p("replace-evil.json")])
        .expect(5)
        .contains("a plan file cannot switch off checks");
    assert_eq!(
        c.state_host("w1").expect("w1 in state")["host_key"],
        key_before
    );
}

/// A state file must not run commands here (issue 14, High 2): a removed host's recorded access
/// with a ProxyCommand is reached without it, and the plan says the option was ignored.
#[test]
fn state_recorded_proxy_command_is_ignored_and_reported() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    c.apply();
    c.write_spec(&["c1"]);
    let marker = c.lab.dir().join("pwned");
    let mut state = c.state_json();
    let addr = c.lab.address("w1");
    for h in state["hosts"].as_array_mut().expect("hosts") {
        if h["address"] == addr.as_str() {
            h["access"]["ssh"]["options"] = serde_json::json!({
                "ProxyCommand": format!("sh -c 'id > {}'", marker.display())
            });
        }
    }
    std::fs::write(
        &c.state,
        serde_json::to_string_pretty(&state).expect("json"),
    )
    .expect("write");
    c.run(&["plan"])
        .expect(0)
        .contains("access.ssh.options.ProxyCommand")
        .contains("is ignored: a state may only set")
        .contains("will be removed");
    assert!(!marker.exists(), "the state's ProxyCommand ran");
}

/// Issue 28, items 2 and 5, with an ssh client as old as CVE-2023-51385 (`testdata/old-ssh/ssh`,
/// first in PATH: it expands `%h` in a ProxyCommand to the destination as given and runs the line
/// with `sh -c`). A host behind a bastion is planned through it with the target named in the
/// ProxyCommand, never `%h`. A state that names a host by an address carrying a quote and
/// `$(…)`, recorded as an `openSSH:` host behind the bastion and logging in as another user (no
/// `ssh -G` first), is refused when read, naming the file and the field: the plan contacts no
/// host, nothing of the address runs here and the file is left as it was.
#[test]
fn hostile_state_address_runs_nothing_through_an_old_ssh_client() {
    require_lab!();
    let mut c = controller_behind_bastion();
    let stand_in = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/old-ssh");
    let log = c.lab.dir().join("old-ssh.log");
    let path = std::env::var("PATH").unwrap_or_default();
    c.env
        .push(("PATH".into(), format!("{}:{path}", stand_in.display())));
    c.env
        .push(("OLD_SSH_LOG".into(), log.display().to_string()));
    let c1 = c.lab.host("c1");
    c.run(&["plan"]).expect(0).contains("bootstrap");
    let seen = std::fs::read_to_string(&log).expect("the stand-in ran");
    assert!(
        seen.contains(&format!("-W '[{}]:{}'", c1.address, c1.port)),
        "{seen}"
    );
    assert!(!seen.contains("%h"), "{seen}");

    let marker = c.lab.dir().join("pwned");
    let hostile = format!("x'$(touch${{IFS}}{})'", marker.display());
    let loaded = k0sform::spec::load(std::slice::from_ref(&c.spec)).expect("spec");
    let mut ssh = loaded.spec.hosts[0].ssh.clone();
    assert!(ssh.bastion.is_some(), "c1 is behind the bastion");
    ssh.address = hostile.clone();
    ssh.port = 22;
    ssh.user = "k0sform".into();
    ssh.openssh = true;
    let mut state = k0sform::state::State::new();
    state.upsert_host(k0sform::state::HostState {
        address: hostile,
        port: 22,
        role: k0sform::spec::Role::Worker,
        node_name: Some("w9".into()),
        machine_id: "0123456789abcdef0123456789abcdef".into(),
        host_key: c1.host_key_fingerprint.clone(),
        host_public_key: None,
        etcd: None,
        k0s_version: None,
        install_flags_sha256: None,
        config_sha256: None,
        k0s_binary: None,
        access: Some(k0sform::state::HostAccess {
            ssh,
            k0s_install_path: "/usr/local/bin/k0s".into(),
            data_dir: "/var/lib/k0s".into(),
            kubelet_root_dir: None,
            cluster_address: None,
        }),
    });
    let text = state.to_canonical_json().expect("json");
    std::fs::write(&c.state, &text).expect("write state");
    std::fs::remove_file(&log).expect("log");
    for args in [&["plan"][..], &["apply", "-auto-approve"]] {
        c.run(args)
            .expect(1)
            .contains(&format!(
                "state file {} is not a valid k0sform state: hosts[0].address: `x'$(touch",
                c.state.display()
            ))
            .contains("is neither an IP address nor a DNS name");
        assert!(
            !marker.exists(),
            "{args:?}: the state's address ran a command here"
        );
        assert!(!log.exists(), "{args:?}: ssh was started");
        assert_eq!(std::fs::read_to_string(&c.state).expect("state"), text);
    }
}

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

/// Hooks run as the SSH user around what they name (apply.* around everything the run does on
/// the host, install.* around the join), only on hosts the run changes; a failing hook fails its
/// step, and nothing after it runs on that host.
#[test]
fn hooks_run_around_their_steps_and_only_on_changes() {
    require_lab!();
    const LOG: &str = "/root/k0sform-hooks.log";
    // Each hook appends its name, whether the worker service is installed, and the user.
    let rec = |what: &str| {
        format!(
            "echo \"{what} $(test -e /etc/systemd/system/k0sworker.service && echo installed || echo absent) $(id -un)\" >> {LOG}"
        )
    };
    let mut host_yaml = std::collections::BTreeMap::new();
    host_yaml.insert(
        "w1".to_string(),
        format!(
            "hooks:\n  apply:\n    before: ['{}']\n    after: ['{}']\n  install:\n    before: ['{}']\n    after: ['{}']\n  reset:\n    before: ['{}']\n",
            rec("apply.before"),
            rec("apply.after"),
            rec("install.before"),
            rec("install.after"),
            rec("reset.before"),
        ),
    );
    host_yaml.insert(
        "w2".to_string(),
        format!(
            "hooks:\n  install:\n    before: ['echo w2-before >> {LOG}; exit 3']\n    after: ['echo w2-after >> {LOG}']\n"
        ),
    );
    let c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker"), ("w2", "worker")],
        LabOptions::default(),
        SpecOptions {
            host_yaml,
            ..SpecOptions::default()
        },
    );
    c.write_spec(&["c1", "w1"]);
    c.run(&["plan"])
        .expect(0)
        .contains("hooks apply.before run: echo")
        .contains("hooks install.after run: echo");
    c.lab.exec_ok("w1", &format!("test ! -e {LOG}"));
    c.apply()
        .contains("Running the install.before hooks (1 line)")
        .contains("Apply complete");
    let log = |h: &str| c.lab.exec_ok(h, &format!("cat {LOG} 2>/dev/null || true"));
    assert_eq!(
        log("w1"),
        "apply.before absent root\ninstall.before absent root\ninstall.after installed root\napply.after installed root\n"
    );
    assert_eq!(c.nodes("c1").get("w1"), Some(&true));

    // Nothing to change: no hook runs.
    c.apply();
    assert_eq!(log("w1").lines().count(), 4, "hooks ran without changes");

    // A failing install.before: the join never starts, install.after never runs.
    c.write_spec(&["c1", "w1", "w2"]);
    let r = c.run(&["apply", "-auto-approve"]);
    r.expect(1).contains(
        "hook install.before `echo w2-before >> /root/k0sform-hooks.log; exit 3` failed (exit 3)",
    );
    assert_eq!(log("w2"), "w2-before\n");
    c.lab
        .exec_ok("w2", "test ! -e /etc/systemd/system/k0sworker.service");
    assert_eq!(log("w1").lines().count(), 4, "w1 had nothing to change");
}

/// Issue 30: `connect.after` hooks run during `apply`, first on each host the apply changes (as
/// k0sctl runs them right after connecting, phase/detect_os.go), never during `plan`; a plan
/// with nothing to change on a host lists its apply and connect hooks as not run.
#[test]
fn connect_after_hooks_run_during_apply_not_during_plan() {
    require_lab!();
    const LOG: &str = "/root/k0sform-connect.log";
    let mut host_yaml = std::collections::BTreeMap::new();
    host_yaml.insert(
        "w1".to_string(),
        format!(
            "hooks:\n  connect:\n    after: ['echo \"connect.after $(test -e /etc/systemd/system/k0sworker.service && echo installed || echo absent)\" >> {LOG}']\n  apply:\n    before: ['echo apply.before >> {LOG}']\n"
        ),
    );
    let c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            host_yaml,
            ..SpecOptions::default()
        },
    );
    let log = || {
        c.lab
            .exec_ok("w1", &format!("cat {LOG} 2>/dev/null || true"))
    };
    c.run(&["plan"])
        .expect(0)
        .contains("hooks connect.after run: echo");
    assert_eq!(log(), "", "plan ran a hook");
    c.apply().contains("Apply complete");
    assert_eq!(log(), "connect.after absent\napply.before\n");
    // Nothing changes on w1: its hooks are listed as not run, and do not run.
    let addr = c.lab.address("w1");
    c.run(&["plan"])
        .expect(0)
        .contains("No changes.")
        .contains(&format!("w1 ({addr}): connect.after, apply.before"));
    c.apply();
    assert_eq!(log().lines().count(), 2, "hooks ran without changes");
}

/// A host that leaves the spec is reached and reset as its own spec entry said when it was
/// recorded: its login user, and its k0s paths, not the first host's or the defaults.
#[test]
fn removed_host_is_reset_with_its_own_login_and_paths() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default().sudo_user("w1"),
        SpecOptions::default(),
    );
    c.spec_opts.host_yaml.insert(
        "w1".to_string(),
        "k0sInstallPath: /opt/k0s/bin/k0s\ndataDir: /srv/k0s\n".to_string(),
    );
    c.write_spec(&["c1", "w1"]);
    // w1 logs in as the sudo user; c1, the first host, as root.
    let text = std::fs::read_to_string(&c.spec).expect("spec");
    let w1 = format!(
        "address: {}\n      port: 22\n      user: root",
        c.lab.address("w1")
    );
    assert!(text.contains(&w1), "{text}");
    let text = text.replace(
        &w1,
        &w1.replace("user: root", &format!("user: {}", lab::SUDO_USER)),
    );
    std::fs::write(&c.spec, text).expect("spec");
    c.apply();
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c.lab.exec_ok(
        "w1",
        "test -x /opt/k0s/bin/k0s && test -n \"$(ls -A /srv/k0s)\"",
    );
    let access = &c.state_host("w1").expect("w1 recorded")["access"];
    assert_eq!(access["ssh"]["user"], lab::SUDO_USER);
    assert_eq!(access["data_dir"], "/srv/k0s");
    // Only the sudo user may log in to w1 from now on.
    c.lab.exec_ok("w1", "rm /etc/k0s-lab/authorized_keys/root");
    assert!(
        !c.lab.ssh("w1", "true").status.success(),
        "root still logs in"
    );

    c.write_spec(&["c1"]);
    c.run(&["plan"])
        .expect(0)
        .contains("k0s stopped and reset on w1")
        .contains("k0s paths from its state record: k0sInstallPath /opt/k0s/bin/k0s, dataDir /srv/k0s, kubeletRootDir /srv/k0s/kubelet");
    c.apply();
    assert!(!c.nodes("c1").contains_key("w1"));
    assert_eq!(
        c.lab.exec_ok(
            "w1",
            "ls -A /srv/k0s; test ! -e /etc/systemd/system/k0sworker.service && echo no-unit"
        ),
        "no-unit\n",
        "w1 was not reset with its own data dir"
    );
    assert!(c.state_host("w1").is_none());
}

/// `files:` are uploaded before k0s starts on a new host, with the spec's or the local mode and
/// owner; a file changed on the host is put back without restarting k0s; content that changed
/// locally after planning is refused.
#[test]
fn files_are_uploaded_and_kept_as_the_spec_says() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default().sudo_user("w1"),
        SpecOptions::default(),
    );
    let src = c.lab.dir().join("files-src");
    std::fs::create_dir_all(src.join("tree/sub")).unwrap();
    std::fs::write(src.join("app.conf"), "key: value\n").unwrap();
    std::fs::set_permissions(
        src.join("app.conf"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(src.join("tree/a"), "a\n").unwrap();
    std::fs::write(src.join("tree/sub/b"), "b\n").unwrap();
    for f in ["tree/a", "tree/sub/b"] {
        std::fs::set_permissions(
            src.join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();
    }
    let user = lab::SUDO_USER;
    c.spec_opts.host_yaml.insert(
        "w1".to_string(),
        format!(
            "files:\n- {{name: app, src: {s}/app.conf, dstDir: /srv/app}}\n- {{name: tree, src: {s}/tree, dstDir: /opt/tree, dirPerm: '0750'}}\n- {{name: inline, data: \"hello\\n\", dst: /srv/app/inline.txt, perm: '0640', user: {user}, group: {user}}}\n",
            s = src.display()
        ),
    );
    c.write_spec(&["c1", "w1"]);
    let r = c.apply();
    // Before the join: the worker's files are there when k0s starts.
    let out = r.stdout.clone();
    let files_at = out.find("Uploading 4 files").expect("upload_files step");
    let join_at = out
        .find("Joining the cluster as worker")
        .expect("join step");
    assert!(files_at < join_at, "{out}");
    let facts = |cmd: &str| c.lab.exec_ok("w1", cmd);
    assert_eq!(
        facts(
            "cd / && sha256sum srv/app/app.conf srv/app/inline.txt opt/tree/a opt/tree/sub/b | cut -c1-12"
        ),
        facts(
            "printf 'key: value\\n' | sha256sum | cut -c1-12; printf 'hello\\n' | sha256sum | cut -c1-12; printf 'a\\n' | sha256sum | cut -c1-12; printf 'b\\n' | sha256sum | cut -c1-12"
        )
    );
    assert_eq!(
        facts(
            "stat -c '%n %a %U:%G' /srv/app/app.conf /srv/app/inline.txt /opt/tree /opt/tree/a /opt/tree/sub /opt/tree/sub/b"
        ),
        format!(
            "/srv/app/app.conf 600 root:root\n/srv/app/inline.txt 640 {user}:{user}\n/opt/tree 750 root:root\n/opt/tree/a 644 root:root\n/opt/tree/sub 750 root:root\n/opt/tree/sub/b 644 root:root\n"
        )
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // What a killed run leaves (issue 14): a join token not yet replaced by the placeholder
    // (with the join's intent in the state), staging files of uploads (also the older fixed
    // name), a link at a staging name. `plan` touches none of it; the next `apply` cleans it up,
    // and never follows the link.
    facts(
        "printf 'H4sIleftover\\n' > /etc/k0s/k0stoken && touch /srv/app/app.conf.k0sform-tmp /srv/app/app.conf.k0sform-Ab12Cd /usr/local/bin/k0s.k0sform-Xy34Zw && ln -s /etc/hostname /srv/app/inline.txt.k0sform-Qw56Er && cat /etc/hostname > /root/hostname.before",
    );
    // An upload's private folder (root's, 0700) with its half-written file (issue 28, item 7).
    facts(
        "mkdir -m 700 /usr/local/bin/k0s.k0sform-Pq12Rs && echo half > /usr/local/bin/k0s.k0sform-Pq12Rs/f",
    );
    let mut st = c.state_json();
    st["intents"] = serde_json::json!([{
        "step": "join_worker w1", "address": c.lab.address("w1"), "port": 22,
        "kind": "join_worker", "started_at": "2026-01-01T00:00:00Z"
    }]);
    std::fs::write(&c.state, serde_json::to_string_pretty(&st).unwrap()).unwrap();
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    facts("grep -q H4sIleftover /etc/k0s/k0stoken && test -e /srv/app/app.conf.k0sform-tmp");
    c.apply()
        .contains("cleaned up /etc/k0s/k0stoken, left by an earlier run")
        .contains("cleaned up /srv/app/app.conf.k0sform-tmp, left by an earlier run")
        .contains("cleaned up /usr/local/bin/k0s.k0sform-Pq12Rs, left by an earlier run");
    assert_eq!(
        facts(
            "test -s /etc/k0s/k0stoken && ! grep -q H4sIleftover /etc/k0s/k0stoken && ls -A /srv/app /usr/local/bin | grep -c k0sform- ; cmp /etc/hostname /root/hostname.before && echo same"
        ),
        "0\nsame\n"
    );
    // Without an interrupted join, a token file is left alone (it may be k0sctl's placeholder).
    facts("printf 'H4sIother\\n' > /etc/k0s/k0stoken");
    c.apply();
    assert_eq!(facts("cat /etc/k0s/k0stoken"), "H4sIother\n");

    // Changed on the host: put back, k0s keeps running (same pid).
    let pid = || {
        let st: serde_json::Value =
            serde_json::from_str(&c.lab.ssh_ok("w1", "k0s status -o json")).expect("status");
        st["Pid"].as_u64().expect("pid")
    };
    let before = pid();
    facts(
        "echo changed > /srv/app/app.conf && chmod 0666 /opt/tree/a && chown root:root /srv/app/inline.txt",
    );
    c.run(&["plan", "-detailed-exitcode"])
        .expect(2)
        .contains("will be given its files")
        .contains("/srv/app/app.conf (content differs)")
        .contains("/opt/tree/a (mode 0666 → 0644)")
        .contains(&format!(
            "/srv/app/inline.txt (owner root:root → {user}:{user})"
        ))
        .contains("Plan: 0 to add, 1 to change");
    c.apply()
        .contains("Apply complete: 0 added, 0 replaced, 1 changed");
    assert_eq!(pid(), before, "k0s restarted for a file change");
    assert_eq!(facts("cat /srv/app/app.conf"), "key: value\n");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // Local content changed between plan and apply: the plan derived again at apply uploads
    // other content than the saved one, so the saved plan is stale (exit 5), nothing uploaded.
    facts("rm /opt/tree/sub/b");
    let saved = c.lab.dir().join("files.plan");
    c.run(&["plan", "-out", saved.to_str().unwrap()]).expect(0);
    std::fs::write(src.join("tree/sub/b"), "other\n").unwrap();
    c.run(&["apply", saved.to_str().unwrap()])
        .expect(5)
        .contains("the saved plan is stale")
        .contains("upload_files");
    c.lab.exec_ok("w1", "test ! -e /opt/tree/sub/b");
}

/// A `files[].src` glob (k0sctl `cluster/uploadfile.go`): `images/*.tar` beside the spec with
/// three archives uploads each to `dstDir` (the folder's other files stay here), the plan lists
/// each on its own line, and the next plan is a no-op.
#[test]
fn glob_files_upload_each_match_and_then_plan_nothing() {
    require_lab!();
    let mut c = Cluster::new(&[("c1", "controller")]);
    let images = c.lab.dir().join("images");
    std::fs::create_dir_all(&images).unwrap();
    for n in ["b", "a", "c"] {
        std::fs::write(images.join(format!("{n}.tar")), format!("image {n}\n")).unwrap();
    }
    std::fs::write(images.join("readme.txt"), "not an image\n").unwrap();
    c.spec_opts.host_yaml.insert(
        "c1".to_string(),
        "files:\n- {name: images, src: images/*.tar, dstDir: /var/lib/k0s/images, perm: '0640'}\n"
            .to_string(),
    );
    c.write_spec(&["c1"]);
    let plan = c.run(&["plan"]);
    for n in ["a", "b", "c"] {
        let sha = k0sform::hash::sha256_hex(format!("image {n}\n"));
        plan.contains(&format!(
            "~ file {}/{n}.tar → /var/lib/k0s/images/{n}.tar (0640, sha256 {}…)",
            images.display(),
            &sha[..4]
        ));
    }
    c.apply();
    assert_eq!(
        c.lab.exec_ok(
            "c1",
            "cd /var/lib/k0s/images && ls && cat a.tar b.tar c.tar && stat -c '%a' a.tar"
        ),
        "a.tar\nb.tar\nc.tar\nimage a\nimage b\nimage c\n640\n"
    );
    plan_changes_nothing(&c, &["-detailed-exitcode"]).expect(0);
}

/// A URL `files[].src` (k0sctl `phase/uploadfiles.go` `uploadURL`) is downloaded by the host
/// from the lab's loopback mirror, its `%v` `%p` tokens expanded, through the same curl/wget
/// line as k0s: without `sha256` the plan says it is not verified and the state records the
/// host's hash, so the next plan is a no-op; with the right `sha256` it is verified; a wrong
/// one fails the apply and leaves nothing at the destination.
#[test]
fn url_files_are_downloaded_by_the_host() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller")],
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            ..SpecOptions::default()
        },
    );
    let mirror = c.lab.start_mirror();
    let arch = lab::k0s_arch();
    let served = format!("b/bundle-v1.33.4+k0s.0-{arch}.tar");
    mirror.put(&served, b"bundle bytes\n");
    mirror.put("b/other.tar", b"other bytes\n");
    let good = k0sform::hash::sha256_hex("other bytes\n");
    let files = |other_sha: &str| {
        format!(
            "files:\n- {{name: bundle, src: \"{u}/b/bundle-%v-%p.tar\", dst: /var/lib/k0s/images/bundle.tar, perm: '0640'}}\n- {{name: other, src: \"{u}/b/other.tar\", dstDir: /srv/dl, sha256: {other_sha}}}\n",
            u = mirror.url
        )
    };
    c.spec_opts.host_yaml.insert("c1".to_string(), files(&good));
    c.write_spec(&["c1"]);
    c.run(&["plan"])
        .expect(0)
        .contains(&format!(
            "~ file {}/b/bundle-v1.33.4%2Bk0s.0-{arch}.tar → /var/lib/k0s/images/bundle.tar (0640, not verified: no sha256 in the spec)",
            mirror.url
        ))
        .contains(&format!(
            "~ file {}/b/other.tar → /srv/dl/other.tar (0644, sha256 {}…)",
            mirror.url,
            &good[..4]
        ));
    c.apply();
    assert_eq!(
        c.lab.exec_ok(
            "c1",
            "cat /var/lib/k0s/images/bundle.tar /srv/dl/other.tar && stat -c '%a' /var/lib/k0s/images/bundle.tar /srv/dl/other.tar && ls -A /var/lib/k0s/images /srv/dl | grep -c k0sform- ; true"
        ),
        "bundle bytes\nother bytes\n640\n644\n0\n"
    );
    let st = c.state_json();
    assert_eq!(
        st["downloads"][0]["sha256"],
        serde_json::json!(k0sform::hash::sha256_hex("bundle bytes\n")),
        "{st:#}"
    );
    plan_changes_nothing(&c, &["-detailed-exitcode"]).expect(0);

    // A wrong sha256: the apply fails, nothing is left at the destination or beside it.
    c.lab.exec_ok("c1", "rm /srv/dl/other.tar");
    c.spec_opts
        .host_yaml
        .insert("c1".to_string(), files(&"0".repeat(64)));
    c.write_spec(&["c1"]);
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains("checksum mismatch");
    assert_eq!(
        c.lab.exec_ok(
            "c1",
            "test ! -e /srv/dl/other.tar && ls -A /srv/dl | grep -c k0sform- ; true"
        ),
        "0\n"
    );
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

    let counts = sshd_counts_during(&c, &names, || {
        c.apply().contains("No changes");
    });
    assert_eq!(
        counts,
        expect([1, 1, 1]),
        "(connections, sessions) per host"
    );

    // A staging file a killed upload left beside w1's binary (planted from inside the host,
    // not over SSH): only w1 gets a second session, and the file is removed there.
    c.lab
        .exec_ok("w1", "touch /usr/local/bin/k0s.k0sform-Ab12Cd");
    let mut r = None;
    let counts = sshd_counts_during(&c, &names, || r = Some(c.apply()));
    r.unwrap().contains(&format!(
        "{}: cleaned up /usr/local/bin/k0s.k0sform-Ab12Cd, left by an earlier run",
        c.lab.address("w1")
    ));
    assert_eq!(
        counts,
        expect([1, 2, 1]),
        "(connections, sessions) per host"
    );
    c.lab
        .exec_ok("w1", "test ! -e /usr/local/bin/k0s.k0sform-Ab12Cd");
    let counts = sshd_counts_during(&c, &names, || {
        c.apply().contains("No changes");
    });
    assert_eq!(counts, expect([1, 1, 1]), "nothing left to clean up");

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
    let mut r = None;
    let counts = sshd_counts_during(&c, &names, || r = Some(c.apply()));
    r.unwrap()
        .contains("cleaned up /etc/k0s/k0stoken, left by an earlier run");
    assert_eq!(
        counts,
        expect([1, 1, 2]),
        "(connections, sessions) per host"
    );
    let token = c.lab.exec_ok("w2", "cat /etc/k0s/k0stoken");
    assert!(
        !token.contains("H4sIleftover") && !token.is_empty(),
        "{token}"
    );
}

/// Puts a `sha256sum` that logs its arguments (`stdin` for none) ahead of the real one on
/// `host`'s PATH (/usr/local/bin, the host's own disk), with an empty log.
fn log_hashes_on(c: &Cluster, host: &str) {
    c.lab.exec_ok(
        host,
        "printf '%s\\n' '#!/bin/sh' 'echo \"${*:-stdin}\" >> /root/sha256sum.log' \
         'exec /usr/bin/sha256sum \"$@\"' > /usr/local/bin/sha256sum \
         && chmod 755 /usr/local/bin/sha256sum && : > /root/sha256sum.log",
    );
}

/// What the logging `sha256sum` (`log_hashes_on`) hashed on `host` since the last call, a line
/// each; the log starts over.
fn hashes_logged(c: &Cluster, host: &str) -> Vec<String> {
    c.lab
        .exec_ok(host, "cat /root/sha256sum.log && : > /root/sha256sum.log")
        .lines()
        .map(String::from)
        .collect()
}

/// How many of `hashes_logged` were of the k0s binary at /usr/local/bin/k0s.
fn k0s_hashes(c: &Cluster, host: &str) -> usize {
    hashes_logged(c, host)
        .iter()
        .filter(|l| l.contains("/usr/local/bin/k0s"))
        .count()
}

/// A k0s binary k0sform puts in place is hashed on its host once, by the upload's check, and
/// not again by the probe that records the host after its install, nor by later plans while its
/// stat line is the recorded one (a real k0s is a few hundred MB). A binary changed since is
/// hashed. The hashes are counted by a logging `sha256sum` ahead of the real one on each host's
/// PATH (/usr/local/bin, the host's own disk).
#[test]
fn a_placed_k0s_binary_is_hashed_only_by_its_upload_check() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    let names = ["c1", "w1"];
    for n in names {
        log_hashes_on(&c, n);
    }

    // Bootstrap c1 and join w1: each binary is checked as it is uploaded (hashed from stdin),
    // never hashed at its install path.
    bootstrap(&c);
    for n in names {
        let log = hashes_logged(&c, n);
        assert!(log.iter().any(|l| l == "stdin"), "{n}: {log:?}");
        assert!(
            !log.iter().any(|l| l == "/usr/local/bin/k0s"),
            "{n}: {log:?}"
        );
    }
    let st = c.state_json();
    for n in names {
        let rec = &c.state_host(n).unwrap()["k0s_binary"];
        let live = c
            .lab
            .exec_ok(n, "stat -L -c '%s %d %i %y %z' -- /usr/local/bin/k0s");
        assert_eq!(rec["stat"].as_str(), Some(live.trim()), "{n}: {st}");
        let sha = c.lab.exec_ok(n, "/usr/bin/sha256sum /usr/local/bin/k0s");
        assert_eq!(rec["sha256"].as_str(), sha.split_whitespace().next(), "{n}");
    }

    // Later plans trust the recorded stat line.
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    assert_eq!((k0s_hashes(&c, "c1"), k0s_hashes(&c, "w1")), (0, 0));

    // A binary touched since (its change time moved) is hashed again.
    c.lab.exec_ok("w1", "touch /usr/local/bin/k0s");
    c.run(&["plan"]).expect(0);
    assert_eq!((k0s_hashes(&c, "c1"), k0s_hashes(&c, "w1")), (0, 1));
}

/// `useExistingK0s`: the k0s binary already on the host is installed and never replaced; a
/// version bump that would need another binary there is refused before anything runs.
#[test]
fn use_existing_k0s_installs_the_binary_on_the_host() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            ..SpecOptions::default()
        },
    );
    c.lab.install_double("w1");
    let sha = || c.lab.exec_ok("w1", "sha256sum /usr/local/bin/k0s");
    let placed = sha();
    // w1's entry: useExistingK0s instead of k0sBinaryPath.
    let write = |c: &Cluster| {
        c.write_spec(&["c1", "w1"]);
        let text = std::fs::read_to_string(&c.spec).expect("spec");
        let addr = format!("address: {}\n", c.lab.address("w1"));
        let (head, tail) = text.split_at(text.find(&addr).expect("w1 in the spec"));
        let mut out = head.to_string();
        let mut done = false;
        for l in tail.lines() {
            if !done && l.trim_start().starts_with("k0sBinaryPath:") {
                out.push_str("    useExistingK0s: true\n");
                done = true;
            } else {
                out.push_str(l);
                out.push('\n');
            }
        }
        assert!(done, "{text}");
        std::fs::write(&c.spec, out).expect("spec");
    };
    write(&c);
    let r = c.apply();
    assert!(
        !r.stdout
            .contains(&format!("{}: upload_binary", c.lab.address("w1"))),
        "{}",
        r.stdout
    );
    assert_eq!(c.nodes("c1").get("w1"), Some(&true));
    assert_eq!(sha(), placed, "the placed binary was replaced");

    // A newer version for everyone: c1 gets it uploaded, w1 has no way to get it.
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version("v1.33.5+k0s.0"));
    write(&c);
    c.run(&["plan"])
        .expect(1)
        .contains("upgrading k0s to v1.33.5+k0s.0 needs that binary")
        .contains("useExistingK0s: k0sform uses the k0s binary on the host as it is");
    assert_eq!(sha(), placed);
}

/// Issue 13: a cluster built exactly as k0sctl v0.32 builds it from the same k0sctl.yaml — its
/// `k0s install` lines (k0sctl `cluster/host.go` `K0sInstallFlags`: the user's flags, then
/// `--data-dir`, `--token-file` on joiners, `--config` on controllers, `--kubelet-extra-args`
/// with `--node-ip` on workers with a private address) and its k0s.yaml files (k0sctl
/// `phase/configure_k0s.go`: a timestamp header, `spec.k0s.config` with every controller's
/// address in `spec.api.sans`, `storage.etcd.peerAddress` = the private address, no
/// `api.address`) — is adopted with `apply -refresh-only` and then plans no changes; a version
/// bump then upgrades every host and changes nothing else.
#[test]
fn cluster_built_by_k0sctl_is_adopted_and_plans_no_changes() {
    require_lab!();
    let hosts = ["c1", "c2", "c3", "w1"];
    let mut spec_opts = SpecOptions {
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        k0s_config: Some(
            "spec:\n  api:\n    sans:\n    - k8s.example.com\n  telemetry:\n    enabled: false"
                .into(),
        ),
        ..SpecOptions::default()
    };
    spec_opts.host_yaml.insert(
        "w1".into(),
        "installFlags:\n- --labels=zone=a,app=x\n- -l kubelet=2".into(),
    );
    let mut c = Cluster::with(THREE_PLUS_ONE, LabOptions::default(), spec_opts);
    for h in hosts {
        c.lab.install_double(h);
    }
    let addr: Vec<String> = ["c1", "c2", "c3"]
        .iter()
        .map(|h| c.lab.address(h))
        .collect();
    // What k0sctl writes on controller `i` (yaml.v2 output of the mapping, keys sorted).
    let k0sctl_config = |i: usize| {
        let sans: String = addr.iter().map(|a| format!("    - {a}\n")).collect();
        format!(
            "# generated-by-k0sctl 2026-08-01T10:00:0{i}Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    sans:\n    - k8s.example.com\n{sans}  storage:\n    etcd:\n      peerAddress: {}\n  telemetry:\n    enabled: false\n",
            addr[i]
        )
    };
    controllers_as_k0sctl(&c, &k0sctl_config);
    join_worker_as_k0sctl(&c, "w1", "--labels=zone=a,app=x -l kubelet=2 ");
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    // k0s recorded the worker's flags its own way: labels sorted, every log level.
    let unit = c
        .lab
        .ssh_ok("w1", "cat /etc/systemd/system/k0sworker.service");
    assert!(unit.contains("--labels=app=x,zone=a"), "{unit}");
    assert!(
        unit.contains("--logging=containerd=info,etcd=info"),
        "{unit}"
    );

    adopt_changes_nothing(&c, &hosts);
    assert_eq!(c.state_json()["cluster"]["uid"], uid.as_str());

    // A version bump upgrades every host and nothing else: no config rewrite, no flag change.
    let r = plan_upgrade_to_v1_33_5(&mut c, &hosts);
    assert!(!r.text().contains("k0s.yaml differs"), "{}", r.text());
    assert!(!r.text().contains("install flags differ"), "{}", r.text());
    c.apply().contains("Apply complete");
    for h in hosts {
        assert_eq!(
            c.lab.ssh_ok(h, "k0s version").trim(),
            "v1.33.5+k0s.0",
            "{h}"
        );
    }
    for (i, h) in ["c1", "c2", "c3"].iter().enumerate() {
        assert_eq!(
            c.lab.ssh_ok(h, "cat /etc/k0s/k0s.yaml"),
            k0sctl_config(i),
            "{h}: the upgrade rewrote k0sctl's k0s.yaml"
        );
    }
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Adopt the running `hosts` with `apply -refresh-only` (exit 0): the next
/// `plan -detailed-exitcode` exits 0 with "No changes", and no host changed.
#[track_caller]
fn adopt_changes_nothing(c: &Cluster, hosts: &[&str]) {
    let before: Vec<String> = hosts.iter().map(|h| c.host_snapshot(h)).collect();
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
    plan_changes_nothing(c, &["-detailed-exitcode"])
        .expect(0)
        .contains("No changes");
    let after: Vec<String> = hosts.iter().map(|h| c.host_snapshot(h)).collect();
    assert_eq!(before, after, "adoption changed a host");
}

/// c1, c2 and c3 built as k0sctl builds controllers: `config(i)` as /etc/k0s/k0s.yaml on the
/// i-th, k0sctl's `k0s install controller` lines (`cluster/host.go` `K0sInstallFlags`), c2 and
/// c3 joined one at a time with a controller token in /etc/k0s/k0stoken.
fn controllers_as_k0sctl(c: &Cluster, config: &dyn Fn(usize) -> String) {
    let write = |host: &str, path: &str, text: &str| {
        c.lab.ssh_ok(
            host,
            &format!("mkdir -p /etc/k0s && printf '%s' '{text}' > {path} && chmod 600 {path}"),
        );
    };
    write("c1", "/etc/k0s/k0s.yaml", &config(0));
    c.lab.ssh_ok(
        "c1",
        "k0s config validate --config=/etc/k0s/k0s.yaml && k0s install controller --data-dir=/var/lib/k0s --config=/etc/k0s/k0s.yaml && k0s start",
    );
    wait_api_ready(c, "c1");
    for (i, h) in [(1, "c2"), (2, "c3")] {
        let token = c.lab.ssh_ok(
            "c1",
            "k0s token create --role=controller --expiry=30m0s --data-dir=/var/lib/k0s",
        );
        write(h, "/etc/k0s/k0stoken", token.trim());
        write(h, "/etc/k0s/k0s.yaml", &config(i));
        c.lab.ssh_ok(
            h,
            "k0s install controller --data-dir=/var/lib/k0s --token-file=/etc/k0s/k0stoken --config=/etc/k0s/k0s.yaml && k0s start",
        );
        c.eventually(60, "controller joined", || c.members("c1").len() == i + 1);
    }
}

/// `name` joins through c1 as k0sctl joins a worker: a token in /etc/k0s/k0stoken (0600), then
/// `k0s install worker` with the user's `flags` first, the data dir, the token file and
/// `--kubelet-extra-args=--node-ip=<private address>` (k0sctl `cluster/host.go`
/// `K0sInstallFlags`); waits until its Node is Ready.
fn join_worker_as_k0sctl(c: &Cluster, name: &str, flags: &str) {
    join_worker_as_k0sctl_at(c, name, flags, &c.lab.address(name));
}

/// [`join_worker_as_k0sctl`] with `node_ip` (the private address k0sctl found) as `--node-ip`.
fn join_worker_as_k0sctl_at(c: &Cluster, name: &str, flags: &str, node_ip: &str) {
    let token = c.lab.ssh_ok(
        "c1",
        "k0s token create --role=worker --expiry=10m0s --data-dir=/var/lib/k0s",
    );
    c.lab.ssh_ok(
        name,
        &format!(
            "mkdir -p /etc/k0s && printf '%s' '{}' > /etc/k0s/k0stoken && chmod 600 /etc/k0s/k0stoken && k0s install worker {flags}--data-dir=/var/lib/k0s --token-file=/etc/k0s/k0stoken '--kubelet-extra-args=--node-ip={node_ip}' && k0s start",
            token.trim(),
        ),
    );
    c.eventually(60, &format!("{name} Ready"), || {
        c.nodes("c1").get(name) == Some(&true)
    });
}

/// A controller and a worker built as k0sctl builds them (`k0s install` lines of k0sctl
/// `cluster/host.go` `K0sInstallFlags`, k0s.yaml of `phase/configure_k0s.go`), the worker's
/// token file overwritten after the join as k0sctl does (`phase/install_workers.go`:
/// `# overwritten by k0sctl after join`), then adopted with `apply -refresh-only`.
/// The spec's `k0sBinaryPath`, when it names one, is the k0s installed.
fn k0sctl_built_controller_and_worker(c: &Cluster) {
    for h in ["c1", "w1"] {
        match &c.spec_opts.k0s_binary {
            Some(b) => c.lab.install_binary(h, b),
            None => c.lab.install_double(h),
        }
    }
    let a1 = c.lab.address("c1");
    let write = |host: &str, path: &str, text: &str| {
        c.lab.ssh_ok(
            host,
            &format!("mkdir -p /etc/k0s && printf '%s' '{text}' > {path} && chmod 600 {path}"),
        );
    };
    write(
        "c1",
        "/etc/k0s/k0s.yaml",
        &format!(
            "# generated-by-k0sctl 2026-08-01T10:00:00Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    sans:\n    - {a1}\n  storage:\n    etcd:\n      peerAddress: {a1}\n"
        ),
    );
    c.lab.ssh_ok(
        "c1",
        "k0s install controller --data-dir=/var/lib/k0s --config=/etc/k0s/k0s.yaml && k0s start",
    );
    wait_api_ready(c, "c1");
    join_worker_as_k0sctl(c, "w1", "");
    c.lab.ssh_ok(
        "w1",
        "printf '# overwritten by k0sctl after join\\n' > /etc/k0s/k0stoken",
    );
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
}

/// Issue 27.4, k0s #7202: k0s v1.35.1+k0s.0 workers decode their token file at every start and
/// refuse k0sctl's comment. Upgrading an adopted k0sctl-built worker to that version writes a
/// decodable placeholder first, as k0sctl ≥ v0.29 does (`phase/ensure_join_token_workaround.go`):
/// the worker comes back on the new version.
#[test]
fn k0sctl_built_worker_upgraded_to_v1_35_1_k0s_0_gets_a_decodable_token_file() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".into()),
            ..SpecOptions::default()
        },
    );
    k0sctl_built_controller_and_worker(&c);
    assert_eq!(
        c.lab.ssh_ok("w1", "cat /etc/k0s/k0stoken"),
        "# overwritten by k0sctl after join\n"
    );
    c.spec_opts.k0s_version = Some("v1.35.1+k0s.0".into());
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version("v1.35.1+k0s.0"));
    c.write_spec(&["c1", "w1"]);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("v1.33.4+k0s.0 → v1.35.1+k0s.0")
        .contains("token file: a decodable placeholder is written first where it holds no join token (k0s v1.35.1+k0s.0 workers refuse to start otherwise, k0s #7202; as k0sctl)");
    c.apply()
        .contains("Apply complete")
        .contains("/etc/k0s/k0stoken held no join token k0s v1.35.1+k0s.0 can decode: a placeholder was written (k0s #7202)");
    assert_eq!(c.lab.ssh_ok("w1", "k0s version").trim(), "v1.35.1+k0s.0");
    let placeholder = k0sform::k0s::placeholder_token(k0sform::k0s::TokenRole::Worker);
    assert_eq!(c.lab.ssh_ok("w1", "cat /etc/k0s/k0stoken"), placeholder);
    assert_eq!(
        c.lab.ssh_ok("w1", "stat -c %a /etc/k0s/k0stoken").trim(),
        "600"
    );
    // It restarts on its own too (a reboot): the file decodes.
    c.lab.power_off("w1");
    c.lab.power_on("w1");
    c.eventually(30, "w1 Ready after a power cycle", || {
        c.nodes("c1").get("w1") == Some(&true)
    });
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27.4, k0s #7202: a k0sctl-built worker already running v1.35.1+k0s.0 with k0sctl's
/// comment in its token file runs fine until its next start, which fails. With nothing else to
/// do, the plan rewrites the file with a decodable placeholder (the probe reports only whether
/// it decodes), the apply writes it without restarting k0s (as k0sctl's
/// `phase/ensure_join_token_workaround.go`, on every apply), the next plan is empty, and the
/// worker's k0s starts again after a restart.
#[test]
fn k0sctl_built_worker_running_v1_35_1_k0s_0_gets_a_decodable_token_file_without_a_restart() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.35.1+k0s.0".into()),
            ..SpecOptions::default()
        },
    );
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version("v1.35.1+k0s.0"));
    c.write_spec(&["c1", "w1"]);
    k0sctl_built_controller_and_worker(&c);
    assert_eq!(c.lab.ssh_ok("w1", "k0s version").trim(), "v1.35.1+k0s.0");
    assert_eq!(
        c.lab.ssh_ok("w1", "cat /etc/k0s/k0stoken"),
        "# overwritten by k0sctl after join\n"
    );
    let pid = || {
        c.lab
            .ssh_ok("w1", "cat /run/k0s-service/k0sworker.service.pid")
    };
    let before = pid();
    plan_changes_nothing(&c, &[]).expect(0).contains(
        "token file /etc/k0s/k0stoken: a decodable placeholder is written, k0s not restarted",
    );
    c.apply()
        .contains("Apply complete")
        .contains("/etc/k0s/k0stoken held no join token k0s v1.35.1+k0s.0 can decode: a placeholder was written (k0s #7202)");
    let placeholder = k0sform::k0s::placeholder_token(k0sform::k0s::TokenRole::Worker);
    assert_eq!(c.lab.ssh_ok("w1", "cat /etc/k0s/k0stoken"), placeholder);
    assert_eq!(
        c.lab.ssh_ok("w1", "stat -c %a /etc/k0s/k0stoken").trim(),
        "600"
    );
    assert_eq!(pid(), before, "k0s was not restarted");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    // Its k0s starts again (a reboot): the file decodes.
    c.lab.power_off("w1");
    c.lab.power_on("w1");
    c.eventually(30, "w1's k0s running after a power cycle", || {
        c.lab.ssh("w1", "k0s status").status.success() && c.nodes("c1").get("w1") == Some(&true)
    });
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27.9: installFlags as k0sctl reads them (`cluster/host.go`): `--config` moves where
/// the controller's k0s.yaml is written (and read by the probe), `--token-file` where the join
/// token (then its placeholder) goes, `--kubelet-root-dir` is lifted like `--data-dir` and
/// given to `k0s reset`, and `--hostname-override` in `--kubelet-extra-args` names the Node
/// (lower-cased by kubelet). Converged, nothing to do; a destroy removes those files and resets
/// the kubelet root dir.
#[test]
fn install_flags_move_config_token_kubelet_dir_and_node_name() {
    require_lab!();
    let mut c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    c.spec_opts.host_yaml.insert(
        "c1".into(),
        "installFlags:\n- --config=/etc/k0s/custom.yaml".into(),
    );
    c.spec_opts.host_yaml.insert(
        "w1".into(),
        "installFlags:\n- --token-file=/etc/k0s/join.tok\n- --kubelet-root-dir=/var/lib/kubelet-w1\n- --kubelet-extra-args=--hostname-override=Node-W1".into(),
    );
    c.write_spec(&["c1", "w1"]);
    c.apply().contains("Apply complete");
    c.lab.ssh_ok(
        "c1",
        "test -s /etc/k0s/custom.yaml && test ! -e /etc/k0s/k0s.yaml",
    );
    let unit = c
        .lab
        .ssh_ok("c1", "cat /etc/systemd/system/k0scontroller.service");
    assert!(unit.contains("--config=/etc/k0s/custom.yaml"), "{unit}");
    let placeholder = k0sform::k0s::placeholder_token(k0sform::k0s::TokenRole::Worker);
    assert_eq!(c.lab.ssh_ok("w1", "cat /etc/k0s/join.tok"), placeholder);
    c.lab.ssh_ok("w1", "test ! -e /etc/k0s/k0stoken");
    let unit = c
        .lab
        .ssh_ok("w1", "cat /etc/systemd/system/k0sworker.service");
    assert!(unit.contains("--token-file=/etc/k0s/join.tok"), "{unit}");
    assert!(
        unit.contains("--kubelet-root-dir=/var/lib/kubelet-w1"),
        "{unit}"
    );
    assert!(unit.contains("--hostname-override=Node-W1"), "{unit}");
    assert_eq!(
        c.nodes("c1").get("node-w1"),
        Some(&true),
        "{:?}",
        c.nodes("c1")
    );
    assert_eq!(
        c.state_host("w1").expect("recorded")["node_name"],
        "node-w1"
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    c.lab.ssh_ok(
        "w1",
        "mkdir -p /var/lib/kubelet-w1/pods && touch /var/lib/kubelet-w1/pods/x",
    );
    c.run(&["destroy", "-auto-approve"]).expect(0);
    c.lab.ssh_ok("c1", "test ! -e /etc/k0s/custom.yaml");
    c.lab.ssh_ok(
        "w1",
        "test ! -e /etc/k0s/join.tok && test ! -e /var/lib/kubelet-w1/pods/x",
    );
}

/// The kubeconfig's one cluster, user and server, read from YAML.
fn kubeconfig_parts(text: &str) -> (String, String, String, String) {
    let v: serde_json::Value = serde_saphyr::from_str(text).expect("kubeconfig YAML");
    let s = |p: &str| {
        v.pointer(p)
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_string()
    };
    (
        s("/clusters/0/name"),
        s("/users/0/name"),
        s("/clusters/0/cluster/server"),
        s("/users/0/user/client-key-data"),
    )
}

fn mode_of(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).expect("file").permissions().mode() & 0o777
}

/// Issue 16: `apply -kubeconfig-out` and `kubeconfig` give a working admin kubeconfig whose
/// server follows k0sctl's rules, and the secret shows up nowhere else.
#[test]
fn kubeconfig_follows_k0sctl_server_rules_and_reaches_the_cluster() {
    require_lab!();
    let mut c = Cluster::new(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("w1", "worker"),
        ("c3", "controller"),
    ]);
    c.write_spec(&["c1", "c2", "w1"]);
    let kc = c.lab.dir().join("admin.conf");
    let kc_arg = kc.to_str().expect("utf-8 path");
    let r = c.run(&["apply", "-auto-approve", "-json", "-kubeconfig-out", kc_arg]);
    r.expect(0);
    assert_eq!(mode_of(&kc), 0o600);
    let text = std::fs::read_to_string(&kc).expect("kubeconfig");
    let (cluster, user, server, key) = kubeconfig_parts(&text);
    assert_eq!(
        (cluster.as_str(), user.as_str()),
        ("lab", "admin"),
        "{text}"
    );
    // No externalAddress: the first healthy controller of the spec, port 6443.
    assert_eq!(server, format!("https://{}:6443", c.lab.address("c1")));
    assert!(key.len() > 100, "{text}");
    // A secret: not in the -json events, the logs, the state.
    let state_text = std::fs::read_to_string(&c.state).expect("state");
    for (what, hay) in [
        ("stdout", &r.stdout),
        ("stderr", &r.stderr),
        ("state", &state_text),
    ] {
        assert!(!hay.contains(&key), "the client key is in {what}");
        assert!(
            !hay.contains("client-key-data"),
            "kubeconfig text in {what}"
        );
    }
    // It works from this machine against the lab cluster.
    let uid = c.state_json()["cluster"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    let out = c.kubectl_with(
        &kc,
        &[
            "get",
            "namespace",
            "kube-system",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    assert!(out.status.success(), "{}", lab::stderr(&out));
    assert_eq!(lab::stdout(&out).trim(), uid);

    // stdout, with k0sctl's overrides taken as given.
    let r = c.run(&[
        "kubeconfig",
        "-user",
        "ops",
        "-cluster",
        "blue",
        "-address",
        "https://lb.example:7443",
    ]);
    r.expect(0);
    let (cluster, user, server, _) = kubeconfig_parts(&r.stdout);
    assert_eq!(
        (cluster.as_str(), user.as_str(), server.as_str()),
        ("blue", "ops", "https://lb.example:7443")
    );

    // The first controller in spec order that runs and answers: c3 (fresh) is skipped.
    c.write_spec(&["c3", "c2", "c1", "w1"]);
    let kc2 = c.lab.dir().join("c2.conf");
    c.run(&["kubeconfig", "-out", kc2.to_str().expect("utf-8")])
        .expect(0);
    let (_, _, server, _) = kubeconfig_parts(&std::fs::read_to_string(&kc2).expect("kc2"));
    assert_eq!(server, format!("https://{}:6443", c.lab.address("c2")));
    let out = c.kubectl_with(&kc2, &["get", "nodes", "-o", "name"]);
    assert!(
        lab::stdout(&out).contains("node/w1"),
        "{}",
        lab::stderr(&out)
    );

    // spec.api.externalAddress wins (k0sctl's rule), port included.
    c.spec_opts.k0s_config = Some(format!(
        "spec:\n  api:\n    externalAddress: {}\n    port: 6443\n",
        c.lab.address("c2")
    ));
    c.write_spec(&["c1", "c2", "w1"]);
    let r = c.run(&["kubeconfig"]);
    r.expect(0);
    let (_, _, server, _) = kubeconfig_parts(&r.stdout);
    assert_eq!(server, format!("https://{}:6443", c.lab.address("c2")));
    // A kubeconfig pointing at no API server does not work (the check above could fail).
    let bad = c.lab.dir().join("bad.conf");
    std::fs::write(
        &bad,
        text.replace(&c.lab.address("c1"), &c.lab.address("c3")),
    )
    .expect("write");
    let out = c.kubectl_with(&bad, &["get", "namespaces"]);
    assert!(!out.status.success());
    assert!(
        lab::stderr(&out).contains("was refused"),
        "{}",
        lab::stderr(&out)
    );
}

/// The archive a backup wrote, from its `<sha256>  <path>` line.
fn backup_line(r: &e2e::Run) -> (String, std::path::PathBuf) {
    let line = r.stdout.lines().last().unwrap_or("");
    let (sha, path) = line.split_once("  ").expect("`<sha256>  <path>` on stdout");
    (sha.to_string(), std::path::PathBuf::from(path))
}

/// Issue 28, items 3 and 6: a backup larger than the 16 MiB a command's output is held to (here
/// an airgap image bundle of 24 MiB that does not compress) streams to the local file, with the
/// host's sha256; a controller whose `k0s kubeconfig admin` answer carries an `exec` plugin,
/// a `tokenFile`, a proxy and `insecure-skip-tls-verify` is refused (exit 3, naming it) by
/// `kubeconfig` and by `apply -kubeconfig-out`, and nothing is printed or written.
#[test]
fn big_backups_stream_and_a_hostile_kubeconfig_is_refused() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller")]);
    bootstrap(&c);
    let bundle = "/var/lib/k0s/images/bundle.tar";
    let host_sha = c.lab.exec_ok(
        "c1",
        &format!(
            "mkdir -p /var/lib/k0s/images && head -c 25165824 /dev/urandom > {bundle} && sha256sum {bundle}"
        ),
    );
    let host_sha = host_sha.split_whitespace().next().expect("sha256sum");
    let out_dir = c.lab.dir().join("backups");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let r = c.run(&["backup", "-out", out_dir.to_str().expect("utf-8")]);
    r.expect(0);
    let (sha, archive) = backup_line(&r);
    let bytes = std::fs::read(&archive).expect("archive");
    assert!(bytes.len() > 24 << 20, "{} bytes", bytes.len());
    assert_eq!(k0sform::hash::sha256_hex(&bytes), sha);
    assert_eq!(mode_of(&archive), 0o600);
    let files: Vec<_> = std::fs::read_dir(&out_dir)
        .expect("backups")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(files.len(), 1, "temp files left: {files:?}");
    // The bundle inside is the host's, byte for byte.
    let inside = std::process::Command::new("sh")
        .arg("-c")
        .arg("tar xzOf \"$1\" images/bundle.tar | sha256sum")
        .arg("sh")
        .arg(&archive)
        .output()
        .expect("tar");
    assert_eq!(
        lab::stdout(&inside).split_whitespace().next(),
        Some(host_sha),
        "{}",
        lab::stderr(&inside)
    );

    c.lab.exec_ok(
        "c1",
        "printf 'hostile_kubeconfig 1\\n' > /etc/k0s-lab/k0s-knobs",
    );
    let kc = c.lab.dir().join("admin.conf");
    let kc_arg = kc.to_str().expect("utf-8");
    let addr = c.lab.address("c1");
    for args in [
        &["kubeconfig"][..],
        &["kubeconfig", "-out", kc_arg][..],
        &["apply", "-auto-approve", "-kubeconfig-out", kc_arg][..],
    ] {
        let r = c.run(args);
        r.expect(3)
            .contains(&format!("refused: controller {addr}: "))
            .contains("users[0].user.exec")
            .contains("users[0].user.tokenFile")
            .contains("clusters[0].cluster.proxy-url")
            .contains("clusters[0].cluster.insecure-skip-tls-verify");
        assert!(!r.stdout.contains("apiVersion"), "{args:?}: {}", r.stdout);
        assert!(!r.text().contains("/bin/sh"), "{}", r.text());
        assert!(!kc.exists(), "{args:?} wrote the kubeconfig");
    }
    // Without the additions, the same controller's kubeconfig is handed out.
    c.lab.exec_ok("c1", "rm /etc/k0s-lab/k0s-knobs");
    let r = c.run(&["kubeconfig"]);
    r.expect(0);
    let (_, _, server, key) = kubeconfig_parts(&r.stdout);
    assert_eq!(server, format!("https://{addr}:6443"));
    assert!(key.len() > 100, "{}", r.stdout);
}

fn create_namespace(c: &Cluster, via: &str, name: &str) {
    c.lab.ssh_ok(
        via,
        &format!(
            "KUBECONFIG=/var/lib/k0s/pki/admin.conf timeout 20 k0s kubectl create namespace {name}"
        ),
    );
}

/// Issue 16: back up, wipe every host, restore onto the fresh hosts: the same cluster identity
/// and the objects created before the backup; restore is refused where a cluster runs; then
/// destroy and restore again onto the same machines.
#[test]
fn backup_then_restore_onto_wiped_hosts_keeps_the_cluster() {
    require_lab!();
    let mut spec_opts = SpecOptions::default();
    spec_opts.host_yaml.insert(
        "c1".into(),
        "hooks:\n  backup:\n    before: [\"date > /tmp/backup-before\"]\n    after: [\"ls /tmp > /tmp/backup-after\"]\n".into(),
    );
    let c = Cluster::with(
        &[("c1", "controller"), ("c2", "controller"), ("w1", "worker")],
        LabOptions::default(),
        spec_opts,
    );
    bootstrap(&c);
    let uid = assert_one_cluster(&c, &["c1", "c2"], &["c1", "c2"]);
    create_namespace(&c, "c2", "before-backup");

    let out_dir = c.lab.dir().join("backups");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let r = c.run(&["backup", "-out", out_dir.to_str().expect("utf-8")]);
    r.expect(0);
    let (sha, archive) = backup_line(&r);
    let backup_ids: Vec<String> = ["c1", "c2"]
        .iter()
        .map(|n| object_member_id(&c, "c1", n).expect("an EtcdMember object with an ID"))
        .collect();
    assert_eq!(archive.parent(), Some(out_dir.as_path()));
    let name = archive.file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(
        name.starts_with("k0s_backup_lab_") && name.ends_with("Z.tar.gz"),
        "{name}"
    );
    assert_eq!(mode_of(&archive), 0o600);
    let bytes = std::fs::read(&archive).expect("archive");
    assert_eq!(k0sform::hash::sha256_hex(&bytes), sha);
    // k0s's layout: snapshot, certificates, config.
    let listing = std::process::Command::new("tar")
        .arg("tzf")
        .arg(&archive)
        .output()
        .expect("tar");
    let listing = lab::stdout(&listing);
    for entry in [
        "etcd-snapshot.db",
        "pki/ca.crt",
        "pki/admin.conf",
        "k0s.yaml",
    ] {
        assert!(listing.lines().any(|l| l == entry), "{entry} in\n{listing}");
    }
    // The hooks ran around it on c1, the remote copy is gone.
    let tmp = c.lab.exec_ok("c1", "ls /tmp; cat /tmp/backup-after");
    assert!(tmp.contains("backup-before"), "{tmp}");
    assert!(!tmp.contains("k0sform-backup"), "remote copy left: {tmp}");
    create_namespace(&c, "c1", "after-backup");

    // Refused while a cluster runs: with its state, and with a new state of another lineage.
    c.run(&[
        "apply",
        "-auto-approve",
        "-restore-from",
        archive.to_str().expect("utf-8"),
    ])
    .expect(3)
    .contains("restore");
    let fresh = c.lab.dir().join("fresh.state.json");
    c.run_with_state(
        &fresh,
        &[
            "apply",
            "-auto-approve",
            "-restore-from",
            archive.to_str().expect("utf-8"),
        ],
    )
    .expect(3)
    .contains("runs a cluster");
    assert_eq!(c.uid("c1"), uid, "a refused restore changed the cluster");
    // k0s itself refuses to restore over etcd data (stopped controller, data left).
    let local = c.lab.dir().join("hosts/c2/disk/tmp/b.tar.gz");
    std::fs::copy(&archive, &local).expect("copy into c2's /tmp");
    c.lab.exec_ok("c2", "k0s stop");
    let out = c
        .lab
        .exec("c2", "k0s restore --config-out=/tmp/r.yaml /tmp/b.tar.gz");
    assert!(!out.status.success());
    assert!(
        lab::stderr(&out).contains(
            "Error: failed to restore on step `etcd`: data-dir \"/var/lib/k0s/etcd\" not empty or could not be read"
        ),
        "{}",
        lab::stderr(&out)
    );

    // Disaster: every host rebuilt (new disks, machine-ids, host keys), the state gone.
    for n in ["c1", "c2", "w1"] {
        c.lab.wipe(n);
    }
    // The restored EtcdMember objects show the backup's member IDs until each new k0s rewrites
    // them, in two calls (labels, then status), here 3 s apart on c2 as when a status write is
    // retried: for that long c2's object shows its new start beside the backup's ID. (c1,
    // bootstrapped from the backup, has the same window; see the README's known gaps.)
    c.lab.exec_ok(
        "c2",
        "printf 'member_status_gap 3\\n' > /etc/k0s-lab/k0s-knobs",
    );
    std::fs::remove_file(&c.state).expect("rm state");
    let r = c.run(&[
        "apply",
        "-auto-approve",
        "-restore-from",
        archive.to_str().expect("utf-8"),
    ]);
    r.expect(0).contains("Restor");
    let restored = assert_one_cluster(&c, &["c1", "c2"], &["c1", "c2"]);
    // c2 joined c1's restored cluster: recorded with its new member ID, never the backup's.
    let recorded = c.state_host("c2").expect("recorded")["etcd"]["member_id"].clone();
    assert_eq!(
        recorded.as_str(),
        Some(etcd_member_id(&c, "c1", "c2").as_str()),
        "the backup's IDs were {backup_ids:?}"
    );
    assert_eq!(restored, uid, "the restored cluster has another identity");
    assert_eq!(c.state_json()["cluster"]["uid"], uid.as_str());
    let namespaces = c.objects("c2", "namespaces");
    assert!(
        namespaces.contains(&"before-backup".to_string()),
        "{namespaces:?}"
    );
    assert!(
        !namespaces.contains(&"after-backup".to_string()),
        "{namespaces:?}"
    );
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c.run(&["plan", "-detailed-exitcode"])
        .expect(0)
        .contains("No changes");

    // A disaster-recovery drill with k0sform alone: destroy, then restore onto the same (now
    // empty) machines; the state keeps its lineage and records the backup's identity again.
    let lineage = c.state_json()["lineage"].clone();
    c.run(&["destroy", "-auto-approve"]).expect(0);
    assert!(c.state_json()["cluster"].is_null(), "{}", c.state_json());
    c.run(&[
        "apply",
        "-auto-approve",
        "-restore-from",
        archive.to_str().expect("utf-8"),
    ])
    .expect(0)
    .contains("Restor");
    assert_eq!(assert_one_cluster(&c, &["c1", "c2"], &["c1", "c2"]), uid);
    assert_eq!(c.state_json()["lineage"], lineage);
    assert_eq!(c.state_json()["cluster"]["uid"], uid.as_str());
    assert!(
        c.objects("c2", "namespaces")
            .contains(&"before-backup".to_string())
    );
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c.run(&["plan", "-detailed-exitcode"])
        .expect(0)
        .contains("No changes");
}

/// etcd keeps the hostname's case, the EtcdMember object of k0s ≥ 1.34.1 does not: a controller
/// with capitals in its hostname is still removed from etcd when it leaves the spec (members are
/// matched by peer URL, not by name).
#[test]
fn controller_with_capitals_in_its_hostname_leaves_etcd_when_removed() {
    require_lab!();
    let hosts = [
        ("Ctl-A", "controller"),
        ("Ctl-B", "controller"),
        ("Ctl-C", "controller"),
    ];
    let mut c = Cluster::new(&hosts);
    c.spec_opts.k0s_version = Some("v1.34.1+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version("v1.34.1+k0s.0"));
    c.write_spec(&["Ctl-A", "Ctl-B", "Ctl-C"]);
    bootstrap(&c);
    assert_one_cluster(
        &c,
        &["Ctl-A", "Ctl-B", "Ctl-C"],
        &["Ctl-A", "Ctl-B", "Ctl-C"],
    );
    let names: BTreeSet<String> = c.members("Ctl-A").into_keys().collect();
    assert!(names.contains("Ctl-C"), "etcd keeps the case: {names:?}");
    assert!(
        c.state_host("Ctl-C").expect("recorded")["etcd"]["member_id"].is_string(),
        "Ctl-C's member ID was not recorded: {:?}",
        c.state_host("Ctl-C")
    );

    c.write_spec(&["Ctl-A", "Ctl-B"]);
    c.run(&["plan"])
        .expect(0)
        .contains("1 to remove")
        .contains("etcd member");
    c.apply();
    assert_one_cluster(&c, &["Ctl-A", "Ctl-B"], &["Ctl-A", "Ctl-B"]);
    assert!(
        !c.objects("Ctl-A", "etcdmembers")
            .contains(&"ctl-c".to_string())
    );
    assert!(c.state_host("Ctl-C").is_none());
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

/// Write the spec of `hosts` with `options:` YAML (indented under `spec:` here).
fn write_spec_with_options(c: &Cluster, hosts: &[&str], options: &str) {
    c.write_spec(hosts);
    let text = std::fs::read_to_string(&c.spec).expect("spec");
    let block: String = std::iter::once("  options:\n".to_string())
        .chain(options.lines().map(|l| format!("    {l}\n")))
        .collect();
    let with = text.replacen("spec:\n", &format!("spec:\n{block}"), 1);
    assert_ne!(text, with, "the lab spec has a spec: line");
    std::fs::write(&c.spec, with).expect("spec");
}

/// The Node operations the double logged on a controller: (verb, node, outcome) in order.
fn node_ops(c: &Cluster, via: &str) -> Vec<(String, String, String)> {
    let out = c.lab.ssh(via, "cat /var/lib/k0s/logs/kubectl.log");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((
                w.get(1)?.to_string(),
                w.get(2)?.to_string(),
                w.last()?.to_string(),
            ))
        })
        .collect()
}

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

/// An apply that must fail before any host changes: exit 1 with `needle`, every host's
/// installed k0s binary, service, config and data as before, the state file byte for byte as
/// before. A host whose own download succeeded keeps that verified binary staged beside the
/// installed one (`k0s.k0sform-new`, not installed, not running); the next run stages over it.
fn apply_fails_and_changes_nothing(c: &Cluster, names: &[&str], needle: &str) {
    let snapshot = |h: &str| -> String {
        format!(
            "{}\n{}",
            c.host_snapshot(h),
            c.lab.ssh_ok(h, "k0s version; ls /usr/local/bin")
        )
        .lines()
        .filter(|l| !l.contains("k0s.k0sform-new"))
        .collect::<Vec<_>>()
        .join("\n")
    };
    let hosts: Vec<String> = names.iter().map(|h| snapshot(h)).collect();
    let state = std::fs::read(&c.state).expect("state");
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains(needle);
    let after: Vec<String> = names.iter().map(|h| snapshot(h)).collect();
    assert_eq!(hosts, after, "a failed download changed a host");
    assert_eq!(
        state,
        std::fs::read(&c.state).expect("state"),
        "a failed download changed the state"
    );
}

/// Every host runs `version`, and nothing is left staged beside its binary.
#[track_caller]
fn runs_swapped_in(c: &Cluster, hosts: &[&str], version: &str) {
    for h in hosts {
        assert_eq!(c.lab.ssh_ok(h, "k0s version").trim(), version, "{h}");
        c.lab.ssh_ok(h, "test ! -e /usr/local/bin/k0s.k0sform-new");
    }
}

/// Issue 28, item 4: the k0s version a saved plan chose (the spec names none) is chosen again
/// at apply, never taken from the file: when the version index moved since the plan, the file
/// is stale (exit 5) and nothing is installed; planned again, it applies the new version.
#[test]
fn saved_plan_version_is_chosen_again_at_apply() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller")],
        LabOptions::default(),
        SpecOptions {
            from_release: true,
            ..SpecOptions::default()
        },
    );
    let mirror = c.lab.start_mirror();
    for v in ["v1.33.4+k0s.0", "v1.33.5+k0s.0"] {
        mirror.publish(v, &c.lab.k0s_double_with_version(v));
    }
    mirror.set_index("v1.33.4+k0s.0", "v1.33.5+k0s.0");
    c.use_mirror(&mirror);
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

/// k0sctl's default: no k0sBinaryPath, no uploadBinary, no version. The version comes from the
/// (loopback) version index, each host downloads k0s from the release mirror with its
/// published sha256; a downgrade is refused; every broken download (checksum, 404, timeout,
/// no curl/wget) fails before any host or the state changes; an upgrade swaps binaries in.
#[test]
fn hosts_download_k0s_from_a_release_mirror() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            from_release: true,
            ..SpecOptions::default()
        },
    );
    let mirror = c.lab.start_mirror();
    for v in ["v1.33.3+k0s.0", "v1.33.4+k0s.0", "v1.33.5+k0s.0"] {
        mirror.publish(v, &c.lab.k0s_double_with_version(v));
    }
    mirror.set_index("v1.33.4+k0s.0", "v1.33.5+k0s.0");
    c.use_mirror(&mirror);
    let hosts = ["c1", "w1"];

    // New cluster without a version: the stable one, shown with where it came from.
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("k0s version v1.33.4+k0s.0 (latest stable release, from http://")
        .contains("k0s v1.33.4+k0s.0 downloaded by the host from http://");
    c.apply().contains("Apply complete");
    runs_swapped_in(&c, &hosts, "v1.33.4+k0s.0");
    assert_eq!(c.state_json()["cluster"]["k0s_version"], "v1.33.4+k0s.0");
    assert_eq!(
        mirror.downloads("v1.33.4+k0s.0"),
        2,
        "one download per host"
    );
    // Converged: the running version is kept, nothing to do, nothing downloaded.
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // Downgrade: refused naming the hosts, unless -allow-downgrade.
    c.spec_opts.k0s_version = Some("v1.33.3+k0s.0".parse().unwrap());
    c.write_spec(&hosts);
    plan_changes_nothing(&c, &[])
        .expect(1)
        .contains("c1 (")
        .contains("w1 (")
        .contains("would be downgraded from v1.33.4+k0s.0 to v1.33.3+k0s.0")
        .contains("-allow-downgrade");
    plan_changes_nothing(&c, &["-allow-downgrade"])
        .expect(0)
        .contains("(-allow-downgrade)");

    // Upgrade, first against broken downloads.
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.write_spec(&hosts);
    let good = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    mirror.corrupt("v1.33.5+k0s.0");
    apply_fails_and_changes_nothing(&c, &hosts, "checksum mismatch");
    mirror.remove_binary("v1.33.5+k0s.0");
    apply_fails_and_changes_nothing(&c, &hosts, "404");
    mirror.publish("v1.33.5+k0s.0", &good);
    mirror.stall("v1.33.5+k0s.0");
    c.env
        .push(("K0SFORM_K0S_DOWNLOAD_TIMEOUT".into(), "3s".into()));
    apply_fails_and_changes_nothing(&c, &hosts, "timed out");
    c.env.pop();
    std::fs::remove_file(format!(
        "{}.stall",
        mirror.binary_path("v1.33.5+k0s.0").display()
    ))
    .expect("unstall");
    c.lab.hide("w1", &["/usr/bin/curl", "/usr/bin/wget"]);
    apply_fails_and_changes_nothing(&c, &hosts, "neither curl nor wget is installed");
    // Power-cycled, w1 has curl again (and runs k0s again from its unit).
    c.lab.power_off("w1");
    c.lab.power_on("w1");
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));

    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("k0s version v1.33.4+k0s.0 → v1.33.5+k0s.0");
    c.apply().contains("Apply complete");
    runs_swapped_in(&c, &hosts, "v1.33.5+k0s.0");
    for h in hosts {
        assert_eq!(
            c.state_host(h).expect("recorded")["k0s_version"],
            "v1.33.5+k0s.0"
        );
    }
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27.7: hosts with `k0sDownloadURL` (here the lab's loopback mirror) and no
/// `k0sDownloadSha256`, where no `sha256sums.txt` is published. k0sctl checks no checksum
/// (`pkg/k0s/binprovider/download.go`) and needs no internet: `plan` fetches nothing from the
/// default release URL (unreachable here), says in one line that the binary is not checked and
/// how to pin it; `apply` installs, and the sha256 each host computed is shown and recorded.
#[test]
fn k0s_download_url_without_published_sums_plans_and_installs() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            from_release: true,
            k0s_version: Some("v1.33.4+k0s.0".into()),
            ..SpecOptions::default()
        },
    );
    let mirror = c.lab.start_mirror();
    let v = "v1.33.4+k0s.0";
    mirror.publish(v, &c.lab.k0s_double_with_version(v));
    mirror.remove_sums(v);
    let sha = k0sform::hash::sha256_file(&mirror.binary_path(v)).expect("hash");
    for h in ["c1", "w1"] {
        c.spec_opts.host_yaml.insert(
            h.into(),
            format!("k0sDownloadURL: {}/releases/%v/k0s-%v-%p", mirror.url),
        );
    }
    c.write_spec(&["c1", "w1"]);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains(&format!("k0s {v} downloaded by the host from {}/releases/v1.33.4%2Bk0s.0/k0s-v1.33.4%2Bk0s.0-", mirror.url))
        .contains("(sha256 not checked, recorded as downloaded)")
        .contains("Warning: the k0s binary that c1, w1 download is not checked against a published sha256 (as in k0sctl; there is none for a k0sDownloadURL or before k0s v1.28.2): each host's sha256 of its download is recorded; set k0sDownloadSha256 on the host to pin it");
    c.apply().contains("Apply complete").contains(&format!(
        "has sha256 {sha} (not checked against a published sha256, as in k0sctl)"
    ));
    runs_swapped_in(&c, &["c1", "w1"], v);
    assert_eq!(mirror.downloads(v), 2, "one download per host");
    for h in ["c1", "w1"] {
        assert_eq!(
            c.state_host(h).expect("recorded")["k0s_binary"]["sha256"],
            sha.as_str(),
            "{h}"
        );
    }
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // Pinned: a binary that is not the pinned one is refused before anything changes.
    for h in ["c1", "w1"] {
        c.spec_opts.host_yaml.insert(
            h.into(),
            format!(
                "k0sDownloadURL: {}/releases/%v/k0s-%v-%p\nk0sDownloadSha256: {}",
                mirror.url,
                "0".repeat(64)
            ),
        );
    }
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".into());
    mirror.publish(
        "v1.33.5+k0s.0",
        &c.lab.k0s_double_with_version("v1.33.5+k0s.0"),
    );
    mirror.remove_sums("v1.33.5+k0s.0");
    c.write_spec(&["c1", "w1"]);
    apply_fails_and_changes_nothing(&c, &["c1", "w1"], "checksum mismatch");
}

/// `uploadBinary: true`: k0sform downloads each release once into its local cache and uploads
/// it to every host. The spec names the version without its `v`, as k0sctl allows: the release
/// is still `v1.33.4+k0s.0` (issue 27: that used to be a 404).
#[test]
fn upload_binary_downloads_once_locally_for_every_host() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker"), ("w2", "worker")],
        LabOptions::default(),
        SpecOptions {
            from_release: true,
            k0s_version: Some("1.33.4+k0s.0".into()),
            host_yaml: ["c1", "w1", "w2"]
                .iter()
                .map(|h| (h.to_string(), "uploadBinary: true".to_string()))
                .collect(),
            ..SpecOptions::default()
        },
    );
    let mirror = c.lab.start_mirror();
    mirror.publish(
        "v1.33.4+k0s.0",
        &c.lab.k0s_double_with_version("v1.33.4+k0s.0"),
    );
    c.use_mirror(&mirror);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("uploaded (sha256 ")
        .contains(", downloaded locally from http://");
    assert_eq!(
        mirror.downloads("v1.33.4+k0s.0"),
        0,
        "plan downloads no binary"
    );
    c.apply().contains("Apply complete");
    assert_eq!(mirror.downloads("v1.33.4+k0s.0"), 1, "one local download");
    for h in ["c1", "w1", "w2"] {
        assert_eq!(
            c.lab.ssh_ok(h, "k0s version").trim(),
            "v1.33.4+k0s.0",
            "{h}"
        );
    }
    let cached = c
        .lab
        .dir()
        .join("cache/k0sform/k0s/linux")
        .join(lab::k0s_arch())
        .join("k0s-1.33.4+k0s.0");
    assert!(cached.is_file(), "{} cached", cached.display());
}

/// The Node operations on `via` with their times (the double's kubectl.log): (time, verb, node).
fn timed_node_ops(c: &Cluster, via: &str) -> Vec<(f64, String, String)> {
    let out = c.lab.ssh(via, "cat /var/lib/k0s/logs/kubectl.log");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((
                w.first()?.parse().ok()?,
                w.get(1)?.to_string(),
                w.get(2)?.to_string(),
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

/// Issue 16: a worker whose address changed (same machine: machine-id and host key) is planned
/// as a move, never a removal plus a join; its recorded key is checked (no first contact); the
/// apply moves the record (node name and identity kept) and reinstalls it for its new
/// `--node-ip` (privateAddress is its address in the lab), with a drain; then nothing to do.
#[test]
fn readdressed_worker_is_moved_never_removed_and_joined() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
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

/// Issue 30: a running worker that the spec now calls a `controller+worker` is refused (exit 3)
/// as k0sctl refuses a role change, naming the host, both roles and the steps; `plan` and
/// `apply` change nothing: not the host, not the state.
#[test]
fn role_flip_of_a_running_host_is_refused_and_changes_nothing() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
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
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
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

/// Issue 16: `environment` reaches the service as `k0s install -e` writes it; an unchanged
/// environment plans nothing; a changed one is a reinstall and restart (values hidden in the
/// plan), after which the service runs with the new values.
#[test]
fn environment_change_reinstalls_the_service_and_unchanged_plans_nothing() {
    require_lab!();
    let mut c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
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

/// Issue 28, item 8: `plan -probe-out` keeps no k0s.yaml secret (nor its sha256), says so in
/// the file and on stderr; the plan's diff shows the secret as changed without its value or a
/// hash of it, and the URL's credentials likewise. The lab's plain-http mirror is warned about.
#[test]
fn probe_out_redacts_the_config_secrets_and_says_so() {
    require_lab!();
    // A config of the spec's own: without one the leader's k0s.yaml, hand edits included, is
    // the base (as k0sctl), and the edit below would not be a difference to show.
    let c = Cluster::with(
        &[("c1", "controller")],
        LabOptions::default(),
        SpecOptions {
            k0s_config: Some("spec:\n  telemetry:\n    enabled: false".into()),
            ..SpecOptions::default()
        },
    );
    bootstrap(&c);
    c.lab.exec_ok(
        "c1",
        "printf 'x-notes:\\n  password: s3cr3t-pw\\n  mirror: https://ci:t0ken@charts.example/x\\n' >> /etc/k0s/k0s.yaml",
    );
    let out = c.lab.dir().join("probe.json");
    let r = c.run(&["plan", "-probe-out", out.to_str().unwrap()]);
    r.expect(0)
        .contains("password: (secret, changed: old value)")
        .contains("https://(secret, changed: old value)@charts.example/x")
        .contains("saved with its secrets redacted");
    let cfg = c.lab.exec_ok("c1", "cat /etc/k0s/k0s.yaml");
    let file = std::fs::read_to_string(&out).unwrap();
    for secret in [
        "s3cr3t-pw".to_string(),
        "t0ken".to_string(),
        k0sform::hash::sha256_hex(&cfg),
        k0sform::hash::sha256_hex("s3cr3t-pw")[..8].to_string(),
    ] {
        assert!(!file.contains(&secret), "{secret} in\n{file}");
        assert!(!r.text().contains(&secret), "{secret} in\n{}", r.text());
    }
    assert!(file.contains("\"redacted\""), "{file}");
    // The lab's mirror is plain http.
    r.contains("Warning: K0SFORM_K0S_DOWNLOAD_URL is plain http");
    // The file plans again (offline).
    c.run(&["plan", "-probe-in", out.to_str().unwrap()])
        .expect(0)
        .contains("password: (secret");
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
    let c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        spec_opts,
    );
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

/// Everything of k0s k0sform could have left on a host: a running k0s, a service unit, anything
/// in the data dir, the binary, k0s.yaml, an etcd answering on the host's client port.
fn k0s_traces(c: &Cluster, name: &str) -> Vec<String> {
    let mut traces = Vec::new();
    if c.lab.exec(name, "k0s status").status.success() {
        traces.push("k0s runs".to_string());
    }
    let units = c.lab.exec(
        name,
        "ls /etc/systemd/system/k0scontroller.service /etc/systemd/system/k0sworker.service 2>/dev/null",
    );
    if !lab::stdout(&units).trim().is_empty() {
        traces.push(format!("service unit: {}", lab::stdout(&units).trim()));
    }
    let data = c.lab.exec(name, "ls -A /var/lib/k0s 2>/dev/null");
    if !lab::stdout(&data).trim().is_empty() {
        traces.push(format!("data dir holds: {}", lab::stdout(&data).trim()));
    }
    for f in ["/usr/local/bin/k0s", "/etc/k0s/k0s.yaml"] {
        if c.lab.exec(name, &format!("test -e {f}")).status.success() {
            traces.push(format!("{f} is there"));
        }
    }
    let etcd: std::net::SocketAddr = format!("{}:2379", c.lab.address(name))
        .parse()
        .expect("address");
    if std::net::TcpStream::connect_timeout(&etcd, std::time::Duration::from_secs(2)).is_ok() {
        traces.push("etcd answers on :2379".to_string());
    }
    traces
}

/// Issue 16: `plan` takes the state lock (exit 4 while someone holds it; -lock=false goes on);
/// destroy refuses a host that is not the recorded machine (exit 3, nothing reset); a destroy
/// planned with -out runs through `apply FILE`, leaving every host reset (no k0s, no service,
/// empty data dir, no etcd) and an empty state of the same lineage; destroying again changes
/// nothing.
#[test]
fn destroy_resets_every_host_and_empties_the_state() {
    require_lab!();
    let c = Cluster::new(THREE_PLUS_TWO);
    bootstrap(&c);
    assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    let names = ["c1", "c2", "c3", "w1", "w2"];
    let before = c.state_json();
    let lineage = before["lineage"].clone();

    // The lock, taken the way every k0sform run takes it: plan waits for nobody, exits 4.
    {
        use k0sform::state::StateStore;
        let store = k0sform::state::LocalStore::new(&c.state);
        let guard = store
            .lock("test holds the lock", std::time::Duration::ZERO)
            .expect("take the state lock");
        c.run(&["plan"])
            .expect(4)
            .contains("locked")
            .contains("test holds the lock");
        c.run(&["plan", "-destroy"]).expect(4);
        plan_changes_nothing(&c, &["-lock=false"]).expect(0);
        drop(guard);
    }
    c.run(&["plan"]).expect(0);

    // w2 now says it is another machine: destroy refuses (exit 3) and resets nothing.
    let mid = c.lab.exec_ok("w2", "cat /etc/machine-id");
    c.lab.exec_ok(
        "w2",
        "echo 0123456789abcdef0123456789abcdef > /etc/machine-id",
    );
    let snaps: Vec<String> = names.iter().map(|n| c.host_snapshot(n)).collect();
    let serial = c.state_serial();
    plan_changes_nothing(&c, &["-destroy"])
        .expect(3)
        .contains("not the machine the state recorded")
        .contains(&format!("-replace {}", c.lab.address("w2")));
    c.run(&["destroy", "-auto-approve"])
        .expect(3)
        .contains("not the machine the state recorded");
    assert_eq!(
        snaps,
        names.iter().map(|n| c.host_snapshot(n)).collect::<Vec<_>>(),
        "a refused destroy touched a host"
    );
    assert_eq!(c.state_serial(), serial);
    c.lab
        .exec_ok("w2", &format!("echo {} > /etc/machine-id", mid.trim()));

    // Without a terminal and without -auto-approve, nothing is destroyed.
    c.run(&["destroy"]).expect(1).contains("no terminal");
    c.run(&["-input=false", "destroy"])
        .expect(1)
        .contains("-input=false");

    // What the checks below must not find any more (so they can fail).
    for n in names {
        let traces = k0s_traces(&c, n);
        // Controllers: k0s, unit, data, binary, k0s.yaml, etcd; workers: no k0s.yaml, no etcd.
        let want = if n.starts_with('c') { 6 } else { 4 };
        assert_eq!(traces.len(), want, "{n} before destroy: {traces:?}");
    }

    // Planned and saved, then applied from the file.
    let file = c.lab.dir().join("destroy.plan");
    let file = file.to_str().expect("utf-8 path");
    plan_changes_nothing(&c, &["-destroy", "-out", file])
        .expect(0)
        .contains("k0sform will DESTROY cluster")
        .contains("etcd 3 → 2 members")
        .contains("the last etcd member")
        .contains("Plan: 5 hosts to destroy");
    let snaps: Vec<String> = names.iter().map(|n| c.host_snapshot(n)).collect();
    // A destroy plan file is applied only with -destroy (issue 28, item 4): -auto-approve
    // alone does not run it.
    c.run(&["apply", file])
        .expect(5)
        .contains("made with -destroy but apply was run without it");
    c.run(&["apply", "-auto-approve", file])
        .expect(5)
        .contains("repeat the flag on the command line");
    // With -destroy it asks for the cluster's name like `destroy` does.
    c.run(&["apply", "-destroy", file])
        .expect(1)
        .contains("destroy needs confirmation but there is no terminal");
    c.run(&["-input=false", "apply", "-destroy", file])
        .expect(1)
        .contains("-input=false");
    c.run_on_terminal(&["apply", "-destroy", file], "not-the-name")
        .expect(1)
        .contains("the answer is not the cluster's name");
    assert_eq!(c.state_serial(), serial);
    assert_eq!(
        snaps,
        names.iter().map(|n| c.host_snapshot(n)).collect::<Vec<_>>(),
        "a refused destroy touched a host"
    );
    c.run(&["apply", "-destroy", "-auto-approve", file])
        .expect(0)
        .contains("Apply complete");

    for n in names {
        let traces = k0s_traces(&c, n);
        assert!(traces.is_empty(), "{n} was not reset: {traces:?}");
    }
    let after = c.state_json();
    assert_eq!(after["lineage"], lineage, "the lineage changed");
    assert!(after["serial"].as_u64() > before["serial"].as_u64());
    assert_eq!(after["hosts"], serde_json::json!([]), "{after}");
    assert!(after["cluster"].is_null(), "{after}");
    assert_eq!(
        after["intents"].as_array().map_or(0, Vec::len),
        0,
        "{after}"
    );

    // Again: nothing is left to destroy (`apply -destroy` is `destroy`).
    let serial = c.state_serial();
    c.run(&["destroy", "-auto-approve"])
        .expect(0)
        .contains("No changes");
    c.run(&["apply", "-destroy", "-auto-approve"])
        .expect(0)
        .contains("No changes");
    assert_eq!(c.state_serial(), serial);
}

/// Issue 16: a controller only in the state is destroyed too; an unreachable host refuses the
/// destroy (exit 1, nothing reset) until `-exclude` names it; a destroy killed part-way (during an etcd leave, then during a reset) is finished
/// by running it again; the excluded host is forgotten but not reset; `-json` prints events.
#[test]
fn destroy_killed_part_way_resumes_and_unreachable_hosts_need_exclude() {
    require_lab!();
    let c = Cluster::new(THREE_PLUS_ONE);
    bootstrap(&c);
    let lineage = c.state_json()["lineage"].clone();
    let controllers = ["c1", "c2", "c3"];
    let w1 = c.lab.address("w1");
    // c3 is only in the state from now on: destroy reaches and resets it all the same.
    c.write_spec(&["c1", "c2", "w1"]);

    c.lab.power_off("w1");
    let snaps: Vec<String> = controllers.iter().map(|n| c.host_snapshot(n)).collect();
    let serial = c.state_serial();
    c.run(&["destroy", "-auto-approve"])
        .expect(1)
        .contains(&w1)
        .contains(&format!("-exclude {w1}"));
    assert_eq!(
        snaps,
        controllers
            .iter()
            .map(|n| c.host_snapshot(n))
            .collect::<Vec<_>>(),
        "a refused destroy touched a host"
    );
    assert_eq!(c.state_serial(), serial);

    let args = ["destroy", "-auto-approve", "-exclude", &w1];
    assert!(
        kill_apply_at(&c, &args, "Removing etcd member"),
        "the destroy never removed a member"
    );
    c.run(&["state", "list"]).expect(0);
    assert!(
        kill_apply_at(&c, &args, "Stopping and resetting k0s"),
        "the resumed destroy never reset a host"
    );
    c.run(&["state", "list"]).expect(0);
    let r = c.run(&["destroy", "-auto-approve", "-exclude", &w1, "-json"]);
    r.expect(0);
    let events: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        events.iter().any(|e| e["type"] == "summary"),
        "no summary event: {events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "planned" && e["plan"]["destroy"] == true),
        "no destroy plan event"
    );

    for n in controllers {
        let traces = k0s_traces(&c, n);
        assert!(traces.is_empty(), "{n} was not reset: {traces:?}");
    }
    let after = c.state_json();
    assert_eq!(after["lineage"], lineage);
    assert_eq!(after["hosts"], serde_json::json!([]), "{after}");
    assert!(after["cluster"].is_null(), "{after}");
    // Excluded means forgotten, not reset: w1 still has its k0s.
    c.lab.power_on("w1");
    assert!(
        !k0s_traces(&c, "w1").is_empty(),
        "the excluded w1 was reset"
    );
}

/// Start `apply` with `args` and kill -9 it as soon as `cond` holds (polled). Returns whether
/// it held before the run ended on its own.
fn kill_apply_when(c: &Cluster, args: &[&str], mut cond: impl FnMut() -> bool) -> bool {
    let mut child = c
        .command(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn apply");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut seen = false;
    while std::time::Instant::now() < end {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        if cond() {
            seen = true;
            let _ = child.kill(); // SIGKILL
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

/// A destroy killed between a host's `k0s reset` and the removal of its k0s binary (the lab's
/// `reset-blocks` knob holds the double's reset after its clean-up) leaves the host with only
/// the binary (and a controller's k0s.yaml) and still in the state; destroy run again resets it
/// again, removes them and forgets it: first for a worker, then for the last controller.
#[test]
fn destroy_killed_after_a_reset_removes_the_binary_when_run_again() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&c);
    let lineage = c.state_json()["lineage"].clone();
    let args = ["destroy", "-auto-approve"];
    // Reset done, binary still there: no unit, an empty data dir, the binary.
    let only_binary = |n: &str| {
        c.lab
            .exec(
                n,
                "test -e /usr/local/bin/k0s && ! ls /etc/systemd/system/k0s*.service 2>/dev/null \
                 && [ -z \"$(ls -A /var/lib/k0s 2>/dev/null)\" ]",
            )
            .status
            .success()
    };
    for n in ["c1", "w1"] {
        c.lab.exec_ok(n, "touch /etc/k0s-lab/reset-blocks");
    }

    // Killed after w1's reset: w1 keeps its binary and its state record.
    assert!(
        kill_apply_when(&c, &args, || only_binary("w1")),
        "the destroy never reset w1"
    );
    c.lab.exec_ok("w1", "rm /etc/k0s-lab/reset-blocks");
    assert_eq!(
        k0s_traces(&c, "w1"),
        ["/usr/local/bin/k0s is there"],
        "w1 after its reset"
    );
    assert!(
        c.state_host("w1").is_some(),
        "w1 forgotten before its binary was removed"
    );
    c.run(&["plan", "-destroy"])
        .expect(0)
        .contains(
            "k0s is neither installed nor running, but its binary is still at /usr/local/bin/k0s",
        )
        .contains("k0s stopped and reset on w1");

    // Run again, killed after c1's reset: w1 is done, c1 keeps its binary and k0s.yaml.
    assert!(
        kill_apply_when(&c, &args, || only_binary("c1")),
        "the resumed destroy never reset c1"
    );
    c.lab.exec_ok("c1", "rm /etc/k0s-lab/reset-blocks");
    let w1 = k0s_traces(&c, "w1");
    assert!(w1.is_empty(), "w1 was not finished: {w1:?}");
    assert!(c.state_host("w1").is_none(), "w1 still recorded");
    assert_eq!(
        k0s_traces(&c, "c1"),
        ["/usr/local/bin/k0s is there", "/etc/k0s/k0s.yaml is there"],
        "c1 after its reset"
    );
    assert!(
        c.state_host("c1").is_some(),
        "c1 forgotten before its binary was removed"
    );

    c.run(&args).expect(0);
    for n in ["c1", "w1"] {
        let traces = k0s_traces(&c, n);
        assert!(traces.is_empty(), "{n} was not finished: {traces:?}");
    }
    let after = c.state_json();
    assert_eq!(after["lineage"], lineage);
    assert_eq!(after["hosts"], serde_json::json!([]), "{after}");
    assert!(after["cluster"].is_null(), "{after}");
    c.run(&args).expect(0).contains("No changes");
}

/// An etcd member no host of the spec or the state owns (added by hand with etcdctl and never
/// started, so down) is removed first by destroy, through the controller reset last, and every
/// controller then leaves in turn. Before, such a member made the third leave break quorum (4
/// members, 3 healthy) and destroy was refused.
#[test]
fn destroy_removes_an_etcd_member_no_host_owns_first() {
    require_lab!();
    let c = Cluster::new(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
    ]);
    bootstrap(&c);
    let c1 = c.lab.address("c1");
    // An address of the lab's own range that no host has.
    let x = format!("{}.250", c1.rsplit_once('.').expect("IPv4").0);
    let url = format!("http://{x}:2380");
    let etcdctl = |args: &str| {
        c.lab
            .exec(
                "c1",
                &format!("ETCDCTL_API=3 etcdctl --endpoints=http://{c1}:2379 {args}"),
            )
            .status
            .success()
    };
    // etcd's strict reconfiguration check refuses an add until c1 has seen every voter for 5 s.
    c.eventually(60, "a member added by hand", || {
        etcdctl(&format!("member add x9 --peer-urls={url}"))
    });
    assert_eq!(c.members("c1").len(), 4, "{:?}", c.members("c1"));

    c.run(&["plan", "-destroy"])
        .expect(0)
        .contains(&format!(
            "etcd member ({url}, added but never started), which no host of the spec or the state owns, removed via c1 before any controller leaves"
        ))
        .contains("etcd 4 → 3 members, 3 healthy after; quorum of 3 is 2");
    c.run(&["destroy", "-auto-approve"]).expect(0);
    for n in ["c1", "c2", "c3"] {
        let traces = k0s_traces(&c, n);
        assert!(traces.is_empty(), "{n} was not reset: {traces:?}");
    }
    let after = c.state_json();
    assert_eq!(after["hosts"], serde_json::json!([]), "{after}");
    assert!(after["cluster"].is_null(), "{after}");
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

/// Issue 13: a single-host kine cluster built exactly as k0sctl v0.32 builds it (k0sctl
/// `cluster/host.go` `K0sInstallFlags`: `--data-dir`, `--single=true`, `--config`; its k0s.yaml
/// from `phase/configure_k0s.go`: a timestamp header, the spec's config, the host's address in
/// `spec.api.sans`, no `storage:` key because k0sctl's storage type for `single` is kine) is
/// adopted with `apply -refresh-only`: no etcd member is looked for, and the next plan changes
/// nothing.
#[test]
fn single_kine_cluster_built_by_k0sctl_is_adopted_and_plans_no_changes() {
    require_lab!();
    let spec_opts = SpecOptions {
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        k0s_config: Some("spec:\n  telemetry:\n    enabled: false".into()),
        ..SpecOptions::default()
    };
    let c = Cluster::with(&[("s1", "single")], LabOptions::default(), spec_opts);
    c.lab.install_double("s1");
    let addr = c.lab.address("s1");
    let cfg = format!(
        "# generated-by-k0sctl 2026-08-01T10:00:00Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    sans:\n    - {addr}\n  telemetry:\n    enabled: false\n"
    );
    start_single_as_k0sctl_then_adopt(&c, Some(&cfg), "kine");
    assert!(c.state_host("s1").expect("recorded")["etcd"].is_null());
    assert_eq!(c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml"), cfg);
}

/// Write `cfg` as s1's k0s.yaml (None: it is there already), install and start `s1` as k0sctl
/// does (`--single=true`), check it runs `storage`, adopt it with `apply -refresh-only`: the
/// next plan changes nothing, and neither did adopting.
fn start_single_as_k0sctl_then_adopt(c: &Cluster, cfg: Option<&str>, storage: &str) {
    if let Some(cfg) = cfg {
        c.lab.ssh_ok(
            "s1",
            &format!("mkdir -p /etc/k0s && printf '%s' '{cfg}' > /etc/k0s/k0s.yaml && chmod 600 /etc/k0s/k0s.yaml"),
        );
    }
    c.lab.ssh_ok(
        "s1",
        "k0s config validate --config=/etc/k0s/k0s.yaml && k0s install controller --data-dir=/var/lib/k0s --single=true --config=/etc/k0s/k0s.yaml && k0s start",
    );
    wait_api_ready(c, "s1");
    c.eventually(60, "s1 Ready", || c.nodes("s1").get("s1") == Some(&true));
    let status = c.lab.ssh_ok("s1", "k0s status -o json");
    let st: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(
        st["ClusterConfig"]["spec"]["storage"]["type"], storage,
        "{status}"
    );
    let uid = c.uid("s1");
    let before = c.host_snapshot("s1");
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
    assert_eq!(c.state_json()["cluster"]["uid"], uid.as_str());
    plan_changes_nothing(c, &["-detailed-exitcode"])
        .expect(0)
        .contains("No changes");
    assert_eq!(before, c.host_snapshot("s1"), "adoption changed the host");
}

/// Issue 13: k0s names a controller's EtcdMember after its etcd member name (the OS hostname,
/// lower-cased from v1.34.1) and its ControlNode after the lower-cased OS hostname, whatever
/// `hostname:` (`--hostname-override`, the Node's name) says. Removing a controller+worker
/// whose spec sets `hostname:` and whose OS hostname has capitals deletes those objects by
/// their own names, its Node by the override, and its etcd member.
#[test]
fn removed_controller_with_a_hostname_override_leaves_no_objects_behind() {
    require_lab!();
    let hosts = [
        ("Ctl-A", "controller"),
        ("Ctl-B", "controller"),
        ("Ctl-C", "controller+worker"),
    ];
    let mut c = Cluster::new(&hosts);
    c.spec_opts.k0s_version = Some("v1.34.1+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version("v1.34.1+k0s.0"));
    c.spec_opts
        .host_yaml
        .insert("Ctl-C".into(), "hostname: kube-c".into());
    c.write_spec(&["Ctl-A", "Ctl-B", "Ctl-C"]);
    bootstrap(&c);
    assert_one_cluster(
        &c,
        &["Ctl-A", "Ctl-B", "Ctl-C"],
        &["Ctl-A", "Ctl-B", "Ctl-C"],
    );
    c.eventually(60, "EtcdMember objects", || {
        c.objects("Ctl-A", "etcdmembers") == ["ctl-a", "ctl-b", "ctl-c"]
    });
    assert_eq!(
        c.objects("Ctl-A", "controlnodes"),
        ["ctl-a", "ctl-b", "ctl-c"]
    );
    assert!(c.nodes("Ctl-A").contains_key("kube-c"));

    c.write_spec(&["Ctl-A", "Ctl-B"]);
    c.run(&["plan"])
        .expect(0)
        .contains("1 to remove")
        .contains("EtcdMember \"ctl-c\"")
        .contains("ControlNode \"ctl-c\"");
    c.apply();
    assert_one_cluster(&c, &["Ctl-A", "Ctl-B"], &["Ctl-A", "Ctl-B"]);
    assert_eq!(c.objects("Ctl-A", "etcdmembers"), ["ctl-a", "ctl-b"]);
    assert_eq!(c.objects("Ctl-A", "controlnodes"), ["ctl-a", "ctl-b"]);
    assert!(!c.nodes("Ctl-A").contains_key("kube-c"));
    assert!(c.state_host("Ctl-C").is_none());
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// The questions an operator answers on a terminal: `apply` runs only on `yes`, `destroy` only
/// on the cluster's name; any other answer changes no host and not the state.
#[test]
fn terminal_confirmations_guard_apply_and_destroy() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
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

/// A real k0s binary is a few hundred MB: a plan hashes a host's binary only when its `stat`
/// line is not the one recorded with its hash, so an unchanged binary costs no hashing, while a
/// binary patched in place (same version, same size and modification time kept or not) is
/// still seen and replaced by the spec's.
#[test]
fn plan_hashes_the_k0s_binary_only_when_it_changed() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&c);
    for h in ["c1", "w1"] {
        let rec = &c.state_host(h).expect("recorded")["k0s_binary"];
        assert_eq!(rec["sha256"].as_str().map(str::len), Some(64), "{h}: {rec}");
        assert!(
            rec["stat"].as_str().is_some_and(|s| !s.is_empty()),
            "{h}: {rec}"
        );
    }
    // Every sha256sum the probe runs on w1, logged by a wrapper first in its PATH.
    log_hashes_on(&c, "w1");
    let hashed = || k0s_hashes(&c, "w1");
    // The wrapper is what the probe's shell finds.
    c.lab.ssh_ok("w1", "sha256sum /usr/local/bin/k0s");
    assert_eq!(hashed(), 1, "the wrapper logs");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    assert_eq!(hashed(), 0, "the unchanged binary was hashed");

    // The same version patched in place: the stat line moved, the binary is hashed and its
    // other bytes replaced by the spec's binary.
    c.lab.exec_ok(
        "w1",
        "printf '# patched\\n' >>/usr/local/bin/k0s && /usr/local/bin/k0s version",
    );
    c.run(&["plan", "-detailed-exitcode"])
        .expect(2)
        .contains("the k0s binary changed");
    assert_eq!(hashed(), 1, "the patched binary was not hashed");
    let before = c.state_host("w1").expect("w1")["k0s_binary"].clone();
    c.apply();
    let after = c.state_host("w1").expect("w1")["k0s_binary"].clone();
    assert_ne!(
        before["stat"], after["stat"],
        "the new binary's stat line recorded"
    );
    hashes_logged(&c, "w1");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    assert_eq!(hashed(), 0, "the binary k0sform installed was hashed again");
    assert_eq!(
        c.lab
            .exec_ok("w1", "/usr/bin/sha256sum /usr/local/bin/k0s")
            .split(' ')
            .next(),
        after["sha256"].as_str()
    );
}

/// The command lines of the Node watches (`kubectl get nodes --watch-only`) running on a host, as
/// it sees them (its /proc shows its own processes only).
fn node_watches_on(c: &Cluster, host: &str) -> Vec<String> {
    c.lab
        .exec_ok(
            host,
            "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline 2>/dev/null; echo; done",
        )
        .lines()
        .filter(|l| l.contains("--watch-only"))
        .map(str::to_string)
        .collect()
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

/// Issue 27: a `single` host built as k0sctl builds it without `spec.k0s.config`: its k0s.yaml is
/// `k0s config create` (k0sctl `phase/configure_k0s.go` `Prepare`; the host's own address is
/// already in its SANs), whose `storage.type: etcd` makes it run etcd despite `--single`. The
/// spec names the version without a `v` (valid for k0sctl). Adopted with `apply -refresh-only`,
/// the next plan changes nothing: no switch to kine, no drain.
#[test]
fn single_etcd_host_built_by_k0sctl_without_a_config_is_adopted_and_upgraded() {
    require_lab!();
    let spec_opts = SpecOptions {
        k0s_version: Some("1.33.4+k0s.0".into()),
        ..SpecOptions::default()
    };
    let c = Cluster::with(&[("s1", "single")], LabOptions::default(), spec_opts);
    c.lab.install_double("s1");
    c.lab.ssh_ok(
        "s1",
        "mkdir -p /etc/k0s && k0s config create > /etc/k0s/k0s.yaml && chmod 600 /etc/k0s/k0s.yaml",
    );
    let cfg = c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml");
    // What real k0s prints (cmd/config/create.go, DefaultClusterConfig): the host's address as
    // api.address, in the SANs and as etcd peerAddress; storage type etcd.
    let addr = c.lab.address("s1");
    for line in [
        "apiVersion: k0s.k0sproject.io/v1beta1".to_string(),
        "kind: ClusterConfig".to_string(),
        format!("    address: {addr}"),
        format!("    - {addr}"),
        format!("      peerAddress: {addr}"),
        "    type: etcd".to_string(),
    ] {
        assert!(cfg.lines().any(|l| l == line), "{line:?} not in\n{cfg}");
    }
    start_single_as_k0sctl_then_adopt(&c, None, "etcd");
    assert_eq!(
        c.state_host("s1").expect("recorded")["k0s_version"],
        "v1.33.4+k0s.0"
    );
    assert_eq!(c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml"), cfg);
    // Then an upgrade: the version changes, k0sctl's k0s.yaml stays, and nothing is left to do.
    let mut c = c;
    let r = plan_upgrade_to_v1_33_5(&mut c, &["s1"]);
    assert!(!r.text().contains("k0s.yaml differs"), "{}", r.text());
    c.apply().contains("Apply complete");
    assert_eq!(c.lab.ssh_ok("s1", "k0s version").trim(), "v1.33.5+k0s.0");
    assert_eq!(c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml"), cfg);
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
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

/// Issue 27: `skipWaitForDeleteTimeout: 30s` reaches kubectl as `30` (kubectl's flag is an
/// integer of seconds; the double rejects `30s` as kubectl does), and `gracePeriod: 0` is
/// k0sctl's default again: a worker upgrade drains, restarts and uncordons.
#[test]
fn drain_with_skip_wait_for_delete_timeout_passes_kubectl_seconds() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".into()),
            ..SpecOptions::default()
        },
    );
    let hosts = ["c1", "w1"];
    let options = "drain:\n  skipWaitForDeleteTimeout: 30s\n  gracePeriod: 0s\n  timeout: 5s\n";
    write_spec_with_options(&c, &hosts, options);
    bootstrap(&c);
    c.eventually(60, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    // The double reads the flag as kubectl does.
    let bad = c.lab.ssh(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl drain --skip-wait-for-delete-timeout=30s node/w1",
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        lab::stderr(&bad).contains(
            "invalid argument \"30s\" for \"--skip-wait-for-delete-timeout\" flag: strconv.ParseInt"
        ),
        "{}",
        lab::stderr(&bad)
    );

    let newer = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".into());
    c.spec_opts.k0s_binary = Some(newer);
    write_spec_with_options(&c, &hosts, options);
    c.run(&["plan"])
        .expect(0)
        .contains("Node \"w1\" cordoned and drained via c1");
    c.apply().contains("Apply complete");
    let ops = node_ops(&c, "c1");
    assert!(
        ops.iter()
            .any(|(v, n, ok)| v == "drain" && n == "w1" && ok == "ok"),
        "{ops:#?}"
    );
    assert_eq!(c.lab.ssh_ok("w1", "k0s version").trim(), "v1.33.5+k0s.0");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27: a `k0s reset` whose clean-up fails (`Error: errors occurred during clean-up: …`,
/// exit 1; k0s `pkg/cleanup/cleanup.go`) is a warning, as in k0sctl: the removal completes,
/// the warning is in the run's summary, and the host leaves the state.
#[test]
fn removal_completes_with_a_warning_when_reset_clean_up_fails() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&c);
    c.eventually(60, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c.lab.exec_ok(
        "w1",
        "mkdir -p /etc/k0s-lab && echo 'failed to delete k0s generated data-dir: unlinkat /var/lib/k0s/kubelet: device or resource busy' > /etc/k0s-lab/reset-fails",
    );
    c.write_spec(&["c1"]);
    let r = c.apply();
    r.contains("Apply complete")
        .contains("warning")
        .contains("errors occurred during clean-up: failed to delete k0s generated data-dir");
    assert!(!c.nodes("c1").contains_key("w1"));
    assert!(c.state_host("w1").is_none());
    c.lab
        .exec_ok("w1", "test ! -e /etc/systemd/system/k0sworker.service");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 28, item 1: a hostile (or mistaken) state entry for a host that left the spec, at an
/// address of the lab's range no machine answers at, must not act on the live cluster. An entry
/// recording c2's member ID and peer URL (whose address sorts before every host's), two entries
/// recording c2's and c3's, an entry recorded as a controller with w1's node name, and an entry
/// whose recorded data dir is `/`: every apply is refused (exit 3, naming both hosts) before any
/// step; etcd keeps its 3 members and every Node stays, and the real state is untouched.
#[test]
fn hostile_state_entries_never_remove_live_members_or_nodes() {
    require_lab!();
    let c = Cluster::new(THREE_PLUS_ONE);
    bootstrap(&c);
    c.eventually(60, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    let prefix = c
        .lab
        .address("c1")
        .rsplit_once('.')
        .expect("IPv4")
        .0
        .to_string();
    let original = std::fs::read_to_string(&c.state).expect("state");
    let serial = c.state_serial();
    let members_before = c.members("c1");
    let nodes_before = c.nodes("c1");
    assert_eq!(members_before.len(), 3, "{members_before:?}");
    let recorded = |name: &str| c.state_host(name).expect("recorded");
    // A state-only entry at `last` of the lab's range, from `template`'s record.
    let entry = |last: u8, name: &str, role: &str, etcd: serde_json::Value| {
        let mut e = recorded("w1");
        e["address"] = format!("{prefix}.{last}").into();
        e["role"] = role.into();
        e["node_name"] = name.into();
        e["machine_id"] = format!("{:032x}", last).into();
        e["etcd"] = etcd;
        e
    };
    let with_entries = |entries: Vec<serde_json::Value>| {
        let mut st: serde_json::Value = serde_json::from_str(&original).expect("state JSON");
        let hosts = st["hosts"].as_array_mut().expect("hosts");
        hosts.extend(entries);
        hosts.sort_by_key(|h| h["address"].as_str().unwrap_or_default().to_string());
        std::fs::write(&c.state, serde_json::to_string_pretty(&st).unwrap()).unwrap();
    };
    let refused = |what: &str, needles: &[String]| {
        let r = c.run(&["apply", "-auto-approve"]);
        r.expect(3);
        for n in needles {
            r.contains(n);
        }
        assert_eq!(c.members("c1"), members_before, "{what}: etcd changed");
        assert_eq!(c.nodes("c1"), nodes_before, "{what}: Nodes changed");
        assert_eq!(c.state_serial(), serial, "{what}: the state was written");
    };
    let (c2, c3, w1) = (
        c.lab.address("c2"),
        c.lab.address("c3"),
        c.lab.address("w1"),
    );

    // c2's member, claimed by an entry whose address sorts before every host's.
    with_entries(vec![entry(
        1,
        "x1",
        "controller",
        recorded("c2")["etcd"].clone(),
    )]);
    refused(
        "c2's member",
        &[
            format!("x1 ({prefix}.1): the state records etcd member"),
            format!("belongs to c2 ({c2})"),
        ],
    );
    let r = c.run(&["plan", "-exclude", &format!("{prefix}.1")]);
    r.expect(0);
    assert!(!r.text().contains("left the cluster"), "{}", r.text());

    // Two entries: c2's and c3's members (etcd 3 → 1).
    with_entries(vec![
        entry(250, "x250", "controller", recorded("c2")["etcd"].clone()),
        entry(251, "x251", "controller", recorded("c3")["etcd"].clone()),
    ]);
    refused(
        "c2's and c3's members",
        &[
            format!("belongs to c2 ({c2})"),
            format!("belongs to c3 ({c3})"),
        ],
    );

    // Recorded as a controller, with w1's node name: w1's Node, deleted without a drain.
    with_entries(vec![entry(
        252,
        "w1",
        "controller",
        serde_json::Value::Null,
    )]);
    refused(
        "w1's Node",
        &[format!(
            "w1 ({prefix}.252) leaves the spec, but its Node \"w1\" reports the address {w1} of w1 ({w1}), a host of the spec"
        )],
    );

    // A data dir of `/`: refused, never contacted.
    let mut e = entry(253, "x253", "worker", serde_json::Value::Null);
    e["access"]["data_dir"] = "/".into();
    with_entries(vec![e]);
    refused(
        "a data dir of /",
        &[
            format!(
                "x253 ({prefix}.253) leaves the cluster, but the k0s paths its state record names are no plausible k0s paths"
            ),
            "access.dataDir: `/` is the root directory".to_string(),
        ],
    );

    std::fs::write(&c.state, &original).unwrap();
    plan_changes_nothing(&c, &["-detailed-exitcode"]).expect(0);
}

/// Words shaped like a k0s bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`) or a join token (the
/// base64 of a gzip stream: `H4sI…`).
fn token_like_words(text: &str) -> Vec<String> {
    text.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '.' || ch == '+' || ch == '/'))
        .filter(|w| {
            let bootstrap = w.len() == 23
                && w.as_bytes()[6] == b'.'
                && w.chars()
                    .enumerate()
                    .all(|(i, ch)| i == 6 || ch.is_ascii_digit() || ch.is_ascii_lowercase());
            bootstrap || w.contains("H4sI")
        })
        .map(str::to_string)
        .collect()
}

/// `spec.options.concurrency.limit` sets how many hosts are worked on at once, as k0sctl's
/// `Concurrency` (cmd/flags.go `initManager`); `-parallelism` was its own default (32) whatever
/// the spec said.
#[test]
fn options_concurrency_limit_sets_hosts_at_once() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    write_spec_with_options(&c, &["c1", "w1"], "concurrency:\n  limit: 1\n");
    let r = c.run(&["apply", "-auto-approve", "-json", "--no-wait"]);
    let begin = begin_event(&r.expect(0).stdout);
    assert_eq!(begin["parallelism"], 1, "{begin}");
}

/// The `begin` event of an `apply -json` run's stdout.
fn begin_event(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "begin")
        .expect("a begin event")
}

/// Issue 30: a `k0sctl apply` line of a pipeline with its k0sctl flags runs as `k0sform apply
/// -auto-approve` with the same flags: `DRY_RUN`/`--dry-run` only plan, the kubeconfig flags
/// shape the kubeconfig written, `backup -o FILE` writes FILE. Every run that connects leaves
/// its commands, with their exit codes, in the debug log, and no join token nor environment
/// value in it.
#[test]
fn k0sctl_pipeline_flags_and_the_debug_log() {
    require_lab!();
    let mut c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    c.spec_opts.host_yaml.insert(
        "w1".into(),
        "environment:\n  HTTPS_PROXY: http://u:pr0xy-s3cret@proxy.invalid:3128".into(),
    );
    c.write_spec(&["c1", "w1"]);
    let log = c.lab.dir().join("cache/k0sform/k0sform.log");

    // A dry run, as k0sctl's DRY_RUN=true or --dry-run: the plan, no question, no change.
    let mut cmd = c.command(&["apply"]);
    let out = cmd
        .env("DRY_RUN", "true")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", lab::stderr(&out));
    assert!(
        lab::stdout(&out).contains("to add"),
        "{}",
        lab::stdout(&out)
    );
    assert!(lab::stderr(&out).contains("Dry run: nothing was changed."));
    c.run(&["apply", "-auto-approve", "--dry-run"])
        .expect(0)
        .contains("Dry run: nothing was changed.");
    assert!(!c.state.exists(), "a dry run wrote the state");
    c.run(&["plan", "-detailed-exitcode"]).expect(2);

    let kc = c.lab.dir().join("admin.conf");
    let r = c.run(&[
        "apply",
        "-auto-approve",
        "-json",
        "--concurrency",
        "0",
        "--concurrent-uploads",
        "0",
        "--no-wait",
        "--timeout",
        "10m",
        "--force",
        "--kubeconfig-out",
        kc.to_str().expect("utf-8"),
        "--kubeconfig-api-address",
        "https://lb.invalid:6443",
        "--kubeconfig-user",
        "ci",
        "--kubeconfig-cluster",
        "prod",
    ]);
    r.expect(0).contains("-force (k0sctl) changes nothing");
    // --concurrency 0 is no limit: every host of the spec and the state at once.
    let begin = begin_event(&r.stdout);
    assert_eq!(begin["parallelism"], 2, "{begin}");
    let (cluster, user, server, _) = kubeconfig_parts(&std::fs::read_to_string(&kc).expect("kc"));
    assert_eq!(
        (cluster.as_str(), user.as_str(), server.as_str()),
        ("prod", "ci", "https://lb.invalid:6443")
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // backup -o FILE (k0sctl's --output).
    let file = c.lab.dir().join("b.tar.gz");
    let r = c.run(&["backup", "-o", file.to_str().expect("utf-8")]);
    r.expect(0);
    assert_eq!(backup_line(&r).1, file);
    assert_eq!(mode_of(&file), 0o600);

    // The debug log: every run, each command on its host with its exit code.
    assert_eq!(mode_of(&log), 0o600);
    let text = std::fs::read_to_string(&log).expect("log");
    for needle in [
        "apply: run started",
        "plan: run started",
        "backup: run started",
        "run ended with exit code 0",
        "run ended with exit code 2",
        "k0s install controller",
        "HTTPS_PROXY=(value hidden)",
        "k0s backup",
        "exit_code=0",
    ] {
        assert!(text.contains(needle), "{needle} not in the log:\n{text}");
    }
    for name in ["c1", "w1"] {
        let host = format!("host={} ", c.lab.address(name));
        assert!(text.contains(&host), "{host} not in the log");
    }
    assert!(
        !text.contains("pr0xy-s3cret"),
        "an environment value in the log"
    );
    assert_eq!(
        token_like_words(&text),
        Vec::<String>::new(),
        "a token in the log"
    );

    // A plan against the running cluster writes its probe commands, and nothing secret.
    let before = text.len();
    c.run(&["plan"]).expect(0);
    let text = std::fs::read_to_string(&log).expect("log");
    let plan_part = &text[before..];
    assert!(plan_part.contains("plan: run started"), "{plan_part}");
    assert!(plan_part.contains("command=\"sh -c"), "{plan_part}");
    // One line per record: a command's line breaks are escaped.
    for line in plan_part.lines() {
        assert!(line.starts_with("20"), "{line}");
    }
    assert!(plan_part.contains("exit_code=0"), "{plan_part}");
    assert!(!plan_part.contains("pr0xy-s3cret"));
    assert_eq!(token_like_words(plan_part), Vec::<String>::new());
}

/// Issue 30: k0sctl's `--timeout` bounds an apply: once reached no new step starts (as one
/// Ctrl-C), the running ones finish and are recorded, and the run fails; the next apply
/// finishes the work.
#[test]
fn k0sctl_timeout_stops_starting_steps() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    // w1's Node registers 30 s after its join: the run is still going when the timeout comes.
    c.lab
        .exec_ok("w1", "printf 'join_latency 30\\n' > /etc/k0s-lab/k0s-knobs");
    let started = std::time::Instant::now();
    let r = c.run(&["apply", "-auto-approve", "--timeout", "5s"]);
    assert_ne!(r.code, 0, "{}", r.text());
    eprintln!("WRONGPIN {} {}", r.code, r.text());
    r.contains("-timeout 5s reached: no new step starts");
    assert!(started.elapsed() >= std::time::Duration::from_secs(5));
    c.lab.exec_ok("w1", "rm -f /etc/k0s-lab/k0s-knobs");
    c.apply();
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 30: an encrypted key file (`ssh-keygen -N`) is unlocked as rig does it: the
/// passphrase is asked once per run, here through `SSH_ASKPASS` with
/// `SSH_ASKPASS_REQUIRE=force` standing in for the terminal; with no terminal, no askpass and
/// no agent holding it, connecting fails naming the host and the key; a wrong passphrase
/// fails after three answers, never hangs.
#[test]
fn encrypted_key_asks_for_its_passphrase_once_or_fails_naming_host_and_key() {
    require_lab!();
    let mut c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    let dir = c.lab.dir().to_path_buf();
    let key = dir.join("locked_ed25519");
    let ok = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "open sesame",
            "-C",
            "locked",
            "-f",
        ])
        .arg(&key)
        .status()
        .expect("ssh-keygen")
        .success();
    assert!(ok);
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    for h in ["c1", "w1"] {
        let ak = dir
            .join("hosts")
            .join(h)
            .join("authorized_keys")
            .join("root");
        let mut text = std::fs::read_to_string(&ak).unwrap();
        text.push_str(&public);
        std::fs::write(&ak, text).unwrap();
    }
    let spec = std::fs::read_to_string(&c.spec).unwrap();
    let lab_key = spec
        .lines()
        .find_map(|l| l.trim().strip_prefix("keyPath: "))
        .expect("keyPath")
        .to_string();
    std::fs::write(&c.spec, spec.replace(&lab_key, &key.display().to_string())).unwrap();

    // No terminal (stdin is /dev/null), no askpass, no agent.
    let addr = c.lab.address("c1");
    let r = c.run(&["plan"]);
    assert_ne!(r.code, 0, "{}", r.text());
    r.contains(&format!("the SSH key {} is encrypted", key.display()))
        .contains(&addr);

    // An askpass program that logs each question and answers.
    let askpass = dir.join("askpass.sh");
    let asked = dir.join("askpass.log");
    std::fs::write(
        &askpass,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\necho \"$K0SFORM_TEST_PASSPHRASE\"\n",
            asked.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &askpass,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    c.env
        .push(("SSH_ASKPASS".into(), askpass.display().to_string()));
    c.env.push(("SSH_ASKPASS_REQUIRE".into(), "force".into()));

    // A wrong passphrase: three questions, then a clear error.
    c.env
        .push(("K0SFORM_TEST_PASSPHRASE".into(), "wrong words".into()));
    let r = c.run(&["plan"]);
    assert_ne!(r.code, 0, "{}", r.text());
    r.contains(&format!(
        "the encrypted SSH key {} could not be unlocked",
        key.display()
    ));
    let questions = std::fs::read_to_string(&asked).unwrap();
    assert_eq!(questions.lines().count(), 3, "{questions}");
    std::fs::remove_file(&asked).unwrap();

    // The right one: asked once for both hosts, and the plan goes through.
    c.env
        .push(("K0SFORM_TEST_PASSPHRASE".into(), "open sesame".into()));
    c.run(&["plan"]).expect(0).contains("Plan:");
    let questions = std::fs::read_to_string(&asked).unwrap();
    assert_eq!(questions.lines().count(), 1, "{questions}");
    assert!(questions.contains("locked_ed25519"), "{questions}");
}

/// Issue 27 item 8: a host's `environment` also goes to its /etc/environment, as k0sctl writes
/// it (the first `NAME=` line replaced, else appended, the rest kept), before the host
/// downloads k0s, and the download and hooks see it: here `http_proxy` names the lab's
/// mirror, which logs a proxied request in absolute form. Values never show; a second plan has
/// no changes.
#[test]
fn environment_goes_to_etc_environment_and_the_download_goes_through_its_proxy() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            from_release: true,
            ..SpecOptions::default()
        },
    );
    let mirror = c.lab.start_mirror();
    mirror.publish(
        "v1.33.4+k0s.0",
        &c.lab.k0s_double_with_version("v1.33.4+k0s.0"),
    );
    mirror.set_index("v1.33.4+k0s.0", "v1.33.4+k0s.0");
    c.use_mirror(&mirror);
    let env = format!(
        "environment:\n  http_proxy: \"{}\"\n  NO_PROXY: 10.0.0.0/8\n  SECRET_TOKEN: s3cret-value\nhooks:\n  apply:\n    before:\n      - 'echo \"$$SECRET_TOKEN\" > /tmp/hook-saw'\n",
        mirror.url
    );
    c.spec_opts.host_yaml.insert("w1".into(), env);
    c.spec_opts.k0s_version = Some("v1.33.4+k0s.0".into());
    c.write_spec(&["c1", "w1"]);
    c.lab.exec_ok(
        "w1",
        "printf 'LANG=C.UTF-8\\nNO_PROXY=old\\n' > /etc/environment",
    );

    let plan = c.run(&["plan"]);
    plan.expect(0)
        .contains("/etc/environment sets NO_PROXY, SECRET_TOKEN, http_proxy");
    let applied = c.apply();
    for out in [&plan, &applied] {
        assert!(!out.text().contains("s3cret-value"), "{}", out.text());
    }
    assert_eq!(
        c.lab.exec_ok("w1", "cat /etc/environment"),
        format!(
            "LANG=C.UTF-8\nNO_PROXY=10.0.0.0/8\nSECRET_TOKEN=s3cret-value\nhttp_proxy={}\n",
            mirror.url
        )
    );
    // c1 has no `environment`: its file is untouched.
    assert_eq!(c.lab.exec_ok("c1", "cat /etc/environment"), "");
    // w1 fetched k0s through the proxy (a request in absolute form); c1 directly.
    let log =
        std::fs::read_to_string(c.lab.dir().join("mirror").join("mirror.log")).unwrap_or_default();
    let proxied: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("GET http://") && l.contains("/k0s-v1.33.4"))
        .collect();
    assert_eq!(proxied.len(), 1, "{log}");
    assert_eq!(c.lab.exec_ok("w1", "cat /tmp/hook-saw"), "s3cret-value\n");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27 (leftover): `hostname:` and the same `--hostname-override` in installFlags' extra
/// kubelet args both name the Node, as k0sctl allows (phase/gather_facts.go): the flag is given
/// once, the Node registers under that name, a second plan has no changes. Different names are
/// refused before anything runs, naming both.
#[test]
fn hostname_and_the_same_hostname_override_flag_build_one_node_name() {
    require_lab!();
    let mut c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    let w1 = |name: &str| {
        format!(
            "hostname: node-a\ninstallFlags:\n- '--kubelet-extra-args=\"--max-pods=50 --hostname-override={name}\"'"
        )
    };
    c.spec_opts.host_yaml.insert("w1".into(), w1("node-b"));
    c.write_spec(&["c1", "w1"]);
    c.run(&["plan"])
        .expect(1)
        .contains("`node-a` differs from --hostname-override=node-b");
    assert!(!c.state.exists());

    c.spec_opts.host_yaml.insert("w1".into(), w1("node-a"));
    c.write_spec(&["c1", "w1"]);
    c.apply().contains("Apply complete");
    let unit = c
        .lab
        .ssh_ok("w1", "cat /etc/systemd/system/k0sworker.service");
    assert_eq!(unit.matches("--hostname-override").count(), 1, "{unit}");
    assert_eq!(
        c.nodes("c1").get("node-a"),
        Some(&true),
        "{:?}",
        c.nodes("c1")
    );
    assert_eq!(c.state_host("w1").expect("recorded")["node_name"], "node-a");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Write the spec of `names` with these extra documents after the Cluster document (a k0sctl
/// multi-document spec).
fn write_spec_with_docs(c: &Cluster, names: &[&str], docs: &str) {
    c.write_spec(names);
    let mut text = std::fs::read_to_string(&c.spec).expect("spec");
    text.push_str(docs);
    std::fs::write(&c.spec, text).expect("spec");
}

/// `k0s kubectl apply -f -` of `json` on a controller by hand: what kubectl says of it.
fn apply_by_hand(c: &Cluster, host: &str, json: &str) -> String {
    c.lab.exec_ok(
        host,
        &format!("echo '{json}' | KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl apply -f -"),
    )
}

const NAMESPACE_DOC: &str = "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n";
const SETTINGS_DOC: &str = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: apps\ndata:\n  color: COLOR\n";
const SETTINGS_JSON: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"apps"},"data":{"color":"COLOR"}}"#;

/// Issue 30: the extra manifests of a multi-document spec (k0sctl phase/apply_manifests.go) are
/// shown in the plan, applied through a controller with `k0s kubectl apply -f -` after every
/// other step, and not applied again while their content is the one recorded; a changed one is
/// applied again; one the spec lost stays in the cluster; one kubectl refuses fails the apply
/// with kubectl's error and is not recorded.
#[test]
fn extra_manifests_are_applied_once_then_only_when_changed() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    let settings = |color: &str| SETTINGS_DOC.replace("COLOR", color);
    write_spec_with_docs(
        &c,
        &["c1", "w1"],
        &format!("{NAMESPACE_DOC}{}", settings("blue")),
    );
    c.run(&["plan"])
        .expect(0)
        .contains("+ Namespace apps: created")
        .contains("+ ConfigMap apps/settings: created")
        .contains("2 manifests to apply.");
    c.apply()
        .contains("Applying manifest ConfigMap apps/settings")
        .contains("Apply complete");
    let blue = SETTINGS_JSON.replace("COLOR", "blue");
    assert_eq!(
        apply_by_hand(&c, "c1", &blue),
        "configmap/settings unchanged\n"
    );
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("Manifests: 2 unchanged")
        .contains("No changes.");

    // A changed manifest is applied again.
    write_spec_with_docs(
        &c,
        &["c1", "w1"],
        &format!("{NAMESPACE_DOC}{}", settings("green")),
    );
    c.run(&["plan"])
        .expect(0)
        .contains("~ ConfigMap apps/settings: changed")
        .contains("    Namespace apps: unchanged")
        .contains("1 manifest to apply.");
    // Through a saved plan, as any other change.
    let saved = c.lab.dir().join("manifests.plan").display().to_string();
    c.run(&["plan", "-out", &saved])
        .expect(0)
        .contains("Saved the plan");
    c.run(&["apply", &saved])
        .expect(0)
        .contains("Applying manifest ConfigMap apps/settings")
        .contains("Apply complete");
    let green = SETTINGS_JSON.replace("COLOR", "green");
    assert_eq!(
        apply_by_hand(&c, "c1", &green),
        "configmap/settings unchanged\n"
    );

    // One the spec lost stays in the cluster; the state forgets it.
    write_spec_with_docs(&c, &["c1", "w1"], &settings("green"));
    c.run(&["plan"])
        .expect(0)
        .contains("- Namespace apps: no longer in the spec: left in the cluster, not deleted");
    c.apply();
    c.lab.exec_ok(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get namespace apps",
    );
    assert_eq!(
        c.state_json()["manifests"].as_array().map(Vec::len),
        Some(1)
    );
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");

    // kubectl refuses a ConfigMap whose data is not strings: the apply fails with its error,
    // and the manifest stays to be applied.
    let bad = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: apps\ndata:\n  replicas: 3\n";
    write_spec_with_docs(&c, &["c1", "w1"], &format!("{}{bad}", settings("green")));
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains("kubectl apply of manifest ConfigMap apps/bad failed")
        .contains("cannot unmarshal number into Go struct field ConfigMap.data of type string");
    c.run(&["plan"])
        .expect(0)
        .contains("+ ConfigMap apps/bad: created");
}

/// A one-controller cluster with dynamic config (the controller's `--enable-dynamic-config`
/// turns it on, as in k0sctl) and `telemetry.enabled: false` in spec.k0s.config, applied.
fn dynamic_config_cluster() -> Cluster {
    let mut host_yaml = BTreeMap::new();
    host_yaml.insert(
        "c1".to_string(),
        "installFlags:\n- --enable-dynamic-config\n".to_string(),
    );
    let c = Cluster::with(
        &[("c1", "controller")],
        LabOptions::default(),
        SpecOptions {
            host_yaml,
            k0s_config: Some("spec:\n  telemetry:\n    enabled: false\n".into()),
            ..SpecOptions::default()
        },
    );
    c.write_spec(&["c1"]);
    c.apply().contains("Apply complete");
    c
}

/// Issue 30: `config status` and `config edit` as k0sctl's (action/config_status.go,
/// action/config_edit.go): the ClusterConfig's reconcile events, and an edit by $EDITOR (here a
/// script) applied through the controller, after which `plan` shows the object's drift from
/// spec.k0s.config (read through the controller in the probe, changing nothing); an edit that
/// changes nothing applies nothing and fails.
#[test]
fn config_status_and_edit_through_a_controller() {
    require_lab!();
    let c = dynamic_config_cluster();
    let r = c.run(&["config", "status"]);
    r.expect(0)
        .contains("SuccessfulReconcile")
        .contains("clusterconfig/k0s")
        .contains("Successfully reconciled cluster config");
    assert_eq!(
        r.stdout.matches("SuccessfulReconcile").count(),
        1,
        "{}",
        r.text()
    );
    let r = plan_changes_nothing(&c, &[]);
    r.expect(0).contains("No changes.");
    assert!(!r.text().contains("dynamic config:"), "{}", r.text());
    c.run(&["config", "status", "-o", "json"])
        .expect(0)
        .contains("\"reason\": \"SuccessfulReconcile\"");

    // An editor script flips telemetry on.
    let editor = c.lab.dir().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/enabled: false/enabled: true/' \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cmd = c.command(&["config", "edit"]);
    cmd.env("EDITOR", &editor).env_remove("VISUAL");
    let out = cmd.output().expect("config edit");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("clusterconfig.k0s.k0sproject.io/k0s configured"),
        "{text}"
    );
    let live = c.lab.exec_ok(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl -n kube-system get clusterconfig k0s -o json",
    );
    let live: serde_json::Value = serde_json::from_str(&live).expect("JSON");
    assert_eq!(live["spec"]["telemetry"]["enabled"], true);
    let r = c.run(&["config", "status"]);
    assert_eq!(
        r.stdout.matches("SuccessfulReconcile").count(),
        2,
        "{}",
        r.text()
    );
    // The plan shows the object's drift from spec.k0s.config, read-only.
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("dynamic config: the ClusterConfig object")
        .contains("spec.telemetry.enabled: false in the spec, true in the cluster")
        .contains("No changes.");

    // Saved unchanged: nothing applied, and it fails as k0sctl's.
    let mut cmd = c.command(&["config", "edit"]);
    cmd.env("EDITOR", "true").env_remove("VISUAL");
    let out = cmd.output().expect("config edit");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("configuration was not changed"));
    let r = c.run(&["config", "status"]);
    assert_eq!(
        r.stdout.matches("SuccessfulReconcile").count(),
        2,
        "{}",
        r.text()
    );
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

/// c1 and w1 bootstrapped on v1.33.4+k0s.0, w1's Node Ready.
fn c1_w1_on_v1_33_4_ready() -> Cluster {
    let c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            ..SpecOptions::default()
        },
    );
    bootstrap(&c);
    c.eventually(60, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c
}

/// Point the spec of `hosts` at k0s `version`, the double of that version as k0sBinaryPath.
fn to_k0s_version(c: &mut Cluster, version: &str, hosts: &[&str]) {
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version(version));
    c.spec_opts.k0s_version = Some(version.parse().unwrap());
    c.write_spec(hosts);
}

/// A lab of c1, w1 and w2 with c1 bootstrapped alone: the workers are still to join.
fn c1_up_w1_w2_to_join() -> Cluster {
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker"), ("w2", "worker")]);
    c.write_spec(&["c1"]);
    bootstrap(&c);
    c
}

/// Start k0sform with `args` in the background, its output to `<lab>/<name>.out`.
fn spawn_run(c: &Cluster, args: &[&str], name: &str) -> (std::process::Child, std::path::PathBuf) {
    let out = c.lab.dir().join(format!("{name}.out"));
    let file = std::fs::File::create(&out).expect("output file");
    let child = c
        .command(args)
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().expect("output file"))
        .stderr(file)
        .spawn()
        .expect("spawn k0sform");
    (child, out)
}

/// Wait up to `secs` for a run of `spawn_run` to end, and assert that it succeeded; panics,
/// killing it, if it is still running then.
#[track_caller]
fn succeeds_within(mut child: std::process::Child, out: &std::path::Path, secs: u64) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let text = std::fs::read_to_string(out).unwrap_or_default();
    match status {
        Some(s) => assert!(s.success(), "k0sform failed ({s}):\n{text}"),
        None => panic!("k0sform still running after {secs}s:\n{text}"),
    }
}

/// Issue 30: k0sctl's `--no-wait` given on the command line (the spec asks for the wait) ends
/// a worker's join once its Node has registered: apply returns while the Node is NotReady.
/// Without it, apply waits until the Node is Ready.
#[test]
fn k0sctl_no_wait_flag_ends_a_join_once_the_node_registers() {
    require_lab!();
    let c = c1_up_w1_w2_to_join();
    // Read where `kubectl get` runs: on c1, every Node shows Ready=Unknown.
    c.lab
        .exec_ok("c1", "printf 'node_grace -1\\n' > /etc/k0s-lab/k0s-knobs");
    c.write_spec(&["c1", "w1"]);
    let (run, out) = spawn_run(&c, &["apply", "-auto-approve", "--no-wait"], "no-wait");
    succeeds_within(run, &out, 120);
    assert_eq!(c.nodes("c1").get("w1"), Some(&false), "{:?}", c.nodes("c1"));
    assert!(c.state_host("w1").is_some(), "w1 is not recorded");

    // Without the flag: w2's Node registers, NotReady, and apply keeps waiting for it.
    c.write_spec(&["c1", "w1", "w2"]);
    let (mut run, out) = spawn_run(&c, &["apply", "-auto-approve"], "wait");
    c.eventually(120, "w2's Node", || c.nodes("c1").contains_key("w2"));
    std::thread::sleep(std::time::Duration::from_secs(8));
    assert!(
        matches!(run.try_wait(), Ok(None)),
        "apply ended while w2 was NotReady:\n{}",
        std::fs::read_to_string(&out).unwrap_or_default()
    );
    assert_eq!(c.nodes("c1").get("w2"), Some(&false));
    // The Nodes show Ready again: the join ends.
    c.lab.exec_ok("c1", "rm /etc/k0s-lab/k0s-knobs");
    succeeds_within(run, &out, 120);
    assert_eq!(c.nodes("c1").get("w2"), Some(&true));
}

/// Issue 30: k0sctl's upgrade flags on the command line, the spec setting none of them:
/// `--evict-taint` taints the worker's Node (cordoned) before its drain and removes the taint
/// once it is back; `--no-drain` upgrades it without any cordon or drain;
/// `--disable-downgrade-check` lets a downgrade be planned and applied.
#[test]
fn k0sctl_upgrade_flags_taint_skip_the_drain_and_allow_a_downgrade() {
    require_lab!();
    let hosts = ["c1", "w1"];
    let mut c = c1_w1_on_v1_33_4_ready();
    // The upgraded kubelet posts 4 s after k0s is up: the Node stays cordoned and tainted that long.
    c.lab.exec_ok(
        "w1",
        "printf 'kubelet_latency 4\\n' > /etc/k0s-lab/k0s-knobs",
    );
    // w1's Node, if c1 answers (its own upgrade restarts it).
    let w1_node = |c: &Cluster| -> Option<serde_json::Value> {
        let out = c.lab.ssh(
            "c1",
            "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get node w1 -o json",
        );
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())
            .flatten()
    };
    let evict_taint = |node: &serde_json::Value| {
        node["spec"]["taints"].as_array().and_then(|ts| {
            ts.iter()
                .find(|t| t["key"] == "k0sctl.k0sproject.io/evict")
                .cloned()
        })
    };

    // --evict-taint: seen on the cordoned Node while the upgrade runs, gone after.
    to_k0s_version(&mut c, "v1.33.5+k0s.0", &hosts);
    let (mut run, out) = spawn_run(
        &c,
        &[
            "apply",
            "-auto-approve",
            "--evict-taint=k0sctl.k0sproject.io/evict=true:NoExecute",
        ],
        "evict-taint",
    );
    let mut tainted = None;
    while matches!(run.try_wait(), Ok(None)) && tainted.is_none() {
        if let Some(node) = w1_node(&c) {
            tainted = evict_taint(&node).map(|t| (t, node["spec"]["unschedulable"].clone()));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    succeeds_within(run, &out, 180);
    let (taint, cordoned) = tainted.expect("the evict taint was never on w1's Node");
    assert_eq!(
        taint,
        serde_json::json!({"key": "k0sctl.k0sproject.io/evict", "value": "true", "effect": "NoExecute"})
    );
    assert_eq!(cordoned, true, "tainted but not cordoned");
    let ops = node_ops(&c, "c1");
    let w1_ops: Vec<&str> = ops
        .iter()
        .filter(|(_, n, _)| n == "w1")
        .map(|(v, _, _)| v.as_str())
        .collect();
    assert_eq!(
        w1_ops,
        ["cordon", "taint", "drain", "uncordon", "taint"],
        "{ops:#?}"
    );
    let node = w1_node(&c).expect("w1's Node");
    assert_eq!(evict_taint(&node), None, "{node}");
    assert!(node["spec"]["unschedulable"].is_null(), "{node}");
    runs_swapped_in(&c, &hosts, "v1.33.5+k0s.0");

    // --no-drain: upgraded, and no Node operation at all.
    to_k0s_version(&mut c, "v1.33.6+k0s.0", &hosts);
    c.run(&["apply", "-auto-approve", "--no-drain"]).expect(0);
    assert_eq!(node_ops(&c, "c1"), ops, "a Node operation with --no-drain");
    runs_swapped_in(&c, &hosts, "v1.33.6+k0s.0");

    // --disable-downgrade-check: refused without it, planned and applied with it.
    to_k0s_version(&mut c, "v1.33.5+k0s.0", &hosts);
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains("would be downgraded from v1.33.6+k0s.0 to v1.33.5+k0s.0");
    runs_swapped_in(&c, &hosts, "v1.33.6+k0s.0");
    c.run(&["apply", "-auto-approve", "--disable-downgrade-check"])
        .expect(0)
        .contains("would be downgraded from v1.33.6+k0s.0 to v1.33.5+k0s.0");
    runs_swapped_in(&c, &hosts, "v1.33.5+k0s.0");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27.3: a cluster k0sctl built from a spec with no `spec.k0s.config`. k0sctl's base is
/// the leader's existing k0s.yaml, else `k0s config create` on the leader (k0sctl
/// `phase/configure_k0s.go` `Prepare`), extended by every controller's address in
/// `spec.api.sans`; `configFor` then sets each controller's `storage.etcd.peerAddress` to its
/// own (private) address, so every controller carries the leader's `api.address` and defaults.
/// Adopted with `apply -refresh-only`, the next plan changes nothing; a version bump upgrades
/// every host without rewriting k0s.yaml or changing a flag; a wiped controller is replaced.
#[test]
fn k0sctl_cluster_without_a_config_is_adopted_upgraded_and_a_controller_replaced() {
    require_lab!();
    let hosts = ["c1", "c2", "c3", "w1"];
    let spec_opts = SpecOptions {
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        k0s_config: None,
        ..SpecOptions::default()
    };
    let mut c = Cluster::with(THREE_PLUS_ONE, LabOptions::default(), spec_opts);
    for h in hosts {
        c.lab.install_double(h);
    }
    // No k0s.yaml on the leader yet: the base is `k0s config create` there.
    let base = c.lab.ssh_ok("c1", "k0s config create");
    let addr: Vec<String> = ["c1", "c2", "c3"]
        .iter()
        .map(|h| c.lab.address(h))
        .collect();
    let sans: String = addr.iter().map(|a| format!("    - {a}\n")).collect();
    let k0sctl_config = |i: usize| {
        let own_sans = format!("    - {}\n", addr[0]);
        let own_peer = format!("      peerAddress: {}\n", addr[0]);
        assert_eq!(base.matches(&own_sans).count(), 1, "{base}");
        assert_eq!(base.matches(&own_peer).count(), 1, "{base}");
        let cfg = base.replacen(&own_sans, &sans, 1).replacen(
            &own_peer,
            &format!("      peerAddress: {}\n", addr[i]),
            1,
        );
        format!("# generated-by-k0sctl 2026-08-01T10:00:0{i}Z\n{cfg}")
    };
    controllers_as_k0sctl(&c, &k0sctl_config);
    join_worker_as_k0sctl(&c, "w1", "");
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    let leader_api = format!("    address: {}\n", addr[0]);
    assert!(
        k0sctl_config(2).contains(&leader_api),
        "{}",
        k0sctl_config(2)
    );

    adopt_changes_nothing(&c, &hosts);

    let r = plan_upgrade_to_v1_33_5(&mut c, &hosts);
    assert!(!r.text().contains("k0s.yaml differs"), "{}", r.text());
    assert!(!r.text().contains("install flags differ"), "{}", r.text());
    c.apply().contains("Apply complete");
    for (i, h) in ["c1", "c2", "c3"].iter().enumerate() {
        assert_eq!(
            c.lab.ssh_ok(h, "cat /etc/k0s/k0s.yaml"),
            k0sctl_config(i),
            "{h}: the upgrade rewrote k0sctl's k0s.yaml"
        );
    }
    for h in hosts {
        assert_eq!(c.lab.ssh_ok(h, "k0s version").trim(), "v1.33.5+k0s.0");
    }

    c.lab.wipe("c3");
    c.run(&["apply", "-auto-approve", "-replace", &c.lab.address("c3")])
        .expect(0);
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}
