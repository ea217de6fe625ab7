//! Running commands over one connection: exit codes, output, stdin, hostile arguments, time
//! limits, output limits and a non-POSIX login shell.

use super::*;

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
async fn non_root_user_goes_through_sudo() {
    require_lab!();
    // The lab creates user k0slab with passwordless sudo; without it this test cannot run.
    if !has_sudo_user() {
        eprintln!("skipping: no user k0slab on this machine");
        return;
    }
    let sshd = Sshd::start();
    let t = connected(&sshd, "k0slab").await;
    assert_root_through_sudo_else_k0slab(&t, &sshd.id()).await;
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
    connect_root(&t, &sshd, None).await;
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
