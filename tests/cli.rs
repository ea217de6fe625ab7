//! The command line without hosts: `init`, `completion`, `validate -json`, `-chdir`,
//! `-input=false` and what `--help` promises (every environment variable k0sform reads).

use crate::support::bin;
use assert_cmd::Command;
use std::path::Path;

fn k0sform() -> Command {
    bin::assert_cmd()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

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
fn validate_schema_is_fresh() {
    let path = Path::new("schema/validate.schema.json");
    let now = k0sform::spec::validate_json_schema();
    if std::env::var_os("K0SFORM_UPDATE_SCHEMA").is_some() {
        std::fs::write(path, &now).expect("write schema");
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == now,
        "schema/validate.schema.json is stale: run `K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform cli::validate_schema_is_fresh`"
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

// ---------------------------------------------------------------------------------------------
// Issue 28, items 2 and 5: addresses and lock holders from files anyone may edit.

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
            "host_key": k0sform::ssh::fingerprint(key).expect("key"), "host_public_key": key}]
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

/// A folder with a spec of one host no one answers on (127.0.0.1, port 1: refused at once), its
/// key, and where the state and the debug log go. Runs against it fail when they connect.
struct Unreachable {
    dir: tempfile::TempDir,
}

impl Unreachable {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tmp");
        let key = dir.path().join("id");
        std::fs::write(&key, "not a key\n").expect("key");
        let spec = format!(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata:\n  name: t\nspec:\n  hosts:\n    - role: single\n      ssh:\n        address: 127.0.0.1\n        port: 1\n        keyPath: {}\n  k0s:\n    version: v1.33.4+k0s.0\n",
            key.display()
        );
        std::fs::write(dir.path().join("k0sctl.yaml"), spec).expect("spec");
        Unreachable { dir }
    }
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
    fn log(&self) -> std::path::PathBuf {
        self.path("cache/k0sform.log")
    }
    /// `k0sform -c SPEC -state STATE ARGS…` with the debug log in the folder.
    fn run(&self, args: &[&str]) -> std::process::Output {
        self.run_env(args, &[])
    }
    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut c = k0sform();
        c.arg("-c")
            .arg(self.path("k0sctl.yaml"))
            .arg("-state")
            .arg(self.path("s.json"))
            .env("K0SFORM_LOG_PATH", self.log())
            .args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("runs")
    }
}

/// Failed where it connects to the host: the flags before it were taken (no usage error, exit 2).
#[track_caller]
fn failed_connecting(o: &std::process::Output, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{what}: {err}");
    assert!(err.contains("127.0.0.1"), "{what}: {err}");
    assert!(!err.contains("unexpected argument"), "{what}: {err}");
}

/// Every k0sctl apply flag (cmd/apply.go, cmd/flags.go) is taken by `apply`, with one dash or
/// two, and the run goes on to the hosts: a k0sctl line in a pipeline needs no edit but its
/// command name and `-auto-approve`.
#[test]
fn apply_takes_every_k0sctl_apply_flag() {
    let u = Unreachable::new();
    let kc = u.path("kc").display().to_string();
    let flag_sets: Vec<Vec<String>> = [
        &["--dry-run"][..],
        &["--no-wait"],
        &["--concurrency", "3"],
        &["--concurrency=0"],
        &["--concurrent-uploads", "2"],
        &["--disable-downgrade-check"],
        &["--force"],
        &["--timeout", "1h30m"],
        &["--timeout=0"],
        &[
            "--evict-taint",
            "k0sctl.k0sproject.io/evict=true:NoSchedule",
        ],
        &["--kubeconfig-out", &kc],
        &[
            "--kubeconfig-out",
            &kc,
            "--kubeconfig-api-address",
            "https://lb:6443",
            "--kubeconfig-user",
            "me",
            "--kubeconfig-cluster",
            "prod",
        ],
        &["--no-drain"],
        &["--no-redact"],
        &["--debug"],
        &["-d"],
        &["--trace"],
    ]
    .iter()
    .map(|f| f.iter().map(|s| s.to_string()).collect())
    .collect();
    for flags in flag_sets {
        // The Terraform-style one-dash form of every long flag as well.
        let one_dash: Vec<String> = flags
            .iter()
            .map(|f| match f.strip_prefix("--") {
                Some(rest) => format!("-{rest}"),
                None => f.clone(),
            })
            .collect();
        for form in [&flags, &one_dash] {
            let mut args = vec!["apply", "-auto-approve"];
            args.extend(form.iter().map(String::as_str));
            let o = u.run(&args);
            failed_connecting(&o, &format!("{form:?}"));
        }
    }
    // What each says before it connects.
    let o = u.run(&["apply", "-auto-approve", "--force"]);
    assert!(
        stderr(&o).contains("-force (k0sctl) changes nothing"),
        "{}",
        stderr(&o)
    );
    // The kubeconfig flags shape what -kubeconfig-out writes: alone they change nothing (as in
    // k0sctl) and a note says so.
    for flag in [
        "--kubeconfig-user",
        "--kubeconfig-cluster",
        "--kubeconfig-api-address",
    ] {
        let o = u.run(&["apply", "-auto-approve", flag, "x"]);
        failed_connecting(&o, flag);
        assert!(
            stderr(&o).contains("without -kubeconfig-out it changes nothing"),
            "{}",
            stderr(&o)
        );
    }
    // --restore-from is k0sform's own -restore-from: the archive is read before any host.
    std::fs::write(u.path("b.tar.gz"), b"not an archive").expect("write");
    let archive = u.path("b.tar.gz").display().to_string();
    let o = u.run(&["apply", "-auto-approve", "--restore-from", &archive]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("b.tar.gz"), "{}", stderr(&o));
    assert!(!u.path("s.json").exists());
    assert!(!u.path("kc").exists());
}

/// The k0sctl flags k0sform cannot honour as given say why and what to do instead, before
/// anything is read or locked.
#[test]
fn k0sctl_flags_that_need_a_word_say_so() {
    let u = Unreachable::new();
    std::fs::write(u.path("p.plan"), b"{}").expect("plan");
    let plan = u.path("p.plan").display().to_string();
    for (args, env, needle) in [
        (
            vec!["apply", plan.as_str(), "--no-wait"],
            None,
            "-no-wait changes the spec's options",
        ),
        (
            vec!["apply", plan.as_str(), "--evict-taint", "a=b:NoExecute"],
            None,
            "-evict-taint changes",
        ),
        (
            vec!["apply", plan.as_str(), "--concurrent-uploads", "1"],
            None,
            "-concurrent-uploads changes",
        ),
        (
            vec!["apply", plan.as_str(), "--concurrency", "1"],
            None,
            "-concurrency changes",
        ),
        (
            vec!["apply", plan.as_str(), "--dry-run"],
            None,
            "k0sform show",
        ),
        (
            vec!["apply", "-auto-approve"],
            Some(("DRY_RUN", "maybe")),
            "DRY_RUN=\"maybe\" is not a boolean",
        ),
        (
            vec!["apply", "-auto-approve", "--evict-taint", "nocolon"],
            None,
            "expected <key=value>:<effect>",
        ),
        (
            vec!["apply", "-auto-approve", "--evict-taint", "k=v:Sometimes"],
            None,
            "is not one of NoExecute",
        ),
        (
            vec![
                "apply",
                "-auto-approve",
                "--evict-taint",
                "novalue:NoExecute",
            ],
            None,
            "must be in the form key=value",
        ),
        (
            vec!["version", "--k0sctl"],
            None,
            "`k0sform version` prints k0sform's own",
        ),
        (vec!["backup", "-o", "."], None, "-o names the archive file"),
    ] {
        let env: Vec<(&str, &str)> = env.into_iter().collect();
        let o = u.run_env(&args, &env);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(
            !stderr(&o).contains("127.0.0.1"),
            "connected: {args:?}: {}",
            stderr(&o)
        );
        assert!(!u.path("s.json").exists() && !u.path("s.json.lock").exists());
    }
    // -concurrency is -parallelism: not both; a bad -timeout is a usage error.
    for args in [
        &["apply", "--concurrency", "2", "-parallelism", "3"][..],
        &["destroy", "--concurrency", "2", "--parallelism=3"],
        &["apply", "--timeout", "soon"],
        &["apply", "--timeout", "-1s"],
    ] {
        let o = u.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

/// `DRY_RUN=true` (k0sctl's variable for --dry-run) makes `apply` a dry run: it gets as far as
/// planning, never asks; and `destroy --force` is `destroy -auto-approve`, as `k0sctl reset
/// --force` skips its question.
#[test]
fn dry_run_variable_and_reset_force() {
    let u = Unreachable::new();
    for v in ["true", "1", "t"] {
        // No -auto-approve and no terminal: only a dry run gets to the hosts.
        let o = u.run_env(&["apply", "-input=false"], &[("DRY_RUN", v)]);
        assert!(
            !stderr(&o).contains("-input=false forbids"),
            "{}",
            stderr(&o)
        );
        failed_connecting(&o, v);
    }
    let o = u.run_env(&["apply", "-input=false"], &[("DRY_RUN", "false")]);
    assert!(
        stderr(&o).contains("-input=false forbids"),
        "{}",
        stderr(&o)
    );
    let o = u.run(&["destroy", "-input=false"]);
    assert!(
        stderr(&o).contains("-input=false forbids"),
        "{}",
        stderr(&o)
    );
    for args in [
        &["destroy", "-input=false", "--force"][..],
        &[
            "destroy",
            "-input=false",
            "-force",
            "--dry-run",
            "--concurrency",
            "0",
            "--timeout",
            "5m",
        ],
    ] {
        let o = u.run(args);
        assert!(
            !stderr(&o).contains("-input=false forbids"),
            "{}",
            stderr(&o)
        );
        failed_connecting(&o, &format!("{args:?}"));
    }
}

/// `-d`/`--debug`, `--trace` and k0sctl's `DEBUG`/`TRACE` variables raise the stderr log level
/// as -vv and -vvv do; without them, no debug line reaches stderr.
#[test]
fn debug_and_trace_spellings_raise_the_log_level() {
    let u = Unreachable::new();
    let o = u.run(&["plan"]);
    assert!(!stderr(&o).contains("DEBUG"), "{}", stderr(&o));
    for (args, env) in [
        (&["plan", "-d"][..], None),
        (&["--debug", "plan"], None),
        (&["plan", "-debug"], None),
        (&["plan"], Some(("DEBUG", "true"))),
        (&["plan"], Some(("DEBUG", "1"))),
        (&["plan", "--trace"], None),
        (&["plan"], Some(("TRACE", "true"))),
    ] {
        let env: Vec<(&str, &str)> = env.into_iter().collect();
        let o = u.run_env(args, &env);
        assert!(
            stderr(&o).contains("DEBUG"),
            "{args:?} {env:?}: {}",
            stderr(&o)
        );
        assert!(stderr(&o).contains("starting ssh master"), "{}", stderr(&o));
    }
    let o = u.run_env(&["plan"], &[("DEBUG", "no")]);
    assert!(!stderr(&o).contains("DEBUG"), "{}", stderr(&o));
}

/// `version -k0s` prints the newest k0s release from the version index (stable.txt, with -pre
/// latest.txt), as `k0sctl version --k0s` does.
#[test]
fn version_k0s_prints_the_latest_release() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("stable.txt"), "v1.33.4+k0s.0\n").expect("write");
    std::fs::write(dir.path().join("latest.txt"), "v1.34.0-rc.1+k0s.0\n").expect("write");
    let url = format!("file://{}", dir.path().display());
    for (args, want) in [
        (&["version", "--k0s"][..], "v1.33.4+k0s.0\n"),
        (&["version", "-k0s", "-pre"], "v1.34.0-rc.1+k0s.0\n"),
    ] {
        let o = k0sform()
            .args(args)
            .env("K0SFORM_K0S_VERSION_URL", &url)
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(stdout(&o), want);
    }
    let o = k0sform()
        .args(["version", "--k0s"])
        .env(
            "K0SFORM_K0S_VERSION_URL",
            format!("file://{}/none", dir.path().display()),
        )
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("stable.txt"), "{}", stderr(&o));
    let o = k0sform().args(["version", "--pre"]).output().expect("runs");
    assert_eq!(o.status.code(), Some(2), "-pre needs -k0s");
    let o = k0sform().args(["version"]).output().expect("runs");
    assert!(stdout(&o).starts_with("k0sform "));
}

/// A run that connects keeps a debug log (K0SFORM_LOG_PATH here): created 0600 in a 0700
/// folder, appended to by each run, with what was tried on which host and how the run ended;
/// the error names it, as k0sctl's "apply failed - log file saved to …".
#[test]
fn a_failed_run_leaves_a_debug_log_and_names_it() {
    use std::os::unix::fs::PermissionsExt;
    let u = Unreachable::new();
    let o = u.run(&["plan"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let log = u.log();
    assert!(
        stderr(&o).contains(&format!(
            "The debug log of this run is in {}",
            log.display()
        )),
        "{}",
        stderr(&o)
    );
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&log), 0o600);
    assert_eq!(mode(log.parent().expect("dir")), 0o700);
    let text = std::fs::read_to_string(&log).expect("log");
    for needle in [
        "plan: run started",
        "starting ssh master",
        "host=127.0.0.1:1",
        "error: ",
        "run ended with exit code 1",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    // Only k0sform's own lines, and quiet on stderr by default.
    assert!(!stderr(&o).contains("DEBUG"), "{}", stderr(&o));
    let o = u.run(&["apply", "-auto-approve"]);
    assert_eq!(o.status.code(), Some(1));
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("plan: run started") && text.contains("apply: run started"));
    // Commands that connect to nothing keep no log and name none.
    std::fs::remove_file(&log).expect("rm");
    let o = u.run(&["validate"]);
    assert!(!log.exists(), "{}", stderr(&o));
    // Without K0SFORM_LOG_PATH: $XDG_CACHE_HOME/k0sform/k0sform.log.
    let o = k0sform()
        .arg("-c")
        .arg(u.path("k0sctl.yaml"))
        .arg("-state")
        .arg(u.path("s.json"))
        .env("XDG_CACHE_HOME", u.path("xdg"))
        .arg("plan")
        .output()
        .expect("runs");
    let default = u.path("xdg/k0sform/k0sform.log");
    assert!(
        stderr(&o).contains(&default.display().to_string()),
        "{}",
        stderr(&o)
    );
    assert_eq!(mode(&default), 0o600);
}

/// `backup -o FILE` (k0sctl's --output) is taken: it fails where it connects, and FILE is not
/// left half-written.
#[test]
fn backup_takes_k0sctls_output_flag() {
    let u = Unreachable::new();
    for flag in ["-o", "--output", "-output"] {
        let file = u.path("b.tar.gz");
        let o = u.run(&["backup", flag, file.to_str().expect("utf-8")]);
        failed_connecting(&o, flag);
        assert!(!file.exists());
    }
    let o = u.run(&["backup", "-o", "x", "-out", "."]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `completion` takes k0sctl's `--shell`/`-s` and, without a shell, completes for `$SHELL`'s
/// (else bash), as `k0sctl completion` (cmd/completion.go).
#[test]
fn completion_takes_k0sctls_shell_flag_and_variable() {
    for (args, shell_env, marker) in [
        (&["completion", "-s", "zsh"][..], None, "#compdef k0sform"),
        (
            &["completion", "--shell", "fish"],
            None,
            "complete -c k0sform",
        ),
        (&["completion", "-shell=zsh"], None, "#compdef k0sform"),
        (
            &["completion"],
            Some("/usr/bin/fish"),
            "complete -c k0sform",
        ),
        (&["completion"], None, "complete -F _k0sform"),
    ] {
        let mut c = k0sform();
        c.args(args).env_remove("SHELL");
        if let Some(s) = shell_env {
            c.env("SHELL", s);
        }
        let o = c.output().expect("runs");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).contains(marker), "{args:?} {shell_env:?}");
    }
    let o = k0sform()
        .arg("completion")
        .env("SHELL", "/bin/tcsh")
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("name the shell"), "{}", stderr(&o));
    let o = k0sform()
        .args(["completion", "bash", "-s", "zsh"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2));
}

/// `-timeout` (k0sctl's --timeout) bounds the whole run, planning included: reached there, the
/// run fails having changed nothing.
#[test]
fn timeout_reached_while_planning_fails_the_run() {
    let u = Unreachable::new();
    let o = u.run(&["apply", "-auto-approve", "--timeout", "1ns"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("-timeout 1ns reached while planning; no host was changed"),
        "{}",
        stderr(&o)
    );
    assert!(!u.path("s.json").exists());
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

/// Issue 30: `kubeconfig` and `backup` take k0sctl's flags of those commands (cmd/kubeconfig.go,
/// cmd/backup.go), with one dash or two: each goes on to the host, and the ones that change
/// nothing say so before it.
#[test]
fn kubeconfig_and_backup_take_k0sctls_flags() {
    let u = Unreachable::new();
    let common: &[(&[&str], Option<&str>)] = &[
        (&["--force"], Some("-force (k0sctl) changes nothing")),
        (
            &["--no-redact"],
            Some("-no-redact (k0sctl) changes nothing"),
        ),
        (&["--timeout", "10m"], None),
        (&["--timeout=0"], None),
        (&["--debug"], None),
        (&["-d"], None),
        (&["--trace"], None),
    ];
    let backup_only: &[(&[&str], Option<&str>)] = &[(
        &["--concurrency", "3"],
        Some("-concurrency (k0sctl) changes nothing"),
    )];
    for cmd in ["kubeconfig", "backup"] {
        let extra = if cmd == "backup" { backup_only } else { &[] };
        for (flags, note) in common.iter().chain(extra) {
            for dashes in ["--", "-"] {
                let mut args = vec![cmd.to_string()];
                args.extend(flags.iter().map(|f| match f.strip_prefix("--") {
                    Some(rest) => format!("{dashes}{rest}"),
                    None => f.to_string(),
                }));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = u.run(&args);
                failed_connecting(&o, &format!("{args:?}"));
                if let Some(note) = note {
                    assert!(stderr(&o).contains(note), "{args:?}: {}", stderr(&o));
                }
            }
        }
    }
    // k0sctl's -timeout (0: never) is no note: it bounds the run.
    for cmd in ["kubeconfig", "backup"] {
        let o = u.run(&[cmd, "--timeout", "10m"]);
        assert!(!stderr(&o).contains("Note:"), "{}", stderr(&o));
    }
}

/// Issue 30: k0sctl's `--dry-run` (or `DRY_RUN=true`) on `kubeconfig` and `backup` says what
/// would run and exits 0 without reaching a host: no kubeconfig printed or written, no archive.
#[test]
fn kubeconfig_and_backup_dry_runs_run_and_write_nothing() {
    let u = Unreachable::new();
    let kc = u.path("kc");
    let archive = u.path("b.tar.gz");
    let kc_s = kc.to_str().expect("utf-8");
    let archive_s = archive.to_str().expect("utf-8");
    for (args, env) in [
        (vec!["kubeconfig", "--dry-run"], None),
        (vec!["kubeconfig", "-dry-run", "-out", kc_s], None),
        (vec!["kubeconfig"], Some("true")),
        (vec!["backup", "--dry-run", "-o", archive_s], None),
        (vec!["backup", "-o", archive_s], Some("1")),
        (vec!["backup", "-dry-run"], None),
    ] {
        let env: Vec<(&str, &str)> = env.map(|v| ("DRY_RUN", v)).into_iter().collect();
        let o = u.run_env(&args, &env);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains("Dry run:"), "{args:?}: {err}");
        assert!(
            !err.contains("127.0.0.1"),
            "{args:?} reached the host: {err}"
        );
        assert_eq!(stdout(&o), "", "{args:?}");
    }
    assert!(!kc.exists() && !archive.exists());
    let o = u.run_env(&["backup"], &[("DRY_RUN", "maybe")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not a boolean"), "{}", stderr(&o));
}

/// Issue 30: k0sctl's `kubeconfig --timeout D` bounds the run: against a host that takes the
/// connection and never answers, it fails once D is reached.
#[test]
fn kubeconfig_timeout_bounds_the_run() {
    let u = Unreachable::new();
    // Accepted by the kernel (the backlog), never answered: SSH waits for a banner.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = silent.local_addr().expect("addr").port();
    let spec = std::fs::read_to_string(u.path("k0sctl.yaml")).expect("spec");
    let spec = spec.replace("port: 1\n", &format!("port: {port}\n"));
    std::fs::write(u.path("k0sctl.yaml"), spec).expect("spec");
    let started = std::time::Instant::now();
    let o = u.run(&["kubeconfig", "-timeout", "2s"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("-timeout 2s reached: no kubeconfig was read"),
        "{}",
        stderr(&o)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(stdout(&o), "");
}
