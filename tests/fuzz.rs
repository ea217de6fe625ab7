//! Fuzzing of the readers of untrusted input: the spec loader, the state parser, the probe
//! output parser, the saved-plan reader and the redaction of a host's k0s.yaml. Each gets arbitrary bytes and mutations of valid
//! seeds; none may panic or hang (every case runs under a deadline). CI runs a bounded number
//! of cases (`PROPTEST_CASES`, default below, ~10 s in all); `testdata/fuzz/run` runs them for
//! longer.

use k0sform::hostid::HostId;
use k0sform::plan::{Plan, SavedPlan};
use k0sform::reality::{HostFacts, HostReality, Probe, Reality};
use k0sform::spec::LoadOptions;
use k0sform::state::State;
use k0sform::transport::CommandOutput;
use k0sform::ui::render;
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// Longest one input may take: far above any real parse, far below "hangs".
const DEADLINE: Duration = Duration::from_secs(10);

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2048);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Run `f` on its own thread; a panic or a run past `DEADLINE` fails the case with `what`.
fn within<T: Send + 'static>(what: String, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("thread");
    match rx.recv_timeout(DEADLINE) {
        Ok(v) => {
            let _ = worker.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang (> {DEADLINE:?}) on {what}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("panic on {what}"),
    }
}

/// A mutation of a seed: bytes replaced, inserted or removed at positions taken modulo length.
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    /// Repeat a slice (deep nesting, long runs).
    Repeat(usize, usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Replace(p, b)),
        (
            any::<usize>(),
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..8),
                proptest::sample::select(TOKENS.to_vec()).prop_map(|t| t.as_bytes().to_vec()),
            ]
        )
            .prop_map(|(p, b)| Edit::Insert(p, b)),
        (any::<usize>(), 0usize..16).prop_map(|(p, n)| Edit::Remove(p, n)),
        (any::<usize>(), 1usize..8, 1usize..64).prop_map(|(p, n, k)| Edit::Repeat(p, n, k)),
    ]
}

/// Pieces of the formats that random bytes rarely hit.
const TOKENS: &[&str] = &[
    "${",
    "}",
    "$$",
    "${X:-",
    "${X?",
    "*a",
    "&a ",
    "!!binary ",
    "<<: ",
    "[",
    "]",
    "{",
    "}",
    ": ",
    "\n- ",
    "\n  ",
    "---\n",
    "\"",
    "'",
    "\\u0000",
    "\u{1b}[2K",
    "null",
    "1e999",
    "-1",
    "\t",
    "hosts:",
    "role: controller",
    "address: ",
    "format_version",
    "\"serial\": 18446744073709551615",
    "H4sI",
    "token:",
    "--all",
];

fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for e in edits {
        let at = |p: usize, len: usize| if len == 0 { 0 } else { p % (len + 1) };
        match e {
            Edit::Replace(p, b) => {
                if !v.is_empty() {
                    let i = p % v.len();
                    v[i] = *b;
                }
            }
            Edit::Insert(p, b) => {
                let i = at(*p, v.len());
                v.splice(i..i, b.iter().copied());
            }
            Edit::Remove(p, n) => {
                let i = at(*p, v.len());
                let j = (i + n).min(v.len());
                v.drain(i..j);
            }
            Edit::Repeat(p, n, k) => {
                let i = at(*p, v.len());
                let j = (i + n).min(v.len());
                let piece = v[i..j].to_vec();
                for _ in 0..*k {
                    v.splice(i..i, piece.iter().copied());
                }
            }
        }
    }
    v
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Spec loader.

fn spec_seeds() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut seeds = Vec::new();
    for dir in ["specs/valid", "k0sctl-examples"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        files.sort();
        for f in files {
            if f.is_file()
                && let Ok(b) = std::fs::read(&f)
            {
                seeds.push(b);
            }
        }
    }
    assert!(!seeds.is_empty(), "no spec seeds under testdata/");
    seeds
}

fn load_spec(bytes: Vec<u8>) {
    let input = text(&bytes);
    within(format!("spec {:?}", short(&input)), move || {
        let env = |k: &str| (k == "X").then(|| "x".to_string());
        let _ = k0sform::spec::load_with(
            &[PathBuf::from("-")],
            &LoadOptions {
                env: &env,
                stdin: Some(&input),
            },
        );
    });
}

fn short(s: &str) -> String {
    s.chars().take(300).collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn spec_loader_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        load_spec(bytes);
    }

    #[test]
    fn spec_loader_never_panics_on_mutated_specs(
        seed in any::<prop::sample::Index>(),
        edits in proptest::collection::vec(edit(), 1..6),
    ) {
        let seeds = spec_seeds();
        let chosen: &Vec<u8> = seed.get(&seeds);
        load_spec(mutate(chosen, &edits));
    }
}

#[test]
fn spec_loader_survives_known_bombs() {
    let alias_bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n";
    for input in [
        alias_bomb.to_string(),
        "[".repeat(100_000),
        "{a: ".repeat(50_000),
        "${X:-".repeat(50_000),
        "- ".repeat(100_000),
        format!(
            "spec:\n  hosts:\n{}",
            "  - role: controller\n".repeat(5_000)
        ),
    ] {
        load_spec(input.into_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// State parser.

const STATE_SEED: &str = r#"{
  "format_version": 1,
  "lineage": "00000000-0000-4000-8000-000000000001",
  "serial": 12,
  "tool_version": "0.1.0",
  "cluster": {"name": "prod", "uid": "7c3f9a2e-5d41-4c8e-9b1a-2f6d3e8c0a17"},
  "hosts": [
    {"address": "10.0.0.1", "port": 22, "role": "controller", "node_name": "c01",
     "machine_id": "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3", "host_key": "SHA256:abc",
     "etcd": {"member_id": "8e9e05c52164694d", "peer_url": "https://10.0.0.1:2380"},
     "k0s_version": "v1.33.4+k0s.0"}
  ],
  "intents": [{"step": "remove-member c01", "kind": "remove_member", "address": "10.0.0.1",
               "port": 22, "member_id": "8e9e05c52164694d", "started_at": "2026-01-01T00:00:00Z"}]
}"#;

fn parse_state(bytes: Vec<u8>) {
    within(format!("state {:?}", short(&text(&bytes))), move || {
        if let Ok(state) = k0sform::state::parse(Path::new("fuzz.json"), &bytes) {
            // What parsed must serialize again.
            let _ = serde_json::to_string(&state);
        }
    });
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn state_parser_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        parse_state(bytes);
    }

    #[test]
    fn state_parser_never_panics_on_mutated_states(edits in proptest::collection::vec(edit(), 1..6)) {
        parse_state(mutate(STATE_SEED.as_bytes(), &edits));
    }
}

#[test]
fn state_seed_parses() {
    k0sform::state::parse(Path::new("seed.json"), STATE_SEED.as_bytes()).expect("seed state");
    parse_state(format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes());
}

// ---------------------------------------------------------------------------------------------
// Probe output parser.

/// The section names the probe script prints.
const SECTIONS: &[&str] = &[
    "machine_id",
    "hostname",
    "arch",
    "os_release",
    "units",
    "etcd_data",
    "config_sha256",
    "config",
    "binary_stat",
    "binary_sha256",
    "status",
    "version",
    "member_list",
    "objects",
    "etcd_members",
    "cluster_uid",
    "nodes",
    "control_nodes",
    "files",
    "staging",
];

fn probe_reader(files: usize) -> (k0sform::k0s::ProbeReader, String) {
    let paths: Vec<String> = (0..files).map(|i| format!("/etc/f{i}")).collect();
    let staging: Vec<String> = ["/usr/local/bin/k0s", "/etc/k0s/k0s.yaml"]
        .into_iter()
        .map(String::from)
        .chain(paths.iter().cloned())
        .collect();
    let p = k0sform::k0s::probe(
        "/usr/local/bin/k0s",
        "/var/lib/k0s",
        true,
        None,
        None,
        &paths,
        &staging,
    );
    // The nonce is the marker argument of the script (`$5`).
    let nonce = p
        .command
        .argv
        .iter()
        .find(|a| a.starts_with("K0SFORM-"))
        .expect("nonce")
        .clone();
    (p.reader, nonce)
}

fn parse_probe(stdout: Vec<u8>, stderr: Vec<u8>, status: Option<i32>, files: usize) {
    let shown = short(&text(&stdout));
    within(format!("probe output {shown:?}"), move || {
        let (reader, _) = probe_reader(files);
        let _ = reader.parse(&CommandOutput {
            status,
            stdout,
            stderr,
        });
    });
}

/// Well-framed output with arbitrary section bodies and exit codes.
fn framed(
    nonce: &str,
    sections: &[(usize, i32, String, String)],
    done: bool,
) -> (Vec<u8>, Vec<u8>) {
    let (mut o, mut e) = (String::new(), String::new());
    for (i, rc, out, err) in sections {
        let name = SECTIONS[i % SECTIONS.len()];
        o += &format!("{nonce} begin {name}\n{out}\n{nonce} end {name} {rc}\n");
        e += &format!("{nonce} begin {name}\n{err}\n{nonce} end {name}\n");
    }
    if done {
        o += &format!("{nonce} done\n");
    }
    (o.into_bytes(), e.into_bytes())
}

fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        proptest::sample::select(vec![
            r#"{"Version":"v1.33.4+k0s.0","Pid":1,"Role":"controller","Args":["a"]}"#.to_string(),
            r#"{"members":{"c1":"https://10.0.0.1:2380","":"x"}}"#.to_string(),
            r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"--all"}}]}"#.to_string(),
            r#"{"items":[{"metadata":{"name":"c1"},"status":{"memberID":"H4sI"}}]}"#.to_string(),
            "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3".to_string(),
            "x 644 root root 0 0\n-".to_string(),
            "c1\u{1b}[2K".to_string(),
        ]),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn probe_parser_never_panics_on_bytes(
        stdout in proptest::collection::vec(any::<u8>(), 0..512),
        stderr in proptest::collection::vec(any::<u8>(), 0..128),
        status in proptest::option::of(-1i32..256),
        files in 0usize..3,
    ) {
        parse_probe(stdout, stderr, status, files);
    }

    #[test]
    fn probe_parser_never_panics_on_framed_output(
        sections in proptest::collection::vec((any::<usize>(), -1i32..256, body(), any::<String>()), 0..12),
        done in any::<bool>(),
        files in 0usize..3,
        edits in proptest::collection::vec(edit(), 0..3),
    ) {
        let shown = format!("{sections:?}");
        within(format!("framed probe output {}", short(&shown)), move || {
            let (reader, nonce) = probe_reader(files);
            let (o, e) = framed(&nonce, &sections, done);
            let _ = reader.parse(&CommandOutput { status: Some(0), stdout: mutate(&o, &edits), stderr: e });
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Saved-plan reader.

fn plan_seed() -> String {
    let plan: Plan = serde_json::from_value(serde_json::json!({
        "format_version": 1,
        "cluster_name": "prod",
        "cluster_uid": "7c3f9a2e-5d41-4c8e-9b1a-2f6d3e8c0a17",
        "cluster_action": {"kind": "existing"},
        "refresh_only": false,
        "outside_changes": [],
        "changes": [{
            "host": {"address": "10.0.1.3", "port": 22}, "role": "worker", "name": "w03",
            "action": "remove",
            "reasons": [{"code": "not_in_spec", "message": "no longer in k0sctl.yaml"}],
            "details": [{"sign": "-", "text": "Node \"w03\" drained"}],
            "config_diff": "--- a\n+++ b\n-x\n+y\n", "steps": [0, 1]
        }],
        "drift": [],
        "steps": [
            {"id": 0, "host": {"address": "10.0.1.3", "port": 22},
             "kind": {"kind": "drain", "node": "w03", "via": {"address": "10.0.0.1", "port": 22}}, "after": []},
            {"id": 1, "host": {"address": "10.0.1.3", "port": 22},
             "kind": {"kind": "run_hooks", "action": "reset", "stage": "before", "lines": ["echo hi"]}, "after": [0]}
        ],
        "etcd": {"members_before": 3, "members_after": 3, "min_healthy": 3, "quorum": 2},
        "warnings": ["careful"],
        "state_serial": 12
    }))
    .expect("seed plan");
    let reality = Reality {
        hosts: vec![HostReality {
            id: HostId::new("10.0.1.3", 22),
            probe: Probe::Reached(Box::new(HostFacts {
                machine_id: "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3".into(),
                host_key: "SHA256:abc".into(),
                ..HostFacts::default()
            })),
        }],
    };
    SavedPlan::new(plan, &State::default(), "ab12", &reality).to_json()
}

fn read_saved_plan(bytes: Vec<u8>) {
    let input = text(&bytes);
    within(format!("saved plan {:?}", short(&input)), move || {
        if let Ok(saved) = SavedPlan::from_json(&input) {
            let _ = saved.verify(&State::default(), "ab12", &Reality::default());
            let _ = render::text(&saved.plan, true);
            let _ = render::dot(&saved.plan);
        }
    });
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn saved_plan_reader_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        read_saved_plan(bytes);
    }

    #[test]
    fn saved_plan_reader_never_panics_on_mutated_plans(edits in proptest::collection::vec(edit(), 1..6)) {
        read_saved_plan(mutate(plan_seed().as_bytes(), &edits));
    }
}

#[test]
fn saved_plan_seed_reads() {
    assert!(SavedPlan::from_json(&plan_seed()).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Hostile addresses (issue 28): in the address fields of a state and of a saved plan.

/// Addresses as someone editing the file writes them: shell syntax, ssh's %-tokens, options,
/// terminal controls and bidi overrides, mixed with the characters of real addresses.
fn hostile_address() -> impl Strategy<Value = String> {
    let pieces = proptest::sample::select(vec![
        "'",
        "\"",
        "$(",
        ")",
        "`",
        ";",
        "|",
        "&",
        " ",
        "\t",
        "\n",
        "%h",
        "%p",
        "%%",
        "-o",
        "-",
        "\u{1b}[2K",
        "\u{1b}[1A",
        "\u{9b}",
        "\u{7}",
        "\u{202e}",
        "\0",
        "[",
        "]",
        ":",
        ".",
        "_",
        "\\",
        "*",
        "~",
        "a",
        "Z",
        "0",
        "9",
        "10.0.0.1",
        "::1",
        "k0s.example.com",
    ]);
    proptest::collection::vec(pieces, 0..8).prop_map(|v| v.concat())
}

/// What an accepted address may hold: the characters of IP addresses and host names, no
/// leading `-` (an ssh option).
fn plain_address(a: &str) -> bool {
    !a.is_empty()
        && !a.starts_with('-')
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:".contains(c))
}

/// Text a terminal shows as it is: no control character but line breaks and tabs (which
/// `ui::escape` keeps), no bidi override.
fn shows_as_is(s: &str) -> bool {
    !s.chars().any(|c| {
        (c.is_control() && !matches!(c, '\n' | '\t')) || ('\u{202a}'..='\u{202e}').contains(&c)
    })
}

/// `value` with the string at `field` (`a.b[0].c`) set to `to`, creating objects on the way.
fn set_field(value: &mut serde_json::Value, field: &str, to: &str) {
    let mut at = value;
    for part in field.split('.') {
        at = match part.split_once('[') {
            Some((name, index)) => {
                &mut at[name][index.trim_end_matches(']').parse::<usize>().expect("index")]
            }
            None => &mut at[part],
        };
    }
    *at = serde_json::Value::String(to.to_string());
}

const STATE_ADDRESS_FIELDS: &[&str] = &[
    "hosts[0].address",
    "hosts[0].access.ssh.address",
    "hosts[0].access.ssh.bastion.address",
    "intents[0].address",
];

/// The seed state with recorded access through a bastion, `field` set to `address`: refused
/// naming the field in a message without raw controls, or accepted when `plain(field, value)`.
fn state_with(field: &'static str, address: String, plain: fn(&str, &str) -> bool) {
    within(format!("state {field} = {address:?}"), move || {
        let mut v: serde_json::Value = serde_json::from_str(STATE_SEED).expect("seed");
        let target = |a: &str| {
            serde_json::json!({"address": a, "port": 22, "user": "root", "key_path": null,
                "config_path": null, "options": {}, "bastion": null, "host_key": null,
                "openssh": false})
        };
        let mut ssh = target("10.0.0.1");
        ssh["bastion"] = target("10.0.0.2");
        v["hosts"][0]["access"] = serde_json::json!({"ssh": ssh,
            "k0s_install_path": "/usr/local/bin/k0s", "data_dir": "/var/lib/k0s"});
        set_field(&mut v, field, &address);
        let bytes = serde_json::to_vec(&v).expect("json");
        match k0sform::state::parse(Path::new("fuzz.json"), &bytes) {
            Ok(_) => assert!(plain(field, &address), "{field} {address:?} was accepted"),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&format!(
                        "fuzz.json is not a valid k0sform state: {field}: "
                    )),
                    "{msg}"
                );
                assert!(shows_as_is(&msg), "raw controls in {msg:?}");
            }
        }
    });
}

const PLAN_ADDRESS_FIELDS: &[&str] = &[
    "plan.changes[0].host.address",
    "plan.steps[0].host.address",
    "plan.steps[0].kind.via.address",
    "identities[0].host.address",
];

/// The fields of a state and of a saved plan that hold one kind of value, and what an accepted
/// value may be (`plain(field, value)`).
struct Fields {
    state: &'static [&'static str],
    plan: &'static [&'static str],
    plain: fn(&str, &str) -> bool,
}

impl Fields {
    /// `state_with` for one of these fields.
    fn in_state(&self, field: &'static str, value: String) {
        state_with(field, value, self.plain);
    }

    /// `plan_with` for one of these fields.
    fn in_plan(&self, field: &'static str, value: String) {
        plan_with(field, value, self.plain);
    }

    /// Each of `values` in every one of these fields, of the state and of the saved plan.
    fn in_every_field(&self, values: &[&str]) {
        for value in values {
            for field in self.state {
                self.in_state(field, value.to_string());
            }
            for field in self.plan {
                self.in_plan(field, value.to_string());
            }
        }
    }
}

/// Addresses: accepted only as plain addresses (and then rendered without raw controls).
const ADDRESSES: Fields = Fields {
    state: STATE_ADDRESS_FIELDS,
    plan: PLAN_ADDRESS_FIELDS,
    plain: plain_address_in,
};

fn plain_address_in(_field: &str, a: &str) -> bool {
    plain_address(a)
}

/// The seed plan with `field` set to `address`, sealed again: refused naming the field in a
/// message without raw controls, or accepted when `plain(field, value)` and rendered without any.
fn plan_with(field: &'static str, address: String, plain: fn(&str, &str) -> bool) {
    within(format!("saved plan {field} = {address:?}"), move || {
        let mut v: serde_json::Value = serde_json::from_str(&plan_seed()).expect("seed");
        set_field(&mut v, field, &address);
        let mut saved: SavedPlan = serde_json::from_value(v).expect("still a plan");
        saved.seal();
        match SavedPlan::from_json(&saved.to_json()) {
            Ok(saved) => {
                assert!(plain(field, &address), "{field} {address:?} was accepted");
                let text = render::text(&saved.plan, false);
                assert!(shows_as_is(&text), "raw controls in {text:?}");
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(&format!("not valid: {field}: ")), "{msg}");
                assert!(shows_as_is(&msg), "raw controls in {msg:?}");
            }
        }
    });
}

// Hostile values in the other fields of a state and a saved plan that reach a command or the
// terminal: peer URLs, member IDs, machine-ids, node names, host key fingerprints, users.

/// `hostile_address`'s pieces with those of peer URLs, fingerprints and hex IDs.
fn hostile_value() -> impl Strategy<Value = String> {
    let pieces = proptest::sample::select(vec![
        "https://",
        "http://",
        "://",
        ":2380",
        ":0",
        ":99999",
        "/",
        "SHA256:",
        "+",
        "=",
        "$(",
        "`",
        ";",
        " ",
        "\n",
        "-",
        "--peer-address=",
        "\u{1b}[2K",
        "\u{9b}",
        "\u{202e}",
        "\0",
        "[",
        "]",
        ":",
        ".",
        "_",
        "a",
        "F",
        "0",
        "9",
        "8e9e05c5",
        "10.0.0.1",
        "::1",
        "k0s.example",
    ]);
    proptest::collection::vec(pieces, 0..8).prop_map(|v| v.concat())
}

/// What an accepted value may hold: no shell, terminal or option syntax, by field.
fn plain_value(field: &str, v: &str) -> bool {
    if v.is_empty() && field.ends_with("host_key") {
        // No key recorded.
        return true;
    }
    let plain = !v.is_empty()
        && !v.starts_with('-')
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:/[]+=_".contains(c));
    plain
        && match field.rsplit('.').next().unwrap_or(field) {
            "peer_url" => v.starts_with("http://") || v.starts_with("https://"),
            "member_id" | "machine_id" => v.chars().all(|c| c.is_ascii_hexdigit()),
            "node_name" => !v.chars().any(|c| c.is_ascii_uppercase()),
            "host_key" => v.starts_with("SHA256:"),
            _ => true,
        }
}

const STATE_VALUE_FIELDS: &[&str] = &[
    "hosts[0].etcd.peer_url",
    "hosts[0].etcd.member_id",
    "hosts[0].machine_id",
    "hosts[0].node_name",
    "hosts[0].host_key",
    "hosts[0].access.ssh.user",
    "hosts[0].access.ssh.bastion.user",
    "intents[0].member_id",
    "intents[0].peer_url",
];

const PLAN_VALUE_FIELDS: &[&str] = &[
    "identities[0].machine_id",
    "identities[0].host_key",
    "identities[0].member_id",
];

/// Peer URLs, IDs, names, fingerprints and users: accepted when `plain_value`.
const VALUES: Fields = Fields {
    state: STATE_VALUE_FIELDS,
    plan: PLAN_VALUE_FIELDS,
    plain: plain_value,
};

/// Two properties of one kind of `Fields`: a generated hostile value in any of its state fields
/// (`$state_test`) and in any of its saved-plan fields (`$plan_test`).
macro_rules! hostile_fields_props {
    ($fields:expr, $values:expr, $state_test:ident, $plan_test:ident) => {
        proptest! {
            #![proptest_config(config())]

            #[test]
            fn $state_test(field in proptest::sample::select($fields.state), value in $values) {
                $fields.in_state(field, value);
            }

            #[test]
            fn $plan_test(field in proptest::sample::select($fields.plan), value in $values) {
                $fields.in_plan(field, value);
            }
        }
    };
}

hostile_fields_props!(
    VALUES,
    hostile_value(),
    state_reader_refuses_hostile_field_values,
    saved_plan_reader_refuses_hostile_field_values
);

#[test]
fn known_hostile_values_are_refused_in_every_field() {
    VALUES.in_every_field(&[
        "https://10.0.0.1:2380 --data-dir=/",
        "--peer-address=x",
        "\u{1b}[1A\u{1b}[2KNo changes",
        "$(reboot)",
        "",
    ]);
    VALUES.in_state("hosts[0].etcd.peer_url", "https://[fd00::1]:2380".into());
    VALUES.in_state("hosts[0].etcd.peer_url", "http://c1.example:2380".into());
    VALUES.in_plan("identities[0].machine_id", "0123456789abcdef".into());
}

// Redaction of a host's k0s.yaml (its text comes from the host).

const CONFIG_SEED: &str = "spec:\n  storage:\n    kine:\n      dataSource: mysql://k0s:hunter2@db:3306/k0s\n  extensions:\n    helm:\n      repositories:\n      - {name: r, url: \"https://ci:t0ken@charts.example\", password: pw}\n      charts:\n      - name: app\n        values: |\n          adminPassword: topsecret\n          x: 1\n";

fn redact_config(bytes: Vec<u8>) {
    let input = text(&bytes);
    within(format!("k0s.yaml {:?}", short(&input)), move || {
        let r = k0sform::k0s::redact::redact(&input);
        assert_eq!(r.lines().count(), input.lines().count(), "{r}");
        let _ = k0sform::k0s::redact::config_diff(&input, CONFIG_SEED, "a", "b", false);
        let _ = k0sform::k0s::redact::hide_url_credentials(&input);
    });
}

hostile_fields_props!(
    ADDRESSES,
    hostile_address(),
    state_reader_refuses_hostile_addresses,
    saved_plan_reader_refuses_hostile_addresses
);

#[test]
fn known_hostile_addresses_are_refused_in_every_field() {
    ADDRESSES.in_every_field(&[
        "x'$(id)'",
        "-oProxyCommand=id",
        "\u{1b}[1A\u{1b}[2KNo changes",
        "a%hb",
        "",
    ]);
    ADDRESSES.in_state("hosts[0].address", "k0s.example.com".into());
    ADDRESSES.in_plan("plan.steps[0].host.address", "10.0.0.7".into());
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn redaction_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        redact_config(bytes);
    }

    #[test]
    fn redaction_never_panics_on_mutated_configs(edits in proptest::collection::vec(edit(), 1..6)) {
        redact_config(mutate(CONFIG_SEED.as_bytes(), &edits));
    }
}
