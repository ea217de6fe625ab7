//! The k0sctl flags and variables k0sform takes, and what they do.

use super::*;

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
    // An index that is not a version, behind a URL with credentials: the error names the URL
    // without them.
    let server = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = server.local_addr().expect("addr").port();
    let answer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut c, _) = server.accept().expect("accept");
        let mut request = [0u8; 4096];
        let _ = c.read(&mut request);
        let _ = c.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot-a-v1\n",
        );
    });
    let o = k0sform()
        .args(["version", "--k0s"])
        .env(
            "K0SFORM_K0S_VERSION_URL",
            format!("http://mirror-user:s3cret-pw@127.0.0.1:{port}"),
        )
        .output()
        .expect("runs");
    answer.join().expect("server");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("127.0.0.1:{port}/stable.txt"))
            && !stderr(&o).contains("s3cret-pw"),
        "{}",
        stderr(&o)
    );
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
