//! Serial, backup, permissions and format of the state file, and a symlinked state file.

use super::*;

// ---------------------------------------------------------------------------------------------
// Serial, backup, format

/// The local file's side of the serial rules (state_store.rs has the rules): an unchanged write
/// touches nothing (same inode and mtime, no backup made), a change keeps exactly the previous
/// file as `<state>.backup`, and both are 0600.
#[test]
fn unchanged_writes_touch_nothing_and_the_backup_is_the_previous_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let backup = dir.path().join("s.json.backup");
    let mut store = LocalStore::new(&path);
    let _g = store.lock("test", Duration::ZERO).unwrap();
    let mut s = sample_state();
    assert_eq!(
        store.write(&s).unwrap(),
        WriteOutcome::Written { serial: 1 }
    );
    assert!(!backup.exists(), "no previous version, no backup");
    let v1 = std::fs::read(&path).unwrap();
    let meta1 = std::fs::metadata(&path).unwrap();

    std::thread::sleep(Duration::from_millis(20));
    s.serial = 1;
    s.hosts.reverse();
    assert_eq!(
        store.write(&s).unwrap(),
        WriteOutcome::Unchanged { serial: 1 }
    );
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (meta.ino(), meta.mtime_nsec()),
        (meta1.ino(), meta1.mtime_nsec())
    );
    assert!(!backup.exists());
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());

    s.hosts[0].k0s_version = Some("v1.34.1+k0s.0".parse().unwrap());
    assert_eq!(
        store.write(&s).unwrap(),
        WriteOutcome::Written { serial: 2 }
    );
    assert_eq!(std::fs::read(&backup).unwrap(), v1);
    let v2 = std::fs::read(&path).unwrap();
    s.cluster = None;
    assert_eq!(
        store.write(&s).unwrap(),
        WriteOutcome::Written { serial: 3 }
    );
    assert_eq!(std::fs::read(&backup).unwrap(), v2);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&backup), 0o600);
}

#[test]
fn files_written_by_others_end_up_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let lock_path = dir.path().join("s.json.lock");
    std::fs::write(&path, sample_state().to_canonical_json().unwrap()).unwrap();
    std::fs::write(&lock_path, "").unwrap();
    for p in [&path, &lock_path] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let mut store = LocalStore::new(&path);
    let _g = store.lock("test", Duration::ZERO).unwrap();
    let mut s = store.load().unwrap().unwrap();
    s.hosts.pop();
    store.write(&s).unwrap();
    for p in [&path, &lock_path, &dir.path().join("s.json.backup")] {
        assert_eq!(mode(p), 0o600, "{}", p.display());
    }
}

/// Format 1 (before `hosts[].access`) is read as it is and written back as the current format.
#[test]
fn format_1_state_is_read_and_written_as_the_current_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut v1: serde_json::Value =
        serde_json::from_str(&sample_state().to_canonical_json().unwrap()).unwrap();
    v1["format_version"] = 1.into();
    for h in v1["hosts"].as_array_mut().unwrap() {
        h.as_object_mut().unwrap().remove("access");
    }
    std::fs::write(&path, serde_json::to_string_pretty(&v1).unwrap()).unwrap();
    let mut store = LocalStore::new(&path);
    let _g = store.lock("test", Duration::ZERO).unwrap();
    let mut loaded = store.load().unwrap().expect("a format 1 state loads");
    assert!(loaded.hosts.iter().all(|h| h.access.is_none()));
    loaded.serial += 1;
    store.write(&loaded).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"format_version\": 3,"), "{text}");
}

/// Format 2 (before `bastions`) is read as it is (no bastion recorded) and written as format 3
/// with the bastion keys a run recorded. Bastion entries are checked when read: a key that is
/// not the one fingerprinted, a duplicate, or an unknown key type is refused naming the bastion.
#[test]
fn format_2_state_is_read_and_bastions_are_checked() {
    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvZ/q36TdInhTZoW5bXPQ/Hey6Hm97hfZmb+65XdDbu";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut v2: serde_json::Value =
        serde_json::from_str(&sample_state().to_canonical_json().unwrap()).unwrap();
    v2["format_version"] = 2.into();
    assert!(v2.get("bastions").is_none());
    std::fs::write(&path, serde_json::to_string_pretty(&v2).unwrap()).unwrap();
    let mut store = LocalStore::new(&path);
    let _g = store.lock("test", Duration::ZERO).unwrap();
    let mut loaded = store.load().unwrap().expect("a format 2 state loads");
    assert!(loaded.bastions.is_empty());
    let mut want = sample_state();
    want.sort();
    assert_eq!(loaded.hosts, want.hosts);
    loaded.serial += 1;
    loaded.upsert_bastion(state::BastionState {
        address: "127.0.0.50".into(),
        port: 22,
        host_key: k0sform::ssh_key::fingerprint(KEY).unwrap(),
        host_public_key: KEY.into(),
    });
    store.write(&loaded).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"format_version\": 3,"), "{text}");
    assert!(text.contains("\"bastions\": ["), "{text}");
    let back = store.load().unwrap().unwrap();
    assert_eq!(back.bastions, loaded.bastions);

    let good: serde_json::Value = serde_json::from_str(&text).unwrap();
    let bad = |edit: &dyn Fn(&mut serde_json::Value), want: &str| {
        let mut v = good.clone();
        edit(&mut v);
        let p = dir.path().join("bad.json");
        std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        let e = LocalStore::new(&p).load().unwrap_err().to_string();
        assert!(e.contains("bastion 127.0.0.50") && e.contains(want), "{e}");
    };
    bad(
        &|v| v["bastions"][0]["host_key"] = "SHA256:other".into(),
        "does not have the fingerprint",
    );
    bad(
        &|v| {
            let b = v["bastions"][0].clone();
            v["bastions"].as_array_mut().unwrap().push(b);
        },
        "more than once",
    );
    bad(
        &|v| v["bastions"][0]["host_public_key"] = "ssh-ed25519".into(),
        "host_public_key",
    );
    bad(
        &|v| {
            v["bastions"][0]["host_public_key"] =
                KEY.replace("ssh-ed25519", "ssh-ed25519,ssh-rsa").into()
        },
        "unknown key type",
    );
}

/// No field of the state model is meant for a secret (what every backend refuses to store:
/// state_store.rs).
#[test]
fn state_schema_has_no_field_for_a_secret() {
    let schema = state::json_schema().to_lowercase();
    for word in ["token", "password", "secret", "private", "credential"] {
        assert!(!schema.contains(word), "state schema has a {word:?} field");
    }
}

/// Issue 28, item 11: the state file and its backup are opened without following a symbolic
/// link (O_NOFOLLOW), as the lock is: whoever can write the state's folder must not make
/// k0sform read another file as its state (or keep it as the backup of its next write). The
/// link is refused with an error naming it, loads and writes fail, `state list` too, and
/// neither the link nor its target changes. A FIFO is refused too, without blocking.
#[test]
fn symlinked_state_file_is_refused_and_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("elsewhere.json");
    create(&real, &sample_state());
    let real_bytes = std::fs::read(&real).unwrap();
    let path = dir.path().join("s.json");
    std::os::unix::fs::symlink(&real, &path).unwrap();

    let mut store = LocalStore::new(&path);
    let err = store.load().unwrap_err().to_string();
    assert!(
        err.contains(&format!("cannot read state file {}", path.display()))
            && err.contains("symbolic link, which k0sform never follows"),
        "{err}"
    );
    let _guard = store.lock("test", Duration::ZERO).unwrap();
    assert!(store.write(&sample_state()).is_err());
    let err = store.load_serial(1).unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
    drop(_guard);

    let (code, _, err) = k0sform(&["-state=s.json", "state", "list"], dir.path());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(&real).unwrap(), real_bytes);
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(!dir.path().join("s.json.backup").exists());

    // A backup that is a link is refused as well when a serial is asked for.
    let path = dir.path().join("b.json");
    create(&path, &sample_state());
    std::os::unix::fs::symlink(&real, dir.path().join("b.json.backup")).unwrap();
    let err = LocalStore::new(&path)
        .load_serial(0)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("b.json.backup") && err.contains("symbolic link"),
        "{err}"
    );

    // A FIFO at the state's path is not a state file (and reading it must not hang).
    let fifo = dir.path().join("f.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = LocalStore::new(&fifo).load().unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
}
