//! How the real steps run: host key changes, per-host and upload limits, waiting for health,
//! progress events and hook steps.

use super::*;

/// A host whose SSH host key changed since the plan's probe is refused as unsafe (exit 3), not
/// failed (exit 1): nothing runs on it, and the error says whose key.
#[test]
fn host_key_change_during_apply_is_refused() {
    let (fake, spec, state, _) = three_controllers();
    let c2 = host(2);
    fake.world().key_changed.insert(c2.clone());
    let r = apply_with(
        &fake,
        &one_step(&c2, StepKind::RecordHost),
        &spec,
        state,
        opts(2),
    );
    assert_eq!(r.exit_code(), 3, "{:?}", r.result);
    let e = r.result.as_ref().unwrap_err().to_string();
    assert!(
        e.contains(&format!("{c2}: host key changed: recorded SHA256:key-")),
        "{e}"
    );
}

#[test]
fn per_host_command_limit_is_honoured() {
    let (fake, spec, state, _) = three_controllers();
    let c1 = host(1);
    fake.world().delay = Duration::from_millis(25);
    // Eight independent steps that all talk to c1.
    let steps: Vec<Step> = (0..8)
        .map(|i| {
            step_on(
                i,
                host(10 + i as u8),
                StepKind::DeleteObjects {
                    node: format!("gone{i}"),
                    objects: vec![k0sform::plan::ObjectKind::Node],
                    via: c1.clone(),
                    etcd_member: None,
                    control_node: None,
                },
                &[],
            )
        })
        .collect();
    let plan = plan_of(steps);
    let mut o = opts(8);
    o.per_host_limit = 3;
    let r = apply_with(&fake, &plan, &spec, state.clone(), o);
    r.result.expect("ok");
    assert_eq!(fake.world().max_in_flight[&c1], 3);

    let (fake, _, _, _) = three_controllers();
    fake.world().delay = Duration::from_millis(25);
    let mut o = opts(8);
    o.per_host_limit = 10;
    apply_with(&fake, &plan, &spec, state, o)
        .result
        .expect("ok");
    assert_eq!(fake.world().max_in_flight[&c1], 8, "steps do overlap");
}

/// `options.concurrency.uploads` caps the uploads in flight on all hosts together; 0 is no
/// limit of its own, as in k0sctl (phase/generic_phase.go `parallelDoUpload`), so only the
/// hosts-at-once limit applies (it used to mean one at a time).
#[test]
fn uploads_in_flight_follow_options_concurrency_uploads() {
    for (uploads, parallelism, expected) in [(0, 8, 4), (0, 3, 3), (1, 8, 1), (2, 8, 2)] {
        let fake = Fake::default();
        let workers: Vec<HostId> = (1..=4).map(host).collect();
        let mut spec = spec_of(&[]);
        let mut binary = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut binary, b"k0s").unwrap();
        for (i, w) in workers.iter().enumerate() {
            fake.world().add_host(w, &format!("w{i}"));
            let mut h = spec_host(Role::Worker, w, &format!("w{i}"), i + 1);
            h.k0s_binary_path = Some(binary.path().to_path_buf());
            spec.hosts.push(h);
        }
        spec.options.concurrent_uploads = uploads;
        fake.world().delay = Duration::from_millis(50);
        let steps = workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                step_on(
                    i,
                    w.clone(),
                    StepKind::UploadBinary {
                        sha256: k0sform::hash::sha256_hex(b"k0s"),
                        version: None,
                    },
                    &[],
                )
            })
            .collect();
        apply_with(
            &fake,
            &plan_of(steps),
            &spec,
            State::new(),
            opts(parallelism),
        )
        .result
        .expect("uploaded");
        assert_eq!(
            fake.world().max_writes_in_flight,
            expected,
            "uploads: {uploads}, parallelism {parallelism}"
        );
    }
}

#[test]
fn wait_healthy_times_out_as_a_failure() {
    let (fake, spec, state, _) = three_controllers();
    fake.world().hosts.get_mut(&host(2)).unwrap().unhealthy = true;
    let plan = one_step(&host(1), StepKind::WaitHealthy { via: host(1) });
    let mut o = opts(1);
    o.wait_timeout = Duration::from_millis(30);
    let r = apply_with(&fake, &plan, &spec, state, o);
    let report = r.failure();
    assert_eq!(r.exit_code(), 1);
    assert!(
        report.summary.failed[0].1.contains("timed out"),
        "{:?}",
        report.summary.failed
    );
    // The repeated poll is reported once, not once per poll.
    let progress = r
        .events
        .iter()
        .filter(|e| matches!(e, ApplyEvent::StepProgress { .. }))
        .count();
    assert_eq!(progress, 1);
}

// ---------------------------------------------------------------------------------------------
// Progress for people and the versioned JSON events

/// A long step gets a "still running" event every `still_running_every` (on tokio's paused
/// clock: deterministic), a short one none, and none after a step ends.
#[test]
fn long_steps_report_that_they_are_still_running() {
    let plan = plan_of(vec![step(0, plain(), &[]), step(1, plain(), &[0])]);
    let script = Script {
        delay: HashMap::from([(0, Duration::from_secs(25)), (1, Duration::from_secs(5))]),
        ..Script::default()
    };
    let cancel = Cancel::new();
    let runner = ScriptedRunner::new(script, cancel.clone());
    let mut state = State::new();
    let mut sink = VecSink::default();
    let mut cp = |_: &State| -> Result<(), String> { Ok(()) };
    let mut o = opts(2);
    o.names = HashMap::from([(host(1), "c1".to_string())]);
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    paused
        .block_on(run_plan(
            &plan, &mut state, runner, &o, &mut sink, &mut cp, &cancel,
        ))
        .expect("runs");
    let still: Vec<(usize, String, u64)> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            ApplyEvent::StepStillRunning { step, elapsed } => {
                Some((step.id, step.name.clone(), elapsed.as_secs()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(still, vec![(0, "c1".into(), 10), (0, "c1".into(), 20)]);
    // Each comes between its step's start and finish.
    let kinds: Vec<&str> = sink
        .events
        .iter()
        .map(|e| match e {
            ApplyEvent::StepStarted { .. } => "started",
            ApplyEvent::StepStillRunning { .. } => "still",
            ApplyEvent::StepFinished { .. } => "finished",
            _ => "other",
        })
        .filter(|k| *k != "other")
        .collect();
    assert_eq!(
        kinds,
        [
            "started", "still", "still", "finished", "started", "finished"
        ]
    );
    // The unnamed host falls back to its address.
    let finished_1 = sink.events.iter().find_map(|e| match e {
        ApplyEvent::StepFinished { step, .. } if step.id == 1 => Some(step.name.clone()),
        _ => None,
    });
    assert_eq!(finished_1.as_deref(), Some("127.0.0.2"));
}

/// Issue 14, item 7: a hook step shows its lines as written (`${TOKEN}`) while the host runs
/// the spec's expanded line; the failing line's error (the fake echoes the command it does not
/// know, secret included) is shown as written too, in human output, `-json` events and the
/// result. A step whose lines are not the spec's is refused before anything runs.
#[test]
fn hook_step_runs_the_spec_line_and_shows_the_written_one() {
    const SECRET: &str = "tok-9f8e7d6c5b4a";
    let (fake, mut spec, state, _) = three_controllers();
    let c1 = host(1);
    let idx = spec.hosts.iter().position(|h| h.id() == c1).unwrap();
    spec.hosts[idx].hooks = std::collections::BTreeMap::from([(
        "apply".to_string(),
        std::collections::BTreeMap::from([("before".to_string(), vec![format!("echo {SECRET}")])]),
    )]);
    spec.set_env_values([("TOKEN".to_string(), SECRET.to_string())]);
    let step = |line: &str| StepKind::RunHooks {
        action: "apply".into(),
        stage: "before".into(),
        lines: vec![line.to_string()],
    };
    let hook_runs = |fake: &Fake| -> Vec<Vec<String>> {
        fake.calls()
            .iter()
            .filter_map(|c| match &c.kind {
                CallKind::Run { argv, .. } if argv.first().is_some_and(|a| a == "sh") => {
                    Some(argv.clone())
                }
                _ => None,
            })
            .collect()
    };
    let r = apply_with(
        &fake,
        &one_step(&c1, step("echo ${TOKEN}")),
        &spec,
        state.clone(),
        opts(2),
    );
    assert_eq!(
        hook_runs(&fake),
        vec![vec![
            "sh".to_string(),
            "-c".to_string(),
            format!("echo {SECRET}")
        ]],
        "the host runs the expanded line"
    );
    assert!(r.human.contains("echo ${TOKEN}"), "{}", r.human);
    let result = format!("{:?}", r.result);
    assert!(r.result.is_err(), "the fake fails the line: {result}");
    for (what, out) in [
        ("human output", &r.human),
        ("-json events", &r.json),
        ("events", &format!("{:?}", r.events)),
        ("result", &result),
    ] {
        assert!(!out.contains(SECRET), "{what} shows the secret: {out}");
    }

    // Lines that are not the spec's (a hand-made step): refused, nothing runs.
    let (fake2, _, state2, _) = three_controllers();
    let r = apply_with(
        &fake2,
        &one_step(&c1, step("id > /tmp/x")),
        &spec,
        state2,
        opts(2),
    );
    assert!(
        format!("{:?}", r.result).contains("not the spec's"),
        "{:?}",
        r.result
    );
    assert!(hook_runs(&fake2).is_empty(), "{:?}", hook_runs(&fake2));
}
