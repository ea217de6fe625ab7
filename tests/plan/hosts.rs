//! Hosts and their identity: first contact and bastion keys, names reported by hosts,
//! matches that are (not) moves, targets and selectors.

use super::*;

/// First contact is shown per host, and `-trust-new-host-keys=false` refuses it (exit 3) naming
/// the offered key; a host pinned with ssh.hostKey or recorded in the state is not first contact.
#[test]
fn first_contact_is_shown_and_refused_on_request() {
    let mut i = case_inputs("add_worker");
    let p = run(&i).expect("plan");
    assert_eq!(p.first_contacts.len(), 1, "{:?}", p.first_contacts);
    let new = p.first_contacts[0].clone();
    let text = render::text(&p, false);
    assert!(
        text.contains(&format!("first contact: trusting {}", new.fingerprint)),
        "{text}"
    );
    i.options.refuse_first_contact = true;
    let r = run(&i).unwrap_err();
    assert_eq!(r.exit_code(), 3);
    assert!(r.details[0].contains(&new.fingerprint), "{r:?}");
    // Pinned in the spec: checked, not trusted on first use.
    for h in &mut i.spec.hosts {
        if h.id() == new.host {
            h.ssh.host_key = Some(new.fingerprint.clone());
        }
    }
    let p = run(&i).expect("pinned host plans");
    assert!(p.first_contacts.is_empty());
}

/// Issue 28, item 10: `-trust-new-host-keys=false` is checked on the keys alone, before the
/// probe runs (`refuse_first_contact_keys`). On every plan case it is never stricter than the
/// plan's own review: what it refuses, the plan refuses too; a new host is refused, a host
/// that moved (it offers the key recorded at its old address) is not.
#[test]
fn first_contact_keys_are_refused_before_the_probe_as_the_plan_would() {
    use k0sform::transport::{ConnectedBastion, ConnectedHost};
    let connections = |r: &Reality| -> Vec<(HostId, ConnectedHost)> {
        r.hosts
            .iter()
            .filter_map(|h| {
                let f = h.probe.facts()?;
                Some((
                    h.id.clone(),
                    ConnectedHost {
                        fingerprint: f.host_key.clone(),
                        public_key: f.host_public_key.clone().unwrap_or_default(),
                        first_contact: true,
                        bastions: f
                            .bastions
                            .iter()
                            .map(|b| ConnectedBastion {
                                id: b.bastion.clone(),
                                fingerprint: b.host_key.clone(),
                                public_key: b.host_public_key.clone(),
                                first_contact: true,
                            })
                            .collect(),
                    },
                ))
            })
            .collect()
    };
    let early = |i: &Inputs| {
        let c = connections(&i.reality);
        let keys: Vec<(&HostId, &ConnectedHost)> = c.iter().map(|(id, c)| (id, c)).collect();
        plan::refuse_first_contact_keys(&i.spec, &i.state, &i.options, &keys)
    };
    for (name, case) in load_cases() {
        let i = build(&case);
        let Ok(p) = run(&i) else { continue };
        if let Err(r) = early(&i) {
            assert_eq!(r.exit_code(), 3, "{name}");
            for f in &p.first_contacts {
                assert!(
                    r.details.iter().any(|d| d.contains(&f.fingerprint)),
                    "{name}: {r:?}"
                );
            }
            assert_eq!(r.details.len(), p.first_contacts.len(), "{name}: {r:?}");
        }
    }
    let i = case_inputs("add_worker");
    let new = run(&i).unwrap().first_contacts[0].clone();
    let r = early(&i).unwrap_err();
    assert!(
        r.details[0].contains(&format!("{}: offers {}", new.host, new.fingerprint)),
        "{r:?}"
    );
    let i = case_inputs("move_worker");
    assert!(run(&i).unwrap().first_contacts.is_empty());
    early(&i).expect("a moved host offers its recorded key");
}

/// With `-target`, a bastion's key is recorded only when a host the plan is for goes through
/// it: a targeted host, or one the plan changes for it (the bootstrap controller). A bastion
/// only other hosts go through is still shown as a first contact, and recorded by the plan
/// for them (or by a plan without `-target`).
#[test]
fn target_records_only_bastions_its_hosts_go_through() {
    use k0sform::reality::BastionKey;
    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvZ/q36TdInhTZoW5bXPQ/Hey6Hm97hfZmb+65XdDbu";
    let bastion = HostId::new("127.0.0.50", 22);
    // `behind` is reached through the bastion, every other host directly.
    let through = |i: &mut Inputs, behind: &HostId| {
        for h in &mut i.spec.hosts {
            if &h.id() == behind {
                h.ssh.bastion = Some(Box::new(SshTarget::new("127.0.0.50", 22)));
            }
        }
        for h in &mut i.reality.hosts {
            if let Probe::Reached(f) = &mut h.probe
                && &h.id == behind
            {
                f.bastions = vec![BastionKey {
                    bastion: HostId::new("127.0.0.50", 22),
                    host_key: k0sform::ssh_key::fingerprint(KEY).unwrap(),
                    host_public_key: KEY.to_string(),
                }];
            }
        }
    };
    let recorded = |p: &Plan| -> Vec<HostId> {
        p.steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::RecordBastion { .. }))
            .map(|s| s.host.clone())
            .collect()
    };
    let target = |i: &mut Inputs, t: &[&str]| {
        i.options.target = t.iter().map(|s| s.to_string()).collect();
        run(i).expect("plan")
    };

    // w01 goes through the bastion; nothing changes anywhere.
    let w01 = HostId::new("10.0.1.1", 22);
    let mut i = case_inputs("noop");
    through(&mut i, &w01);
    let p = target(&mut i, &["10.0.0.1"]);
    assert_eq!(recorded(&p), Vec::<HostId>::new(), "{:?}", p.steps);
    assert!(!p.has_changes(), "{:?}", p.steps);
    assert!(
        p.first_contacts
            .iter()
            .any(|f| f.bastion && f.host == bastion),
        "{:?}",
        p.first_contacts
    );
    assert!(
        !render::text(&p, false).contains("bastion host key to record"),
        "{}",
        render::text(&p, false)
    );
    assert_eq!(
        recorded(&target(&mut i, &["10.0.1.1"])),
        vec![bastion.clone()]
    );
    assert_eq!(
        recorded(&target(&mut i, &["10.0.0.2", "10.0.1.1"])),
        vec![bastion.clone()]
    );
    assert_eq!(recorded(&target(&mut i, &[])), vec![bastion.clone()]);

    // -target w01 on a new cluster bootstraps c01 too: c01's bastion is recorded, c02's not.
    let mut i = case_inputs("target_needs_bootstrap");
    let c01 = HostId::new("10.0.0.1", 22);
    through(&mut i, &c01);
    assert_eq!(
        recorded(&target(&mut i, &["10.0.1.1"])),
        vec![bastion.clone()]
    );
    let mut i = case_inputs("target_needs_bootstrap");
    through(&mut i, &HostId::new("10.0.0.2", 22));
    assert_eq!(
        recorded(&target(&mut i, &["10.0.1.1"])),
        Vec::<HostId>::new()
    );
}

/// Bastions are held to the hosts' rules: a bastion with no recorded key is a first contact
/// (shown, refused with `-trust-new-host-keys=false`) and gets a `RecordBastion` step; once
/// recorded it is quiet; a changed bastion key refuses the plan (exit 3) naming the bastion,
/// whatever `-replace` says about the hosts behind it; `-replace BASTION` accepts the new key.
#[test]
fn bastion_keys_are_shown_recorded_and_checked() {
    use k0sform::reality::BastionKey;
    use k0sform::state::BastionState;
    const KEY1: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvZ/q36TdInhTZoW5bXPQ/Hey6Hm97hfZmb+65XdDbu";
    const KEY2: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFP+/ojncWRTHg/eH9zkhBM5UfE1so5lUGxA6hGnxOyE";
    let fp1 = k0sform::ssh_key::fingerprint(KEY1).unwrap();
    let fp2 = k0sform::ssh_key::fingerprint(KEY2).unwrap();
    let bastion = HostId::new("127.0.0.50", 22);
    let mut i = case_inputs("noop");
    for h in &mut i.spec.hosts {
        h.ssh.bastion = Some(Box::new(SshTarget::new("127.0.0.50", 22)));
    }
    let through = |i: &mut Inputs, key: &str| {
        for h in &mut i.reality.hosts {
            if let Probe::Reached(f) = &mut h.probe {
                f.bastions = vec![BastionKey {
                    bastion: HostId::new("127.0.0.50", 22),
                    host_key: k0sform::ssh_key::fingerprint(key).unwrap(),
                    host_public_key: key.to_string(),
                }];
            }
        }
    };
    through(&mut i, KEY1);

    // First contact: shown, and recorded by a step of its own.
    let p = run(&i).expect("plan");
    let fc: Vec<_> = p.first_contacts.iter().filter(|f| f.bastion).collect();
    assert_eq!(fc.len(), 1, "{:?}", p.first_contacts);
    assert_eq!(fc[0].host, bastion);
    assert_eq!(fc[0].fingerprint, fp1);
    let text = render::text(&p, false);
    assert!(
        text.contains(&format!(
            "bastion (127.0.0.50): first contact: trusting {fp1}"
        )),
        "{text}"
    );
    assert!(text.contains("1 bastion host key to record"), "{text}");
    assert!(
        text.contains(&format!("  + bastion (127.0.0.50): {fp1}")),
        "{text}"
    );
    let rec: Vec<_> = p
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::RecordBastion { .. }))
        .collect();
    assert_eq!(rec.len(), 1, "{:?}", p.steps);
    assert_eq!(rec[0].host, bastion);
    assert!(
        matches!(&rec[0].kind, StepKind::RecordBastion { fingerprint, public_key } if fingerprint == &fp1 && public_key == KEY1)
    );

    // -trust-new-host-keys=false refuses the unpinned bastion.
    i.options.refuse_first_contact = true;
    let r = run(&i).unwrap_err();
    assert_eq!(r.exit_code(), 3);
    assert!(
        r.details
            .iter()
            .any(|d| d.contains("bastion 127.0.0.50") && d.contains(&fp1)),
        "{r:?}"
    );
    i.options.refuse_first_contact = false;

    // Recorded: no first contact, nothing to do.
    i.state.upsert_bastion(BastionState {
        address: "127.0.0.50".into(),
        port: 22,
        host_key: fp1.clone(),
        host_public_key: KEY1.into(),
    });
    let p = run(&i).expect("plan");
    assert!(p.first_contacts.is_empty(), "{:?}", p.first_contacts);
    assert!(!p.has_changes(), "{:?}", p.steps);
    i.options.refuse_first_contact = true;
    run(&i).expect("a recorded bastion is no first contact");
    i.options.refuse_first_contact = false;

    // The bastion's key changed: refused naming the bastion, even with -replace on the hosts.
    let victim = i.reality.hosts[0].id.clone();
    let reached = i.reality.hosts[0].probe.clone();
    i.reality.hosts[0].probe = Probe::HostKeyChanged {
        expected: fp1.clone(),
        offered: fp2.clone(),
        bastion: Some(bastion.clone()),
    };
    let r = run(&i).unwrap_err();
    assert_eq!(r.exit_code(), 3);
    assert!(r.message.contains("bastion"), "{r:?}");
    assert!(
        r.details
            .iter()
            .any(|d| d.contains("bastion 127.0.0.50") && d.contains(&fp2)),
        "{r:?}"
    );
    i.options.replace = vec![victim.to_string()];
    let r = run(&i).unwrap_err();
    assert_eq!(
        r.exit_code(),
        3,
        "-replace HOST does not accept a bastion's key"
    );

    // -replace BASTION: the probe accepted the new key; it is first contact and recorded again.
    i.options.replace = vec!["127.0.0.50".into()];
    i.reality.hosts[0].probe = reached;
    through(&mut i, KEY2);
    let p = run(&i).expect("plan with -replace bastion");
    assert!(
        !p.warnings.iter().any(|w| w.contains("names no host")),
        "{:?}",
        p.warnings
    );
    assert!(
        p.first_contacts
            .iter()
            .any(|f| f.bastion && f.fingerprint == fp2)
    );
    assert!(p.steps.iter().any(
        |s| matches!(&s.kind, StepKind::RecordBastion { fingerprint, .. } if fingerprint == &fp2)
    ));

    // Two connections that saw two keys for one bastion: refused.
    let mut i2 = case_inputs("noop");
    for h in &mut i2.spec.hosts {
        h.ssh.bastion = Some(Box::new(SshTarget::new("127.0.0.50", 22)));
    }
    through(&mut i2, KEY1);
    let last = i2.reality.hosts.len() - 1;
    if let Probe::Reached(f) = &mut i2.reality.hosts[last].probe {
        f.bastions[0].host_key = fp2.clone();
        f.bastions[0].host_public_key = KEY2.into();
    }
    assert!(i2.reality.hosts.len() > 1);
    let r = run(&i2).unwrap_err();
    assert_eq!(r.exit_code(), 3);
    assert!(r.message.contains("different SSH host keys"), "{r:?}");
}

#[test]
fn target_ignores_refusals_of_other_hosts() {
    let (_, mut case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "unreachable")
        .expect("case");
    let i = build(&case);
    assert!(run(&i).is_err());
    case.options.target = vec!["10.0.1.1".into()];
    let p = run(&build(&case)).expect("a targeted plan skips the unreachable c03");
    assert!(!p.has_changes());
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("c03 (10.0.0.3) is unreachable")),
        "{:?}",
        p.warnings
    );
    case.options.target = vec!["10.0.0.3".into()];
    let r = run(&build(&case)).expect_err("targeting the unreachable host is refused");
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn selectors_naming_no_host_are_warned_about() {
    let (_, mut case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "noop")
        .expect("case");
    case.options.replace = vec!["10.0.0.99".into()];
    case.options.exclude = vec!["10.0.0.1:2222".into()];
    let p = run(&build(&case)).expect("plan");
    assert_eq!(
        p.warnings,
        vec![
            "-replace 10.0.0.99 names no host of the spec or the state".to_string(),
            "-exclude 10.0.0.1:2222 names no host of the spec or the state".to_string(),
        ]
    );
    assert!(!p.has_changes());
}

/// A host whose `k0s status` does not answer is refused as "k0s not answering", not as unreachable.
#[test]
fn k0s_not_answering_is_refused_as_such() {
    let (_, case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "noop")
        .expect("case noop");
    let mut i = build(&case);
    let h = i.reality.hosts.last_mut().expect("a host");
    let id = h.id.clone();
    h.probe = Probe::K0sNotAnswering {
        error: "k0s not answering: `k0s status` gave no answer within 10 s".into(),
    };
    let err = run(&i).expect_err("refused");
    let text = refusal_text(&err);
    assert!(text.contains("k0s not answering"), "{text}");
    assert!(!text.contains("unreachable ("), "{text}");
    assert!(text.contains(&format!("-exclude {id}")), "{text}");
}

/// Issue 14, item 5: a host without a spec hostname that reports the name another host of the
/// cluster goes by is refused (exit 3), naming both.
#[test]
fn a_host_reporting_another_hosts_name_is_refused() {
    let mut i = case_inputs("noop");
    let w01 = HostId::new("10.0.1.1", 22);
    for h in i.spec.hosts.iter_mut().filter(|h| h.id() == w01) {
        h.hostname = None;
    }
    facts_mut(&mut i.reality, &w01)
        .expect("w01 probed")
        .hostname = "c02".into();
    let r = run(&i).expect_err("refused");
    assert_eq!(r.kind.exit(), k0sform::exit::Exit::Refused, "{r:?}");
    let text = format!("{}\n{}", r.message, r.details.join("\n"));
    assert!(
        text.contains("10.0.1.1 says its hostname is \"c02\", the name of 10.0.0.2"),
        "{text}"
    );
    // Its own recorded name is fine.
    facts_mut(&mut i.reality, &w01)
        .expect("w01 probed")
        .hostname = "w01".into();
    run(&i).expect("plan");
}

/// Issue 28, item 11: a new host reporting the name of a Node no host owns is refused
/// (`add_worker_node_name_taken`); the spec's `hostname:` for it says the name is meant, and a
/// host already running k0s (adopted) keeps its own Node.
#[test]
fn a_new_host_may_take_an_unowned_nodes_name_only_by_its_spec_hostname() {
    let mut i = case_inputs("add_worker_node_name_taken");
    let w = HostId::new("10.0.1.2", 22);
    let err = run(&i).expect_err("refused");
    assert!(
        refusal_text(&err).contains("the name of a Node of the cluster no host"),
        "{}",
        refusal_text(&err)
    );
    for h in i.spec.hosts.iter_mut().filter(|h| h.id() == w) {
        h.hostname = Some("w99".into());
    }
    let p = run(&i).expect("planned with hostname: w99");
    assert!(p.changes.iter().any(|c| c.host == w), "{:#?}", p.changes);
    // Another name: nothing to refuse.
    let mut i = case_inputs("add_worker_node_name_taken");
    facts_mut(&mut i.reality, &w).expect("probed").hostname = "w02".into();
    run(&i).expect("plan");
}

/// Issue 14 (low): only controllers' views count in split-brain detection; a worker reporting
/// another cluster (a hostile or confused host) is no second cluster.
#[test]
fn a_workers_view_is_no_vote_on_the_cluster_identity() {
    let mut i = case_inputs("noop");
    let w01 = HostId::new("10.0.1.1", 22);
    let f = facts_mut(&mut i.reality, &w01).expect("w01 probed");
    f.view = Some(ClusterView {
        cluster_uid: Some("00000000-0000-4000-8000-000000000bad".into()),
        members: vec![MemberView {
            name: "evil".into(),
            peer_url: "https://10.9.9.9:2380".into(),
            member_id: Some("1234abcd1234abcd".into()),
            invocation: None,
        }],
        nodes: vec![],
        control_nodes: vec![],
        errors: vec![],
    });
    let p = run(&i).expect("a worker's view is ignored");
    assert!(!p.has_changes(), "{}", render::text(&p, false));
}

/// Issue 16: a match that is not one recorded host at one new address of the same role is not
/// a move (and says why): one machine answering at two spec addresses, or another role.
#[test]
fn ambiguous_or_role_changing_matches_are_not_moves() {
    let base = case_inputs("move_worker");
    let w02 = HostId::new("10.0.1.9", 22);
    let p = run(&base).expect("plan");
    assert_eq!(p.changes[0].moved_from, Some(HostId::new("10.0.1.2", 22)));

    // The same machine at a second spec address too.
    let mut i = case_inputs("move_worker");
    let mut twin = i.spec.hosts.iter().find(|h| h.id() == w02).unwrap().clone();
    twin.ssh.address = "10.0.1.8".into();
    twin.hostname = Some("w02b".into());
    i.spec.hosts.push(twin);
    let facts = base.reality.facts(&w02).unwrap().clone();
    i.reality.hosts.push(HostReality {
        id: HostId::new("10.0.1.8", 22),
        probe: Probe::Reached(Box::new(facts)),
    });
    i.reality.sort();
    // The machine runs k0s as w02 (at the new addresses): removing the old record would drain
    // and delete its Node, so that is refused, naming both.
    let r = run(&i).expect_err("the old record's Node is in use");
    assert!(
        refusal_text(&r).contains(
            "w02 (10.0.1.2) leaves the spec, but the Node \"w02\" it would delete is named after w02b (10.0.1.8), a host of the spec that runs k0s"
        ),
        "{}",
        refusal_text(&r)
    );
    // Once k0s is stopped there and its Node is NotReady, the old record is removed; the twins
    // are not a move.
    let not_ready = |i: &mut Inputs| {
        for h in &mut i.reality.hosts {
            if let Probe::Reached(f) = &mut h.probe
                && let Some(v) = f.view.as_mut()
            {
                for n in v.nodes.iter_mut().filter(|n| n.name == "w02") {
                    n.ready = false;
                }
            }
        }
        for twin in [HostId::new("10.0.1.9", 22), HostId::new("10.0.1.8", 22)] {
            if let Some(f) = facts_mut(&mut i.reality, &twin) {
                f.status = None;
            }
        }
    };
    not_ready(&mut i);
    let p = run(&i).expect("plan");
    assert!(
        p.changes.iter().all(|c| c.moved_from.is_none()),
        "{}",
        render::text(&p, false)
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("answers at several addresses of the spec (10.0.1.8, 10.0.1.9)")),
        "{:?}",
        p.warnings
    );

    // Recorded as a worker, now a controller in the spec.
    let mut i = case_inputs("move_worker");
    let at = i.spec.hosts.iter().position(|h| h.id() == w02).unwrap();
    i.spec.hosts[at].role = Role::Controller;
    not_ready(&mut i);
    let p = run(&i);
    let text = match &p {
        Ok(p) => {
            assert!(p.changes.iter().all(|c| c.moved_from.is_none()));
            p.warnings.join("\n")
        }
        Err(r) => refusal_text(r),
    };
    let warned = p.as_ref().is_ok_and(|p| {
        p.warnings.iter().any(|w| {
            w.contains("makes it a controller where it was a worker: not treated as a move")
        })
    });
    assert!(warned, "{text}");
}
