//! Push, pull and migration, the K0SFORM_STATE variable, async callers, URLs and TLS settings.

use super::*;

/// `k0sform -state STATE state push [-force] FILE`.
fn push(state: &str, file: &std::path::Path, force: bool) -> (i32, String, String) {
    let mut args = vec!["-state", state, "state", "push"];
    if force {
        args.push("-force");
    }
    args.push(file.to_str().unwrap());
    k0sform(&args)
}

/// `k0sform -state STATE state pull`.
fn pull(state: &str) -> (i32, String, String) {
    k0sform(&["-state", state, "state", "pull"])
}

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
    let (code, out, err) = pull(local_s);
    assert_eq!(code, 0, "{err}");
    std::fs::write(&pulled, &out).unwrap();
    let (code, msg, err) = push(&url, &pulled, false);
    assert_eq!(code, 0, "{err}");
    assert!(msg.contains("serial 7"), "{msg}");
    let remote = load(&url);
    assert_eq!(
        (remote.lineage.as_str(), remote.serial),
        (st.lineage.as_str(), 7)
    );
    let (code, remote_pull, _) = pull(&url);
    assert_eq!(code, 0);
    assert_eq!(remote_pull, out, "byte for byte the same state");
    // Pushing the same again changes nothing.
    let (code, msg, _) = push(&url, &pulled, false);
    assert_eq!(code, 0);
    assert!(msg.contains("already holds"), "{msg}");

    // Work happens on etcd: serial 8.
    let (code, _, err) = k0sform(&["-state", &url, "state", "rm", "127.0.1.1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(load(&url).serial, 8);

    // The old file (serial 7) is refused now; so is another lineage; -force overrides.
    let (code, _, err) = push(&url, &pulled, false);
    assert_eq!(code, 1);
    assert!(
        err.contains("older serial 7") && err.contains("-force"),
        "{err}"
    );
    let other = dir.path().join("other.json");
    let mut o = sample_state();
    o.serial = 50;
    std::fs::write(&other, o.to_canonical_json().unwrap()).unwrap();
    let (code, _, err) = push(&url, &other, false);
    assert_eq!(code, 1);
    assert!(
        err.contains(&o.lineage) && err.contains(&st.lineage),
        "{err}"
    );
    assert_eq!(load(&url).serial, 8);

    // etcd -> local (a new file), keeping lineage and serial.
    let back = dir.path().join("back.json");
    let (code, out8, _) = pull(&url);
    assert_eq!(code, 0);
    let f8 = dir.path().join("eight.json");
    std::fs::write(&f8, &out8).unwrap();
    let (code, _, err) = push(back.to_str().unwrap(), &f8, false);
    assert_eq!(code, 0, "{err}");
    let local_back = LocalStore::new(&back).load().unwrap().unwrap();
    assert_eq!(
        (local_back.lineage.as_str(), local_back.serial),
        (st.lineage.as_str(), 8)
    );
    assert_eq!(std::fs::read_to_string(&back).unwrap(), out8);
    // The local backend refuses an older serial too.
    let (code, _, err) = push(back.to_str().unwrap(), &pulled, false);
    assert_eq!(code, 1);
    assert!(err.contains("older serial 7"), "{err}");

    // Forced: the serial keeps growing past the stored one, so saved plans go stale.
    let (code, msg, err) = push(&url, &other, true);
    assert_eq!(code, 0, "{err}");
    assert!(msg.contains("serial 50"), "{msg}");
    let (code, msg, err) = push(&url, &pulled, true);
    assert_eq!(code, 0, "{err}");
    assert!(msg.contains("serial 51"), "{msg}");
    // Every pushed version is in the history.
    assert_eq!(store(&url).load_serial(50).unwrap().lineage, o.lineage);
}

#[test]
fn k0sform_state_variable_selects_the_store() {
    require_lab!();
    let (etcd, url) = etcd_with_sample_state("/k0sform/env");
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
