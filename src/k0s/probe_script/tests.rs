//! The probe script run on this machine, and its parser.

use super::frames::tests::{NONCE, framed};
use super::*;
use std::process::Command;

/// The probe of a host with no k0s (nothing at its binary path or data dir).
pub(super) fn probe_nowhere(files: &[String], staging: &[String]) -> ProbeCommand {
    probe(
        "/nonexistent/k0s",
        "/nonexistent",
        false,
        None,
        None,
        files,
        staging,
    )
}

/// Run the real probe script locally (with `cfg` for the k0s.yaml path) and parse it.
fn probe_locally(bin: &str, dd: &str, view: bool, cfg: &str) -> (CommandOutput, ProbeCommand) {
    probe_locally_wanting(bin, dd, view, cfg, None)
}

/// [`probe_locally`] with the sha256 of the k0s.yaml k0sform would write.
fn probe_locally_wanting(
    bin: &str,
    dd: &str,
    view: bool,
    cfg: &str,
    want_cfg: Option<&str>,
) -> (CommandOutput, ProbeCommand) {
    let p = probe(bin, dd, view, want_cfg, None, &[], &[]);
    let mut argv = p.command.argv.clone();
    let at = argv.iter().position(|a| a == CONFIG_PATH).unwrap();
    argv[at] = cfg.to_string();
    (run_in_tmpdir(&argv, None), p)
}

/// Run `argv` here, with `TMPDIR` set to `tmpdir` if given.
fn run_in_tmpdir(argv: &[String], tmpdir: Option<&std::path::Path>) -> CommandOutput {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    if let Some(t) = tmpdir {
        c.env("TMPDIR", t);
    }
    let out = c.output().unwrap();
    CommandOutput {
        status: out.status.code(),
        stdout: out.stdout,
        stderr: out.stderr,
    }
}

/// k0s issue #7202: a worker's token file is reported as k0s v1.35.1 decodes it (base64 of
/// gzip, k0s `pkg/token/joindecode.go`), never its content; the spec's files after it are
/// still read; a host not asked has no verdict.
#[test]
fn token_file_is_reported_as_decodable_or_not_never_its_content() {
    use base64::Engine as _;
    let d = tempfile::tempdir().unwrap();
    let placeholder = super::super::placeholder_token(super::super::TokenRole::Worker);
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let cases: Vec<(&str, Option<String>, TokenFileState)> = vec![
        ("token", Some(placeholder.clone()), TokenFileState::Decodes),
        (
            "token-nl",
            Some(format!("{placeholder}\n")),
            TokenFileState::Decodes,
        ),
        (
            "k0sctl",
            Some("# overwritten by k0sctl after join\n".into()),
            TokenFileState::Undecodable,
        ),
        ("empty", Some(String::new()), TokenFileState::Undecodable),
        // Go decodes the whole string: a token followed by garbage is refused.
        (
            "trailing",
            Some(format!("{placeholder}!!")),
            TokenFileState::Undecodable,
        ),
        (
            "plain-base64",
            Some(b64(b"not gzip")),
            TokenFileState::Undecodable,
        ),
        ("missing", None, TokenFileState::Missing),
    ];
    let other = d.path().join("other.conf");
    std::fs::write(&other, "x\n").unwrap();
    let files = vec![other.display().to_string()];
    for (name, content, want) in cases {
        let path = d.path().join(name);
        if let Some(c) = &content {
            std::fs::write(&path, c).unwrap();
        }
        let p = probe_nowhere(&files, &[]).checking_token_file_at(path.to_str().unwrap());
        let out = run_in_tmpdir(&p.command.argv, None);
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!text.contains(&placeholder[..40]), "{name}: {text}");
        assert!(!text.contains("overwritten by k0sctl"), "{name}: {text}");
        let f = p.reader.parse(&out).unwrap();
        assert_eq!(f.worker_token_file, Some(want), "{name}");
        assert_eq!(f.files.len(), 1, "{name}");
        assert!(f.files[0].sha256.is_some(), "{name}: {:?}", f.files);
    }
    let p = probe_nowhere(&files, &[]);
    let f = p
        .reader
        .parse(&run_in_tmpdir(&p.command.argv, None))
        .unwrap();
    assert_eq!(f.worker_token_file, None);
    assert!(f.files[0].sha256.is_some());
}

/// A token file verdict of another shape is refused.
#[test]
fn token_file_verdict_is_parsed_strictly() {
    let p = probe_nowhere(&[], &[]).checking_token_file_at("/etc/k0s/k0stoken");
    let n = &p.reader.nonce;
    for (verdict, ok) in [
        ("decodes", true),
        ("missing", true),
        ("yes", false),
        ("", false),
    ] {
        let out = CommandOutput {
                status: Some(0),
                stdout: format!(
                    "{n} begin machine_id\n0123456789abcdef0123456789abcdef\n{n} end machine_id 0\n\
                     {n} begin token_file\n{verdict}\n{n} end token_file 0\n{n} done\n"
                )
                .into_bytes(),
                stderr: format!(
                    "{n} begin machine_id\n\n{n} end machine_id\n{n} begin token_file\n\n{n} end token_file\n"
                )
                .into_bytes(),
            };
        assert_eq!(p.reader.parse(&out).is_ok(), ok, "{verdict:?}");
    }
}

#[test]
fn files_section_reports_hash_mode_owner_or_missing() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let there = d.path().join("there.conf");
    std::fs::write(&there, "x\n").unwrap();
    std::fs::set_permissions(&there, std::fs::Permissions::from_mode(0o640)).unwrap();
    let files = vec![
        there.display().to_string(),
        d.path().join("gone").display().to_string(),
        d.path().display().to_string(), // a folder is not a file
    ];
    let p = probe_nowhere(&files, &[]);
    let out = Command::new(&p.command.argv[0])
        .args(&p.command.argv[1..])
        .output()
        .unwrap();
    let out = CommandOutput {
        status: out.status.code(),
        stdout: out.stdout,
        stderr: out.stderr,
    };
    let f = p.reader.parse(&out).unwrap();
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    assert_eq!(f.files.len(), 3);
    assert_eq!(f.files[0].path, files[0]);
    assert_eq!(
        f.files[0].sha256.as_deref(),
        Some(crate::hash::sha256_hex("x\n").as_str())
    );
    assert_eq!(f.files[0].mode, Some(0o640));
    assert_eq!(f.files[0].user.as_deref(), Some(me.trim()));
    let uid = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout).unwrap();
    assert_eq!(f.files[0].uid, uid.trim().parse().ok());
    assert!(f.files[0].owned_by(Some(uid.trim()), None));
    assert!(f.files[0].owned_by(Some(me.trim()), None));
    assert!(!f.files[0].owned_by(Some("nobody-else"), None));
    assert_eq!(f.files[1].sha256, None);
    assert_eq!(f.files[2].sha256, None);
    // A short answer is an error, not files taken for missing.
    assert!(parse_files(&files, "- \n-\n").is_err());
}

/// Run a command's argv locally.
fn run_locally(argv: &[String]) -> CommandOutput {
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    CommandOutput {
        status: out.status.code(),
        stdout: out.stdout,
        stderr: out.stderr,
    }
}

/// The probe reports the destinations that have staging files beside them, and the
/// cleanup (`cmdline::settle_leftovers`, the same search) removes exactly those files:
/// a link is removed without following it, a folder is left alone, the `files:` section
/// before it is unaffected.
#[test]
fn probe_reports_the_staging_files_the_cleanup_removes() {
    use std::os::unix::fs::symlink;
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    std::fs::write(p("victim"), "keep\n").unwrap();
    std::fs::write(p("app.conf"), "x\n").unwrap();
    let dests: Vec<String> = [
        "k0s", "k0s.yaml", "k0stoken", "app.conf", "clean", "odd dir", "dl",
    ]
    .iter()
    .map(|n| p(n))
    .collect();
    std::fs::write(p("k0s.k0sform-Xy34Zw"), "").unwrap();
    std::fs::write(p("k0s.k0sform-new"), "").unwrap();
    symlink(p("victim"), p("app.conf.k0sform-tmp")).unwrap();
    // A folder at a staging name is nobody's upload: not reported, not removed.
    std::fs::create_dir(p("clean.k0sform-new")).unwrap();
    // Names that only look alike (a longer random part) are not staging files.
    std::fs::write(p("odd dir.k0sform-1234567"), "").unwrap();
    std::fs::write(p("k0s.yaml.k0sform-Ab12Cd"), "").unwrap();
    // A download on the host that was cut off.
    std::fs::write(p("dl.k0sform-new.part"), "").unwrap();
    // An upload's private folder (root's, 0700) with its file is a leftover; a folder of
    // another mode at such a name is not this program's.
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(p("dl.k0sform-Pq12Rs")).unwrap();
    std::fs::write(p("dl.k0sform-Pq12Rs/f"), "half").unwrap();
    std::fs::set_permissions(
        p("dl.k0sform-Pq12Rs"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    // Under `cargo test` as an ordinary user that folder is the user's, not root's: kept.
    let private_is_roots = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p("dl.k0sform-Pq12Rs")).unwrap().uid() == 0
    };
    std::fs::create_dir(p("clean.k0sform-Ab12Cd")).unwrap();
    std::fs::set_permissions(
        p("clean.k0sform-Ab12Cd"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();

    let files = vec![p("app.conf"), p("gone")];
    let probe_now = || {
        let pc = probe_nowhere(&files, &dests);
        pc.reader.parse(&run_locally(&pc.command.argv)).unwrap()
    };
    let f = probe_now();
    assert_eq!(
        f.staging_leftovers,
        [p("k0s"), p("k0s.yaml"), p("app.conf"), p("dl")]
    );
    assert_eq!(f.files.len(), 2);
    assert!(f.files[0].sha256.is_some() && f.files[1].sha256.is_none());

    let settle = super::super::cmdline::settle_leftovers(&p("k0stoken"), None, &dests);
    let out = run_locally(&settle.argv);
    assert!(out.success(), "{}", out.stderr_str());
    let mut removed: Vec<String> = out.stdout_str().lines().map(String::from).collect();
    removed.sort();
    let mut want = vec![
        p("app.conf.k0sform-tmp"),
        p("k0s.k0sform-Xy34Zw"),
        p("k0s.k0sform-new"),
        p("k0s.yaml.k0sform-Ab12Cd"),
        p("dl.k0sform-new.part"),
    ];
    if private_is_roots {
        want.push(p("dl.k0sform-Pq12Rs"));
    }
    want.sort();
    assert_eq!(removed, want);
    assert_eq!(std::fs::read_to_string(p("victim")).unwrap(), "keep\n");
    assert!(std::path::Path::new(&p("clean.k0sform-new")).is_dir());
    assert!(std::path::Path::new(&p("clean.k0sform-Ab12Cd")).is_dir());
    assert_eq!(
        std::path::Path::new(&p("dl.k0sform-Pq12Rs")).exists(),
        !private_is_roots
    );
    assert!(std::path::Path::new(&p("odd dir.k0sform-1234567")).exists());
    assert_eq!(probe_now().staging_leftovers, Vec::<String>::new());
}

/// The probe reads the service environment from exactly the files `install_service`
/// manages: the unit and k0sctl's drop-in it removes, no other drop-in (issue 28, item 11).
#[test]
fn the_probe_reads_the_dropin_install_removes_and_no_other() {
    assert!(SCRIPT.contains("\nk0sctl_dropin=env.conf\n"));
    assert!(SCRIPT.contains(r#""/etc/systemd/system/$u.service.d/$k0sctl_dropin""#));
    assert!(!SCRIPT.contains(".service.d\"/*"), "every drop-in is read");
    for kind in [ServiceKind::Controller, ServiceKind::Worker] {
        assert!(super::super::cmdline::k0sctl_env_dropin(kind).ends_with(".service.d/env.conf"));
    }
}

#[test]
fn staging_report_is_parsed_strictly() {
    let dests: Vec<String> = ["/a", "/b c", "/d"].iter().map(|s| s.to_string()).collect();
    assert_eq!(parse_staging(&dests, ""), Ok(vec![]));
    assert_eq!(
        parse_staging(&dests, "0\n2\n"),
        Ok(vec!["/a".to_string(), "/d".to_string()])
    );
    assert_eq!(parse_staging(&dests, "1"), Ok(vec!["/b c".to_string()]));
    for hostile in [
        "3",
        "99999999999999999999999999",
        "1\n0",
        "1\n1",
        "01",
        "+1",
        "-1",
        " 1",
        "1 ",
        "1 /etc/passwd",
        "/etc/passwd",
        "0\n\u{1b}[2Kcleaned up",
    ] {
        let err = parse_staging(&dests, hostile).unwrap_err();
        assert!(
            err.starts_with("the probe's report of staging files has the line"),
            "{hostile:?}: {err}"
        );
        assert!(!err.contains('\u{1b}'), "{err}");
    }
    // Through the whole parser: a hostile line fails the probe, so does a missing report.
    let base = [("machine_id", 0, "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3\n", "")];
    let with = |body: &'static str| {
        let mut v = base.to_vec();
        v.push(("staging", 0, body, ""));
        framed(&v, true)
    };
    let f = parse_probe(&with("1"), NONCE, &[], &dests).unwrap();
    assert_eq!(f.staging_leftovers, ["/b c"]);
    let err = parse_probe(&with("7"), NONCE, &[], &dests).unwrap_err();
    assert!(matches!(err, ProbeError::Host(_)), "{err:?}");
    assert!(err.to_string().contains("staging files"), "{err}");
    let err = parse_probe(&framed(&base, true), NONCE, &[], &dests).unwrap_err();
    assert_eq!(err.to_string(), "the probe did not report on staging files");
    let mut failed = base.to_vec();
    failed.push(("staging", 1, "", "sh: boom"));
    assert!(parse_probe(&framed(&failed, true), NONCE, &[], &dests).is_err());
    // Not asked: whatever a host prints there is ignored.
    assert_eq!(
        parse_probe(&with("7"), NONCE, &[], &[])
            .unwrap()
            .staging_leftovers,
        Vec::<String>::new()
    );
}

fn run_script(bin: &str, dd: &str, view: bool, cfg: &str) -> Result<HostFacts, ProbeError> {
    let (out, p) = probe_locally(bin, dd, view, cfg);
    p.reader.parse(&out)
}

/// A fake k0s (shell script) answering like a running controller, for running the real
/// probe script locally.
fn fake_k0s(dir: &std::path::Path, status_json: &str) -> String {
    let bin = dir.join("k0s");
    let script = format!(
        r#"#!/bin/sh
# With {dir}/together: `together ME OTHER` marks ME as started and returns once OTHER has
# started too (at most 3 s): the two only pass when they run at the same time.
together() {{
  [ -e "{dir}/together" ] || return 0
  : > "{dir}/started-$1"
  i=0
  while [ ! -e "{dir}/started-$2" ]; do
    i=$((i + 1)); [ "$i" -gt 30 ] && {{ echo "Error: $1 ran without $2" >&2; return 1; }}
    sleep 0.1
  done
}}
case "$1" in
  version) echo called >>"{calls}"; echo v1.33.4+k0s.0 ;;
  status) cat <<'EOF'
{status_json}
EOF
  ;;
  config) echo "$*" >>"{dir}/config-calls" ;;
  etcd)
    together etcd kubectl || exit 1
    [ -e "{dir}/kine" ] && {{ echo 'Error: wrong storage type: kine' >&2; exit 1; }}
    echo '{{"members":{{"c0":"https://127.0.0.10:2380","c1":"https://127.0.0.11:2380"}}}}' ;;
  kubectl)
    together kubectl etcd || exit 1
    shift
    [ "$KUBECONFIG" = "{dd}/pki/admin.conf" ] || {{ echo "Error: bad KUBECONFIG" >&2; exit 1; }}
    echo "$2" >>"{dir}/kubectl-calls"
    case "$2" in
      etcdmembers.etcd.k0sproject.io,namespaces,nodes,controlnodes.autopilot.k0sproject.io)
        [ -e "{dir}/kine" ] && {{ echo 'error: the server doesn'\''t have a resource type "etcdmembers"' >&2; exit 1; }}
        [ -e "{dir}/combined" ] || {{ echo 'error: the server doesn'\''t have a resource type "controlnodes"' >&2; exit 1; }}
        cat "{dir}/combined" ;;
      namespaces,nodes,controlnodes.autopilot.k0sproject.io) cat "{dir}/combined" ;;
      etcdmembers.etcd.k0sproject.io) echo '{{"items":[{{"metadata":{{"name":"c0"}},"status":{{"peerAddress":"127.0.0.10","memberID":"8e9e05c52164694d","conditions":[{{"type":"Joined","status":"True"}}]}}}},{{"metadata":{{"name":"c1"}},"status":{{"peerAddress":"127.0.0.99","memberID":"1111111111111111"}}}}]}}' ;;
      namespace) echo '{{"metadata":{{"name":"kube-system","uid":"7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"}}}}' ;;
      nodes) echo '{{"items":[{{"metadata":{{"name":"c0"}},"status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}]}}' ;;
      controlnodes.autopilot.k0sproject.io) echo "Error from server: the server could not find the requested resource" >&2; exit 1 ;;
    esac ;;
esac
"#,
        dd = dir.join("data").display(),
        dir = dir.display(),
        calls = dir.join("version-calls").display()
    );
    std::fs::write(&bin, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin.display().to_string()
}

/// A real k0s binary is a few hundred MB: the probe hashes it only when its `stat` line is
/// not the recorded one, and then the record's hash stands for it.
#[test]
fn binary_is_hashed_only_when_its_stat_line_changed() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_k0s(dir.path(), RUNNING);
    let run = |known: Option<&BinaryRecord>| {
        let pc = probe(&bin, "/nonexistent", false, None, known, &[], &[]);
        let out = run_locally(&pc.command.argv);
        assert!(out.success(), "{}", out.stderr_str());
        let hashed = String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.ends_with(" begin binary_sha256"));
        (pc.reader.parse(&out).unwrap(), hashed)
    };
    let (first, hashed) = run(None);
    assert!(hashed, "nothing recorded: hashed");
    let rec = first.binary_record().expect("a hash and a stat line");
    assert!(crate::state::is_binary_stat(&rec.stat), "{}", rec.stat);

    let (again, hashed) = run(Some(&rec));
    assert!(!hashed, "an unchanged binary was hashed again");
    assert_eq!(again.binary_record(), Some(rec.clone()));

    // The same bytes written again, the modification time set back: the change time moved.
    let bytes = std::fs::read(&bin).unwrap();
    let mtime = std::fs::metadata(&bin).unwrap().modified().unwrap();
    std::fs::write(&bin, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&bin)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (rewritten, hashed) = run(Some(&rec));
    assert!(hashed, "a rewritten binary was not hashed");
    assert_eq!(rewritten.k0s_binary_sha256, Some(rec.sha256.clone()));
    assert_ne!(rewritten.k0s_binary_stat, Some(rec.stat.clone()));

    // Other bytes: another hash, never the record's.
    std::fs::write(&bin, [bytes.as_slice(), b"# patched\n"].concat()).unwrap();
    let (patched, hashed) = run(Some(&rec));
    assert!(hashed);
    assert_ne!(patched.k0s_binary_sha256, Some(rec.sha256.clone()));
    assert!(patched.k0s_binary_sha256.is_some());
}

const RUNNING: &str = r#"{
   "Version": "v1.33.4+k0s.0",
   "Pid": 42,
   "Role": "controller",
   "Workloads": false,
   "SingleNode": false,
   "Args": ["/usr/local/bin/k0s", "controller", "--config=/etc/k0s/k0s.yaml"],
   "ClusterConfig": {"spec": {"storage": {"etcd": {"peerAddress": "127.0.0.10"}}}}
}"#;

#[test]
fn k0s_defaults_are_asked_for_only_when_the_config_is_not_the_one_k0sform_writes() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_k0s(dir.path(), RUNNING);
    let dd = dir.path().join("data");
    let cfg = dir.path().join("k0s.yaml");
    let text = "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\n";
    std::fs::write(&cfg, text).unwrap();
    let calls = dir.path().join("config-calls");
    let same = crate::hash::sha256_hex(text);
    let (dd, cfg) = (dd.to_str().unwrap(), cfg.to_str().unwrap());
    let (out, p) = probe_locally_wanting(&bin, dd, false, cfg, Some(&same));
    let f = p.reader.parse(&out).unwrap();
    assert_eq!(f.config_sha256.as_deref(), Some(same.as_str()));
    assert_eq!(f.config_defaults, None);
    assert!(
        !calls.exists(),
        "`k0s config create` ran for the file k0sform writes"
    );
    let other = crate::hash::sha256_hex("something else");
    let (out, p) = probe_locally_wanting(&bin, dd, false, cfg, Some(&other));
    p.reader.parse(&out).unwrap();
    assert_eq!(std::fs::read_to_string(&calls).unwrap(), "config create\n");
}

#[test]
fn probe_script_on_a_running_controller() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_k0s(dir.path(), RUNNING);
    let dd = dir.path().join("data");
    std::fs::create_dir_all(dd.join("etcd/member/snap")).unwrap();
    std::fs::write(dd.join("etcd/member/snap/db"), "").unwrap();
    let cfg = dir.path().join("k0s.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\n'quoted': \"$(x)\"\n",
    )
    .unwrap();
    let (out, p) = probe_locally(&bin, dd.to_str().unwrap(), true, cfg.to_str().unwrap());
    assert!(out.success(), "{}", out.stderr_str());
    assert!(
        !dir.path().join("version-calls").exists(),
        "`k0s version` ran although the status named the version"
    );
    // The combined kubectl failed (no controlnodes type): one list at a time.
    let calls = std::fs::read_to_string(dir.path().join("kubectl-calls")).unwrap();
    assert_eq!(calls.lines().count(), 5, "{calls}");
    let f = p.reader.parse(&out).unwrap();
    assert!(!f.machine_id.is_empty());
    assert!(!f.hostname.is_empty());
    assert!(!f.arch.is_empty());
    assert_eq!(
        f.k0s_version.as_ref().map(ToString::to_string).as_deref(),
        Some("v1.33.4+k0s.0")
    );
    assert_eq!(f.k0s_binary_sha256.as_ref().map(String::len), Some(64));
    assert!(f.has_etcd_data);
    assert_eq!(
        f.config_text.as_deref(),
        Some("apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\n'quoted': \"$(x)\"\n")
    );
    {
        let want = crate::hash::sha256_hex(std::fs::read(&cfg).unwrap());
        assert_eq!(f.config_sha256.as_deref(), Some(want.as_str()));
    }
    let st = f.status.as_ref().unwrap();
    assert_eq!((st.pid, st.role.as_str()), (42, "controller"));
    assert_eq!(st.peer_address.as_deref(), Some("127.0.0.10"));
    let v = f.view.as_ref().unwrap();
    assert_eq!(
        v.cluster_uid.as_deref(),
        Some("7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f")
    );
    assert_eq!(
        v.members,
        vec![
            MemberView {
                name: "c0".into(),
                peer_url: "https://127.0.0.10:2380".into(),
                member_id: Some("8e9e05c52164694d".into()),
                invocation: None,
            },
            // The c1 object's peer address does not match: a stale object gives no ID.
            MemberView {
                name: "c1".into(),
                peer_url: "https://127.0.0.11:2380".into(),
                member_id: None,
                invocation: None,
            },
        ]
    );
    assert_eq!(v.nodes.len(), 1);
    assert!(v.nodes[0].ready);
    assert!(v.control_nodes.is_empty());
    assert_eq!(v.errors.len(), 1, "{:?}", v.errors);
    assert!(
        v.errors[0].starts_with("controlnodes: Error from server"),
        "{:?}",
        v.errors
    );
}

#[test]
fn probe_script_without_view_or_without_binary() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_k0s(dir.path(), RUNNING);
    let f = run_script(&bin, "/nonexistent", false, "/nonexistent/k0s.yaml").unwrap();
    assert!(f.status.is_some());
    assert!(f.view.is_none(), "view not asked for");
    assert!(!f.has_etcd_data);
    assert_eq!(f.config_text, None);

    let f = run_script(
        "/nonexistent/k0s",
        "/nonexistent",
        true,
        "/nonexistent/k0s.yaml",
    )
    .unwrap();
    assert_eq!(f.k0s_version, None);
    assert_eq!(f.k0s_binary_sha256, None);
    assert_eq!(f.status, None);
    assert!(f.view.is_none());
}

#[test]
fn worker_and_stopped_hosts_get_no_view() {
    let dir = tempfile::tempdir().unwrap();
    let worker = RUNNING.replace(r#""Role": "controller""#, r#""Role": "worker""#);
    let bin = fake_k0s(dir.path(), &worker);
    let f = run_script(&bin, "/x", true, "/x/k0s.yaml").unwrap();
    assert_eq!(f.status.as_ref().map(|s| s.role.as_str()), Some("worker"));
    assert_eq!(
        f.k0s_version.as_ref().map(ToString::to_string).as_deref(),
        Some("v1.33.4+k0s.0")
    );
    assert!(
        !dir.path().join("version-calls").exists(),
        "worker: version ran"
    );
    assert!(f.view.is_none());

    let stopped = dir.path().join("stopped");
    std::fs::create_dir(&stopped).unwrap();
    let bin = stopped.join("k0s");
    std::fs::write(
            &bin,
            "#!/bin/sh\n[ \"$1\" = version ] && { echo v1.33.4+k0s.0; exit 0; }\necho 'Error: status: can'\\''t get \"status\" via \"/run/k0s/status.sock\": Get \"http://localhost/status\": dial unix /run/k0s/status.sock: connect: no such file or directory' >&2\nexit 1\n",
        )
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = run_script(bin.to_str().unwrap(), "/x", true, "/x/k0s.yaml").unwrap();
    assert_eq!(
        f.k0s_version.as_ref().map(ToString::to_string).as_deref(),
        Some("v1.33.4+k0s.0")
    );
    assert_eq!(f.status, None);
    assert!(f.view.is_none());
}

/// A kine controller: k0s refuses `k0s etcd member-list` (`wrong storage type: kine`) and
/// has no EtcdMember CRD. The view has no members and no errors: the kubectl that ran beside
/// the member list is refused for the EtcdMember type, and one more leaves it out.
#[test]
fn kine_controller_has_no_members_and_no_errors() {
    let dir = tempfile::tempdir().unwrap();
    let status = RUNNING.replace(
            r#""ClusterConfig": {"spec": {"storage": {"etcd": {"peerAddress": "127.0.0.10"}}}}"#,
            r#""ClusterConfig": {"spec": {"storage": {"type": "kine", "kine": {"dataSource": "sqlite:///var/lib/k0s/db/state.db"}}}}"#,
        );
    let bin = fake_k0s(dir.path(), &status);
    std::fs::write(dir.path().join("kine"), "").unwrap();
    std::fs::write(
            dir.path().join("combined"),
            r#"{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system","uid":"7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"}},
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"s1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}},
 {"apiVersion":"autopilot.k0sproject.io/v1beta2","kind":"ControlNode","metadata":{"name":"s1"}}
]}"#,
        )
        .unwrap();
    let dd = dir.path().join("data");
    let f = run_script(&bin, dd.to_str().unwrap(), true, "/x/k0s.yaml").unwrap();
    assert!(f.runs_kine());
    let calls = std::fs::read_to_string(dir.path().join("kubectl-calls")).unwrap();
    assert_eq!(
        calls.trim(),
        format!("{CLUSTER_OBJECTS}\nnamespaces,nodes,controlnodes.autopilot.k0sproject.io")
    );
    let v = f.view.unwrap();
    assert_eq!(v.errors, Vec::<String>::new());
    assert!(v.members.is_empty());
    assert_eq!(
        v.cluster_uid.as_deref(),
        Some("7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f")
    );
    assert_eq!(v.control_nodes, ["s1"]);

    // Any other member-list failure is still an error of the view.
    std::fs::remove_file(dir.path().join("kine")).unwrap();
    std::fs::write(dir.path().join("combined"), r#"{"kind":"List","items":[]}"#).unwrap();
    let bin2 = dir.path().join("k0s");
    let text = std::fs::read_to_string(&bin2).unwrap().replace(
        "  etcd)\n",
        "  etcd)\n    echo 'Error: wrong storage type: etcd2' >&2; exit 1\n",
    );
    std::fs::write(&bin2, text).unwrap();
    let v = run_script(&bin, dd.to_str().unwrap(), true, "/x/k0s.yaml")
        .unwrap()
        .view
        .unwrap();
    assert!(
        v.errors.iter().any(|e| e.starts_with("member-list")),
        "{:?}",
        v.errors
    );
}

/// The member list and the objects' kubectl run at the same time (the fake lets each pass
/// only once the other has started), and both land in their sections.
#[test]
fn member_list_runs_beside_the_objects_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_k0s(dir.path(), RUNNING);
    std::fs::write(dir.path().join("combined"), r#"{"kind":"List","items":[]}"#).unwrap();
    std::fs::write(dir.path().join("together"), "").unwrap();
    let dd = dir.path().join("data");
    let tmp = tempfile::tempdir().unwrap();
    let p = probe(&bin, dd.to_str().unwrap(), true, None, None, &[], &[]);
    let argv = &p.command.argv;
    let out = run_in_tmpdir(argv, Some(tmp.path()));
    let v = p.reader.parse(&out).unwrap().view.unwrap();
    // Only the uid is missing from the empty list: both queries passed.
    assert_eq!(v.members.len(), 2, "{:?}", v.errors);
    assert!(
        v.errors.len() == 1 && v.errors[0].starts_with("kube-system uid:"),
        "{:?}",
        v.errors
    );
    // The member list's temp folder is gone.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);

    // Without a temp folder they run one after the other (and the fake refuses that).
    for m in ["started-etcd", "started-kubectl"] {
        std::fs::remove_file(dir.path().join(m)).unwrap();
    }
    let out = run_in_tmpdir(argv, Some(&dir.path().join("missing")));
    let stderr = out.stderr_str();
    assert!(stderr.contains("ran without"), "{stderr}");
}

/// Issue 28, item 6: the probe that lists the cluster's objects takes as much output as
/// 5,000 Nodes make; the others keep the default limit.
#[test]
fn the_view_has_room_for_every_node() {
    let with = probe("/k0s", "/var/lib/k0s", true, None, None, &[], &[]);
    assert_eq!(
        with.command.output_limit,
        super::super::cmdline::NODE_LISTING_LIMIT
    );
    let without = probe("/k0s", "/var/lib/k0s", false, None, None, &[], &[]);
    assert_eq!(without.command.output_limit, crate::transport::OUTPUT_LIMIT);
}

#[test]
fn one_kubectl_for_the_cluster_objects() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_k0s(dir.path(), RUNNING);
    std::fs::write(
            dir.path().join("combined"),
            r#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[
 {"apiVersion":"etcd.k0sproject.io/v1beta1","kind":"EtcdMember","metadata":{"name":"c1"},"status":{"peerAddress":"127.0.0.11","memberID":"1111111111111111"}},
 {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default","uid":"00000000-0000-0000-0000-000000000000"}},
 {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system","uid":"7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"}},
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"w1"},"status":{"conditions":[{"type":"Ready","status":"False"}]}},
 {"apiVersion":"autopilot.k0sproject.io/v1beta2","kind":"ControlNode","metadata":{"name":"c1"}}
]}"#,
        )
        .unwrap();
    let dd = dir.path().join("data");
    let dd = dd.to_str().unwrap();
    let f = run_script(&bin, dd, true, "/x/k0s.yaml").unwrap();
    let calls = std::fs::read_to_string(dir.path().join("kubectl-calls")).unwrap();
    assert_eq!(calls.trim(), CLUSTER_OBJECTS, "one kubectl only");
    let v = f.view.unwrap();
    assert_eq!(v.errors, Vec::<String>::new());
    assert_eq!(
        v.cluster_uid.as_deref(),
        Some("7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f")
    );
    assert_eq!(v.members.len(), 2);
    assert_eq!(v.members[1].member_id.as_deref(), Some("1111111111111111"));
    assert_eq!(v.members[0].member_id, None);
    assert_eq!((v.nodes.len(), v.nodes[0].ready), (1, false));
    assert_eq!(v.control_nodes, vec!["c1".to_string()]);

    // A list without kube-system is an error of the uid, not of the whole view.
    std::fs::write(
        dir.path().join("combined"),
        r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"w1"}}]}"#,
    )
    .unwrap();
    let v = run_script(&bin, dd, true, "/x/k0s.yaml")
        .unwrap()
        .view
        .unwrap();
    assert_eq!(v.cluster_uid, None);
    assert_eq!(v.nodes.len(), 1);
    assert!(
        v.errors[0].starts_with("kube-system uid:"),
        "{:?}",
        v.errors
    );
}

#[test]
fn a_host_named_like_a_flag_fails_its_probe() {
    for name in ["--all", "c1\x1b[2K", "token: x"] {
        let out = framed(
            &[
                ("machine_id", 0, "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3\n", ""),
                ("hostname", 0, name, ""),
            ],
            true,
        );
        let err = parse_probe(&out, NONCE, &[], &[]).unwrap_err();
        assert!(
            err.to_string().contains("not a valid Kubernetes node name"),
            "{err}"
        );
    }
}

#[test]
fn unexplained_status_failure_is_an_error_not_stopped() {
    let out = framed(
        &[
            ("machine_id", 0, "abc\n", ""),
            ("status", 1, "", "Error: permission denied\n"),
        ],
        true,
    );
    let err = parse_probe(&out, NONCE, &[], &[]).unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
}

fn object(name: &str, addr: Option<&str>, id: &str, joined: Option<bool>) -> EtcdMemberObject {
    EtcdMemberObject {
        name: name.into(),
        member_id: Some(id.into()),
        peer_address: addr.map(String::from),
        joined,
        leave: false,
        invocation: None,
    }
}

#[test]
fn members_get_their_ids_by_peer_address_whatever_the_names() {
    // etcd keeps the hostname's case; the EtcdMember of k0s ≥ 1.34.1 is lower-cased.
    let list = BTreeMap::from([
        ("Ctl-A".to_string(), "https://10.0.0.1:2380".to_string()),
        ("Ctl-B".to_string(), "https://10.0.0.2:2380".to_string()),
        ("c3".to_string(), "https://10.0.0.3:2380".to_string()),
        (String::new(), "https://10.0.0.4:2380".to_string()),
    ]);
    let objects = vec![
        object("ctl-a", Some("10.0.0.1"), "a1", Some(true)),
        // Left, kept after leaving; the current one wins.
        object("ctl-b-old", Some("10.0.0.2"), "b0", Some(false)),
        object("ctl-b", Some("10.0.0.2"), "b1", Some(true)),
        // Same name, another address: a stale object of the host's previous life.
        object("c3", Some("10.0.0.99"), "c0", None),
        // Not reconciled yet (no peer address): matched by name, ignoring case.
        object("C3", None, "c1", None),
    ];
    let m = merge_members(&list, &objects);
    let id = |url: &str| {
        m.iter()
            .find(|v| v.peer_url == url)
            .and_then(|v| v.member_id.clone())
    };
    assert_eq!(id("https://10.0.0.1:2380").as_deref(), Some("a1"));
    assert_eq!(id("https://10.0.0.2:2380").as_deref(), Some("b1"));
    assert_eq!(id("https://10.0.0.3:2380").as_deref(), Some("c1"));
    assert_eq!(id("https://10.0.0.4:2380"), None, "unstarted, no object");
}
