//! Bootstrap and joins with the real k0s steps against the fake cluster: tokens, learners,
//! rejoins over earlier member objects, and node watches.

use super::*;

#[test]
fn bootstrap_join_controller_and_worker() {
    let fake = Fake::default();
    {
        let mut w = fake.world();
        w.add_host(&host(1), "c1");
        w.add_host(&host(2), "c2");
        w.add_host(&host(3), "w1");
    }
    let spec = spec_of(&[
        (1, Role::Controller, "c1"),
        (2, Role::Controller, "c2"),
        (3, Role::Worker, "w1"),
    ]);
    let mut binary = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut binary, b"#!/bin/sh\necho fake k0s\n").unwrap();
    let bin_sha = k0sform::hash::sha256_hex(b"#!/bin/sh\necho fake k0s\n");
    let mut spec = spec;
    spec.hosts[2].k0s_binary_path = Some(binary.path().to_path_buf());
    let cfg_sha = |i: usize| k0sform::hash::sha256_hex(desired::config_yaml(&spec, &spec.hosts[i]));
    let (c1, c2, w1) = (host(1), host(2), host(3));
    let plan = plan_of(vec![
        step_on(
            0,
            c1.clone(),
            StepKind::WriteConfig { sha256: cfg_sha(0) },
            &[],
        ),
        step_on(1, c1.clone(), StepKind::Bootstrap, &[0]),
        step_on(2, c1.clone(), StepKind::RecordHost, &[1]),
        step_on(
            3,
            c2.clone(),
            StepKind::WriteConfig { sha256: cfg_sha(1) },
            &[],
        ),
        step_on(
            4,
            c2.clone(),
            StepKind::JoinController { via: c1.clone() },
            &[1, 3],
        ),
        step_on(5, c2.clone(), StepKind::RecordHost, &[4]),
        step_on(
            6,
            w1.clone(),
            StepKind::UploadBinary {
                sha256: bin_sha.clone(),
                version: None,
            },
            &[],
        ),
        step_on(
            7,
            w1.clone(),
            StepKind::JoinWorker { via: c1.clone() },
            &[1, 6],
        ),
        step_on(8, w1.clone(), StepKind::RecordHost, &[7]),
        step_on(
            9,
            c1.clone(),
            StepKind::WaitHealthy { via: c1.clone() },
            &[5],
        ),
    ]);
    // Progress names hosts as the command passes them (the spec's or the probe's hostnames).
    let mut o = opts(4);
    o.names = [(&c1, "c1"), (&c2, "c2"), (&w1, "w1")]
        .into_iter()
        .map(|(h, n)| (h.clone(), n.to_string()))
        .collect();
    let r = apply_with(&fake, &plan, &spec, State::new(), o);
    let report = r.result.as_ref().expect("apply succeeds");
    assert_eq!(report.succeeded(), (0..10).collect::<Vec<_>>());

    // The state: cluster identity from the bootstrap, each host's identity and member ID.
    let cluster = r.state.cluster.as_ref().expect("cluster recorded");
    assert_eq!(cluster.uid, fake::BOOT_UID);
    let world = fake.world().members.clone();
    assert_eq!(world.len(), 2);
    for (h, name) in [(&c1, "c1"), (&c2, "c2")] {
        let hs = r.state.host(h).expect("recorded");
        let m = world.iter().find(|m| m.name == name).unwrap();
        assert_eq!(
            hs.etcd.as_ref().map(|e| e.member_id.as_str()),
            Some(m.id.as_str())
        );
        assert_eq!(hs.machine_id, format!("mid-{name}"));
        assert_eq!(hs.host_key, format!("SHA256:key-{}", h.address));
    }
    assert_eq!(r.state.host(&w1).unwrap().etcd, None);
    assert!(r.state.intents.is_empty());

    // The worker's binary, moved into place by its install, is re-probed with its stat line
    // after the move and the sha256 its upload checked: not hashed again. The controllers got
    // no binary from this run: their probes go as the state says.
    let known = fake.world().probed_known.clone();
    let placed = k0sform::state::BinaryRecord {
        stat: fake::MOVED_STAT.into(),
        sha256: bin_sha.clone(),
    };
    assert_eq!(
        known.iter().filter(|(h, _)| h == &w1).collect::<Vec<_>>(),
        vec![&(w1.clone(), Some(placed))]
    );
    assert!(
        known.iter().all(|(h, k)| h == &w1 || k.is_none()),
        "{known:?}"
    );

    // Intents were written before the three non-idempotent steps and cleared after them.
    let mut seen: Vec<String> = r
        .checkpoints
        .iter()
        .flat_map(|s| s.intents.iter().map(|i| i.kind.clone()))
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, vec!["bootstrap", "join_controller", "join_worker"]);

    // The bootstrap controller gets no token file; the joiners do, written before install.
    let calls = fake.calls();
    let boot_install = calls
        .iter()
        .find(|c| c.is(&c1, "install controller"))
        .unwrap();
    assert!(
        !boot_install.words().contains("--token-file"),
        "{}",
        boot_install.words()
    );
    let pos_of = |h: &HostId, p: &str| calls.iter().position(|c| c.is(h, p)).unwrap();
    assert!(pos_of(&c1, "token create --role=controller") < pos_of(&c2, "write /etc/k0s/k0stoken"));
    assert!(pos_of(&c2, "write /etc/k0s/k0stoken") < pos_of(&c2, "install controller"));
    // Both joins run at once: each invalidation comes after a start, the last after both.
    let invalidations: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is(&c1, "token invalidate"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(invalidations.len(), 2);
    let starts = [pos_of(&c2, "start"), pos_of(&w1, "start")];
    assert!(invalidations[0] > starts[0].min(starts[1]));
    assert!(invalidations[1] > starts[0].max(starts[1]));
    assert!(
        calls
            .iter()
            .find(|c| c.is(&c2, "install controller"))
            .unwrap()
            .words()
            .contains("--token-file=/etc/k0s/k0stoken")
    );
    assert!(pos_of(&c1, "token create --role=worker") < pos_of(&w1, "install worker"));

    // The binary went to k0sInstallPath, the config to /etc/k0s/k0s.yaml, both with their modes.
    let w = fake.world();
    assert_eq!(
        w.hosts[&w1]
            .files
            .get("/usr/local/bin/k0s")
            .map(|(d, m)| (d.len(), *m)),
        Some((24, 0o755))
    );
    assert_eq!(w.hosts[&c2].files["/etc/k0s/k0s.yaml"].1, 0o600);
    // Token files hold a placeholder after the join (never left empty).
    assert_placeholder(
        &w.hosts[&c2].files["/etc/k0s/k0stoken"],
        TokenRole::Controller,
    );
    assert_placeholder(&w.hosts[&w1].files["/etc/k0s/k0stoken"], TokenRole::Worker);
    let tokens = w.tokens.clone();
    drop(w);
    assert_eq!(tokens.len(), 2);

    // The summary line and one start/finish line per step.
    assert!(
        r.human
            .contains("Apply complete: 0 added, 0 replaced, 0 changed, 0 removed."),
        "{}",
        r.human
    );
    // Hosts by name (c2 here is the spec's hostname), steps in words.
    assert!(
        r.human
            .contains("c2: Joining the cluster as controller (token from c1)...\n"),
        "{}",
        r.human
    );
    assert!(r.human.contains("c2: Joined after "), "{}", r.human);
    assert!(!r.human.contains("join_controller"), "{}", r.human);
    assert_eq!(r.json.lines().count(), r.events.len());

    assert_token_never_leaks(&fake, &tokens, &r);
}

/// The token goes to the joining host's token file (0600) and nowhere else: not in any command
/// line, environment or stdin, event, rendered line or checkpoint.
fn assert_token_never_leaks(fake: &Fake, tokens: &[String], r: &Applied) {
    assert_token_never_leaks_shared(fake, tokens, r, tokens.len());
}

/// As `assert_token_never_leaks`, for `writes` token files written from `tokens` (a worker token
/// goes to every worker joining with it).
fn assert_token_never_leaks_shared(fake: &Fake, tokens: &[String], r: &Applied, writes: usize) {
    let secret = fake::BEARER.split_once('.').unwrap().1;
    let mut needles: Vec<&str> = tokens.iter().map(String::as_str).collect();
    needles.push(fake::BEARER);
    needles.push(secret);
    let mut haystacks: Vec<(String, String)> = vec![
        ("json events".into(), r.json.clone()),
        ("human output".into(), r.human.clone()),
        ("events".into(), format!("{:?}", r.events)),
        ("result".into(), format!("{:?}", r.result)),
    ];
    for (i, s) in r.checkpoints.iter().enumerate() {
        haystacks.push((format!("checkpoint {i}"), serde_json::to_string(s).unwrap()));
    }
    let mut token_writes = 0;
    for c in fake.calls() {
        match &c.kind {
            CallKind::Run { argv, env, stdin } => haystacks.push((
                format!("command {argv:?}"),
                format!(
                    "{argv:?} {env:?} {}",
                    String::from_utf8_lossy(stdin.as_deref().unwrap_or_default())
                ),
            )),
            CallKind::Write { path, data, mode } => {
                let text = String::from_utf8_lossy(data).to_string();
                if tokens.iter().any(|t| text.contains(t.as_str())) {
                    assert_eq!(path, "/etc/k0s/k0stoken");
                    assert_eq!(*mode, 0o600);
                    token_writes += 1;
                } else {
                    haystacks.push((format!("write {path}"), text));
                }
            }
        }
    }
    assert_eq!(token_writes, writes, "each token file written exactly once");
    for (what, text) in &haystacks {
        for n in &needles {
            assert!(!text.contains(n), "the join token leaked into {what}");
        }
    }
}

#[test]
fn join_refused_while_the_stale_member_is_still_registered() {
    let (fake, mut spec, state, _) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    {
        // c3 was wiped: same address, fresh disk; its old member is still in etcd.
        let mut w = fake.world();
        w.add_host(&c3, "c3");
        w.hosts.get_mut(&c3).unwrap().machine_id = "mid-new".into();
    }
    spec.hosts[2].hostname = Some("c3".into());
    let plan = one_step(&c3, StepKind::JoinController { via: c1.clone() });
    let mut o = opts(2);
    o.health_grace = Duration::from_millis(5);
    let r = apply_with(&fake, &plan, &spec, state, o);
    let reason = r.refusal();
    assert!(reason.contains("must be removed before"), "{reason}");
    assert_eq!(
        runs_on(&fake, &c1, "token create"),
        0,
        "no token was created"
    );
    assert_eq!(runs_on(&fake, &c3, "install"), 0);
}

#[test]
fn join_refused_while_a_member_is_unhealthy() {
    let (fake, spec, state, _) = three_controllers();
    let (c1, c2) = (host(1), host(2));
    let c4 = host(4);
    let mut spec = spec;
    spec.hosts.push(spec_host(Role::Controller, &c4, "c4", 4));
    {
        let mut w = fake.world();
        w.add_host(&c4, "c4");
        w.hosts.get_mut(&c2).unwrap().unhealthy = true;
    }
    let plan = one_step(&c4, StepKind::JoinController { via: c1.clone() });
    let mut o = opts(2);
    o.health_grace = Duration::from_millis(20);
    let r = apply_with(&fake, &plan, &spec, state, o);
    let reason = r.refusal();
    assert!(
        reason.contains("\"c2\"") && reason.contains("not healthy"),
        "{reason}"
    );
    assert_eq!(runs_on(&fake, &c1, "token create"), 0);
    assert!(r.checkpoints.iter().all(|s| s.intents.is_empty()));
}

/// Three controllers on k0s v1.35.5 (joiners become etcd learners) and c4 to join via c1.
fn learner_cluster() -> (Fake, Spec, State, HostId, HostId) {
    let (fake, mut spec, state, _) = three_controllers();
    let (c1, c4) = (host(1), host(4));
    spec.hosts.push(spec_host(Role::Controller, &c4, "c4", 4));
    fake.world().add_host(&c4, "c4");
    run_everywhere(&fake, "v1.35.5+k0s.0");
    (fake, spec, state, c1, c4)
}

/// Every host of `fake` runs k0s `version`.
fn run_everywhere(fake: &Fake, version: &str) {
    for h in fake.world().hosts.values_mut() {
        h.version = Some(version.parse().unwrap());
    }
}

/// c4 joins via c1, the one step of a plan, run with `o`.
fn join_c4(
    (fake, spec, state): (&Fake, &Spec, State),
    c1: &HostId,
    c4: &HostId,
    o: ExecOptions,
) -> Applied {
    let plan = one_step(c4, StepKind::JoinController { via: c1.clone() });
    apply_with(fake, &plan, spec, state, o)
}

/// c4 joins via c1 and its join ends only once the fake has promoted it (its count of probes
/// that still show c4 a learner is down to 0); `ended_early` says what it means if not.
fn assert_join_waits_for_promotion(
    (fake, spec, state): (&Fake, &Spec, State),
    c1: &HostId,
    c4: &HostId,
    ended_early: &str,
) {
    let r = join_c4((fake, spec, state), c1, c4, opts(2));
    r.result.as_ref().expect("joined");
    assert_eq!(fake.world().learners[&c4.address], 0, "{ended_early}");
}

/// Issue 13: on k0s v1.35.5+ a joined controller is a learner until the leader promotes it
/// (its EtcdMember object shows Joined=True only then); the join step ends only once it is a
/// voter, even when its API already answers.
#[test]
fn controller_join_waits_until_the_learner_is_promoted() {
    let (fake, spec, state, c1, c4) = learner_cluster();
    fake.world().learners.insert(c4.address.clone(), 5);
    assert_join_waits_for_promotion(
        (&fake, &spec, state),
        &c1,
        &c4,
        "the step ended before c4's EtcdMember object showed it promoted",
    );
}

/// A learner that is never promoted: the join fails at its timeout, saying so.
#[test]
fn controller_join_fails_clearly_when_the_learner_is_never_promoted() {
    let (fake, spec, state, c1, c4) = learner_cluster();
    fake.world().learners.insert(c4.address.clone(), usize::MAX);
    let mut o = opts(2);
    o.wait_timeout = Duration::from_millis(200);
    o.poll_interval = Duration::from_millis(20);
    let r = join_c4((&fake, &spec, state), &c1, &c4, o);
    let report = r.failure();
    let (_, why) = &report.summary.failed[0];
    assert!(
        why.contains("timed out") && why.contains("to be promoted from learner to voter"),
        "{why}"
    );
    // Before v1.35.5 nothing waits for a promotion: members join as voters.
    let (fake, spec, state, c1, c4) = learner_cluster();
    fake.world().learners.insert(c4.address.clone(), usize::MAX);
    run_everywhere(&fake, "v1.35.4+k0s.0");
    let r = join_c4((&fake, &spec, state), &c1, &c4, opts(2));
    r.result.as_ref().expect("joined");
}

/// The member ID etcd gave `h` (the fake's member at its address).
fn real_member_id(fake: &Fake, h: &HostId) -> String {
    let w = fake.world();
    let m = w
        .members
        .iter()
        .find(|m| m.peer_url.contains(&format!("//{}:", h.address)));
    m.expect("a member at its address").id.clone()
}

/// c4 (k0s v1.35.4: no learners) joins via c1, then is recorded; its address has an EtcdMember
/// object of its earlier life (member ID 5555666677778888) that probes show relabelled for
/// `probes` more probes (k0s's labels written, its status not yet).
fn rejoin_over_earlier_object(probes: usize) -> (Fake, Spec, State, HostId, Plan) {
    let (fake, spec, state, c1, c4) = learner_cluster();
    run_everywhere(&fake, "v1.35.4+k0s.0");
    {
        let mut w = fake.world();
        w.invocations = true;
        w.relabelled_stale = true;
        w.stale_objects
            .insert(c4.address.clone(), ("5555666677778888".into(), probes));
    }
    let plan = plan_of(vec![
        step_on(0, c4.clone(), StepKind::JoinController { via: c1 }, &[]),
        step_on(1, c4.clone(), StepKind::RecordHost, &[0]),
    ]);
    (fake, spec, state, c4, plan)
}

/// c4 joins where an EtcdMember object of its earlier life survived (its member left by hand)
/// and k0s rewrites that object in two calls, labels first: for two probes it shows c4's new
/// InvocationID beside the earlier member ID. `RecordHost` after the join takes the new ID only.
#[test]
fn rejoined_controller_is_recorded_with_its_new_member_id_not_its_earlier_one() {
    let (fake, spec, state, c4, plan) = rejoin_over_earlier_object(2);
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("joined and recorded");
    let etcd = r.state.host(&c4).expect("c4 recorded").etcd.clone();
    let id = etcd.expect("with its member ID").member_id;
    assert_ne!(
        id, "5555666677778888",
        "the earlier life's member ID was recorded"
    );
    assert_eq!(id, real_member_id(&fake, &c4));
    let probes = fake.world().probed.iter().filter(|h| **h == c4).count();
    assert_eq!(probes, 3, "two probes showed the object not yet rewritten");
}

/// k0s's status write never lands (before v1.35.5 a failed one is only logged): the object keeps
/// the earlier life's ID beside the new start's label. `RecordHost` records the host without a
/// member ID at its deadline, and says why.
#[test]
fn rejoined_controller_whose_object_is_never_rewritten_is_recorded_without_an_id() {
    let (fake, spec, state, c4, plan) = rejoin_over_earlier_object(usize::MAX);
    let mut o = opts(2);
    o.health_grace = Duration::from_millis(200);
    o.poll_interval = Duration::from_millis(20);
    let r = apply_with(&fake, &plan, &spec, state, o);
    r.result.as_ref().expect("recorded");
    let rec = r.state.host(&c4).expect("c4 recorded");
    assert_eq!(rec.etcd, None, "an ID was recorded");
    assert!(
        r.human.contains(
            "etcd member ID unknown (its EtcdMember object still shows member 5555666677778888 of its earlier life); recorded without it"
        ),
        "{}",
        r.human
    );
}

/// On k0s v1.35.5+ the same surviving object says Joined=True from the start, while c4 is
/// still a learner: the join waits for c4's promotion, not for any Joined=True at its address.
#[test]
fn controller_join_is_not_ended_by_the_object_of_its_earlier_life() {
    let (fake, spec, state, c1, c4) = learner_cluster();
    {
        let mut w = fake.world();
        w.learners.insert(c4.address.clone(), 5);
        w.relabelled_stale = true;
        w.stale_objects
            .insert(c4.address.clone(), ("5555666677778888".into(), 1));
    }
    assert_join_waits_for_promotion(
        (&fake, &spec, state),
        &c1,
        &c4,
        "the step ended on the earlier life's Joined=True, before c4 was promoted",
    );
}

/// A learner counts as no voter in the health gate before a membership change: the next
/// join is refused (exit 3) while a member is not promoted, before any token exists.
#[test]
fn join_refused_while_a_member_is_still_a_learner() {
    let (fake, spec, state, c1, c4) = learner_cluster();
    fake.world()
        .learners
        .insert(host(3).address.clone(), usize::MAX);
    let mut o = opts(2);
    o.health_grace = Duration::from_millis(20);
    let r = join_c4((&fake, &spec, state), &c1, &c4, o);
    let reason = r.refusal();
    assert!(
        reason.contains("\"c3\"") && reason.contains("not a voter yet"),
        "{reason}"
    );
    assert_eq!(runs_on(&fake, &c1, "token create"), 0);
    assert_eq!(runs_on(&fake, &c4, "install"), 0);
}

#[test]
fn failed_join_still_invalidates_and_replaces_the_token() {
    let (fake, spec, state, _) = three_controllers();
    let (c1, c4) = (host(1), host(4));
    let mut spec = spec;
    spec.hosts.push(spec_host(Role::Controller, &c4, "c4", 4));
    {
        let mut w = fake.world();
        w.add_host(&c4, "c4");
        w.fail.push((c4.clone(), "install".into()));
    }
    let plan = plan_of(vec![
        step_on(
            0,
            c4.clone(),
            StepKind::JoinController { via: c1.clone() },
            &[],
        ),
        step_on(1, c4.clone(), StepKind::RecordHost, &[0]),
    ]);
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let report = r.failure();
    assert_eq!(r.exit_code(), 1);
    assert_eq!(report.failed(), vec![0]);
    assert_eq!(report.skipped(), vec![1]);
    assert!(
        report.summary.failed[0]
            .1
            .contains("k0s install failed: Error: injected failure")
    );
    assert_eq!(runs_on(&fake, &c1, "token invalidate"), 1);
    assert_placeholder(
        &fake.world().hosts[&c4].files["/etc/k0s/k0stoken"],
        TokenRole::Controller,
    );
    // The half-done join stays recorded for the next plan.
    assert_eq!(r.state.intents.len(), 1);
    assert_eq!(
        r.checkpoints.last().unwrap().intents[0].kind,
        "join_controller"
    );
    let tokens = fake.world().tokens.clone();
    assert_token_never_leaks(&fake, &tokens, &r);
}

#[test]
fn workers_joining_together_share_one_token_and_one_node_query() {
    let (fake, spec, state, _) = three_controllers();
    let c1 = host(1);
    let workers: Vec<HostId> = (10..16).map(host).collect();
    let mut spec = spec;
    let mut o = opts(workers.len());
    {
        let mut w = fake.world();
        w.delay = Duration::from_millis(20);
        for (i, h) in workers.iter().enumerate() {
            let name = format!("w{i}");
            w.add_host(h, &name);
            // No hostname in the spec: the Node name comes from the plan's probe.
            spec.hosts.push(HostSpec::new(
                Role::Worker,
                SshTarget::new(h.address.clone(), 22),
                10 + i,
            ));
            o.hostnames.insert(h.clone(), name.to_uppercase());
        }
    }
    let plan = plan_of(
        workers
            .iter()
            .enumerate()
            .map(|(i, h)| step_on(i, h.clone(), StepKind::JoinWorker { via: c1.clone() }, &[]))
            .collect(),
    );
    let r = apply_with(&fake, &plan, &spec, state, o);
    assert!(r.result.is_ok(), "{:?}", r.result);

    assert_eq!(runs_on(&fake, &c1, "token create --role=worker"), 1);
    assert_eq!(runs_on(&fake, &c1, "token invalidate"), 1);
    let calls = fake.calls();
    let invalidated = calls
        .iter()
        .position(|c| c.is(&c1, "token invalidate"))
        .unwrap();
    for h in &workers {
        let started = calls.iter().position(|c| c.is(h, "start")).unwrap();
        assert!(started < invalidated, "{h} started after the invalidation");
    }
    // Every worker got the one token, then a placeholder in the token file.
    let w = fake.world();
    assert_eq!(w.tokens.len(), 1);
    for h in &workers {
        assert_placeholder(&w.hosts[h].files["/etc/k0s/k0stoken"], TokenRole::Worker);
    }
    // The plan's hostnames named the Nodes (lower-cased): no probe before the joins.
    assert!(w.probed.is_empty(), "probed {:?}", w.probed);
    let tokens = w.tokens.clone();
    drop(w);
    // The waits asked c1 for its Nodes together, not once per worker.
    let polls = runs_on(&fake, &c1, "kubectl --data-dir=/var/lib/k0s get nodes");
    assert!(
        (1..workers.len()).contains(&polls),
        "{polls} node queries for {} workers",
        workers.len()
    );
    assert_token_never_leaks_shared(&fake, &tokens, &r, workers.len());
}

#[test]
fn bootstrap_refused_when_the_state_names_a_cluster() {
    let fake = Fake::default();
    fake.world().add_host(&host(1), "c1");
    let spec = spec_of(&[(1, Role::Controller, "c1")]);
    let mut state = State::new();
    state.cluster = Some(k0sform::state::ClusterState {
        name: "test".into(),
        uid: fake::OLD_UID.into(),
        etcd_cluster_id: None,
        k0s_version: None,
        config_sha256: None,
    });
    let plan = one_step(&host(1), StepKind::Bootstrap);
    let r = apply_with(&fake, &plan, &spec, state, opts(1));
    let reason = r.refusal();
    assert!(
        reason.contains("never bootstrap over a known cluster"),
        "{reason}"
    );
    assert!(fake.calls().is_empty(), "nothing ran: {:?}", fake.calls());
}

#[test]
fn bootstrap_refused_when_k0s_already_runs_there() {
    let fake = Fake::default();
    fake.world().add_member(&host(1), "c1");
    let spec = spec_of(&[(1, Role::Controller, "c1")]);
    let plan = one_step(&host(1), StepKind::Bootstrap);
    let r = apply_with(&fake, &plan, &spec, State::new(), opts(1));
    assert!(
        matches!(r.result, Err(ApplyError::Unsafe { .. })),
        "{:?}",
        r.result
    );
    assert_eq!(runs_on(&fake, &host(1), "install"), 0);
}

/// Joins worker w1 through c1 of `three_controllers` with a silent kubelet that registers its
/// Node `registers` into the Node watch (which ends after `watch_ends`, if given), polling every
/// `poll`: the fake and how long the apply took.
fn watched_join(
    registers: Duration,
    watch_ends: Option<Duration>,
    poll: Duration,
) -> (Fake, Duration) {
    let (fake, mut spec, state, _) = three_controllers();
    let c1 = host(1);
    let w1 = host(5);
    spec.hosts.push(spec_host(Role::Worker, &w1, "w1", 4));
    {
        let mut w = fake.world();
        w.add_host(&w1, "w1");
        w.silent_kubelets.insert("w1".into());
        w.watch = Some((registers, "w1".into()));
        w.watch_ends = watch_ends;
    }
    let mut o = opts(2);
    o.poll_interval = poll;
    o.hostnames.insert(w1.clone(), "w1".into());
    let plan = one_step(&w1, StepKind::JoinWorker { via: c1 });
    let started = std::time::Instant::now();
    let r = apply_with(&fake, &plan, &spec, state, o);
    r.result.as_ref().expect("joined");
    (fake, started.elapsed())
}

/// A Node watch that ends during the wait (the controller's k0s restarted, the session broke)
/// leaves the join polling at its usual interval, not the slow pace of a running watch: the
/// Node registering after the watch ended is seen at the next poll.
#[test]
fn a_join_whose_node_watch_ends_polls_at_its_interval() {
    // The watch ends 100 ms in; the kubelet registers 700 ms in, with no watch to say so.
    let (fake, took) = watched_join(
        Duration::from_millis(700),
        Some(Duration::from_millis(100)),
        Duration::from_millis(300),
    );
    // A running watch's pace (WATCHED_POLL, 5 s) would take 5 s.
    assert!(
        took < Duration::from_millis(2500),
        "took {took:?}: still on the watch's pace"
    );
    assert_eq!(fake.world().watches, (1, 1), "one watch, ended");
    let gets = runs_on(
        &fake,
        &host(1),
        "kubectl --data-dir=/var/lib/k0s get nodes -o json",
    );
    assert!(
        gets >= 3,
        "{gets} polls: the first, at the watch's end, then each interval"
    );
}

/// A worker join whose kubelet registers between two polls is woken by the Node watch at once:
/// the step ends long before its next poll (here 2 s apart, 5 s while the watch runs), asks
/// `get nodes` twice, and the watch is stopped when the wait ends.
#[test]
fn a_node_watch_wakes_the_join_and_is_stopped_after() {
    // Its kubelet registers only when the watch says so, 200 ms into the wait.
    let (fake, took) = watched_join(Duration::from_millis(200), None, Duration::from_secs(2));
    let c1 = host(1);
    assert!(
        took < Duration::from_millis(1500),
        "took {took:?}: not woken"
    );
    assert_eq!(fake.world().watches, (1, 1), "one watch, stopped");
    assert_eq!(
        runs_on(
            &fake,
            &c1,
            "kubectl --data-dir=/var/lib/k0s get nodes --watch-only -o name"
        ),
        1,
        "the watch ran on the controller it joins through"
    );
    assert_eq!(
        runs_on(
            &fake,
            &c1,
            "kubectl --data-dir=/var/lib/k0s get nodes -o json"
        ),
        2
    );
}
