//! A client of etcd's v3 JSON gateway: what the etcd state backend needs of etcd, over HTTP/1.1
//! and JSON with no code generated at build time. etcd ≥ 3.4 serves the gateway on its client
//! port (`/v3/kv/range`, `/v3/kv/txn`, `/v3/lease/grant`, …; etcd's `server/embed/serve.go`),
//! through grpc-gateway v1's `JSONPb{OrigName: true}`: field names as in etcd's
//! `api/etcdserverpb/rpc.proto` (`create_revision`, `ID`, `TTL`), keys and values base64, int64
//! fields as JSON strings, and every field at its zero value left out (`succeeded: false`, a
//! `TTL` of 0, a `lease` of 0 are absent).
//!
//! Every answer is untrusted: its body is read up to `MAX_RESPONSE_BYTES` and checked as
//! `etcd_wire` says; anything else is an error naming the endpoint.

use super::etcd_wire::{
    Kv, MAX_ENTRIES, RawKeepAlive, RawLease, RawRange, RawTxn, Txn, TxnOutcome, prefix_end, shown,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::{Value, json};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig, TlsProvider};

/// The largest answer read. A state is one value, and etcd refuses requests over 1.5 MiB unless
/// told otherwise (`--max-request-bytes`); its base64 in a transaction's answer, next to the
/// lock's value, fits many times over. (The gRPC client before took messages up to 4 MiB.)
pub(super) const MAX_RESPONSE_BYTES: u64 = 8 << 20;

/// Why a request to etcd failed. `Display` is the text for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GatewayError {
    pub kind: ErrorKind,
    detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ErrorKind {
    /// No connection, or it broke: refused, reset, TLS failed.
    Transport,
    /// No complete answer within the request timeout.
    Timeout,
    /// etcd refused the request with this gRPC status code (5 is NotFound).
    Status(i64),
    /// An answer that is not what etcd's gateway sends.
    BadResponse,
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

impl GatewayError {
    fn new(kind: ErrorKind, detail: String) -> Self {
        GatewayError { kind, detail }
    }

    /// etcd's "no such lease" (gRPC NotFound).
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::Status(5)
    }
}

/// The gateway of one etcd cluster, reached at any of its endpoints.
pub(super) struct Gateway {
    agent: ureq::Agent,
    /// `http://HOST:PORT` or `https://HOST:PORT`.
    endpoints: Vec<String>,
    /// The endpoint that answered last, tried first.
    preferred: AtomicUsize,
    timeout: Duration,
}

impl Gateway {
    /// A client of `endpoints` (`HOST:PORT`), with TLS when `tls` is given. Connects lazily.
    pub fn new(endpoints: &[String], tls: Option<TlsConfig>, timeout: Duration) -> Self {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut config = ureq::Agent::config_builder()
            // Errors are answers too: etcd says in the body what went wrong.
            .http_status_as_error(false)
            // etcd is reached directly: no proxy from the environment, no redirects.
            .proxy(None)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .timeout_global(Some(timeout))
            .user_agent(concat!("k0sform/", env!("CARGO_PKG_VERSION")));
        if let Some(tls) = tls {
            config = config.tls_config(tls);
        }
        Gateway {
            agent: config.build().new_agent(),
            endpoints: endpoints
                .iter()
                .map(|e| format!("{scheme}://{e}"))
                .collect(),
            preferred: AtomicUsize::new(0),
            timeout,
        }
    }

    /// The key, if it exists.
    pub fn get(&self, key: &str) -> Result<Option<Kv>, GatewayError> {
        let body = json!({ "key": B64.encode(key) });
        self.post("/v3/kv/range", &body, |r: RawRange| r.single(key))
    }

    /// The keys starting with `prefix`, in key order (at most `MAX_ENTRIES`).
    pub fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<Vec<u8>>, GatewayError> {
        let body = json!({
            "key": B64.encode(prefix),
            "range_end": B64.encode(prefix_end(prefix.as_bytes())),
            "keys_only": true,
            "limit": MAX_ENTRIES.to_string(),
        });
        self.post("/v3/kv/range", &body, |r: RawRange| r.keys_under(prefix))
    }

    pub fn txn(&self, txn: &Txn) -> Result<TxnOutcome, GatewayError> {
        self.post("/v3/kv/txn", &txn.to_json(), |r: RawTxn| r.outcome(txn))
    }

    /// A new lease of `ttl` seconds: its ID.
    pub fn lease_grant(&self, ttl: i64) -> Result<i64, GatewayError> {
        let body = json!({ "TTL": ttl.to_string() });
        self.post("/v3/lease/grant", &body, RawLease::granted)
    }

    /// Renew the lease once: its TTL now, 0 when it is gone (expired or revoked).
    pub fn lease_keep_alive(&self, lease: i64) -> Result<i64, GatewayError> {
        let body = json!({ "ID": lease.to_string() });
        // A stream: one `{"result": …}` (or `{"error": …}`) per request sent, one here.
        self.post("/v3/lease/keepalive", &body, |r: RawKeepAlive| r.ttl(lease))
    }

    /// End the lease, deleting the keys attached to it.
    pub fn lease_revoke(&self, lease: i64) -> Result<(), GatewayError> {
        let body = json!({ "ID": lease.to_string() });
        self.post("/v3/lease/revoke", &body, |_: IgnoredAny| Ok(()))
    }

    /// POST `body` to `path` at the preferred endpoint, else the next ones, within the timeout,
    /// and read the answer as `R`, then through `check`. Only an endpoint that could not be
    /// reached (nothing sent) makes the next one tried: a request that may have been carried out
    /// is never sent twice.
    fn post<R: DeserializeOwned, T>(
        &self,
        path: &str,
        body: &Value,
        check: impl FnOnce(R) -> Result<T, String>,
    ) -> Result<T, GatewayError> {
        let payload = body.to_string();
        let deadline = Instant::now() + self.timeout;
        let n = self.endpoints.len().max(1);
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let mut unreachable: Vec<String> = Vec::new();
        let mut timeouts = 0;
        for i in 0..n {
            let index = (first + i) % n;
            let Some(endpoint) = self.endpoints.get(index) else {
                break;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timeout_error());
            }
            // Connecting may take only its share of the time left, so the next endpoints get theirs.
            let connect = left / u32::try_from(n - i).unwrap_or(1);
            match self.attempt(endpoint, path, &payload, left, connect) {
                Ok(bytes) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    let answer = serde_json::from_slice::<R>(&bytes)
                        .map_err(|e| shown(e.to_string().as_bytes()))
                        .and_then(check);
                    return answer.map_err(|what| bad_response(endpoint, path, &what));
                }
                Err(Attempt::NotSent(e)) => {
                    if matches!(e, ureq::Error::Timeout(_)) {
                        timeouts += 1;
                    }
                    unreachable.push(format!("{endpoint}: {}", describe(&e)));
                }
                Err(Attempt::Failed(e)) => return Err(e),
            }
        }
        if timeouts == unreachable.len() {
            return Err(self.timeout_error());
        }
        Err(GatewayError::new(
            ErrorKind::Transport,
            match unreachable.as_slice() {
                [one] => format!("cannot reach etcd at {one}"),
                all => format!("cannot reach etcd at any endpoint: {}", all.join("; ")),
            },
        ))
    }

    /// One request to one endpoint: the body of a 200 answer.
    fn attempt(
        &self,
        endpoint: &str,
        path: &str,
        payload: &str,
        left: Duration,
        connect: Duration,
    ) -> Result<Vec<u8>, Attempt> {
        let sent = self
            .agent
            .post(format!("{endpoint}{path}"))
            .config()
            .timeout_global(Some(left))
            .timeout_connect(Some(connect))
            .build()
            .header("content-type", "application/json")
            .send(payload);
        let mut response = match sent {
            Ok(r) => r,
            Err(e) if not_sent(&e) => return Err(Attempt::NotSent(e)),
            Err(e) => return Err(Attempt::Failed(self.failure(endpoint, path, &e))),
        };
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_vec()
            .map_err(|e| Attempt::Failed(self.failure(endpoint, path, &e)))?;
        if status != 200 {
            return Err(Attempt::Failed(status_error(endpoint, status, &bytes)));
        }
        Ok(bytes)
    }

    fn failure(&self, endpoint: &str, path: &str, e: &ureq::Error) -> GatewayError {
        match e {
            ureq::Error::Timeout(_) => self.timeout_error(),
            ureq::Error::BodyExceedsLimit(_) => bad_response(
                endpoint,
                path,
                &format!("it is larger than {} MiB", MAX_RESPONSE_BYTES >> 20),
            ),
            ureq::Error::Protocol(_) | ureq::Error::LargeResponseHeader(..) => {
                bad_response(endpoint, path, &describe(e))
            }
            _ => GatewayError::new(
                ErrorKind::Transport,
                format!("etcd at {endpoint}: {}", describe(e)),
            ),
        }
    }

    fn timeout_error(&self) -> GatewayError {
        GatewayError::new(
            ErrorKind::Timeout,
            format!(
                "no answer from etcd ({}) within {}",
                self.endpoints
                    .iter()
                    .map(|e| e.split_once("://").map_or(e.as_str(), |(_, hp)| hp))
                    .collect::<Vec<_>>()
                    .join(", "),
                humantime::format_duration(self.timeout)
            ),
        )
    }
}

enum Attempt {
    /// Nothing reached etcd: the next endpoint may be tried.
    NotSent(ureq::Error),
    Failed(GatewayError),
}

/// Did `e` happen before any of the request could reach etcd?
fn not_sent(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as Io;
    match e {
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => true,
        ureq::Error::Timeout(t) => matches!(t, ureq::Timeout::Resolve | ureq::Timeout::Connect),
        ureq::Error::Io(io) => matches!(
            io.kind(),
            Io::ConnectionRefused
                | Io::HostUnreachable
                | Io::NetworkUnreachable
                | Io::AddrNotAvailable
        ),
        _ => false,
    }
}

/// An error of the HTTP client with its causes, escaped.
fn describe(e: &ureq::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    shown(text.as_bytes())
}

fn bad_response(endpoint: &str, path: &str, what: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::BadResponse,
        format!("etcd at {endpoint} sent an answer to {path} that is not etcd's: {what}"),
    )
}

/// An answer other than 200: etcd's `{"error", "code", "message"}` as `Code: message` (the gRPC
/// status, as etcdctl shows it), else the status and the start of the body.
fn status_error(endpoint: &str, status: u16, body: &[u8]) -> GatewayError {
    #[derive(Deserialize)]
    struct ErrorBody {
        code: i64,
        #[serde(default)]
        message: String,
        #[serde(default)]
        error: String,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) if code_name(e.code).is_some() && e.code != 0 => {
            let text = if e.message.is_empty() {
                e.error
            } else {
                e.message
            };
            let mut detail = code_name(e.code).unwrap_or("Unknown").to_string();
            if !text.is_empty() {
                detail.push_str(": ");
                detail.push_str(&shown(text.as_bytes()));
            }
            GatewayError::new(ErrorKind::Status(e.code), detail)
        }
        _ => GatewayError::new(
            ErrorKind::BadResponse,
            format!(
                "etcd at {endpoint} answered HTTP {status}: {}",
                shown(body.trim_ascii())
            ),
        ),
    }
}

/// gRPC status codes by number (google.golang.org/grpc/codes).
fn code_name(code: i64) -> Option<&'static str> {
    const NAMES: [&str; 17] = [
        "Ok",
        "Cancelled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|c| NAMES.get(c).copied())
}

// ---------------------------------------------------------------------------------------------
// TLS

/// TLS for `etcds://`: trust only the CA of `cacert`, and show the client certificate when given.
pub(super) fn tls_config(
    cacert: Option<&Path>,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<TlsConfig, String> {
    let Some(ca) = cacert else {
        return Err(
            "etcds:// needs the CA certificate of the etcd cluster: --etcd-cacert FILE or \
             K0SFORM_ETCD_CACERT"
                .into(),
        );
    };
    let read = |p: &Path, what: &str| {
        std::fs::read(p).map_err(|e| format!("cannot read the {what} {}: {e}", p.display()))
    };
    let ca_pem = read(ca, "CA certificate")?;
    let client = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, read(cert, "client certificate")?, key)),
        (None, None) => None,
        _ => {
            return Err(
                "a client certificate needs its key and the other way round: give both \
                 --etcd-cert and --etcd-key (or K0SFORM_ETCD_CERT and K0SFORM_ETCD_KEY)"
                    .into(),
            );
        }
    };
    let roots = certificates(&ca_pem, ca, "CA certificate")?;
    let client = match client {
        Some((cert, cert_pem, key)) => {
            let chain = certificates(&cert_pem, cert, "client certificate")?;
            let key_pem = read(key, "client key")?;
            Some(ClientCert::new_with_certs(
                &chain,
                private_key(&key_pem, key)?,
            ))
        }
        None => None,
    };
    Ok(TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .client_cert(client)
        .build())
}

fn certificates(pem: &[u8], path: &Path, what: &str) -> Result<Vec<Certificate<'static>>, String> {
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => return Err(format!("the {what} {} is not PEM: {e}", path.display())),
        }
    }
    if certs.is_empty() {
        return Err(format!(
            "the {what} {} holds no certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

fn private_key(pem: &[u8], path: &Path) -> Result<PrivateKey<'static>, String> {
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(PemItem::PrivateKey(k)) => return Ok(k),
            Ok(_) => {}
            Err(e) => return Err(format!("the client key {} is not PEM: {e}", path.display())),
        }
    }
    Err(format!(
        "the client key {} holds no private key (-----BEGIN PRIVATE KEY-----)",
        path.display()
    ))
}
