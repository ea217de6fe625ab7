//! The `state` commands and the default state path.

use super::*;

/// After a command changed the state file at `path`: its backup is `before` (the file before
/// the change); the state now.
fn changed_keeping_a_backup(path: &Path, before: &[u8]) -> State {
    let backup = std::fs::read(format!("{}.backup", path.display())).unwrap();
    assert_eq!(backup, before, "the backup is the file before the change");
    LocalStore::new(path).load().unwrap().unwrap()
}

#[test]
fn state_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No state file: list says so (exit 0); show, rm and pull fail (exit 1).
    let (code, out, _) = k0sform(&["state", "list"], d);
    assert_eq!(
        (code, out.as_str()),
        (0, "No state at k0sform.state.json.\n")
    );
    for args in [
        &["state", "show", "127.0.0.1"][..],
        &["state", "rm", "127.0.0.1"],
        &["state", "pull"],
    ] {
        let (code, _, err) = k0sform(args, d);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains("no state file at k0sform.state.json"), "{err}");
    }

    // The default path is beside the spec: the first -c file's folder, or the folder itself.
    std::fs::create_dir(d.join("cluster")).unwrap();
    let path = d.join("cluster").join("k0sform.state.json");
    let s = sample_state();
    create(&path, &s);
    let expected_list = "\
ADDRESS         ROLE               NODE   MACHINE-ID    MEMBER-ID
127.0.0.1       controller         node1  01d12a9b7c0e  8e9e05c521646901
127.0.0.1:2222  controller+worker  node3  03d12a9b7c0e  8e9e05c521646903
127.0.0.2       controller         node2  02d12a9b7c0e  8e9e05c521646902
127.0.1.1       worker             node4  04d12a9b7c0e  -
";
    for c in ["cluster/k0sctl.yaml", "cluster"] {
        let (code, out, err) = k0sform(&["-c", c, "state", "list"], d);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, expected_list);
    }
    let (code, out, _) = k0sform(&["-state=cluster/k0sform.state.json", "state", "list"], d);
    assert_eq!((code, out.as_str()), (0, expected_list));

    // pull: the raw file.
    let (code, out, _) = k0sform(&["-c", "cluster/k0sctl.yaml", "state", "pull"], d);
    assert_eq!(code, 0);
    assert_eq!(out, std::fs::read_to_string(&path).unwrap());

    // show: every field; the port is needed when an address has several.
    let (code, out, _) = k0sform(
        &[
            "-state",
            path.to_str().unwrap(),
            "state",
            "show",
            "127.0.0.2",
        ],
        d,
    );
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "\
address:              127.0.0.2
port:                 22
role:                 controller
node name:            node2
machine-id:           02d12a9b7c0e4f8a1b2c3d4e5f6a7b8c9
host key:             SHA256:Qx2k5c2b0GdqKxH0m1c3cZ3pY8mNqS7a0Uo1p2q3r4
host public key:      ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI2Ht7q0n4b0dD4c2bA1 root@node2
etcd member ID:       8e9e05c521646902
etcd peer URL:        https://127.0.0.2:2380
k0s version:          v1.33.4+k0s.0
install flags sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
config sha256:        bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
unfinished steps:
  remove-member node2 (remove_member), started 2026-12-02T15:00:00Z
"
    );
    let state_arg = ["-state", path.to_str().unwrap()];
    let run = |extra: &[&str]| k0sform(&[&state_arg[..], extra].concat(), d);
    let (code, _, err) = run(&["state", "show", "127.0.0.1"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("127.0.0.1:22, 127.0.0.1:2222; give ADDR:PORT"),
        "{err}"
    );
    let (code, out, _) = run(&["state", "show", "127.0.0.1:2222"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("role:                 controller+worker\n"),
        "{out}"
    );
    let (code, _, err) = run(&["state", "show", "127.0.0.9"]);
    assert_eq!(code, 1);
    assert!(err.contains("host 127.0.0.9 is not in the state"), "{err}");
    assert!(
        err.contains("hosts in state: 127.0.0.1, 127.0.0.1:2222, 127.0.0.2, 127.0.1.1"),
        "{err}"
    );

    // rm: forgets the host under the lock, bumps the serial, keeps the backup.
    let before = std::fs::read(&path).unwrap();
    let (code, out, err) = run(&["state", "rm", "127.0.0.1:2222"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Removed host 127.0.0.1:2222 from the state (serial 1 -> 2)"),
        "{out}"
    );
    let now = changed_keeping_a_backup(&path, &before);
    assert_eq!(now.serial, 2);
    assert_eq!(now.hosts.len(), 3);
    assert!(now.hosts.iter().all(|h| h.port != 2222));
    let (code, _, err) = run(&["state", "rm", "127.0.0.1:2222"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("host 127.0.0.1:2222 is not in the state"),
        "{err}"
    );
    assert_eq!(LocalStore::new(&path).load().unwrap().unwrap().serial, 2);
    // The lock was released at the end of rm.
    LocalStore::new(&path).lock("test", Duration::ZERO).unwrap();

    // Remove every host: list says so.
    for a in ["127.0.0.1", "127.0.0.2", "127.0.1.1"] {
        assert_eq!(run(&["state", "rm", a]).0, 0);
    }
    assert_eq!(run(&["state", "list"]).1, "No hosts in state.\n");
}

/// Issue 16: `state mv OLD NEW` moves a record to a new address under the lock (serial + 1,
/// backup kept), keeping everything else; refused when OLD is unknown, NEW is taken or NEW is
/// not an address the spec would accept; nothing is written then.
#[test]
fn state_mv_moves_a_record_and_refuses_what_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = d.join("k0sform.state.json");
    let s = sample_state();
    create(&path, &s);
    let state_arg = ["-state", path.to_str().unwrap()];
    let run = |extra: &[&str]| k0sform(&[&state_arg[..], extra].concat(), d);

    let before = std::fs::read(&path).unwrap();
    let (code, out, err) = run(&["state", "mv", "127.0.0.2", "127.0.0.9"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Moved host 127.0.0.2 to 127.0.0.9 in the state (serial 1 -> 2)"),
        "{out}"
    );
    assert!(
        out.contains("etcd peer URL is still recorded as https://127.0.0.2:2380"),
        "{out}"
    );
    let now = changed_keeping_a_backup(&path, &before);
    assert_eq!(now.serial, 2);
    assert!(now.host(&HostId::new("127.0.0.2", 22)).is_none());
    let moved = now.host(&HostId::new("127.0.0.9", 22)).expect("moved");
    let old = s.host(&HostId::new("127.0.0.2", 22)).unwrap();
    assert_eq!(
        (
            &moved.node_name,
            &moved.machine_id,
            &moved.host_key,
            &moved.etcd
        ),
        (&old.node_name, &old.machine_id, &old.host_key, &old.etcd)
    );
    // Its unfinished step follows it.
    assert_eq!(now.intents[0].address, "127.0.0.9");
    // Sorted by address: the moved host comes after 127.0.0.1:2222 and before 127.0.1.1.
    let order: Vec<String> = now.hosts.iter().map(|h| h.id().to_string()).collect();
    assert_eq!(
        order,
        ["127.0.0.1", "127.0.0.1:2222", "127.0.0.9", "127.0.1.1"]
    );
    // The lock was released.
    LocalStore::new(&path).lock("test", Duration::ZERO).unwrap();

    // A port: ADDR:PORT and [IPv6]:PORT; without one the port stays.
    assert_eq!(run(&["state", "mv", "127.0.0.9", "127.0.0.9:2200"]).0, 0);
    assert_eq!(run(&["state", "mv", "127.0.0.9:2200", "[::1]:2201"]).0, 0);
    assert_eq!(run(&["state", "mv", "::1", "127.0.0.8"]).0, 0);
    let now = LocalStore::new(&path).load().unwrap().unwrap();
    assert_eq!(now.serial, 5);
    assert!(
        now.host(&HostId::new("127.0.0.8", 2201)).is_some(),
        "{:?}",
        now.hosts
    );

    let unchanged = std::fs::read(&path).unwrap();
    for (args, want) in [
        (
            ["state", "mv", "127.0.0.7", "127.0.0.6"],
            "host 127.0.0.7 is not in the state",
        ),
        (
            ["state", "mv", "127.0.1.1", "127.0.0.8:2201"],
            "127.0.0.8:2201 is already in the state",
        ),
        (
            ["state", "mv", "127.0.1.1", "127.0.0.1"],
            "127.0.0.1 is already in the state",
        ),
        (
            ["state", "mv", "127.0.1.1", "evil;host"],
            "is neither an IP address nor a DNS name",
        ),
        (
            ["state", "mv", "127.0.1.1", "10.0.0.1:0"],
            "0 is not a valid port",
        ),
        (
            ["state", "mv", "127.0.1.1", "10.0.0.1:ssh"],
            "`ssh` is not a port",
        ),
        (["state", "mv", "127.0.1.1", "[::1"], "`[` without `]`"),
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), unchanged);
}

#[test]
fn default_path_follows_the_spec() {
    use clap::Parser;
    let dir = tempfile::tempdir().unwrap();
    let path_for = |args: &[&str]| {
        let argv = [&["k0sform"][..], args, &["state", "list"]].concat();
        let cli = k0sform::cli::Cli::try_parse_from(k0sform::cli::normalize(
            argv.into_iter().map(Into::into).collect(),
        ))
        .unwrap();
        state::default_path(cli.global.state.as_deref(), &cli.global.config)
    };
    assert_eq!(path_for(&[]), PathBuf::from("k0sform.state.json"));
    assert_eq!(
        path_for(&["-c", "a/b/k0sctl.yaml", "-c", "c/x.yaml"]),
        PathBuf::from("a/b/k0sform.state.json")
    );
    let d = dir.path().to_str().unwrap();
    assert_eq!(path_for(&["-c", d]), dir.path().join("k0sform.state.json"));
    assert_eq!(
        path_for(&["-c", "a/k0sctl.yaml", "-state", "s.json"]),
        PathBuf::from("s.json")
    );
}
