//! Whether this machine can run the tests that need the lab, real sshd or real etcd, and the rule
//! for when it cannot: such a test begins with `require_lab!();`, which prints
//! `skipped: <test>: <reason>` to stderr and returns, so that `cargo test` passes as an ordinary
//! user; with `K0SFORM_REQUIRE_LAB=1` (set by `.ci/run`) a missing prerequisite fails the test
//! instead. The fixtures (`Lab::create_with`, `Sshd::start_with`, `EtcdServer::start_with`) refuse
//! to start in a test that did not begin with `require_lab!();`, so no such test can be missed.
//! Import with `use crate::support::prereq::require_lab;`.
#![allow(dead_code)]

use std::cell::Cell;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `K0SFORM_REQUIRE_LAB=1`: a missing prerequisite is a failure, not a skip.
pub const REQUIRE_ENV: &str = "K0SFORM_REQUIRE_LAB";

/// Programs looked up by name in the lab's PATH (`testdata/lab/lab.py`'s CLEAN_PATH).
const PATH_DIRS: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// What the lab, the sshd fixture and the etcd fixture run (Debian packages in
/// `testdata/lab/setup`).
const PROGRAMS: [&str; 10] = [
    "/usr/sbin/sshd",
    "/usr/bin/etcd",
    "/usr/bin/etcdctl",
    "/usr/bin/python3",
    "ssh",
    "ssh-keygen",
    "unshare",
    "nsenter",
    "ip",
    "nft",
];

thread_local! {
    static CHECKED: Cell<bool> = const { Cell::new(false) };
}

/// Some test of this process began with `require_lab!();` and found the lab available: what a
/// thread the test spawned (unnamed, or a tokio worker) goes by, as it has no name to check.
static ANY_CHECKED: AtomicBool = AtomicBool::new(false);

/// Is this the thread libtest runs a test on (named after the test), rather than one a test
/// spawned (`std::thread::spawn`, `thread::scope`, a tokio worker)?
fn on_test_thread() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n != "main" && n != "tokio-runtime-worker")
}

/// `Ok` when the lab can run here: root (it creates namespaces and runs sshd as root) and every
/// program it runs installed; otherwise what is missing.
pub fn lab_available() -> Result<(), String> {
    // `id -u` rather than libc::geteuid: keeps the support modules dependency-free.
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if uid.as_deref().ok() != Some("0") {
        return Err("not root (the lab creates namespaces and runs sshd and etcd as root)".into());
    }
    let missing: Vec<&str> = PROGRAMS
        .iter()
        .copied()
        .filter(|p| {
            if p.starts_with('/') {
                !Path::new(p).is_file()
            } else {
                !PATH_DIRS.iter().any(|d| Path::new(d).join(p).is_file())
            }
        })
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} not installed (the packages are listed in testdata/lab/setup)",
            missing.join(", ")
        ));
    }
    Ok(())
}

/// The running test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_string()
}

/// `require_lab!()`'s check: `true` when the test must be skipped (after printing why); panics
/// instead under `K0SFORM_REQUIRE_LAB=1`.
pub fn skip() -> bool {
    CHECKED.with(|c| c.set(true));
    let Err(why) = lab_available() else {
        ANY_CHECKED.store(true, Ordering::SeqCst);
        return false;
    };
    if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") {
        panic!(
            "{}: {REQUIRE_ENV}=1 and the lab cannot run: {why}",
            test_name()
        );
    }
    // Straight to stderr, past libtest's capture of `eprintln!`: a skip shows in every run.
    let _ = writeln!(std::io::stderr(), "skipped: {}: {why}", test_name());
    true
}

/// Called by each fixture before it starts anything: the test must have begun with
/// `require_lab!();`. On a thread the test spawned (which libtest did not name after it), a test
/// of this process having passed `require_lab!()` is what counts.
pub fn assert_required(fixture: &str) {
    let checked = if on_test_thread() {
        CHECKED.with(Cell::get)
    } else {
        ANY_CHECKED.load(Ordering::SeqCst)
    };
    assert!(
        checked,
        "{}: starts {fixture} but does not begin with `require_lab!();` (tests/support/prereq.rs), \
         so it would fail instead of skipping where the lab cannot run",
        test_name()
    );
}

/// First line of every test that starts a lab, an sshd or an etcd: returns from the test (a skip,
/// printed to stderr) when they cannot run here, unless `K0SFORM_REQUIRE_LAB=1`.
macro_rules! require_lab {
    () => {
        if crate::support::prereq::skip() {
            return;
        }
    };
}
pub(crate) use require_lab;
