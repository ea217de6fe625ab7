//! etcd's v3 API as its JSON gateway writes it: the requests the etcd state backend sends, and
//! the answers, read as untrusted. Field names as in etcd's `api/etcdserverpb/rpc.proto`
//! (`create_revision`, `ID`, `TTL`; grpc-gateway v1's `JSONPb{OrigName: true}`), keys and values
//! base64, int64 fields as JSON strings, and every field at its zero value left out
//! (`succeeded: false`, a `TTL` of 0, a `lease` of 0 are absent).
//!
//! Lists hold at most `MAX_ENTRIES` items, every field must have the type and range etcd gives
//! it, base64 must decode, and a range must hold only the keys asked for.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::{Value, json};
use std::fmt;

/// The most keys or transaction results one answer may hold; ranges ask for no more.
pub(super) const MAX_ENTRIES: usize = 1000;
/// How much of an error text from etcd is shown.
const MAX_ERROR_TEXT: usize = 300;

/// A key as etcd returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Kv {
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    /// The lease the key is attached to, 0 for none.
    pub lease: i64,
}

/// One condition of a transaction: the key's field equals the value.
#[derive(Debug, Clone)]
pub(super) enum Compare {
    CreateRevision(String, i64),
    ModRevision(String, i64),
    Lease(String, i64),
}

/// One operation of a transaction.
#[derive(Debug, Clone)]
pub(super) enum Op {
    /// Put the value, attached to the lease (0: none).
    Put {
        key: String,
        value: String,
        lease: i64,
    },
    /// Read one key; its result is one of `TxnOutcome::gets`.
    Get(String),
    /// Delete the keys from `key` up to, not including, `end`.
    DeleteRange { key: String, end: String },
    /// Delete one key.
    Delete(String),
}

#[derive(Debug, Clone)]
pub(super) struct Txn {
    pub when: Vec<Compare>,
    pub then: Vec<Op>,
    pub otherwise: Vec<Op>,
}

/// What a transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TxnOutcome {
    pub succeeded: bool,
    /// The store's revision after it: the revision of what the transaction wrote.
    pub revision: i64,
    /// The results of the `Get`s of the branch that ran, in order.
    pub gets: Vec<Option<Kv>>,
}

/// Text from etcd for a message: lossy UTF-8, control characters made visible, cut short.
pub(super) fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut cut: String = text.chars().take(MAX_ERROR_TEXT).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    crate::escape::escape(&cut).into_owned()
}

/// The first key after every key starting with `prefix` (etcd's `GetPrefixRangeEnd`).
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Only 0xff bytes: every key from the prefix on.
    vec![0]
}

/// The one key a range for `key` returned, if any.
fn single(key: &str, kvs: Vec<RawKv>) -> Result<Option<Kv>, String> {
    let mut kvs = kvs.into_iter();
    let first = kvs.next();
    if kvs.next().is_some() {
        return Err(format!("more than one key for the key {key}"));
    }
    first.map(|kv| kv.checked(key)).transpose()
}

fn txn_outcome(r: RawTxn, ops: &[Op]) -> Result<TxnOutcome, String> {
    let revision = r.header.map_or(0, |h| h.revision);
    if revision <= 0 {
        return Err(format!("the transaction's revision is {revision}"));
    }
    if r.responses.len() != ops.len() {
        return Err(format!(
            "{} results for {} operations",
            r.responses.len(),
            ops.len()
        ));
    }
    let mut gets = Vec::new();
    for (op, result) in ops.iter().zip(r.responses) {
        match (op, result) {
            (Op::Get(key), RawOp::Range(range)) => gets.push(single(key, range.kvs)?),
            (Op::Put { .. }, RawOp::Put)
            | (Op::Delete(_) | Op::DeleteRange { .. }, RawOp::Delete) => {}
            (op, result) => {
                return Err(format!("a {} result for a {}", result.name(), op.name()));
            }
        }
    }
    Ok(TxnOutcome {
        succeeded: r.succeeded,
        revision,
        gets,
    })
}

impl Txn {
    pub(super) fn to_json(&self) -> Value {
        json!({
            "compare": self.when.iter().map(Compare::to_json).collect::<Vec<_>>(),
            "success": self.then.iter().map(Op::to_json).collect::<Vec<_>>(),
            "failure": self.otherwise.iter().map(Op::to_json).collect::<Vec<_>>(),
        })
    }
}

impl Compare {
    fn to_json(&self) -> Value {
        let (key, target, field, value) = match self {
            Compare::CreateRevision(k, v) => (k, "CREATE", "create_revision", v),
            Compare::ModRevision(k, v) => (k, "MOD", "mod_revision", v),
            Compare::Lease(k, v) => (k, "LEASE", "lease", v),
        };
        json!({
            "key": B64.encode(key),
            "target": target,
            "result": "EQUAL",
            field: value.to_string(),
        })
    }
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Put { .. } => "put",
            Op::Get(_) => "range",
            Op::Delete(_) | Op::DeleteRange { .. } => "delete",
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Op::Put { key, value, lease } => json!({ "request_put": {
                "key": B64.encode(key),
                "value": B64.encode(value),
                "lease": lease.to_string(),
            }}),
            Op::Get(key) => json!({ "request_range": { "key": B64.encode(key) } }),
            Op::DeleteRange { key, end } => json!({ "request_delete_range": {
                "key": B64.encode(key),
                "range_end": B64.encode(end),
            }}),
            Op::Delete(key) => json!({ "request_delete_range": { "key": B64.encode(key) } }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Answers as etcd's gateway writes them

#[derive(Deserialize)]
struct RawHeader {
    #[serde(default, deserialize_with = "revision")]
    revision: i64,
}

#[derive(Deserialize)]
pub(super) struct RawKv {
    #[serde(default, deserialize_with = "bytes")]
    key: Vec<u8>,
    #[serde(default, deserialize_with = "bytes")]
    value: Vec<u8>,
    #[serde(default, deserialize_with = "revision")]
    create_revision: i64,
    #[serde(default, deserialize_with = "revision")]
    mod_revision: i64,
    #[serde(default, deserialize_with = "revision")]
    lease: i64,
}

impl RawKv {
    /// The key asked for, as a key etcd stores: created, modified since.
    fn checked(self, key: &str) -> Result<Kv, String> {
        if self.key != key.as_bytes() {
            return Err(format!(
                "it returned the key {} for the key {key}",
                shown(&self.key)
            ));
        }
        if self.create_revision == 0 || self.mod_revision < self.create_revision {
            return Err(format!(
                "the key {key} has create revision {} and mod revision {}",
                self.create_revision, self.mod_revision
            ));
        }
        Ok(Kv {
            value: self.value,
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            lease: self.lease,
        })
    }
}

#[derive(Deserialize)]
pub(super) struct RawRange {
    #[serde(default, deserialize_with = "bounded")]
    kvs: Vec<RawKv>,
}

impl RawRange {
    /// The one key a range for `key` returned, if any.
    pub(super) fn single(self, key: &str) -> Result<Option<Kv>, String> {
        single(key, self.kvs)
    }

    /// The keys a range for `prefix` returned.
    pub(super) fn keys_under(self, prefix: &str) -> Result<Vec<Vec<u8>>, String> {
        self.kvs
            .into_iter()
            .map(|kv| {
                if kv.key.starts_with(prefix.as_bytes()) {
                    Ok(kv.key)
                } else {
                    Err(format!(
                        "it returned the key {} for the prefix {prefix}",
                        shown(&kv.key)
                    ))
                }
            })
            .collect()
    }
}

#[derive(Deserialize)]
pub(super) struct RawTxn {
    header: Option<RawHeader>,
    #[serde(default)]
    succeeded: bool,
    #[serde(default, deserialize_with = "bounded")]
    responses: Vec<RawOp>,
}

impl RawTxn {
    /// What `txn` did: a result of the right kind for each operation of the branch that ran.
    pub(super) fn outcome(self, txn: &Txn) -> Result<TxnOutcome, String> {
        let ops = if self.succeeded {
            &txn.then
        } else {
            &txn.otherwise
        };
        txn_outcome(self, ops)
    }
}

/// One result of a transaction (a `oneof`: exactly one of the fields).
#[derive(Deserialize)]
enum RawOp {
    #[serde(rename = "response_range")]
    Range(RawRange),
    #[serde(rename = "response_put", deserialize_with = "ignored")]
    Put,
    #[serde(rename = "response_delete_range", deserialize_with = "ignored")]
    Delete,
}

impl RawOp {
    fn name(&self) -> &'static str {
        match self {
            RawOp::Range(_) => "range",
            RawOp::Put => "put",
            RawOp::Delete => "delete",
        }
    }
}

#[derive(Deserialize)]
pub(super) struct RawLease {
    #[serde(rename = "ID", default, deserialize_with = "int64")]
    id: i64,
    #[serde(rename = "TTL", default, deserialize_with = "int64")]
    ttl: i64,
    #[serde(default)]
    error: String,
}

#[derive(Deserialize)]
pub(super) struct RawKeepAlive {
    result: Option<RawLease>,
}

impl RawLease {
    /// The ID of a lease just granted.
    pub(super) fn granted(self) -> Result<i64, String> {
        if !self.error.is_empty() {
            return Err(format!(
                "it refused the lease: {}",
                shown(self.error.as_bytes())
            ));
        }
        if self.id <= 0 || self.ttl <= 0 {
            return Err(format!("lease ID {} with TTL {}", self.id, self.ttl));
        }
        Ok(self.id)
    }
}

impl RawKeepAlive {
    /// The TTL `lease` has now, 0 when it is gone.
    pub(super) fn ttl(self, lease: i64) -> Result<i64, String> {
        let Some(result) = self.result else {
            return Err("no result".into());
        };
        if result.ttl < 0 || (result.ttl > 0 && result.id != lease) {
            return Err(format!(
                "lease ID {} with TTL {} for lease {lease}",
                result.id, result.ttl
            ));
        }
        Ok(result.ttl)
    }
}

fn ignored<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    IgnoredAny::deserialize(d).map(|_| ())
}

/// An int64 field: a JSON string of digits, as the gateway writes them, or a JSON integer.
fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct Int64;
    impl Visitor<'_> for Int64 {
        type Value = i64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a 64-bit integer as a JSON string")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<i64, E> {
            s.parse()
                .map_err(|_| E::invalid_value(de::Unexpected::Str(s), &self))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
        }
    }
    d.deserialize_any(Int64)
}

/// A revision or lease ID: an int64 that is not negative.
fn revision<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = int64(d)?;
    if v < 0 {
        return Err(de::Error::invalid_value(
            de::Unexpected::Signed(v),
            &"a revision or lease ID (not negative)",
        ));
    }
    Ok(v)
}

/// A bytes field: base64.
fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(d)?;
    B64.decode(text.as_bytes())
        .map_err(|e| de::Error::custom(format_args!("a key or value that is not base64 ({e})")))
}

/// A list of at most `MAX_ENTRIES` items (a longer one is refused before it fills memory).
fn bounded<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    struct Bounded<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Bounded<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a list of at most {MAX_ENTRIES} entries")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element()? {
                if out.len() == MAX_ENTRIES {
                    return Err(de::Error::invalid_length(out.len() + 1, &self));
                }
                out.push(item);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Bounded(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_use_the_gateways_field_names_and_int64_strings() {
        let txn = Txn {
            when: vec![
                Compare::CreateRevision("/p/lock".into(), 0),
                Compare::ModRevision("/p/state".into(), 12),
                Compare::Lease("/p/lock".into(), 7),
            ],
            then: vec![Op::Put {
                key: "/p/state".into(),
                value: "{}".into(),
                lease: 7,
            }],
            otherwise: vec![
                Op::Get("/p/lock".into()),
                Op::DeleteRange {
                    key: "/a".into(),
                    end: "/b".into(),
                },
                Op::Delete("/c".into()),
            ],
        };
        assert_eq!(
            txn.to_json(),
            json!({
                "compare": [
                    {"key": "L3AvbG9jaw==", "target": "CREATE", "result": "EQUAL", "create_revision": "0"},
                    {"key": "L3Avc3RhdGU=", "target": "MOD", "result": "EQUAL", "mod_revision": "12"},
                    {"key": "L3AvbG9jaw==", "target": "LEASE", "result": "EQUAL", "lease": "7"},
                ],
                "success": [{"request_put": {"key": "L3Avc3RhdGU=", "value": "e30=", "lease": "7"}}],
                "failure": [
                    {"request_range": {"key": "L3AvbG9jaw=="}},
                    {"request_delete_range": {"key": "L2E=", "range_end": "L2I="}},
                    {"request_delete_range": {"key": "L2M="}},
                ],
            })
        );
        assert_eq!(prefix_end(b"/p/history/"), b"/p/history0");
        assert_eq!(prefix_end(b"a\xff\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), b"\0");
    }

    fn txn(text: &str, ops: &[Op]) -> Result<TxnOutcome, String> {
        let raw: RawTxn = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let t = Txn {
            when: vec![],
            then: ops.to_vec(),
            otherwise: ops.to_vec(),
        };
        raw.outcome(&t)
    }

    #[test]
    fn answers_as_etcd_3_4_writes_them_are_read() {
        // Captured from Debian's etcd 3.4.23: zero fields (`succeeded`, `lease`) are left out.
        let failed = r#"{"header":{"cluster_id":"8305637527541944180","member_id":"16225404656667358780","revision":"3","raft_term":"2"},"responses":[{"response_range":{"header":{"revision":"3"},"kvs":[{"key":"bG9jaw==","create_revision":"3","mod_revision":"3","version":"1","value":"aGk=","lease":"8519863023956165896"}],"count":"1"}}]}"#;
        let got = txn(failed, &[Op::Get("lock".into())]).unwrap();
        assert_eq!(
            got,
            TxnOutcome {
                succeeded: false,
                revision: 3,
                gets: vec![Some(Kv {
                    value: b"hi".to_vec(),
                    create_revision: 3,
                    mod_revision: 3,
                    lease: 8519863023956165896,
                })],
            }
        );
        let put = r#"{"header":{"revision":"3"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"3"}}}]}"#;
        let op = Op::Put {
            key: "k".into(),
            value: "v".into(),
            lease: 0,
        };
        assert!(txn(put, &[op]).unwrap().succeeded);
        // A key that does not exist: no kvs at all.
        let empty = r#"{"header":{"revision":"3"},"responses":[{"response_range":{"header":{"revision":"3"}}}]}"#;
        assert_eq!(txn(empty, &[Op::Get("k".into())]).unwrap().gets, [None]);
        // Lease answers: an expired lease's keep-alive has no TTL.
        let ka: RawKeepAlive =
            serde_json::from_str(r#"{"result":{"header":{"revision":"4"},"ID":"85"}}"#).unwrap();
        assert_eq!(ka.ttl(85), Ok(0));
        let ka: RawKeepAlive =
            serde_json::from_str(r#"{"result":{"ID":"86","TTL":"30"}}"#).unwrap();
        assert!(ka.ttl(85).unwrap_err().contains("lease ID 86"));
        let ka: RawKeepAlive = serde_json::from_str(r#"{"error":{"grpc_code":14}}"#).unwrap();
        assert_eq!(ka.ttl(85), Err("no result".into()));
        let grant: RawLease = serde_json::from_str(r#"{"ID":"85","TTL":"30"}"#).unwrap();
        assert_eq!(grant.granted(), Ok(85));
        // int64 as a JSON number is taken too (proto3's JSON mapping); past i64 it is not.
        let grant: RawLease = serde_json::from_str(r#"{"ID":85,"TTL":"30"}"#).unwrap();
        assert_eq!(grant.granted(), Ok(85));
        assert!(serde_json::from_str::<RawLease>(r#"{"ID":"9223372036854775808"}"#).is_err());
        assert!(serde_json::from_str::<RawLease>(r#"{"ID":1.5}"#).is_err());
    }

    #[test]
    fn error_text_is_escaped_and_cut_short() {
        assert_eq!(shown(b"a\x1b[31mb\n"), "a\\x1b[31mb\\n");
        let long = shown(&[b'x'; 5000]);
        assert_eq!(long.chars().count(), MAX_ERROR_TEXT + 1);
        assert!(long.ends_with('…'));
        assert_eq!(shown(b"\xff\xfe"), "\u{fffd}\u{fffd}");
    }
}
