//! The commands' own behaviour: help, init, validate, completion, asking for input, locks,
//! saved plan options and what the binary starts with.

use super::*;

/// Environment variables the source reads: literals on lines that read the environment, and
/// every `K0SFORM_*` literal (the etcd options pass their names through a helper).
fn env_vars_read_in(dir: &Path, out: &mut std::collections::BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            env_vars_read_in(&path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        // Unit tests set variables of their own; only the code above them counts.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for line in code.lines() {
            let reads = ["env::var", "var_os(", "from_env(", ".env)(", "for var in"]
                .iter()
                .any(|p| line.contains(p));
            for lit in line.split('"').skip(1).step_by(2) {
                let name_like = lit.len() > 2
                    && lit
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                if name_like && (reads || lit.starts_with("K0SFORM_")) {
                    out.insert(lit.to_string());
                }
            }
        }
    }
}

#[test]
fn help_names_every_environment_variable_read() {
    let mut vars = std::collections::BTreeSet::new();
    env_vars_read_in(Path::new("src"), &mut vars);
    for expected in [
        "K0SFORM_STATE",
        "K0SFORM_ETCD_TIMEOUT",
        "NO_COLOR",
        "HOME",
        "USER",
    ] {
        assert!(
            vars.contains(expected),
            "the scan misses {expected}: {vars:?}"
        );
    }
    let help = stdout(&k0sform().arg("--help").output().expect("runs"));
    let env_section = help
        .split("Environment:")
        .nth(1)
        .expect("--help has an Environment section");
    for v in &vars {
        assert!(
            env_section.contains(v.as_str()),
            "--help does not name {v}:\n{help}"
        );
    }
}

#[test]
fn init_output_validates_and_follows_the_flags() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = k0sform()
        .args([
            "init",
            "-controller-count=3",
            "--user",
            "ubuntu",
            "-key-path",
            "~/.ssh/id_ed25519",
            "-n",
            "prod",
            "--k0s",
            "10.0.0.4",
            "root@10.0.0.5:2222",
        ])
        .write_stdin("# from inventory\n10.0.0.1\n10.0.0.2  # rack 2\n\n10.0.0.3\n")
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let yaml = stdout(&o);
    assert!(yaml.contains("  name: prod\n"), "{yaml}");
    assert!(yaml.contains("keyPath: ~/.ssh/id_ed25519"), "{yaml}");
    assert!(yaml.contains("kubeAPIserverUser: kube-apiserver"), "{yaml}");
    std::fs::write(dir.path().join("k0sctl.yaml"), &yaml).expect("write");
    // -chdir: the default k0sctl.yaml is found in DIR.
    let v = k0sform()
        .args(["-chdir", dir.path().to_str().expect("utf-8"), "validate"])
        .output()
        .expect("runs");
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    assert_eq!(
        stdout(&v),
        "The spec is valid: 5 hosts (3 controllers, 2 workers) in cluster \"prod\".\n"
    );
    let json = k0sform()
        .args([
            &format!("--chdir={}", dir.path().display()),
            "validate",
            "-json",
        ])
        .output()
        .expect("runs");
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(report["valid"], true);
    assert_eq!(report["summary"], stdout(&v).trim_end());
    // Stdin's hosts come first; the last one, from the arguments, keeps its own user and port.
    let last = yaml.rsplit("- ssh:").next().expect("a host");
    assert!(last.contains("address: 10.0.0.5"), "{yaml}");
    assert!(last.contains("user: root\n      port: 2222"), "{yaml}");
    assert!(last.contains("role: worker"), "{yaml}");
    assert!(
        yaml.contains("address: 10.0.0.3\n      user: ubuntu"),
        "{yaml}"
    );
}

#[test]
fn init_without_addresses_writes_the_example_hosts() {
    let o = k0sform()
        .arg("init")
        .write_stdin("")
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0));
    let yaml = stdout(&o);
    assert!(yaml.contains("address: 10.0.0.1"), "{yaml}");
    assert!(yaml.contains("address: 10.0.0.2"), "{yaml}");
    assert!(!yaml.contains("kubeAPIserverUser"), "{yaml}");
}

#[test]
fn validate_json_carries_the_text_diagnostics() {
    let spec = "testdata/specs/invalid/many-errors.yaml";
    let text = k0sform()
        .args(["-c", spec, "validate"])
        .output()
        .expect("runs");
    let json = k0sform()
        .args(["-c", spec, "validate", "-json"])
        .output()
        .expect("runs");
    assert_eq!(text.status.code(), Some(1));
    assert_eq!(json.status.code(), Some(1));
    assert!(json.stderr.is_empty(), "{}", stderr(&json));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(report["format_version"], 1);
    assert_eq!(report["valid"], false);
    // Rebuild each text line from the JSON: the same diagnostics, in the same order.
    let mut rebuilt = Vec::new();
    for d in report["diagnostics"].as_array().expect("array") {
        let mut l = d["file"].as_str().expect("file").to_string();
        if let Some(line) = d["line"].as_u64() {
            l.push_str(&format!(":{line}:{}", d["column"]));
        }
        l.push_str(&format!(
            ": {}: ",
            d["severity"].as_str().expect("severity")
        ));
        let field = d["field"].as_str().expect("field");
        if !field.is_empty() {
            l.push_str(&format!("{field}: "));
        }
        l.push_str(d["message"].as_str().expect("message"));
        rebuilt.push(l);
    }
    let mut text_lines: Vec<String> = stderr(&text).lines().map(str::to_string).collect();
    let last = text_lines.pop().expect("summary");
    assert_eq!(rebuilt, text_lines);
    assert_eq!(report["summary"], last);
    assert_eq!(
        report["error_count"].as_u64(),
        Some(rebuilt.iter().filter(|l| l.contains(": error: ")).count() as u64)
    );
}

#[test]
fn chdir_to_a_missing_folder_fails_first() {
    let o = k0sform()
        .args(["-chdir=/nonexistent/k0sform", "version"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("-chdir=/nonexistent/k0sform"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn apply_with_input_false_fails_instead_of_asking() {
    let dir = tempfile::tempdir().expect("tmp");
    for flag in ["-input=false", "--input=false"] {
        let o = k0sform()
            .args(["-c", "testdata/specs/valid/ha.yaml", "-state"])
            .arg(dir.path().join("s.json"))
            .args(["apply", flag])
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(1));
        assert!(stderr(&o).contains("-input=false"), "{}", stderr(&o));
        assert!(stderr(&o).contains("-auto-approve"), "{}", stderr(&o));
        assert!(!dir.path().join("s.json").exists());
    }
}

#[test]
fn completion_scripts_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _k0sform"),
        ("zsh", "#compdef k0sform"),
        ("fish", "complete -c k0sform"),
    ] {
        let o = k0sform()
            .args(["completion", shell])
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(0));
        let s = stdout(&o);
        assert!(s.contains(marker), "{shell}");
        assert!(s.contains("controller-count"), "{shell}");
    }
    let bad = k0sform()
        .args(["completion", "tcsh"])
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(2));
}

/// `destroy` never asks where it cannot: `-input=false` without `-auto-approve` fails before
/// the state is read, locked or created.
#[test]
fn destroy_with_input_false_fails_instead_of_asking() {
    let dir = tempfile::tempdir().expect("tmp");
    for args in [
        &["-input=false", "destroy"][..],
        &["destroy", "--input=false"][..],
        &["destroy", "-input=false", "-json"][..],
    ] {
        let o = k0sform()
            .args(["-c", "testdata/specs/valid/ha.yaml", "-state"])
            .arg(dir.path().join("s.json"))
            .args(args)
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains("-input=false"), "{}", stderr(&o));
        assert!(stderr(&o).contains("-auto-approve"), "{}", stderr(&o));
        assert!(!dir.path().join("s.json").exists());
        assert!(!dir.path().join("s.json.lock").exists());
    }
}

/// `plan -destroy` and `apply -destroy` reset every host: flags that narrow or change what a
/// plan does are refused before anything is read; `destroy` itself does not take them at all.
#[test]
fn destroy_flag_errors() {
    let dir = tempfile::tempdir().expect("tmp");
    let archive = dir.path().join("backup.tar.gz");
    std::fs::write(&archive, b"not read").expect("write");
    for (extra, needle) in [
        (vec!["-refresh-only"], "-refresh-only"),
        (vec!["-target", "10.0.0.1"], "-target"),
        (
            vec!["-restore-from", archive.to_str().expect("utf-8")],
            "-restore-from",
        ),
    ] {
        // `apply -destroy` (with or without a plan file) is refused the same way.
        for cmd in [
            &["plan", "-destroy"][..],
            &["apply", "-destroy"],
            &["apply", "-destroy", "p.plan"],
        ] {
            let o = k0sform()
                .args(["-c", "testdata/specs/valid/ha.yaml", "-state"])
                .arg(dir.path().join("s.json"))
                .args(cmd)
                .args(&extra)
                .output()
                .expect("runs");
            assert_eq!(
                o.status.code(),
                Some(1),
                "{cmd:?} {extra:?}: {}",
                stderr(&o)
            );
            assert!(
                stderr(&o).contains(&format!("-destroy cannot be used with {needle}")),
                "{}",
                stderr(&o)
            );
            assert!(!dir.path().join("s.json.lock").exists());
        }
    }
    for flag in ["-target", "-refresh-only", "-restore-from", "-out"] {
        let o = k0sform()
            .args(["destroy", flag, "x"])
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(2), "destroy {flag}");
        assert!(
            stderr(&o).contains("unexpected argument"),
            "{flag}: {}",
            stderr(&o)
        );
    }
    let o = k0sform()
        .args(["plan", "-lock=maybe"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("-lock") || stderr(&o).contains("--lock"));
}

/// `kubeconfig` and `backup` take `-trust-new-host-keys` (one or two dashes, a boolean) as
/// `plan` does, and `--help` says what it means; a value that is no boolean is a usage error.
#[test]
fn kubeconfig_and_backup_take_trust_new_host_keys() {
    let dir = tempfile::tempdir().expect("tmp");
    for cmd in ["kubeconfig", "backup"] {
        let help = stdout(&k0sform().args([cmd, "--help"]).output().expect("runs"));
        assert!(help.contains("--trust-new-host-keys <BOOL>"), "{help}");
        let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains("refuse when a host or bastion has no host key recorded in the state"),
            "{help}"
        );
        // Parsed: the command goes on and fails on the missing spec (exit 1, no usage error).
        for flag in [
            &["-trust-new-host-keys=false"][..],
            &["--trust-new-host-keys", "false"][..],
            &["-trust-new-host-keys=true"][..],
        ] {
            let o = k0sform()
                .current_dir(dir.path())
                .arg(cmd)
                .args(flag)
                .output()
                .expect("runs");
            assert_eq!(o.status.code(), Some(1), "{cmd} {flag:?}: {}", stderr(&o));
            assert!(stderr(&o).contains("k0sctl.yaml"), "{}", stderr(&o));
        }
        let o = k0sform()
            .current_dir(dir.path())
            .args([cmd, "-trust-new-host-keys=maybe"])
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(stderr(&o).contains("trust-new-host-keys"), "{}", stderr(&o));
    }
}

/// `plan` and `destroy` take the state lock before probing: held by someone else, they exit 4
/// naming the holder, and touch no host (the spec's hosts are not in the lab: a probe would
/// fail with exit 1, not 4).
#[test]
fn plan_and_destroy_exit_4_while_the_state_is_locked() {
    use k0sform::state::StateStore;
    let dir = tempfile::tempdir().expect("tmp");
    let state = dir.path().join("s.json");
    let store = k0sform::state::LocalStore::new(&state);
    let guard = store
        .lock("apply", std::time::Duration::ZERO)
        .expect("lock");
    for args in [
        &["plan"][..],
        &["plan", "-destroy"][..],
        &["destroy", "-auto-approve"][..],
        &["apply", "-auto-approve"][..],
    ] {
        let o = k0sform()
            .args(["-c", "testdata/specs/valid/ha.yaml", "-state"])
            .arg(&state)
            .args(args)
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(4), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("locked"), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&std::process::id().to_string()),
            "the holder is not named: {}",
            stderr(&o)
        );
    }
    // -lock-timeout: plan waits that long for the lock before it gives up.
    let started = std::time::Instant::now();
    let o = k0sform()
        .args(["-c", "testdata/specs/valid/ha.yaml", "-state"])
        .arg(&state)
        .args(["plan", "-lock-timeout=1500ms"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(1500),
        "plan gave up after {:?}",
        started.elapsed()
    );
    drop(guard);
}

/// k0sform turns transparent huge pages off for itself (src/main.rs), and the flag carries to
/// what it starts: ssh's ProxyCommand, started by the real ssh client k0sform starts, reports
/// it. Nothing listens or is reached: the ProxyCommand only writes a file and exits. Its shell
/// keeps ssh's end of the proxy open until the file is in place (a bare `cat > FILE` let ssh
/// see the end at once, and k0sform could end it before the file was written).
#[test]
fn k0sform_and_what_it_starts_use_no_transparent_huge_pages() {
    fn thp_line(status: &str) -> Option<String> {
        status
            .lines()
            .find(|l| l.starts_with("THP_enabled:"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    }
    let own = std::fs::read_to_string("/proc/self/status").expect("status");
    if thp_line(&own).as_deref() != Some("THP_enabled: 1") {
        eprintln!("skipped: this kernel shows no THP_enabled: 1 for the test itself");
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("proxy-status");
    let spec = dir.path().join("k0sctl.yaml");
    std::fs::write(
        &spec,
        format!(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata: {{name: thp}}\nspec:\n  hosts:\n  - role: single\n    ssh:\n      address: 127.0.0.1\n      port: 9\n      keyPath: /dev/null\n      options: {{ProxyCommand: \"sh -c 'cat /proc/self/status > {0}.part && mv {0}.part {0}'\"}}\n  k0s: {{version: v1.33.4+k0s.0}}\n",
            out.display()
        ),
    )
    .expect("spec");
    let o = k0sform()
        .arg("-c")
        .arg(&spec)
        .arg("-state")
        .arg(dir.path().join("s.json"))
        .arg("plan")
        .output()
        .expect("runs");
    let status = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("the ProxyCommand did not run ({e}): {}", stderr(&o)));
    assert_eq!(
        thp_line(&status).as_deref(),
        Some("THP_enabled: 0"),
        "{status}"
    );
}

/// A saved plan as `plan -out` writes it (the seal is not checked before the options), with
/// `options` and the plan's chosen k0s version as given.
fn saved_plan_json(options: serde_json::Value, k0s_version: Option<&str>) -> String {
    let mut plan = serde_json::json!({
        "format_version": 1, "cluster_name": "dev", "cluster_uid": null,
        "cluster_action": {"kind": "existing"}, "refresh_only": false,
        "outside_changes": [], "changes": [], "drift": [], "steps": [],
        "etcd": {"members_before": 0, "members_after": 0, "min_healthy": 0, "quorum": 0},
        "warnings": [],
    });
    if let Some(v) = k0s_version {
        plan["k0s_version"] = serde_json::json!({"version": v, "source": "latest stable release"});
    }
    serde_json::json!({
        "plan": plan, "state_lineage": "", "state_serial": 0, "spec_sha256": "00",
        "tool_version": "0", "options": options, "identities": [], "sha256": "00",
    })
    .to_string()
}

/// A k0s backup archive as `k0s backup` writes it (k0s.yaml and the etcd snapshot), made with tar.
fn backup_archive(dir: &Path, name: &str, snapshot: &str) -> std::path::PathBuf {
    let src = dir.join(format!("{name}.d"));
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("k0s.yaml"), "spec:\n  storage:\n    type: etcd\n").expect("write");
    std::fs::write(src.join("etcd-snapshot.db"), snapshot).expect("write");
    let out = dir.join(name);
    let st = std::process::Command::new("tar")
        .arg("czf")
        .arg(&out)
        .arg("-C")
        .arg(&src)
        .args(["k0s.yaml", "etcd-snapshot.db"])
        .status()
        .expect("tar");
    assert!(st.success());
    out
}

/// Issue 28, item 4: what a saved plan says about `-restore-from`, `-allow-downgrade` and
/// `-destroy` changes what runs, so `apply FILE` refuses it (exit 5, before any host is
/// contacted) unless the command line repeats it with the same values; the archive is read from
/// the disk again (path, sha256, peer address). A version in the file that is not a k0s version
/// is refused naming the file (`apply` and `show`).
#[test]
fn saved_plan_options_must_be_repeated_on_apply() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    // One host on a closed loopback port: nothing here may get as far as connecting.
    let spec = d.join("k0sctl.yaml");
    std::fs::write(
        &spec,
        "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata:\n  name: dev\nspec:\n  hosts:\n    - role: single\n      ssh:\n        address: 127.0.0.1\n        port: 1\n",
    )
    .expect("spec");
    let archive = backup_archive(d, "backup.tar.gz", "snapshot");
    let copy = d.join("copy.tar.gz");
    std::fs::copy(&archive, &copy).expect("copy");
    let sha = k0sform::hash::sha256_file(&archive).expect("sha");
    let path = archive.to_str().expect("utf-8").to_string();
    let restore = |sha: &str, peer: Option<&str>| serde_json::json!({"restore": {"path": path, "sha256": sha, "peer_address": peer}});
    let apply = |options: serde_json::Value, version: Option<&str>, args: &[&str]| {
        let file = d.join("p.plan");
        std::fs::write(&file, saved_plan_json(options, version)).expect("plan");
        k0sform()
            .arg("-c")
            .arg(&spec)
            .arg("-state")
            .arg(d.join("s.json"))
            .arg("apply")
            .args(args)
            .arg(&file)
            .output()
            .expect("runs")
    };
    let copy = copy.to_str().expect("utf-8");
    let cases: Vec<(serde_json::Value, Vec<&str>, String)> = vec![
        (
            restore(&sha, None),
            vec![],
            format!("made with -restore-from {path} but apply was given no -restore-from"),
        ),
        (
            restore(&sha, None),
            vec!["-restore-from", copy],
            format!("made with -restore-from {path} but apply was given -restore-from {copy}"),
        ),
        // The file's sha256 is not the archive's on the disk now (it changed since the plan).
        (
            restore(&"0".repeat(64), None),
            vec!["-restore-from", &path],
            format!("{path} changed since the plan was made"),
        ),
        // Nor its peer address: the archive's own is used, the file's must be the same.
        (
            restore(&sha, Some("10.0.0.9")),
            vec!["-restore-from", &path],
            "the plan records the etcd peer address 10.0.0.9, the archive has none".into(),
        ),
        (
            serde_json::json!({"allow_downgrade": true}),
            vec![],
            "made with -allow-downgrade but apply was run without it".into(),
        ),
        (
            serde_json::json!({"destroy": true}),
            vec!["-auto-approve"],
            "made with -destroy but apply was run without it".into(),
        ),
        (
            serde_json::json!({}),
            vec!["-destroy", "-auto-approve"],
            "made without -destroy but apply was run with it".into(),
        ),
    ];
    for (options, args, needle) in cases {
        let o = apply(options.clone(), None, &args);
        assert_eq!(
            o.status.code(),
            Some(5),
            "{options} {args:?}: {}",
            stderr(&o)
        );
        assert!(stderr(&o).contains(&needle), "{needle}:\n{}", stderr(&o));
        assert!(stderr(&o).contains("p.plan"), "{}", stderr(&o));
        assert!(!stderr(&o).contains("127.0.0.1"), "{}", stderr(&o));
    }

    // A chosen version that is not a k0s version, or one too old: refused when the file is read.
    for (cmd, version, says) in [
        (
            "apply",
            "v1.33.4+k0s.0 --help",
            "\"v1.33.4+k0s.0 --help\" is not a k0s version",
        ),
        (
            "show",
            "v1.33.4+k0s.0 --help",
            "\"v1.33.4+k0s.0 --help\" is not a k0s version",
        ),
        (
            "apply",
            "v0.10.0",
            "the saved plan's plan.k0s_version.version is not valid",
        ),
        (
            "show",
            "v0.10.0",
            "the saved plan's plan.k0s_version.version is not valid",
        ),
    ] {
        let file = d.join("v.plan");
        let text = saved_plan_json(serde_json::json!({}), Some(version));
        std::fs::write(&file, text).expect("plan");
        let o = k0sform()
            .arg("-c")
            .arg(&spec)
            .arg("-state")
            .arg(d.join("s.json"))
            .arg(cmd)
            .arg(&file)
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(5), "{cmd}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("{}: ", file.display())) && stderr(&o).contains(says),
            "{cmd}: {}",
            stderr(&o)
        );
    }
}

/// `config edit` and `config status` need a cluster with dynamic config: without
/// `spec.k0s.dynamicConfig` they say what to do instead, before connecting to any host.
#[test]
fn config_commands_need_dynamic_config() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        d.path().join("k0sctl.yaml"),
        "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: controller\n    ssh: {address: 127.0.0.1, port: 9}\n  k0s: {version: v1.33.4+k0s.0}\n",
    )
    .unwrap();
    for sub in ["status", "edit"] {
        let o = k0sform()
            .current_dir(d.path())
            .env("EDITOR", "true")
            .args(["config", sub])
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("does not set spec.k0s.dynamicConfig: true"),
            "{}",
            stderr(&o)
        );
    }
    let help = stdout(
        &k0sform()
            .args(["config", "edit", "--help"])
            .output()
            .expect("runs"),
    );
    assert!(
        help.contains("k0s kubectl apply -n kube-system -f -"),
        "{help}"
    );
}

/// Extra manifests are part of the spec: `validate` accepts them and names one kubectl could
/// not apply (no `metadata.name`) by file and line.
#[test]
fn validate_checks_extra_manifests() {
    let d = tempfile::tempdir().expect("tempdir");
    let head = "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: single\n    ssh: {address: 127.0.0.1}\n  k0s: {version: v1.33.4+k0s.0}\n";
    let spec = d.path().join("k0sctl.yaml");
    let validate = |manifest: &str| {
        std::fs::write(&spec, format!("{head}---\n{manifest}")).unwrap();
        k0sform()
            .current_dir(d.path())
            .arg("validate")
            .output()
            .expect("runs")
    };
    let o = validate("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("manifest"), "{}", stderr(&o));
    let o = validate("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: x\n");
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("k0sctl.yaml:12"), "{all}");
    assert!(all.contains("metadata.name is missing"), "{all}");
}
