//! End-to-end scenarios in the lab: real sshd, real OpenSSH client, real etcd, the k0s double.
//! Each scenario starts from its own lab. They are the k0sctl #603 cases and the safety rules of
//! testdata/reference/DESIGN.md, run through the k0sform binary exactly as an operator would.

mod access;
mod adoption;
mod backup_timeout;
mod binaries;
mod bootstrap;
mod destroy;
mod files_hooks;
mod interrupts;
mod k0sctl_flags;
mod kubeconfig_backup;
mod manifests_config;
mod network;
mod replacement;
mod upgrades;

use crate::support::e2e::{self, Cluster};
use crate::support::lab::{self, LabOptions, SpecOptions};
use crate::support::prereq::require_lab;
use crate::support::states;
use std::collections::{BTreeMap, BTreeSet};

const THREE_PLUS_TWO: &[(&str, &str)] = &[
    ("c1", "controller"),
    ("c2", "controller"),
    ("c3", "controller"),
    ("w1", "worker"),
    ("w2", "worker"),
];

const THREE_PLUS_ONE: &[(&str, &str)] = &[
    ("c1", "controller"),
    ("c2", "controller"),
    ("c3", "controller"),
    ("w1", "worker"),
];

/// Controllers c1, c2 and c3 in a new lab, bootstrapped into one cluster.
fn three_controllers() -> Cluster {
    let c = Cluster::new(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
    ]);
    bootstrap(&c);
    c
}

fn peer_urls(c: &Cluster, names: &[&str]) -> BTreeSet<String> {
    names
        .iter()
        .map(|n| format!("http://{}:2380", c.lab.address(n)))
        .collect()
}

/// Every listed controller sees exactly `expected` members (by peer URL) and one identity.
#[track_caller]
fn assert_one_cluster(c: &Cluster, controllers: &[&str], expected: &[&str]) -> String {
    assert_one_cluster_of(c, controllers, peer_urls(c, expected))
}

/// Every listed controller sees exactly the members at the peer URLs `want`, and one identity.
#[track_caller]
fn assert_one_cluster_of(c: &Cluster, controllers: &[&str], want: BTreeSet<String>) -> String {
    let mut uids = BTreeSet::new();
    for name in controllers {
        let seen: BTreeSet<String> = c.members(name).into_values().collect();
        assert_eq!(seen, want, "{name} lists other members");
        uids.insert(c.uid(name));
    }
    assert_eq!(uids.len(), 1, "controllers disagree on identity: {uids:?}");
    uids.into_iter().next().unwrap_or_default()
}

/// Run `plan` with `args` and prove it changed nothing: the files k0sform could touch on every
/// host, whether k0s runs there, and etcd membership as every answering controller sees it.
#[track_caller]
fn plan_changes_nothing(c: &Cluster, args: &[&str]) -> e2e::Run {
    let world = || -> Vec<String> {
        c.lab
            .hosts()
            .iter()
            .filter(|h| c.lab.is_on(&h.name))
            .map(|h| {
                let members = c
                    .lab
                    .ssh(&h.name, "timeout 10 k0s etcd member-list 2>/dev/null");
                format!(
                    "{}\n{}\n{}",
                    h.name,
                    c.host_snapshot(&h.name),
                    lab::stdout(&members)
                )
            })
            .collect()
    };
    let before = world();
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    let r = c.run(&all);
    assert_eq!(
        before,
        world(),
        "`plan` changed a host or etcd\n{}",
        r.text()
    );
    r
}

/// Wait until the controller's API answers `/readyz` (a cluster started by hand).
fn wait_api_ready(c: &Cluster, name: &str) {
    c.eventually(60, &format!("{name} ready"), || {
        c.lab
            .ssh(
                name,
                "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get --raw=/readyz",
            )
            .status
            .success()
    });
}

/// Point the spec of `hosts` at v1.33.5 (the double of that version as k0sBinaryPath) and
/// plan: every host upgrades, and planning changed nothing.
#[track_caller]
fn plan_upgrade_to_v1_33_5(c: &mut Cluster, hosts: &[&str]) -> e2e::Run {
    let newer = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(newer);
    c.write_spec(hosts);
    let r = plan_changes_nothing(c, &[]);
    r.expect(0)
        .contains("v1.33.4+k0s.0 → v1.33.5+k0s.0")
        .contains(&format!("Plan: 0 to add, {} to change", hosts.len()));
    r
}

fn bootstrap(c: &Cluster) {
    c.apply().contains("Apply complete");
}

/// The ID etcd itself gives member `name` (hex, as k0s writes it), asked with etcdctl on `via`.
fn etcd_member_id(c: &Cluster, via: &str, name: &str) -> String {
    let out = c.lab.ssh_ok(
        via,
        &format!(
            "ETCDCTL_API=3 etcdctl --endpoints=http://{}:2379 member list -w json",
            c.lab.address(via)
        ),
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("etcdctl JSON");
    let m = v["members"].as_array().expect("members");
    let id = m
        .iter()
        .find(|x| x["name"] == name)
        .expect("a member so named")["ID"]
        .as_u64()
        .expect("a numeric ID");
    format!("{id:x}")
}

/// Start `apply` with `args`, and kill -9 it as soon as its progress shows `marker`. Returns
/// whether the marker was seen before the run ended on its own.
fn kill_apply_at(c: &Cluster, args: &[&str], marker: &str) -> bool {
    use std::io::BufRead;
    let mut child = c
        .command(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn apply");
    let out = child.stdout.take().expect("stdout");
    let mut seen = false;
    for line in std::io::BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        if line.contains(marker) {
            seen = true;
            let _ = child.kill(); // SIGKILL
            break;
        }
    }
    let _ = child.wait();
    seen
}

/// c1, c2 and c3 built as k0sctl builds controllers: `config(i)` as /etc/k0s/k0s.yaml on the
/// i-th, k0sctl's `k0s install controller` lines (`cluster/host.go` `K0sInstallFlags`), c2 and
/// c3 joined one at a time with a controller token in /etc/k0s/k0stoken.
fn controllers_as_k0sctl(c: &Cluster, config: &dyn Fn(usize) -> String) {
    let write = |host: &str, path: &str, text: &str| {
        c.lab.ssh_ok(
            host,
            &format!("mkdir -p /etc/k0s && printf '%s' '{text}' > {path} && chmod 600 {path}"),
        );
    };
    write("c1", "/etc/k0s/k0s.yaml", &config(0));
    c.lab.ssh_ok(
        "c1",
        "k0s config validate --config=/etc/k0s/k0s.yaml && k0s install controller --data-dir=/var/lib/k0s --config=/etc/k0s/k0s.yaml && k0s start",
    );
    wait_api_ready(c, "c1");
    for (i, h) in [(1, "c2"), (2, "c3")] {
        let token = c.lab.ssh_ok(
            "c1",
            "k0s token create --role=controller --expiry=30m0s --data-dir=/var/lib/k0s",
        );
        write(h, "/etc/k0s/k0stoken", token.trim());
        write(h, "/etc/k0s/k0s.yaml", &config(i));
        c.lab.ssh_ok(
            h,
            "k0s install controller --data-dir=/var/lib/k0s --token-file=/etc/k0s/k0stoken --config=/etc/k0s/k0s.yaml && k0s start",
        );
        c.eventually(60, "controller joined", || c.members("c1").len() == i + 1);
    }
}

/// [`join_worker_as_k0sctl`] with `node_ip` (the private address k0sctl found) as `--node-ip`.
fn join_worker_as_k0sctl_at(c: &Cluster, name: &str, flags: &str, node_ip: &str) {
    let token = c.lab.ssh_ok(
        "c1",
        "k0s token create --role=worker --expiry=10m0s --data-dir=/var/lib/k0s",
    );
    c.lab.ssh_ok(
        name,
        &format!(
            "mkdir -p /etc/k0s && printf '%s' '{}' > /etc/k0s/k0stoken && chmod 600 /etc/k0s/k0stoken && k0s install worker {flags}--data-dir=/var/lib/k0s --token-file=/etc/k0s/k0stoken '--kubelet-extra-args=--node-ip={node_ip}' && k0s start",
            token.trim(),
        ),
    );
    c.eventually(60, &format!("{name} Ready"), || {
        c.nodes("c1").get(name) == Some(&true)
    });
}

/// The kubeconfig's one cluster, user and server, read from YAML.
fn kubeconfig_parts(text: &str) -> (String, String, String, String) {
    let v: serde_json::Value = serde_saphyr::from_str(text).expect("kubeconfig YAML");
    let s = |p: &str| {
        v.pointer(p)
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_string()
    };
    (
        s("/clusters/0/name"),
        s("/users/0/name"),
        s("/clusters/0/cluster/server"),
        s("/users/0/user/client-key-data"),
    )
}

fn mode_of(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).expect("file").permissions().mode() & 0o777
}

/// The archive a backup wrote, from its `<sha256>  <path>` line.
fn backup_line(r: &e2e::Run) -> (String, std::path::PathBuf) {
    let line = r.stdout.lines().last().unwrap_or("");
    let (sha, path) = line.split_once("  ").expect("`<sha256>  <path>` on stdout");
    (sha.to_string(), std::path::PathBuf::from(path))
}

/// Write the spec of `hosts` with `options:` YAML (indented under `spec:` here).
fn write_spec_with_options(c: &Cluster, hosts: &[&str], options: &str) {
    c.write_spec(hosts);
    let text = std::fs::read_to_string(&c.spec).expect("spec");
    let block: String = std::iter::once("  options:\n".to_string())
        .chain(options.lines().map(|l| format!("    {l}\n")))
        .collect();
    let with = text.replacen("spec:\n", &format!("spec:\n{block}"), 1);
    assert_ne!(text, with, "the lab spec has a spec: line");
    std::fs::write(&c.spec, with).expect("spec");
}

/// The Node operations the double logged on a controller: (verb, node, outcome) in order.
fn node_ops(c: &Cluster, via: &str) -> Vec<(String, String, String)> {
    kubectl_log(c, via)
        .into_iter()
        .filter_map(|w| Some((w.get(1)?.clone(), w.get(2)?.clone(), w.last()?.clone())))
        .collect()
}

/// The lines of the double's kubectl log on `via` (/var/lib/k0s/logs/kubectl.log), each as
/// its words.
fn kubectl_log(c: &Cluster, via: &str) -> Vec<Vec<String>> {
    let out = c.lab.ssh(via, "cat /var/lib/k0s/logs/kubectl.log");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// Every host runs `version`, and nothing is left staged beside its binary.
#[track_caller]
fn runs_swapped_in(c: &Cluster, hosts: &[&str], version: &str) {
    for h in hosts {
        assert_eq!(c.lab.ssh_ok(h, "k0s version").trim(), version, "{h}");
        c.lab.ssh_ok(h, "test ! -e /usr/local/bin/k0s.k0sform-new");
    }
}

/// Start `apply` with `args` and kill -9 it as soon as `cond` holds (polled). Returns whether
/// it held before the run ended on its own.
fn kill_apply_when(c: &Cluster, args: &[&str], mut cond: impl FnMut() -> bool) -> bool {
    let mut child = c
        .command(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn apply");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut seen = false;
    while std::time::Instant::now() < end {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        if cond() {
            seen = true;
            let _ = child.kill(); // SIGKILL
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

/// Write `cfg` as s1's k0s.yaml (None: it is there already), install and start `s1` as k0sctl
/// does (`--single=true`), check it runs `storage`, adopt it with `apply -refresh-only`: the
/// next plan changes nothing, and neither did adopting.
fn start_single_as_k0sctl_then_adopt(c: &Cluster, cfg: Option<&str>, storage: &str) {
    if let Some(cfg) = cfg {
        c.lab.ssh_ok(
            "s1",
            &format!("mkdir -p /etc/k0s && printf '%s' '{cfg}' > /etc/k0s/k0s.yaml && chmod 600 /etc/k0s/k0s.yaml"),
        );
    }
    c.lab.ssh_ok(
        "s1",
        "k0s config validate --config=/etc/k0s/k0s.yaml && k0s install controller --data-dir=/var/lib/k0s --single=true --config=/etc/k0s/k0s.yaml && k0s start",
    );
    wait_api_ready(c, "s1");
    c.eventually(60, "s1 Ready", || c.nodes("s1").get("s1") == Some(&true));
    let status = c.lab.ssh_ok("s1", "k0s status -o json");
    let st: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(
        st["ClusterConfig"]["spec"]["storage"]["type"], storage,
        "{status}"
    );
    let uid = c.uid("s1");
    let before = c.host_snapshot("s1");
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
    assert_eq!(c.state_json()["cluster"]["uid"], uid.as_str());
    plan_changes_nothing(c, &["-detailed-exitcode"])
        .expect(0)
        .contains("No changes");
    assert_eq!(before, c.host_snapshot("s1"), "adoption changed the host");
}

/// The command lines of the Node watches (`kubectl get nodes --watch-only`) running on a host, as
/// it sees them (its /proc shows its own processes only).
fn node_watches_on(c: &Cluster, host: &str) -> Vec<String> {
    c.lab
        .exec_ok(
            host,
            "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline 2>/dev/null; echo; done",
        )
        .lines()
        .filter(|l| l.contains("--watch-only"))
        .map(str::to_string)
        .collect()
}

/// The `begin` event of an `apply -json` run's stdout.
fn begin_event(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "begin")
        .expect("a begin event")
}

/// A controller c1 and a worker w1.
const C1_W1: &[(&str, &str)] = &[("c1", "controller"), ("w1", "worker")];

/// c1 and w1 in a new lab, the spec written with these options; nothing applied.
fn c1_w1_with(spec_opts: SpecOptions) -> Cluster {
    Cluster::with(C1_W1, LabOptions::default(), spec_opts)
}

/// c1 and w1 in a new lab, the spec naming k0s `version`; nothing applied.
fn c1_w1_at(version: &str) -> Cluster {
    c1_w1_with(SpecOptions {
        k0s_version: Some(version.into()),
        ..SpecOptions::default()
    })
}

/// `hosts` in a new lab getting k0s from the lab's release mirror (`from_release`, with the
/// other spec options as given), `versions` published there and k0sform's release and
/// version lookups pointed at it.
fn from_mirror(
    hosts: &[(&str, &str)],
    spec_opts: SpecOptions,
    versions: &[&str],
) -> (Cluster, lab::Mirror) {
    let mut c = Cluster::with(
        hosts,
        LabOptions::default(),
        SpecOptions {
            from_release: true,
            ..spec_opts
        },
    );
    let mirror = c.lab.start_mirror();
    for v in versions {
        mirror.publish(v, &c.lab.k0s_double_with_version(v));
    }
    c.use_mirror(&mirror);
    (c, mirror)
}

/// c1 and w1 bootstrapped on v1.33.4+k0s.0, w1's Node Ready.
fn c1_w1_on_v1_33_4_ready() -> Cluster {
    let c = c1_w1_at("v1.33.4+k0s.0");
    bootstrap(&c);
    c.eventually(60, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    c
}

/// Point the spec of `hosts` at k0s `version`, the double of that version as k0sBinaryPath.
fn to_k0s_version(c: &mut Cluster, version: &str, hosts: &[&str]) {
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version(version));
    c.spec_opts.k0s_version = Some(version.parse().unwrap());
    c.write_spec(hosts);
}

/// A lab of c1, w1 and w2 with c1 bootstrapped alone: the workers are still to join.
fn c1_up_w1_w2_to_join() -> Cluster {
    let c = Cluster::new(&[("c1", "controller"), ("w1", "worker"), ("w2", "worker")]);
    c.write_spec(&["c1"]);
    bootstrap(&c);
    c
}
