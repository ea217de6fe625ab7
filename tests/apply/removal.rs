//! Member removal and resets with the real k0s steps against the fake cluster: recorded and
//! unknown members, etcd refusing, and resets of the recorded machine only.

use super::*;

/// Remove member `member_id`, recorded for `on`'s peer URL, through `via`.
fn remove_member(member_id: &str, on: &HostId, via: &HostId) -> StepKind {
    StepKind::RemoveMember {
        member_id: member_id.to_string(),
        peer_url: format!("https://{}:2380", on.address),
        via: via.clone(),
    }
}

/// The etcd members of the fake cluster, by name.
fn member_names(fake: &Fake) -> Vec<String> {
    fake.world()
        .members
        .iter()
        .map(|m| m.name.clone())
        .collect()
}

#[test]
fn remove_member_refused_when_peer_url_carries_another_member_id() {
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    // c3 was rebuilt and re-added out of band: its peer URL now carries a new member.
    fake.world()
        .object_id_override
        .insert(c3.address.clone(), "1111222233334444".into());
    let plan = one_step(&c3, remove_member(&ids[2], &c3, &c1));
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let reason = r.refusal();
    assert_eq!(r.exit_code(), 3);
    assert!(
        reason.contains("1111222233334444") && reason.contains(&ids[2]),
        "{reason}"
    );
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0, "no remote change");
    assert_eq!(fake.world().members.len(), 3);
    assert!(
        r.checkpoints.iter().all(|s| s.intents.is_empty()),
        "refused before any intent"
    );
    assert!(r.human.contains("Apply refused as unsafe"), "{}", r.human);
}

/// Issue 28: a step removing a spec controller's member for another host (a state entry that
/// records c2's member ID and peer URL) is refused by the executor too, before any change.
#[test]
fn remove_member_refused_for_another_spec_controllers_peer_address() {
    let (fake, spec, mut state, ids) = three_controllers();
    let (c1, x9) = (host(1), host(9));
    let mut entry = recorded(&x9, "x9", Some(&ids[1]));
    entry.etcd.as_mut().expect("member").peer_url = format!("https://{}:2380", host(2).address);
    state.upsert_host(entry);
    let plan = one_step(
        &x9,
        StepKind::RemoveMember {
            member_id: ids[1].clone(),
            peer_url: format!("https://{}:2380", host(2).address),
            via: c1.clone(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let reason = r.refusal();
    assert_eq!(r.exit_code(), 3);
    assert!(
        reason.contains(&format!(
            "is the peer address of {}, a controller of the spec: refusing to remove its member for {x9}",
            host(2)
        )),
        "{reason}"
    );
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0, "no remote change");
    assert_eq!(fake.world().members.len(), 3);
}

/// A controller restored from a backup (or rebuilt) shows its earlier EtcdMember object, with
/// the earlier member ID, until the k0s running now rewrites it: `RecordHost` takes the member
/// ID only from an object that the running k0s wrote (its label = `k0s status`'s InvocationID),
/// and probes again until there is one.
#[test]
fn record_host_takes_the_member_id_only_from_the_running_k0s_object() {
    let (fake, spec, state, ids) = three_controllers();
    let c2 = host(2);
    {
        let mut w = fake.world();
        w.invocations = true;
        w.stale_objects
            .insert(c2.address.clone(), ("5555666677778888".into(), 2));
    }
    assert_eq!(record_member_id(&fake, &spec, state, &c2), ids[1]);
    let probes = fake.world().probed.iter().filter(|h| **h == c2).count();
    assert_eq!(probes, 3, "two probes showed the earlier object");
}

/// Without the labels (k0s before InvocationID, or an object written before it) the object
/// is taken as it is: there is nothing to tell an earlier one by.
#[test]
fn record_host_takes_an_unlabelled_member_object_as_it_is() {
    let (fake, spec, state, _) = three_controllers();
    let c2 = host(2);
    fake.world()
        .stale_objects
        .insert(c2.address.clone(), ("5555666677778888".into(), 2));
    assert_eq!(
        record_member_id(&fake, &spec, state, &c2),
        "5555666677778888"
    );
}

/// Run `RecordHost` on `h` alone and return the member ID it recorded.
fn record_member_id(fake: &Fake, spec: &Spec, state: State, h: &HostId) -> String {
    let r = apply_with(
        fake,
        &one_step(h, StepKind::RecordHost),
        spec,
        state,
        opts(2),
    );
    r.result.as_ref().expect("recorded");
    let rec = r.state.host(h).expect("recorded").etcd.clone();
    rec.expect("member recorded").member_id
}

#[test]
fn remove_dead_member_by_recorded_id() {
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    {
        // c3 died: its member is still registered, its API does not answer.
        let mut w = fake.world();
        let h = w.hosts.get_mut(&c3).unwrap();
        h.running = false;
    }
    let plan = one_step(&c3, remove_member(&ids[2], &c3, &c1));
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("removed");
    let leave = runs_of(&fake, &c1, "etcd leave");
    assert_eq!(leave.len(), 1);
    assert!(
        leave[0].contains("--peer-address=127.0.0.3"),
        "{}",
        leave[0]
    );
    assert_eq!(member_names(&fake), vec!["c1", "c2"]);
    assert_eq!(r.state.host(&c3).unwrap().etcd, None, "member info cleared");
    assert_eq!(r.intent_counts(), vec![1, 0]);
    assert_eq!(
        r.checkpoints[0].intents[0].member_id.as_deref(),
        Some(ids[2].as_str())
    );
}

#[test]
fn remove_member_retries_while_etcd_says_unhealthy_cluster() {
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    {
        let mut w = fake.world();
        w.hosts.get_mut(&c3).unwrap().running = false;
        w.refuse_leave = 2;
    }
    let plan = one_step(&c3, remove_member(&ids[2], &c3, &c1));
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.expect("removed after etcd stopped refusing");
    assert_eq!(
        runs_on(&fake, &c1, "etcd leave"),
        3,
        "two refusals, then the removal"
    );
    assert_eq!(member_names(&fake), vec!["c1", "c2"]);
}

#[test]
fn remove_member_gives_up_when_etcd_keeps_refusing() {
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    {
        let mut w = fake.world();
        w.hosts.get_mut(&c3).unwrap().running = false;
        w.refuse_leave = usize::MAX;
    }
    let plan = one_step(&c3, remove_member(&ids[2], &c3, &c1));
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    let err = r
        .result
        .expect_err("etcd never accepted the removal")
        .to_string();
    assert!(err.contains("failed"), "{err}");
    assert_eq!(fake.world().members.len(), 3, "nothing removed");
}

/// The reset of c3 as recorded (machine-id `mid-c3`), the one step of a plan.
fn reset_c3(fake: &Fake, spec: &Spec, state: State, uninstall: bool) -> Applied {
    let plan = one_step(
        &host(3),
        StepKind::ResetHost {
            machine_id: "mid-c3".into(),
            uninstall,
        },
    );
    apply_with(fake, &plan, spec, state, opts(2))
}

/// `r` was refused (exit 3) before any command ran on c3, which still runs: the reason.
fn refused_before_touching_c3<'a>(fake: &Fake, r: &'a Applied) -> &'a str {
    let c3 = host(3);
    let reason = r.refusal();
    assert_eq!(r.exit_code(), 3);
    assert!(
        fake.calls().iter().all(|c| c.host != c3),
        "no command ran on the host"
    );
    assert!(fake.world().hosts[&c3].running);
    reason
}

#[test]
fn reset_refused_when_machine_id_differs() {
    let (fake, spec, state, _) = three_controllers();
    let c3 = host(3);
    fake.world().hosts.get_mut(&c3).unwrap().machine_id = "mid-rebuilt".into();
    let r = reset_c3(&fake, &spec, state, false);
    let reason = refused_before_touching_c3(&fake, &r);
    assert!(reason.contains("mid-rebuilt"), "{reason}");
}

/// Issue 28: a host known only to the state whose recorded data dir is `/` is never reset
/// with it (the planner refuses such a plan; the executor checks again).
#[test]
fn reset_refused_for_implausible_recorded_paths() {
    let (fake, mut spec, mut state, _) = three_controllers();
    let c3 = host(3);
    spec.hosts.retain(|h| h.id() != c3);
    let rec = state.host_mut(&c3).expect("c3 recorded");
    rec.access = Some(k0sform::state::HostAccess {
        ssh: SshTarget::new(c3.address.clone(), 22),
        k0s_install_path: "/usr/local/bin/k0s".into(),
        data_dir: "/".into(),
        kubelet_root_dir: None,
        cluster_address: None,
    });
    let r = reset_c3(&fake, &spec, state, false);
    let reason = refused_before_touching_c3(&fake, &r);
    assert!(
        reason.contains("access.dataDir: `/` is the root directory"),
        "{reason}"
    );
}

#[test]
fn reset_stops_then_resets_the_recorded_machine() {
    let (fake, spec, state, _) = three_controllers();
    let c3 = host(3);
    let r = reset_c3(&fake, &spec, state, false);
    r.result.expect("reset");
    let words = words_on(&fake, &c3);
    let stop = words.iter().position(|w| w == "stop").expect("stopped");
    let reset = first(&words, "reset --data-dir=/var/lib/k0s");
    assert!(stop < reset, "{words:?}");
    let w = fake.world();
    assert!(!w.hosts[&c3].running && w.hosts[&c3].installed.is_none());
}

/// Destroy's reset (`uninstall`) also takes the binary, k0s.yaml and the token file off the
/// host, as k0sctl's reset does, and only after `k0s reset`; a plain reset keeps them.
#[test]
fn destroy_reset_removes_binary_and_config_after_the_reset() {
    for uninstall in [true, false] {
        let (fake, spec, state, _) = three_controllers();
        let c3 = host(3);
        for f in ["/usr/local/bin/k0s", "/etc/k0s/k0s.yaml"] {
            fake.world()
                .hosts
                .get_mut(&c3)
                .unwrap()
                .files
                .insert(f.into(), (b"x".to_vec(), 0o600));
        }
        let r = reset_c3(&fake, &spec, state, uninstall);
        r.result.expect("reset");
        let runs: Vec<Vec<String>> = fake
            .calls()
            .iter()
            .filter(|c| c.host == c3)
            .filter_map(|c| match &c.kind {
                CallKind::Run { argv, .. } => Some(argv.clone()),
                _ => None,
            })
            .collect();
        let reset = runs
            .iter()
            .position(|a| a.iter().any(|w| w == "reset"))
            .expect("k0s reset ran");
        let rm = runs
            .iter()
            .position(|a| a.first().is_some_and(|w| w == "rm"));
        let files = &fake.world().hosts[&c3].files;
        if uninstall {
            let rm = rm.expect("rm ran");
            assert!(reset < rm, "{runs:?}");
            assert_eq!(
                runs[rm],
                [
                    "rm",
                    "-f",
                    "--",
                    "/usr/local/bin/k0s",
                    "/etc/k0s/k0s.yaml",
                    "/etc/k0s/k0stoken"
                ]
            );
            assert!(files.is_empty(), "{:?}", files.keys());
        } else {
            assert!(rm.is_none(), "{runs:?}");
            assert_eq!(files.len(), 2);
        }
    }
}

/// `RemoveUnknownMember` (destroy): a member no host owns, added by hand and never started
/// (no name, no EtcdMember object), is removed through `via` by its peer address; no host's
/// state record changes, and its intent carries the peer URL.
#[test]
fn unknown_member_is_removed_by_its_peer_address_and_changes_no_state() {
    let (fake, spec, state, ids) = three_controllers();
    let c1 = host(1);
    fake.world().members.push(fake::Member {
        name: String::new(),
        peer_url: "https://127.0.0.9:2380".into(),
        id: "0badc0de0badc0de".into(),
    });
    let before = state.clone();
    let plan = one_step(
        &c1,
        StepKind::RemoveUnknownMember {
            name: String::new(),
            member_id: None,
            peer_url: "https://127.0.0.9:2380".into(),
            via: c1.clone(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    r.result.as_ref().expect("removed");
    let leave = runs_of(&fake, &c1, "etcd leave");
    assert_eq!(leave.len(), 1, "{leave:?}");
    assert!(
        leave[0].contains("--peer-address=127.0.0.9"),
        "{}",
        leave[0]
    );
    assert_eq!(member_names(&fake), vec!["c1", "c2", "c3"]);
    assert_eq!(r.state.hosts, before.hosts, "a host's record changed");
    assert_eq!(
        r.state
            .host(&c1)
            .unwrap()
            .etcd
            .as_ref()
            .map(|e| &e.member_id),
        Some(&ids[0])
    );
    assert_eq!(r.intent_counts(), vec![1, 0]);
    assert_eq!(
        r.checkpoints[0].intents[0].peer_url.as_deref(),
        Some("https://127.0.0.9:2380")
    );
}

/// The unknown member's ID is checked against the EtcdMember object at its address: one the
/// plan did not see, or another than it saw, refuses before anything changes; an address a
/// host of the spec or the state has is never removed as unknown.
#[test]
fn unknown_member_removal_refused_when_its_address_changed_hands() {
    for (planned, why) in [
        (None, "which the plan did not see"),
        (
            Some("1111222233334444"),
            "not 1111222233334444 as the plan saw",
        ),
    ] {
        let (fake, spec, state, _) = three_controllers();
        let c1 = host(1);
        fake.world().members.push(fake::Member {
            name: "x9".into(),
            peer_url: "https://127.0.0.9:2380".into(),
            id: "0badc0de0badc0de".into(),
        });
        let plan = one_step(
            &c1,
            StepKind::RemoveUnknownMember {
                name: "x9".into(),
                member_id: planned.map(String::from),
                peer_url: "https://127.0.0.9:2380".into(),
                via: c1.clone(),
            },
        );
        let r = apply_with(&fake, &plan, &spec, state, opts(2));
        let reason = r.refusal();
        assert!(
            reason.contains(why) && reason.contains("0badc0de0badc0de"),
            "{reason}"
        );
        assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0, "no remote change");
        assert_eq!(fake.world().members.len(), 4);
    }
    // c3's own peer address is never an unknown member's.
    let (fake, spec, state, _) = three_controllers();
    let c1 = host(1);
    let plan = one_step(
        &c1,
        StepKind::RemoveUnknownMember {
            name: "c3".into(),
            member_id: None,
            peer_url: "https://127.0.0.3:2380".into(),
            via: c1.clone(),
        },
    );
    let r = apply_with(&fake, &plan, &spec, state, opts(2));
    assert!(r.refusal().contains("peer address now"), "{}", r.refusal());
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0, "no remote change");
}

#[test]
fn removal_plan_deleting_the_etcd_member_object_first_still_checks_the_id() {
    // The planner's removal order: delete Node/EtcdMember/ControlNode, then remove the member.
    let (fake, spec, state, ids) = three_controllers();
    let (c1, c3) = (host(1), host(3));
    fake.world().hosts.get_mut(&c3).unwrap().running = false;
    let remove = |id: &str| {
        plan_of(vec![
            step_on(
                0,
                c3.clone(),
                StepKind::DeleteObjects {
                    node: "c3".into(),
                    objects: vec![k0sform::plan::ObjectKind::EtcdMember],
                    via: c1.clone(),
                    etcd_member: None,
                    control_node: None,
                },
                &[],
            ),
            step_on(1, c3.clone(), remove_member(id, &c3, &c1), &[0]),
        ])
    };
    {
        let mut w = fake.world();
        w.hide_objects_after_delete = true;
    }
    let r = apply_with(
        &fake,
        &remove("0000000000000bad"),
        &spec,
        state.clone(),
        opts(1),
    );
    let reason = r.refusal();
    assert!(reason.contains(&ids[2]), "{reason}");
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 0);

    // A new run sees the object again before deleting it (as a fresh cluster would).
    fake.world().deleted_objects.clear();
    let r = apply_with(&fake, &remove(&ids[2]), &spec, state, opts(1));
    r.result
        .expect("removed with the ID the object showed before its deletion");
    assert_eq!(runs_on(&fake, &c1, "etcd leave"), 1);
}
