//! The state in etcd (`-state etcd://HOST:2379[,HOST:2379…]/PREFIX`, `etcds://` for TLS): the
//! state under `PREFIX/state`, the last 10 versions under `PREFIX/history/<serial>`, and a
//! lease-backed lock under `PREFIX/lock` whose value is the `LockHolder`.
//!
//! Every write is one transaction fenced twice: it succeeds only while our lock key still exists
//! with the create revision we made it at (a lock lost to lease expiry or `force-unlock` fails
//! it), and while the state key is at the revision we read (another writer fails it).
//!
//! Requests go to etcd's v3 JSON gateway (`etcd_gateway`), blocking, with the request timeout:
//! the synchronous `StateStore` calls work from any thread, inside the commands' tokio runtime
//! too. While the lock is held, a thread of its own keeps its lease alive.

use super::error::StateError;
use super::etcd_gateway::{ErrorKind, Gateway, GatewayError, tls_config};
use super::etcd_location::{EtcdOptions, EtcdUrl, HISTORY_KEEP};
use super::etcd_wire::{Compare, Kv, Op, Txn};
use super::holder::LockHolder;
use super::lock::{ForceUnlockOutcome, LockGuard, LockRelease};
use super::model::State;
use super::store::{
    PushDecision, StateStore, WriteOutcome, decide_push, describe_kept, find_secret, parse,
};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting writer retries the lock.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// What the store and its lock guards share.
struct Shared {
    gateway: Gateway,
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
    /// One etcd request, its error as `StateError::Remote`.
    fn call<T>(
        &self,
        action: &'static str,
        f: impl FnOnce(&Gateway) -> Result<T, GatewayError>,
    ) -> Result<T, StateError> {
        f(&self.gateway).map_err(|e| self.remote(action, &e))
    }

    fn remote(&self, action: &'static str, e: &GatewayError) -> StateError {
        let mut detail = e.to_string();
        // With TLS 1.3 a server that wants a client certificate only drops the connection.
        if self.url.tls && self.opts.cert.is_none() && e.kind == ErrorKind::Transport {
            detail
                .push_str(" (if etcd checks client certificates, give --etcd-cert and --etcd-key)");
        }
        StateError::Remote {
            location: self.location.clone(),
            action,
            detail,
        }
    }

    fn get(&self, key: &str) -> Result<Option<Kv>, StateError> {
        self.call("read", |g| g.get(key))
    }

    fn held(&self) -> Option<HeldLock> {
        *self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_held(&self, v: Option<HeldLock>) {
        *self.held.lock().unwrap_or_else(|p| p.into_inner()) = v;
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
        let tls = if url.tls {
            let (ca, cert, key) = (&opts.cacert, &opts.cert, &opts.key);
            Some(
                tls_config(ca.as_deref(), cert.as_deref(), key.as_deref())
                    .map_err(|d| fail("set up TLS for", d))?,
            )
        } else if opts.cert.is_some() || opts.key.is_some() {
            return Err(fail(
                "connect to",
                "a client certificate was given for a plain etcd:// URL; use etcds:// for TLS"
                    .into(),
            ));
        } else {
            None
        };
        Ok(EtcdStore {
            shared: Arc::new(Shared {
                gateway: Gateway::new(&url.endpoints, tls, opts.request_timeout),
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
        match self.shared.get(&self.state_key())? {
            Some(kv) => Ok((kv.mod_revision, Some(kv.value))),
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
        let txn = Txn {
            when: vec![
                Compare::CreateRevision(lock_key.clone(), held.create_revision),
                Compare::Lease(lock_key.clone(), held.lease),
                Compare::ModRevision(state_key.clone(), read_revision),
            ],
            then: vec![
                Op::Put {
                    key: state_key.clone(),
                    value: text.clone(),
                    lease: 0,
                },
                Op::Put {
                    key: history_key,
                    value: text,
                    lease: 0,
                },
                Op::DeleteRange {
                    key: history_start,
                    end: history_end,
                },
            ],
            otherwise: vec![Op::Get(lock_key), Op::Get(state_key)],
        };
        let resp = self.shared.call("write", |g| g.txn(&txn))?;
        if resp.succeeded {
            self.base = Some((resp.revision, Some(next.serial)));
            return Ok(WriteOutcome::Written {
                serial: next.serial,
            });
        }
        let mut got = resp.gets.into_iter();
        let lock_now = got.next().flatten();
        let state_now = got.next().flatten();
        let lock_ours = lock_now
            .as_ref()
            .is_some_and(|kv| kv.create_revision == held.create_revision && kv.lease == held.lease);
        if !lock_ours {
            // `held` stays: every later write is refused the same way, naming who holds it now.
            let detail = match lock_now
                .as_ref()
                .and_then(|kv| serde_json::from_slice::<LockHolder>(&kv.value).ok())
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
            .and_then(|kv| serde_json::from_slice::<serde_json::Value>(&kv.value).ok())
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
        let keys = self.shared.call("read", |g| g.keys_with_prefix(&prefix))?;
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

/// The lock as held: keeps its lease alive, and revokes it on release (which deletes the key).
struct EtcdLock {
    shared: Arc<Shared>,
    held: HeldLock,
    /// Stops when dropped: a lock dropped without release lives until its lease expires.
    keepalive: Option<KeepAlive>,
}

impl LockRelease for EtcdLock {
    fn release(mut self: Box<Self>) -> Result<(), StateError> {
        drop(self.keepalive.take());
        if self.shared.held() == Some(self.held) {
            self.shared.set_held(None);
        }
        // Revoking deletes every key attached to the lease: our lock key, if it is still ours.
        // A lease already gone (expired, force-unlocked) is not an error worth reporting.
        match self.shared.gateway.lease_revoke(self.held.lease) {
            Err(e) if !e.is_not_found() => Err(self.shared.remote("release the lock on", &e)),
            _ => Ok(()),
        }
    }
}

/// A thread renewing a lease every third of the lock's TTL until it is dropped or the lease is
/// gone. Errors (etcd briefly away) are retried: the fence in every write is what protects the
/// state, not this thread.
struct KeepAlive {
    stopped: Arc<(Mutex<bool>, Condvar)>,
}

impl KeepAlive {
    fn start(shared: Arc<Shared>, lease: i64) -> std::io::Result<Self> {
        let stopped = Arc::new((Mutex::new(false), Condvar::new()));
        let every = (shared.opts.lock_ttl / 3).max(Duration::from_millis(300));
        let flag = Arc::clone(&stopped);
        std::thread::Builder::new()
            .name("k0sform-etcd-lease".into())
            .spawn(move || {
                while !wait_stopped(&flag, every) {
                    // TTL 0: the lease is gone (expired or revoked); nothing left to keep.
                    if shared
                        .gateway
                        .lease_keep_alive(lease)
                        .is_ok_and(|ttl| ttl <= 0)
                    {
                        return;
                    }
                }
            })?;
        Ok(KeepAlive { stopped })
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stopped;
        *stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
    }
}

/// Wait up to `period`: whether the keep-alive was stopped meanwhile.
fn wait_stopped(flag: &(Mutex<bool>, Condvar), period: Duration) -> bool {
    let (stopped, wake) = flag;
    let guard = stopped.lock().unwrap_or_else(|p| p.into_inner());
    let (guard, _) = wake
        .wait_timeout_while(guard, period, |s| !*s)
        .unwrap_or_else(|p| p.into_inner());
    *guard
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
        let lease = shared.call("take the lock on", |g| g.lease_grant(ttl_secs))?;
        let give_up = |keepalive: Option<KeepAlive>| {
            drop(keepalive);
            let _ = shared.call("release the lease on", |g| g.lease_revoke(lease));
        };
        // Kept alive from the start: waiting for a busy lock may take longer than the TTL.
        let keepalive = match KeepAlive::start(Arc::clone(shared), lease) {
            Ok(k) => k,
            Err(e) => {
                give_up(None);
                return Err(StateError::Remote {
                    location: shared.location.clone(),
                    action: "take the lock on",
                    detail: format!("cannot start the thread keeping the lock's lease: {e}"),
                });
            }
        };
        let txn = Txn {
            when: vec![Compare::CreateRevision(lock_key.clone(), 0)],
            then: vec![Op::Put {
                key: lock_key.clone(),
                value,
                lease,
            }],
            otherwise: vec![Op::Get(lock_key)],
        };
        let deadline = Instant::now() + timeout;
        loop {
            let resp = match shared.call("take the lock on", |g| g.txn(&txn)) {
                Ok(r) => r,
                Err(e) => {
                    give_up(Some(keepalive));
                    return Err(e);
                }
            };
            if resp.succeeded {
                let held = HeldLock {
                    lease,
                    create_revision: resp.revision,
                };
                shared.set_held(Some(held));
                return Ok(LockGuard::new(
                    holder,
                    Box::new(EtcdLock {
                        shared: Arc::clone(shared),
                        held,
                        keepalive: Some(keepalive),
                    }),
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                give_up(Some(keepalive));
                let other = resp.gets.into_iter().flatten().next();
                return Err(StateError::Locked {
                    lock_path,
                    holder: other
                        .and_then(|kv| serde_json::from_slice::<LockHolder>(&kv.value).ok())
                        .map(Box::new),
                });
            }
            std::thread::sleep(POLL_INTERVAL.min(deadline - now));
        }
    }

    fn force_unlock(&self, id: &str) -> Result<ForceUnlockOutcome, StateError> {
        let lock_key = self.lock_key();
        let lock_path = self.location_of(&lock_key);
        let Some(kv) = self.shared.get(&lock_key)? else {
            return Ok(ForceUnlockOutcome::NotLocked { stale: None });
        };
        let holder = serde_json::from_slice::<LockHolder>(&kv.value).ok();
        let Some(holder) = holder.filter(|h| h.id == id) else {
            return Err(StateError::LockIdMismatch {
                lock_path,
                given: id.to_string(),
                holder: serde_json::from_slice::<LockHolder>(&kv.value)
                    .ok()
                    .map(Box::new),
            });
        };
        // Delete only the lock we looked at: a lock taken anew since has another create revision.
        let txn = Txn {
            when: vec![Compare::CreateRevision(
                lock_key.clone(),
                kv.create_revision,
            )],
            then: vec![Op::Delete(lock_key)],
            otherwise: vec![],
        };
        let deleted = self.shared.call("break the lock on", |g| {
            let resp = g.txn(&txn)?;
            if resp.succeeded && kv.lease != 0 {
                // The holder's keep-alive must not outlive the lock it kept.
                let _ = g.lease_revoke(kv.lease);
            }
            Ok(resp.succeeded)
        })?;
        if deleted {
            Ok(ForceUnlockOutcome::Released { holder })
        } else {
            // Released and taken again between the read and the delete: not the lock with this ID.
            let now = self.shared.get(&self.lock_key())?;
            Err(StateError::LockIdMismatch {
                lock_path,
                given: id.to_string(),
                holder: now
                    .and_then(|kv| serde_json::from_slice::<LockHolder>(&kv.value).ok())
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
        if let Some(kv) = self.shared.get(&key)? {
            return parse(&self.location_of(&key), &kv.value);
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
