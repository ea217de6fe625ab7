//! The local state file: atomic writes that survive a writer killed at any point, the OS file
//! lock, the backup, permissions, symbolic links, the `state` commands, and the checked-in JSON
//! Schema. What every backend guarantees (serial, lineage, refusal of bad states and secrets,
//! locking between processes) is the conformance suite in `state_store.rs`.
//!
//! Child processes are this test binary run again with K0SFORM_STATE_TEST_CHILD set: see
//! `child_process_entry`.

use crate::support::bin;
use crate::support::child::ChildProc;
use crate::support::states::{host, sample_state};

use k0sform::hostid::HostId;
use k0sform::spec::Role;
use k0sform::state::{self, ClusterState, LocalStore, State, StateStore, WriteOutcome, WriteStage};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "K0SFORM_STATE_TEST_CHILD";
const HOLD_OPERATION: &str = "test hold";

// ---------------------------------------------------------------------------------------------
// Fixtures

/// Write `state` as a new state file at `path`, under the lock.
fn create(path: &Path, state: &State) -> u64 {
    let mut store = LocalStore::new(path);
    let _g = store.lock("test", Duration::ZERO).unwrap();
    store.write(state).unwrap().serial()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Files in `dir` whose names end in `.tmp` (a writer's leftovers).
fn temp_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Crash-test states: every part of a generation-`gen` state carries `gen`, so a state mixing two
// writes (or cut short) is detected. Big enough that a write takes a moment.

const CRASH_HOSTS: u32 = 300;

fn generation_state(lineage: &str, generation: u64) -> State {
    let mut s = State::new();
    s.lineage = lineage.to_string();
    s.cluster = Some(ClusterState {
        name: format!("gen-{generation}"),
        uid: "7c3f2a10-4b9e-4a51-9d2e-3f0c1b2a3d4e".into(),
        etcd_cluster_id: None,
        k0s_version: None,
        config_sha256: None,
    });
    s.hosts = (0..CRASH_HOSTS)
        .map(|i| {
            let mut h = host(
                &format!("127.1.{}.{}", i / 250, i % 250 + 1),
                22,
                Role::Worker,
                i,
            );
            h.machine_id = format!("{generation:032x}");
            h.node_name = Some(format!("n{i}-g{generation}"));
            h
        })
        .collect();
    s
}

/// Check that `s` is one complete generation and return it.
fn generation_of(s: &State) -> u64 {
    let name = &s.cluster.as_ref().expect("cluster").name;
    let generation: u64 = name.strip_prefix("gen-").unwrap().parse().unwrap();
    assert_eq!(s.serial, generation, "serial and content disagree");
    assert_eq!(s.hosts.len(), CRASH_HOSTS as usize, "hosts missing");
    for h in &s.hosts {
        assert_eq!(
            h.machine_id,
            format!("{generation:032x}"),
            "mixed generations"
        );
    }
    generation
}

// ---------------------------------------------------------------------------------------------
// Child processes

/// Not a test: the body of child processes, doing nothing unless K0SFORM_STATE_TEST_CHILD is set.
/// Modes: `hold-lock` (take the lock, print READY, hold it until stdin closes), `write-loop`
/// (take the lock, write growing generations until killed, READY after the first write),
/// `stop-at STAGE` (write one generation, print STOPPED and hang at that point of the write until
/// killed).
#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = PathBuf::from(std::env::var("K0SFORM_STATE_TEST_PATH").unwrap());
    let mut store = LocalStore::new(&path);
    let say = |line: String| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").unwrap();
        out.flush().unwrap();
    };
    match mode.split_once(' ').unwrap_or((mode.as_str(), "")) {
        ("hold-lock", _) => {
            let g = store.lock(HOLD_OPERATION, Duration::ZERO).unwrap();
            say(format!("READY {}", g.id()));
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).unwrap() > 0 {}
            g.unlock().unwrap();
        }
        ("write-loop", _) => {
            let _g = store
                .lock("test write-loop", Duration::from_secs(5))
                .unwrap();
            let lineage = store.load().unwrap().unwrap().lineage;
            // READY after the first write, so the parent's kill lands in the steady write loop.
            // It says how long that write took, so the parent can aim its kills at writes on
            // a machine of any speed.
            let mut ready = false;
            loop {
                let started = Instant::now();
                let current = store.load().unwrap().unwrap();
                let mut next = generation_state(&lineage, current.serial + 1);
                next.serial = current.serial;
                store.write(&next).unwrap();
                if !ready {
                    say(format!("READY {}", started.elapsed().as_micros()));
                    ready = true;
                }
            }
        }
        ("stop-at", stage) => {
            let stage = WriteStage::from_name(stage).unwrap();
            let _g = store.lock("test stop-at", Duration::from_secs(5)).unwrap();
            let current = store.load().unwrap().unwrap();
            store.observe_write_stages(move |s| {
                if s == stage {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "STOPPED {}", s.name()).unwrap();
                    out.flush().unwrap();
                    loop {
                        std::thread::sleep(Duration::from_secs(60));
                    }
                }
            });
            let mut next = generation_state(&current.lineage, current.serial + 1);
            next.serial = current.serial;
            store.write(&next).unwrap();
            panic!("stage {} never reached", stage.name());
        }
        other => panic!("unknown child mode {other:?}"),
    }
}

/// A writer or lock holder process (this binary's `child_process_entry`) on the state at `path`.
fn spawn_child(mode: &str, path: &Path) -> ChildProc {
    ChildProc::start(
        "state::child_process_entry",
        CHILD_ENV,
        mode,
        &[("K0SFORM_STATE_TEST_PATH", path.display().to_string())],
    )
}

/// A small xorshift generator: no rand crate needed, the seed is printed to reproduce a run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

// ---------------------------------------------------------------------------------------------
// Crash safety

#[test]
fn writer_killed_at_random_moments_leaves_old_or_new_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k0sform.state.json");
    let mut first = generation_state(&uuid::Uuid::new_v4().to_string(), 1);
    first.serial = 0;
    assert_eq!(create(&path, &first), 1);

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut last = 1;
    let mut kills = 0;
    let mut backups_checked = 0;
    // Kills that left a temp file behind: the writer died in the middle of a write.
    let mut mid_write_kills = 0;
    let mut temps_before = temp_files(dir.path());
    // At least 5 s, and on a busy machine longer (up to 120 s), until enough kills landed
    // mid-write and the writers got well past the first generations: under a load average of ~9
    // a writer killed within 20 ms of READY may not finish one write, which once failed a fixed
    // 5 s run's progress check although nothing was wrong.
    let enough = |kills: usize, mid: usize, last: u64| kills >= 10 && mid >= 3 && last > 20;
    while started.elapsed() < Duration::from_secs(5)
        || (!enough(kills, mid_write_kills, last) && started.elapsed() < Duration::from_secs(120))
    {
        let mut child = spawn_child("write-loop", &path);
        // Kills land within three of the child's write cycles after READY (at least 20 ms):
        // a fixed 20 ms window missed every write on a machine under a load average of 10.
        let cycle: u64 = child.wait_for("READY").parse().unwrap_or(0);
        let window = (3 * cycle).max(20_000);
        std::thread::sleep(Duration::from_micros(rng.below(window)));
        child.kill();
        kills += 1;
        let temps = temp_files(dir.path());
        if temps.iter().any(|t| !temps_before.contains(t)) {
            mid_write_kills += 1;
        }
        temps_before = temps;

        let now = LocalStore::new(&path)
            .load()
            .unwrap_or_else(|e| panic!("after kill {kills} (seed {seed}): {e}"))
            .expect("state file exists");
        let generation = generation_of(&now);
        assert!(
            generation >= last,
            "serial went back from {last} to {generation}"
        );
        last = generation;
        let backup = LocalStore::new(dir.path().join("k0sform.state.json.backup")).load();
        if let Ok(Some(b)) = backup {
            let bg = generation_of(&b);
            // Killed between replacing the backup and the rename: backup == current.
            assert!(
                bg == generation - 1 || bg == generation,
                "backup generation {bg} with state at {generation}"
            );
            backups_checked += 1;
        } else if generation > 1 {
            panic!("backup missing or unreadable: {backup:?}");
        }
    }
    eprintln!(
        "{kills} kills ({mid_write_kills} mid-write), reached serial {last}, \
         {backups_checked} backups checked"
    );
    assert!(kills >= 10, "only {kills} kills in the time budget");
    assert!(
        mid_write_kills >= 3,
        "only {mid_write_kills} kills landed mid-write"
    );
    assert!(
        last > 20,
        "writers made little progress: serial {last} after {kills} kills"
    );

    // A clean write afterwards works and sweeps the killed writers' temp files.
    let mut store = LocalStore::new(&path);
    let _g = store.lock("test", Duration::ZERO).unwrap();
    let cur = store.load().unwrap().unwrap();
    let mut next = generation_state(&cur.lineage, cur.serial + 1);
    next.serial = cur.serial;
    assert_eq!(store.write(&next).unwrap().serial(), cur.serial + 1);
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
}

/// A writer killed between replacing the backup (a hard link to the state file) and its own
/// rename leaves the backup and the state file one inode. The next write must still leave no
/// temp file: rename(2) of its backup link onto the backup is then a no-op that keeps the link.
#[test]
fn a_backup_linked_to_the_state_file_leaves_no_temp_file_on_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let backup = dir.path().join("s.json.backup");
    let lineage = uuid::Uuid::new_v4().to_string();
    let mut first = generation_state(&lineage, 1);
    first.serial = 0;
    create(&path, &first);
    let before = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&backup);
    std::fs::hard_link(&path, &backup).unwrap();

    let mut store = LocalStore::new(&path);
    let _g = store.lock("test", Duration::ZERO).unwrap();
    let cur = store.load().unwrap().unwrap();
    let mut next = generation_state(&lineage, 2);
    next.serial = cur.serial;
    assert_eq!(store.write(&next).unwrap().serial(), 2);
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    assert_eq!(
        std::fs::read(&backup).unwrap(),
        before,
        "backup holds generation 1"
    );
    assert_eq!(generation_of(&store.load().unwrap().unwrap()), 2);
}

#[test]
fn writer_killed_at_each_stage_leaves_old_or_new_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let lineage = uuid::Uuid::new_v4().to_string();
    let mut first = generation_state(&lineage, 1);
    first.serial = 0;
    create(&path, &first);
    // A second clean write so that a backup exists before the crashes.
    {
        let mut store = LocalStore::new(&path);
        let _g = store.lock("test", Duration::ZERO).unwrap();
        store.load().unwrap();
        let mut s = generation_state(&lineage, 2);
        s.serial = 1;
        assert_eq!(
            store.write(&s).unwrap(),
            WriteOutcome::Written { serial: 2 }
        );
    }
    let mut expected = 2;
    for stage in WriteStage::ALL {
        let before = std::fs::read(&path).unwrap();
        let backup_before = std::fs::read(format!("{}.backup", path.display())).unwrap();
        let mut child = spawn_child(&format!("stop-at {}", stage.name()), &path);
        assert_eq!(child.wait_for("STOPPED"), stage.name());
        child.kill();

        let now = LocalStore::new(&path)
            .load()
            .unwrap_or_else(|e| panic!("killed at {}: {e}", stage.name()));
        let generation = generation_of(&now.unwrap());
        let renamed = matches!(stage, WriteStage::Renamed | WriteStage::DirSynced);
        if renamed {
            expected += 1;
        } else {
            assert_eq!(std::fs::read(&path).unwrap(), before, "{}", stage.name());
            // The temp file is left behind, proof that the writer died mid-write.
            assert_eq!(temp_files(dir.path()).len(), 1, "{}", stage.name());
        }
        assert_eq!(generation, expected, "killed at {}", stage.name());
        let backup = LocalStore::new(format!("{}.backup", path.display()))
            .load()
            .unwrap()
            .unwrap();
        let bg = generation_of(&backup);
        if stage == WriteStage::TempWritten || stage == WriteStage::TempSynced {
            assert_eq!(
                std::fs::read(format!("{}.backup", path.display())).unwrap(),
                backup_before
            );
        } else {
            // From BackupWritten on, the backup is the version the crashed write replaced.
            assert_eq!(bg, if renamed { expected - 1 } else { expected });
        }
    }
}

#[test]
fn every_write_stage_is_observed_in_order_and_readers_see_old_or_new() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let lineage = uuid::Uuid::new_v4().to_string();
    let mut first = generation_state(&lineage, 1);
    first.serial = 0;
    create(&path, &first);

    let seen: Arc<Mutex<Vec<(WriteStage, u64)>>> = Arc::default();
    let mut store = LocalStore::new(&path);
    let _g = store.lock("test", Duration::ZERO).unwrap();
    store.load().unwrap();
    let (reader_path, log) = (path.clone(), Arc::clone(&seen));
    store.observe_write_stages(move |stage| {
        // A reader at this very point (another process would see the same files).
        let s = LocalStore::new(&reader_path).load().unwrap().unwrap();
        log.lock().unwrap().push((stage, generation_of(&s)));
    });
    let mut s = generation_state(&lineage, 2);
    s.serial = 1;
    store.write(&s).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (WriteStage::TempWritten, 1),
            (WriteStage::TempSynced, 1),
            (WriteStage::BackupWritten, 1),
            (WriteStage::Renamed, 2),
            (WriteStage::DirSynced, 2),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Lock

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

// ---------------------------------------------------------------------------------------------
// Files that must not be overwritten

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
        host_key: k0sform::ssh::fingerprint(KEY).unwrap(),
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

// ---------------------------------------------------------------------------------------------
// Commands

fn k0sform(args: &[&str], cwd: &Path) -> (i32, String, String) {
    bin::output(bin::k0sform().args(args).current_dir(cwd))
}

#[test]
fn state_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No state file: list says so (exit 0); show, rm and pull fail (exit 1).
    let (code, out, _) = k0sform(&["state", "list"], d);
    assert_eq!(
        (code, out.as_str()),
        (0, "No state at k0sform.state.json.\n")
    );
    for args in [
        &["state", "show", "127.0.0.1"][..],
        &["state", "rm", "127.0.0.1"],
        &["state", "pull"],
    ] {
        let (code, _, err) = k0sform(args, d);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains("no state file at k0sform.state.json"), "{err}");
    }

    // The default path is beside the spec: the first -c file's folder, or the folder itself.
    std::fs::create_dir(d.join("cluster")).unwrap();
    let path = d.join("cluster").join("k0sform.state.json");
    let s = sample_state();
    create(&path, &s);
    let expected_list = "\
ADDRESS         ROLE               NODE   MACHINE-ID    MEMBER-ID
127.0.0.1       controller         node1  01d12a9b7c0e  8e9e05c521646901
127.0.0.1:2222  controller+worker  node3  03d12a9b7c0e  8e9e05c521646903
127.0.0.2       controller         node2  02d12a9b7c0e  8e9e05c521646902
127.0.1.1       worker             node4  04d12a9b7c0e  -
";
    for c in ["cluster/k0sctl.yaml", "cluster"] {
        let (code, out, err) = k0sform(&["-c", c, "state", "list"], d);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, expected_list);
    }
    let (code, out, _) = k0sform(&["-state=cluster/k0sform.state.json", "state", "list"], d);
    assert_eq!((code, out.as_str()), (0, expected_list));

    // pull: the raw file.
    let (code, out, _) = k0sform(&["-c", "cluster/k0sctl.yaml", "state", "pull"], d);
    assert_eq!(code, 0);
    assert_eq!(out, std::fs::read_to_string(&path).unwrap());

    // show: every field; the port is needed when an address has several.
    let (code, out, _) = k0sform(
        &[
            "-state",
            path.to_str().unwrap(),
            "state",
            "show",
            "127.0.0.2",
        ],
        d,
    );
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "\
address:              127.0.0.2
port:                 22
role:                 controller
node name:            node2
machine-id:           02d12a9b7c0e4f8a1b2c3d4e5f6a7b8c9
host key:             SHA256:Qx2k5c2b0GdqKxH0m1c3cZ3pY8mNqS7a0Uo1p2q3r4
host public key:      ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI2Ht7q0n4b0dD4c2bA1 root@node2
etcd member ID:       8e9e05c521646902
etcd peer URL:        https://127.0.0.2:2380
k0s version:          v1.33.4+k0s.0
install flags sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
config sha256:        bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
unfinished steps:
  remove-member node2 (remove_member), started 2026-12-02T15:00:00Z
"
    );
    let state_arg = ["-state", path.to_str().unwrap()];
    let run = |extra: &[&str]| k0sform(&[&state_arg[..], extra].concat(), d);
    let (code, _, err) = run(&["state", "show", "127.0.0.1"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("127.0.0.1:22, 127.0.0.1:2222; give ADDR:PORT"),
        "{err}"
    );
    let (code, out, _) = run(&["state", "show", "127.0.0.1:2222"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("role:                 controller+worker\n"),
        "{out}"
    );
    let (code, _, err) = run(&["state", "show", "127.0.0.9"]);
    assert_eq!(code, 1);
    assert!(err.contains("host 127.0.0.9 is not in the state"), "{err}");
    assert!(
        err.contains("hosts in state: 127.0.0.1, 127.0.0.1:2222, 127.0.0.2, 127.0.1.1"),
        "{err}"
    );

    // rm: forgets the host under the lock, bumps the serial, keeps the backup.
    let before = std::fs::read(&path).unwrap();
    let (code, out, err) = run(&["state", "rm", "127.0.0.1:2222"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Removed host 127.0.0.1:2222 from the state (serial 1 -> 2)"),
        "{out}"
    );
    assert_eq!(
        std::fs::read(format!("{}.backup", path.display())).unwrap(),
        before
    );
    let now = LocalStore::new(&path).load().unwrap().unwrap();
    assert_eq!(now.serial, 2);
    assert_eq!(now.hosts.len(), 3);
    assert!(now.hosts.iter().all(|h| h.port != 2222));
    let (code, _, err) = run(&["state", "rm", "127.0.0.1:2222"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("host 127.0.0.1:2222 is not in the state"),
        "{err}"
    );
    assert_eq!(LocalStore::new(&path).load().unwrap().unwrap().serial, 2);
    // The lock was released at the end of rm.
    LocalStore::new(&path).lock("test", Duration::ZERO).unwrap();

    // Remove every host: list says so.
    for a in ["127.0.0.1", "127.0.0.2", "127.0.1.1"] {
        assert_eq!(run(&["state", "rm", a]).0, 0);
    }
    assert_eq!(run(&["state", "list"]).1, "No hosts in state.\n");
}

/// Issue 16: `state mv OLD NEW` moves a record to a new address under the lock (serial + 1,
/// backup kept), keeping everything else; refused when OLD is unknown, NEW is taken or NEW is
/// not an address the spec would accept; nothing is written then.
#[test]
fn state_mv_moves_a_record_and_refuses_what_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = d.join("k0sform.state.json");
    let s = sample_state();
    create(&path, &s);
    let state_arg = ["-state", path.to_str().unwrap()];
    let run = |extra: &[&str]| k0sform(&[&state_arg[..], extra].concat(), d);

    let before = std::fs::read(&path).unwrap();
    let (code, out, err) = run(&["state", "mv", "127.0.0.2", "127.0.0.9"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Moved host 127.0.0.2 to 127.0.0.9 in the state (serial 1 -> 2)"),
        "{out}"
    );
    assert!(
        out.contains("etcd peer URL is still recorded as https://127.0.0.2:2380"),
        "{out}"
    );
    assert_eq!(
        std::fs::read(format!("{}.backup", path.display())).unwrap(),
        before
    );
    let now = LocalStore::new(&path).load().unwrap().unwrap();
    assert_eq!(now.serial, 2);
    assert!(now.host(&HostId::new("127.0.0.2", 22)).is_none());
    let moved = now.host(&HostId::new("127.0.0.9", 22)).expect("moved");
    let old = s.host(&HostId::new("127.0.0.2", 22)).unwrap();
    assert_eq!(
        (
            &moved.node_name,
            &moved.machine_id,
            &moved.host_key,
            &moved.etcd
        ),
        (&old.node_name, &old.machine_id, &old.host_key, &old.etcd)
    );
    // Its unfinished step follows it.
    assert_eq!(now.intents[0].address, "127.0.0.9");
    // Sorted by address: the moved host comes after 127.0.0.1:2222 and before 127.0.1.1.
    let order: Vec<String> = now.hosts.iter().map(|h| h.id().to_string()).collect();
    assert_eq!(
        order,
        ["127.0.0.1", "127.0.0.1:2222", "127.0.0.9", "127.0.1.1"]
    );
    // The lock was released.
    LocalStore::new(&path).lock("test", Duration::ZERO).unwrap();

    // A port: ADDR:PORT and [IPv6]:PORT; without one the port stays.
    assert_eq!(run(&["state", "mv", "127.0.0.9", "127.0.0.9:2200"]).0, 0);
    assert_eq!(run(&["state", "mv", "127.0.0.9:2200", "[::1]:2201"]).0, 0);
    assert_eq!(run(&["state", "mv", "::1", "127.0.0.8"]).0, 0);
    let now = LocalStore::new(&path).load().unwrap().unwrap();
    assert_eq!(now.serial, 5);
    assert!(
        now.host(&HostId::new("127.0.0.8", 2201)).is_some(),
        "{:?}",
        now.hosts
    );

    let unchanged = std::fs::read(&path).unwrap();
    for (args, want) in [
        (
            ["state", "mv", "127.0.0.7", "127.0.0.6"],
            "host 127.0.0.7 is not in the state",
        ),
        (
            ["state", "mv", "127.0.1.1", "127.0.0.8:2201"],
            "127.0.0.8:2201 is already in the state",
        ),
        (
            ["state", "mv", "127.0.1.1", "127.0.0.1"],
            "127.0.0.1 is already in the state",
        ),
        (
            ["state", "mv", "127.0.1.1", "evil;host"],
            "is neither an IP address nor a DNS name",
        ),
        (
            ["state", "mv", "127.0.1.1", "10.0.0.1:0"],
            "0 is not a valid port",
        ),
        (
            ["state", "mv", "127.0.1.1", "10.0.0.1:ssh"],
            "`ssh` is not a port",
        ),
        (["state", "mv", "127.0.1.1", "[::1"], "`[` without `]`"),
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), unchanged);
}

#[test]
fn default_path_follows_the_spec() {
    use clap::Parser;
    let dir = tempfile::tempdir().unwrap();
    let path_for = |args: &[&str]| {
        let argv = [&["k0sform"][..], args, &["state", "list"]].concat();
        let cli = k0sform::cli::Cli::try_parse_from(k0sform::cli::normalize(
            argv.into_iter().map(Into::into).collect(),
        ))
        .unwrap();
        state::default_path(cli.global.state.as_deref(), &cli.global.config)
    };
    assert_eq!(path_for(&[]), PathBuf::from("k0sform.state.json"));
    assert_eq!(
        path_for(&["-c", "a/b/k0sctl.yaml", "-c", "c/x.yaml"]),
        PathBuf::from("a/b/k0sform.state.json")
    );
    let d = dir.path().to_str().unwrap();
    assert_eq!(path_for(&["-c", d]), dir.path().join("k0sform.state.json"));
    assert_eq!(
        path_for(&["-c", "a/k0sctl.yaml", "-state", "s.json"]),
        PathBuf::from("s.json")
    );
}

// ---------------------------------------------------------------------------------------------
// Schema

#[test]
fn state_schema_is_up_to_date() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/state.schema.json");
    let generated = state::json_schema();
    if std::env::var_os("K0SFORM_UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &generated).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        current == generated,
        "{} is stale: it no longer matches the State type. Regenerate it with\n    \
         K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform state::state_schema_is_up_to_date",
        file.display()
    );
    // The checked-in schema describes real files: a written state has every required field.
    let schema: serde_json::Value = serde_json::from_str(&current).unwrap();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let written: serde_json::Value =
        serde_json::from_str(&sample_state().to_canonical_json().unwrap()).unwrap();
    for r in required {
        assert!(written.get(r).is_some(), "required {r} not written");
    }
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
