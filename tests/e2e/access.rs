//! Reaching hosts safely: pinned and recorded host keys, bastions, sudo users, first contact,
//! encrypted keys, and proxy commands or addresses from a state that run nothing.

use super::*;

/// Issue 30: `ssh.hostKey` as k0sctl writes it (`<type> <base64>`, the key itself, compared
/// as text by rig's `StaticKeyCallback`) pins that key: a rebuilt worker pinned with another
/// host's key is refused and nothing changes; pinned with its new key it is replaced.
#[test]
fn host_key_pinned_in_k0sctl_form_accepts_only_that_key() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    bootstrap(&c);
    c.lab.wipe("w1");
    let key = |n: &str| {
        let pub_file = c
            .lab
            .dir()
            .join("hosts")
            .join(n)
            .join("ssh_host_ed25519_key.pub");
        let text = std::fs::read_to_string(pub_file).unwrap();
        text.split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let addr = c.lab.address("w1");
    let pin = |k: &str| {
        c.write_spec(&["c1", "w1"]);
        let spec = std::fs::read_to_string(&c.spec).unwrap();
        let at = format!("      address: {addr}\n");
        assert!(spec.contains(&at), "{spec}");
        std::fs::write(
            &c.spec,
            spec.replace(&at, &format!("{at}      hostKey: \"{k}\"\n")),
        )
        .unwrap();
    };
    let state_before = std::fs::read(&c.state).unwrap();
    pin(&key("c1"));
    c.run(&["apply", "-auto-approve"])
        .expect(3)
        .contains(&format!(
            "w1 ({addr}) offered another SSH host key than recorded"
        ));
    assert_eq!(std::fs::read(&c.state).unwrap(), state_before);
    assert!(c.host_snapshot("w1").trim_end().ends_with("stopped"));

    pin(&key("w1"));
    c.apply().contains("Apply complete");
    assert_eq!(
        c.state_host("w1").expect("w1")["host_key"],
        c.lab.host("w1").host_key_fingerprint.as_str()
    );
    c.eventually(30, "w1 Ready again", || {
        c.nodes("c1").get("w1") == Some(&true)
    });
}

/// Scenario 10: a non-root SSH user with sudo, and hosts reached through a bastion.
#[test]
fn sudo_user_and_bastion() {
    require_lab!();
    let c = Cluster::with(
        &[("b1", "bastion"), ("c1", "controller"), ("w1", "worker")],
        LabOptions::default()
            .sudo_user("c1")
            .sudo_user("w1")
            .bastion("b1"),
        SpecOptions {
            sudo_user: true,
            via_bastion: true,
            // Hooks run as the login user, not through sudo (as k0sctl's do).
            host_yaml: [(
                "w1".to_string(),
                "hooks:\n  install:\n    after: ['id -un > /tmp/k0sform-hook-user']\n".to_string(),
            )]
            .into(),
            ..SpecOptions::default()
        },
    );
    c.lab
        .exec_ok("c1", "printf 'count_starts 1\\n' > /etc/k0s-lab/k0s-knobs");
    bootstrap(&c);
    assert_one_cluster(&c, &["c1"], &["c1"]);
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    // w1's join waited on a Node watch run through sudo and the bastion, gone with its session.
    let starts = c.lab.exec_ok("c1", "cat /run/k0s-lab/starts");
    assert!(starts.contains("--watch-only"), "{starts}");
    assert_eq!(node_watches_on(&c, "c1"), Vec::<String>::new());
    assert_eq!(
        c.lab.exec_ok("w1", "cat /tmp/k0sform-hook-user"),
        format!("{}\n", lab::SUDO_USER)
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    // The hosts are reached only through the bastion: without it no controller answers, and
    // k0sform refuses to plan rather than take the cluster for gone.
    c.lab.power_off("b1");
    c.run(&["plan"])
        .expect(3)
        .contains(&c.lab.address("c1"))
        .contains("unreachable");
}

/// One controller, c1, reached only through the bastion b1.
fn controller_behind_bastion() -> Cluster {
    Cluster::with(
        &[("b1", "bastion"), ("c1", "controller")],
        LabOptions::default().bastion("b1"),
        SpecOptions {
            via_bastion: true,
            ..SpecOptions::default()
        },
    )
}

/// Issue 14, item 3: a bastion's host key is shown on first contact, refused unpinned with
/// `-trust-new-host-keys=false`, recorded in the state, checked on later runs (a rebuilt bastion
/// is refused with exit 3 naming it, nothing changes), and accepted again only with `-replace`
/// naming the bastion. A state from before bastions were recorded (format 2) still loads.
#[test]
fn bastion_host_key_is_recorded_and_checked() {
    require_lab!();
    let c = controller_behind_bastion();
    let b = c.lab.host("b1");
    let addr = b.address.clone();
    let old_fp = b.host_key_fingerprint.clone();
    assert!(old_fp.starts_with("SHA256:"), "{old_fp}");

    // First contact: shown, and refused on request.
    c.run(&["plan"])
        .expect(0)
        .contains(&format!(
            "bastion ({addr}): first contact: trusting {old_fp}"
        ))
        .contains("1 bastion host key to record");
    c.run(&["plan", "-trust-new-host-keys=false"])
        .expect(3)
        .contains(&format!("bastion {addr}: offers {old_fp}"));

    // Recorded by apply; quiet and strict from then on.
    bootstrap(&c);
    let st = c.state_json();
    assert_eq!(st["format_version"], 3);
    assert_eq!(st["bastions"][0]["address"], addr.as_str());
    assert_eq!(st["bastions"][0]["host_key"], old_fp.as_str());
    c.run(&["state", "list"])
        .expect(0)
        .contains(&format!("{addr}  {old_fp}"));
    let r = c.run(&["plan", "-detailed-exitcode", "-trust-new-host-keys=false"]);
    r.expect(0);
    assert!(!r.text().contains("first contact"), "{}", r.text());

    // A state written before bastions were recorded (format 2) loads: the bastion is a first
    // contact again.
    let mut v2 = c.state_json();
    v2["format_version"] = 2.into();
    v2.as_object_mut().unwrap().remove("bastions");
    let old_state = c.lab.dir().join("format2.state.json");
    std::fs::write(&old_state, serde_json::to_string_pretty(&v2).unwrap()).unwrap();
    c.run_with_state(&old_state, &["plan"])
        .expect(0)
        .contains(&format!(
            "bastion ({addr}): first contact: trusting {old_fp}"
        ));

    // The bastion is rebuilt (new host key): refused, naming it; the state is left alone.
    c.lab.wipe("b1");
    let new_fp = c.lab.host("b1").host_key_fingerprint;
    assert_ne!(new_fp, old_fp);
    let serial = c.state_serial();
    c.run(&["plan"])
        .expect(3)
        .contains(&format!("bastion {addr}"))
        .contains(&format!("{old_fp} recorded, {new_fp} offered"));
    c.run(&["apply", "-auto-approve"])
        .expect(3)
        .contains(&format!("bastion {addr}"));
    // -replace naming the host behind it does not accept the bastion's key.
    c.run(&["plan", "-replace", &c.lab.address("c1")])
        .expect(3)
        .contains(&format!("bastion {addr}"));
    assert_eq!(c.state_serial(), serial, "a refused run wrote the state");

    // -replace naming the bastion trusts the new key (shown) and records it.
    c.run(&["plan", "-replace", &addr])
        .expect(0)
        .contains(&format!(
            "bastion ({addr}): first contact: trusting {new_fp}"
        ));
    c.run(&["apply", "-auto-approve", "-replace", &addr])
        .expect(0);
    assert_eq!(c.state_json()["bastions"][0]["host_key"], new_fp.as_str());
    c.run(&["plan", "-detailed-exitcode", "-trust-new-host-keys=false"])
        .expect(0);
}

/// Issue 28, item 10: with `-trust-new-host-keys=false` a host whose key nothing records or
/// pins is refused (exit 3) right after the key exchange, before any command runs on it: its
/// sshd starts no session, and the probe does not get to generate /etc/k0s/k0sform-machine-id
/// on a host without a machine-id. By default the same host is trusted and probed.
#[test]
fn first_contact_is_refused_before_any_command_runs() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    let names = ["c1", "w1"];
    for n in names {
        // No machine-id anywhere: the probe would write one.
        c.lab.hide(n, &["/var/lib/dbus/machine-id"]);
        c.lab
            .exec_ok(n, ": > /etc/machine-id; rm -f /etc/k0s/k0sform-machine-id");
    }
    let generated = |n: &str| {
        c.lab
            .exec(n, "test -e /etc/k0s/k0sform-machine-id")
            .status
            .success()
    };
    let sessions = |n: &str| c.lab.sshd_log(n).matches("Starting session").count();
    let before: Vec<usize> = names.iter().map(|n| sessions(n)).collect();
    for args in [
        &["plan", "-trust-new-host-keys=false"][..],
        &["apply", "-auto-approve", "--trust-new-host-keys", "false"][..],
    ] {
        let r = c.run(args);
        r.expect(3).contains("-trust-new-host-keys=false");
        for n in names {
            let h = c.lab.host(n);
            r.contains(&format!("{}: offers {}", h.address, h.host_key_fingerprint));
        }
    }
    for (n, before) in names.iter().zip(&before) {
        assert!(
            c.lab.sshd_log(n).contains("Accepted publickey"),
            "{n}: {}",
            c.lab.sshd_log(n)
        );
        assert_eq!(
            sessions(n),
            *before,
            "a command ran on {n}:\n{}",
            c.lab.sshd_log(n)
        );
        assert!(!generated(n), "the probe ran on {n}");
    }
    assert!(!c.state.exists(), "a refused run wrote the state");

    // Trusted by default: the probe runs (and generates the id the checks above look for).
    c.run(&["plan"])
        .expect(0)
        .contains("first contact: trusting");
    for (n, before) in names.iter().zip(&before) {
        assert!(sessions(n) > *before, "{n}: no session");
        assert!(generated(n), "{n}: no generated machine-id");
    }
}

/// `kubeconfig` and `backup` take `-trust-new-host-keys` as `plan` does: with `=false`, a
/// controller (or its bastion) whose key the state does not record is refused with exit 3,
/// naming it and the key it offered, and nothing is printed or written; by default it is
/// trusted on first contact; with every key recorded, `=false` works.
#[test]
fn kubeconfig_and_backup_refuse_first_contact_on_request() {
    require_lab!();
    let c = controller_behind_bastion();
    bootstrap(&c);
    let (c1, b1) = (c.lab.host("c1"), c.lab.host("b1"));
    // States that do not record c1's key, or the bastion's.
    let mut no_host_key = c.state_json();
    let hosts = no_host_key["hosts"].as_array_mut().expect("hosts");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert_eq!(hosts[0]["address"], c1.address.as_str());
    hosts[0]["host_key"] = "".into();
    hosts[0]
        .as_object_mut()
        .expect("host")
        .remove("host_public_key");
    let mut no_bastion_key = c.state_json();
    assert_eq!(
        no_bastion_key["bastions"][0]["address"],
        b1.address.as_str()
    );
    no_bastion_key
        .as_object_mut()
        .expect("state")
        .remove("bastions");
    let write = |name: &str, v: &serde_json::Value| {
        let p = c.lab.dir().join(name);
        std::fs::write(&p, serde_json::to_string_pretty(v).expect("json")).expect("write");
        p
    };
    let no_host_key = write("no-host-key.state.json", &no_host_key);
    let no_bastion_key = write("no-bastion-key.state.json", &no_bastion_key);
    let backups = c.lab.dir().join("backups");
    std::fs::create_dir_all(&backups).expect("mkdir");
    let out = backups.to_str().expect("utf-8");
    let kubeconfig = &["kubeconfig", "-trust-new-host-keys=false"][..];
    let backup = &["backup", "-out", out, "--trust-new-host-keys", "false"][..];
    // Refused right after the key exchange: no command runs on c1 (issue 28, item 10).
    let sessions = || c.lab.sshd_log("c1").matches("Starting session").count();
    let before = sessions();

    for args in [kubeconfig, backup] {
        let r = c.run_with_state(&no_host_key, args);
        r.expect(3)
            .contains("-trust-new-host-keys=false")
            .contains(&format!(
                "{}: offers {}",
                c1.address, c1.host_key_fingerprint
            ));
        assert!(r.stdout.is_empty(), "{args:?} printed {}", r.stdout);
        let bastion = format!("bastion {}:", b1.address);
        assert!(!r.text().contains(&bastion), "{}", r.text());
        let r = c.run_with_state(&no_bastion_key, args);
        r.expect(3).contains(&format!(
            "bastion {}: offers {}",
            b1.address, b1.host_key_fingerprint
        ));
        assert!(r.stdout.is_empty(), "{args:?} printed {}", r.stdout);
    }
    assert_eq!(
        std::fs::read_dir(&backups).expect("backups").count(),
        0,
        "a refused backup wrote an archive"
    );
    assert_eq!(
        sessions(),
        before,
        "a command ran on c1:\n{}",
        c.lab.sshd_log("c1")
    );

    // By default the unrecorded key is trusted on first contact, as before.
    let r = c.run_with_state(&no_host_key, &["kubeconfig"]);
    r.expect(0);
    let (_, _, server, _) = kubeconfig_parts(&r.stdout);
    assert_eq!(server, format!("https://{}:6443", c1.address));

    // Every key recorded: -trust-new-host-keys=false changes nothing.
    let r = c.run(kubeconfig);
    r.expect(0);
    let (_, _, server, key) = kubeconfig_parts(&r.stdout);
    assert_eq!(server, format!("https://{}:6443", c1.address));
    assert!(key.len() > 100, "{}", r.stdout);
    let r = c.run(backup);
    r.expect(0);
    let (_, archive) = backup_line(&r);
    assert!(archive.starts_with(&backups), "{}", archive.display());
    assert_eq!(mode_of(&archive), 0o600);
}

/// A state file must not run commands here (issue 14, High 2): a removed host's recorded access
/// with a ProxyCommand is reached without it, and the plan says the option was ignored.
#[test]
fn state_recorded_proxy_command_is_ignored_and_reported() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    c.apply();
    c.write_spec(&["c1"]);
    let marker = c.lab.dir().join("pwned");
    let mut state = c.state_json();
    let addr = c.lab.address("w1");
    for h in state["hosts"].as_array_mut().expect("hosts") {
        if h["address"] == addr.as_str() {
            h["access"]["ssh"]["options"] = serde_json::json!({
                "ProxyCommand": format!("sh -c 'id > {}'", marker.display())
            });
        }
    }
    std::fs::write(
        &c.state,
        serde_json::to_string_pretty(&state).expect("json"),
    )
    .expect("write");
    c.run(&["plan"])
        .expect(0)
        .contains("access.ssh.options.ProxyCommand")
        .contains("is ignored: a state may only set")
        .contains("will be removed");
    assert!(!marker.exists(), "the state's ProxyCommand ran");
}

/// Issue 28, items 2 and 5, with an ssh client as old as CVE-2023-51385 (`testdata/old-ssh/ssh`,
/// first in PATH: it expands `%h` in a ProxyCommand to the destination as given and runs the line
/// with `sh -c`). A host behind a bastion is planned through it with the target named in the
/// ProxyCommand, never `%h`. A state that names a host by an address carrying a quote and
/// `$(…)`, recorded as an `openSSH:` host behind the bastion and logging in as another user (no
/// `ssh -G` first), is refused when read, naming the file and the field: the plan contacts no
/// host, nothing of the address runs here and the file is left as it was.
#[test]
fn hostile_state_address_runs_nothing_through_an_old_ssh_client() {
    require_lab!();
    let mut c = controller_behind_bastion();
    let stand_in = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/old-ssh");
    let log = c.lab.dir().join("old-ssh.log");
    let path = std::env::var("PATH").unwrap_or_default();
    c.env
        .push(("PATH".into(), format!("{}:{path}", stand_in.display())));
    c.env
        .push(("OLD_SSH_LOG".into(), log.display().to_string()));
    let c1 = c.lab.host("c1");
    c.run(&["plan"]).expect(0).contains("bootstrap");
    let seen = std::fs::read_to_string(&log).expect("the stand-in ran");
    assert!(
        seen.contains(&format!("-W '[{}]:{}'", c1.address, c1.port)),
        "{seen}"
    );
    assert!(!seen.contains("%h"), "{seen}");

    let marker = c.lab.dir().join("pwned");
    let hostile = format!("x'$(touch${{IFS}}{})'", marker.display());
    let loaded = k0sform::spec::load(std::slice::from_ref(&c.spec)).expect("spec");
    let mut ssh = loaded.spec.hosts[0].ssh.clone();
    assert!(ssh.bastion.is_some(), "c1 is behind the bastion");
    ssh.address = hostile.clone();
    ssh.port = 22;
    ssh.user = "k0sform".into();
    ssh.openssh = true;
    let mut state = k0sform::state::State::new();
    state.upsert_host(k0sform::state::HostState {
        node_name: Some("w9".into()),
        machine_id: "0123456789abcdef0123456789abcdef".into(),
        access: Some(k0sform::state::HostAccess {
            ssh,
            k0s_install_path: "/usr/local/bin/k0s".into(),
            data_dir: "/var/lib/k0s".into(),
            kubelet_root_dir: None,
            cluster_address: None,
        }),
        ..states::bare_host(
            &hostile,
            22,
            k0sform::spec::Role::Worker,
            &c1.host_key_fingerprint,
        )
    });
    let text = state.to_canonical_json().expect("json");
    std::fs::write(&c.state, &text).expect("write state");
    std::fs::remove_file(&log).expect("log");
    for args in [&["plan"][..], &["apply", "-auto-approve"]] {
        c.run(args)
            .expect(1)
            .contains(&format!(
                "state file {} is not a valid k0sform state: hosts[0].address: `x'$(touch",
                c.state.display()
            ))
            .contains("is neither an IP address nor a DNS name");
        assert!(
            !marker.exists(),
            "{args:?}: the state's address ran a command here"
        );
        assert!(!log.exists(), "{args:?}: ssh was started");
        assert_eq!(std::fs::read_to_string(&c.state).expect("state"), text);
    }
}

/// Issue 30: an encrypted key file (`ssh-keygen -N`) is unlocked as rig does it: the
/// passphrase is asked once per run, here through `SSH_ASKPASS` with
/// `SSH_ASKPASS_REQUIRE=force` standing in for the terminal; with no terminal, no askpass and
/// no agent holding it, connecting fails naming the host and the key; a wrong passphrase
/// fails after three answers, never hangs.
#[test]
fn encrypted_key_asks_for_its_passphrase_once_or_fails_naming_host_and_key() {
    require_lab!();
    let mut c = Cluster::new(C1_W1);
    let dir = c.lab.dir().to_path_buf();
    let key = dir.join("locked_ed25519");
    let ok = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "open sesame",
            "-C",
            "locked",
            "-f",
        ])
        .arg(&key)
        .status()
        .expect("ssh-keygen")
        .success();
    assert!(ok);
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    for h in ["c1", "w1"] {
        let ak = dir
            .join("hosts")
            .join(h)
            .join("authorized_keys")
            .join("root");
        let mut text = std::fs::read_to_string(&ak).unwrap();
        text.push_str(&public);
        std::fs::write(&ak, text).unwrap();
    }
    let spec = std::fs::read_to_string(&c.spec).unwrap();
    let lab_key = spec
        .lines()
        .find_map(|l| l.trim().strip_prefix("keyPath: "))
        .expect("keyPath")
        .to_string();
    std::fs::write(&c.spec, spec.replace(&lab_key, &key.display().to_string())).unwrap();

    // No terminal (stdin is /dev/null), no askpass, no agent.
    let addr = c.lab.address("c1");
    let r = c.run(&["plan"]);
    assert_ne!(r.code, 0, "{}", r.text());
    r.contains(&format!("the SSH key {} is encrypted", key.display()))
        .contains(&addr);

    // An askpass program that logs each question and answers.
    let askpass = dir.join("askpass.sh");
    let asked = dir.join("askpass.log");
    std::fs::write(
        &askpass,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\necho \"$K0SFORM_TEST_PASSPHRASE\"\n",
            asked.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &askpass,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    c.env
        .push(("SSH_ASKPASS".into(), askpass.display().to_string()));
    c.env.push(("SSH_ASKPASS_REQUIRE".into(), "force".into()));

    // A wrong passphrase: three questions, then a clear error.
    c.env
        .push(("K0SFORM_TEST_PASSPHRASE".into(), "wrong words".into()));
    let r = c.run(&["plan"]);
    assert_ne!(r.code, 0, "{}", r.text());
    r.contains(&format!(
        "the encrypted SSH key {} could not be unlocked",
        key.display()
    ));
    let questions = std::fs::read_to_string(&asked).unwrap();
    assert_eq!(questions.lines().count(), 3, "{questions}");
    std::fs::remove_file(&asked).unwrap();

    // The right one: asked once for both hosts, and the plan goes through.
    c.env
        .push(("K0SFORM_TEST_PASSPHRASE".into(), "open sesame".into()));
    c.run(&["plan"]).expect(0).contains("Plan:");
    let questions = std::fs::read_to_string(&asked).unwrap();
    assert_eq!(questions.lines().count(), 1, "{questions}");
    assert!(questions.contains("locked_ed25519"), "{questions}");
}
