//! Removal and destroy: etcd members and nodes by their recorded names and ids, kine
//! clusters, unstarted and unknown members, and the order of resets.

use super::*;

/// A controller removed from the spec whose etcd member has no known ID (no EtcdMember object
/// names it: k0s before 1.30, or capitals in its hostname on k0s 1.30–1.34.0, and none recorded
/// in the state) is refused: removing it would reset the host and leave a dead voter behind.
#[test]
fn removal_of_a_member_without_a_known_id_is_refused_not_half_done() {
    let (_, case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "remove_controller")
        .expect("case remove_controller");
    let mut i = build(&case);
    let gone = HostId::new("10.0.0.3", 22);
    if let Some(h) = i.state.hosts.iter_mut().find(|h| h.id() == gone) {
        h.etcd = None;
    }
    for h in &mut i.reality.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(v) = &mut f.view
        {
            for m in &mut v.members {
                if m.peer_url == peer_url("10.0.0.3") {
                    m.member_id = None;
                }
            }
        }
    }
    let err = run(&i).expect_err("refused");
    assert_eq!(err.kind, RefusalKind::UnknownIdentity, "{err:?}");
    let text = refusal_text(&err);
    assert!(text.contains("has no known member ID"), "{text}");
    assert!(
        text.contains("k0s etcd leave --peer-address=10.0.0.3"),
        "{text}"
    );
}

/// Issue 14, item 5: a host being removed goes by the node name the state recorded, not by the
/// hostname it reports now; a host that renames itself to another host's name cannot make the
/// drain and the deletion hit that host's Node.
#[test]
fn removal_uses_the_recorded_name_not_the_reported_one() {
    let mut i = case_inputs("remove_worker");
    let w01 = HostId::new("10.0.1.1", 22);
    facts_mut(&mut i.reality, &w01)
        .expect("w01 probed")
        .hostname = "c01".into();
    let p = run(&i).expect("plan");
    let names: Vec<&str> = p
        .steps
        .iter()
        .filter(|s| s.host == w01)
        .filter_map(|s| match &s.kind {
            StepKind::Drain { node, .. } | StepKind::DeleteObjects { node, .. } => {
                Some(node.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(names, ["w01", "w01"], "{:#?}", p.steps);
}

/// Destroy's order: the workers' steps wait for nothing of each other (the executor runs them
/// as -parallelism allows), every controller step waits for every worker, and the controllers
/// go strictly one after another.
#[test]
fn destroy_resets_workers_together_then_controllers_one_at_a_time() {
    let i = case_inputs("destroy");
    let p = run(&i).expect("plan");
    let role_of = |h: &HostId| {
        i.state
            .hosts
            .iter()
            .find(|s| &s.id() == h)
            .map(|s| s.role)
            .expect("recorded")
    };
    let (workers, controllers): (Vec<&k0sform::plan::Step>, Vec<&k0sform::plan::Step>) = p
        .steps
        .iter()
        .filter(|s| !matches!(s.kind, StepKind::ForgetCluster))
        .partition(|s| !role_of(&s.host).is_controller());
    assert_eq!(workers.len(), 4, "{workers:?}");
    for a in &workers {
        for b in &workers {
            if a.host != b.host {
                assert!(
                    !graph::precedes(&p.steps, a.id, b.id),
                    "{} waits for {}",
                    b.host,
                    a.host
                );
            }
        }
        for c in &controllers {
            assert!(graph::precedes(&p.steps, a.id, c.id), "{c:?} before {a:?}");
        }
    }
    // Controllers one at a time: of two controllers' steps, one always comes first.
    for a in &controllers {
        for b in &controllers {
            if a.host != b.host {
                assert!(
                    graph::precedes(&p.steps, a.id, b.id) || graph::precedes(&p.steps, b.id, a.id),
                    "{} and {} may run at once",
                    a.host,
                    b.host
                );
            }
        }
    }
}

/// Turn a case's cluster into a multi-controller kine cluster on an external datasource (k0s
/// `storage.type: kine` with a `dataSource` other controllers can reach, `IsJoinable` in k0s
/// `pkg/apis/k0s/v1beta1/storage.go`): every controller's k0s reports kine and no etcd peer
/// address, no controller lists etcd members (`k0s etcd` refuses on kine), and the state
/// records no member IDs.
fn into_kine(i: &mut Inputs) {
    i.spec.k0s.config = Some(
        serde_json::json!({"spec": {"storage": {"type": "kine", "kine": {
        "dataSource": "postgres://k0s:pw@db.example.com:5432/k0s"}}}}),
    );
    for h in &mut i.state.hosts {
        h.etcd = None;
    }
    let specs: Vec<HostSpec> = i.spec.hosts.clone();
    for h in &mut i.reality.hosts {
        let Probe::Reached(f) = &mut h.probe else {
            continue;
        };
        let Some(st) = f.status.as_mut() else {
            continue;
        };
        if st.role != "controller" {
            continue;
        }
        st.storage_type = Some("kine".into());
        st.peer_address = None;
        f.has_etcd_data = false;
        if let Some(hs) = specs.iter().find(|s| s.id() == h.id) {
            let text = desired::config_yaml(&i.spec, hs);
            f.config_sha256 = Some(sha256_hex(&text));
            f.config_text = Some(text);
        }
        if let Some(v) = f.view.as_mut() {
            v.members.clear();
        }
    }
}

fn step_kinds(p: &Plan, id: &HostId) -> Vec<&'static str> {
    p.steps
        .iter()
        .filter(|s| &s.host == id)
        .map(|s| s.kind.name())
        .collect()
}

/// Issue 13: a multi-controller kine cluster (external datasource) is planned without etcd: no
/// member IDs looked for, no quorum arithmetic, no member added or removed.
#[test]
fn kine_cluster_with_an_external_datasource_is_planned_without_etcd() {
    // Steady state: nothing to do, nothing refused for want of an etcd member.
    let mut i = case_inputs("noop");
    into_kine(&mut i);
    let p = run(&i).expect("plan");
    assert!(p.changes.is_empty(), "{:#?}", p.changes);
    assert_eq!(p.etcd.members_before, 0);

    // A controller joins: a join, no etcd arithmetic.
    let mut i = case_inputs("add_controller");
    into_kine(&mut i);
    let p = run(&i).expect("plan");
    let c04 = HostId::new("10.0.0.4", 22);
    assert_eq!(
        step_kinds(&p, &c04),
        [
            "upload_binary",
            "write_config",
            "join_controller",
            "wait_healthy",
            "record_host"
        ]
    );
    assert_eq!(
        (
            p.etcd.members_before,
            p.etcd.members_after,
            p.etcd.min_healthy,
            p.etcd.quorum
        ),
        (0, 0, 0, 0)
    );
    let text = render::text(&p, false);
    assert!(!text.contains("etcd:"), "{text}");
    assert!(text.contains("(kine, no etcd, identity 7c3f"), "{text}");
    assert!(p.etcd.kine);
    for h in ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.1"] {
        assert!(step_kinds(&p, &HostId::new(h, 22)).is_empty(), "{h}");
    }

    // A controller leaves: no member to remove, its objects deleted, the host reset.
    let mut i = case_inputs("remove_controller");
    into_kine(&mut i);
    let p = run(&i).expect("plan");
    let c03 = HostId::new("10.0.0.3", 22);
    let kinds = step_kinds(&p, &c03);
    assert!(!kinds.contains(&"remove_member"), "{kinds:?}");
    assert_eq!(kinds, ["delete_objects", "reset_host", "forget_host"]);
    assert_eq!(p.etcd.members_before, 0);
}

/// Issue 13: a removed controller's EtcdMember and ControlNode are deleted by the names k0s
/// gives them (its etcd member name and OS hostname, lower-cased), not by its Node name
/// (`hostname:`, recorded in the state).
#[test]
fn removal_deletes_etcd_member_and_control_node_by_their_own_names() {
    let mut i = case_inputs("remove_controller");
    let c03 = HostId::new("10.0.0.3", 22);
    for h in &mut i.state.hosts {
        if h.id() == c03 {
            h.node_name = Some("kube-c03".into());
        }
    }
    facts_mut(&mut i.reality, &c03)
        .expect("c03 probed")
        .hostname = "Ctl-C03".into();
    for h in &mut i.reality.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(v) = &mut f.view
        {
            for m in &mut v.members {
                if m.peer_url == peer_url("10.0.0.3") {
                    m.name = "Ctl-C03".into();
                }
            }
            v.control_nodes.retain(|n| n != "c03");
            v.control_nodes.push("ctl-c03".into());
        }
    }
    let p = run(&i).expect("plan");
    let del = p
        .steps
        .iter()
        .find(|s| s.host == c03 && s.kind.name() == "delete_objects")
        .expect("delete_objects");
    assert_eq!(
        del.kind.object_names(),
        [
            (plan::ObjectKind::EtcdMember, "ctl-c03"),
            (plan::ObjectKind::ControlNode, "ctl-c03")
        ],
        "{:#?}",
        del.kind
    );
    let text = render::text(&p, false);
    assert!(
        text.contains("EtcdMember \"ctl-c03\", ControlNode \"ctl-c03\", deleted via"),
        "{text}"
    );
}

/// Add an etcd member no host owns to every controller's view: added by hand and never
/// started (no name, and no EtcdMember object, so no ID).
fn add_unstarted_member(i: &mut Inputs, addr: &str) {
    for h in &mut i.reality.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(v) = &mut f.view
        {
            v.members.push(MemberView {
                name: String::new(),
                peer_url: peer_url(addr),
                member_id: None,
                invocation: None,
            });
        }
    }
}

/// A member added by hand and never started (no name, no ID) is removed first by its peer
/// address, named by that address in the plan; its removal carries no ID to check.
#[test]
fn destroy_removes_an_unstarted_unknown_member_first_by_its_peer_address() {
    let mut i = case_inputs("destroy");
    add_unstarted_member(&mut i, "10.0.0.9");
    let p = run(&i).expect("plan");
    let c01 = HostId::new("10.0.0.1", 22);
    assert_eq!(
        step_kinds(&p, &c01),
        [
            "remove_unknown_member",
            "wait_healthy",
            "reset_host",
            "forget_host",
            "forget_cluster"
        ]
    );
    let rm = p
        .steps
        .iter()
        .find(|s| s.kind.name() == "remove_unknown_member")
        .expect("removal");
    assert_eq!(
        rm.kind,
        StepKind::RemoveUnknownMember {
            name: String::new(),
            member_id: None,
            peer_url: peer_url("10.0.0.9"),
            via: c01.clone(),
        }
    );
    // Before every controller's leave, after every worker.
    for s in &p.steps {
        match s.kind.name() {
            "remove_member" => assert!(graph::precedes(&p.steps, rm.id, s.id), "{s:?}"),
            _ if !i
                .state
                .host(&s.host)
                .is_some_and(|h| h.role.is_controller())
                && s.kind.name() != "forget_cluster" =>
            {
                assert!(graph::precedes(&p.steps, s.id, rm.id), "{s:?}")
            }
            _ => {}
        }
    }
    let text = render::text(&p, false);
    assert!(
        text.contains("etcd member (https://10.0.0.9:2380, added but never started), which no host of the spec or the state owns, removed via c01 before any controller leaves\n      ! etcd 4 → 3 members, 3 healthy after; quorum of 3 is 2"),
        "{text}"
    );
    assert_eq!(
        (p.etcd.members_before, p.etcd.min_healthy, p.etcd.quorum),
        (4, 1, 3)
    );
}

/// Without quorum no member can leave, an unknown one neither: every controller is reset
/// without leaving (as before), and the warning names the member counted as down.
#[test]
fn destroy_without_quorum_names_the_unknown_member_it_counts_as_down() {
    let mut i = case_inputs("destroy_no_quorum");
    add_unstarted_member(&mut i, "10.0.0.9");
    let p = run(&i).expect("plan");
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s.kind.name(), "remove_member" | "remove_unknown_member")),
        "{:#?}",
        p.steps
    );
    assert!(
        p.warnings.iter().any(|w| w.contains(
            "etcd has 1 healthy of 4 members (quorum 3): no member can leave"
        ) && w.contains(
            "(counted as down: (https://10.0.0.9:2380, added but never started), which no host of the spec or the state owns)"
        )),
        "{:?}",
        p.warnings
    );
}
