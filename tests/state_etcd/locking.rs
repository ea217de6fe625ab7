//! Locking: force-unlock by ID, leases revoked or expired, and etcd going away and coming back.

use super::*;

// ---------------------------------------------------------------------------------------------
// Locking

/// `state rm 127.0.1.1` waiting up to 20 s for the lock succeeds, from serial `from`.
fn rm_waiting_for_the_lock(url: &str, from: u64) {
    let (code, out, stderr) = k0sform(&[
        "-lock-timeout=20s",
        "-state",
        url,
        "state",
        "rm",
        "127.0.1.1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let serials = format!("serial {from} -> {}", from + 1);
    assert!(out.contains(&serials), "{out}");
}

#[test]
fn force_unlock_removes_only_the_lock_with_that_id_and_fences_the_old_holder() {
    require_lab!();
    let (etcd, url) = etcd_with_sample_state("/k0sform/force");
    let mut holder = spawn_child("hold-then-write", &url, 30);
    let id = holder.wait_for("READY");
    assert_eq!(load(&url).serial, 2, "the holder's first checkpoint");

    // A wrong ID: refused, naming the real holder; the lock stays.
    let (code, _, stderr) = k0sform(&["-state", &url, "force-unlock", "not-the-id"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(&id), "{stderr}");
    assert!(etcd.get("/k0sform/force/lock").is_some());
    holder.say("write");
    assert_eq!(holder.wait_for("WROTE"), "3");

    // The right ID: released, although its holder is alive (a remote lock may outlive it).
    let (code, out, stderr) = k0sform(&["-state", &url, "force-unlock", &id]);
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains(&format!("Lock {id} released")), "{out}");
    assert_eq!(etcd.get("/k0sform/force/lock"), None);

    // The old holder's next checkpoint is refused: it no longer holds the lock.
    holder.say("write");
    let refused = holder.wait_for("REFUSED");
    assert!(
        refused.contains("lock") && refused.contains("lost"),
        "{refused}"
    );
    assert_eq!(load(&url).serial, 3);

    // A new holder takes it; the old one still cannot write in between.
    let mut s = store(&url);
    let g = s.lock("apply", Duration::ZERO).unwrap();
    holder.say("write");
    let refused = holder.wait_for("REFUSED");
    assert!(refused.contains(g.id()), "names the new holder: {refused}");
    let mut st = s.load().unwrap().unwrap();
    st.hosts.pop();
    assert_eq!(s.write(&st).unwrap().serial(), 4);
    // force-unlock with the old ID does not touch the new lock.
    let (code, _, stderr) = k0sform(&["-state", &url, "force-unlock", &id]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(g.id()), "{stderr}");
    g.unlock().unwrap();
    holder.finish();
    let (code, out, _) = k0sform(&["-state", &url, "force-unlock", &id]);
    assert_eq!(code, 0);
    assert!(out.contains("not locked"), "{out}");
}

#[test]
fn lease_revoked_from_outside_refuses_the_next_write() {
    require_lab!();
    let (etcd, url) = etcd_with_sample_state("/k0sform/revoke");
    let mut s = store(&url);
    let g = s.lock("apply", Duration::ZERO).unwrap();
    let mut st = s.load().unwrap().unwrap();
    st.hosts[0].node_name = Some("step-1".into());
    assert_eq!(s.write(&st).unwrap().serial(), 2);
    // Someone revokes our lease (as an operator breaking the lock by hand would).
    let lease = etcd.lease_of("/k0sform/revoke/lock");
    etcd.etcdctl(&["lease", "revoke", &format!("{lease:x}")]);
    st.hosts[0].node_name = Some("step-2".into());
    let err = s.write(&st).unwrap_err();
    assert!(matches!(err, StateError::LockLost { .. }), "{err}");
    assert!(
        err.to_string().contains("expired or the lock was removed"),
        "{err}"
    );
    assert_eq!(load(&url).serial, 2, "the last checkpoint stays");
    // Releasing a lock whose lease is gone is not an error.
    g.unlock().unwrap();
}

#[test]
fn killed_holder_frees_the_lock_when_its_lease_expires() {
    require_lab!();
    let (_etcd, url) = etcd_with_sample_state("/k0sform/kill");
    let mut holder = spawn_child("hold-then-write", &url, 2);
    let id = holder.wait_for("READY");
    holder.say("write");
    assert_eq!(holder.wait_for("WROTE"), "3");
    let killed_at = Instant::now();
    holder.kill();

    // Right after the kill the lock is still there (nobody revoked the lease) ...
    let (code, _, stderr) = k0sform(&["-state", &url, "state", "rm", "127.0.1.1"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains(&id), "{stderr}");
    // ... and once the 2 s lease expires the next run gets it, working from the last checkpoint.
    rm_waiting_for_the_lock(&url, 3);
    let waited = killed_at.elapsed();
    // The lease was last renewed up to a third of its TTL before the kill.
    assert!(waited >= Duration::from_millis(1000), "{waited:?}");
    assert!(waited < Duration::from_secs(15), "{waited:?}");
    let st = load(&url);
    assert_eq!(st.serial, 4);
    assert_eq!(st.hosts.len(), 3);
    assert!(
        st.hosts
            .iter()
            .any(|h| h.node_name.as_deref() == Some("renamed-1")),
        "the killed holder's last checkpoint is the base"
    );
}

// ---------------------------------------------------------------------------------------------
// etcd going away

#[test]
fn etcd_stopped_gives_a_clear_error_and_work_continues_when_it_returns() {
    require_lab!();
    let (mut etcd, url) = etcd_with_sample_state("/k0sform/down");
    let mut s = EtcdStore::open(&url, &opts(Duration::from_secs(2))).unwrap();
    let g = s.lock("apply", Duration::ZERO).unwrap();
    let mut st = s.load().unwrap().unwrap();
    st.hosts[0].node_name = Some("before".into());
    assert_eq!(s.write(&st).unwrap().serial(), 2);

    etcd.stop();
    st.hosts[0].node_name = Some("during".into());
    let started = Instant::now();
    let err = s.write(&st).unwrap_err();
    assert!(matches!(err, StateError::Remote { .. }), "{err}");
    assert!(err.to_string().contains(&url), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let (code, _, stderr) = k0sform_env(
        &["-state", &url, "state", "list"],
        &[("K0SFORM_ETCD_TIMEOUT", "2s")],
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("cannot read the state at {url}")),
        "{stderr}"
    );
    drop(g);

    etcd.restart();
    let st = load(&url);
    assert_eq!(st.serial, 2, "the last stored write");
    assert_eq!(st.hosts[0].node_name.as_deref(), Some("before"));
    // The lock of the store that lost etcd is released or expires; then writes go on.
    rm_waiting_for_the_lock(&url, 2);
}
