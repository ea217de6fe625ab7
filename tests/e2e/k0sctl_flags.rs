//! k0sctl's command-line flags and install flags: the pipeline flags and debug log, --timeout,
//! --no-wait, the upgrade flags, install flags, hostname overrides and drain options.

use super::*;

/// Issue 27.9: installFlags as k0sctl reads them (`cluster/host.go`): `--config` moves where
/// the controller's k0s.yaml is written (and read by the probe), `--token-file` where the join
/// token (then its placeholder) goes, `--kubelet-root-dir` is lifted like `--data-dir` and
/// given to `k0s reset`, and `--hostname-override` in `--kubelet-extra-args` names the Node
/// (lower-cased by kubelet). Converged, nothing to do; a destroy removes those files and resets
/// the kubelet root dir.
#[test]
fn install_flags_move_config_token_kubelet_dir_and_node_name() {
    require_lab!();
    let mut c = Cluster::new(C1_W1);
    c.spec_opts.host_yaml.insert(
        "c1".into(),
        "installFlags:\n- --config=/etc/k0s/custom.yaml".into(),
    );
    c.spec_opts.host_yaml.insert(
        "w1".into(),
        "installFlags:\n- --token-file=/etc/k0s/join.tok\n- --kubelet-root-dir=/var/lib/kubelet-w1\n- --kubelet-extra-args=--hostname-override=Node-W1".into(),
    );
    c.write_spec(&["c1", "w1"]);
    c.apply().contains("Apply complete");
    c.lab.ssh_ok(
        "c1",
        "test -s /etc/k0s/custom.yaml && test ! -e /etc/k0s/k0s.yaml",
    );
    let unit = c
        .lab
        .ssh_ok("c1", "cat /etc/systemd/system/k0scontroller.service");
    assert!(unit.contains("--config=/etc/k0s/custom.yaml"), "{unit}");
    let placeholder = k0sform::k0s::placeholder_token(k0sform::k0s::TokenRole::Worker);
    assert_eq!(c.lab.ssh_ok("w1", "cat /etc/k0s/join.tok"), placeholder);
    c.lab.ssh_ok("w1", "test ! -e /etc/k0s/k0stoken");
    let unit = c
        .lab
        .ssh_ok("w1", "cat /etc/systemd/system/k0sworker.service");
    assert!(unit.contains("--token-file=/etc/k0s/join.tok"), "{unit}");
    assert!(
        unit.contains("--kubelet-root-dir=/var/lib/kubelet-w1"),
        "{unit}"
    );
    assert!(unit.contains("--hostname-override=Node-W1"), "{unit}");
    assert_eq!(
        c.nodes("c1").get("node-w1"),
        Some(&true),
        "{:?}",
        c.nodes("c1")
    );
    assert_eq!(
        c.state_host("w1").expect("recorded")["node_name"],
        "node-w1"
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    c.lab.ssh_ok(
        "w1",
        "mkdir -p /var/lib/kubelet-w1/pods && touch /var/lib/kubelet-w1/pods/x",
    );
    c.run(&["destroy", "-auto-approve"]).expect(0);
    c.lab.ssh_ok("c1", "test ! -e /etc/k0s/custom.yaml");
    c.lab.ssh_ok(
        "w1",
        "test ! -e /etc/k0s/join.tok && test ! -e /var/lib/kubelet-w1/pods/x",
    );
}

/// Issue 27: `skipWaitForDeleteTimeout: 30s` reaches kubectl as `30` (kubectl's flag is an
/// integer of seconds; the double rejects `30s` as kubectl does), and `gracePeriod: 0` is
/// k0sctl's default again: a worker upgrade drains, restarts and uncordons.
#[test]
fn drain_with_skip_wait_for_delete_timeout_passes_kubectl_seconds() {
    require_lab!();
    let mut c = c1_w1_at("v1.33.4+k0s.0");
    let hosts = ["c1", "w1"];
    let options = "drain:\n  skipWaitForDeleteTimeout: 30s\n  gracePeriod: 0s\n  timeout: 5s\n";
    write_spec_with_options(&c, &hosts, options);
    bootstrap(&c);
    c.eventually(60, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    // The double reads the flag as kubectl does.
    let bad = c.lab.ssh(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl drain --skip-wait-for-delete-timeout=30s node/w1",
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        lab::stderr(&bad).contains(
            "invalid argument \"30s\" for \"--skip-wait-for-delete-timeout\" flag: strconv.ParseInt"
        ),
        "{}",
        lab::stderr(&bad)
    );

    let newer = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".into());
    c.spec_opts.k0s_binary = Some(newer);
    write_spec_with_options(&c, &hosts, options);
    c.run(&["plan"])
        .expect(0)
        .contains("Node \"w1\" cordoned and drained via c1");
    c.apply().contains("Apply complete");
    let ops = node_ops(&c, "c1");
    assert!(
        ops.iter()
            .any(|(v, n, ok)| v == "drain" && n == "w1" && ok == "ok"),
        "{ops:#?}"
    );
    assert_eq!(c.lab.ssh_ok("w1", "k0s version").trim(), "v1.33.5+k0s.0");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Words shaped like a k0s bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`) or a join token (the
/// base64 of a gzip stream: `H4sI…`).
fn token_like_words(text: &str) -> Vec<String> {
    text.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '.' || ch == '+' || ch == '/'))
        .filter(|w| {
            let bootstrap = w.len() == 23
                && w.as_bytes()[6] == b'.'
                && w.chars()
                    .enumerate()
                    .all(|(i, ch)| i == 6 || ch.is_ascii_digit() || ch.is_ascii_lowercase());
            bootstrap || w.contains("H4sI")
        })
        .map(str::to_string)
        .collect()
}

/// Issue 30: a `k0sctl apply` line of a pipeline with its k0sctl flags runs as `k0sform apply
/// -auto-approve` with the same flags: `DRY_RUN`/`--dry-run` only plan, the kubeconfig flags
/// shape the kubeconfig written, `backup -o FILE` writes FILE. Every run that connects leaves
/// its commands, with their exit codes, in the debug log, and no join token nor environment
/// value in it.
#[test]
fn k0sctl_pipeline_flags_and_the_debug_log() {
    require_lab!();
    let mut c = Cluster::new(C1_W1);
    c.spec_opts.host_yaml.insert(
        "w1".into(),
        "environment:\n  HTTPS_PROXY: http://u:pr0xy-s3cret@proxy.invalid:3128".into(),
    );
    c.write_spec(&["c1", "w1"]);
    let log = c.lab.dir().join("cache/k0sform/k0sform.log");

    // A dry run, as k0sctl's DRY_RUN=true or --dry-run: the plan, no question, no change.
    let mut cmd = c.command(&["apply"]);
    let out = cmd
        .env("DRY_RUN", "true")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", lab::stderr(&out));
    assert!(
        lab::stdout(&out).contains("to add"),
        "{}",
        lab::stdout(&out)
    );
    assert!(lab::stderr(&out).contains("Dry run: nothing was changed."));
    c.run(&["apply", "-auto-approve", "--dry-run"])
        .expect(0)
        .contains("Dry run: nothing was changed.");
    assert!(!c.state.exists(), "a dry run wrote the state");
    c.run(&["plan", "-detailed-exitcode"]).expect(2);

    let kc = c.lab.dir().join("admin.conf");
    let r = c.run(&[
        "apply",
        "-auto-approve",
        "-json",
        "--concurrency",
        "0",
        "--concurrent-uploads",
        "0",
        "--no-wait",
        "--timeout",
        "10m",
        "--force",
        "--kubeconfig-out",
        kc.to_str().expect("utf-8"),
        "--kubeconfig-api-address",
        "https://lb.invalid:6443",
        "--kubeconfig-user",
        "ci",
        "--kubeconfig-cluster",
        "prod",
    ]);
    r.expect(0).contains("-force (k0sctl) changes nothing");
    // --concurrency 0 is no limit: every host of the spec and the state at once.
    let begin = begin_event(&r.stdout);
    assert_eq!(begin["parallelism"], 2, "{begin}");
    let (cluster, user, server, _) = kubeconfig_parts(&std::fs::read_to_string(&kc).expect("kc"));
    assert_eq!(
        (cluster.as_str(), user.as_str(), server.as_str()),
        ("prod", "ci", "https://lb.invalid:6443")
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // backup -o FILE (k0sctl's --output).
    let file = c.lab.dir().join("b.tar.gz");
    let r = c.run(&["backup", "-o", file.to_str().expect("utf-8")]);
    r.expect(0);
    assert_eq!(backup_line(&r).1, file);
    assert_eq!(mode_of(&file), 0o600);

    // The debug log: every run, each command on its host with its exit code.
    assert_eq!(mode_of(&log), 0o600);
    let text = std::fs::read_to_string(&log).expect("log");
    for needle in [
        "apply: run started",
        "plan: run started",
        "backup: run started",
        "run ended with exit code 0",
        "run ended with exit code 2",
        "k0s install controller",
        "HTTPS_PROXY=(value hidden)",
        "k0s backup",
        "exit_code=0",
    ] {
        assert!(text.contains(needle), "{needle} not in the log:\n{text}");
    }
    for name in ["c1", "w1"] {
        let host = format!("host={} ", c.lab.address(name));
        assert!(text.contains(&host), "{host} not in the log");
    }
    assert!(
        !text.contains("pr0xy-s3cret"),
        "an environment value in the log"
    );
    assert_eq!(
        token_like_words(&text),
        Vec::<String>::new(),
        "a token in the log"
    );

    // A plan against the running cluster writes its probe commands, and nothing secret.
    let before = text.len();
    c.run(&["plan"]).expect(0);
    let text = std::fs::read_to_string(&log).expect("log");
    let plan_part = &text[before..];
    assert!(plan_part.contains("plan: run started"), "{plan_part}");
    assert!(plan_part.contains("command=\"sh -c"), "{plan_part}");
    // One line per record: a command's line breaks are escaped.
    for line in plan_part.lines() {
        assert!(line.starts_with("20"), "{line}");
    }
    assert!(plan_part.contains("exit_code=0"), "{plan_part}");
    assert!(!plan_part.contains("pr0xy-s3cret"));
    assert_eq!(token_like_words(plan_part), Vec::<String>::new());
}

/// Issue 30: k0sctl's `--timeout` bounds an apply: once reached no new step starts (as one
/// Ctrl-C), the running ones finish and are recorded, and the run fails; the next apply
/// finishes the work.
#[test]
fn k0sctl_timeout_stops_starting_steps() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    // w1's Node registers 30 s after its join: the run is still going when the timeout comes.
    c.lab
        .exec_ok("w1", "printf 'join_latency 30\\n' > /etc/k0s-lab/k0s-knobs");
    let started = std::time::Instant::now();
    let r = c.run(&["apply", "-auto-approve", "--timeout", "5s"]);
    assert_ne!(r.code, 0, "{}", r.text());
    r.contains("-timeout 5s reached: no new step starts");
    assert!(started.elapsed() >= std::time::Duration::from_secs(5));
    c.lab.exec_ok("w1", "rm -f /etc/k0s-lab/k0s-knobs");
    c.apply();
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27 (leftover): `hostname:` and the same `--hostname-override` in installFlags' extra
/// kubelet args both name the Node, as k0sctl allows (phase/gather_facts.go): the flag is given
/// once, the Node registers under that name, a second plan has no changes. Different names are
/// refused before anything runs, naming both.
#[test]
fn hostname_and_the_same_hostname_override_flag_build_one_node_name() {
    require_lab!();
    let mut c = Cluster::new(C1_W1);
    let w1 = |name: &str| {
        format!(
            "hostname: node-a\ninstallFlags:\n- '--kubelet-extra-args=\"--max-pods=50 --hostname-override={name}\"'"
        )
    };
    c.spec_opts.host_yaml.insert("w1".into(), w1("node-b"));
    c.write_spec(&["c1", "w1"]);
    c.run(&["plan"])
        .expect(1)
        .contains("`node-a` differs from --hostname-override=node-b");
    assert!(!c.state.exists());

    c.spec_opts.host_yaml.insert("w1".into(), w1("node-a"));
    c.write_spec(&["c1", "w1"]);
    c.apply().contains("Apply complete");
    let unit = c
        .lab
        .ssh_ok("w1", "cat /etc/systemd/system/k0sworker.service");
    assert_eq!(unit.matches("--hostname-override").count(), 1, "{unit}");
    assert_eq!(
        c.nodes("c1").get("node-a"),
        Some(&true),
        "{:?}",
        c.nodes("c1")
    );
    assert_eq!(c.state_host("w1").expect("recorded")["node_name"], "node-a");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Start k0sform with `args` in the background, its output to `<lab>/<name>.out`.
fn spawn_run(c: &Cluster, args: &[&str], name: &str) -> (std::process::Child, std::path::PathBuf) {
    let out = c.lab.dir().join(format!("{name}.out"));
    let file = std::fs::File::create(&out).expect("output file");
    let child = c
        .command(args)
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().expect("output file"))
        .stderr(file)
        .spawn()
        .expect("spawn k0sform");
    (child, out)
}

/// Wait up to `secs` for a run of `spawn_run` to end, and assert that it succeeded; panics,
/// killing it, if it is still running then.
#[track_caller]
fn succeeds_within(mut child: std::process::Child, out: &std::path::Path, secs: u64) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let text = std::fs::read_to_string(out).unwrap_or_default();
    match status {
        Some(s) => assert!(s.success(), "k0sform failed ({s}):\n{text}"),
        None => panic!("k0sform still running after {secs}s:\n{text}"),
    }
}

/// Issue 30: k0sctl's `--no-wait` given on the command line (the spec asks for the wait) ends
/// a worker's join once its Node has registered: apply returns while the Node is NotReady.
/// Without it, apply waits until the Node is Ready.
#[test]
fn k0sctl_no_wait_flag_ends_a_join_once_the_node_registers() {
    require_lab!();
    let c = c1_up_w1_w2_to_join();
    // Read where `kubectl get` runs: on c1, every Node shows Ready=Unknown.
    c.lab
        .exec_ok("c1", "printf 'node_grace -1\\n' > /etc/k0s-lab/k0s-knobs");
    c.write_spec(&["c1", "w1"]);
    let (run, out) = spawn_run(&c, &["apply", "-auto-approve", "--no-wait"], "no-wait");
    succeeds_within(run, &out, 120);
    assert_eq!(c.nodes("c1").get("w1"), Some(&false), "{:?}", c.nodes("c1"));
    assert!(c.state_host("w1").is_some(), "w1 is not recorded");

    // Without the flag: w2's Node registers, NotReady, and apply keeps waiting for it.
    c.write_spec(&["c1", "w1", "w2"]);
    let (mut run, out) = spawn_run(&c, &["apply", "-auto-approve"], "wait");
    c.eventually(120, "w2's Node", || c.nodes("c1").contains_key("w2"));
    std::thread::sleep(std::time::Duration::from_secs(8));
    assert!(
        matches!(run.try_wait(), Ok(None)),
        "apply ended while w2 was NotReady:\n{}",
        std::fs::read_to_string(&out).unwrap_or_default()
    );
    assert_eq!(c.nodes("c1").get("w2"), Some(&false));
    // The Nodes show Ready again: the join ends.
    c.lab.exec_ok("c1", "rm /etc/k0s-lab/k0s-knobs");
    succeeds_within(run, &out, 120);
    assert_eq!(c.nodes("c1").get("w2"), Some(&true));
}

/// Issue 30: k0sctl's upgrade flags on the command line, the spec setting none of them:
/// `--evict-taint` taints the worker's Node (cordoned) before its drain and removes the taint
/// once it is back; `--no-drain` upgrades it without any cordon or drain;
/// `--disable-downgrade-check` lets a downgrade be planned and applied.
#[test]
fn k0sctl_upgrade_flags_taint_skip_the_drain_and_allow_a_downgrade() {
    require_lab!();
    let hosts = ["c1", "w1"];
    let mut c = c1_w1_on_v1_33_4_ready();
    // The upgraded kubelet posts 4 s after k0s is up: the Node stays cordoned and tainted that long.
    c.lab.exec_ok(
        "w1",
        "printf 'kubelet_latency 4\\n' > /etc/k0s-lab/k0s-knobs",
    );
    // w1's Node, if c1 answers (its own upgrade restarts it).
    let w1_node = |c: &Cluster| -> Option<serde_json::Value> {
        let out = c.lab.ssh(
            "c1",
            "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get node w1 -o json",
        );
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())
            .flatten()
    };
    let evict_taint = |node: &serde_json::Value| {
        node["spec"]["taints"].as_array().and_then(|ts| {
            ts.iter()
                .find(|t| t["key"] == "k0sctl.k0sproject.io/evict")
                .cloned()
        })
    };

    // --evict-taint: seen on the cordoned Node while the upgrade runs, gone after.
    to_k0s_version(&mut c, "v1.33.5+k0s.0", &hosts);
    let (mut run, out) = spawn_run(
        &c,
        &[
            "apply",
            "-auto-approve",
            "--evict-taint=k0sctl.k0sproject.io/evict=true:NoExecute",
        ],
        "evict-taint",
    );
    let mut tainted = None;
    while matches!(run.try_wait(), Ok(None)) && tainted.is_none() {
        if let Some(node) = w1_node(&c) {
            tainted = evict_taint(&node).map(|t| (t, node["spec"]["unschedulable"].clone()));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    succeeds_within(run, &out, 180);
    let (taint, cordoned) = tainted.expect("the evict taint was never on w1's Node");
    assert_eq!(
        taint,
        serde_json::json!({"key": "k0sctl.k0sproject.io/evict", "value": "true", "effect": "NoExecute"})
    );
    assert_eq!(cordoned, true, "tainted but not cordoned");
    let ops = node_ops(&c, "c1");
    let w1_ops: Vec<&str> = ops
        .iter()
        .filter(|(_, n, _)| n == "w1")
        .map(|(v, _, _)| v.as_str())
        .collect();
    assert_eq!(
        w1_ops,
        ["cordon", "taint", "drain", "uncordon", "taint"],
        "{ops:#?}"
    );
    let node = w1_node(&c).expect("w1's Node");
    assert_eq!(evict_taint(&node), None, "{node}");
    assert!(node["spec"]["unschedulable"].is_null(), "{node}");
    runs_swapped_in(&c, &hosts, "v1.33.5+k0s.0");

    // --no-drain: upgraded, and no Node operation at all.
    to_k0s_version(&mut c, "v1.33.6+k0s.0", &hosts);
    c.run(&["apply", "-auto-approve", "--no-drain"]).expect(0);
    assert_eq!(node_ops(&c, "c1"), ops, "a Node operation with --no-drain");
    runs_swapped_in(&c, &hosts, "v1.33.6+k0s.0");

    // --disable-downgrade-check: refused without it, planned and applied with it.
    to_k0s_version(&mut c, "v1.33.5+k0s.0", &hosts);
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains("would be downgraded from v1.33.6+k0s.0 to v1.33.5+k0s.0");
    runs_swapped_in(&c, &hosts, "v1.33.6+k0s.0");
    c.run(&["apply", "-auto-approve", "--disable-downgrade-check"])
        .expect(0)
        .contains("would be downgraded from v1.33.6+k0s.0 to v1.33.5+k0s.0");
    runs_swapped_in(&c, &hosts, "v1.33.5+k0s.0");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}
