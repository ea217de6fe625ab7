//! The state in etcd, against a real etcd (Debian's etcd-server, tests/support/etcd.rs) started by
//! each test on its own loopback address: what only a remote store has (the guarantees every
//! backend gives are the conformance suite in `state_store.rs`, run against etcd too): force-unlock
//! by ID, a lease that frees the lock of a killed holder, fenced writes refused after the lock was
//! lost, etcd going away and coming back, push/pull/migration, URLs and TLS, the commands in a lab.
//!
//! Child processes are this test binary run again with K0SFORM_ETCD_TEST_CHILD set: see
//! `child_process_entry`.

use crate::support::bin;
use crate::support::child::ChildProc;
use crate::support::e2e;
use crate::support::etcd::EtcdServer;
use crate::support::prereq::require_lab;
use crate::support::states::sample_state;
use k0sform::state::{EtcdOptions, EtcdStore, LocalStore, State, StateError, StateStore};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An HTTP/1.1 server on 127.0.0.1 answering each request by its path, one request per
/// connection.
mod fake_gateway;
mod gateway;
mod lab;
mod locking;
mod store;

const CHILD_ENV: &str = "K0SFORM_ETCD_TEST_CHILD";
const HOLD_OPERATION: &str = "test hold";

fn opts(timeout: Duration) -> EtcdOptions {
    EtcdOptions {
        lock_ttl: Duration::from_secs(3),
        request_timeout: timeout,
        ..EtcdOptions::default()
    }
}

fn store(url: &str) -> EtcdStore {
    EtcdStore::open(url, &opts(Duration::from_secs(5))).unwrap()
}

/// Write `state` as a new state at `url`, under the lock; its serial.
fn create(url: &str, state: &State) -> u64 {
    let mut s = store(url);
    let g = s.lock("test", Duration::ZERO).unwrap();
    let serial = s.write(state).unwrap().serial();
    g.unlock().unwrap();
    serial
}

/// A real etcd holding `sample_state()` at `prefix`: the server and the state's URL.
fn etcd_with_sample_state(prefix: &str) -> (EtcdServer, String) {
    let etcd = EtcdServer::start();
    let url = etcd.url(prefix);
    create(&url, &sample_state());
    (etcd, url)
}

fn load(url: &str) -> State {
    store(url).load().unwrap().expect("a state")
}

// ---------------------------------------------------------------------------------------------
// Child processes

/// Not a test: the body of child processes, doing nothing unless K0SFORM_ETCD_TEST_CHILD is set.
/// Modes: `hold-lock` (take the lock, print READY <id>, hold it until stdin closes),
/// `hold-then-write` (take the lock, write one checkpoint, print READY <id>, then write again
/// whenever a line arrives on stdin, printing WROTE <serial> or REFUSED <error>).
#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let url = std::env::var("K0SFORM_ETCD_TEST_URL").unwrap();
    let ttl = std::env::var("K0SFORM_ETCD_TEST_TTL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut store = EtcdStore::open(
        &url,
        &EtcdOptions {
            lock_ttl: Duration::from_secs(ttl),
            request_timeout: Duration::from_secs(5),
            ..EtcdOptions::default()
        },
    )
    .unwrap();
    let say = |line: String| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").unwrap();
        out.flush().unwrap();
    };
    let g = store.lock(HOLD_OPERATION, Duration::ZERO).unwrap();
    match mode.as_str() {
        "hold-lock" => {
            say(format!("READY {}", g.id()));
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).unwrap() > 0 {}
            g.unlock().unwrap();
        }
        "hold-then-write" => {
            let mut s = store.load().unwrap().unwrap();
            s.hosts[0].k0s_version = Some("v1.34.0+k0s.0".parse().unwrap());
            store.write(&s).unwrap();
            say(format!("READY {}", g.id()));
            let mut line = String::new();
            let mut n = 0;
            while std::io::stdin().read_line(&mut line).unwrap() > 0 {
                n += 1;
                s.hosts[0].node_name = Some(format!("renamed-{n}"));
                match store.write(&s) {
                    Ok(o) => say(format!("WROTE {}", o.serial())),
                    Err(e) => say(format!("REFUSED {e}")),
                }
                line.clear();
            }
            drop(g);
        }
        other => panic!("unknown child mode {other:?}"),
    }
}

/// A lock holder/writer process (this binary's `child_process_entry`) on the etcd state at `url`.
fn spawn_child(mode: &str, url: &str, ttl_secs: u64) -> ChildProc {
    ChildProc::start(
        "state_etcd::child_process_entry",
        CHILD_ENV,
        mode,
        &[
            ("K0SFORM_ETCD_TEST_URL", url.to_string()),
            ("K0SFORM_ETCD_TEST_TTL", ttl_secs.to_string()),
        ],
    )
}

fn k0sform_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    bin::output(bin::k0sform().args(args).envs(env.iter().copied()))
}

fn k0sform(args: &[&str]) -> (i32, String, String) {
    k0sform_env(args, &[])
}
