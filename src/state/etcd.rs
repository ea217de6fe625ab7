//! The state in etcd (`-state etcd://HOST:2379[,HOST:2379…]/PREFIX`, `etcds://` for TLS): the
//! state under `PREFIX/state`, the last 10 versions under `PREFIX/history/<serial>`, and a
//! lease-backed lock under `PREFIX/lock` whose value is the `LockHolder`.
//!
//! Every write is one transaction fenced twice: it succeeds only while our lock key still exists
//! with the create revision we made it at (a lock lost to lease expiry or `force-unlock` fails
//! it), and while the state key is at the revision we read (another writer fails it).
//!
//! `StateStore` is synchronous and is called from inside the commands' tokio runtime, where a
//! nested `block_on` would panic. So each store owns a small runtime of its own (one worker
//! thread): requests are spawned onto it and the caller waits on a plain std channel, which works
//! from any thread, async or not.

use super::error::StateError;
use super::etcd_location::{EtcdOptions, EtcdUrl, HISTORY_KEEP};
use super::holder::LockHolder;
use super::lock::{ForceUnlockOutcome, LockGuard, LockRelease};
use super::model::State;
use super::store::{
    PushDecision, StateStore, WriteOutcome, decide_push, describe_kept, find_secret, parse,
};
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Identity,
    KeyValue, PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse,
};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting writer retries the lock.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// A runtime of the store's own: see the module comment.
struct Bridge {
    rt: Option<tokio::runtime::Runtime>,
}

impl Bridge {
    fn new() -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("k0sform-etcd")
            .enable_all()
            .build()?;
        Ok(Bridge { rt: Some(rt) })
    }

    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.rt.as_ref().map(tokio::runtime::Runtime::handle)
    }

    /// Run `fut` on the store's runtime and wait for it, from any thread.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, String> {
        let handle = self.handle().ok_or("the etcd runtime is gone")?;
        let (tx, rx) = std::sync::mpsc::channel();
        handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| "the etcd request was dropped".to_string())
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside an async context; this does not.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// What the store and its lock guards share.
struct Shared {
    bridge: Bridge,
    client: Client,
    url: EtcdUrl,
    location: String,
    opts: EtcdOptions,
    /// The lock this store holds, if any.
    held: Mutex<Option<HeldLock>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeldLock {
    lease: i64,
    /// Create revision of our lock key: a key re-created by anyone else has another.
    create_revision: i64,
}

impl Shared {
    /// One etcd call with the request timeout, errors as `StateError::Remote`.
    fn call<T, F, Fut>(&self, action: &'static str, f: F) -> Result<T, StateError>
    where
        T: Send + 'static,
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        let timeout = self.opts.request_timeout;
        let fut = f(self.client.clone());
        let out = self
            .bridge
            .run(async move { tokio::time::timeout(timeout, fut).await });
        let remote = |detail: String| StateError::Remote {
            location: self.location.clone(),
            action,
            detail,
        };
        match out {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(e))) => {
                let mut detail = describe_etcd_error(&e);
                // With TLS 1.3 a server that wants a client certificate only drops the stream.
                if self.url.tls && self.opts.cert.is_none() && detail.contains("transport error") {
                    detail.push_str(
                        " (if etcd checks client certificates, give --etcd-cert and --etcd-key)",
                    );
                }
                Err(remote(detail))
            }
            Ok(Err(_)) => Err(remote(format!(
                "no answer from etcd ({}) within {}",
                self.url.endpoints.join(", "),
                humantime::format_duration(timeout)
            ))),
            Err(e) => Err(remote(e)),
        }
    }

    fn get(&self, key: String) -> Result<Option<KeyValue>, StateError> {
        self.call("read", move |mut c| async move {
            let mut resp = c.get(key, None).await?;
            Ok(resp.take_kvs().into_iter().next())
        })
    }

    fn held(&self) -> Option<HeldLock> {
        *self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_held(&self, v: Option<HeldLock>) {
        *self.held.lock().unwrap_or_else(|p| p.into_inner()) = v;
    }
}

/// Short, user-facing text for an etcd client error (gRPC status message rather than debug).
fn describe_etcd_error(e: &etcd_client::Error) -> String {
    match e {
        etcd_client::Error::GRpcStatus(s) => {
            let mut text = format!("{:?}", s.code());
            if !s.message().is_empty() {
                text.push_str(": ");
                text.push_str(s.message());
            }
            // A TLS or connection failure says what went wrong only in its sources.
            append_sources(&mut text, std::error::Error::source(s));
            text
        }
        other => {
            let mut text = other.to_string();
            append_sources(&mut text, std::error::Error::source(other));
            text
        }
    }
}

fn append_sources(text: &mut String, mut source: Option<&(dyn std::error::Error + 'static)>) {
    while let Some(e) = source {
        let s = e.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        source = e.source();
    }
}

/// The state kept in etcd.
pub struct EtcdStore {
    shared: Arc<Shared>,
    expected_lineage: Option<String>,
    /// The state key as last loaded or written: (mod revision, serial); `Some((0, None))` when
    /// there was none. `None` until the first load.
    base: Option<(i64, Option<u64>)>,
    /// Set when a load failed: the stored state is bad and must not be overwritten.
    refused: Option<String>,
}

impl EtcdStore {
    /// A store for `location` (`etcd://…` or `etcds://…`). Connecting is lazy: an unreachable
    /// etcd shows up as an error of the first request.
    pub fn open(location: &str, opts: &EtcdOptions) -> Result<Self, StateError> {
        let url = EtcdUrl::parse(location)?;
        let fail = |action: &'static str, detail: String| StateError::Remote {
            location: location.to_string(),
            action,
            detail,
        };
        let scheme = if url.tls { "https" } else { "http" };
        let endpoints: Vec<String> = url
            .endpoints
            .iter()
            .map(|e| format!("{scheme}://{e}"))
            .collect();
        let mut connect = ConnectOptions::new()
            .with_connect_timeout(opts.request_timeout)
            .with_timeout(opts.request_timeout)
            .with_keep_alive(Duration::from_secs(10), opts.request_timeout);
        if url.tls {
            connect = connect.with_tls(tls_options(opts).map_err(|d| fail("set up TLS for", d))?);
        } else if opts.cert.is_some() || opts.key.is_some() {
            return Err(fail(
                "connect to",
                "a client certificate was given for a plain etcd:// URL; use etcds:// for TLS"
                    .into(),
            ));
        }
        let bridge = Bridge::new().map_err(|e| fail("start the etcd client for", e.to_string()))?;
        let client = bridge
            .run(Client::connect(endpoints, Some(connect)))
            .map_err(|e| fail("connect to", e))?
            .map_err(|e| fail("connect to", describe_etcd_error(&e)))?;
        Ok(EtcdStore {
            shared: Arc::new(Shared {
                bridge,
                client,
                location: location.trim_end_matches('/').to_string(),
                url,
                opts: opts.clone(),
                held: Mutex::new(None),
            }),
            expected_lineage: None,
            base: None,
            refused: None,
        })
    }

    fn location_of(&self, key: &str) -> PathBuf {
        let scheme = if self.shared.url.tls { "etcds" } else { "etcd" };
        PathBuf::from(format!(
            "{scheme}://{}{key}",
            self.shared.url.endpoints.join(",")
        ))
    }

    fn state_key(&self) -> String {
        self.shared.url.key("state")
    }

    fn lock_key(&self) -> String {
        self.shared.url.key("lock")
    }

    /// Read the state key: (mod revision or 0, bytes, parsed state).
    fn read(&self) -> Result<(i64, Option<Vec<u8>>), StateError> {
        match self.shared.get(self.state_key())? {
            Some(kv) => Ok((kv.mod_revision(), Some(kv.value().to_vec()))),
            None => Ok((0, None)),
        }
    }

    fn parse_state(&self, bytes: &[u8]) -> Result<State, StateError> {
        let state = parse(&self.location_of(&self.state_key()), bytes)?;
        if let Some(expected) = &self.expected_lineage
            && &state.lineage != expected
        {
            return Err(StateError::LineageMismatch {
                path: self.location_of(&self.state_key()),
                found: state.lineage,
                expected: expected.clone(),
            });
        }
        Ok(state)
    }

    /// Store `next` in one fenced transaction: our lock key unchanged and the state key still at
    /// `read_revision`. Also records `next` in the history and drops versions past the last 10.
    fn commit(&mut self, next: &State, read_revision: i64) -> Result<WriteOutcome, StateError> {
        let Some(held) = self.shared.held() else {
            return Err(self.not_locked());
        };
        if let Some((field, what)) = find_secret(next) {
            return Err(StateError::SecretRefused {
                path: self.location_of(&self.state_key()),
                field,
                what,
            });
        }
        let text = next
            .to_canonical_json()
            .map_err(|source| StateError::Serialize {
                path: self.location_of(&self.state_key()),
                source,
            })?;
        let state_key = self.state_key();
        let lock_key = self.lock_key();
        let url = &self.shared.url;
        let history_start = url.history_key(0);
        let history_end = url.history_key(next.serial.saturating_sub(HISTORY_KEEP - 1));
        let history_key = url.history_key(next.serial);
        let txn = Txn::new()
            .when([
                Compare::create_revision(lock_key.clone(), CompareOp::Equal, held.create_revision),
                Compare::lease(lock_key.clone(), CompareOp::Equal, held.lease),
                Compare::mod_revision(state_key.clone(), CompareOp::Equal, read_revision),
            ])
            .and_then([
                TxnOp::put(state_key.clone(), text.clone(), None),
                TxnOp::put(history_key, text, None),
                TxnOp::delete(
                    history_start,
                    Some(DeleteOptions::new().with_range(history_end)),
                ),
            ])
            .or_else([TxnOp::get(lock_key, None), TxnOp::get(state_key, None)]);
        let resp = self
            .shared
            .call("write", move |mut c| async move { c.txn(txn).await })?;
        if resp.succeeded() {
            let revision = resp.header().map_or(0, |h| h.revision());
            self.base = Some((revision, Some(next.serial)));
            return Ok(WriteOutcome::Written {
                serial: next.serial,
            });
        }
        let mut got = resp.op_responses().into_iter().map(|r| match r {
            TxnOpResponse::Get(mut g) => g.take_kvs().into_iter().next(),
            _ => None,
        });
        let lock_now = got.next().flatten();
        let state_now = got.next().flatten();
        let lock_ours = lock_now.as_ref().is_some_and(|kv| {
            kv.create_revision() == held.create_revision && kv.lease() == held.lease
        });
        if !lock_ours {
            // `held` stays: every later write is refused the same way, naming who holds it now.
            let detail = match lock_now
                .as_ref()
                .and_then(|kv| serde_json::from_slice::<LockHolder>(kv.value()).ok())
            {
                Some(h) => format!("it is now held by {h}"),
                None if lock_now.is_some() => "it is now held by someone else".to_string(),
                None => "its lease expired or the lock was removed with force-unlock".to_string(),
            };
            return Err(StateError::LockLost {
                location: self.shared.location.clone(),
                detail,
            });
        }
        let now_serial = state_now
            .as_ref()
            .and_then(|kv| serde_json::from_slice::<serde_json::Value>(kv.value()).ok())
            .and_then(|v| v.get("serial").and_then(serde_json::Value::as_u64));
        Err(StateError::Conflict {
            path: self.location_of(&self.state_key()),
            detail: match now_serial {
                Some(s) => format!("serial is now {s}, revision moved past {read_revision}"),
                None => "it was removed".to_string(),
            },
        })
    }

    fn not_locked(&self) -> StateError {
        StateError::NotLocked {
            path: self.location_of(&self.state_key()),
            lock_path: self.location_of(&self.lock_key()),
        }
    }

    /// Serials kept under `PREFIX/history/`, oldest first.
    fn kept_serials(&self) -> Result<Vec<u64>, StateError> {
        let prefix = format!("{}/history/", self.shared.url.prefix);
        let keys: Vec<Vec<u8>> = self.shared.call("read", move |mut c| async move {
            let mut resp = c
                .get(
                    prefix,
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                )
                .await?;
            Ok(resp
                .take_kvs()
                .into_iter()
                .map(|kv| kv.key().to_vec())
                .collect())
        })?;
        let mut serials: Vec<u64> = keys
            .iter()
            .filter_map(|k| {
                std::str::from_utf8(k)
                    .ok()?
                    .rsplit('/')
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        serials.sort_unstable();
        Ok(serials)
    }
}

fn tls_options(opts: &EtcdOptions) -> Result<TlsOptions, String> {
    let read = |p: &Path, what: &str| {
        std::fs::read(p).map_err(|e| format!("cannot read the {what} {}: {e}", p.display()))
    };
    let mut tls = TlsOptions::new();
    match &opts.cacert {
        Some(ca) => {
            tls = tls.ca_certificate(Certificate::from_pem(read(ca, "CA certificate")?));
        }
        None => {
            return Err(
                "etcds:// needs the CA certificate of the etcd cluster: --etcd-cacert FILE or \
                 K0SFORM_ETCD_CACERT"
                    .into(),
            );
        }
    }
    match (&opts.cert, &opts.key) {
        (Some(cert), Some(key)) => {
            tls = tls.identity(Identity::from_pem(
                read(cert, "client certificate")?,
                read(key, "client key")?,
            ));
        }
        (None, None) => {}
        _ => {
            return Err(
                "a client certificate needs its key and the other way round: give both \
                 --etcd-cert and --etcd-key (or K0SFORM_ETCD_CERT and K0SFORM_ETCD_KEY)"
                    .into(),
            );
        }
    }
    Ok(tls)
}

/// The lock as held: keeps its lease alive, and revokes it on release (which deletes the key).
struct EtcdLock {
    shared: Arc<Shared>,
    held: HeldLock,
    keepalive: Option<tokio::task::JoinHandle<()>>,
}

impl LockRelease for EtcdLock {
    fn release(mut self: Box<Self>) -> Result<(), StateError> {
        if let Some(k) = self.keepalive.take() {
            k.abort();
        }
        if self.shared.held() == Some(self.held) {
            self.shared.set_held(None);
        }
        let lease = self.held.lease;
        // Revoking deletes every key attached to the lease: our lock key, if it is still ours.
        // A lease already gone (expired, force-unlocked) is not an error worth reporting.
        match self
            .shared
            .call("release the lock on", move |mut c| async move {
                c.lease_revoke(lease).await.map(|_| ())
            }) {
            Err(StateError::Remote { detail, .. }) if detail.contains("NotFound") => Ok(()),
            other => other,
        }
    }
}

impl Drop for EtcdLock {
    fn drop(&mut self) {
        if let Some(k) = self.keepalive.take() {
            k.abort();
        }
    }
}

/// Keep `lease` alive until aborted, refreshing every third of the TTL. Errors (etcd briefly
/// away) are retried: the fence in every write is what protects the state, not this task.
async fn keep_alive(client: Client, lease: i64, ttl: Duration) {
    let every = (ttl / 3).max(Duration::from_millis(300));
    loop {
        let mut c = client.clone();
        if let Ok((mut keeper, mut stream)) = c.lease_keep_alive(lease).await {
            loop {
                tokio::time::sleep(every).await;
                if keeper.keep_alive().await.is_err() {
                    break;
                }
                match stream.message().await {
                    // TTL 0: the lease is gone (expired or revoked); nothing left to keep.
                    Ok(Some(r)) if r.ttl() <= 0 => return,
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
        }
        tokio::time::sleep(every).await;
    }
}

impl StateStore for EtcdStore {
    fn location(&self) -> String {
        self.shared.location.clone()
    }

    fn expect_lineage(&mut self, lineage: &str) {
        self.expected_lineage = Some(lineage.to_string());
    }

    fn load(&mut self) -> Result<Option<State>, StateError> {
        let (revision, bytes) = self.read()?;
        let Some(bytes) = bytes else {
            self.base = Some((0, None));
            return Ok(None);
        };
        match self.parse_state(&bytes) {
            Ok(state) => {
                self.base = Some((revision, Some(state.serial)));
                Ok(Some(state))
            }
            Err(e) => {
                self.refused = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn write(&mut self, state: &State) -> Result<WriteOutcome, StateError> {
        let path = self.location_of(&self.state_key());
        if let Some(reason) = &self.refused {
            return Err(StateError::WriteRefused {
                path,
                reason: reason.clone(),
            });
        }
        if self.shared.held().is_none() {
            return Err(self.not_locked());
        }
        let (revision, bytes) = self.read()?;
        let current = match &bytes {
            Some(b) => Some(parse(&path, b).inspect_err(|e| {
                self.refused = Some(e.to_string());
            })?),
            None => None,
        };
        if let Some(expected) = &self.expected_lineage
            && &state.lineage != expected
        {
            return Err(StateError::LineageMismatch {
                path,
                found: state.lineage.clone(),
                expected: expected.clone(),
            });
        }
        match (&current, self.base) {
            (Some(cur), _) if cur.lineage != state.lineage => {
                return Err(StateError::LineageMismatch {
                    path,
                    found: cur.lineage.clone(),
                    expected: state.lineage.clone(),
                });
            }
            (Some(cur), Some((base_rev, base_serial))) if revision != base_rev => {
                return Err(StateError::Conflict {
                    path,
                    detail: match base_serial {
                        Some(b) => format!("serial is now {}, was {b}", cur.serial),
                        None => format!("serial is now {}, there was no state", cur.serial),
                    },
                });
            }
            (Some(cur), None) if cur.serial != state.serial => {
                return Err(StateError::Conflict {
                    path,
                    detail: format!(
                        "stored serial is {}, the state being written was read at serial {}",
                        cur.serial, state.serial
                    ),
                });
            }
            (None, Some((_, Some(base)))) => {
                return Err(StateError::Conflict {
                    path,
                    detail: format!("the state was removed; it was at serial {base}"),
                });
            }
            _ => {}
        }

        let Some(next) = super::store::next_version(state, current.as_ref()) else {
            let serial = current.as_ref().map_or(state.serial, |c| c.serial);
            self.base = Some((revision, Some(serial)));
            return Ok(WriteOutcome::Unchanged { serial });
        };
        self.commit(&next, revision)
    }

    fn lock(&self, operation: &str, timeout: Duration) -> Result<LockGuard, StateError> {
        let shared = &self.shared;
        let ttl_secs = i64::try_from(shared.opts.lock_ttl.as_secs().max(2)).unwrap_or(30);
        let lock_key = self.lock_key();
        let lock_path = self.location_of(&lock_key);
        let holder = LockHolder::this_process(operation);
        let value = serde_json::to_string(&holder).map_err(|source| StateError::Serialize {
            path: lock_path.clone(),
            source,
        })?;
        let lease = shared.call("take the lock on", move |mut c| async move {
            c.lease_grant(ttl_secs, None).await.map(|r| r.id())
        })?;
        // Kept alive from the start: waiting for a busy lock may take longer than the TTL.
        let keepalive = shared.bridge.handle().map(|h| {
            h.spawn(keep_alive(
                shared.client.clone(),
                lease,
                shared.opts.lock_ttl,
            ))
        });
        let give_up = |keepalive: Option<tokio::task::JoinHandle<()>>| {
            if let Some(k) = keepalive {
                k.abort();
            }
            let _ = shared.call("release the lease on", move |mut c| async move {
                c.lease_revoke(lease).await.map(|_| ())
            });
        };
        let deadline = Instant::now() + timeout;
        loop {
            let key = lock_key.clone();
            let v = value.clone();
            let attempt = shared.call("take the lock on", move |mut c| async move {
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(
                        key.clone(),
                        v,
                        Some(PutOptions::new().with_lease(lease)),
                    )])
                    .or_else([TxnOp::get(key, None)]);
                c.txn(txn).await
            });
            let resp = match attempt {
                Ok(r) => r,
                Err(e) => {
                    give_up(keepalive);
                    return Err(e);
                }
            };
            if resp.succeeded() {
                let create_revision = resp.header().map_or(0, |h| h.revision());
                let held = HeldLock {
                    lease,
                    create_revision,
                };
                shared.set_held(Some(held));
                return Ok(LockGuard::new(
                    holder,
                    Box::new(EtcdLock {
                        shared: Arc::clone(shared),
                        held,
                        keepalive,
                    }),
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                give_up(keepalive);
                let other = resp.op_responses().into_iter().find_map(|r| match r {
                    TxnOpResponse::Get(mut g) => g.take_kvs().into_iter().next(),
                    _ => None,
                });
                return Err(StateError::Locked {
                    lock_path,
                    holder: other
                        .and_then(|kv| serde_json::from_slice::<LockHolder>(kv.value()).ok())
                        .map(Box::new),
                });
            }
            std::thread::sleep(POLL_INTERVAL.min(deadline - now));
        }
    }

    fn force_unlock(&self, id: &str) -> Result<ForceUnlockOutcome, StateError> {
        let lock_key = self.lock_key();
        let lock_path = self.location_of(&lock_key);
        let Some(kv) = self.shared.get(lock_key.clone())? else {
            return Ok(ForceUnlockOutcome::NotLocked { stale: None });
        };
        let holder = serde_json::from_slice::<LockHolder>(kv.value()).ok();
        let Some(holder) = holder.filter(|h| h.id == id) else {
            return Err(StateError::LockIdMismatch {
                lock_path,
                given: id.to_string(),
                holder: serde_json::from_slice::<LockHolder>(kv.value())
                    .ok()
                    .map(Box::new),
            });
        };
        // Delete only the lock we looked at: a lock taken anew since has another create revision.
        let create_revision = kv.create_revision();
        let lease = kv.lease();
        let deleted = self
            .shared
            .call("break the lock on", move |mut c| async move {
                let txn = Txn::new()
                    .when([Compare::create_revision(
                        lock_key.clone(),
                        CompareOp::Equal,
                        create_revision,
                    )])
                    .and_then([TxnOp::delete(lock_key, None)]);
                let resp = c.txn(txn).await?;
                if resp.succeeded() && lease != 0 {
                    // The holder's keep-alive must not outlive the lock it kept.
                    let _ = c.lease_revoke(lease).await;
                }
                Ok(resp.succeeded())
            })?;
        if deleted {
            Ok(ForceUnlockOutcome::Released { holder })
        } else {
            // Released and taken again between the read and the delete: not the lock with this ID.
            let now = self.shared.get(self.lock_key())?;
            Err(StateError::LockIdMismatch {
                lock_path,
                given: id.to_string(),
                holder: now
                    .and_then(|kv| serde_json::from_slice::<LockHolder>(kv.value()).ok())
                    .map(Box::new),
            })
        }
    }

    fn push(&mut self, state: &State, force: bool) -> Result<WriteOutcome, StateError> {
        if self.shared.held().is_none() {
            return Err(self.not_locked());
        }
        let (revision, bytes) = self.read()?;
        let path = self.location_of(&self.state_key());
        let current = match &bytes {
            Some(b) => match parse(&path, b) {
                Ok(s) => Some(s),
                Err(_) if force => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        match decide_push(&self.shared.location, current.as_ref(), state, force)? {
            PushDecision::Unchanged { serial } => {
                self.base = Some((revision, Some(serial)));
                Ok(WriteOutcome::Unchanged { serial })
            }
            PushDecision::Write(next) => {
                self.refused = None;
                self.commit(&next, revision)
            }
        }
    }

    fn load_serial(&mut self, serial: u64) -> Result<State, StateError> {
        let key = self.shared.url.history_key(serial);
        if let Some(kv) = self.shared.get(key.clone())? {
            return parse(&self.location_of(&key), kv.value());
        }
        // Not in the history (e.g. written before history was kept): maybe the current one.
        if let (_, Some(bytes)) = self.read()? {
            let current = parse(&self.location_of(&self.state_key()), &bytes)?;
            if current.serial == serial {
                return Ok(current);
            }
        }
        Err(StateError::NoSuchSerial {
            location: self.shared.location.clone(),
            serial,
            kept: describe_kept(&self.kept_serials()?),
        })
    }

    fn history_hint(&self) -> String {
        format!(
            "the history under {}/history/ (the last {HISTORY_KEEP} serials; \
             `state pull -serial N`)",
            self.shared.location
        )
    }
}
