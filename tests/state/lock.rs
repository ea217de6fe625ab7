//! The OS file lock: live and killed holders, and a symbolic link planted at the lock path.

use super::*;

/// The local lock is an OS file lock: force-unlock will not (and cannot) break a live holder's.
/// (What every backend does while another process holds the lock: state_store.rs.)
#[test]
fn force_unlock_refuses_a_live_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k0sform.state.json");
    create(&path, &sample_state());
    let mut holder = spawn_child("hold-lock", &path);
    let id = holder.wait_for("READY");
    let out = bin::k0sform()
        .args(["-state", path.to_str().unwrap(), "force-unlock", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("live process"));
    holder.finish();
}

#[test]
fn lock_of_a_killed_holder_does_not_block_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k0sform.state.json");
    create(&path, &sample_state());
    let mut holder = spawn_child("hold-lock", &path);
    let dead_id = holder.wait_for("READY");
    let dead_pid = holder.pid();
    holder.kill();

    // The killed holder's record is still in the lock file, but the lock is free.
    let lock_path = dir.path().join("k0sform.state.json.lock");
    assert!(
        std::fs::read_to_string(&lock_path)
            .unwrap()
            .contains(&dead_id)
    );
    assert_eq!(mode(&lock_path), 0o600);

    // force-unlock explains that there is nothing to break, and clears the record.
    let out = bin::k0sform()
        .args(["-state", path.to_str().unwrap(), "force-unlock", &dead_id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("not locked"), "{stdout}");
    assert!(stdout.contains(&format!("pid {dead_pid}")), "{stdout}");
    assert!(stdout.contains("freed automatically"), "{stdout}");

    // Kill another holder; this time the next run just takes the lock.
    let mut holder = spawn_child("hold-lock", &path);
    holder.wait_for("READY");
    holder.kill();
    let mut store = LocalStore::new(&path);
    let g = store.lock("state rm", Duration::ZERO).unwrap();
    let text = std::fs::read_to_string(&lock_path).unwrap();
    assert!(text.contains(g.id()) && text.contains(&format!("\"pid\":{}", std::process::id())));
    let mut s = store.load().unwrap().unwrap();
    s.hosts.pop();
    assert_eq!(store.write(&s).unwrap().serial(), 2);
    g.unlock().unwrap();

    // An ID that matches nothing is an error.
    let out = bin::k0sform()
        .args(["-state", path.to_str().unwrap(), "force-unlock", &dead_id])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "a free lock with no record: nothing to do"
    );
}

/// Whoever can write the state's folder must not be able to make k0sform (often root) create,
/// truncate or chmod another file through the lock: a symlink planted at the lock path is
/// refused (O_NOFOLLOW), by `lock` and by `force-unlock`, and its target is left as it was.
#[test]
fn symlink_planted_at_the_lock_path_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let target = dir.path().join("precious");
    std::fs::write(&target, "do not touch\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    let lock_path = dir.path().join("s.json.lock");
    std::os::unix::fs::symlink(&target, &lock_path).unwrap();
    // A link to a file that does not exist yet must not be created through either.
    let absent = dir.path().join("absent");
    let other = dir.path().join("o.json");
    std::os::unix::fs::symlink(&absent, dir.path().join("o.json.lock")).unwrap();

    let store = LocalStore::new(&path);
    let err = match store.lock("test", Duration::ZERO) {
        Ok(_) => panic!("a symlinked lock file was followed"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("symbolic link"), "{err}");
    let err = store.force_unlock("some-id").unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
    assert!(
        LocalStore::new(&other)
            .lock("test", Duration::ZERO)
            .is_err()
    );

    assert_eq!(std::fs::read_to_string(&target).unwrap(), "do not touch\n");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "the link's target was chmodded");
    assert!(!absent.exists(), "the lock was created through a link");
    assert!(
        std::fs::symlink_metadata(&lock_path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}
