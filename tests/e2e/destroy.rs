//! `k0sform destroy`: every host reset and the state emptied, resumed after a kill, unreachable
//! hosts excluded, and etcd members no host owns removed first.

use super::*;

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

/// A destroy killed between a host's `k0s reset` and the removal of its k0s binary (the lab's
/// `reset-blocks` knob holds the double's reset after its clean-up) leaves the host with only
/// the binary (and a controller's k0s.yaml) and still in the state; destroy run again resets it
/// again, removes them and forgets it: first for a worker, then for the last controller.
#[test]
fn destroy_killed_after_a_reset_removes_the_binary_when_run_again() {
    require_lab!();
    let c = Cluster::new(C1_W1);
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
    let c = three_controllers();
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
