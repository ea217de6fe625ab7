//! `probe::probe_all` over real SSH. Part 1: plain sshd servers on loopback addresses (this
//! machine, no k0s): a fresh host, an unreachable one, a state-only one, a changed key.
//! Part 2: the test lab (testdata/lab: real sshd per simulated host, the k0s double with real
//! etcd): a fresh lab host, and a cluster of three controllers and a worker formed by hand.

use crate::support::lab;
use crate::support::prereq::require_lab;
use crate::support::sshd::{Sshd, free_address, keygen};

use k0sform::hostid::HostId;
use k0sform::probe::{self, ProbeOptions};
use k0sform::reality::Probe;
use k0sform::spec::{HostSpec, Role, Spec, SshTarget};
use k0sform::ssh::{SshOptions, SshTransport};
use k0sform::state::{HostAccess, HostState, State};
use std::path::Path;
use std::time::Duration;

fn spec(hosts: Vec<HostSpec>) -> Spec {
    Spec {
        name: "probe-test".into(),
        user: "admin".into(),
        hosts,
        ..Default::default()
    }
}

/// How the state records reaching a host through `ssh`, with k0s's default paths.
fn default_access(ssh: SshTarget) -> HostAccess {
    HostAccess {
        ssh,
        k0s_install_path: "/usr/local/bin/k0s".into(),
        data_dir: "/var/lib/k0s".into(),
        kubelet_root_dir: None,
        cluster_address: None,
    }
}

fn state_host(id: &HostId, fp: &str, key: Option<String>) -> HostState {
    HostState {
        address: id.address.clone(),
        port: id.port,
        role: Role::Controller,
        node_name: None,
        machine_id: "old".into(),
        host_key: fp.into(),
        host_public_key: key,
        etcd: None,
        k0s_version: None,
        install_flags_sha256: None,
        config_sha256: None,
        k0s_binary: None,
        access: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fresh_unreachable_and_state_only_hosts() {
    require_lab!();
    let a = Sshd::start();
    let b = Sshd::start();
    let (dead_addr, dead_port) = free_address();
    let mut dead = SshTarget::new(dead_addr.clone(), dead_port);
    dead.key_path = Some(a.path("client_key"));
    let s = spec(vec![
        a.host(Role::Controller, 1),
        HostSpec::new(Role::Worker, dead, 2),
    ]);
    // b is only in the state: probed with the first host's key, at the state's address.
    let mut state = State::new();
    std::fs::copy(a.path("client_key.pub"), b.path("authorized_keys")).unwrap();
    state.upsert_host(state_host(&b.id(), "", None));

    let t = SshTransport::new(SshOptions::default()).unwrap();
    let reality = probe::probe_all(&s, &state, &t, &ProbeOptions::default()).await;
    let ids: Vec<HostId> = reality.hosts.iter().map(|h| h.id.clone()).collect();
    let dead_id = HostId::new(dead_addr, dead_port);
    let mut want = vec![a.id(), b.id(), dead_id.clone()];
    want.sort();
    assert_eq!(ids, want, "all hosts, sorted");

    let fa = reality.facts(&a.id()).expect("a reached");
    let machine_id = std::fs::read_to_string("/etc/machine-id").unwrap();
    assert_eq!(fa.machine_id, machine_id.trim());
    assert_eq!(fa.host_key, a.host_fingerprint());
    assert!(
        fa.host_public_key
            .as_deref()
            .unwrap()
            .starts_with("ssh-ed25519 ")
    );
    assert!(!fa.arch.is_empty() && !fa.hostname.is_empty() && !fa.os.is_empty());
    if !Path::new("/usr/local/bin/k0s").exists() {
        assert_eq!(fa.k0s_version, None);
        assert_eq!(fa.status, None);
        assert!(fa.view.is_none());
    }
    assert!(
        reality.facts(&b.id()).is_some(),
        "{:?}",
        reality.get(&b.id())
    );
    match reality.get(&dead_id) {
        Some(Probe::Unreachable { error }) => {
            assert!(error.contains("Connection refused"), "{error}")
        }
        other => panic!("expected unreachable, got {other:?}"),
    }
    assert_eq!(a.accepted_logins(), 1);
    assert_eq!(b.accepted_logins(), 1);

    // The saved probe reads back identically.
    let dir = tempfile::tempdir().unwrap();
    probe::save(&reality, &dir.path().join("r.json")).unwrap();
    assert_eq!(probe::load(&dir.path().join("r.json")).unwrap(), reality);
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn changed_key_is_reported_and_replace_accepts_it() {
    require_lab!();
    let a = Sshd::start();
    let s = spec(vec![a.host(Role::Controller, 1)]);
    let mut state = State::new();
    // Recorded: some other host's key.
    let other = tempfile::tempdir().unwrap();
    keygen(&other.path().join("k"));
    let text = std::fs::read_to_string(other.path().join("k.pub")).unwrap();
    let old_key: String = text
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let old_fp = k0sform::ssh_key::fingerprint(&old_key).unwrap();
    state.upsert_host(state_host(&a.id(), &old_fp, Some(old_key)));

    let t = SshTransport::new(SshOptions::default()).unwrap();
    let r = probe::probe_all(&s, &state, &t, &ProbeOptions::default()).await;
    assert_eq!(
        r.get(&a.id()),
        Some(&Probe::HostKeyChanged {
            expected: old_fp.clone(),
            offered: a.host_fingerprint(),
            bastion: None,
        })
    );
    assert_eq!(
        a.accepted_logins(),
        0,
        "nothing ran on a host with a changed key"
    );
    t.close_all().await;

    let t = SshTransport::new(SshOptions::default()).unwrap();
    let opts = ProbeOptions {
        replace: vec![a.address.clone()],
        ..Default::default()
    };
    let r = probe::probe_all(&s, &state, &t, &opts).await;
    assert_eq!(
        r.facts(&a.id()).map(|f| f.host_key.clone()),
        Some(a.host_fingerprint())
    );
    t.close_all().await;

    // An older state with only the fingerprint: first contact, then compared.
    let mut state2 = State::new();
    state2.upsert_host(state_host(&a.id(), &old_fp, None));
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let r = probe::probe_all(&s, &state2, &t, &ProbeOptions::default()).await;
    assert!(
        matches!(r.get(&a.id()), Some(Probe::HostKeyChanged { .. })),
        "{r:?}"
    );
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn excluded_hosts_are_not_contacted() {
    require_lab!();
    let a = Sshd::start();
    let s = spec(vec![a.host(Role::Controller, 1)]);
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let opts = ProbeOptions {
        exclude: vec![a.id().to_string()],
        ..Default::default()
    };
    let r = probe::probe_all(&s, &State::new(), &t, &opts).await;
    assert!(r.hosts.is_empty());
    assert_eq!(a.accepted_logins(), 0);
}

// ---------------------------------------------------------------------------------------------
// Part 2: the lab

fn lab_host_spec(lab: &lab::Lab, name: &str, role: Role, index: usize) -> HostSpec {
    let h = lab.host(name);
    let mut t = SshTarget::new(h.address.clone(), h.port);
    t.key_path = Some(lab.key_path());
    HostSpec::new(role, t, index)
}

fn lab_id(lab: &lab::Lab, name: &str) -> HostId {
    let h = lab.host(name);
    HostId::new(h.address, h.port)
}

fn count(log: &str, what: &str) -> usize {
    log.matches(what).count()
}

/// (connections, commands) seen by the host's sshd so far.
fn sshd_counts(lab: &lab::Lab, name: &str) -> (usize, usize) {
    let log = lab.sshd_log(name);
    (
        count(&log, "Accepted publickey"),
        count(&log, "Starting session"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn lab_fresh_host_is_reached_and_looks_fresh() {
    require_lab!();
    let lab = lab::Lab::create(&[("c1", "controller")]);
    let s = spec(vec![lab_host_spec(&lab, "c1", Role::Controller, 1)]);
    let before = sshd_counts(&lab, "c1");
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let r = probe::probe_all(&s, &State::new(), &t, &ProbeOptions::default()).await;
    t.close_all().await;

    let host = lab.host("c1");
    let f = r
        .facts(&lab_id(&lab, "c1"))
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(f.machine_id, host.machine_id);
    assert_eq!(f.hostname, "c1");
    assert_eq!(f.host_key, host.host_key_fingerprint);
    assert_eq!(f.k0s_version, None);
    assert_eq!(f.k0s_binary_sha256, None);
    assert_eq!(f.service, None);
    assert_eq!(f.status, None);
    assert_eq!(f.config_sha256, None);
    assert!(!f.has_etcd_data);
    assert!(f.view.is_none());
    let after = sshd_counts(&lab, "c1");
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 1),
        "one connection and one command"
    );
}

/// Bootstrap `first`, join the other controllers and the worker through tokens, as a user would.
fn form_cluster_by_hand(lab: &lab::Lab, first: &str, controllers: &[&str], workers: &[&str]) {
    let ready = |h: &str| {
        let o = lab.ssh(h, "k0s kubectl get --raw=/readyz");
        o.status.success() && lab::stdout(&o) == "ok"
    };
    lab.install_double(first);
    lab.ssh_ok(first, "k0s install controller && k0s start");
    assert!(
        lab.wait_until(Duration::from_secs(60), || ready(first)),
        "{first} not ready"
    );
    let join = |h: &str, role: &str| {
        lab.install_double(h);
        let token = lab.ssh_ok(
            first,
            &format!("k0s token create --role {role} --expiry 1h"),
        );
        lab.ssh_ok(
            h,
            &format!(
                "mkdir -p /etc/k0s && echo {} > /etc/k0s/k0stoken && chmod 600 /etc/k0s/k0stoken \
                 && k0s install {role} --token-file /etc/k0s/k0stoken && k0s start",
                token.trim()
            ),
        );
    };
    for c in controllers {
        join(c, "controller");
        assert!(
            lab.wait_until(Duration::from_secs(60), || ready(c)),
            "{c} not ready"
        );
    }
    for w in workers {
        join(w, "worker");
    }
    for w in workers {
        let seen = lab.wait_until(Duration::from_secs(60), || {
            let o = lab.ssh(first, "k0s kubectl get nodes -o json");
            lab::stdout(&o).contains(&format!("\"name\": \"{w}\""))
                || lab::stdout(&o).contains(&format!("\"name\":\"{w}\""))
        });
        assert!(seen, "worker {w} never registered");
    }
}

/// etcd's own member list on `host` (name → hex ID), independent of k0s and the EtcdMember objects.
fn etcd_member_ids(lab: &lab::Lab, host: &str) -> std::collections::BTreeMap<String, u64> {
    let addr = lab.address(host);
    let out = lab.exec_ok(
        host,
        &format!("ETCDCTL_API=3 etcdctl --endpoints=http://{addr}:2379 member list"),
    );
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(", ").collect();
            (
                f[2].to_string(),
                u64::from_str_radix(f[0].trim(), 16).unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn lab_cluster_view_is_gathered_from_every_controller() {
    require_lab!();
    let lab = lab::Lab::create(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
        ("w1", "worker"),
    ]);
    form_cluster_by_hand(&lab, "c1", &["c2", "c3"], &["w1"]);
    let truth_ids = etcd_member_ids(&lab, "c1");
    assert_eq!(truth_ids.len(), 3, "{truth_ids:?}");
    let truth_uid = lab
        .ssh_ok(
            "c2",
            "k0s kubectl get namespace kube-system -o jsonpath={.metadata.uid}",
        )
        .trim()
        .to_string();
    assert!(!truth_uid.is_empty());

    let s = spec(vec![
        lab_host_spec(&lab, "c1", Role::Controller, 1),
        lab_host_spec(&lab, "c2", Role::Controller, 2),
        lab_host_spec(&lab, "c3", Role::Controller, 3),
        lab_host_spec(&lab, "w1", Role::Worker, 4),
    ]);
    let names = ["c1", "c2", "c3", "w1"];
    let before: Vec<(usize, usize)> = names.iter().map(|n| sshd_counts(&lab, n)).collect();
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let opts = ProbeOptions {
        parallelism: 2,
        ..Default::default()
    };
    let r = probe::probe_all(&s, &State::new(), &t, &opts).await;
    t.close_all().await;
    for (n, b) in names.iter().zip(&before) {
        let a = sshd_counts(&lab, n);
        assert_eq!(
            (a.0 - b.0, a.1 - b.1),
            (1, 1),
            "{n}: one connection, one command"
        );
    }

    for c in ["c1", "c2", "c3"] {
        let f = r
            .facts(&lab_id(&lab, c))
            .unwrap_or_else(|| panic!("{c}: {r:?}"));
        let host = lab.host(c);
        assert_eq!(f.machine_id, host.machine_id);
        assert_eq!(f.host_key, host.host_key_fingerprint);
        assert_eq!(f.k0s_version.clone().unwrap(), "v1.33.4+k0s.0");
        assert_eq!(f.service, Some(k0sform::reality::ServiceKind::Controller));
        assert!(f.has_etcd_data, "{c}");
        let st = f
            .status
            .as_ref()
            .unwrap_or_else(|| panic!("{c} not running"));
        assert_eq!(st.role, "controller");
        assert!(st.pid > 0);
        let v = f.view.as_ref().unwrap_or_else(|| panic!("{c}: no view"));
        assert!(v.errors.is_empty(), "{c}: {:?}", v.errors);
        assert_eq!(v.cluster_uid.as_deref(), Some(truth_uid.as_str()), "{c}");
        let members: Vec<(String, String, u64)> = v
            .members
            .iter()
            .map(|m| {
                let id = m
                    .member_id
                    .as_deref()
                    .unwrap_or_else(|| panic!("{c}: {m:?} has no ID"));
                (
                    m.name.clone(),
                    m.peer_url.clone(),
                    u64::from_str_radix(id, 16).unwrap(),
                )
            })
            .collect();
        let want: Vec<(String, String, u64)> = ["c1", "c2", "c3"]
            .iter()
            .map(|n| {
                (
                    n.to_string(),
                    format!("http://{}:2380", lab.address(n)),
                    truth_ids[*n],
                )
            })
            .collect();
        assert_eq!(members, want, "{c}'s member list");
        let nodes: Vec<(&str, bool)> = v.nodes.iter().map(|n| (n.name.as_str(), n.ready)).collect();
        assert_eq!(nodes, [("w1", true)], "{c}");
        assert_eq!(v.control_nodes, ["c1", "c2", "c3"], "{c}");
    }
    let w = r.facts(&lab_id(&lab, "w1")).expect("w1 reached");
    assert_eq!(w.status.as_ref().map(|s| s.role.as_str()), Some("worker"));
    assert_eq!(w.service, Some(k0sform::reality::ServiceKind::Worker));
    assert!(w.view.is_none(), "workers are not asked for a view");
}

#[tokio::test(flavor = "multi_thread")]
async fn lab_sudo_user_through_a_bastion() {
    require_lab!();
    let lab = lab::Lab::create_with(
        &[("b1", "bastion"), ("c1", "controller")],
        lab::LabOptions::default().sudo_user("c1").bastion("b1"),
    );
    lab.install_double("c1");
    // Only root may run or read the binary: its version and sha256 prove the probe ran via sudo.
    lab.exec_ok("c1", "chmod 700 /usr/local/bin/k0s");
    let plain = lab.ssh_as(lab::SUDO_USER, "c1", "/usr/local/bin/k0s version");
    assert!(
        !plain.status.success(),
        "k0slab must not run the binary without sudo"
    );
    let mut h = lab_host_spec(&lab, "c1", Role::Controller, 1);
    h.ssh.user = lab::SUDO_USER.to_string();
    let b = lab.host("b1");
    let mut bastion = SshTarget::new(b.address.clone(), b.port);
    bastion.key_path = Some(lab.key_path());
    bastion.host_key = Some(b.host_key_fingerprint.clone());
    h.ssh.bastion = Some(Box::new(bastion));
    let s = spec(vec![h]);
    let before_b = sshd_counts(&lab, "b1");
    let before_c = sshd_counts(&lab, "c1");
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let r = probe::probe_all(&s, &State::new(), &t, &ProbeOptions::default()).await;
    t.close_all().await;

    let f = r
        .facts(&lab_id(&lab, "c1"))
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(f.machine_id, lab.host("c1").machine_id);
    assert_eq!(f.host_key, lab.host("c1").host_key_fingerprint);
    assert_eq!(f.k0s_version.clone().unwrap(), "v1.33.4+k0s.0");
    assert!(f.k0s_binary_sha256.is_some());
    assert_eq!(
        sshd_counts(&lab, "b1").0 - before_b.0,
        1,
        "one hop through the bastion"
    );
    let after_c = sshd_counts(&lab, "c1");
    assert_eq!((after_c.0 - before_c.0, after_c.1 - before_c.1), (1, 1));
    assert!(lab.sshd_log("c1").contains("Accepted publickey for k0slab"));
}

/// Issue 14, High 2: a state file must not run commands on the machine running k0sform. A
/// state-only host's recorded `access.ssh.options` carries a ProxyCommand (and friends): the
/// probe drops them (only an allow-list is taken from a state), says so, and reaches the host
/// directly; recorded access that breaks the spec's rules (a data dir that is not absolute, an
/// address that is an ssh flag) means the host is not contacted at all.
#[tokio::test(flavor = "multi_thread")]
async fn state_access_cannot_run_local_commands() {
    require_lab!();
    let a = Sshd::start();
    let b = Sshd::start();
    let c = Sshd::start();
    let s = spec(vec![a.host(Role::Controller, 1)]);
    std::fs::copy(a.path("client_key.pub"), b.path("authorized_keys")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("x");
    let hostile_config = dir.path().join("ssh_config");
    std::fs::write(
        &hostile_config,
        format!(
            "Host *\n  LocalCommand id > {}\n  PermitLocalCommand yes\n",
            marker.display()
        ),
    )
    .unwrap();

    let mut state = State::new();
    let mut ssh = b.target("root");
    ssh.key_path = Some(a.path("client_key"));
    for (k, v) in [
        ("ProxyCommand", format!("sh -c 'id > {}'", marker.display())),
        ("LocalCommand", format!("id > {}", marker.display())),
        ("PermitLocalCommand", "yes".to_string()),
        (
            "KnownHostsCommand",
            format!("/bin/sh -c 'id > {}'", marker.display()),
        ),
        ("ServerAliveInterval", "5".to_string()),
    ] {
        ssh.options.insert(k.to_string(), v);
    }
    ssh.config_path = Some(hostile_config.clone());
    let mut hb = state_host(&b.id(), "", None);
    hb.access = Some(default_access(ssh));
    state.upsert_host(hb.clone());
    // c: recorded access that the spec's rules refuse.
    let mut hc = state_host(&c.id(), "", None);
    hc.access = Some(HostAccess {
        ssh: c.target("root"),
        k0s_install_path: "/usr/local/bin/k0s".into(),
        data_dir: "var/lib/k0s; id > /tmp/x".into(),
        kubelet_root_dir: None,
        cluster_address: None,
    });
    state.upsert_host(hc);

    // Recorded k0s paths that cannot be k0s's (issue 28): that host is not contacted either.
    for (field, bin, data_dir, why) in [
        (
            "dataDir",
            "/usr/local/bin/k0s",
            "/",
            "`/` is the root directory",
        ),
        (
            "k0sInstallPath",
            "/etc/shadow",
            "/var/lib/k0s",
            "is under /etc",
        ),
    ] {
        let mut hd = hb.clone();
        let a = hd.access.as_mut().expect("access");
        a.k0s_install_path = bin.into();
        a.data_dir = data_dir.into();
        let e = k0sform::state::access::reach(&hd, &s).expect_err("refused");
        let e = e.join("\n");
        assert!(
            e.contains(&format!("access.{field}: ")) && e.contains(why),
            "{e}"
        );
    }
    let reach = k0sform::state::access::reach(&hb, &s).expect("b's access is valid");
    let dropped = reach.dropped.join("\n");
    for option in [
        "ProxyCommand",
        "LocalCommand",
        "PermitLocalCommand",
        "KnownHostsCommand",
    ] {
        assert!(dropped.contains(&format!("options.{option}")), "{dropped}");
        assert!(!reach.ssh.options.contains_key(option));
    }
    assert!(dropped.contains("configPath"), "{dropped}");
    assert_eq!(
        reach
            .ssh
            .options
            .get("ServerAliveInterval")
            .map(String::as_str),
        Some("5")
    );

    let t = SshTransport::new(SshOptions::default()).unwrap();
    let reality = probe::probe_all(&s, &state, &t, &ProbeOptions::default()).await;
    t.close_all().await;
    assert!(!marker.exists(), "a command from the state ran locally");
    assert!(
        reality.facts(&b.id()).is_some(),
        "{:?}",
        reality.get(&b.id())
    );
    match reality.get(&c.id()) {
        Some(Probe::Unreachable { error }) => {
            assert!(
                error.contains("not contacted") && error.contains("dataDir"),
                "{error}"
            )
        }
        other => panic!("expected c not contacted, got {other:?}"),
    }
    assert_eq!(c.accepted_logins(), 0);
}

/// Issue 14, item 3: a host known only to the state is reached through the bastion its recorded
/// `access` names, held to the same rules as the host's own access (a ProxyCommand recorded for
/// the bastion is dropped and never runs) and to the bastion key the state records: a bastion
/// offering another key is `HostKeyChanged` naming the bastion, with nothing run on the host;
/// the recorded key lets the probe through and reports the bastion's key.
#[tokio::test(flavor = "multi_thread")]
async fn state_only_host_through_a_recorded_bastion_is_checked() {
    require_lab!();
    use k0sform::state::BastionState;
    let a = Sshd::start();
    let b = Sshd::start();
    let bastion = Sshd::start();
    let other = Sshd::start();
    let s = spec(vec![a.host(Role::Controller, 1)]);
    std::fs::copy(a.path("client_key.pub"), b.path("authorized_keys")).unwrap();
    std::fs::copy(a.path("client_key.pub"), bastion.path("authorized_keys")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("x");

    let mut hop = bastion.target("root");
    hop.key_path = Some(a.path("client_key"));
    hop.options.insert(
        "ProxyCommand".into(),
        format!("sh -c 'id > {}'", marker.display()),
    );
    let mut ssh = b.target("root");
    ssh.key_path = Some(a.path("client_key"));
    ssh.bastion = Some(Box::new(hop));
    let mut hb = state_host(&b.id(), "", None);
    hb.access = Some(default_access(ssh));
    let mut state = State::new();
    state.upsert_host(hb.clone());
    let reach = k0sform::state::access::reach(&hb, &s).expect("valid access");
    assert!(
        reach
            .dropped
            .iter()
            .any(|d| d.contains("access.ssh.bastion.options.ProxyCommand")),
        "{:?}",
        reach.dropped
    );
    assert!(
        reach
            .ssh
            .bastion
            .as_ref()
            .is_some_and(|b| b.options.is_empty())
    );

    // The state records another key for the bastion (that of another server).
    let bastion_id = HostId::new(bastion.address.clone(), bastion.port);
    let record = |key: String| BastionState {
        address: bastion.address.clone(),
        port: bastion.port,
        host_key: k0sform::ssh_key::fingerprint(&key).unwrap(),
        host_public_key: key,
    };
    state.upsert_bastion(record(other.host_public_key()));
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let reality = probe::probe_all(&s, &state, &t, &ProbeOptions::default()).await;
    t.close_all().await;
    assert_eq!(
        reality.get(&b.id()),
        Some(&Probe::HostKeyChanged {
            expected: other.host_fingerprint(),
            offered: bastion.host_fingerprint(),
            bastion: Some(bastion_id.clone()),
        })
    );
    assert_eq!(
        b.accepted_logins(),
        0,
        "the host behind the bastion was reached"
    );
    assert!(!marker.exists(), "a command from the state ran locally");

    // The bastion's own key recorded: reached, and the key reported.
    state.upsert_bastion(record(bastion.host_public_key()));
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let reality = probe::probe_all(&s, &state, &t, &ProbeOptions::default()).await;
    t.close_all().await;
    let f = reality
        .facts(&b.id())
        .unwrap_or_else(|| panic!("{:?}", reality.get(&b.id())));
    assert_eq!(f.bastions.len(), 1);
    assert_eq!(f.bastions[0].bastion, bastion_id);
    assert_eq!(f.bastions[0].host_key, bastion.host_fingerprint());
    assert!(!marker.exists(), "a command from the state ran locally");
}

/// Issue 28, item 2: `openssh: true` in a state's recorded access (the host's or a bastion's)
/// is not honoured. It let ssh_config pick the port and login and took any alias as the
/// address; a host known only to the state is reached as an `ssh:` host at its recorded
/// address, port and user, and the plan says so.
#[test]
fn recorded_openssh_is_not_honoured() {
    let s = spec(vec![HostSpec::new(
        Role::Controller,
        SshTarget::new("10.0.0.1", 22),
        1,
    )]);
    let mut hop = SshTarget::new("10.0.0.2", 22);
    hop.openssh = true;
    let mut ssh = SshTarget::new("10.0.0.3", 22);
    ssh.user = "ubuntu".into();
    ssh.openssh = true;
    ssh.bastion = Some(Box::new(hop));
    let mut h = state_host(&HostId::new("10.0.0.3", 22), "", None);
    h.access = Some(default_access(ssh));
    let reach = k0sform::state::access::reach(&h, &s).expect("valid access");
    assert!(!reach.ssh.openssh);
    assert!(reach.ssh.bastion.as_ref().is_some_and(|b| !b.openssh));
    assert_eq!(
        reach.dropped,
        [
            "access.ssh.openssh is ignored: a state cannot make an address an ssh_config alias; 10.0.0.3 is reached as user ubuntu on port 22",
            "access.ssh.bastion.openssh is ignored: a state cannot make an address an ssh_config alias; 10.0.0.2 is reached as user root on port 22",
        ]
    );
}
