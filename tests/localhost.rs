//! `localhost` hosts (k0sctl's `localhost: {enabled: true}`, issue 30): the spec loads them as
//! rig reports them (127.0.0.1), and in the lab k0sform runs INSIDE a host (its own mount, PID
//! and UTS namespaces: /etc/machine-id, /usr/local/bin, /etc/k0s, /var/lib/k0s, /root, /srv and
//! /tmp are that host's) with a spec naming that host `localhost`, so "this machine" is the lab
//! host and its commands run there without SSH.

use crate::support::lab::{self, Lab, LabOptions};
use crate::support::prereq::require_lab;
use k0sform::spec::{self, LoadOptions, Role};
use std::path::{Path, PathBuf};

const HEAD: &str = "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata:\n  name: lab\nspec:\n  hosts:\n";

fn load(text: &str) -> Result<spec::Loaded, spec::Diagnostics> {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("k0sctl.yaml");
    std::fs::write(&p, text).expect("write spec");
    let env = |_: &str| None;
    spec::load_with(
        &[p],
        &LoadOptions {
            env: &env,
            stdin: None,
        },
    )
}

/// Both of k0sctl's spellings load; the host is 127.0.0.1 port 22, as rig's localhost
/// connection reports it (`IPAddress`), and `privateAddress`/`privateInterface` are kept.
#[test]
fn localhost_hosts_load_as_127_0_0_1() {
    for form in ["localhost: true", "localhost:\n        enabled: true"] {
        let text = format!(
            "{HEAD}    - role: controller+worker\n      {form}\n      privateAddress: 10.0.0.5\n      privateInterface: eth1\n    - role: worker\n      ssh:\n        address: 10.0.0.6\n  k0s:\n    version: v1.33.4+k0s.0\n"
        );
        let loaded = load(&text).unwrap_or_else(|e| panic!("{form}: {e}"));
        let h = &loaded.spec.hosts[0];
        assert!(h.ssh.localhost, "{form}");
        assert_eq!((h.ssh.address.as_str(), h.ssh.port), ("127.0.0.1", 22));
        assert_eq!(h.role, Role::ControllerWorker);
        assert_eq!(h.private_address.as_deref(), Some("10.0.0.5"));
        assert_eq!(h.private_interface.as_deref(), Some("eth1"));
        assert!(!loaded.spec.hosts[1].ssh.localhost);
    }
    // `enabled: false` is no localhost host: the host then has no connection.
    let e = load(&format!(
        "{HEAD}    - role: single\n      localhost:\n        enabled: false\n  k0s:\n    version: v1.33.4+k0s.0\n"
    ))
    .expect_err("no connection");
    assert!(e.to_string().contains("no connection"), "{e}");
}

/// A localhost host next to an SSH host at 127.0.0.1 port 22 is the same host twice.
#[test]
fn a_localhost_host_and_an_ssh_host_on_127_0_0_1_collide() {
    let e = load(&format!(
        "{HEAD}    - role: controller\n      ssh:\n        address: 127.0.0.1\n    - role: worker\n      localhost: true\n  k0s:\n    version: v1.33.4+k0s.0\n"
    ))
    .expect_err("duplicate");
    assert!(
        e.to_string()
            .contains("spec.hosts[1].localhost: duplicate host 127.0.0.1"),
        "{e}"
    );
}

/// A state cannot make a host this machine: `localhost` in a recorded `access` (a host that
/// left the spec) is dropped, with a note, and the host is reached over SSH at its address.
#[test]
fn a_state_cannot_make_a_host_local() {
    let loaded = load(&format!(
        "{HEAD}    - role: controller\n      ssh:\n        address: 10.0.0.1\n  k0s:\n    version: v1.33.4+k0s.0\n"
    ))
    .expect("spec");
    let host: k0sform::state::HostState = serde_json::from_value(serde_json::json!({
        "address": "10.0.0.9", "port": 22, "role": "worker",
        "machine_id": "0123456789abcdef0123456789abcdef", "host_key": "local",
        "access": {
            "ssh": {"address": "10.0.0.9", "port": 22, "user": "root", "key_path": null,
                    "config_path": null, "options": {}, "bastion": null, "host_key": null,
                    "openssh": false, "localhost": true},
            "k0s_install_path": "/usr/local/bin/k0s", "data_dir": "/var/lib/k0s"
        }
    }))
    .expect("host state");
    let reach = k0sform::state::access::reach(&host, &loaded.spec).expect("valid access");
    assert!(!reach.ssh.localhost);
    assert_eq!(reach.ssh.address, "10.0.0.9");
    assert_eq!(reach.dropped.len(), 1, "{:?}", reach.dropped);
    assert!(
        reach.dropped[0].starts_with(
            "access.ssh.localhost is ignored: only the spec can make a host this machine"
        ),
        "{:?}",
        reach.dropped
    );
}

// ---- the lab: k0sform inside a host ----

/// The lab host's private folder k0sform works in (spec, state, keys, binaries), as the host
/// sees it, and where that is on this machine.
const WORK: &str = "/srv/k0sform";

/// The k0sform binary under test, copied into the host: the host sees this machine's files
/// except its private folders (/tmp among them, where a checkout may well be), so the binary
/// cargo built is not necessarily visible in there.
const BIN: &str = "/srv/k0sform/bin/k0sform";

struct Inside<'a> {
    lab: &'a Lab,
    host: String,
}

impl<'a> Inside<'a> {
    fn new(lab: &'a Lab, host: &str) -> Inside<'a> {
        let i = Inside {
            lab,
            host: host.to_string(),
        };
        i.lab
            .exec_ok(host, &format!("mkdir -p {WORK} && chmod 755 {WORK}"));
        i.copy(Path::new(env!("CARGO_BIN_EXE_k0sform")), BIN);
        i
    }

    /// `path` inside host `name` (under /srv or /root), as a path on this machine.
    fn outside(&self, name: &str, path: &str) -> PathBuf {
        let (disk, rest) = path
            .strip_prefix("/srv/")
            .map(|r| ("srv", r))
            .or_else(|| path.strip_prefix("/root/").map(|r| ("root", r)))
            .expect("a path under /srv or /root");
        self.lab
            .dir()
            .join("hosts")
            .join(name)
            .join("disk")
            .join(disk)
            .join(rest)
    }

    /// Put `data` at `path` (under /srv or /root) inside the host k0sform runs in.
    fn put(&self, path: &str, data: &[u8], mode: u32) {
        let p = self.outside(&self.host, path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, data).expect("write");
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .expect("chmod");
    }

    /// Copy the local file `from` to `path` inside the host.
    fn copy(&self, from: &Path, path: &str) {
        let data = std::fs::read(from).expect("read");
        self.put(path, &data, 0o755);
    }

    fn spec(&self, hosts: &str, version: Option<&str>) {
        let version = version
            .map(|v| format!("    version: {v}\n"))
            .unwrap_or_default();
        let text = format!("{HEAD}{hosts}  k0s:\n{version}    config: {{}}\n");
        self.put(&format!("{WORK}/k0sctl.yaml"), text.as_bytes(), 0o644);
    }

    /// Run k0sform inside the host with `args` after `-c SPEC -state STATE`, as `user` (None:
    /// root). Its release lookups go to a closed loopback port: nothing leaves the machine.
    fn k0sform_as(&self, user: Option<&str>, args: &str) -> crate::support::e2e::Run {
        let bin = BIN;
        let line = format!(
            "cd {WORK} && {} env NO_COLOR=1 HOME={WORK} XDG_CACHE_HOME={WORK}/cache \
             K0SFORM_K0S_DOWNLOAD_URL=http://127.0.0.1:9/releases K0SFORM_K0S_VERSION_URL=http://127.0.0.1:9 \
             {bin} -c {WORK}/k0sctl.yaml -state {WORK}/k0sform.state.json -no-color {args}",
            user.map(|u| format!("runuser -u {u} --"))
                .unwrap_or_default()
        );
        let o = self.lab.exec(&self.host, &line);
        crate::support::e2e::Run {
            code: o.status.code().unwrap_or(-1),
            stdout: lab::stdout(&o),
            stderr: lab::stderr(&o),
        }
    }

    fn k0sform(&self, args: &str) -> crate::support::e2e::Run {
        self.k0sform_as(None, args)
    }

    fn state(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(
            self.outside(&self.host, &format!("{WORK}/k0sform.state.json")),
        )
        .expect("state file");
        serde_json::from_str(&text).expect("state JSON")
    }

    fn k0s_version(&self) -> String {
        self.lab
            .exec_ok(&self.host, "/usr/local/bin/k0s version")
            .trim()
            .to_string()
    }
}

/// The host entry of a spec for a `localhost` host with `role` and the k0s binary at `bin`
/// (inside the host).
fn local_host(role: &str, bin: &str, extra: &str) -> String {
    format!(
        "    - role: {role}\n      localhost:\n        enabled: true\n      k0sBinaryPath: {bin}\n{extra}"
    )
}

/// k0sctl's common localhost use: one `controller+worker` on the machine it runs on. Applied
/// without SSH (the host's sshd sees no connection), recorded with its machine-id and no host
/// key, planned again with no changes, upgraded, and destroyed.
#[test]
fn a_localhost_controller_worker_is_applied_upgraded_and_destroyed() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller")]);
    let i = Inside::new(&lab, "c1");
    i.copy(&lab::k0s_double_path(), &format!("{WORK}/k0s"));
    // The host's own address: a lab host sharing this machine's network namespace has the lab
    // address as its address (the double listens there, as k0s on its first public address);
    // k0sctl's detection would find it on a real machine (README "Hosts with their own network").
    let own = format!("      privateAddress: {}\n", i.lab.address("c1"));
    i.spec(
        &local_host("controller+worker", &format!("{WORK}/k0s"), &own),
        Some("v1.33.4+k0s.0"),
    );
    let sshd_before = i.lab.sshd_log("c1").matches("Accepted publickey").count();

    // No SSH key to trust on first use: nothing for -trust-new-host-keys=false to refuse.
    let plan = i.k0sform("plan -trust-new-host-keys=false");
    plan.expect(0);
    assert!(!plan.text().contains("First contact"), "{}", plan.text());
    plan.contains(
        "localhost: controller+worker (127.0.0.1) is this machine; its commands run here as root",
    );
    assert_eq!(
        plan.text().matches("is this machine").count(),
        1,
        "{}",
        plan.text()
    );
    i.k0sform("apply -auto-approve").expect(0);
    assert_eq!(i.k0s_version(), "v1.33.4+k0s.0");
    let st = i.state();
    let h = &st["hosts"][0];
    assert_eq!(h["address"], "127.0.0.1");
    assert_eq!(h["host_key"], "local");
    assert!(h.get("host_public_key").is_none(), "{h}");
    assert_eq!(h["access"]["ssh"]["localhost"], true);
    let mid = i.lab.exec_ok("c1", "cat /etc/machine-id");
    assert_eq!(h["machine_id"], mid.trim());
    assert_eq!(
        i.lab.sshd_log("c1").matches("Accepted publickey").count(),
        sshd_before,
        "k0sform connected over SSH"
    );

    i.k0sform("plan -detailed-exitcode").expect(0);

    // kubeconfig and backup go through the same link: the API at the controller's address,
    // 127.0.0.1, as k0sctl's `KubeAPIURL` (leader `Address()`).
    i.k0sform("kubeconfig")
        .expect(0)
        .contains("server: \"https://127.0.0.1:6443\"");
    i.lab.exec_ok("c1", &format!("mkdir -p {WORK}/backups"));
    i.k0sform(&format!("backup -out {WORK}/backups")).expect(0);
    let archives = i.lab.exec_ok("c1", &format!("ls {WORK}/backups"));
    assert!(archives.contains("k0s_backup"), "{archives}");

    // An upgrade: another binary with a newer version.
    let newer = i.lab.k0s_double_with_version("v1.33.5+k0s.0");
    i.copy(&newer, &format!("{WORK}/k0s-new"));
    i.spec(
        &local_host("controller+worker", &format!("{WORK}/k0s-new"), &own),
        Some("v1.33.5+k0s.0"),
    );
    i.k0sform("apply -auto-approve").expect(0);
    assert_eq!(i.k0s_version(), "v1.33.5+k0s.0");
    i.k0sform("plan -detailed-exitcode").expect(0);

    // Identity: with no SSH host key, the machine-id is the host. Another one is refused, as a
    // changed host key is for an SSH host, until -replace names it.
    i.lab.exec_ok(
        "c1",
        "echo 0123456789abcdef0123456789abcdef > /etc/machine-id",
    );
    i.k0sform("plan")
        .expect(3)
        .contains("is not the recorded machine (machine-id changed)")
        .contains("run with -replace 127.0.0.1");
    // (-replace then plans a replacement; of the only controller that is refused for want of
    // another controller to remove its member through, as for an SSH host.)
    i.lab
        .exec_ok("c1", &format!("echo {} > /etc/machine-id", mid.trim()));
    i.k0sform("plan -detailed-exitcode").expect(0);

    i.k0sform("destroy -auto-approve").expect(0);
    let left = i.lab.exec(
        "c1",
        "test -e /usr/local/bin/k0s || test -e /etc/k0s/k0s.yaml",
    );
    assert!(!left.status.success(), "k0s left on the host after destroy");
}

/// Not root: commands that need root go through `sudo -n` (rig's `RegisterSudo`), and a user
/// without a passwordless sudo right gets the same `Sudo` error as over SSH.
#[test]
fn a_localhost_host_runs_root_commands_through_sudo() {
    require_lab!();
    let lab = Lab::create_with(
        &[("c1", "controller")],
        LabOptions::default().sudo_user("c1"),
    );
    let i = Inside::new(&lab, "c1");
    i.copy(&lab::k0s_double_path(), &format!("{WORK}/k0s"));
    let own = format!("      privateAddress: {}\n", i.lab.address("c1"));
    i.spec(&local_host("single", &format!("{WORK}/k0s"), &own), None);
    i.lab
        .exec_ok("c1", &format!("chown -R {} {WORK}", lab::SUDO_USER));
    let sudo = Some(lab::SUDO_USER);
    i.k0sform_as(sudo, "plan")
        .expect(0)
        .contains("its commands run here through `sudo -n`");
    i.k0sform_as(sudo, "apply -auto-approve").expect(0);
    assert_eq!(i.k0s_version(), "v1.33.4+k0s.0");
    // Placed by root, through sudo.
    assert_eq!(
        i.lab
            .exec_ok("c1", "stat -c %U /usr/local/bin/k0s /etc/k0s/k0s.yaml"),
        "root\nroot\n"
    );
    i.k0sform_as(sudo, "plan -detailed-exitcode").expect(0);

    // `nobody` has no sudo right: the probe stops with the Sudo error, nothing runs.
    i.lab.exec_ok("c1", "mkdir -p /srv/nobody && cp /srv/k0sform/k0sctl.yaml /srv/nobody/ && chown -R nobody /srv/nobody");
    let bin = BIN;
    let o = i.lab.exec(
        "c1",
        &format!(
            "cd /srv/nobody && runuser -u nobody -- env NO_COLOR=1 HOME=/srv/nobody XDG_CACHE_HOME=/srv/nobody/cache \
             {bin} -c k0sctl.yaml -state k0sform.state.json -no-color plan"
        ),
    );
    let text = format!("{}{}", lab::stdout(&o), lab::stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("cannot run commands as root with `sudo -n`"),
        "{text}"
    );
}

/// One run, two links: the `localhost` controller's commands run here, the worker is reached
/// over SSH (its key recorded), and joins the controller at its private address.
#[test]
fn a_localhost_controller_and_an_ssh_worker_in_one_run() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker")]);
    let i = Inside::new(&lab, "c1");
    i.copy(&lab::k0s_double_path(), &format!("{WORK}/k0s"));
    let key = std::fs::read(i.lab.key_path()).expect("lab key");
    i.put(&format!("{WORK}/id"), &key, 0o600);
    let w1 = i.lab.host("w1");
    let hosts = format!(
        "{}    - role: worker\n      ssh:\n        address: {}\n        port: {}\n        user: root\n        keyPath: {WORK}/id\n      k0sBinaryPath: {WORK}/k0s\n",
        local_host(
            "controller",
            &format!("{WORK}/k0s"),
            &format!("      privateAddress: {}\n", i.lab.address("c1"))
        ),
        w1.address,
        w1.port
    );
    i.spec(&hosts, Some("v1.33.4+k0s.0"));
    let c1_sshd = i.lab.sshd_log("c1").matches("Accepted publickey").count();
    i.k0sform("apply -auto-approve").expect(0);
    let st = i.state();
    let recorded: Vec<(String, String)> = st["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| {
            (
                h["address"].as_str().unwrap_or_default().to_string(),
                h["host_key"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            ("127.0.0.1".to_string(), "local".to_string()),
            (w1.address.clone(), w1.host_key_fingerprint.clone()),
        ]
    );
    assert!(
        i.lab.sshd_log("w1").contains("Accepted publickey"),
        "the worker was not reached over SSH"
    );
    assert_eq!(
        i.lab.sshd_log("c1").matches("Accepted publickey").count(),
        c1_sshd,
        "the localhost controller was reached over SSH"
    );
    assert_eq!(
        i.lab.exec_ok("w1", "/usr/local/bin/k0s version").trim(),
        "v1.33.4+k0s.0"
    );
    i.k0sform("plan -detailed-exitcode").expect(0);
}

/// A host k0sform recorded over SSH that the spec now names `localhost` (k0sform now runs on
/// it) is the same machine, found by its machine-id: its record moves to 127.0.0.1, nothing is
/// reset, removed or added. (Its k0s.yaml gains the SAN 127.0.0.1, as k0sctl adds every
/// controller's address: a reconfigure.)
#[test]
fn a_host_recorded_over_ssh_becomes_the_localhost_host() {
    require_lab!();
    let cluster = crate::support::e2e::Cluster::new(&[("c1", "controller")]);
    cluster.apply();
    let state = std::fs::read(&cluster.state).expect("state");
    let i = Inside::new(&cluster.lab, "c1");
    i.put(&format!("{WORK}/k0sform.state.json"), &state, 0o600);
    i.copy(&lab::k0s_double_path(), &format!("{WORK}/k0s"));
    let own = format!("      privateAddress: {}\n", i.lab.address("c1"));
    i.spec(
        &local_host("controller", &format!("{WORK}/k0s"), &own),
        None,
    );

    let plan = i.k0sform("plan");
    plan.expect(0)
        .contains("has moved to 127.0.0.1: it answers with the machine-id")
        .contains("(reached on this machine, without SSH now)")
        .contains("machine-id kept)");
    assert!(!plan.text().contains("host key kept"), "{}", plan.text());
    for never in [
        "will be removed",
        "will be added",
        "will be replaced",
        "reset",
    ] {
        assert!(!plan.text().contains(never), "{never}:\n{}", plan.text());
    }
    i.k0sform("apply -auto-approve").expect(0);
    let st = i.state();
    let hosts = st["hosts"].as_array().expect("hosts");
    assert_eq!(hosts.len(), 1, "{st}");
    assert_eq!(hosts[0]["address"], "127.0.0.1");
    assert_eq!(
        hosts[0]["machine_id"],
        i.lab.exec_ok("c1", "cat /etc/machine-id").trim()
    );
    // Recorded as reached locally now: no SSH key kept beside it.
    assert_eq!(hosts[0]["host_key"], "local");
    assert!(hosts[0].get("host_public_key").is_none(), "{st}");
    i.k0sform("plan -detailed-exitcode").expect(0);
}

/// The reverse: a host recorded as the localhost host that a spec (run elsewhere) reaches over
/// SSH. It has no SSH key on record, so its key is a first contact (shown, and refused with
/// -trust-new-host-keys=false), and its machine-id moves the record to its SSH address.
#[test]
fn the_localhost_host_recorded_is_reached_over_ssh_later() {
    require_lab!();
    let cluster = crate::support::e2e::Cluster::new(&[("c1", "controller")]);
    let i = Inside::new(&cluster.lab, "c1");
    i.copy(&lab::k0s_double_path(), &format!("{WORK}/k0s"));
    let own = format!("      privateAddress: {}\n", i.lab.address("c1"));
    i.spec(
        &local_host("controller", &format!("{WORK}/k0s"), &own),
        None,
    );
    i.k0sform("apply -auto-approve").expect(0);
    let state =
        std::fs::read(i.outside("c1", &format!("{WORK}/k0sform.state.json"))).expect("state");
    std::fs::write(&cluster.state, state).expect("state outside");

    let c1 = cluster.lab.host("c1");
    cluster
        .run(&["plan", "-trust-new-host-keys=false"])
        .expect(3)
        .contains(&format!(
            "{}: offers {}",
            c1.address, c1.host_key_fingerprint
        ));
    let plan = cluster.run(&["plan"]);
    plan.expect(0)
        .contains(&format!("has moved to {}", c1.address))
        .contains("(reached over SSH now)")
        .contains("machine-id kept)")
        .contains("First contact");
    assert!(!plan.text().contains("host key kept"), "{}", plan.text());
    for never in ["will be removed", "will be added", "will be replaced"] {
        assert!(!plan.text().contains(never), "{never}:\n{}", plan.text());
    }
    cluster.apply();
    let h = cluster
        .state_host("c1")
        .expect("c1 recorded at its SSH address");
    assert_eq!(h["host_key"], c1.host_key_fingerprint.as_str());
    cluster.run(&["plan", "-detailed-exitcode"]).expect(0);
}
