//! Host keys: first contact records the key, a changed key or a pin mismatch is refused, the
//! user's ssh_config cannot weaken the check.

use super::*;

/// `sshd`'s root target with its host key pinned to `fingerprint` (`ssh.hostKey`).
fn pinned(sshd: &Sshd, fingerprint: &str) -> SshTarget {
    let mut target = sshd.target("root");
    target.host_key = Some(fingerprint.to_string());
    target
}

#[tokio::test(flavor = "multi_thread")]
async fn first_contact_records_the_key_and_later_runs_check_it() {
    require_lab!();
    let sshd = Sshd::start();
    let t = transport();
    let info = connect_root(&t, &sshd, None).await;
    assert_eq!(info.fingerprint, sshd.host_fingerprint());
    assert_eq!(info.public_key, sshd.host_public_key());
    assert!(info.first_contact);
    t.close_all().await;

    // Next run: the recorded key is trusted, nothing new.
    let t2 = transport();
    let info2 = connect_root(&t2, &sshd, Some(&info.public_key)).await;
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
        assert_root_through_sudo_else_k0slab(&t, &id).await;
        t.close_all().await;
    }
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
