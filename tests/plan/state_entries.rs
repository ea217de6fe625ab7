//! Issue 28, item 1: a state entry for a host that left the spec (an address no machine
//! answers at) must not remove a live host's etcd member, take ownership of it, or delete
//! its objects.

use super::*;

/// A state-only host at `addr` that no machine answers: recorded with `role`, `name` and, when
/// given, the etcd member (ID and peer URL) of the host named `etcd_of`.
fn add_state_only_entry(i: &mut Inputs, addr: &str, role: Role, name: &str, etcd_of: Option<&str>) {
    let etcd = etcd_of.map(|of| {
        let owner = i
            .spec
            .hosts
            .iter()
            .find(|h| h.hostname.as_deref() == Some(of))
            .expect("owner in the spec");
        EtcdMemberState {
            member_id: member_id(of),
            peer_url: peer_url(owner.peer_address()),
        }
    });
    i.state.upsert_host(HostState {
        address: addr.into(),
        port: 22,
        role,
        node_name: Some(name.into()),
        machine_id: format!("mid-{name}"),
        host_key: format!("SHA256:key-{name}"),
        host_public_key: None,
        etcd,
        k0s_version: None,
        install_flags_sha256: None,
        config_sha256: None,
        k0s_binary: None,
        access: None,
    });
    i.reality.hosts.push(HostReality {
        id: HostId::new(addr, 22),
        probe: Probe::Unreachable {
            error: "connection timed out".into(),
        },
    });
    i.reality.sort();
}

fn refused_exit_3(i: &Inputs) -> String {
    let r = run(i).expect_err("refused");
    assert_eq!(r.exit_code(), 3, "{}", refusal_text(&r));
    refusal_text(&r)
}

/// A state-only entry recording a live spec controller's member ID and peer URL would plan
/// "controller c9 will be removed" and remove c02's real member: refused, naming both.
#[test]
fn state_entry_naming_a_live_controllers_member_is_refused() {
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c9", Some("c02"));
    let text = refused_exit_3(&i);
    assert!(
        text.contains("c9 (10.0.0.99): the state records etcd member")
            && text.contains("belongs to c02 (10.0.0.2)")
            && text.contains("refusing to remove another host's etcd member"),
        "{text}"
    );
    assert!(
        text.contains("https://10.0.0.2:2380: c02 (10.0.0.2) answers with that peer address"),
        "{text}"
    );

    // Only the member ID, at a made-up peer URL; only the peer URL, with a made-up ID: the same.
    for (id, url) in [
        (member_id("c02"), peer_url("10.0.0.99")),
        ("0123456789abcdef".to_string(), peer_url("10.0.0.2")),
    ] {
        let mut i = case_inputs("noop");
        add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c9", Some("c02"));
        let e = i
            .state
            .hosts
            .iter_mut()
            .find(|h| h.address == "10.0.0.99")
            .and_then(|h| h.etcd.as_mut())
            .expect("recorded member");
        e.member_id = id;
        e.peer_url = url;
        let text = refused_exit_3(&i);
        assert!(
            text.contains("c9 (10.0.0.99)") && text.contains("belongs to c02 (10.0.0.2)"),
            "{text}"
        );
    }

    // Down, the controller still owns its member by the spec's peer address.
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c9", Some("c02"));
    i.options.exclude = vec!["10.0.0.2".into()];
    let c02 = HostId::new("10.0.0.2", 22);
    for h in i.reality.hosts.iter_mut().filter(|h| h.id == c02) {
        h.probe = Probe::Unreachable {
            error: "down".into(),
        };
    }
    let text = refused_exit_3(&i);
    assert!(
        text.contains("it is the peer address of c02 (10.0.0.2), a host of the spec"),
        "{text}"
    );
}

/// Two such entries would take etcd from 3 members to 1: refused, naming every pair.
#[test]
fn two_state_entries_naming_live_members_are_refused() {
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.98", Role::Controller, "c8", Some("c02"));
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c9", Some("c03"));
    let text = refused_exit_3(&i);
    assert!(
        text.contains("c8 (10.0.0.98)") && text.contains("belongs to c02 (10.0.0.2)"),
        "{text}"
    );
    assert!(
        text.contains("c9 (10.0.0.99)") && text.contains("belongs to c03 (10.0.0.3)"),
        "{text}"
    );
}

/// An entry whose address sorts before the real controller's no longer takes ownership of its
/// member: the real c02 is not planned as "left the cluster" (reset and rejoined), and the
/// entry is refused.
#[test]
fn state_entry_sorting_first_does_not_take_a_live_controllers_member() {
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.0", Role::Controller, "c0", Some("c02"));
    let text = refused_exit_3(&i);
    assert!(
        text.contains("c0 (10.0.0.0)") && text.contains("belongs to c02 (10.0.0.2)"),
        "{text}"
    );
    assert!(!text.contains("left the cluster"), "{text}");
    // Left out with -exclude, the entry changes nothing about c02.
    i.options.exclude = vec!["10.0.0.0".into()];
    let p = run(&i).expect("plan");
    assert!(
        p.changes.is_empty(),
        "c02 must not be planned at all:\n{}",
        render::text(&p, false)
    );
}

/// An entry recorded as `controller` with a live worker's node name would delete that worker's
/// Node without a drain (a controller has none to drain): refused, naming both.
#[test]
fn state_entry_with_a_live_workers_node_name_is_refused_whatever_its_role() {
    for role in [Role::Controller, Role::Worker, Role::ControllerWorker] {
        let mut i = case_inputs("noop");
        add_state_only_entry(&mut i, "10.0.0.99", role, "w01", None);
        let text = refused_exit_3(&i);
        assert!(
            text.contains(
                "w01 (10.0.0.99) leaves the spec, but the Node \"w01\" it would delete is named after w01 (10.0.1.1), a host of the spec that runs k0s"
            ),
            "{role:?}: {text}"
        );
    }
    // Where w01 has no spec hostname (it goes by the name it reports), the record is blamed,
    // not the live host.
    let mut i = case_inputs("noop");
    let w01 = HostId::new("10.0.1.1", 22);
    for h in i.spec.hosts.iter_mut().filter(|h| h.id() == w01) {
        h.hostname = None;
    }
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "w01", None);
    let text = refused_exit_3(&i);
    assert!(
        text.contains("w01 (10.0.0.99) leaves the spec, but the Node \"w01\" it would delete is named after w01 (10.0.1.1)")
            && !text.contains("says its hostname is"),
        "{text}"
    );
    // Its EtcdMember and ControlNode objects too: named after a live controller.
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.99", Role::Controller, "c02", None);
    let text = refused_exit_3(&i);
    assert!(
        text.contains(
            "it would delete is named after c02 (10.0.0.2), a host of the spec that runs k0s"
        ),
        "{text}"
    );
}

/// A new machine taking the name of a removed, dead one (not running k0s yet, its old Node
/// NotReady) is no owner of the old Node: the old record is removed and the new host added.
#[test]
fn a_new_machine_taking_a_dead_hosts_name_is_not_refused() {
    let mut i = case_inputs("remove_worker");
    let old = HostId::new("10.0.1.1", 22);
    for h in i.reality.hosts.iter_mut() {
        if h.id == old {
            h.probe = Probe::Unreachable {
                error: "connection timed out".into(),
            };
        } else if let Probe::Reached(f) = &mut h.probe
            && let Some(v) = f.view.as_mut()
        {
            for n in v.nodes.iter_mut().filter(|n| n.name == "w01") {
                n.ready = false;
            }
        }
    }
    let mut new = i.spec.hosts[0].clone();
    new.ssh = SshTarget::new("10.0.1.5", 22);
    new.role = Role::Worker;
    new.hostname = Some("w01".into());
    i.spec.hosts.push(new);
    i.reality.hosts.push(HostReality {
        id: HostId::new("10.0.1.5", 22),
        probe: Probe::Reached(Box::new(HostFacts {
            machine_id: "mid-new".into(),
            hostname: "w01".into(),
            host_key: "SHA256:key-new".into(),
            os: "debian".into(),
            arch: "amd64".into(),
            ..Default::default()
        })),
    });
    i.reality.sort();
    i.desired = Desired::same_binary(
        &i.spec.hosts.iter().map(|h| h.id()).collect::<Vec<_>>(),
        LocalBinary {
            sha256: sha256_hex("k0s v1.33.4+k0s.0"),
            version: Some("v1.33.4+k0s.0".parse().unwrap()),
            url: None,
        },
    );
    let p = run(&i).expect("plan");
    let actions: BTreeMap<String, Action> = p
        .changes
        .iter()
        .map(|c| (c.host.to_string(), c.action))
        .collect();
    assert_eq!(
        actions,
        BTreeMap::from([
            ("10.0.1.1".to_string(), Action::Remove),
            ("10.0.1.5".to_string(), Action::Add)
        ]),
        "{}",
        render::text(&p, false)
    );
}

/// The k0s paths a removal of a state-only host uses come from the state: shown in the plan,
/// and refused (exit 3, naming host and field) where they cannot be k0s's.
#[test]
fn recorded_k0s_paths_are_shown_and_implausible_ones_refused() {
    let access = |bin: &str, data_dir: &str, kubelet: Option<&str>| k0sform::state::HostAccess {
        ssh: SshTarget::new("10.0.0.3", 22),
        k0s_install_path: bin.into(),
        data_dir: data_dir.into(),
        kubelet_root_dir: kubelet.map(Into::into),
        cluster_address: None,
    };
    let c03 = HostId::new("10.0.0.3", 22);
    let with = |case: &str, a: k0sform::state::HostAccess| {
        let mut i = case_inputs(case);
        i.state
            .hosts
            .iter_mut()
            .find(|h| h.id() == c03)
            .expect("c03")
            .access = Some(a);
        i
    };
    let p = run(&with(
        "remove_controller",
        access("/opt/k0s/bin/k0s", "/srv/k0s", Some("/srv/kubelet")),
    ))
    .expect("plan");
    let text = render::text(&p, false);
    assert!(
        text.contains("k0s stopped and reset on c03 (machine-id mid-…)\n      ! k0s paths from its state record: k0sInstallPath /opt/k0s/bin/k0s, dataDir /srv/k0s, kubeletRootDir /srv/kubelet\n"),
        "{text}"
    );

    for (a, field, why) in [
        (
            access("/usr/local/bin/k0s", "/", None),
            "dataDir",
            "`/` is the root directory",
        ),
        (
            access("/etc/shadow", "/var/lib/k0s", None),
            "k0sInstallPath",
            "`/etc/shadow` is under /etc",
        ),
        (
            access("/usr/local/bin/k0s", "/etc/shadow", None),
            "dataDir",
            "`/etc/shadow` is under /etc",
        ),
        (
            access("/usr/local/bin/k0s", "var/lib/k0s", None),
            "dataDir",
            "must be an absolute path",
        ),
        (
            access("/usr/local/bin/k0s", "/var/lib/k0s/../../..", None),
            "dataDir",
            "is not a clean absolute path",
        ),
        (
            access("/usr/local/bin/k0s", "/var/lib/k0s", Some("/var/lib/..")),
            "kubeletRootDir",
            "is not a clean absolute path",
        ),
        (
            access("/bin/rm", "/var/lib/k0s", None),
            "k0sInstallPath",
            "does not name a k0s binary",
        ),
    ] {
        for case in ["remove_controller", "destroy"] {
            let mut i = with(case, a.clone());
            if case == "destroy" {
                // Only the state knows it.
                i.spec.hosts.retain(|h| h.id() != c03);
            }
            let text = refused_exit_3(&i);
            assert!(
                text.contains("c03 (10.0.0.3) leaves the cluster, but the k0s paths its state record names are no plausible k0s paths")
                    && text.contains(&format!("c03 (10.0.0.3): access.{field}: "))
                    && text.contains(why),
                "{case} {field}: {text}"
            );
        }
    }
}

/// A spec controller's record naming another controller's member (c02 recorded with c03's ID
/// and peer URL): c02 rebuilt is replaced without removing c03's member, and c03 is not taken
/// for gone.
#[test]
fn a_spec_hosts_record_naming_another_controllers_member_is_refused() {
    let mut i = case_inputs("noop");
    let (c02, c03) = (HostId::new("10.0.0.2", 22), HostId::new("10.0.0.3", 22));
    let theirs = i.state.host(&c03).and_then(|h| h.etcd.clone());
    i.state
        .hosts
        .iter_mut()
        .find(|h| h.id() == c02)
        .expect("c02")
        .etcd = theirs;
    // As recorded, c02 runs as it is: nothing to change for either.
    let p = run(&i).expect("plan");
    assert!(p.changes.is_empty(), "{}", render::text(&p, false));
    // Rebuilt, c02 is replaced: its stale member would be c03's.
    facts_mut(&mut i.reality, &c02).expect("c02").machine_id = "mid-rebuilt".into();
    let text = refused_exit_3(&i);
    assert!(
        text.contains("c02 (10.0.0.2): the state records etcd member")
            && text.contains("belongs to c03 (10.0.0.3)")
            && !text.contains("left the cluster"),
        "{text}"
    );
}

/// A state entry at a second address of a live controller's machine, recorded with that
/// machine's machine-id and host key (the state shows both): its removal would reset c02.
/// Refused, naming both.
#[test]
fn state_entry_at_a_second_address_of_a_live_host_is_not_reset() {
    let mut i = case_inputs("noop");
    add_state_only_entry(&mut i, "10.0.0.22", Role::Worker, "x22", None);
    for h in i
        .state
        .hosts
        .iter_mut()
        .filter(|h| h.address == "10.0.0.22")
    {
        h.machine_id = "mid-c02".into();
        h.host_key = "SHA256:key-c02".into();
    }
    let c02 = i
        .reality
        .facts(&HostId::new("10.0.0.2", 22))
        .expect("c02")
        .clone();
    for h in i
        .reality
        .hosts
        .iter_mut()
        .filter(|h| h.id.address == "10.0.0.22")
    {
        h.probe = Probe::Reached(Box::new(c02.clone()));
    }
    let text = refused_exit_3(&i);
    assert!(
        text.contains("x22 (10.0.0.22) leaves the spec, but the machine answering there is c02 (10.0.0.2), a host of the spec")
            && text.contains("refusing to reset it"),
        "{text}"
    );
}
