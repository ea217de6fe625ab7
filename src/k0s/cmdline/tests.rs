use super::*;

const BIN: &str = "/usr/local/bin/k0s";
const DD: &str = "/var/lib/k0s";

#[test]
fn go_durations() {
    assert_eq!(go_duration(Duration::from_secs(1800)), "30m0s");
    assert_eq!(go_duration(Duration::from_secs(600)), "10m0s");
    assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
    assert_eq!(go_duration(Duration::from_secs(3725)), "1h2m5s");
    assert_eq!(go_duration(Duration::from_secs(45)), "45s");
    assert_eq!(go_duration(Duration::ZERO), "0s");
}

#[test]
fn command_lines_match_the_reference() {
    assert_eq!(version(BIN).argv, [BIN, "version"]);
    assert_eq!(status_json(BIN).argv, [BIN, "status", "-o", "json"]);
    assert_eq!(
        token_create(BIN, DD, TokenRole::Controller, Duration::from_secs(1800)).argv,
        [
            BIN,
            "token",
            "create",
            "--role=controller",
            "--expiry=30m0s",
            "--data-dir=/var/lib/k0s"
        ]
    );
    assert_eq!(
        token_invalidate(BIN, DD, "abcdef").argv,
        [
            BIN,
            "token",
            "invalidate",
            "--data-dir=/var/lib/k0s",
            "abcdef"
        ]
    );
    assert_eq!(
        member_list(BIN, DD).argv,
        [BIN, "etcd", "member-list", "--data-dir=/var/lib/k0s"]
    );
    assert_eq!(
        etcd_leave(BIN, DD, "10.0.0.5").argv,
        [
            BIN,
            "etcd",
            "leave",
            "--peer-address=10.0.0.5",
            "--data-dir=/var/lib/k0s"
        ]
    );
    assert_eq!(
        reset(BIN, DD, Some("/var/lib/kubelet")).argv,
        [
            BIN,
            "reset",
            "--data-dir=/var/lib/k0s",
            "--kubelet-root-dir=/var/lib/kubelet"
        ]
    );
    assert_eq!(
        reset(BIN, DD, None).argv,
        [BIN, "reset", "--data-dir=/var/lib/k0s"]
    );
    assert_eq!(start(BIN).argv, [BIN, "start"]);
    assert_eq!(
        kubeconfig_admin(BIN, DD).argv,
        [BIN, "kubeconfig", "admin", "--data-dir=/var/lib/k0s"]
    );
    assert_eq!(
        backup(BIN, DD, "/tmp/b").argv,
        [
            BIN,
            "backup",
            "--save-path=/tmp/b",
            "--data-dir=/var/lib/k0s"
        ]
    );
    let r = restore(BIN, DD, "/tmp/r/a.tar.gz", "/tmp/r/k0s.yaml");
    assert_eq!(
        r.argv,
        [
            BIN,
            "restore",
            "--data-dir=/var/lib/k0s",
            "--config-out=/tmp/r/k0s.yaml",
            "/tmp/r/a.tar.gz"
        ]
    );
    assert!(r.root);
    assert_eq!(stop(BIN).argv, [BIN, "stop"]);
}

#[test]
fn the_staged_binary_is_swapped_in_by_a_rename_beside_it() {
    assert_eq!(staged_binary_path(BIN), "/usr/local/bin/k0s.k0sform-new");
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("k0s");
    let bin = bin.to_str().unwrap();
    std::fs::write(bin, "old").unwrap();
    std::fs::write(staged_binary_path(bin), "new").unwrap();
    let run = |c: RemoteCommand| {
        let o = std::process::Command::new(&c.argv[0])
            .args(&c.argv[1..])
            .output()
            .unwrap();
        (o.status.success(), String::from_utf8(o.stdout).unwrap())
    };
    // The stat line of the binary as the probe prints it (`BINARY_STAT_FORMAT`).
    let stat_of = |p: &str| {
        let o = std::process::Command::new("stat")
            .args(["-L", "-c", BINARY_STAT_FORMAT, "--", p])
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap().trim_end().to_string()
    };
    let (ok, out) = run(swap_in_binary(bin));
    assert!(ok);
    assert_eq!(std::fs::read_to_string(bin).unwrap(), "new");
    assert!(!std::path::Path::new(&staged_binary_path(bin)).exists());
    // The moved binary's stat line, as the next probe will see it.
    assert_eq!(
        super::super::parse_moved_binary_stat(&out),
        Some(stat_of(bin))
    );
    // Nothing staged (swapped already): no error, nothing changes, no stat line.
    assert_eq!(run(swap_in_binary(bin)), (true, String::new()));
    assert_eq!(std::fs::read_to_string(bin).unwrap(), "new");

    // The install command moves it the same way, and its line comes before the install's
    // output; without a staged binary only the install's output.
    std::fs::write(staged_binary_path(bin), "newer").unwrap();
    let echo = ["echo".to_string(), "installed".to_string()];
    let mut c = install_service(bin, ServiceKind::Worker, &[], &BTreeMap::new(), true);
    c.argv.truncate(8);
    c.argv[6] = d.path().join("env.conf").to_str().unwrap().to_string();
    // k0sctl's OpenRC file: its `export` lines go, the administrator's other lines stay.
    let conf_d = d.path().join("k0sworker");
    std::fs::write(&conf_d, "rc_ulimit=\"-n 9\"\nexport 'A=k0sctl'\n").unwrap();
    c.argv[7] = conf_d.to_str().unwrap().to_string();
    c.argv.extend(echo);
    let (ok, out) = run(c.clone());
    assert!(ok);
    assert_eq!(
        std::fs::read_to_string(&conf_d).unwrap(),
        "rc_ulimit=\"-n 9\"\n"
    );
    assert_eq!(std::fs::read_to_string(bin).unwrap(), "newer");
    assert_eq!(
        super::super::parse_moved_binary_stat(&out),
        Some(stat_of(bin))
    );
    assert_eq!(out.lines().nth(1), Some("installed"));
    assert_eq!(run(c), (true, "installed\n".to_string()));
}

#[test]
fn the_moved_stat_line_is_the_probes_stat_line() {
    assert!(PRINT_MOVED_STAT.contains(&format!("stat -L -c '{BINARY_STAT_FORMAT}'")));
    assert!(PRINT_MOVED_STAT.contains(&format!("'{MOVED_STAT_PREFIX}%s")));
    assert!(
        super::super::probe_script::SCRIPT.contains(&format!("stat -L -c '{BINARY_STAT_FORMAT}'"))
    );
}

#[test]
fn install_puts_env_and_force_after_the_flags() {
    let env = BTreeMap::from([("HTTP_PROXY".to_string(), "http://p:3128".to_string())]);
    let args = vec![
        "--config=/etc/k0s/k0s.yaml".to_string(),
        "--data-dir=/var/lib/k0s".to_string(),
    ];
    let c = install(BIN, ServiceKind::Controller, &args, &env, true);
    assert_eq!(
        c.argv,
        [
            BIN,
            "install",
            "controller",
            "--config=/etc/k0s/k0s.yaml",
            "--data-dir=/var/lib/k0s",
            "-e",
            "HTTP_PROXY=http://p:3128",
            "--force"
        ]
    );
    assert!(c.root);
    // Logs and errors name the variable, never its value.
    let shown = c.shown_as.as_deref().expect("shown");
    assert!(shown.contains("-e 'HTTP_PROXY=(value hidden)'"), "{shown}");
    assert!(!shown.contains("p:3128"), "{shown}");
    let s = install_service(BIN, ServiceKind::Controller, &args, &env, true);
    let shown = s.shown_as.as_deref().expect("shown");
    assert!(
        shown.contains("install controller") && !shown.contains("p:3128"),
        "{shown}"
    );
    let w = install(BIN, ServiceKind::Worker, &[], &BTreeMap::new(), false);
    assert_eq!(w.argv, [BIN, "install", "worker"]);
}

#[test]
fn watch_nodes_runs_kubectl_under_the_stdin_wrapper() {
    let c = watch_nodes(BIN, DD, Duration::from_secs(600));
    assert_eq!(c.argv[..4], ["sh", "-c", UNTIL_STDIN_CLOSES, "sh"]);
    assert_eq!(
        c.argv[4..],
        [
            BIN,
            "kubectl",
            "--data-dir=/var/lib/k0s",
            "get",
            "nodes",
            "--watch-only",
            "-o",
            "name"
        ]
    );
    assert_eq!(c.env[0].1, "/var/lib/k0s/pki/admin.conf");
    assert_eq!(c.timeout, Duration::from_secs(600));
}

/// The wrapper, run by a real `sh`: the command's output passes through, closing stdin
/// ends it (a `sleep` that would outlive the test), and its own end ends the wrapper
/// even while stdin stays open.
#[test]
fn the_watch_wrapper_ends_its_command_when_stdin_closes() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let started = std::time::Instant::now();
    let mut child = Command::new("sh")
        .args(["-c", UNTIL_STDIN_CLOSES, "sh", "sh", "-c"])
        .arg("echo node/w1; echo $$ >&2; exec sleep 30")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "node/w1\n");
    let mut pid = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut pid)
        .unwrap();
    let pid: i32 = pid.trim().parse().unwrap();
    // Still there a while later: open stdin keeps it running.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signal 0 only asks whether the process exists.
    assert_eq!(unsafe { libc::kill(pid, 0) }, 0, "the command runs");
    assert!(child.try_wait().unwrap().is_none(), "the wrapper runs");
    drop(child.stdin.take());
    child.wait().unwrap();
    // Killed: gone, or a zombie until whoever inherited it reaps it.
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |st| {
            st.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    });
    assert!(gone, "the command still runs after stdin closed");
    assert!(started.elapsed() < Duration::from_secs(20));

    let mut child = Command::new("sh")
        .args(["-c", UNTIL_STDIN_CLOSES, "sh", "sh", "-c", "exit 3"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Held outside `child`: `Child::wait` closes the stdin it holds before waiting, and
    // then the wrapper's kill could race `exit 3` (this once failed CI with 143).
    let stdin = child.stdin.take();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3), "the wrapper ends with its command");
    drop(stdin);
}

#[test]
fn kubectl_uses_the_admin_kubeconfig_and_has_a_timeout() {
    let c = get_nodes(BIN, DD);
    assert_eq!(
        c.argv,
        [
            BIN,
            "kubectl",
            "--data-dir=/var/lib/k0s",
            "get",
            "nodes",
            "-o",
            "json"
        ]
    );
    assert_eq!(
        c.env,
        [(
            "KUBECONFIG".to_string(),
            "/var/lib/k0s/pki/admin.conf".to_string()
        )]
    );
    assert!(c.timeout > Duration::ZERO);
    // Issue 28, item 6: every Node of a large cluster fits.
    assert_eq!(c.output_limit, NODE_LISTING_LIMIT);
    const { assert!(NODE_LISTING_LIMIT >= 5_000 * 48 * 1024) };
    assert_eq!(
        delete_etcd_member(BIN, DD, "c1").argv[3..],
        [
            "delete",
            "etcdmembers.etcd.k0sproject.io/c1",
            "--ignore-not-found"
        ]
    );
    assert_eq!(
        patch_etcd_member_leave(BIN, DD, "c1").argv[3..],
        [
            "patch",
            "etcdmembers.etcd.k0sproject.io/c1",
            "--type=merge",
            "-p",
            r#"{"spec":{"leave":true}}"#
        ]
    );
    assert_eq!(
        delete_control_node(BIN, DD, "c1").argv[3..],
        [
            "delete",
            "controlnodes.autopilot.k0sproject.io/c1",
            "--ignore-not-found"
        ]
    );
    assert_eq!(readyz(BIN, DD).argv[3..], ["get", "--raw=/readyz"]);
}

#[test]
fn names_from_hosts_never_become_flags() {
    // A removed controller whose hostname is `--all` must not delete every EtcdMember.
    let opts = crate::spec::Options::default().drain;
    for c in [
        delete_etcd_member(BIN, DD, "--all"),
        patch_etcd_member_leave(BIN, DD, "--all"),
        delete_control_node(BIN, DD, "--all"),
        delete_node(BIN, DD, "--all"),
        drain(BIN, DD, "--all", &opts),
        cordon(BIN, DD, "--all"),
        uncordon(BIN, DD, "--all"),
        add_taint(BIN, DD, "--all", "k=v:NoExecute"),
        remove_taint(BIN, DD, "--all", "k=v:NoExecute"),
    ] {
        let objects: Vec<&String> = c.argv[4..].iter().filter(|a| a.contains("--all")).collect();
        assert_eq!(objects.len(), 1, "{:?}", c.argv);
        assert!(objects[0].ends_with("/--all"), "{:?}", c.argv);
    }
}

#[test]
fn drain_carries_the_spec_options() {
    let opts = crate::spec::Options::default().drain;
    let c = drain(BIN, DD, "w1", &opts);
    assert_eq!(
        c.argv[3..],
        [
            "drain",
            "--grace-period=120",
            "--timeout=300s",
            "--force",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "node/w1"
        ]
    );
    assert_eq!(c.timeout, Duration::from_secs(360));

    let mut opts = opts;
    opts.grace_period = 0;
    opts.timeout = 0;
    opts.force = false;
    opts.pod_selector = Some("app=web".into());
    opts.skip_wait_for_delete_timeout = 30;
    let c = drain(BIN, DD, "w1", &opts);
    assert_eq!(
        c.argv[3..],
        [
            "drain",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--pod-selector=app=web",
            "--skip-wait-for-delete-timeout=30",
            "node/w1"
        ]
    );
    assert_eq!(c.timeout, Duration::from_secs(3660));
}

#[test]
fn taints_are_added_with_overwrite_and_removed_with_a_dash() {
    assert_eq!(
        add_taint(BIN, DD, "w1", "k0sctl.k0sproject.io/evict=true:NoExecute").argv[3..],
        [
            "taint",
            "nodes",
            "--overwrite",
            "node/w1",
            "k0sctl.k0sproject.io/evict=true:NoExecute"
        ]
    );
    assert_eq!(
        remove_taint(BIN, DD, "w1", "k=v:NoSchedule").argv[3..],
        ["taint", "nodes", "node/w1", "k=v:NoSchedule-"]
    );
    assert_eq!(cordon(BIN, DD, "w1").argv[3..], ["cordon", "node/w1"]);
    assert_eq!(uncordon(BIN, DD, "w1").argv[3..], ["uncordon", "node/w1"]);
}
