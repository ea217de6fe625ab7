//! A hostile gateway: every answer is checked (no lab needed: a small HTTP server on 127.0.0.1).

use super::*;

use fake_gateway::{FakeGateway, Reply};

/// `load` against a gateway answering every range with `reply`: the error text.
fn load_error(reply: Reply) -> String {
    let gw = FakeGateway::start(move |_| reply.clone());
    let err = EtcdStore::open(&gw.url(), &opts(Duration::from_secs(2)))
        .unwrap()
        .load()
        .unwrap_err();
    assert!(matches!(err, StateError::Remote { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("cannot read the state at {}: ", gw.url())),
        "{text}"
    );
    text
}

fn kv(fields: &str) -> String {
    format!(r#"{{"header":{{"revision":"9"}},"kvs":[{{{fields}}}],"count":"1"}}"#)
}

/// base64 of the state key of `FakeGateway::url`.
const STATE_KEY: &str = "L2swc2Zvcm0vaG9zdGlsZS9zdGF0ZQ==";

#[test]
fn hostile_gateway_answers_are_refused_with_the_endpoint_named() {
    // The fake answers like etcd: a well-formed range is loaded (and parsed as a state).
    let good = sample_state().to_canonical_json().unwrap();
    let gw = FakeGateway::start(move |_| {
        use base64::Engine;
        let value = base64::engine::general_purpose::STANDARD.encode(&good);
        Reply::ok(kv(&format!(
            r#""key":"{STATE_KEY}","create_revision":"3","mod_revision":"7","version":"2","value":"{value}""#
        )))
    });
    let loaded = EtcdStore::open(&gw.url(), &opts(Duration::from_secs(2)))
        .unwrap()
        .load()
        .unwrap()
        .unwrap();
    assert_eq!(loaded.hosts.len(), sample_state().hosts.len());
    assert_eq!(gw.paths(), ["/v3/kv/range"]);

    let not_etcd = "sent an answer to /v3/kv/range that is not etcd's";
    let cases: [(&str, Reply, &[&str]); 9] = [
        (
            "HTML",
            Reply::ok("<html>hi</html>"),
            &[not_etcd, "expected value"],
        ),
        (
            "value not base64",
            Reply::ok(kv(&format!(
                r#""key":"{STATE_KEY}","create_revision":"3","mod_revision":"3","value":"%%%""#
            ))),
            &[not_etcd, "not base64"],
        ),
        (
            "revision of the wrong type",
            Reply::ok(kv(&format!(
                r#""key":"{STATE_KEY}","create_revision":"3","mod_revision":true"#
            ))),
            &[not_etcd, "a 64-bit integer as a JSON string"],
        ),
        (
            "negative revision",
            Reply::ok(kv(&format!(
                r#""key":"{STATE_KEY}","create_revision":"3","mod_revision":"-4""#
            ))),
            &[not_etcd, "not negative"],
        ),
        (
            "no revisions",
            Reply::ok(kv(&format!(r#""key":"{STATE_KEY}","value":"e30=""#))),
            &[not_etcd, "create revision 0"],
        ),
        (
            "another key",
            Reply::ok(kv(
                r#""key":"L2V0Yy9wYXNzd2Q=","create_revision":"3","mod_revision":"3""#,
            )),
            &[
                not_etcd,
                "returned the key /etc/passwd for the key /k0sform/hostile/state",
            ],
        ),
        (
            "two keys",
            Reply::ok(format!(
                r#"{{"kvs":[{{"key":"{STATE_KEY}"}},{{"key":"{STATE_KEY}"}}]}}"#
            )),
            &[not_etcd, "more than one key"],
        ),
        (
            "a list too long",
            Reply::ok(format!(r#"{{"kvs":[{}{{}}]}}"#, "{},".repeat(5000))),
            &[not_etcd, "at most 1000 entries"],
        ),
        (
            "kvs not a list",
            Reply::ok(r#"{"kvs":{"key":"x"}}"#),
            &[not_etcd, "a list of at most 1000 entries"],
        ),
    ];
    for (name, reply, wanted) in cases {
        let text = load_error(reply);
        for w in wanted {
            assert!(text.contains(w), "{name}: {w:?} missing from: {text}");
        }
    }
}

#[test]
fn hostile_gateway_errors_are_bounded_escaped_and_timed_out() {
    // A body past the limit is not read to its end.
    let started = Instant::now();
    let text = load_error(Reply::Huge);
    assert!(text.contains("larger than 8 MiB"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // An error page: its status and the start of its text, control characters made visible.
    let page = format!("\x1b[2J\x1b]0;owned\x07{}", "x".repeat(100_000));
    let text = load_error(Reply::Status(500, page));
    assert!(
        text.contains("answered HTTP 500: \\x1b[2J\\x1b]0;owned\\x07xxx"),
        "{text}"
    );
    assert!(!text.contains('\x1b') && text.len() < 1000, "{text}");
    // etcd's own error: its gRPC code by name and its message.
    let text = load_error(Reply::Status(
        400,
        r#"{"error":"etcdserver: too many requests\u001b[31m","code":8,"message":"etcdserver: too many requests\u001b[31m"}"#.into(),
    ));
    assert!(
        text.ends_with("ResourceExhausted: etcdserver: too many requests\\x1b[31m"),
        "{text}"
    );

    // No answer at all: the request timeout, naming the endpoint.
    let gw = FakeGateway::start(|_| Reply::Silent);
    let mut s = EtcdStore::open(&gw.url(), &opts(Duration::from_secs(1))).unwrap();
    let started = Instant::now();
    let err = s.load().unwrap_err().to_string();
    assert!(
        err.contains(&format!("no answer from etcd ({}) within 1s", gw.addr)),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn hostile_gateway_lock_answers_are_checked() {
    // A grant without a lease ID, a transaction without a revision or without the results asked
    // for: the lock is not taken, and the lease granted is given back.
    let lease = r#"{"header":{"revision":"4"},"ID":"77","TTL":"3"}"#;
    let cases: [(&str, &str, &str, &str); 4] = [
        (
            "grant without ID",
            r#"{"header":{"revision":"4"},"TTL":"3"}"#,
            "{}",
            "lease ID 0 with TTL 3",
        ),
        (
            "txn without revision",
            lease,
            r#"{"succeeded":true,"responses":[{"response_put":{}}]}"#,
            "the transaction's revision is 0",
        ),
        (
            "failed txn without its range",
            lease,
            r#"{"header":{"revision":"4"}}"#,
            "0 results for 1 operations",
        ),
        (
            "txn answering with the wrong operation",
            lease,
            r#"{"header":{"revision":"4"},"succeeded":true,"responses":[{"response_range":{}}]}"#,
            "a range result for a put",
        ),
    ];
    for (name, grant, txn, problem) in cases {
        let gw = FakeGateway::start(move |path| match path {
            "/v3/lease/grant" => Reply::ok(grant),
            "/v3/kv/txn" => Reply::ok(txn),
            _ => Reply::ok("{}"),
        });
        let err = EtcdStore::open(&gw.url(), &opts(Duration::from_secs(2)))
            .unwrap()
            .lock("apply", Duration::ZERO)
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "cannot take the lock on the state at {}: ",
                gw.url()
            )),
            "{name}: {text}"
        );
        assert!(text.contains(problem), "{name}: {text}");
        if grant == lease {
            assert!(gw.paths().iter().any(|p| p == "/v3/lease/revoke"), "{name}");
        }
    }

    // A lock taken; releasing a lease etcd no longer knows (gRPC NotFound) is not an error, any
    // other refusal is.
    for (revoke, released) in [
        (
            Reply::Status(
                404,
                r#"{"error":"etcdserver: requested lease not found","code":5}"#.into(),
            ),
            true,
        ),
        (
            Reply::Status(503, r#"{"error":"etcdserver: no leader","code":14}"#.into()),
            false,
        ),
    ] {
        let gw = FakeGateway::start(move |path| match path {
            "/v3/lease/grant" => Reply::ok(lease),
            "/v3/kv/txn" => Reply::ok(
                r#"{"header":{"revision":"5"},"succeeded":true,"responses":[{"response_put":{"header":{}}}]}"#,
            ),
            "/v3/lease/revoke" => revoke.clone(),
            _ => Reply::ok("{}"),
        });
        let g = EtcdStore::open(&gw.url(), &opts(Duration::from_secs(2)))
            .unwrap()
            .lock("apply", Duration::ZERO)
            .unwrap();
        match g.unlock() {
            Ok(()) => assert!(released),
            Err(e) => {
                assert!(!released, "{e}");
                assert!(
                    e.to_string().contains("Unavailable: etcdserver: no leader"),
                    "{e}"
                );
            }
        }
    }
}
