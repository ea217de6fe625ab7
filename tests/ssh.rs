//! `SshTransport` against real OpenSSH servers: each test starts its own `sshd` on a unique
//! loopback address (127.201-250.x.y) with its own host key and an authorized test key.

use k0sform::hostid::HostId;
use k0sform::spec::SshTarget;
use k0sform::ssh::{SshOptions, SshTransport};
use k0sform::transport::{FileAttrs, RemoteCommand, Transport, TransportError};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::prereq::require_lab;
use crate::support::sshd::*;

fn transport() -> SshTransport {
    SshTransport::new(SshOptions::default()).unwrap()
}

/// ssh processes whose command line mentions the transport's private directory.
fn ssh_processes(t: &SshTransport) -> Vec<String> {
    let out = Command::new("pgrep")
        .arg("-af")
        .arg(t.control_dir().to_str().unwrap())
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn cmd(argv: &[&str]) -> RemoteCommand {
    RemoteCommand::new(argv.iter().copied()).timeout(Duration::from_secs(20))
}

/// A transport already connected to `sshd` as `user` (first contact: no recorded key).
async fn connected(sshd: &Sshd, user: &str) -> SshTransport {
    let t = transport();
    t.connect(&sshd.id(), &sshd.target(user), None, false, &[])
        .await
        .unwrap();
    t
}

/// `sshd`'s root target with its host key pinned to `fingerprint` (`ssh.hostKey`).
fn pinned(sshd: &Sshd, fingerprint: &str) -> SshTarget {
    let mut target = sshd.target("root");
    target.host_key = Some(fingerprint.to_string());
    target
}

/// The permission bits of a local file.
fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Whether this machine has the lab's sudo user `k0slab`.
fn has_sudo_user() -> bool {
    Command::new("id")
        .arg("k0slab")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether every process whose command line matches `pattern` is gone within `limit`.
fn processes_end_within(pattern: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let out = Command::new("pgrep")
            .arg("-f")
            .arg(pattern)
            .output()
            .unwrap();
        if out.stdout.is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_commands_with_exit_codes_output_and_stdin_over_one_connection() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;

    let out = t
        .run(
            &sshd.id(),
            cmd(&["sh", "-c", "echo out; echo err >&2; exit 3"]),
        )
        .await
        .unwrap();
    assert_eq!(out.status, Some(3));
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");

    let out = t
        .run(
            &sshd.id(),
            cmd(&["cat"]).stdin(b"from stdin\n\0binary".to_vec()),
        )
        .await
        .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout, b"from stdin\n\0binary");

    let out = t
        .run(&sshd.id(), cmd(&["/nonexistent/k0s", "version"]))
        .await
        .unwrap();
    assert_eq!(out.status, Some(127), "missing binary is the shell's 127");
    // Exit 255 is the command's own; a command killed by a signal has no exit code, and the
    // connection stays usable after both.
    let out = t
        .run(&sshd.id(), cmd(&["sh", "-c", "echo partial; exit 255"]))
        .await
        .unwrap();
    assert_eq!(
        (out.status, out.stdout.as_slice()),
        (Some(255), &b"partial\n"[..])
    );
    let out = t
        .run(&sshd.id(), cmd(&["sh", "-c", "kill -9 $$"]))
        .await
        .unwrap();
    assert_eq!(out.status, None, "{out:?}");

    let out = t
        .run(
            &sshd.id(),
            cmd(&["printenv", "K0SFORM_TEST"]).env("K0SFORM_TEST", "a b'c"),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, b"a b'c\n");

    // Many commands, more at once than sshd's MaxSessions (10): all succeed, one SSH login.
    let mut tasks = Vec::new();
    for i in 0..24 {
        let t = t.clone();
        let id = sshd.id();
        tasks.push(tokio::spawn(async move {
            t.run(
                &id,
                cmd(&["sh", "-c", "sleep 0.2; echo $0", &i.to_string()]),
            )
            .await
            .unwrap()
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap().stdout_str(), format!("{i}\n"));
    }
    assert_eq!(sshd.accepted_logins(), 1, "{}", sshd.log());

    assert!(
        !ssh_processes(&t).is_empty(),
        "the master runs while connected"
    );
    t.close_all().await;
    assert_eq!(ssh_processes(&t), Vec::<String>::new());
    assert!(
        std::fs::read_dir(t.control_dir())
            .unwrap()
            .filter_map(Result::ok)
            .all(|e| !e.file_name().to_string_lossy().ends_with(".sock")),
        "no control socket left"
    );
    let err = t.run(&sshd.id(), cmd(&["true"])).await.unwrap_err();
    assert!(err.to_string().contains("not connected"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_arguments_arrive_byte_for_byte() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    let marker = sshd.path("pwned");
    let m = marker.display();
    let hostile = [
        format!("; touch {m}"),
        format!("$(touch {m})"),
        format!("`touch {m}`"),
        format!("' ; touch {m} ; '"),
        format!("\" ; touch {m} ; \""),
        format!("a\ntouch {m}\n"),
        "$HOME ${PATH} * ~ \\ | & > < ( ) { } [ ] ! # %".to_string(),
        "'\"'\"''".to_string(),
        String::new(),
    ];
    for h in &hostile {
        let out = t.run(&sshd.id(), cmd(&["printf", "%s", h])).await.unwrap();
        assert!(out.success(), "{h:?}: {}", out.stderr_str());
        assert_eq!(out.stdout, h.as_bytes(), "round trip of {h:?}");
    }
    assert!(!marker.exists(), "a hostile argument ran a command");
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn first_contact_records_the_key_and_later_runs_check_it() {
    require_lab!();
    let sshd = Sshd::start();
    let t = transport();
    let info = t
        .connect(&sshd.id(), &sshd.target("root"), None, false, &[])
        .await
        .unwrap();
    assert_eq!(info.fingerprint, sshd.host_fingerprint());
    assert_eq!(info.public_key, sshd.host_public_key());
    assert!(info.first_contact);
    t.close_all().await;

    // Next run: the recorded key is trusted, nothing new.
    let t2 = transport();
    let info2 = t2
        .connect(
            &sshd.id(),
            &sshd.target("root"),
            Some(&info.public_key),
            false,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(info2.fingerprint, info.fingerprint);
    assert!(!info2.first_contact);
    // The pin, when it matches, is fine too.
    t2.close_all().await;
    let t3 = transport();
    t3.connect(
        &sshd.id(),
        &pinned(&sshd, &info.fingerprint),
        Some(&info.public_key),
        false,
        &[],
    )
    .await
    .unwrap();
    t3.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn changed_host_key_is_refused_with_both_fingerprints_unless_accepted() {
    require_lab!();
    let mut sshd = Sshd::start();
    let old_key = sshd.host_public_key();
    let old_fp = sshd.host_fingerprint();
    sshd.rebuild();
    let new_fp = sshd.host_fingerprint();
    assert_ne!(old_fp, new_fp);

    let t = transport();
    let err = t
        .connect(&sshd.id(), &sshd.target("root"), Some(&old_key), false, &[])
        .await
        .unwrap_err();
    match &err {
        TransportError::HostKeyChanged {
            host,
            expected,
            offered,
        } => {
            assert_eq!(host, &sshd.id());
            assert_eq!(expected, &old_fp);
            assert_eq!(offered, &new_fp);
        }
        other => panic!("expected HostKeyChanged, got {other:?}"),
    }
    assert_eq!(sshd.accepted_logins(), 0, "no login with a changed key");
    assert!(t.connected(&sshd.id()).is_none());
    assert_eq!(ssh_processes(&t), Vec::<String>::new());

    // -replace: the old key is dropped, the new one trusted.
    let info = t
        .connect(&sshd.id(), &sshd.target("root"), Some(&old_key), true, &[])
        .await
        .unwrap();
    assert_eq!(info.fingerprint, new_fp);
    assert!(info.first_contact);
    t.close_all().await;

    // A pin of the new key together with accept_changed: accepted.
    let t2 = transport();
    let info = t2
        .connect(
            &sshd.id(),
            &pinned(&sshd, &new_fp),
            Some(&old_key),
            true,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(info.fingerprint, new_fp);
    t2.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pin_mismatch_is_refused_before_any_command() {
    require_lab!();
    let sshd = Sshd::start();
    let t = transport();
    let wrong = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".to_string();
    let err = t
        .connect(&sshd.id(), &pinned(&sshd, &wrong), None, false, &[])
        .await
        .unwrap_err();
    match err {
        TransportError::HostKeyChanged {
            expected, offered, ..
        } => {
            assert_eq!(expected, wrong);
            assert_eq!(offered, sshd.host_fingerprint());
        }
        other => panic!("expected HostKeyChanged, got {other:?}"),
    }
    // The session is gone: nothing can be run on the host.
    assert!(t.connected(&sshd.id()).is_none());
    let err = t.run(&sshd.id(), cmd(&["true"])).await.unwrap_err();
    assert!(err.to_string().contains("not connected"));
    assert_eq!(ssh_processes(&t), Vec::<String>::new());
    // Nothing but the login itself reached sshd: no session channel was opened.
    let log = sshd.log();
    assert!(
        !log.contains("session opened") && !log.contains("Starting session"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unreachable_host_fails_fast() {
    let (address, port) = free_address();
    let t = transport();
    let target = SshTarget::new(address.clone(), port);
    let started = Instant::now();
    let err = t
        .connect(&HostId::new(address, port), &target, None, false, &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TransportError::Unreachable { message, .. } if message.contains("Connection refused")),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(ssh_processes(&t), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn command_timeout_is_typed_and_kills_the_remote_command() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    let started = Instant::now();
    let err = t
        .run(
            &sshd.id(),
            RemoteCommand::new(["sleep", "4711"]).timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
    match &err {
        TransportError::Timeout {
            host,
            command,
            secs,
        } => {
            assert_eq!(host, &sshd.id());
            assert_eq!(command, "sleep 4711");
            assert_eq!(*secs, 2);
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(6));
    let left = Command::new("pgrep")
        .args(["-f", "^sleep 4711$"])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "remote command still running");
    // The connection is still usable.
    let out = t.run(&sshd.id(), cmd(&["echo", "ok"])).await.unwrap();
    assert_eq!(out.stdout, b"ok\n");
    t.close_all().await;
}

/// Issue 28, item 6: `run_into` streams a stdout larger than the 16 MiB that `run` holds into a
/// writer, with its size and sha256, and stops at the command's own limit.
#[tokio::test(flavor = "multi_thread")]
async fn large_output_streams_into_a_writer_up_to_its_own_limit() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    let big = cmd(&["sh", "-c", "yes k0sform | head -c 20000000"]).output_limit(20_000_000);
    let mut out = Vec::new();
    let got = t.run_into(&sshd.id(), big.clone(), &mut out).await.unwrap();
    assert_eq!((got.status, got.bytes), (Some(0), 20_000_000));
    assert_eq!(out.len(), 20_000_000);
    assert_eq!(got.sha256, k0sform::hash::sha256_hex(&out));
    assert!(out.starts_with(b"k0sform\nk0sform\n"));
    // One byte over its limit: an error, and no more than the limit was written.
    let mut out = Vec::new();
    let err = t
        .run_into(&sshd.id(), big.output_limit(19_999_999), &mut out)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than"), "{err}");
    assert!(out.len() < 20_000_000, "{}", out.len());
    let out = t.run(&sshd.id(), cmd(&["echo", "ok"])).await.unwrap();
    assert_eq!(out.stdout, b"ok\n");
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn write_file_and_upload_are_atomic_and_checked() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    // Paths with spaces and quotes: quoting must hold here too.
    let target_dir = sshd.path("it's a dir");
    let dest = target_dir.join("k0s token");
    t.write_file(
        &sshd.id(),
        dest.to_str().unwrap(),
        b"secret\n".to_vec(),
        &FileAttrs::mode(0o600),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"secret\n");
    assert_eq!(mode_of(&dest), 0o600);
    // Overwrite in place, new mode.
    t.write_file(
        &sshd.id(),
        dest.to_str().unwrap(),
        b"v2".to_vec(),
        &FileAttrs::mode(0o644),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"v2");
    assert_eq!(mode_of(&dest), 0o644);
    let leftovers: Vec<_> = std::fs::read_dir(&target_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("k0sform"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // upload_file: 3 MiB of non-trivial bytes.
    let local = sshd.path("local-bin");
    let data: Vec<u8> = (0..3 * 1024 * 1024u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    std::fs::write(&local, &data).unwrap();
    let expect_sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&data))
    };
    let remote = target_dir.join("bin/k0s");
    let remote_s = remote.to_str().unwrap();
    let up = t
        .upload_file_report(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert_eq!(up.sha256, expect_sha);
    assert!(!up.skipped);
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    assert_eq!(mode_of(&remote), 0o755);
    assert!(no_staging_files(remote.parent().unwrap()));
    // Same content again: skipped, nothing sent.
    let mtime = std::fs::metadata(&remote).unwrap().modified().unwrap();
    let same = t
        .upload_file_report(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert!(same.skipped);
    assert_eq!(
        std::fs::metadata(&remote).unwrap().modified().unwrap(),
        mtime
    );
    // Same content, other mode: still nothing sent, the mode is set on a copy made on the host.
    std::fs::set_permissions(&remote, std::fs::Permissions::from_mode(0o700)).unwrap();
    let up2 = t
        .upload_file_report(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert!(up2.skipped);
    assert_eq!(up2.sha256, expect_sha);
    assert_eq!(mode_of(&remote), 0o755);
    assert!(no_staging_files(remote.parent().unwrap()));
    // Changed remote content: uploaded again.
    std::fs::write(&remote, b"tampered").unwrap();
    let up3 = t
        .upload_file_report(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert!(!up3.skipped);
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    // Through the trait (what the generic executor calls): the sha256 of what is now there.
    std::fs::write(&remote, b"tampered again").unwrap();
    let sha = Transport::upload_file(&t, &sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert_eq!(sha, expect_sha);
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    // upload_new_file (a staging path nothing of this run is at): one session, no check first,
    // and whatever is there is replaced, the same bytes too (a new file, not the old inode).
    let sessions = || sshd.log().matches("Starting session").count();
    let before = sessions();
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&remote).unwrap());
    let sha = t
        .upload_new_file(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert_eq!(sha, expect_sha);
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    assert_ne!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&remote).unwrap()),
        inode
    );
    assert!(no_staging_files(remote.parent().unwrap()));
    std::fs::write(&remote, b"tampered once more").unwrap();
    t.upload_new_file(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    assert_eq!(mode_of(&remote), 0o755);
    // sshd logs a session's start as it begins; give the second one a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sessions() < before + 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(sessions(), before + 2, "{}", sshd.log());

    // A local file that changed since planning (its planned sha256 is another): refused,
    // nothing moved into place, by either kind of upload and by write_file.
    let planned = FileAttrs::mode(0o755).expecting("0".repeat(64));
    std::fs::write(&local, b"replaced since planning").unwrap();
    for fresh in [false, true] {
        let up = if fresh {
            t.upload_new_file(&sshd.id(), &local, remote_s, &planned)
                .await
        } else {
            Transport::upload_file(&t, &sshd.id(), &local, remote_s, &planned).await
        };
        let e = up.expect_err("a file that is not the planned one is refused");
        // Refused here before sending, or on the host before the move.
        let e = e.to_string();
        assert!(
            e.contains("the plan expected") || e.contains("sha256 mismatch"),
            "{e}"
        );
        assert_eq!(std::fs::read(&remote).unwrap(), data);
        assert!(no_staging_files(remote.parent().unwrap()));
    }
    let e = t
        .write_file(&sshd.id(), remote_s, b"other".to_vec(), &planned)
        .await
        .expect_err("bytes that are not the planned ones are refused");
    assert!(e.to_string().contains("the plan expected"), "{e}");
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    t.close_all().await;
}

/// Whether `dir` holds no staging file of an upload (`*.k0sform-…`).
fn no_staging_files(dir: &Path) -> bool {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".k0sform-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    true
}

/// Owner uid and gid of a path itself (not what a link points at).
fn owner_of(path: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.uid(), m.gid())
}

/// Issue 14, item 4: a user owning the destination folder plants links where k0sform writes as
/// root (the old fixed staging name `DST.k0sform-tmp`, and the destination itself); no write,
/// chmod or chown may reach the link's target.
#[tokio::test(flavor = "multi_thread")]
async fn uploads_never_follow_links_planted_at_the_destination() {
    require_lab!();
    use std::os::unix::fs::symlink;
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    let folder = sshd.path("user-owned");
    std::fs::create_dir_all(&folder).unwrap();
    let victim = sshd.path("shadow");
    std::fs::write(&victim, b"root:secret\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o640)).unwrap();
    let local = sshd.path("app.conf");
    std::fs::write(&local, b"setting=1\n").unwrap();
    let nobody = FileAttrs::mode(0o644).owned_by(Some("65534".into()), Some("65534".into()));

    // The staging name of the old code, planted as a link: the upload must not write through it.
    let dst = folder.join("app.conf");
    symlink(&victim, folder.join("app.conf.k0sform-tmp")).unwrap();
    t.upload_file_report(&sshd.id(), &local, dst.to_str().unwrap(), &nobody)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"root:secret\n");
    assert_eq!(std::fs::read(&dst).unwrap(), b"setting=1\n");
    assert_eq!(owner_of(&dst), (65534, 65534));
    assert_eq!(mode_of(&dst), 0o644);

    // The destination itself a link to a file with the very bytes being uploaded: "already
    // there" must not chmod or chown the target; the link is replaced by a file of our own.
    std::fs::write(&victim, b"setting=1\n").unwrap();
    std::fs::remove_file(&dst).unwrap();
    symlink(&victim, &dst).unwrap();
    let up = t
        .upload_file_report(&sshd.id(), &local, dst.to_str().unwrap(), &nobody)
        .await
        .unwrap();
    assert_eq!(up.sha256.len(), 64);
    assert_eq!(mode_of(&victim), 0o640);
    assert_eq!(owner_of(&victim), (0, 0));
    assert!(
        !std::fs::symlink_metadata(&dst)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(owner_of(&dst), (65534, 65534));
    assert_eq!(mode_of(&dst), 0o644);

    // write_file (inline content, token and config files) likewise.
    let inline = folder.join("inline.txt");
    symlink(&victim, &inline).unwrap();
    t.write_file(&sshd.id(), inline.to_str().unwrap(), b"x".to_vec(), &nobody)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"setting=1\n");
    assert_eq!(owner_of(&victim), (0, 0));
    assert_eq!(owner_of(&inline), (65534, 65534));
    assert_eq!(std::fs::read(&inline).unwrap(), b"x");

    // A folder planted at the destination is not written into (`mv -T`).
    let dir_dst = folder.join("a-dir");
    std::fs::create_dir(&dir_dst).unwrap();
    assert!(
        t.write_file(
            &sshd.id(),
            dir_dst.to_str().unwrap(),
            b"x".to_vec(),
            &nobody
        )
        .await
        .is_err()
    );
    assert_eq!(std::fs::read_dir(&dir_dst).unwrap().count(), 0);

    // That failed write left no staging file behind (the planted old-style one aside).
    std::fs::remove_file(folder.join("app.conf.k0sform-tmp")).unwrap();
    assert!(no_staging_files(&folder));
    t.close_all().await;
}

/// Issue 14 (low): a host cannot exhaust k0sform's memory with output; more than 16 MiB on
/// either stream is an error that says so, and the connection stays usable.
#[tokio::test(flavor = "multi_thread")]
async fn endless_output_from_a_host_is_cut_off() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    for script in ["head -c 20000000 /dev/zero", "yes >&2"] {
        let started = Instant::now();
        let err = t
            .run(&sshd.id(), cmd(&["sh", "-c", script]))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("more than 16 MiB of output"),
            "{script}: {err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{script}: not stopped"
        );
    }
    // Exactly at the limit is fine.
    let out = t
        .run(&sshd.id(), cmd(&["head", "-c", "16777216", "/dev/zero"]))
        .await
        .unwrap();
    assert_eq!(out.stdout.len(), 16 << 20);
    let out = t.run(&sshd.id(), cmd(&["echo", "ok"])).await.unwrap();
    assert_eq!(out.stdout, b"ok\n");
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bastion_connection_carries_keys_and_options() {
    require_lab!();
    let bastion = Sshd::start();
    let target_sshd = Sshd::start();
    let t = transport();
    let mut target = target_sshd.target("root");
    let mut b = bastion.target("root");
    b.host_key = Some(bastion.host_fingerprint());
    target.bastion = Some(Box::new(b));
    let info = t
        .connect(&target_sshd.id(), &target, None, false, &[])
        .await
        .unwrap();
    assert_eq!(info.fingerprint, target_sshd.host_fingerprint());
    let out = t
        .run(&target_sshd.id(), cmd(&["echo", "via bastion"]))
        .await
        .unwrap();
    assert_eq!(out.stdout, b"via bastion\n");
    assert_eq!(bastion.accepted_logins(), 1, "{}", bastion.log());
    assert_eq!(target_sshd.accepted_logins(), 1);
    assert!(
        bastion.log().contains(&format!(
            "server_request_direct_tcpip: originator 127.0.0.1 port 65535, target {} port {}",
            target_sshd.address, target_sshd.port
        )),
        "the target was reached through the bastion: {}",
        bastion.log()
    );
    t.close_all().await;
    assert_eq!(ssh_processes(&t), Vec::<String>::new());

    // A wrong bastion pin is refused.
    let t2 = transport();
    if let Some(b) = target.bastion.as_mut() {
        b.host_key = Some("SHA256:wrongwrongwrongwrongwrongwrongwrongwrongwro".into());
    }
    let err = t2
        .connect(&target_sshd.id(), &target, None, false, &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("bastion"), "{err}");
    assert!(t2.connected(&target_sshd.id()).is_none());
}

/// A bastion's key as the state records it: first contact reports it, a recorded key is checked
/// strictly (a rebuilt bastion is refused as `BastionKeyChanged` naming the bastion, and nothing
/// reaches the target), and accepting the change trusts the new key.
#[tokio::test(flavor = "multi_thread")]
async fn bastion_keys_are_reported_and_checked_against_the_recorded_one() {
    require_lab!();
    use k0sform::ssh::BastionTrust;
    let mut bastion = Sshd::start();
    let target_sshd = Sshd::start();
    let mut target = target_sshd.target("root");
    target.bastion = Some(Box::new(bastion.target("root")));
    let bastion_id = HostId::new(bastion.address.clone(), bastion.port);

    // First contact: the hop's key is reported, marked as trusted on first use.
    let t = transport();
    let info = t
        .connect(&target_sshd.id(), &target, None, false, &[])
        .await
        .unwrap();
    assert_eq!(info.bastions.len(), 1, "{info:?}");
    assert_eq!(info.bastions[0].id, bastion_id);
    assert_eq!(info.bastions[0].fingerprint, bastion.host_fingerprint());
    assert_eq!(info.bastions[0].public_key, bastion.host_public_key());
    assert!(info.bastions[0].first_contact);
    t.close_all().await;

    // Recorded: checked strictly, not first contact.
    let recorded = [BastionTrust {
        recorded_key: Some(bastion.host_public_key()),
        accept_changed: false,
    }];
    let t = transport();
    let info = t
        .connect(&target_sshd.id(), &target, None, false, &recorded)
        .await
        .unwrap();
    assert!(!info.bastions[0].first_contact);
    t.close_all().await;

    // The bastion is rebuilt (new key): refused, naming the bastion; the target is not reached.
    let old_fp = bastion.host_fingerprint();
    bastion.rebuild();
    let logins = target_sshd.accepted_logins();
    let t = transport();
    let err = t
        .connect(&target_sshd.id(), &target, None, false, &recorded)
        .await
        .unwrap_err();
    match &err {
        TransportError::BastionKeyChanged {
            bastion: b,
            expected,
            offered,
            ..
        } => {
            assert_eq!(b, &bastion_id);
            assert_eq!(expected, &old_fp);
            assert_eq!(offered, &bastion.host_fingerprint());
        }
        other => panic!("expected BastionKeyChanged, got {other:?}"),
    }
    assert!(
        err.to_string().contains(&format!("bastion {bastion_id}")),
        "{err}"
    );
    assert_eq!(
        target_sshd.accepted_logins(),
        logins,
        "the target was reached"
    );
    assert!(t.connected(&target_sshd.id()).is_none());

    // Accepting the change (-replace BASTION) trusts the offered key.
    let accept = [BastionTrust {
        recorded_key: recorded[0].recorded_key.clone(),
        accept_changed: true,
    }];
    let info = t
        .connect(&target_sshd.id(), &target, None, false, &accept)
        .await
        .unwrap();
    assert_eq!(info.bastions[0].fingerprint, bastion.host_fingerprint());
    assert!(info.bastions[0].first_contact);
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn non_root_user_goes_through_sudo() {
    require_lab!();
    // The lab creates user k0slab with passwordless sudo; without it this test cannot run.
    if !has_sudo_user() {
        eprintln!("skipping: no user k0slab on this machine");
        return;
    }
    let sshd = Sshd::start();
    let t = connected(&sshd, "k0slab").await;
    let as_root = t.run(&sshd.id(), cmd(&["id", "-un"])).await.unwrap();
    assert_eq!(
        as_root.stdout_str().trim(),
        "root",
        "{}",
        as_root.stderr_str()
    );
    let mut plain = cmd(&["id", "-un"]);
    plain.root = false;
    let as_user = t.run(&sshd.id(), plain).await.unwrap();
    assert_eq!(as_user.stdout_str().trim(), "k0slab");
    // stdin and env survive sudo.
    let out = t
        .run(
            &sshd.id(),
            cmd(&["sh", "-c", "cat; printenv X"])
                .stdin(b"in\n".to_vec())
                .env("X", "y"),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, b"in\ny\n");
    t.close_all().await;
}

fn process_group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name: state ppid pgrp …
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(2)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_master_is_shielded_from_ctrl_c_and_commands_start_no_ssh() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    let ours = process_group_of(std::process::id()).unwrap();
    // While a command runs, the master is the only ssh process: commands are sessions opened
    // over its control socket, not one ssh client each.
    let t2 = t.clone();
    let id = sshd.id();
    let running = tokio::spawn(async move { t2.run(&id, cmd(&["sleep", "1"])).await });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let procs = ssh_processes(&t);
    assert_eq!(procs.len(), 1, "only the master: {procs:?}");
    assert!(procs[0].contains(" -M "), "{procs:?}");
    for line in &procs {
        let pid: u32 = line.split_whitespace().next().unwrap().parse().unwrap();
        if let Some(pgrp) = process_group_of(pid) {
            assert_ne!(pgrp, ours, "{line} is in k0sform's process group");
        }
    }
    assert!(running.await.unwrap().unwrap().success());
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_transport_leaves_no_ssh_process() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    let dir = t.control_dir().to_path_buf();
    let pattern = dir.to_str().unwrap().to_string();
    assert!(!ssh_processes(&t).is_empty());
    drop(t);
    assert!(
        processes_end_within(&pattern, Duration::from_secs(5)),
        "ssh still running after drop"
    );
    assert!(!dir.exists(), "private directory removed");
}

/// Two steps connecting to the same host at the same moment share one master; the second
/// master is closed, not left running beside the recorded one.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_connects_to_one_host_leave_one_master() {
    require_lab!();
    let sshd = Sshd::start();
    let t = transport();
    let target = sshd.target("root");
    let id = sshd.id();
    let (a, b) = tokio::join!(
        t.connect(&id, &target, None, false, &[]),
        t.connect(&id, &target, None, false, &[])
    );
    let (a, b) = (a.expect("first connect"), b.expect("second connect"));
    assert_eq!(a.fingerprint, b.fingerprint);
    let masters = || {
        ssh_processes(&t)
            .into_iter()
            .filter(|p| p.contains(" -M "))
            .count()
    };
    let mut n = masters();
    for _ in 0..50 {
        if n == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        n = masters();
    }
    assert_eq!(n, 1, "masters running: {:?}", ssh_processes(&t));
    let out = t.run(&id, cmd(&["echo", "one"])).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "one");
    t.close_all().await;
}

#[test]
fn the_master_dies_with_the_thread_that_started_it_even_without_drop() {
    require_lab!();
    // Simulates k0sform being killed: no Drop runs (mem::forget), the thread that spawned the
    // master ends, and the kernel's parent-death signal takes the master down.
    let sshd = Sshd::start();
    let id = sshd.id();
    let target = sshd.target("root");
    let pattern = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let t = transport();
            t.connect(&id, &target, None, false, &[]).await.unwrap();
            let p = t.control_dir().to_str().unwrap().to_string();
            assert!(!ssh_processes(&t).is_empty());
            std::mem::forget(t);
            p
        })
    })
    .join()
    .unwrap();
    assert!(
        processes_end_within(&pattern, Duration::from_secs(5)),
        "master outlived its parent thread"
    );
    let _ = std::fs::remove_dir_all(&pattern);
}

#[tokio::test(flavor = "multi_thread")]
async fn openssh_alias_from_config_path_and_user_from_config_decides_sudo() {
    require_lab!();
    let sshd = Sshd::start();
    let cfg = sshd.path("ssh_config");
    std::fs::write(
        &cfg,
        format!(
            "Host k0sform-test-alias\n  HostName {}\n  Port {}\n  User root\n  IdentityFile {}\n",
            sshd.address,
            sshd.port,
            sshd.path("client_key").display()
        ),
    )
    .unwrap();
    // openSSH: {address: k0sform-test-alias, configPath: …}: user/port hold k0sctl's defaults.
    let mut target = SshTarget::new("k0sform-test-alias", 22);
    target.openssh = true;
    target.config_path = Some(cfg.clone());
    let id = HostId::new("k0sform-test-alias", 22);
    let t = transport();
    let info = t.connect(&id, &target, None, false, &[]).await.unwrap();
    assert_eq!(info.fingerprint, sshd.host_fingerprint());
    let out = t.run(&id, cmd(&["id", "-un"])).await.unwrap();
    assert_eq!(out.stdout_str().trim(), "root");
    t.close_all().await;

    // The config names a non-root user: root commands must go through sudo.
    if has_sudo_user() {
        let text = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("User root", "User k0slab");
        std::fs::write(&cfg, text).unwrap();
        let t = transport();
        t.connect(&id, &target, None, false, &[]).await.unwrap();
        let as_root = t.run(&id, cmd(&["id", "-un"])).await.unwrap();
        assert_eq!(
            as_root.stdout_str().trim(),
            "root",
            "{}",
            as_root.stderr_str()
        );
        let mut plain = cmd(&["id", "-un"]);
        plain.root = false;
        assert_eq!(
            t.run(&id, plain).await.unwrap().stdout_str().trim(),
            "k0slab"
        );
        t.close_all().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_connection_is_unreachable_and_can_be_reopened() {
    require_lab!();
    let sshd = Sshd::start();
    let t = transport();
    let info = t
        .connect(&sshd.id(), &sshd.target("root"), None, false, &[])
        .await
        .unwrap();
    // Cut the connection under the transport's feet: kill the master.
    let master = Command::new("pgrep")
        .arg("-f")
        .arg(format!("^ssh -M -N -S {}/", t.control_dir().display()))
        .output()
        .unwrap();
    let pid = String::from_utf8(master.stdout).unwrap();
    let pid = pid.trim();
    assert!(
        !pid.is_empty() && !pid.contains('\n'),
        "one master: {pid:?}"
    );
    assert!(Command::new("kill").arg(pid).status().unwrap().success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let err = t.run(&sshd.id(), cmd(&["true"])).await.unwrap_err();
    assert!(
        matches!(&err, TransportError::Unreachable { message, .. } if message.contains("connection lost")),
        "{err:?}"
    );
    assert!(
        t.connected(&sshd.id()).is_none(),
        "the dead connection is forgotten"
    );
    // Reconnect with the key just learned: strict from now on.
    let again = t
        .connect(
            &sshd.id(),
            &sshd.target("root"),
            Some(&info.public_key),
            false,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(again.fingerprint, info.fingerprint);
    let out = t.run(&sshd.id(), cmd(&["echo", "back"])).await.unwrap();
    assert_eq!(out.stdout, b"back\n");
    t.close_all().await;
    assert_eq!(ssh_processes(&t), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn silent_host_times_out_as_unreachable() {
    // Accepts TCP but never speaks SSH: only the connect timeout can end this.
    let (address, port) = free_address();
    let listener = TcpListener::bind((address.as_str(), port)).unwrap();
    let holder = std::thread::spawn(move || {
        let conn = listener.accept();
        std::thread::sleep(Duration::from_secs(6));
        drop(conn);
    });
    let t = SshTransport::new(SshOptions {
        connect_timeout: Duration::from_secs(1),
        ..SshOptions::default()
    })
    .unwrap();
    let started = Instant::now();
    let err = t
        .connect(
            &HostId::new(address.clone(), port),
            &SshTarget::new(address, port),
            None,
            false,
            &[],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, TransportError::Unreachable { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(ssh_processes(&t), Vec::<String>::new());
    holder.join().unwrap();
}

/// The login shell is not POSIX: like fish, it reads `\'` inside single quotes as a quote, so
/// the POSIX `'\''` idiom breaks. sshd runs every command through it (ForceCommand stands in
/// for the user's shell here); commands must still run exactly as given.
#[tokio::test(flavor = "multi_thread")]
async fn commands_run_under_a_non_posix_login_shell() {
    require_lab!();
    let sshd = Sshd::start_with("ForceCommand {dir}/fishy\n");
    let fishy = sshd.path("fishy");
    std::fs::write(
        &fishy,
        "#!/bin/sh\ncase \"$SSH_ORIGINAL_COMMAND\" in\n  *\"'\\\\''\"*) echo \"fishy: unsupported quoting\" >&2; exit 99;;\nesac\nexec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&fishy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = transport();
    t.connect(&sshd.id(), &sshd.target("root"), None, false, &[])
        .await
        .unwrap();
    let out = t
        .run(
            &sshd.id(),
            cmd(&[
                "sh",
                "-c",
                "printf '%s|' \"$@\"",
                "x",
                "it's",
                "a\\b",
                "$HOME",
            ]),
        )
        .await
        .unwrap();
    assert_eq!(
        (out.status, out.stdout_str().as_str()),
        (Some(0), "it's|a\\b|$HOME|"),
        "{}",
        out.stderr_str()
    );
    t.close_all().await;
}

/// Issue 14, Medium 3: the user's ssh_config cannot weaken k0sform's connection. A hostile
/// config with ControlPersist (today the master forked away: connect failed and a root master
/// stayed), a KnownHostsCommand and a LocalCommand that write files, VerifyHostKeyDNS and
/// `StrictHostKeyChecking no`: the connection works, runs nothing locally, leaves no process
/// behind, and a recorded key is still checked strictly.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_ssh_config_cannot_weaken_the_connection() {
    require_lab!();
    let sshd = Sshd::start();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let persist = dir.path().join("cm");
    let config = dir.path().join("ssh_config");
    // An agent the config forwards: a root on the host could use it to reach every other host.
    // (Sessions use the mux protocol, which never asks for it; ForwardAgent=no is forced too.)
    let agent_dir = tempfile::tempdir().unwrap();
    let agent_sock = agent_dir.path().join("agent");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&agent_sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ssh-agent");
    for _ in 0..100 {
        if agent_sock.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(
        &config,
        format!(
            "Host *\n  ControlMaster auto\n  ControlPath {persist}-%C\n  ControlPersist 10m\n  \
             KnownHostsCommand /bin/sh -c 'id > {m}.khc'\n  VerifyHostKeyDNS yes\n  \
             StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  \
             PermitLocalCommand yes\n  LocalCommand id > {m}.local\n  \
             ForwardAgent yes\n  IdentityAgent {agent}\n",
            persist = persist.display(),
            m = marker.display(),
            agent = agent_sock.display()
        ),
    )
    .unwrap();
    let mut target = sshd.target("root");
    target.config_path = Some(config.clone());

    let t = transport();
    let info = t
        .connect(
            &sshd.id(),
            &target,
            Some(&sshd.host_public_key()),
            false,
            &[],
        )
        .await
        .expect("connect through a hostile ssh_config");
    assert!(!info.first_contact);
    let out = t.run(&sshd.id(), cmd(&["echo", "hello"])).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hello");
    let out = t
        .run(
            &sshd.id(),
            cmd(&["sh", "-c", "echo \"[${SSH_AUTH_SOCK:-}]\""]),
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "[]",
        "the agent was forwarded to the host"
    );
    t.close_all().await;
    agent.kill().ok();
    agent.wait().ok();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let left = Command::new("pgrep")
        .arg("-af")
        .arg(config.to_str().unwrap())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&left.stdout),
        "",
        "ssh left running"
    );
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, vec!["ssh_config".to_string()], "files made by ssh");

    // A recorded key that is not the host's: `StrictHostKeyChecking no` does not let it pass.
    let other = tempfile::tempdir().unwrap();
    keygen(&other.path().join("k"));
    let text = std::fs::read_to_string(other.path().join("k.pub")).unwrap();
    let wrong: String = text
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let t = transport();
    match t
        .connect(&sshd.id(), &target, Some(&wrong), false, &[])
        .await
    {
        Err(TransportError::HostKeyChanged { offered, .. }) => {
            assert_eq!(offered, sshd.host_fingerprint())
        }
        other => panic!("expected HostKeyChanged, got {other:?}"),
    }
    t.close_all().await;
    assert!(!marker.with_extension("khc").exists());
}

/// Issue 28, item 2: the ProxyCommand k0sform gives ssh names the target itself (quoted, `%`
/// doubled), never `%h`. OpenSSH substitutes `%h` into the line after k0sform's quoting and
/// runs it with `$SHELL -c`; clients before 9.6 (CVE-2023-51385) do not refuse a destination
/// with quotes or `$(…)`. `testdata/old-ssh/ssh` behaves as such a client: through it, a host
/// behind a bastion is reached as usual, and an address with shell syntax that reaches the
/// transport (every reader refuses one before: this is the second line of defence) runs
/// nothing here.
#[tokio::test(flavor = "multi_thread")]
async fn proxy_command_names_the_target_and_runs_nothing_of_its_address() {
    require_lab!();
    let bastion = Sshd::start();
    let target_sshd = Sshd::start();
    let stand_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/old-ssh/ssh");
    let old_client = || {
        SshTransport::new(SshOptions {
            ssh_program: stand_in.clone(),
            ..SshOptions::default()
        })
        .unwrap()
    };
    let mut target = target_sshd.target("root");
    target.bastion = Some(Box::new(bastion.target("root")));
    let t = old_client();
    t.connect(&target_sshd.id(), &target, None, false, &[])
        .await
        .unwrap();
    let out = t
        .run(&target_sshd.id(), cmd(&["echo", "via bastion"]))
        .await
        .unwrap();
    assert_eq!(out.stdout, b"via bastion\n");
    t.close_all().await;

    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let hostile = format!("x'$(touch${{IFS}}{})'", marker.display());
    target.address = hostile.clone();
    let id = HostId::new(hostile, 22);
    let t = old_client();
    let err = t.connect(&id, &target, None, false, &[]).await;
    t.close_all().await;
    assert!(err.is_err(), "the hostile address was reached");
    assert!(
        !marker.exists(),
        "a command from the address ran locally through the ProxyCommand"
    );
}
