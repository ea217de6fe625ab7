//! A fake cluster behind a fake `Transport`, for the real k0s steps.

use base64::Engine;
use k0sform::apply::HostProber;
use k0sform::hostid::HostId;
use k0sform::reality::{ClusterView, HostFacts, K0sStatus, MemberView, Probe};
use k0sform::state::BinaryRecord;
use k0sform::transport::{CommandOutput, FileAttrs, RemoteCommand, Transport, TransportError};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub const BEARER: &str = "abcdef.0123456789abcdef";
pub const BOOT_UID: &str = "b0075a11-0000-4000-8000-000000000001";
pub const OLD_UID: &str = "7c3f0000-0000-4000-8000-000000000002";
/// The stat line of every binary the fake moves into place.
pub const MOVED_STAT: &str =
    "1234 2049 77 2026-12-04 10:00:00.000000000 +0000 2026-12-04 10:00:01.000000000 +0000";

fn moved_stat_line() -> String {
    format!("{}{MOVED_STAT}\n", k0sform::k0s::MOVED_STAT_PREFIX)
}

#[derive(Debug, Clone, Default)]
pub struct FakeHost {
    pub machine_id: String,
    pub hostname: String,
    pub running: bool,
    /// `controller` / `worker` and the install args.
    pub installed: Option<(String, Vec<String>)>,
    pub files: BTreeMap<String, (Vec<u8>, u32)>,
    /// The API server on this host does not answer.
    pub unhealthy: bool,
    /// The version k0s runs with since its last start (from the binary installed then:
    /// `k0s vX.Y.Z` → `vX.Y.Z+k0s.0`), else v1.33.4+k0s.0.
    pub version: Option<String>,
    /// Arguments `k0s status` shows after the binary and the role (the running service's).
    pub status_args: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    pub peer_url: String,
    pub id: String,
}

#[derive(Debug, Clone)]
pub enum CallKind {
    Run {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        stdin: Option<Vec<u8>>,
    },
    Write {
        path: String,
        data: Vec<u8>,
        mode: u32,
    },
}

#[derive(Debug, Clone)]
pub struct Call {
    pub host: HostId,
    pub kind: CallKind,
}

impl Call {
    /// The k0s words after the binary, e.g. `etcd leave --peer-address=…`.
    pub fn words(&self) -> String {
        match &self.kind {
            CallKind::Run { argv, .. } if argv.get(3).is_some_and(|a| a == "k0sform-swap") => {
                "swap".to_string()
            }
            // The wrappers of `k0s::install_service` and `k0s::start_at_host_time`: their
            // k0s command's words.
            CallKind::Run { argv, .. } if argv.get(3).is_some_and(|a| a == "k0sform-install") => {
                argv[9..].join(" ")
            }
            CallKind::Run { argv, .. } if argv.get(3).is_some_and(|a| a == "k0sform-start") => {
                argv[5..].join(" ")
            }
            CallKind::Run { argv, .. }
                if argv.get(3).is_some_and(|a| a == "k0sform-token-file") =>
            {
                format!("token-file {}", argv[4])
            }
            CallKind::Run { argv, .. } => {
                let i = argv.iter().position(|a| a.ends_with("k0s")).unwrap_or(0);
                argv[i + 1..].join(" ")
            }
            CallKind::Write { path, .. } => format!("write {path}"),
        }
    }
    pub fn is(&self, host: &HostId, prefix: &str) -> bool {
        &self.host == host && self.words().starts_with(prefix)
    }
    /// The command line of a run (not a write).
    pub fn argv(&self) -> Option<&[String]> {
        match &self.kind {
            CallKind::Run { argv, .. } => Some(argv),
            CallKind::Write { .. } => None,
        }
    }
}

#[derive(Debug, Default)]
pub struct World {
    pub hosts: BTreeMap<HostId, FakeHost>,
    pub members: Vec<Member>,
    pub nodes: BTreeMap<String, bool>,
    pub uid: Option<String>,
    pub next_id: u64,
    pub calls: Vec<Call>,
    pub in_flight: HashMap<HostId, usize>,
    pub max_in_flight: HashMap<HostId, usize>,
    /// File writes (uploads included) in flight on all hosts together, and their peak.
    pub writes_in_flight: usize,
    pub max_writes_in_flight: usize,
    pub delay: Duration,
    /// Commands whose k0s words start with this fail on that host.
    pub fail: Vec<(HostId, String)>,
    /// EtcdMember objects show this member ID for a peer address instead of the real one.
    pub object_id_override: HashMap<String, String>,
    pub tokens: Vec<String>,
    /// `kubectl delete etcdmember X` hides X's object (as on a real cluster).
    pub hide_objects_after_delete: bool,
    pub deleted_objects: Vec<String>,
    /// `etcd leave` is refused with `unhealthy cluster` this many more times (etcd's strict
    /// reconfiguration check right after membership churn).
    pub refuse_leave: usize,
    /// Hosts probed through `Prober`, in order.
    pub probed: Vec<HostId>,
    /// The binary record each probe was given (`Prober::probe`'s `known_binary`).
    pub probed_known: Vec<(HostId, Option<BinaryRecord>)>,
    /// Nodes marked unschedulable (`kubectl cordon`/`drain`, until `uncordon`).
    pub cordoned: std::collections::BTreeSet<String>,
    /// Taints put on Nodes with `kubectl taint nodes`, by Node.
    pub taints: BTreeMap<String, Vec<String>>,
    /// The hosts' clock (seconds; one for all hosts): `date -u +%s` and each k0s start move
    /// it on by a second.
    pub clock: i64,
    /// When each Node's kubelet last posted its status (`lastHeartbeatTime`), by the clock.
    pub beats: BTreeMap<String, i64>,
    /// Nodes whose kubelet posts nothing after a start: they keep the Ready condition and
    /// heartbeat they had (the cached Ready of a stopped kubelet).
    pub silent_kubelets: std::collections::BTreeSet<String>,
    /// etcd learners by peer address (k0s v1.35.5+): their EtcdMember object appears (with
    /// Joined=True) only after this many more object listings that show them as members.
    pub learners: BTreeMap<String, usize>,
    /// Probes report which start of k0s each host runs (`k0s status`'s InvocationID) and
    /// which start wrote each EtcdMember object (its `shutdown-on-leave` label): `run-ADDR`.
    pub invocations: bool,
    /// EtcdMember objects by peer address that still show an earlier life of their host
    /// (another member ID, another invocation) for this many more probes: restored from a
    /// backup, or left by a rebuilt host, until the running k0s rewrites them.
    pub stale_objects: BTreeMap<String, (String, usize)>,
    /// k0s rewrites such an object in two calls, labels before status: probes show it with
    /// the running start's InvocationID beside the earlier member ID. `kubectl get
    /// etcdmembers` shows it, Joined=True, while its address is no member or a hidden
    /// learner (it was there before the join; k0s rewrites it only after the promotion).
    pub relabelled_stale: bool,
    /// `Transport::run_lines` (the Node watch). `None`, the default: the fake cannot stream,
    /// and the runner polls. `Some((after, node))`: the watch starts; `after` later that
    /// Node's kubelet registers it Ready and the watch prints `node/NODE`, then runs until it
    /// is dropped.
    pub watch: Option<(Duration, String)>,
    /// With `watch`: the watch's command ends this long after it started, printing
    /// nothing; the kubelet still registers its Node when `watch` says.
    pub watch_ends: Option<Duration>,
    /// Node watches started, and those ended or dropped since.
    pub watches: (usize, usize),
    /// Hosts whose probe meets another SSH host key than the one recorded.
    pub key_changed: std::collections::BTreeSet<HostId>,
}

fn ok(stdout: impl Into<Vec<u8>>) -> CommandOutput {
    CommandOutput {
        status: Some(0),
        stdout: stdout.into(),
        stderr: vec![],
    }
}

fn err(line: &str) -> CommandOutput {
    CommandOutput {
        status: Some(1),
        stdout: vec![],
        stderr: format!("{line}\n").into_bytes(),
    }
}

pub fn make_token() -> String {
    let kubeconfig = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0E=\n    server: https://127.0.0.1:9443\n  name: k0s\ncontexts:\n- context:\n    cluster: k0s\n    user: controller-bootstrap\n  name: k0s\ncurrent-context: k0s\nkind: Config\npreferences: {{}}\nusers:\n- name: controller-bootstrap\n  user:\n    token: {BEARER}\n"
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(kubeconfig.as_bytes()).unwrap();
    base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap())
}

fn addr_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.rsplit_once(':').map_or(rest, |(h, _)| h).to_string()
}

impl World {
    pub fn add_host(&mut self, id: &HostId, name: &str) {
        self.hosts.insert(
            id.clone(),
            FakeHost {
                machine_id: format!("mid-{name}"),
                hostname: name.to_string(),
                ..Default::default()
            },
        );
    }

    /// A running controller that is already an etcd member (and has a Node if `node`).
    pub fn add_member(&mut self, id: &HostId, name: &str) -> String {
        self.add_host(id, name);
        let h = self.hosts.get_mut(id).unwrap();
        h.running = true;
        h.installed = Some(("controller".into(), vec![]));
        self.next_id += 1;
        let mid = format!("{:016x}", 0x8e9e05c521640000u64 + self.next_id);
        self.members.push(Member {
            name: name.to_string(),
            peer_url: format!("https://{}:2380", id.address),
            id: mid.clone(),
        });
        self.uid.get_or_insert_with(|| OLD_UID.to_string());
        mid
    }

    fn answer(&mut self, host: &HostId, argv: &[String]) -> CommandOutput {
        // `k0s::install_service`: the staged binary (argument 4, if any) onto the install
        // path (5), k0sctl's drop-in (6) removed, the `export` lines of its OpenRC file (7)
        // too, then the install (8…).
        // A moved binary's stat line comes first (`k0s::MOVED_STAT_PREFIX`).
        if argv.get(3).map(String::as_str) == Some("k0sform-install") {
            let mut moved = false;
            if let Some(h) = self.hosts.get_mut(host) {
                if !argv[4].is_empty()
                    && let Some(f) = h.files.remove(&argv[4])
                {
                    h.files.insert(argv[5].clone(), f);
                    moved = true;
                }
                h.files.remove(&argv[6]);
            }
            let mut out = self.answer(host, &argv[8..]);
            if moved {
                let mut stdout = moved_stat_line().into_bytes();
                stdout.extend(out.stdout);
                out.stdout = stdout;
            }
            return out;
        }
        // `k0s::start_at_host_time`: the host's clock, then the start (4…).
        if argv.get(3).map(String::as_str) == Some("k0sform-start") {
            let date = ["date", "-u", "+%s"].map(String::from);
            let mut out = self.answer(host, &date);
            let start = self.answer(host, &argv[4..]);
            out.stdout.extend(start.stdout);
            out.stderr = start.stderr;
            out.status = start.status;
            return out;
        }
        // `k0s::token_file::ensure_decodable`: the placeholder (5) into the file (4) unless
        // it holds a join token.
        if argv.get(3).map(String::as_str) == Some("k0sform-token-file") {
            let h = self.hosts.get_mut(host).unwrap();
            let decodes = h.files.get(&argv[4]).is_some_and(|(data, _)| {
                k0sform::k0s::parse_token(&String::from_utf8_lossy(data)).is_ok()
            });
            if decodes {
                return ok("");
            }
            h.files
                .insert(argv[4].clone(), (argv[5].clone().into_bytes(), 0o600));
            return ok(format!("{}\n", argv[4]));
        }
        // `k0s::swap_in_binary`: mv the staged file onto the install path, if staged.
        if argv.get(3).map(String::as_str) == Some("k0sform-swap") {
            if let Some(h) = self.hosts.get_mut(host)
                && let Some(f) = h.files.remove(&argv[4])
            {
                h.files.insert(argv[5].clone(), f);
                return ok(moved_stat_line());
            }
            return ok("");
        }
        // `k0s::remove_files`: rm -f -- PATH…
        if argv.first().map(String::as_str) == Some("rm")
            && argv.get(2).map(String::as_str) == Some("--")
        {
            if let Some(h) = self.hosts.get_mut(host) {
                for p in argv.iter().skip_while(|a| *a != "--").skip(1) {
                    h.files.remove(p);
                }
            }
            return ok("");
        }
        let i = argv.iter().position(|a| a.ends_with("k0s")).unwrap_or(0);
        let w: Vec<&str> = argv[i + 1..].iter().map(String::as_str).collect();
        let words = w.join(" ");
        if self
            .fail
            .iter()
            .any(|(h, p)| h == host && words.starts_with(p.as_str()))
        {
            return err("Error: injected failure");
        }
        let addr = host.address.clone();
        let Some(h) = self.hosts.get(host).cloned() else {
            return err("Error: no such host in the fake");
        };
        match w.as_slice() {
            ["-u", "+%s"] if argv[0] == "date" => {
                self.clock = self.clock.max(1_800_000_000) + 1;
                ok(format!("{}\n", self.clock))
            }
            ["version"] => ok(format!(
                "{}\n",
                h.version.as_deref().unwrap_or("v1.33.4+k0s.0")
            )),
            ["status", "-o", "json"] => {
                if h.running {
                    ok(format!(
                        "{{\"Version\":\"{}\",\"Pid\":1234,\"PPid\":0,\"Role\":\"{}\",\"SysInit\":\"\",\"StubFile\":\"\",\"Output\":\"\",\"Workloads\":false,\"SingleNode\":false,\"Args\":[\"/usr/local/bin/k0s\",\"controller\"{}],\"ClusterConfig\":null,\"K0sVars\":{{}}}}\n",
                        h.version.as_deref().unwrap_or("v1.33.4+k0s.0"),
                        h.installed.as_ref().map_or("controller", |i| i.0.as_str()),
                        h.status_args
                            .iter()
                            .map(|a| format!(",{}", serde_json::Value::from(a.as_str())))
                            .collect::<String>()
                    ))
                } else {
                    err(
                        "Error: status: can't get \"status\" via \"/run/k0s/status.sock\": Get \"http://localhost/status\": dial unix /run/k0s/status.sock: connect: no such file or directory",
                    )
                }
            }
            ["install", kind, rest @ ..] => {
                let args: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
                self.hosts.get_mut(host).unwrap().installed = Some((kind.to_string(), args));
                ok("")
            }
            ["start"] => {
                let Some((kind, args)) = h.installed.clone() else {
                    return err("Error: k0s has not been installed as a service");
                };
                if h.running {
                    return err("Error: already running");
                }
                let version = h.files.get("/usr/local/bin/k0s").and_then(|(d, _)| {
                    String::from_utf8_lossy(d)
                        .strip_prefix("k0s ")
                        .map(|v| match v.contains('+') {
                            true => v.to_string(),
                            false => format!("{v}+k0s.0"),
                        })
                });
                let fh = self.hosts.get_mut(host).unwrap();
                fh.running = true;
                fh.version = version;
                let joining = h
                    .files
                    .get("/etc/k0s/k0stoken")
                    .is_some_and(|(d, _)| !d.is_empty())
                    && args.iter().any(|a| a.starts_with("--token-file"));
                if kind == "controller" {
                    if !joining {
                        self.members.clear();
                        self.uid = Some(BOOT_UID.into());
                    }
                    self.next_id += 1;
                    self.members.push(Member {
                        name: h.hostname.clone(),
                        peer_url: format!("https://{addr}:2380"),
                        id: format!("{:016x}", 0xaaaa000000000000u64 + self.next_id),
                    });
                }
                if (kind == "worker" || args.iter().any(|a| a == "--enable-worker=true"))
                    && !self.silent_kubelets.contains(&h.hostname)
                {
                    self.nodes.insert(h.hostname.clone(), true);
                    self.clock = self.clock.max(1_800_000_000) + 1;
                    self.beats.insert(h.hostname.clone(), self.clock);
                }
                ok("")
            }
            ["stop"] => {
                if !h.running {
                    return err("Error: already stopped");
                }
                self.hosts.get_mut(host).unwrap().running = false;
                ok("")
            }
            ["reset", ..] => {
                if h.running {
                    return err(
                        "Error: another k0s process is still running, please stop k0s before reset",
                    );
                }
                self.hosts.get_mut(host).unwrap().installed = None;
                ok("")
            }
            ["token", "create", ..] => {
                let t = make_token();
                self.tokens.push(t.clone());
                ok(format!("{t}\n"))
            }
            ["token", "invalidate", ..] => ok("token abcdef deleted successfully\n"),
            ["etcd", "member-list", ..] => {
                if !h.running {
                    return err(
                        "Error: can't list etcd cluster members: context deadline exceeded",
                    );
                }
                let m: BTreeMap<String, String> = self
                    .members
                    .iter()
                    .map(|m| (m.name.clone(), m.peer_url.clone()))
                    .collect();
                ok(format!("{}\n", serde_json::json!({ "members": m })))
            }
            ["etcd", "leave", _rest @ ..] if self.refuse_leave > 0 => {
                self.refuse_leave -= 1;
                err(
                    "time=\"2026-12-02 10:00:00\" level=error msg=\"Failed to delete node from cluster\"\nError: etcdserver: unhealthy cluster",
                )
            }
            ["etcd", "leave", rest @ ..] => {
                let pa = rest
                    .iter()
                    .find_map(|a| a.strip_prefix("--peer-address="))
                    .unwrap_or("");
                match self.members.iter().position(|m| addr_of(&m.peer_url) == pa) {
                    Some(i) => {
                        self.members.remove(i);
                        ok("")
                    }
                    None => err(&format!("Error: peer not found: https://{pa}:2380")),
                }
            }
            ["kubectl", _dd, rest @ ..] => {
                if !h.running || h.unhealthy {
                    return err("The connection to the server localhost:6443 was refused");
                }
                match rest {
                    ["get", "--raw=/readyz"] => ok("ok"),
                    ["get", "nodes", "-o", "json"] => {
                        let items: Vec<_> = self.nodes.iter().map(|(n, r)| {
                            let beat = self.beats.get(n).map(|t| humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(*t as u64)).to_string());
                            serde_json::json!({
                                "metadata": {"name": n},
                                "status": {"conditions": [{"type": "Ready", "status": if *r {"True"} else {"False"}, "lastHeartbeatTime": beat}]}
                            })
                        }).collect();
                        ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
                    }
                    ["get", res, "-o", "json"] if res.starts_with("etcdmember") => {
                        let hidden: Vec<String> = self.learners.iter().filter(|(_, n)| **n > 0).map(|(a, _)| a.clone()).collect();
                        for (a, n) in self.learners.iter_mut() {
                            if *n > 0 && self.members.iter().any(|m| addr_of(&m.peer_url) == *a) {
                                *n -= 1;
                            }
                        }
                        let voters: Vec<String> = self.members.iter().map(|m| addr_of(&m.peer_url)).filter(|a| !hidden.contains(a)).collect();
                        let stale = self.stale_objects.iter().filter(|(a, (_, n))| self.relabelled_stale && *n > 0 && !voters.contains(a)).map(|(a, (id, _))| serde_json::json!({
                            "apiVersion": "etcd.k0sproject.io/v1beta1", "kind": "EtcdMember",
                            "metadata": {"name": format!("earlier-{a}")},
                            "spec": {},
                            "status": {"peerAddress": a, "memberID": id, "conditions": [{"type": "Joined", "status": "True"}]}
                        }));
                        let items: Vec<_> = stale.chain(self.members.iter().filter(|m| !m.name.is_empty() && !self.deleted_objects.contains(&m.name) && !hidden.contains(&addr_of(&m.peer_url))).map(|m| {
                            let a = addr_of(&m.peer_url);
                            let id = self.object_id_override.get(&a).cloned().unwrap_or(m.id.clone());
                            serde_json::json!({
                                "apiVersion": "etcd.k0sproject.io/v1beta1", "kind": "EtcdMember",
                                "metadata": {"name": m.name},
                                "spec": {"leave": false},
                                "status": {"peerAddress": a, "memberID": id, "reconcileStatus": "Success",
                                           "conditions": [{"type": "Joined", "status": "True"}]}
                            })
                        })).collect();
                        ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
                    }
                    ["get", "namespace", "kube-system", "-o", "json"] => ok(serde_json::json!({
                        "apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": "kube-system", "uid": self.uid.clone().unwrap_or_default()}
                    }).to_string()),
                    ["delete", object, ..] if object.contains('/') => {
                        let (res, name) = object.split_once('/').unwrap_or_default();
                        if res.starts_with("etcdmember") && self.hide_objects_after_delete {
                            self.deleted_objects.push(name.to_string());
                        }
                        ok("")
                    }
                    [verb @ ("cordon" | "uncordon"), object] => {
                        let Some(node) = object.strip_prefix("node/") else {
                            return err(&format!("Error: the fake wants node/NAME, not {object:?}"));
                        };
                        if !self.nodes.contains_key(node) {
                            return err(&format!("Error from server (NotFound): nodes \"{node}\" not found"));
                        }
                        if *verb == "cordon" {
                            self.cordoned.insert(node.to_string());
                        } else {
                            self.cordoned.remove(node);
                        }
                        ok(format!("node/{node} {verb}ed\n"))
                    }
                    ["taint", "nodes", rest @ ..] => {
                        let (object, taint) = match rest {
                            ["--overwrite", o, t] | [o, t] => (*o, *t),
                            _ => return err("Error: the fake wants taint nodes [--overwrite] node/NAME TAINT"),
                        };
                        let node = object.trim_start_matches("node/").to_string();
                        let list = self.taints.entry(node.clone()).or_default();
                        if let Some(t) = taint.strip_suffix('-') {
                            if !list.iter().any(|x| x == t) {
                                return err(&format!("error: taint \"{t}\" not found"));
                            }
                            list.retain(|x| x != t);
                            return ok(format!("node/{node} untainted\n"));
                        }
                        if !list.iter().any(|x| x == taint) {
                            list.push(taint.to_string());
                        }
                        ok(format!("node/{node} tainted\n"))
                    }
                    ["drain", args @ ..] => {
                        let last = args.last().copied().unwrap_or("");
                        let Some(node) = last.strip_prefix("node/") else {
                            return err(&format!("Error: the fake wants node/NAME, not {last:?}"));
                        };
                        if self.nodes.contains_key(node) {
                            self.cordoned.insert(node.to_string());
                            self.nodes.insert(node.to_string(), false);
                            ok(format!("node/{node} drained\n"))
                        } else {
                            err(&format!("Error from server (NotFound): nodes \"{node}\" not found"))
                        }
                    }
                    other => err(&format!("Error: the fake does not know kubectl {other:?}")),
                }
            }
            ["config", "validate", _config] => ok(""),
            // `mv -f STAGED PATH` / `rm -f STAGED` (argv[0] is the command: no k0s in it).
            ["-fT", "--", from, to] if argv[0] == "mv" => {
                let h = self.hosts.get_mut(host).unwrap();
                if let Some(f) = h.files.remove(*from) {
                    h.files.insert(to.to_string(), f);
                }
                ok("")
            }
            ["-f", path] if argv[0] == "rm" => {
                self.hosts.get_mut(host).unwrap().files.remove(*path);
                ok("")
            }
            other => err(&format!("Error: the fake does not know {other:?}")),
        }
    }
}

#[derive(Clone, Default)]
pub struct Fake {
    pub world: Arc<Mutex<World>>,
}

impl Fake {
    fn enter(&self, host: &HostId, kind: CallKind) -> Duration {
        let mut w = self.world.lock().unwrap();
        w.calls.push(Call {
            host: host.clone(),
            kind,
        });
        let n = {
            let e = w.in_flight.entry(host.clone()).or_default();
            *e += 1;
            *e
        };
        let m = w.max_in_flight.entry(host.clone()).or_default();
        *m = (*m).max(n);
        w.delay
    }
    fn leave(&self, host: &HostId) {
        *self.world.lock().unwrap().in_flight.get_mut(host).unwrap() -= 1;
    }
    pub fn calls(&self) -> Vec<Call> {
        self.world().calls.clone()
    }
    /// The fake cluster, locked.
    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap()
    }
}

impl Transport for Fake {
    async fn run(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
    ) -> Result<CommandOutput, TransportError> {
        let delay = self.enter(
            host,
            CallKind::Run {
                argv: cmd.argv.clone(),
                env: cmd.env.clone(),
                stdin: cmd.stdin.clone(),
            },
        );
        tokio::time::sleep(delay).await;
        let out = self.world.lock().unwrap().answer(host, &cmd.argv);
        self.leave(host);
        Ok(out)
    }

    async fn run_lines(
        &self,
        host: &HostId,
        cmd: RemoteCommand,
        lines: tokio::sync::mpsc::Sender<String>,
    ) -> Result<Option<i32>, TransportError> {
        let Some((after, node)) = self.world.lock().unwrap().watch.clone() else {
            return Err(TransportError::Other {
                host: host.clone(),
                message: "the fake does not stream".into(),
            });
        };
        self.world.lock().unwrap().calls.push(Call {
            host: host.clone(),
            kind: CallKind::Run {
                argv: cmd.argv.clone(),
                env: cmd.env.clone(),
                stdin: None,
            },
        });
        struct Stopped<'a>(&'a Mutex<World>);
        impl Drop for Stopped<'_> {
            fn drop(&mut self) {
                self.0.lock().unwrap().watches.1 += 1;
            }
        }
        self.world.lock().unwrap().watches.0 += 1;
        let _stopped = Stopped(&self.world);
        let register = |w: &Mutex<World>, node: &str| {
            let mut w = w.lock().unwrap();
            w.silent_kubelets.remove(node);
            w.nodes.insert(node.to_string(), true);
            w.clock += 1;
            let now = w.clock;
            w.beats.insert(node.to_string(), now);
        };
        let ends = self.world.lock().unwrap().watch_ends;
        if let Some(ends) = ends {
            let world = self.world.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                register(&world, &node);
            });
            tokio::time::sleep(ends).await;
            return Ok(Some(0));
        }
        tokio::time::sleep(after).await;
        register(&self.world, &node);
        let _ = lines.send(format!("node/{node}")).await;
        std::future::pending().await
    }

    async fn write_file(
        &self,
        host: &HostId,
        path: &str,
        data: Vec<u8>,
        attrs: &FileAttrs,
    ) -> Result<(), TransportError> {
        let mode = attrs.mode;
        let delay = self.enter(
            host,
            CallKind::Write {
                path: path.to_string(),
                data: data.clone(),
                mode,
            },
        );
        {
            let mut w = self.world.lock().unwrap();
            w.writes_in_flight += 1;
            w.max_writes_in_flight = w.max_writes_in_flight.max(w.writes_in_flight);
        }
        tokio::time::sleep(delay).await;
        {
            let mut w = self.world.lock().unwrap();
            w.writes_in_flight -= 1;
            if let Some(h) = w.hosts.get_mut(host) {
                h.files.insert(path.to_string(), (data, mode));
            }
        }
        self.leave(host);
        Ok(())
    }
}

impl HostProber for Fake {
    fn probe<'a>(
        &'a self,
        host: &'a HostId,
        known_binary: Option<&'a BinaryRecord>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Probe> + Send + 'a>> {
        let probed = match self.facts(host, known_binary) {
            Ok(facts) => Probe::Reached(Box::new(facts)),
            Err(other) => other,
        };
        Box::pin(async move { probed })
    }
}

impl Fake {
    /// What a probe of `host` shows: its facts, or the probe result that ends there.
    fn facts(
        &self,
        host: &HostId,
        known_binary: Option<&BinaryRecord>,
    ) -> Result<HostFacts, Probe> {
        let mut w = self.world.lock().unwrap();
        w.probed.push(host.clone());
        w.probed_known.push((host.clone(), known_binary.cloned()));
        let w = &mut *w;
        if w.key_changed.contains(host) {
            return Err(Probe::HostKeyChanged {
                expected: format!("SHA256:key-{}", host.address),
                offered: "SHA256:other".into(),
                bastion: None,
            });
        }
        let h = w.hosts.get(host).ok_or_else(|| Probe::Unreachable {
            error: "unreachable".into(),
        })?;
        let run = |addr: &str| w.invocations.then(|| format!("run-{addr}"));
        let controller = h.running && h.installed.as_ref().is_some_and(|i| i.0 == "controller");
        let view = controller.then(|| ClusterView {
            cluster_uid: w.uid.clone(),
            members: w
                .members
                .iter()
                .map(|m| {
                    let addr = addr_of(&m.peer_url);
                    let (id, invocation) = match w.stale_objects.get(&addr) {
                        Some((old, n)) if *n > 0 && w.relabelled_stale => (old.clone(), run(&addr)),
                        Some((old, n)) if *n > 0 => (old.clone(), run("earlier")),
                        _ => (m.id.clone(), run(&addr)),
                    };
                    MemberView {
                        name: m.name.clone(),
                        peer_url: m.peer_url.clone(),
                        member_id: Some(id),
                        invocation,
                    }
                })
                .collect(),
            nodes: vec![],
            control_nodes: vec![],
            errors: vec![],
        });
        let status = (controller && w.invocations).then(|| K0sStatus {
            invocation_id: run(&host.address),
            ..K0sStatus::running("v1.33.4+k0s.0".parse().unwrap(), 0, "controller")
        });
        let facts = HostFacts {
            machine_id: h.machine_id.clone(),
            hostname: h.hostname.clone(),
            host_key: format!("SHA256:key-{}", host.address),
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            status,
            view,
            ..Default::default()
        };
        if controller {
            for (_, n) in w.stale_objects.values_mut() {
                *n = n.saturating_sub(1);
            }
        }
        Ok(facts)
    }
}
