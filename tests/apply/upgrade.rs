//! Upgrades and reconfigures with the real k0s steps against the fake cluster: binaries,
//! cordon, drain and uncordon, and the new version being reported.

use super::*;

#[test]
fn upgrade_replaces_the_binary_and_restarts() {
    let (fake, spec, state, w1, o, _bin) = worker_to_upgrade();
    let plan = one_step(
        &w1,
        StepKind::Upgrade {
            from: Some("v1.33.4+k0s.0".parse().unwrap()),
            to: "v1.34.1+k0s.0".into(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, o);
    r.result.as_ref().expect("upgraded");
    let words = words_on(&fake, &w1);
    let at = |p: &str| first(&words, p);
    // Staged beside the install path, moved into place only once k0s is stopped: the unit
    // restarts k0s by itself, and must never find the new binary before this host's turn.
    // The move is the first thing the install's session does (`k0s::install_service`).
    assert!(at("write /usr/local/bin/k0s.k0sform-new") < at("install worker"));
    assert!(at("stop") < at("install worker"));
    let install = fake
        .calls()
        .into_iter()
        .find(|c| c.is(&w1, "install worker"))
        .unwrap();
    let argv = install.argv().unwrap();
    assert_eq!(
        argv[3..6],
        [
            "k0sform-install",
            "/usr/local/bin/k0s.k0sform-new",
            "/usr/local/bin/k0s"
        ]
    );
    assert!(words[at("install worker")].ends_with("--force"));
    assert!(at("install worker") < at("start"));
    let w = fake.world();
    assert_eq!(
        w.hosts[&w1].files["/usr/local/bin/k0s"],
        (b"k0s v1.34.1".to_vec(), 0o755)
    );
    assert!(w.hosts[&w1].running);
    drop(w);
    // The Node was checked through a controller after the restart.
    assert!(
        fake.calls()
            .iter()
            .any(|c| c.is(&host(1), "kubectl --data-dir=/var/lib/k0s get nodes"))
    );
    let recorded = r.state.host(&w1).and_then(|h| h.k0s_version.clone());
    assert_eq!(
        recorded.map(|v| v.to_string()).as_deref(),
        Some("v1.34.1+k0s.0")
    );
    assert_eq!(r.intent_counts(), vec![1, 0]);
}

/// k0s #7202: a worker k0sctl joined (its token file says `# overwritten by k0sctl after join`)
/// gets a decodable placeholder there while k0s is stopped, before it starts on v1.35.1+k0s.0
/// (k0sctl `phase/ensure_join_token_workaround.go`); also when a worker that already runs that
/// version is reconfigured. A file that holds a token, another version, or a controller+worker
/// is left alone.
#[test]
fn worker_restarting_on_v1_35_1_k0s_0_gets_a_decodable_token_file_first() {
    const K0SCTL: &[u8] = b"# overwritten by k0sctl after join\n";
    const TOKEN_FILE: &str = "/etc/k0s/k0stoken";
    let setup = |running: &str, to: &str| {
        let (fake, spec, state, w1, mut o, _) = worker_to_upgrade();
        let mut bin = tempfile::NamedTempFile::new().unwrap();
        let data = format!("k0s {to}");
        std::io::Write::write_all(&mut bin, data.as_bytes()).unwrap();
        o.binaries = vec![k0sform::binaries::LocalK0s {
            path: bin.path().to_path_buf(),
            sha256: k0sform::hash::sha256_hex(data.as_bytes()),
            version: Some(to.parse().unwrap()),
        }];
        {
            let mut w = fake.world();
            let h = w.hosts.get_mut(&w1).unwrap();
            h.files.insert(TOKEN_FILE.into(), (K0SCTL.to_vec(), 0o600));
            h.status_args = vec![format!("--token-file={TOKEN_FILE}")];
            h.version = Some(running.into());
        }
        (fake, spec, state, w1, o, bin)
    };
    let upgrade = |w1: &HostId, to: &str| {
        one_step(
            w1,
            StepKind::Upgrade {
                from: Some("v1.34.3+k0s.0".into()),
                to: to.into(),
            },
        )
    };
    let token_of = |fake: &Fake, w1: &HostId| fake.world().hosts[w1].files[TOKEN_FILE].clone();

    let (fake, spec, state, w1, o, _bin) = setup("v1.34.3+k0s.0", "v1.35.1+k0s.0");
    let r = apply_with(&fake, &upgrade(&w1, "v1.35.1+k0s.0"), &spec, state, o);
    r.result.as_ref().expect("upgraded");
    assert_placeholder(&token_of(&fake, &w1), TokenRole::Worker);
    let words = words_on(&fake, &w1);
    let at = |p: &str| first(&words, p);
    assert!(at("stop") < at(&format!("token-file {TOKEN_FILE}")));
    assert!(at(&format!("token-file {TOKEN_FILE}")) < at("start"));
    assert!(
        r.events
            .iter()
            .any(|e| format!("{e:?}").contains("a placeholder was written (k0s #7202)")),
        "{:?}",
        r.events
    );

    // Already on that version: a reconfigure (a restart) does the same.
    let (fake, spec, state, w1, o, _bin) = setup("v1.35.1+k0s.0", "v1.35.1+k0s.0");
    let r = apply_with(
        &fake,
        &one_step(&w1, StepKind::Reconfigure),
        &spec,
        state,
        o,
    );
    r.result.as_ref().expect("reconfigured");
    assert_placeholder(&token_of(&fake, &w1), TokenRole::Worker);

    // Other versions need nothing: k0sctl's comment stays, nothing is asked.
    for to in ["v1.35.1+k0s.1", "v1.35.2+k0s.0"] {
        let (fake, spec, state, w1, o, _bin) = setup("v1.34.3+k0s.0", to);
        apply_with(&fake, &upgrade(&w1, to), &spec, state, o)
            .result
            .expect("upgraded");
        assert_eq!(token_of(&fake, &w1).0, K0SCTL, "{to}");
        assert!(
            !words_on(&fake, &w1)
                .iter()
                .any(|w| w.starts_with("token-file"))
        );
    }
    // A token that decodes stays as it is.
    let (fake, spec, state, w1, o, _bin) = setup("v1.34.3+k0s.0", "v1.35.1+k0s.0");
    let other = k0sform::k0s::placeholder_token(TokenRole::Controller).into_bytes();
    fake.world()
        .hosts
        .get_mut(&w1)
        .unwrap()
        .files
        .insert(TOKEN_FILE.into(), (other.clone(), 0o600));
    apply_with(&fake, &upgrade(&w1, "v1.35.1+k0s.0"), &spec, state, o)
        .result
        .expect("upgraded");
    assert_eq!(token_of(&fake, &w1).0, other);
}

/// A local k0s binary that changed since planning is refused before anything reaches the
/// staging path (the planned sha256 is checked before the move, not after).
#[test]
fn an_upload_of_a_binary_changed_since_planning_writes_nothing() {
    let (fake, spec, state, w1, o, binary) = worker_to_upgrade();
    std::fs::write(binary.path(), b"k0s replaced").unwrap();
    let plan = one_step(
        &w1,
        StepKind::UploadBinary {
            sha256: k0sform::hash::sha256_hex(b"k0s v1.34.1"),
            version: Some(k0sform::version::K0sVersion::parse("v1.34.1+k0s.0").unwrap()),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, o);
    let e = r.result.expect_err("refused");
    assert!(format!("{e:?}").contains("the plan expected"), "{e:?}");
    assert!(
        !fake.world().hosts[&w1]
            .files
            .contains_key("/usr/local/bin/k0s.k0sform-new"),
        "nothing staged"
    );
}

#[test]
fn drain_and_delete_of_missing_objects_succeed() {
    let (fake, spec, state, _) = three_controllers();
    let c1 = host(1);
    fake.world().nodes.insert("w1".into(), true);
    let plan = plan_of(vec![
        step_on(
            0,
            host(5),
            StepKind::Drain {
                node: "w1".into(),
                via: c1.clone(),
                evict_taint: None,
            },
            &[],
        ),
        step_on(
            1,
            host(6),
            StepKind::Drain {
                node: "gone".into(),
                via: c1.clone(),
                evict_taint: None,
            },
            &[],
        ),
        step_on(
            2,
            host(6),
            StepKind::DeleteObjects {
                node: "gone".into(),
                objects: vec![
                    k0sform::plan::ObjectKind::Node,
                    k0sform::plan::ObjectKind::EtcdMember,
                    k0sform::plan::ObjectKind::ControlNode,
                ],
                via: c1.clone(),
                etcd_member: None,
                control_node: None,
            },
            &[1],
        ),
        step_on(3, host(6), StepKind::ForgetHost, &[2]),
    ]);
    let mut state = state;
    state.upsert_host(recorded(&host(6), "gone", None));
    let r = apply_with(&fake, &plan, &spec, state, opts(4));
    r.result.expect("ok");
    assert!(!fake.world().nodes["w1"], "w1 drained");
    let deletes = runs_of(&fake, &c1, "kubectl --data-dir=/var/lib/k0s delete");
    assert_eq!(deletes.len(), 3, "{deletes:?}");
    assert!(r.state.host(&host(6)).is_none(), "forgotten");
}

#[test]
fn reconfigure_writes_config_reinstalls_and_restarts() {
    let (fake, mut spec, state, _) = three_controllers();
    let c2 = host(2);
    spec.hosts[1].install_flags = vec!["--debug".into()];
    let plan = one_step(&c2, StepKind::Reconfigure);
    let r = apply_with(&fake, &plan, &spec, state, opts(1));
    r.result.expect("reconfigured");
    let words = words_on(&fake, &c2);
    let at = |p: &str| first(&words, p);
    assert!(at("write /etc/k0s/k0s.yaml") < at("install controller"));
    assert!(at("install controller") < at("stop"));
    assert!(at("stop") < at("start"));
    assert!(
        at("start")
            < words
                .iter()
                .rposition(|w| w.contains("--raw=/readyz"))
                .unwrap()
    );
    // The new k0s.yaml is staged, validated by k0s, then renamed into place.
    assert!(at("write /etc/k0s/k0s.yaml.k0sform-new") < at("config validate"));
    assert!(at("config validate") < at("-fT -- /etc/k0s/k0s.yaml.k0sform-new /etc/k0s/k0s.yaml"));
    // The user's flags go to k0s as written (k0s records `--debug=true`).
    let install = &words[at("install controller")];
    assert!(
        install.contains("--debug ") && install.ends_with("--force"),
        "{install}"
    );
    let w = fake.world();
    let (yaml, mode) = &w.hosts[&c2].files["/etc/k0s/k0s.yaml"];
    assert_eq!(*mode, 0o600);
    assert_eq!(
        String::from_utf8_lossy(yaml),
        desired::config_yaml(&spec, &spec.hosts[1])
    );
    assert!(w.hosts[&c2].running);
}

/// A k0s.yaml that `k0s config validate` refuses never replaces the one the host runs with,
/// and nothing is restarted.
#[test]
fn refused_config_keeps_the_old_one() {
    let (fake, spec, state, _) = three_controllers();
    let c2 = host(2);
    {
        let mut w = fake.world.lock().unwrap();
        let h = w.hosts.get_mut(&c2).unwrap();
        h.files
            .insert("/etc/k0s/k0s.yaml".into(), (b"old: true\n".to_vec(), 0o600));
        w.fail.push((c2.clone(), "config validate".into()));
    }
    let plan = plan_of(vec![step_on(0, c2.clone(), StepKind::Reconfigure, &[])]);
    let r = apply_with(&fake, &plan, &spec, state, opts(1));
    let e = r.result.expect_err("refused by k0s");
    assert!(format!("{e:?}").contains("config validate"), "{e:?}");
    let w = fake.world.lock().unwrap();
    assert_eq!(w.hosts[&c2].files["/etc/k0s/k0s.yaml"].0, b"old: true\n");
    assert!(
        !w.hosts[&c2]
            .files
            .contains_key("/etc/k0s/k0s.yaml.k0sform-new")
    );
    assert!(w.hosts[&c2].running, "not restarted");
    drop(w);
    assert_eq!(runs_on(&fake, &c2, "stop"), 0);
}

/// A worker with a Node, running, recorded in state: (fake, spec, state, worker id, options with
/// a local binary for v1.34.1).
fn worker_to_upgrade() -> (
    Fake,
    Spec,
    State,
    HostId,
    ExecOptions,
    tempfile::NamedTempFile,
) {
    let (fake, mut spec, mut state, _) = three_controllers();
    let w1 = host(5);
    spec.hosts.push(spec_host(Role::Worker, &w1, "w1", 4));
    {
        let mut w = fake.world();
        w.add_host(&w1, "w1");
        let h = w.hosts.get_mut(&w1).unwrap();
        h.running = true;
        h.installed = Some(("worker".into(), vec![]));
        w.nodes.insert("w1".into(), true);
    }
    let mut rec = recorded(&w1, "w1", None);
    rec.role = Role::Worker;
    state.upsert_host(rec);
    let mut binary = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut binary, b"k0s v1.34.1").unwrap();
    let mut o = opts(2);
    o.binaries.push(k0sform::binaries::LocalK0s {
        path: binary.path().to_path_buf(),
        sha256: k0sform::hash::sha256_hex(b"k0s v1.34.1"),
        version: Some("v1.34.1+k0s.0".parse().unwrap()),
    });
    (fake, spec, state, w1, o, binary)
}

fn drained_upgrade(w1: &HostId, taint: Option<&str>) -> Plan {
    let via = host(1);
    plan_of(vec![
        step_on(
            0,
            w1.clone(),
            StepKind::Drain {
                node: "w1".into(),
                via: via.clone(),
                evict_taint: taint.map(str::to_string),
            },
            &[],
        ),
        step_on(
            1,
            w1.clone(),
            StepKind::Upgrade {
                from: Some("v1.33.4+k0s.0".parse().unwrap()),
                to: "v1.34.1+k0s.0".into(),
            },
            &[0],
        ),
        step_on(
            2,
            w1.clone(),
            StepKind::Uncordon {
                node: "w1".into(),
                via,
                evict_taint: taint.map(str::to_string),
            },
            &[1],
        ),
    ])
}

#[test]
fn upgrade_cordons_taints_drains_then_uncordons_once_ready() {
    let (fake, spec, state, w1, o, _bin) = worker_to_upgrade();
    let taint = "k0sctl.k0sproject.io/evict=true:NoExecute";
    let r = apply_with(&fake, &drained_upgrade(&w1, Some(taint)), &spec, state, o);
    r.result.as_ref().expect("upgraded");
    // Through the controller, in k0sctl's order: cordon, taint, drain … uncordon, untaint.
    let on_c1 = words_on(&fake, &host(1));
    let at = |p: &str| first(&on_c1, p);
    let k = "kubectl --data-dir=/var/lib/k0s";
    assert!(
        at(&format!("{k} cordon node/w1"))
            < at(&format!("{k} taint nodes --overwrite node/w1 {taint}"))
    );
    assert!(at(&format!("{k} taint nodes --overwrite")) < at(&format!("{k} drain")));
    assert!(at(&format!("{k} drain")) < at(&format!("{k} uncordon node/w1")));
    assert!(at(&format!("{k} uncordon")) < at(&format!("{k} taint nodes node/w1 {taint}-")));
    // The restart happened between the drain and the uncordon.
    let order: Vec<String> = fake.calls().iter().map(|c| c.words()).collect();
    let pos = |p: &str| order.iter().position(|w| w.starts_with(p)).expect(p);
    assert!(pos(&format!("{k} drain")) < pos("stop"));
    assert!(pos("start") < pos(&format!("{k} uncordon")));
    let w = fake.world();
    assert!(w.cordoned.is_empty(), "uncordoned: {:?}", w.cordoned);
    assert!(w.taints["w1"].is_empty(), "untainted: {:?}", w.taints);
}

/// Issue 13: a worker is back after its upgrade only when k0s reports the new version and its
/// Node turned Ready after the restart, by the host's clock. A Node still showing the Ready
/// (and heartbeat) of the stopped kubelet, as the cluster does for 40 s, does not count: the
/// step fails at its timeout, the Node stays cordoned and the state keeps the old version.
#[test]
fn stale_ready_after_a_restart_does_not_count_as_back() {
    let (fake, spec, state, w1, mut o, _bin) = worker_to_upgrade();
    o.wait_timeout = Duration::from_millis(300);
    o.poll_interval = Duration::from_millis(20);
    {
        let mut w = fake.world();
        w.silent_kubelets.insert("w1".into());
        w.beats.insert("w1".into(), 1_700_000_000);
    }
    let plan = one_step(
        &w1,
        StepKind::Upgrade {
            from: Some("v1.33.4+k0s.0".parse().unwrap()),
            to: "v1.34.1+k0s.0".into(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state.clone(), o.clone());
    let report = r.failure();
    let (_, why) = &report.summary.failed[0];
    assert!(
        why.contains("Node \"w1\" shows Ready from before its restart"),
        "{why}"
    );
    assert!(why.contains("timed out"), "{why}");
    let recorded = r.state.host(&w1).and_then(|h| h.k0s_version.clone());
    assert_eq!(
        recorded.map(|v| v.to_string()).as_deref(),
        Some("v1.33.4+k0s.0")
    );
    // The same with a drain: never uncordoned on the stale Ready.
    let (fake, spec, state, w1, mut o, _bin) = worker_to_upgrade();
    o.wait_timeout = Duration::from_millis(300);
    o.poll_interval = Duration::from_millis(20);
    fake.world().silent_kubelets.insert("w1".into());
    let r = apply_with(&fake, &drained_upgrade(&w1, None), &spec, state, o);
    r.failure();
    assert_eq!(
        runs_on(&fake, &host(1), "kubectl --data-dir=/var/lib/k0s uncordon"),
        0
    );
    assert!(fake.world().cordoned.contains("w1"));

    // A kubelet that reports again after the restart: back, on the new version.
    let (fake, spec, state, w1, o, _bin) = worker_to_upgrade();
    fake.world().beats.insert("w1".into(), 1_700_000_000);
    let r = apply_with(&fake, &plan, &spec, state, o);
    r.result.as_ref().expect("upgraded");
    let calls: Vec<String> = words_on(&fake, &w1);
    let at = |p: &str| first(&calls, p);
    // The host's clock is read in the start's own session (`k0s::start_at_host_time`), after
    // the stop.
    assert!(at("stop") < at("start"), "{calls:#?}");
    let start = fake
        .calls()
        .into_iter()
        .find(|c| c.is(&w1, "start"))
        .unwrap();
    assert_eq!(start.argv().unwrap()[3], "k0sform-start");
    assert!(
        calls[at("start")..]
            .iter()
            .any(|w| w.starts_with("status -o json")),
        "k0s status asked after the start: {calls:#?}"
    );
}

/// A worker whose k0s comes back on another version than the upgrade's (here: no binary of
/// that version was given, the old one runs on) is not back.
#[test]
fn upgrade_waits_for_k0s_to_report_the_new_version() {
    let (fake, spec, state, w1, mut o, _bin) = worker_to_upgrade();
    o.wait_timeout = Duration::from_millis(300);
    o.poll_interval = Duration::from_millis(20);
    let plan = one_step(
        &w1,
        StepKind::Upgrade {
            from: Some("v1.33.4+k0s.0".parse().unwrap()),
            to: "v1.34.2+k0s.0".into(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, o);
    let report = r.failure();
    let (_, why) = &report.summary.failed[0];
    assert!(
        why.contains("k0s reports version v1.33.4+k0s.0, not v1.34.2+k0s.0"),
        "{why}"
    );
}

#[test]
fn failed_drain_stops_before_the_restart_and_leaves_the_node_cordoned() {
    let (fake, spec, state, w1, o, _bin) = worker_to_upgrade();
    fake.world()
        .fail
        .push((host(1), "kubectl --data-dir=/var/lib/k0s drain".into()));
    let r = apply_with(&fake, &drained_upgrade(&w1, None), &spec, state, o);
    let report = r.failure();
    let (_, why) = &report.summary.failed[0];
    assert!(why.contains("draining Node \"w1\" failed"), "{why}");
    assert!(why.contains("stays cordoned"), "{why}");
    assert!(why.contains("k0s kubectl uncordon w1"), "{why}");
    assert_eq!(runs_on(&fake, &w1, "stop"), 0, "not restarted");
    assert_eq!(runs_on(&fake, &w1, "install"), 0, "not reinstalled");
    assert_eq!(
        runs_on(&fake, &host(1), "kubectl --data-dir=/var/lib/k0s uncordon"),
        0,
        "left cordoned"
    );
}
