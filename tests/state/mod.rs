//! The local state file: atomic writes that survive a writer killed at any point, the OS file
//! lock, the backup, permissions, symbolic links, the `state` commands, and the checked-in JSON
//! Schema. What every backend guarantees (serial, lineage, refusal of bad states and secrets,
//! locking between processes) is the conformance suite in `state_store.rs`.
//!
//! Child processes are this test binary run again with K0SFORM_STATE_TEST_CHILD set: see
//! `child_process_entry`.

use crate::support::bin;
use crate::support::child::ChildProc;
use crate::support::schema_files;
use crate::support::states::{host, sample_state};

use k0sform::hostid::HostId;
use k0sform::spec::Role;
use k0sform::state::{self, ClusterState, LocalStore, State, StateStore, WriteOutcome, WriteStage};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod commands;
mod crash;
mod files;
mod lock;

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

// ---------------------------------------------------------------------------------------------
// Commands

fn k0sform(args: &[&str], cwd: &Path) -> (i32, String, String) {
    bin::output(bin::k0sform().args(args).current_dir(cwd))
}

// ---------------------------------------------------------------------------------------------
// Schema

#[test]
fn state_schema_is_up_to_date() {
    let current = schema_files::checked_in(
        "state.schema.json",
        &state::json_schema(),
        "state::state_schema_is_up_to_date",
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
