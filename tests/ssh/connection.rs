//! The connection's life: the master process, unreachable and silent hosts, lost connections,
//! and no ssh process left behind.

use super::*;

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
async fn lost_connection_is_unreachable_and_can_be_reopened() {
    require_lab!();
    let sshd = Sshd::start();
    let t = transport();
    let info = connect_root(&t, &sshd, None).await;
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
    let again = connect_root(&t, &sshd, Some(&info.public_key)).await;
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
