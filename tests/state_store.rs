//! One conformance suite for every state backend, as Terraform's `statemgr.TestFull`: each case
//! is written once against the public `StateStore` API (stores opened with `state::open`, as the
//! commands do) and run for the local file (`state_store::local::*`) and for a real etcd
//! (`state_store::etcd::*`, lab tests). What only one backend has (the local file's crash safety,
//! backup and permissions; etcd's lease, fencing, history size, TLS) stays in `state/` and
//! `state_etcd/`.
//!
//! Child processes are this test binary run again with K0SFORM_STORE_TEST_CHILD set: see
//! `child_process_entry`.

use crate::support::bin;
use crate::support::child::ChildProc;
use crate::support::states::sample_state;
use k0sform::state::{self, EtcdOptions, State, StateError, StateStore, WriteOutcome};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "K0SFORM_STORE_TEST_CHILD";
const HOLD_OPERATION: &str = "test hold";

// ---------------------------------------------------------------------------------------------
// Backends

/// One state location of a backend: `location` as given to `-state`, `key` where the backend
/// keeps it (the local file's path, the etcd key prefix).
pub struct Place {
    location: String,
    key: String,
}

/// A state backend under test: fresh, empty locations, and a look at what it stores from outside
/// the store (the files on disk, the keys in etcd).
trait Backend {
    /// A new, empty location.
    fn fresh(&self) -> Place;
    /// What stores of this backend are opened with (the etcd lock TTL of the tests).
    fn options(&self) -> EtcdOptions {
        EtcdOptions::default()
    }
    /// A remote lock's TTL (the local lock has none: the OS frees it when its holder exits).
    fn lock_ttl(&self) -> Option<Duration> {
        None
    }
    /// How many versions a location keeps, the current one included.
    fn kept_versions(&self) -> u64;
    /// The stored state, byte for byte, or `None`.
    fn stored(&self, p: &Place) -> Option<String>;
    /// Store `text` as the state, as someone else (or an older k0sform) would have.
    fn plant(&self, p: &Place, text: &str);
    /// Everything the location holds besides the state itself and the local lock file (which is
    /// never deleted): backup, temp files, history, a remote lock.
    fn others(&self, p: &Place) -> Vec<String>;
}

/// A store on `p`, opened as the commands open one, behind the trait.
fn open(b: &dyn Backend, p: &Place) -> Box<dyn StateStore> {
    state::open(Path::new(&p.location), &b.options()).unwrap()
}

/// Write `state` as a new state at `p`, under the lock; its serial.
fn create(b: &dyn Backend, p: &Place, state: &State) -> u64 {
    let mut s = open(b, p);
    let g = s.lock("test", Duration::ZERO).unwrap();
    let serial = s.write(state).unwrap().serial();
    g.unlock().unwrap();
    serial
}

fn load(b: &dyn Backend, p: &Place) -> State {
    open(b, p).load().unwrap().expect("a state")
}

/// `k0sform -state LOCATION ARGS`.
fn k0sform(p: &Place, args: &[&str]) -> (i32, String, String) {
    bin::output(bin::k0sform().args(["-state", &p.location]).args(args))
}

/// The local file: each place a state file of its own in a folder of its own.
struct Local {
    dir: tempfile::TempDir,
    next: std::cell::Cell<u32>,
}

impl Local {
    fn new() -> Self {
        Local {
            dir: tempfile::tempdir().unwrap(),
            next: std::cell::Cell::new(0),
        }
    }
}

impl Backend for Local {
    fn fresh(&self) -> Place {
        let n = self.next.get();
        self.next.set(n + 1);
        let dir = self.dir.path().join(n.to_string());
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("k0sform.state.json");
        let s = path.to_str().unwrap().to_string();
        Place {
            location: s.clone(),
            key: s,
        }
    }
    fn kept_versions(&self) -> u64 {
        2 // the state file and `<state>.backup`
    }
    fn stored(&self, p: &Place) -> Option<String> {
        std::fs::read_to_string(&p.key).ok()
    }
    fn plant(&self, p: &Place, text: &str) {
        std::fs::write(&p.key, text).unwrap();
    }
    fn others(&self, p: &Place) -> Vec<String> {
        let path = PathBuf::from(&p.key);
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let mut v: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| *n != name && *n != format!("{name}.lock"))
            .collect();
        v.sort();
        v
    }
}

/// A real etcd (support/etcd.rs): each place a key prefix of its own.
#[cfg(feature = "etcd-state")]
struct Etcd {
    server: crate::support::etcd::EtcdServer,
    next: std::cell::Cell<u32>,
}

#[cfg(feature = "etcd-state")]
impl Backend for Etcd {
    fn fresh(&self) -> Place {
        let n = self.next.get();
        self.next.set(n + 1);
        let key = format!("/k0sform/{n}");
        Place {
            location: self.server.url(&key),
            key,
        }
    }
    fn options(&self) -> EtcdOptions {
        EtcdOptions {
            lock_ttl: Duration::from_secs(3),
            request_timeout: Duration::from_secs(5),
            ..EtcdOptions::default()
        }
    }
    fn lock_ttl(&self) -> Option<Duration> {
        Some(Duration::from_secs(3))
    }
    fn kept_versions(&self) -> u64 {
        state::HISTORY_KEEP
    }
    fn stored(&self, p: &Place) -> Option<String> {
        self.server.get(&format!("{}/state", p.key))
    }
    fn plant(&self, p: &Place, text: &str) {
        self.server.put(&format!("{}/state", p.key), text);
    }
    fn others(&self, p: &Place) -> Vec<String> {
        let state = format!("{}/state", p.key);
        let mut v: Vec<String> = self
            .server
            .keys(&format!("{}/", p.key))
            .into_iter()
            .filter(|k| *k != state)
            .collect();
        v.sort();
        v
    }
}

// ---------------------------------------------------------------------------------------------
// The tests: every case for every backend

/// Calls `$m!(case, …)` with every case of the suite.
macro_rules! for_each_case {
    ($m:ident) => {
        $m!(
            empty_store_and_writes_under_the_lock,
            serial_grows_only_when_content_changes,
            previous_versions_are_kept_by_serial,
            stored_text_is_the_canonical_json,
            tool_version_is_updated_on_write,
            another_lineage_is_refused_and_left_unchanged,
            stale_write_is_a_conflict,
            bad_states_are_refused_and_left_byte_for_byte,
            secrets_are_refused_and_never_stored,
            second_process_is_refused_naming_the_holder_and_waits_with_lock_timeout,
            concurrent_writers_from_two_processes_are_serialized,
        );
    };
}

mod local {
    macro_rules! tests {
        ($($case:ident),* $(,)?) => {$(
            #[test]
            fn $case() {
                super::$case(&super::Local::new());
            }
        )*};
    }
    for_each_case!(tests);
}

#[cfg(feature = "etcd-state")]
mod etcd {
    use crate::support::prereq::require_lab;

    macro_rules! tests {
        ($($case:ident),* $(,)?) => {$(
            #[test]
            fn $case() {
                require_lab!();
                super::$case(&super::Etcd {
                    server: crate::support::etcd::EtcdServer::start(),
                    next: std::cell::Cell::new(0),
                });
            }
        )*};
    }
    for_each_case!(tests);
}

// ---------------------------------------------------------------------------------------------
// Child processes

/// Not a test: the body of child processes, doing nothing unless K0SFORM_STORE_TEST_CHILD is set.
/// Mode `hold-lock`: open the store at K0SFORM_STORE_TEST_LOCATION (an etcd lock with the TTL
/// K0SFORM_STORE_TEST_TTL), take the lock, print READY <id>, hold it until stdin closes.
#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    assert_eq!(mode, "hold-lock", "unknown child mode");
    let location = std::env::var("K0SFORM_STORE_TEST_LOCATION").unwrap();
    let ttl: u64 = std::env::var("K0SFORM_STORE_TEST_TTL")
        .unwrap()
        .parse()
        .unwrap();
    let opts = EtcdOptions {
        lock_ttl: Duration::from_secs(ttl),
        request_timeout: Duration::from_secs(5),
        ..EtcdOptions::default()
    };
    let store = state::open(Path::new(&location), &opts).unwrap();
    let g = store.lock(HOLD_OPERATION, Duration::ZERO).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY {}", g.id()).unwrap();
    out.flush().unwrap();
    drop(out);
    let mut sink = String::new();
    while std::io::stdin().read_line(&mut sink).unwrap() > 0 {}
    g.unlock().unwrap();
}

/// A process holding the lock of `p` (this binary's `child_process_entry`).
fn spawn_holder(b: &dyn Backend, p: &Place) -> ChildProc {
    let ttl = b.lock_ttl().unwrap_or(Duration::from_secs(3)).as_secs();
    ChildProc::start(
        "state_store::child_process_entry",
        CHILD_ENV,
        "hold-lock",
        &[
            ("K0SFORM_STORE_TEST_LOCATION", p.location.clone()),
            ("K0SFORM_STORE_TEST_TTL", ttl.to_string()),
        ],
    )
}

// ---------------------------------------------------------------------------------------------
// The cases

/// A new location has no state; writes need the lock, before it is taken and after it is let go;
/// nothing is stored by a refused write.
fn empty_store_and_writes_under_the_lock(b: &dyn Backend) {
    let p = b.fresh();
    let mut s = open(b, &p);
    assert_eq!(s.location(), p.location);
    assert_eq!(s.load().unwrap(), None);
    let err = s.write(&sample_state()).unwrap_err();
    assert!(matches!(err, StateError::NotLocked { .. }), "{err}");
    assert_eq!(b.stored(&p), None);
    assert_eq!(b.others(&p), Vec::<String>::new());

    let g = s.lock("test", Duration::ZERO).unwrap();
    assert_eq!(
        s.write(&sample_state()).unwrap(),
        WriteOutcome::Written { serial: 1 }
    );
    g.unlock().unwrap();
    let err = s.write(&sample_state()).unwrap_err();
    assert!(matches!(err, StateError::NotLocked { .. }), "{err}");
    let loaded = load(b, &p);
    assert_eq!((loaded.serial, loaded.hosts.len()), (1, 4));
    assert_eq!(loaded.tool_version, env!("CARGO_PKG_VERSION"));
}

/// The serial the caller passes does not matter: the store sets it, + 1 only when the content
/// changed; an unchanged state (hosts in another order included) is not written at all.
fn serial_grows_only_when_content_changes(b: &dyn Backend) {
    let p = b.fresh();
    let mut s = open(b, &p);
    let _g = s.lock("test", Duration::ZERO).unwrap();
    let mut st = sample_state();
    assert_eq!(s.write(&st).unwrap(), WriteOutcome::Written { serial: 1 });
    let (stored, others) = (b.stored(&p), b.others(&p));
    st.serial = 1;
    assert_eq!(s.write(&st).unwrap(), WriteOutcome::Unchanged { serial: 1 });
    st.serial = 7;
    st.hosts.reverse(); // order is not content: hosts are sorted on write
    assert_eq!(s.write(&st).unwrap(), WriteOutcome::Unchanged { serial: 1 });
    assert_eq!((b.stored(&p), b.others(&p)), (stored, others), "rewritten");

    st.hosts[0].k0s_version = Some("v1.34.1+k0s.0".parse().unwrap());
    assert_eq!(s.write(&st).unwrap(), WriteOutcome::Written { serial: 2 });
    st.cluster = None;
    assert_eq!(s.write(&st).unwrap(), WriteOutcome::Written { serial: 3 });
    let loaded = load(b, &p);
    assert_eq!(loaded.serial, 3);
    assert_eq!(loaded.lineage, st.lineage, "lineage is fixed");
    assert_eq!(loaded.cluster, None);
}

/// The kept versions (the current one and the ones before it) are read by serial, in the library
/// and with `state pull -serial N`; an older one is refused, naming the serials kept.
fn previous_versions_are_kept_by_serial(b: &dyn Backend) {
    let p = b.fresh();
    let mut s = open(b, &p);
    let g = s.lock("test", Duration::ZERO).unwrap();
    let mut st = sample_state();
    let last = b.kept_versions() + 2;
    for n in 1..=last {
        st.hosts[0].node_name = Some(format!("v{n}"));
        assert_eq!(s.write(&st).unwrap(), WriteOutcome::Written { serial: n });
    }
    g.unlock().unwrap();
    let first_kept = last - b.kept_versions() + 1;
    for n in first_kept..=last {
        let v = s.load_serial(n).unwrap();
        assert_eq!(v.serial, n);
        assert!(
            v.hosts
                .iter()
                .any(|h| h.node_name.as_deref() == Some(&format!("v{n}"))),
            "serial {n} holds another version"
        );
    }
    let err = s.load_serial(first_kept - 1).unwrap_err();
    assert!(matches!(err, StateError::NoSuchSerial { .. }), "{err}");
    let kept: Vec<String> = (first_kept..=last).map(|n| n.to_string()).collect();
    let kept = format!("kept serials: {}", kept.join(", "));
    assert!(err.to_string().contains(&kept), "{err}");

    // `state pull -serial N` through the CLI.
    let n = first_kept.to_string();
    let (code, out, err) = k0sform(&p, &["state", "pull", "-serial", &n]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        s.load_serial(first_kept)
            .unwrap()
            .to_canonical_json()
            .unwrap()
    );
    let (code, _, err) = k0sform(&p, &["state", "pull", "-serial", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("no version with serial 1"), "{err}");

    // The lock is free once released.
    open(b, &p).lock("test", Duration::ZERO).unwrap();
}

/// What is stored is the canonical JSON: pretty, sorted, stable; reading and serializing it
/// again gives the same bytes, in whatever order the hosts were.
fn stored_text_is_the_canonical_json(b: &dyn Backend) {
    let p = b.fresh();
    create(b, &p, &sample_state());
    let text = b.stored(&p).unwrap();
    assert!(text.ends_with("}\n") && !text.ends_with("\n\n"));
    assert!(
        text.starts_with("{\n  \"format_version\": 3,\n  \"lineage\": \""),
        "{text}"
    );
    let loaded = load(b, &p);
    let order: Vec<String> = loaded.hosts.iter().map(|h| h.id().to_string()).collect();
    assert_eq!(
        order,
        ["127.0.0.1", "127.0.0.1:2222", "127.0.0.2", "127.0.1.1"]
    );
    assert_eq!(loaded.to_canonical_json().unwrap(), text);
    let mut shuffled = loaded.clone();
    shuffled.hosts.rotate_left(1);
    assert_eq!(shuffled.to_canonical_json().unwrap(), text);
}

/// A state written by an older k0sform gets this one's version on the next write.
fn tool_version_is_updated_on_write(b: &dyn Backend) {
    let p = b.fresh();
    let mut old = sample_state();
    old.serial = 7;
    old.tool_version = "0.0.1".into();
    b.plant(&p, &old.to_canonical_json().unwrap());
    let mut s = open(b, &p);
    let _g = s.lock("test", Duration::ZERO).unwrap();
    let st = s.load().unwrap().unwrap();
    assert_eq!(s.write(&st).unwrap(), WriteOutcome::Written { serial: 8 });
    let now = load(b, &p);
    assert_eq!(now.tool_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        s.write(&now).unwrap(),
        WriteOutcome::Unchanged { serial: 8 }
    );
}

/// A state of another lineage: with an expected lineage, load fails naming both lineages and the
/// location, and writes are refused; without one, writing another lineage over it is refused.
/// Nothing is stored either way.
fn another_lineage_is_refused_and_left_unchanged(b: &dyn Backend) {
    let p = b.fresh();
    let theirs = sample_state();
    create(b, &p, &theirs);
    let (before, others) = (b.stored(&p), b.others(&p));

    let mut s = open(b, &p);
    let mine = State::new();
    s.expect_lineage(&mine.lineage);
    let err = s.load().unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StateError::LineageMismatch { .. }), "{msg}");
    assert!(
        msg.contains(&theirs.lineage) && msg.contains(&mine.lineage),
        "{msg}"
    );
    assert!(msg.contains(&p.location), "{msg}");
    let g = s.lock("test", Duration::ZERO).unwrap();
    assert!(s.write(&mine).is_err());
    drop(g);

    let mut s = open(b, &p);
    let g = s.lock("test", Duration::ZERO).unwrap();
    let err = s.write(&mine).unwrap_err();
    assert!(matches!(err, StateError::LineageMismatch { .. }), "{err}");
    drop(g);
    assert_eq!((b.stored(&p), b.others(&p)), (before, others));
}

/// A writer whose read is stale (another wrote since): Conflict, and the other's version stays.
fn stale_write_is_a_conflict(b: &dyn Backend) {
    let p = b.fresh();
    create(b, &p, &sample_state());
    let mut a = open(b, &p);
    let mut sa = a.load().unwrap().unwrap();
    {
        let mut other = open(b, &p);
        let _g = other.lock("b", Duration::ZERO).unwrap();
        let mut t = other.load().unwrap().unwrap();
        t.hosts.pop();
        assert_eq!(other.write(&t).unwrap().serial(), 2);
    }
    let _g = a.lock("a", Duration::ZERO).unwrap();
    sa.hosts.remove(0);
    let err = a.write(&sa).unwrap_err();
    assert!(matches!(err, StateError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("serial is now 2, was 1"), "{err}");
    assert_eq!(load(b, &p).hosts.len(), 3);
}

/// States that must not be used or overwritten, each with what the error must say.
fn bad_states() -> Vec<(&'static str, String, &'static str)> {
    let good = sample_state().to_canonical_json().unwrap();
    let mut newer: serde_json::Value = serde_json::from_str(&good).unwrap();
    newer["format_version"] = (k0sform::state::FORMAT_VERSION + 1).into();
    newer["a_field_from_the_future"] = "x".into();
    let mut missing: serde_json::Value = serde_json::from_str(&good).unwrap();
    missing.as_object_mut().unwrap().remove("lineage");
    let mut duplicate = sample_state();
    duplicate.hosts.push(duplicate.hosts[0].clone());
    let duplicate = serde_json::to_string_pretty(&duplicate).unwrap();
    // The recorded binary's stat line reaches the host's probe as an argument.
    let binary = |stat: &str, sha256: &str| {
        let mut s = sample_state();
        s.hosts[0].k0s_binary = Some(k0sform::state::BinaryRecord {
            sha256: sha256.into(),
            stat: stat.into(),
        });
        serde_json::to_string_pretty(&s).unwrap()
    };
    let hex = "ab".repeat(32);
    // A recorded version may become the one installed: one k0sform cannot run is refused, naming
    // where it is (a version that is not one at all is the `bad-version` case below).
    let cluster_version = {
        let mut s = sample_state();
        s.cluster.as_mut().expect("cluster").k0s_version =
            Some(k0sform::version::K0sVersion::parse("v0.10.0").unwrap());
        serde_json::to_string_pretty(&s).unwrap()
    };
    let host_version = {
        let mut s = sample_state();
        s.hosts[1].k0s_version = Some(k0sform::version::K0sVersion::parse("v0.9.1").unwrap());
        serde_json::to_string_pretty(&s).unwrap()
    };

    // Every field that reaches a command (`k0s etcd leave --peer-address`, `k0s reset`'s
    // machine-id guard, kubectl, ssh) or the terminal is checked when read, naming the field.
    let edited = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        f(&mut v);
        serde_json::to_string_pretty(&v).unwrap()
    };
    let access = |user: &str, bastion_user: &str| {
        let target = |a: &str, u: &str| {
            serde_json::json!({"address": a, "port": 22, "user": u, "key_path": null,
                "config_path": null, "options": {}, "bastion": null, "host_key": null,
                "openssh": false})
        };
        let mut ssh = target("127.0.0.1", user);
        ssh["bastion"] = target("127.0.0.9", bastion_user);
        serde_json::json!({"ssh": ssh, "k0s_install_path": "/usr/local/bin/k0s",
            "data_dir": "/var/lib/k0s"})
    };
    let field_cases: Vec<(&str, String, &str)> = vec![
        (
            "peer-url-shell",
            edited(&|v| v["hosts"][0]["etcd"]["peer_url"] = "https://127.0.0.1:2380;reboot".into()),
            "hosts[0].etcd.peer_url: `https://127.0.0.1:2380;reboot` is not an etcd peer URL",
        ),
        (
            "peer-url-flag",
            edited(&|v| v["hosts"][0]["etcd"]["peer_url"] = "--data-dir=/".into()),
            "hosts[0].etcd.peer_url: `--data-dir=/` is not an etcd peer URL",
        ),
        (
            "peer-url-path",
            edited(&|v| v["hosts"][0]["etcd"]["peer_url"] = "https://127.0.0.1:2380/x".into()),
            "hosts[0].etcd.peer_url",
        ),
        (
            "peer-url-no-port",
            edited(&|v| v["hosts"][0]["etcd"]["peer_url"] = "https://127.0.0.1".into()),
            "hosts[0].etcd.peer_url",
        ),
        (
            "member-id",
            edited(&|v| v["hosts"][0]["etcd"]["member_id"] = "8e9e05c5216469021".into()),
            "hosts[0].etcd.member_id: `8e9e05c5216469021` is not an etcd member ID",
        ),
        (
            "machine-id",
            edited(&|v| v["hosts"][1]["machine_id"] = "$(reboot)".into()),
            "hosts[1].machine_id: `$(reboot)` is not a machine-id",
        ),
        (
            "node-name-upper",
            edited(&|v| v["hosts"][0]["node_name"] = "Node1".into()),
            "hosts[0].node_name: `Node1` is not a Kubernetes node name",
        ),
        (
            "node-name-flag",
            edited(&|v| v["hosts"][0]["node_name"] = "--all".into()),
            "hosts[0].node_name: `--all` is not a Kubernetes node name",
        ),
        (
            "host-key",
            edited(&|v| v["hosts"][2]["host_key"] = "SHA256:abc\u{1b}[2J".into()),
            "hosts[2].host_key: `SHA256:abc\\x1b[2J` is not a host key fingerprint",
        ),
        (
            "access-user",
            edited(&|v| v["hosts"][0]["access"] = access("root -oProxyCommand=id", "root")),
            "hosts[0].access.ssh.user: `root -oProxyCommand=id` is not a user name",
        ),
        (
            "bastion-user",
            edited(&|v| v["hosts"][0]["access"] = access("root", "-lroot")),
            "hosts[0].access.ssh.bastion.user: `-lroot` is not a user name",
        ),
        (
            "config-sha",
            edited(&|v| v["hosts"][0]["config_sha256"] = "zz".into()),
            "hosts[0].config_sha256: `zz` is not lower-case hex",
        ),
        (
            "intent-peer-url",
            edited(&|v| v["intents"][0]["peer_url"] = "https://x:2380'".into()),
            "intents[0].peer_url",
        ),
        (
            "intent-member-id",
            edited(&|v| v["intents"][0]["member_id"] = "-".into()),
            "intents[0].member_id",
        ),
        (
            "intent-kind",
            edited(&|v| v["intents"][0]["kind"] = "remove member".into()),
            "intents[0].kind",
        ),
        (
            "intent-step",
            edited(&|v| v["intents"][0]["step"] = "remove\u{1b}[1A".into()),
            "intents[0].step: `remove\\x1b[1A` is not plain text",
        ),
        (
            "cluster-name",
            edited(&|v| v["cluster"]["name"] = "prod\u{202e}".into()),
            "cluster.name: `prod\\u{202e}` is not plain text",
        ),
        (
            "cluster-uid",
            edited(&|v| v["cluster"]["uid"] = "7c3f;x".into()),
            "cluster.uid",
        ),
    ];

    let mut cases: Vec<(&str, String, &str)> = vec![
        (
            "cluster-version",
            cluster_version,
            "cluster: k0s_version: `v0.10.0` is too old",
        ),
        (
            "host-version",
            host_version,
            "k0s_version: `v0.9.1` is too old",
        ),
        ("truncated", good[..good.len() / 2].to_string(), "truncated"),
        ("empty", String::new(), "truncated"),
        ("not-json", "hosts: [oops]\n".into(), "not JSON"),
        ("array", "[1, 2]\n".into(), "not a JSON object"),
        ("string", "\"state\"\n".into(), "not a JSON object"),
        // A bad field deep inside names its line.
        (
            "bad-port",
            good.replacen("\"port\": 22", "\"port\": \"ssh\"", 1),
            "invalid type: string \"ssh\", expected u16 at line",
        ),
        (
            "newer",
            serde_json::to_string_pretty(&newer).unwrap(),
            "format_version 4, newer than this k0sform understands (up to 3)",
        ),
        (
            "missing-lineage",
            serde_json::to_string_pretty(&missing).unwrap(),
            "missing field `lineage`",
        ),
        ("duplicate-host", duplicate, "appears more than once"),
        // A recorded version is a k0s version, checked as every version read from a file.
        (
            "bad-version",
            good.replacen("\"v1.33.4+k0s.0\"", "\"v1.33.4;reboot\"", 1),
            "\"v1.33.4;reboot\" is not a k0s version (it can't contain ';'",
        ),
        (
            "binary-stat",
            binary("1 2 3 $(reboot)", &hex),
            "k0s_binary.stat \"1 2 3 $(reboot)\" is not a stat line",
        ),
        (
            "binary-stat-newline",
            binary("1 2 3\nx", &hex),
            "is not a stat line",
        ),
        (
            "binary-sha",
            binary("1 2 3", &"AB".repeat(32)),
            "k0s_binary.sha256",
        ),
    ];
    cases.extend(field_cases);
    cases
}

/// A state that is cut short, not JSON, of a newer format, or has a field that would reach a
/// command or the terminal unchecked is refused when read (naming the location and the problem,
/// exit 1, no raw control characters), by the library and by the commands; no store writes over
/// it (neither the one that failed to read it nor a fresh one), and nothing else is stored: no
/// backup, no temp file, no history, no lock left.
fn bad_states_are_refused_and_left_byte_for_byte(b: &dyn Backend) {
    for (name, text, problem) in bad_states() {
        let p = b.fresh();
        b.plant(&p, &text);
        let mut s = open(b, &p);
        let err = s.load().unwrap_err();
        let msg = err.to_string();
        assert!(
            !msg.chars()
                .any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)),
            "{name}: raw controls in {msg:?}"
        );
        assert!(msg.contains(&p.location), "{name}: {msg}");
        assert!(msg.contains(problem), "{name}: {msg}");
        assert_eq!(err.exit(), k0sform::exit::Exit::Error);

        // This store refuses to write after the failed load ...
        let g = s.lock("test", Duration::ZERO).unwrap();
        let err = s.write(&State::new()).unwrap_err();
        assert!(
            matches!(err, StateError::WriteRefused { .. }),
            "{name}: {err}"
        );
        drop(g);
        // ... and a fresh store that never loaded refuses too, because write reads the state.
        let mut other = open(b, &p);
        let g = other.lock("test", Duration::ZERO).unwrap();
        let err = other.write(&sample_state()).unwrap_err();
        assert!(err.to_string().contains(problem), "{name}: {err}");
        drop(g);
        assert_eq!(b.stored(&p).as_ref(), Some(&text), "{name} changed");

        // The CLI says the same and exits 1.
        for args in [
            &["state", "list"][..],
            &["state", "pull"],
            &["state", "rm", "127.0.0.1"],
        ] {
            let (code, _, err) = k0sform(&p, args);
            assert_eq!(code, 1, "{name} {args:?}: {err}");
            assert!(err.contains(problem), "{name} {args:?}: {err}");
            assert!(err.contains(&p.location), "{name} {args:?}: {err}");
        }
        assert_eq!(b.stored(&p).as_ref(), Some(&text), "{name} changed");
        assert_eq!(b.others(&p), Vec::<String>::new(), "{name}");
    }
}

/// No secret is ever stored: what is stored has none, and a join token (base64 gzip) or a private
/// key smuggled into a field is refused, naming the field, with nothing stored.
fn secrets_are_refused_and_never_stored(b: &dyn Backend) {
    let p = b.fresh();
    create(b, &p, &sample_state());
    let text = b.stored(&p).unwrap().to_lowercase();
    for word in [
        "token",
        "password",
        "secret",
        "private",
        "h4si",
        "client-key",
    ] {
        assert!(!text.contains(word), "the stored state contains {word:?}");
    }

    for bad in [
        "H4sIAAAAAAAA/6RVT2/bOBK951cIuhsg",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
    ] {
        let p = b.fresh();
        let mut st = sample_state();
        st.hosts[1].host_public_key = Some(bad.into());
        let mut s = open(b, &p);
        let g = s.lock("test", Duration::ZERO).unwrap();
        let err = s.write(&st).unwrap_err();
        assert!(matches!(err, StateError::SecretRefused { .. }), "{err}");
        assert!(err.to_string().contains("host_public_key"), "{err}");
        g.unlock().unwrap();
        assert_eq!(b.stored(&p), None);
        assert_eq!(b.others(&p), Vec::<String>::new());
    }
}

/// While another process holds the lock: the library's `lock` is refused with the holder's
/// details (exit 4), the CLI exits 4 naming pid, host, user, operation, start time and lock ID,
/// and nothing is written; held past a remote lock's TTL it stays held. With a lock timeout the
/// library and the CLI wait for the holder to let go, and then run.
fn second_process_is_refused_naming_the_holder_and_waits_with_lock_timeout(b: &dyn Backend) {
    let p = b.fresh();
    create(b, &p, &sample_state());
    let mut holder = spawn_holder(b, &p);
    let id = holder.wait_for("READY");

    let err = open(b, &p).lock("apply", Duration::ZERO).unwrap_err();
    let StateError::Locked {
        holder: Some(h), ..
    } = &err
    else {
        panic!("expected Locked with holder, got {err:?}");
    };
    assert_eq!((h.pid, h.id.as_str()), (holder.pid(), id.as_str()));
    assert_eq!(h.operation, HOLD_OPERATION);
    assert!(!h.host.is_empty() && !h.user.is_empty());
    humantime::parse_rfc3339(&h.started_at).unwrap();
    assert_eq!(err.exit(), k0sform::exit::Exit::Locked);

    let (code, _, stderr) = k0sform(&p, &["state", "rm", "127.0.0.2"]);
    assert_eq!(code, 4, "{stderr}");
    for part in [
        format!("pid {}", h.pid),
        format!("host {}", h.host),
        format!("user {}", h.user),
        format!("\"{HOLD_OPERATION}\""),
        h.started_at.clone(),
        id.clone(),
    ] {
        assert!(stderr.contains(&part), "{part:?} missing from: {stderr}");
    }
    assert_eq!(load(b, &p).hosts.len(), 4, "`state rm` was refused");

    // Held longer than a remote lock's TTL: the keep-alive holds it; a waiter times out.
    if let Some(ttl) = b.lock_ttl() {
        std::thread::sleep(ttl + Duration::from_secs(1));
    }
    let started = Instant::now();
    let (code, _, stderr) = k0sform(&p, &["-lock-timeout=1s", "state", "rm", "127.0.0.2"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(started.elapsed() >= Duration::from_millis(900));

    // Library: wait up to 10 s; the holder lets go after ~0.7 s.
    let started = Instant::now();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        holder.finish();
    });
    let g = open(b, &p).lock("apply", Duration::from_secs(10)).unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(600),
        "did not wait: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "waited too long: {waited:?}"
    );
    drop(g);
    releaser.join().unwrap();

    // CLI: `-lock-timeout=20s state rm` waits too, then removes the host.
    let mut holder = spawn_holder(b, &p);
    holder.wait_for("READY");
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        holder.finish();
    });
    let started = Instant::now();
    let (code, out, stderr) = k0sform(&p, &["-lock-timeout=20s", "state", "rm", "127.0.0.2"]);
    releaser.join().unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("serial 1 -> 2"), "{out}");
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(load(b, &p).hosts.len(), 3);
    // The lock is free once released.
    open(b, &p).lock("test", Duration::ZERO).unwrap();
}

/// Two processes changing the state at once: both run, one after the other (two writes).
fn concurrent_writers_from_two_processes_are_serialized(b: &dyn Backend) {
    let p = b.fresh();
    create(b, &p, &sample_state());
    let spawn = |addr: &str| {
        bin::k0sform()
            .args([
                "-lock-timeout=20s",
                "-state",
                &p.location,
                "state",
                "rm",
                addr,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (one, two) = (spawn("127.0.0.2"), spawn("127.0.1.1"));
    for c in [one, two] {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let st = load(b, &p);
    assert_eq!(st.serial, 3, "two writes, one after the other");
    let left: Vec<String> = st.hosts.iter().map(|h| h.id().to_string()).collect();
    assert_eq!(left, ["127.0.0.1", "127.0.0.1:2222"]);
}
