//! Issue 28, items 2 and 5: addresses and lock holders from files anyone may edit.

use super::*;

/// An address that, printed raw, moves up a line, erases it and claims there is nothing to do.
const ERASING: &str =
    "\u{1b}[1A\u{1b}[2KNo changes. Your infrastructure matches the configuration.";

/// One host on a closed loopback port.
const CLOSED_PORT_SPEC: &str = "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata: {name: t}\nspec:\n  hosts:\n  - role: single\n    ssh: {address: 127.0.0.1, port: 9, keyPath: /dev/null}\n  k0s: {version: v1.33.4+k0s.0}\n";

/// A folder with a spec (one host on a closed loopback port; release lookups go to a closed
/// port too) and a state whose `field` is `address`: a host known only to the state, with
/// recorded access through a bastion, a recorded bastion and an unfinished step.
fn hostile_state(field: &str, address: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("k0sctl.yaml"), CLOSED_PORT_SPEC).expect("spec");
    let target = |address: &str| {
        serde_json::json!({"address": address, "port": 22, "user": "root", "key_path": null,
            "config_path": null, "options": {}, "bastion": null, "host_key": null, "openssh": false})
    };
    let mut access = target("10.0.0.9");
    access["bastion"] = target("10.0.0.1");
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
    let mut state = serde_json::json!({
        "format_version": 3, "lineage": "2b7e3c9a-0d4f-4e1a-9c55-6f1d2e3a4b5c", "serial": 7,
        "tool_version": "0.1.0",
        "hosts": [{"address": "10.0.0.9", "port": 22, "role": "worker",
            "machine_id": "0123456789abcdef0123456789abcdef",
            "host_key": "SHA256:Qx1k5c2b0GdqKxH0m1c3cZ3pY8mNqS7a0Uo1p2q3r4",
            "access": {"ssh": access, "k0s_install_path": "/usr/local/bin/k0s",
                "data_dir": "/var/lib/k0s"}}],
        "intents": [{"step": "reset w", "address": "10.0.0.9", "port": 22, "kind": "reset_host",
            "started_at": "2026-12-01T00:00:00Z"}],
        "bastions": [{"address": "10.0.0.1", "port": 22,
            "host_key": k0sform::ssh_key::fingerprint(key).expect("key"), "host_public_key": key}]
    });
    let mut at = &mut state;
    for part in field.split('.') {
        at = match part.split_once('[') {
            Some((name, index)) => {
                &mut at[name][index.trim_end_matches(']').parse::<usize>().expect("index")]
            }
            None => &mut at[part],
        };
    }
    *at = serde_json::Value::String(address.to_string());
    let path = dir.path().join("k0sform.state.json");
    std::fs::write(&path, serde_json::to_string_pretty(&state).expect("json")).expect("state");
    (dir, path)
}

/// No terminal control of the input reached the output: it shows as `\x1b`.
#[track_caller]
fn no_raw_controls(o: &std::process::Output) {
    let all = format!("{}{}", stdout(o), stderr(o));
    assert!(
        !all.contains(['\u{1b}', '\u{7}', '\u{9b}']),
        "a control character reached the output: {all:?}"
    );
}

/// A state names a host by an address that carries terminal controls, shell syntax or an ssh
/// option: every command that reads the state refuses it, naming the file and the field, shows
/// the address escaped, and leaves the file as it was (no rewrite, no backup). Addresses in
/// the state's other address fields are held to the same rule.
#[test]
fn hostile_state_addresses_are_refused_naming_file_and_field() {
    let commands: &[&[&str]] = &[
        &["plan"],
        &["plan", "-destroy"],
        &["apply", "-auto-approve"],
        &["destroy", "-auto-approve"],
        &["show"],
        &["state", "list"],
        &["state", "show", "10.0.0.9"],
        &["state", "rm", "10.0.0.9"],
        &["state", "mv", "10.0.0.9", "10.0.0.8"],
        &["state", "pull"],
    ];
    for address in [
        ERASING,
        "x'$(touch${IFS}/tmp/k0sform-pwned)'",
        "-oProxyCommand=id",
        "10.0.0.1; reboot",
        "%h.example.com",
    ] {
        let (dir, path) = hostile_state("hosts[0].address", address);
        let before = std::fs::read(&path).expect("read");
        for args in commands {
            let o = k0sform()
                .current_dir(dir.path())
                .env("K0SFORM_K0S_DOWNLOAD_URL", "http://127.0.0.1:9/releases")
                .env("K0SFORM_K0S_VERSION_URL", "http://127.0.0.1:9")
                .args(*args)
                .output()
                .expect("runs");
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert!(
                err.contains("state file k0sform.state.json is not a valid k0sform state: hosts[0].address: `")
                    && err.contains("is neither an IP address nor a DNS name"),
                "{args:?}: {err}"
            );
            no_raw_controls(&o);
            if address == ERASING {
                assert!(err.contains("\\x1b[1A\\x1b[2KNo changes"), "{err}");
            }
            assert_eq!(
                std::fs::read(&path).expect("read"),
                before,
                "{args:?} rewrote the state"
            );
            assert!(!dir.path().join("k0sform.state.json.backup").exists());
        }
    }
    for field in [
        "hosts[0].access.ssh.address",
        "hosts[0].access.ssh.bastion.address",
        "bastions[0].address",
        "intents[0].address",
    ] {
        let (dir, _) = hostile_state(field, ERASING);
        let o = k0sform()
            .current_dir(dir.path())
            .args(["state", "list"])
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(1), "{field}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("{field}: `\\x1b[1A")),
            "{}",
            stderr(&o)
        );
        no_raw_controls(&o);
    }
    // The same file with plain addresses is a good state: the refusals above are the addresses'.
    let (dir, _) = hostile_state("hosts[0].address", "w1.example.com");
    let o = k0sform()
        .current_dir(dir.path())
        .args(["state", "list"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("w1.example.com"), "{}", stdout(&o));
}

/// A saved plan is a file anyone may edit: an address in it (a step's host, an identity) is
/// refused by `show`, `graph` and `apply` (exit 5), naming the file and the field, and shown
/// escaped, even when the file is sealed again. Nothing is run and no state is written.
#[test]
fn hostile_saved_plan_addresses_are_refused_naming_file_and_field() {
    use k0sform::hostid::HostId;
    use k0sform::plan::{Plan, SavedPlan};
    use k0sform::reality::{HostFacts, HostReality, Probe, Reality};
    let plan: Plan = serde_json::from_value(serde_json::json!({
        "format_version": 1, "cluster_name": "t", "cluster_uid": null,
        "cluster_action": {"kind": "existing"}, "refresh_only": false, "outside_changes": [],
        "changes": [], "drift": [],
        "steps": [{"id": 0, "host": {"address": "10.0.0.9", "port": 22},
            "kind": {"kind": "drain", "node": "w", "via": {"address": "10.0.0.1", "port": 22}},
            "after": []}],
        "etcd": {"members_before": 3, "members_after": 3, "min_healthy": 3, "quorum": 2},
        "warnings": [], "state_serial": 7
    }))
    .expect("plan");
    let reality = Reality {
        hosts: vec![HostReality {
            id: HostId::new("10.0.0.9", 22),
            probe: Probe::Reached(Box::new(HostFacts {
                machine_id: "0123456789abcdef0123456789abcdef".into(),
                host_key: "SHA256:abc".into(),
                ..HostFacts::default()
            })),
        }],
    };
    let good = SavedPlan::new(plan, &k0sform::state::State::default(), "ab12", &reality);
    type Edit = fn(&mut SavedPlan, &str);
    let edits: [(&str, Edit); 3] = [
        ("plan.steps[0].host.address", |s, a| {
            s.plan.steps[0].host.address = a.into()
        }),
        ("plan.steps[0].kind.via.address", |s, a| {
            s.plan.steps[0].kind = serde_json::from_value(serde_json::json!(
                {"kind": "drain", "node": "w", "via": {"address": a, "port": 22}}))
            .expect("kind")
        }),
        ("identities[0].host.address", |s, a| {
            s.identities[0].host.address = a.into()
        }),
    ];
    for (field, edit) in edits {
        let dir = tempfile::tempdir().expect("tmp");
        let mut saved = good.clone();
        edit(&mut saved, ERASING);
        saved.seal();
        std::fs::write(dir.path().join("plan.json"), saved.to_json()).expect("write");
        std::fs::write(dir.path().join("k0sctl.yaml"), CLOSED_PORT_SPEC).expect("spec");
        for args in [
            &["show", "plan.json"][..],
            &["graph", "plan.json"],
            &["apply", "plan.json"],
        ] {
            let o = k0sform()
                .current_dir(dir.path())
                .env("K0SFORM_K0S_DOWNLOAD_URL", "http://127.0.0.1:9/releases")
                .env("K0SFORM_K0S_VERSION_URL", "http://127.0.0.1:9")
                .args(args)
                .output()
                .expect("runs");
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(5), "{args:?}: {err}");
            assert!(
                err.contains(&format!(
                    "plan.json: the saved plan is not valid: {field}: `\\x1b[1A\\x1b[2KNo changes"
                )),
                "{args:?}: {err}"
            );
            no_raw_controls(&o);
            assert!(!dir.path().join("k0sform.state.json").exists());
        }
    }
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("plan.json"), good.to_json()).expect("write");
    let o = k0sform()
        .current_dir(dir.path())
        .args(["show", "plan.json"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// The holder a lock file records is anyone's to write: `plan`, the `state` commands and
/// `force-unlock` name it with every field escaped, whether the lock is held (exit 4), the ID
/// does not match, or only a dead holder's record is left.
#[test]
fn hostile_lock_holder_fields_are_shown_escaped() {
    let dir = tempfile::tempdir().expect("tmp");
    let state = dir.path().join("s.json");
    let lock_path = dir.path().join("s.json.lock");
    let id = "id\u{1b}[2K";
    let holder = serde_json::json!({
        "id": id, "pid": std::process::id(), "host": "h\u{1b}]0;owned\u{7}",
        "user": "\u{1b}[1Aroot", "operation": "apply\u{1b}[2K\u{9b}31m",
        "started_at": "2026-12-01T00:00:00Z\u{1b}[8m"
    });
    std::fs::write(&lock_path, format!("{holder}\n")).expect("lock file");
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&lock_path)
        .expect("open");
    lock.try_lock().expect("flock");
    let run = |args: &[&str]| {
        k0sform()
            .args(["-c", "testdata/specs/valid/ha.yaml"])
            .arg("-state")
            .arg(&state)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("runs")
    };
    for (args, code) in [
        (&["plan"][..], 4),
        (&["state", "rm", "10.0.0.10"], 4),
        (&["state", "mv", "10.0.0.10", "10.0.0.20"], 4),
        (&["force-unlock", "other"], 1),
        (&["force-unlock", id], 4),
    ] {
        // `state rm|mv` need a state to lock.
        std::fs::write(
            &state,
            r#"{"format_version": 3, "lineage": "l", "serial": 1, "tool_version": "0.1.0"}"#,
        )
        .expect("state");
        let o = run(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        no_raw_controls(&o);
        assert!(stderr(&o).contains("\\x1b"), "{args:?}: {}", stderr(&o));
    }
    // The holder is gone (the OS freed its lock); its record is left and cleared by its ID.
    lock.unlock().expect("unlock");
    drop(lock);
    let o = run(&["force-unlock", id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    no_raw_controls(&o);
    assert!(
        stdout(&o).contains("lock id\\x1b[2K was left by pid"),
        "{}",
        stdout(&o)
    );
    assert_eq!(std::fs::read_to_string(&lock_path).expect("read"), "");
}
