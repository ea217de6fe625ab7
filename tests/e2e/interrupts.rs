//! Interrupted and killed applies, saved plans (exact, stale, tampered) and hostile state
//! entries: each converges or refuses and changes nothing.

use super::*;

/// Scenario 8: apply killed with -9 at several points of a bootstrap and of a replacement; each
/// time the next apply converges to one healthy cluster and a valid state.
#[test]
fn apply_killed_at_any_point_converges() {
    require_lab!();
    let c = Cluster::new(THREE_PLUS_ONE);
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
