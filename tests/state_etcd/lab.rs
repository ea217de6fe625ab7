//! The real commands against a lab (real sshd and etcd, the k0s double) with the state in etcd.

use super::*;

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
