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

// ---------------------------------------------------------------------------------------------
// The local backend's guarantees

// ---------------------------------------------------------------------------------------------
// Locking

#[test]
fn force_unlock_removes_only_the_lock_with_that_id_and_fences_the_old_holder() {
    require_lab!();
    let etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/force");
    create(&url, &sample_state());
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
    let etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/revoke");
    create(&url, &sample_state());
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
    let etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/kill");
    create(&url, &sample_state());
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
    let (code, out, stderr) = k0sform(&[
        "-lock-timeout=20s",
        "-state",
        &url,
        "state",
        "rm",
        "127.0.1.1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("serial 3 -> 4"), "{out}");
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
    let mut etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/down");
    create(&url, &sample_state());
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
    let (code, out, stderr) = k0sform(&[
        "-lock-timeout=20s",
        "-state",
        &url,
        "state",
        "rm",
        "127.0.1.1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("serial 2 -> 3"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// Push, pull, migration

#[test]
fn push_pull_and_migration_keep_lineage_and_serial() {
    require_lab!();
    let etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/migrate");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("k0sform.state.json");
    let mut st = sample_state();
    st.serial = 7;
    std::fs::write(&local, st.to_canonical_json().unwrap()).unwrap();
    let local_s = local.to_str().unwrap();

    // local -> etcd, as the README says: `state pull > f && -state etcd://… state push f`.
    let pulled = dir.path().join("pulled.json");
    let (code, out, err) = k0sform(&["-state", local_s, "state", "pull"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(&pulled, &out).unwrap();
    let (code, msg, err) = k0sform(&["-state", &url, "state", "push", pulled.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(msg.contains("serial 7"), "{msg}");
    let remote = load(&url);
    assert_eq!(
        (remote.lineage.as_str(), remote.serial),
        (st.lineage.as_str(), 7)
    );
    let (code, remote_pull, _) = k0sform(&["-state", &url, "state", "pull"]);
    assert_eq!(code, 0);
    assert_eq!(remote_pull, out, "byte for byte the same state");
    // Pushing the same again changes nothing.
    let (code, msg, _) = k0sform(&["-state", &url, "state", "push", pulled.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(msg.contains("already holds"), "{msg}");

    // Work happens on etcd: serial 8.
    let (code, _, err) = k0sform(&["-state", &url, "state", "rm", "127.0.1.1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(load(&url).serial, 8);

    // The old file (serial 7) is refused now; so is another lineage; -force overrides.
    let (code, _, err) = k0sform(&["-state", &url, "state", "push", pulled.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("older serial 7") && err.contains("-force"),
        "{err}"
    );
    let other = dir.path().join("other.json");
    let mut o = sample_state();
    o.serial = 50;
    std::fs::write(&other, o.to_canonical_json().unwrap()).unwrap();
    let (code, _, err) = k0sform(&["-state", &url, "state", "push", other.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&o.lineage) && err.contains(&st.lineage),
        "{err}"
    );
    assert_eq!(load(&url).serial, 8);

    // etcd -> local (a new file), keeping lineage and serial.
    let back = dir.path().join("back.json");
    let (code, out8, _) = k0sform(&["-state", &url, "state", "pull"]);
    assert_eq!(code, 0);
    let f8 = dir.path().join("eight.json");
    std::fs::write(&f8, &out8).unwrap();
    let (code, _, err) = k0sform(&[
        "-state",
        back.to_str().unwrap(),
        "state",
        "push",
        f8.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let local_back = LocalStore::new(&back).load().unwrap().unwrap();
    assert_eq!(
        (local_back.lineage.as_str(), local_back.serial),
        (st.lineage.as_str(), 8)
    );
    assert_eq!(std::fs::read_to_string(&back).unwrap(), out8);
    // The local backend refuses an older serial too.
    let (code, _, err) = k0sform(&[
        "-state",
        back.to_str().unwrap(),
        "state",
        "push",
        pulled.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("older serial 7"), "{err}");

    // Forced: the serial keeps growing past the stored one, so saved plans go stale.
    let (code, msg, err) = k0sform(&[
        "-state",
        &url,
        "state",
        "push",
        "-force",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(msg.contains("serial 50"), "{msg}");
    let (code, msg, err) = k0sform(&[
        "-state",
        &url,
        "state",
        "push",
        "-force",
        pulled.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(msg.contains("serial 51"), "{msg}");
    // Every pushed version is in the history.
    assert_eq!(store(&url).load_serial(50).unwrap().lineage, o.lineage);
}

#[test]
fn k0sform_state_variable_selects_the_store() {
    require_lab!();
    let etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/env");
    create(&url, &sample_state());
    let (code, out, err) = k0sform_env(&["state", "list"], &[("K0SFORM_STATE", &url)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("127.0.1.1") && out.contains("MACHINE-ID"),
        "{out}"
    );
    let (code, out, _) = k0sform_env(&["show"], &[("K0SFORM_STATE", &url)]);
    assert_eq!(code, 0);
    assert!(out.contains("127.0.0.2"), "{out}");
    // -state wins over the variable.
    let (code, out, _) = k0sform_env(
        &["-state", &etcd.url("/k0sform/empty"), "state", "list"],
        &[("K0SFORM_STATE", &url)],
    );
    assert_eq!(code, 0);
    assert!(out.starts_with("No state at"), "{out}");
}

#[test]
fn store_works_inside_an_async_runtime() {
    require_lab!();
    // The commands call the synchronous store from inside their tokio runtime: no nested
    // block_on panic, on the runtime's own thread and on a worker.
    let etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/async");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url2 = url.clone();
    rt.block_on(async move {
        let mut s = store(&url2);
        let g = s.lock("apply", Duration::ZERO).unwrap();
        assert_eq!(s.write(&sample_state()).unwrap().serial(), 1);
        let task = tokio::spawn(async move {
            let mut st = s.load().unwrap().unwrap();
            st.hosts.pop();
            let serial = s.write(&st).unwrap().serial();
            drop(g);
            drop(s);
            serial
        });
        assert_eq!(task.await.unwrap(), 2);
    });
    drop(rt);
    assert_eq!(load(&url).hosts.len(), 3);
    assert_eq!(etcd.get("/k0sform/async/lock"), None);
}

#[test]
fn bad_urls_and_tls_settings_are_explained() {
    for (url, env, problem) in [
        ("etcd://127.0.0.1:2379", vec![], "the key prefix is missing"),
        (
            "etcds://127.0.0.1:2379/p",
            vec![],
            "needs the CA certificate",
        ),
        (
            "etcds://127.0.0.1:2379/p",
            vec![("K0SFORM_ETCD_CACERT", "/nonexistent/ca.pem")],
            "cannot read the CA certificate /nonexistent/ca.pem",
        ),
    ] {
        let (code, _, err) = k0sform_env(&["-state", url, "state", "list"], &env);
        assert_eq!(code, 1, "{url}: {err}");
        assert!(err.contains(problem), "{url}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "not a cert").unwrap();
    let (code, _, err) = k0sform(&[
        "-state",
        "etcds://127.0.0.1:2379/p",
        "--etcd-cacert",
        ca.to_str().unwrap(),
        "--etcd-cert",
        ca.to_str().unwrap(),
        "state",
        "list",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("give both --etcd-cert and --etcd-key"),
        "{err}"
    );
}

#[test]
fn etcds_uses_the_ca_and_client_certificate_from_flags_or_environment() {
    require_lab!();
    let etcd = EtcdServer::start_tls();
    let url = etcd.url("/k0sform/tls");
    assert!(url.starts_with("etcds://"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.json");
    std::fs::write(&file, sample_state().to_canonical_json().unwrap()).unwrap();
    let file = file.to_str().unwrap();
    let (ca, cert, key) = (
        etcd.cert("ca"),
        etcd.cert("client"),
        etcd.cert("client-key"),
    );

    // Flags.
    let (code, out, err) = k0sform(&[
        "-state",
        &url,
        "--etcd-cacert",
        &ca,
        "--etcd-cert",
        &cert,
        "--etcd-key",
        &key,
        "state",
        "push",
        file,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("serial 0"), "{out}");
    // The same through K0SFORM_STATE and K0SFORM_ETCD_*.
    let env = [
        ("K0SFORM_STATE", url.as_str()),
        ("K0SFORM_ETCD_CACERT", ca.as_str()),
        ("K0SFORM_ETCD_CERT", cert.as_str()),
        ("K0SFORM_ETCD_KEY", key.as_str()),
    ];
    let (code, out, err) = k0sform_env(&["state", "rm", "127.0.1.1"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("serial 0 -> 1"), "{out}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&etcd.get("/k0sform/tls/state").unwrap())
            .unwrap()["serial"],
        1
    );

    // Without the client certificate etcd refuses; with another CA the server is not trusted.
    let short_timeout = ("K0SFORM_ETCD_TIMEOUT", "3s");
    let (code, _, err) = k0sform_env(
        &["-state", &url, "--etcd-cacert", &ca, "state", "list"],
        &[short_timeout],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("cannot read the state at {url}")),
        "{err}"
    );
    assert!(err.contains("give --etcd-cert and --etcd-key"), "{err}");
    let other = etcd.cert("other-ca");
    let (code, _, err) = k0sform_env(
        &[
            "-state",
            &url,
            "--etcd-cacert",
            &other,
            "--etcd-cert",
            &cert,
            "--etcd-key",
            &key,
            "state",
            "list",
        ],
        &[short_timeout],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("cannot read the state at {url}")),
        "{err}"
    );
    assert!(err.contains("invalid peer certificate"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// The real commands against a lab (real sshd and etcd, the k0s double) with the state in etcd

/// `k0sform -c SPEC -state URL ARGS` in the lab's folder.
fn lab_command(c: &e2e::Cluster, url: &str, args: &[&str]) -> Command {
    let mut cmd = bin::k0sform();
    cmd.arg("-c")
        .arg(&c.spec)
        .args(["-state", url, "-no-color"])
        .args(args)
        .current_dir(c.lab.dir())
        .env("K0SFORM_ETCD_LOCK_TTL", "3s")
        .env("K0SFORM_ETCD_TIMEOUT", "3s")
        .stdin(Stdio::null());
    cmd
}

fn lab_run(c: &e2e::Cluster, url: &str, args: &[&str]) -> (i32, String) {
    let out = lab_command(c, url, args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Start `apply -auto-approve` and, when its output shows `marker`, call `at_marker` (with the
/// child's pid); then wait for it. Returns (marker seen, exit code, output).
fn apply_until(
    c: &e2e::Cluster,
    url: &str,
    extra: &[&str],
    marker: &str,
    at_marker: impl FnOnce(&mut Child),
) -> (bool, i32, String) {
    let args = [&["apply", "-auto-approve"][..], extra].concat();
    let mut child = lab_command(c, url, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut seen = false;
    let mut text = String::new();
    let mut at_marker = Some(at_marker);
    for line in BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        text.push_str(&line);
        text.push('\n');
        if !seen && line.contains(marker) {
            seen = true;
            if let Some(f) = at_marker.take() {
                f(&mut child);
            }
        }
    }
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
    let status = child.wait().unwrap();
    text.push_str(&err);
    (seen, status.code().unwrap_or(-1), text)
}

#[test]
fn lab_plan_apply_saved_plans_and_failures_with_the_state_in_etcd() {
    require_lab!();
    let mut etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/lab");
    let c = e2e::Cluster::new(&[("c1", "controller"), ("w1", "worker")]);

    // plan on fresh hosts: changes, and nothing stored.
    let (code, out) = lab_run(&c, &url, &["plan", "-detailed-exitcode"]);
    assert_eq!(code, 2, "{out}");
    assert!(etcd.keys("/k0sform/lab/").is_empty());

    // apply killed -9 in the middle: its lock outlives it until the lease (3 s) expires, and the
    // state is its last checkpoint.
    let (seen, _, out) = apply_until(&c, &url, &[], "Joining the cluster as worker", |child| {
        let _ = child.kill();
    });
    assert!(seen, "the apply never reached join_worker: {out}");
    let after_kill = load(&url);
    assert!(after_kill.cluster.is_some(), "bootstrap checkpoint stored");
    let (code, out) = lab_run(&c, &url, &["apply", "-auto-approve"]);
    assert_eq!(code, 4, "the dead holder's lease is still alive: {out}");
    let (code, out) = lab_run(&c, &url, &["apply", "-auto-approve", "-lock-timeout=30s"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Apply complete"), "{out}");
    let done = load(&url);
    assert_eq!(done.lineage, after_kill.lineage);
    assert!(done.serial > after_kill.serial);
    assert_eq!(done.hosts.len(), 2);
    let (code, out) = lab_run(&c, &url, &["plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}");

    // Saved plans: a plan made at one serial is refused once the state moved on.
    let w1 = c.lab.address("w1");
    let c1 = c.lab.address("c1");
    let (code, out) = lab_run(&c, &url, &["state", "rm", &w1]);
    assert_eq!(code, 0, "{out}");
    let plan_file = c.lab.dir().join("p.plan");
    let plan_arg = plan_file.to_str().unwrap();
    let (code, out) = lab_run(&c, &url, &["plan", "-detailed-exitcode", "-out", plan_arg]);
    assert_eq!(code, 2, "{out}");
    let (code, current) = {
        let (code, out, _) = k0sform(&["-state", &url, "state", "pull"]);
        (code, out)
    };
    assert_eq!(code, 0);
    let saved_state = c.lab.dir().join("saved.json");
    std::fs::write(&saved_state, current).unwrap();
    let (code, out) = lab_run(&c, &url, &["state", "rm", &c1]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = lab_run(
        &c,
        &url,
        &["state", "push", "-force", saved_state.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = lab_run(&c, &url, &["apply", plan_arg]);
    assert_eq!(code, 5, "same content, later serial: stale. {out}");
    // apply -refresh-only records w1 again; then nothing is left to do.
    let (code, out) = lab_run(&c, &url, &["apply", "-refresh-only", "-auto-approve"]);
    assert_eq!(code, 0, "{out}");
    assert!(load(&url).hosts.iter().any(|h| h.address == w1));
    let (code, out) = lab_run(&c, &url, &["plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}");

    // The lock lost during an apply (lease revoked from outside): the next checkpoint is refused
    // and the apply stops.
    c.lab.wipe("w1");
    let at_revoke = std::cell::Cell::new(0);
    let (seen, code, out) = apply_until(
        &c,
        &url,
        &["-replace", &w1],
        "Joining the cluster as worker",
        |_| {
            let lease = etcd.lease_of("/k0sform/lab/lock");
            etcd.etcdctl(&["lease", "revoke", &format!("{lease:x}")]);
            at_revoke.set(load(&url).serial);
        },
    );
    assert!(seen, "{out}");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("lock") && out.contains("was lost"), "{out}");
    assert!(!out.contains("Apply complete"), "{out}");
    assert_eq!(
        load(&url).serial,
        at_revoke.get(),
        "no write after the lock was lost"
    );

    // etcd stopped in the middle of an apply: it stops with a clear error; once etcd is back,
    // plan and apply go on from the last checkpoint.
    let (seen, code, out) = apply_until(
        &c,
        &url,
        &["-replace", &w1],
        "Joining the cluster as worker",
        |_| etcd.stop(),
    );
    assert!(seen, "{out}");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains(&format!("the state at {url}")), "{out}");
    assert!(!out.contains("Apply complete"), "{out}");
    etcd.restart();
    assert!(load(&url).serial >= at_revoke.get(), "a complete state");
    let (code, out) = lab_run(
        &c,
        &url,
        &[
            "apply",
            "-auto-approve",
            "-lock-timeout=30s",
            "-replace",
            &w1,
        ],
    );
    assert_eq!(code, 0, "{out}");
    let st = load(&url);
    let rec = st.hosts.iter().find(|h| h.address == w1).expect("w1");
    assert_eq!(rec.machine_id, c.lab.host("w1").machine_id);
    let (code, out) = lab_run(&c, &url, &["plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}");
}

/// Two live applies against one etcd state: exactly one runs, the other exits 4 naming the
/// holder; with `-lock-timeout` the next one waits for the first to finish.
#[test]
fn two_live_applies_against_one_etcd_state() {
    require_lab!();
    let etcd = EtcdServer::start();
    let url = etcd.url("/k0sform/two");
    let c = e2e::Cluster::new(&[("c1", "controller"), ("w1", "worker")]);
    let first = lab_command(&c, &url, &["apply", "-auto-approve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !etcd
        .keys("/k0sform/two/")
        .iter()
        .any(|k| k.ends_with("/lock"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first apply never took the lock"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, out) = lab_run(&c, &url, &["apply", "-auto-approve"]);
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains(&first.id().to_string()) && out.contains("apply"),
        "{out}"
    );
    let (code, out) = lab_run(&c, &url, &["apply", "-auto-approve", "-lock-timeout=120s"]);
    assert_eq!(code, 0, "{out}");
    let first = first.wait_with_output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stdout)
    );
    // The waiting apply ran after the first finished: it found nothing left to do.
    assert!(!out.contains("Apply complete"), "{out}");
    assert_eq!(load(&url).hosts.len(), 2);
}

fn k0sform_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    bin::output(bin::k0sform().args(args).envs(env.iter().copied()))
}

fn k0sform(args: &[&str]) -> (i32, String, String) {
    k0sform_env(args, &[])
}
