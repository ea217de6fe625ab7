//! Test lab for end-to-end tests: simulated hosts (a loopback address each, a real sshd, own
//! PID/mount/UTS namespaces and disk) managed by `testdata/lab/lab.py`, and the k0s test double
//! `testdata/lab/k0s`. Needs root: tests using it begin with `require_lab!();`.
//!
//! A `Lab` is torn down when dropped (also while a test panics); set `K0SFORM_LAB_KEEP=1` to keep
//! the hosts running and the folder on disk for debugging (`lab.py teardown DIR` later).
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The login user with passwordless sudo on hosts created with `LabOptions::sudo_users`.
pub const SUDO_USER: &str = "k0slab";

/// One simulated host as recorded in `lab.json` (re-read on every call, so it follows wipes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabHost {
    pub name: String,
    pub role: String,
    pub address: String,
    pub port: u16,
    pub host_key_fingerprint: String,
    pub machine_id: String,
    pub sudo_user: Option<String>,
    /// `private`, `nat` or `dual` for a host in its own network namespace
    /// (`testdata/lab/labnet.py`), `None` for one sharing this machine's.
    pub net: Option<String>,
    /// The host's address on the lab's private bridge (10.244.K.x), for `net` hosts.
    pub private_address: Option<String>,
    /// The host's address on the lab's 'public' bridge (100.64.K.x), for `dual` hosts.
    pub public_address: Option<String>,
}

/// Extra lab features: which hosts accept the sudo user, which host is the bastion, which
/// hosts have their own network namespace.
#[derive(Debug, Clone, Default)]
pub struct LabOptions {
    pub sudo_users: Vec<String>,
    pub bastion: Option<String>,
    /// (host, kind): `private` (SSH at its private address), `nat` (SSH at a loopback address
    /// this machine DNATs to the private one), `dual` ('public' eth0 with SSH, private eth1).
    pub nets: Vec<(String, String)>,
}

impl LabOptions {
    pub fn sudo_user(mut self, host: &str) -> Self {
        self.sudo_users.push(host.to_string());
        self
    }

    pub fn bastion(mut self, host: &str) -> Self {
        self.bastion = Some(host.to_string());
        self
    }

    /// Host `host` in its own network namespace of kind `kind` (`private`, `nat`, `dual`).
    pub fn net(mut self, host: &str, kind: &str) -> Self {
        self.nets.push((host.to_string(), kind.to_string()));
        self
    }
}

/// How `Lab::write_spec_with` writes the k0sctl.yaml.
#[derive(Debug, Clone)]
pub struct SpecOptions {
    /// `metadata.name`.
    pub cluster_name: String,
    /// Log in as the sudo user (`k0slab`) instead of root.
    pub sudo_user: bool,
    /// Reach hosts through the lab's bastion (`ssh.bastion`).
    pub via_bastion: bool,
    /// Pin each host key with k0sform's `ssh.hostKey`.
    pub pin_host_keys: bool,
    /// Write `privateAddress: <address>` (k0sctl uses it as etcd peer address).
    pub private_address: bool,
    /// `k0sBinaryPath`; `None` = the double in testdata/lab.
    pub k0s_binary: Option<PathBuf>,
    /// Write no `k0sBinaryPath`: hosts get k0s from a release (a `Mirror`).
    pub from_release: bool,
    /// `spec.k0s.version`.
    pub k0s_version: Option<String>,
    /// YAML placed under `spec.k0s.config` (unindented; it is indented here).
    pub k0s_config: Option<String>,
    /// More fields of a host, by lab name: YAML lines as under `- role:` (unindented; they are
    /// indented here), e.g. `hooks:`.
    pub host_yaml: std::collections::BTreeMap<String, String>,
}

impl Default for SpecOptions {
    fn default() -> Self {
        SpecOptions {
            cluster_name: "lab".to_string(),
            sudo_user: false,
            via_bastion: false,
            pin_host_keys: false,
            private_address: true,
            k0s_binary: None,
            from_release: false,
            k0s_version: None,
            k0s_config: None,
            host_yaml: Default::default(),
        }
    }
}

impl SpecOptions {
    pub fn pin_host_keys(mut self, yes: bool) -> Self {
        self.pin_host_keys = yes;
        self
    }
}

pub struct Lab {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    torn_down: bool,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Path of `testdata/lab/lab.py`.
pub fn lab_py() -> PathBuf {
    repo_root().join("testdata/lab/lab.py")
}

/// Path of the k0s test double (upload it like the real binary).
pub fn k0s_double_path() -> PathBuf {
    repo_root().join("testdata/lab/k0s")
}

fn python() -> Command {
    let mut c = Command::new("/usr/bin/python3");
    c.arg(lab_py());
    c
}

fn run_checked(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("lab: cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "lab: {what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Stdout of a command, lossily decoded.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr of a command, lossily decoded.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

impl Lab {
    /// Creates and powers on hosts given as (name, role), e.g. `[("c1", "controller"), ("w1", "worker")]`.
    /// Roles are free text (`controller`, `worker`, `controller+worker`, `single`, `bastion`).
    pub fn create(hosts: &[(&str, &str)]) -> Lab {
        Lab::create_with(hosts, LabOptions::default())
    }

    pub fn create_with(hosts: &[(&str, &str)], opts: LabOptions) -> Lab {
        crate::support::prereq::assert_required("a lab");
        let dir = tempfile::Builder::new()
            .prefix("k0sform-lab-")
            .tempdir()
            .expect("lab: temp dir");
        let path = dir.path().to_path_buf();
        let spec: Vec<String> = hosts.iter().map(|(n, r)| format!("{n}:{r}")).collect();
        let mut cmd = python();
        cmd.arg("create")
            .arg("--dir")
            .arg(&path)
            .arg("--hosts")
            .arg(spec.join(","))
            .arg("--owner-pid")
            .arg(std::process::id().to_string());
        for h in &opts.sudo_users {
            cmd.arg("--sudo-user").arg(h);
        }
        if let Some(b) = &opts.bastion {
            cmd.arg("--bastion").arg(b);
        }
        for (host, kind) in &opts.nets {
            cmd.arg("--net").arg(format!("{host}={kind}"));
        }
        run_checked(cmd, "lab.py create");
        Lab {
            dir: Some(dir),
            path,
            torn_down: false,
        }
    }

    /// The lab folder (lab.json, ssh_config, known_hosts, hosts/<name>/…).
    pub fn dir(&self) -> &Path {
        &self.path
    }

    fn info(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.path.join("lab.json")).expect("lab: read lab.json");
        serde_json::from_str(&text).expect("lab: parse lab.json")
    }

    /// Every host still in the lab (destroyed hosts are gone), in creation order.
    pub fn hosts(&self) -> Vec<LabHost> {
        let info = self.info();
        let field = |h: &serde_json::Value, k: &str| h[k].as_str().unwrap_or_default().to_string();
        info["hosts"]
            .as_array()
            .expect("lab: hosts")
            .iter()
            .map(|h| LabHost {
                name: field(h, "name"),
                role: field(h, "role"),
                address: field(h, "address"),
                port: h["port"].as_u64().unwrap_or(22) as u16,
                host_key_fingerprint: field(h, "host_key_fingerprint"),
                machine_id: field(h, "machine_id"),
                sudo_user: h["sudo_user"].as_str().map(str::to_string),
                net: h["net"].as_str().map(str::to_string),
                private_address: h["private_address"].as_str().map(str::to_string),
                public_address: h["public_address"].as_str().map(str::to_string),
            })
            .collect()
    }

    pub fn host(&self, name: &str) -> LabHost {
        self.hosts()
            .into_iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("lab: no host {name}"))
    }

    pub fn address(&self, name: &str) -> String {
        self.host(name).address
    }

    /// Path of the k0s test double (same as the free function, for `Lab::k0s_double_path()`).
    pub fn k0s_double_path() -> PathBuf {
        k0s_double_path()
    }

    /// Path of `testdata/lab/lab.py`.
    pub fn lab_py() -> PathBuf {
        lab_py()
    }

    /// The client private key (ed25519) authorized for root and the sudo user.
    pub fn key_path(&self) -> PathBuf {
        self.path.join("id_ed25519")
    }

    /// `ssh -F <this> NAME` reaches host NAME as root (ProxyJump set when the lab has a bastion).
    pub fn ssh_config_path(&self) -> PathBuf {
        self.path.join("ssh_config")
    }

    /// known_hosts with every host's current key (rewritten on wipe).
    pub fn known_hosts_path(&self) -> PathBuf {
        self.path.join("known_hosts")
    }

    pub fn bastion(&self) -> Option<String> {
        self.info()["bastion"].as_str().map(str::to_string)
    }

    /// Runs `cmd` (a shell line) on host NAME as root over real SSH.
    pub fn ssh(&self, name: &str, cmd: &str) -> Output {
        self.ssh_as("root", name, cmd)
    }

    /// Runs `cmd` on host NAME over real SSH as `user`.
    pub fn ssh_as(&self, user: &str, name: &str, cmd: &str) -> Output {
        Command::new("ssh")
            .arg("-F")
            .arg(self.ssh_config_path())
            .arg("-l")
            .arg(user)
            .arg(name)
            .arg(cmd)
            .stdin(Stdio::null())
            .output()
            .expect("lab: run ssh")
    }

    /// Like `ssh` but panics unless the command succeeds; returns stdout.
    pub fn ssh_ok(&self, name: &str, cmd: &str) -> String {
        let o = self.ssh(name, cmd);
        assert!(
            o.status.success(),
            "ssh {name} {cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
            o.status,
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    }

    /// Runs `cmd` (a shell line) as root inside host NAME's namespaces without SSH (test setup
    /// and inspection).
    pub fn exec(&self, name: &str, cmd: &str) -> Output {
        python()
            .arg("exec")
            .arg(&self.path)
            .arg(name)
            .arg("--")
            .args(["/bin/sh", "-c", cmd])
            .stdin(Stdio::null())
            .output()
            .expect("lab: run lab.py exec")
    }

    /// Like `exec` but panics unless the command succeeds; returns stdout.
    pub fn exec_ok(&self, name: &str, cmd: &str) -> String {
        let o = self.exec(name, cmd);
        assert!(
            o.status.success(),
            "exec {name} {cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
            o.status,
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    }

    fn op(&self, op: &str, name: &str) {
        let mut c = python();
        c.arg(op).arg(&self.path).arg(name);
        run_checked(c, &format!("lab.py {op} {name}"));
    }

    /// Kills every process of the host; its address then refuses connections.
    pub fn power_off(&self, name: &str) {
        self.op("power-off", name);
    }

    /// Boots the host again with the same disk and identity; installed k0s units start.
    pub fn power_on(&self, name: &str) {
        self.op("power-on", name);
    }

    /// Rebuilds the machine: empty disk, new machine-id and host key, same name and address.
    pub fn wipe(&self, name: &str) {
        self.op("wipe", name);
    }

    /// The same machine at a new address of the lab's range (a DHCP lease or re-IP): same
    /// disk, machine-id and host key; installed k0s units start again. Returns the address.
    pub fn readdress(&self, name: &str) -> String {
        self.op("readdress", name);
        self.address(name)
    }

    /// Removes the host for good.
    pub fn destroy(&self, name: &str) {
        self.op("destroy", name);
    }

    /// True while the host is powered on.
    pub fn is_on(&self, name: &str) -> bool {
        let o = run_checked(
            {
                let mut c = python();
                c.arg("status").arg(&self.path);
                c
            },
            "lab.py status",
        );
        stdout(&o).lines().any(|l| {
            l.split_whitespace().next() == Some(name) && l.split_whitespace().nth(3) == Some("on")
        })
    }

    /// The host's sshd log (LogLevel VERBOSE): one "Accepted publickey" per connection, one
    /// "Starting session" per command.
    pub fn sshd_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path.join("hosts").join(name).join("sshd.log"))
            .unwrap_or_default()
    }

    /// Copies the double to /usr/local/bin/k0s on the host (setup shortcut; k0sform uploads it itself).
    pub fn install_double(&self, name: &str) {
        self.install_binary(name, &k0s_double_path());
    }

    /// Copies any local file to /usr/local/bin/k0s on the host. The bytes go over stdin: a host
    /// has its own /tmp, so a path under the real /tmp (a checkout there) is not visible inside.
    pub fn install_binary(&self, name: &str, binary: &Path) {
        let data =
            std::fs::read(binary).unwrap_or_else(|e| panic!("lab: read {}: {e}", binary.display()));
        let mut child = python()
            .arg("exec")
            .arg(&self.path)
            .arg(name)
            .arg("--")
            .args([
                "/bin/sh",
                "-c",
                "cat > /usr/local/bin/k0s.tmp && chmod 755 /usr/local/bin/k0s.tmp && mv /usr/local/bin/k0s.tmp /usr/local/bin/k0s",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("lab: run lab.py exec");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("lab: stdin");
            stdin.write_all(&data).expect("lab: write binary");
        }
        let o = child.wait_with_output().expect("lab: wait for exec");
        assert!(
            o.status.success(),
            "lab: installing {} on {name} failed: {}",
            binary.display(),
            stderr(&o)
        );
    }

    /// A copy of the double (in the lab folder) reporting another version, to simulate an upgrade.
    pub fn k0s_double_with_version(&self, version: &str) -> PathBuf {
        let text = std::fs::read_to_string(k0s_double_path()).expect("lab: read double");
        let line = text
            .lines()
            .find(|l| l.starts_with("VERSION = "))
            .expect("lab: VERSION line in double")
            .to_string();
        let patched = text.replacen(&line, &format!("VERSION = \"{version}\""), 1);
        let path = self.path.join(format!("k0s-{version}"));
        std::fs::write(&path, patched).expect("lab: write double copy");
        let mut perm = std::fs::metadata(&path).expect("lab: stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&path, perm).expect("lab: chmod");
        path
    }

    /// The last lines of every k0s service log (the double writes them under
    /// /var/lib/k0s/logs; etcd's own log shorter) on every host, for a failing test's message.
    pub fn service_logs(&self) -> String {
        let mut all = String::new();
        for h in self.hosts() {
            let o = self.exec(
                &h.name,
                "cd /var/lib/k0s/logs 2>/dev/null && for f in *.log; do [ -f \"$f\" ] || continue; n=40; [ \"$f\" = etcd.log ] && n=12; echo \"== $f\"; tail -n $n \"$f\"; done; true",
            );
            let text = String::from_utf8_lossy(&o.stdout);
            if !text.trim().is_empty() {
                all.push_str(&format!("--- {} ---\n{text}", h.name));
            }
        }
        all
    }

    /// Polls `check` every 200 ms until it returns true or `timeout` passes; returns the outcome.
    pub fn wait_until(&self, timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
        let end = std::time::Instant::now() + timeout;
        loop {
            if check() {
                return true;
            }
            if std::time::Instant::now() > end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// k0sctl.yaml text for the named hosts (lab roles; `bastion` hosts are never listed).
    pub fn spec_yaml(&self, names: &[&str], opts: &SpecOptions) -> String {
        let hosts = self.hosts();
        let key = self.key_path();
        let user = if opts.sudo_user { SUDO_USER } else { "root" };
        let binary = opts.k0s_binary.clone().unwrap_or_else(k0s_double_path);
        let bastion = if opts.via_bastion {
            let b = self
                .bastion()
                .expect("lab: SpecOptions::via_bastion needs a lab with a bastion");
            Some(
                hosts
                    .iter()
                    .find(|h| h.name == b)
                    .cloned()
                    .expect("lab: bastion host"),
            )
        } else {
            None
        };
        let mut y = String::new();
        let _ = writeln!(y, "apiVersion: k0sctl.k0sproject.io/v1beta1");
        let _ = writeln!(y, "kind: Cluster");
        let _ = writeln!(y, "metadata:\n  name: {}", opts.cluster_name);
        let _ = writeln!(y, "spec:\n  hosts:");
        for name in names {
            let h = hosts
                .iter()
                .find(|h| h.name == *name)
                .unwrap_or_else(|| panic!("lab: no host {name}"));
            let _ = writeln!(y, "  - role: {}", h.role);
            let _ = writeln!(y, "    ssh:");
            let _ = writeln!(y, "      address: {}", h.address);
            let _ = writeln!(y, "      port: {}", h.port);
            let _ = writeln!(y, "      user: {user}");
            let _ = writeln!(y, "      keyPath: {}", key.display());
            if opts.pin_host_keys {
                let _ = writeln!(y, "      hostKey: \"{}\"", h.host_key_fingerprint);
            }
            if let Some(b) = &bastion {
                let _ = writeln!(y, "      bastion:");
                let _ = writeln!(y, "        address: {}", b.address);
                let _ = writeln!(y, "        port: {}", b.port);
                let _ = writeln!(y, "        user: root");
                let _ = writeln!(y, "        keyPath: {}", key.display());
            }
            if opts.private_address {
                let _ = writeln!(y, "    privateAddress: {}", h.address);
            }
            if !opts.from_release {
                let _ = writeln!(y, "    k0sBinaryPath: {}", binary.display());
            }
            for l in opts
                .host_yaml
                .get(*name)
                .into_iter()
                .flat_map(|t| t.lines())
            {
                let _ = writeln!(y, "    {l}");
            }
        }
        let _ = writeln!(y, "  k0s:");
        if let Some(v) = &opts.k0s_version {
            let _ = writeln!(y, "    version: {v}");
        }
        match &opts.k0s_config {
            Some(cfg) => {
                let _ = writeln!(y, "    config:");
                for l in cfg.lines() {
                    let _ = writeln!(y, "      {l}");
                }
            }
            None => {
                let _ = writeln!(y, "    config: {{}}");
            }
        }
        y
    }

    /// Writes a k0sctl.yaml for the named hosts (root login, double as k0sBinaryPath).
    pub fn write_spec(&self, path: &Path, names: &[&str]) {
        self.write_spec_with(path, names, &SpecOptions::default());
    }

    pub fn write_spec_with(&self, path: &Path, names: &[&str], opts: &SpecOptions) {
        std::fs::write(path, self.spec_yaml(names, opts)).expect("lab: write k0sctl.yaml");
    }

    /// Hides programs (e.g. `/usr/bin/curl`) inside a running host until it powers off.
    pub fn hide(&self, name: &str, paths: &[&str]) {
        let mut cmd = python();
        cmd.arg("hide").arg(&self.path).arg(name).args(paths);
        run_checked(cmd, "lab.py hide");
    }

    /// Starts a k0s release mirror (`testdata/lab/mirror.py`) on an address of the lab's range;
    /// it stops when the `Mirror` is dropped (or this test process dies).
    pub fn start_mirror(&self) -> Mirror {
        let first = self.hosts().first().expect("lab: a host").address.clone();
        let (net, _) = first.rsplit_once('.').expect("lab: IPv4 address");
        let addr = format!("{net}.2");
        let root = self.path.join("mirror").join("www");
        std::fs::create_dir_all(root.join("releases")).expect("lab: mirror dir");
        let mut child = Command::new("/usr/bin/python3")
            .arg(repo_root().join("testdata/lab/mirror.py"))
            .arg("--bind")
            .arg(&addr)
            .arg("--dir")
            .arg(&root)
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("lab: start mirror.py");
        let mut line = String::new();
        {
            use std::io::BufRead;
            let out = child.stdout.take().expect("lab: mirror stdout");
            std::io::BufReader::new(out)
                .read_line(&mut line)
                .expect("lab: mirror port");
        }
        let port: u16 = line.trim().parse().expect("lab: mirror printed its port");
        Mirror {
            child,
            root,
            url: format!("http://{addr}:{port}"),
        }
    }

    /// Stops every host and releases the address range; idempotent (Drop calls it too).
    pub fn teardown(&mut self) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        match python().arg("teardown").arg(&self.path).output() {
            Ok(o) if !o.status.success() => eprintln!(
                "lab: teardown of {} failed: {}",
                self.path.display(),
                stderr(&o)
            ),
            Ok(_) => {}
            Err(e) => eprintln!("lab: cannot run lab.py teardown: {e}"),
        }
    }
}

/// A k0s release mirror on loopback: GitHub's release layout under `<url>/releases`, the
/// version index at `<url>/stable.txt` and `<url>/latest.txt`.
pub struct Mirror {
    child: std::process::Child,
    root: PathBuf,
    pub url: String,
}

/// k0s's name for this machine's architecture (the lab's hosts share it).
pub fn k0s_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn sha256_of(path: &Path) -> String {
    let o = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    stdout(&o)
        .split_whitespace()
        .next()
        .expect("sha256")
        .to_string()
}

impl Mirror {
    /// `K0SFORM_K0S_DOWNLOAD_URL` for this mirror.
    pub fn download_url(&self) -> String {
        format!("{}/releases", self.url)
    }
    /// `K0SFORM_K0S_VERSION_URL` for this mirror.
    pub fn version_url(&self) -> String {
        self.url.clone()
    }
    fn release_dir(&self, version: &str) -> PathBuf {
        self.root.join("releases").join(version)
    }
    /// The binary of `version` as the mirror serves it.
    pub fn binary_path(&self, version: &str) -> PathBuf {
        self.release_dir(version)
            .join(format!("k0s-{version}-{}", k0s_arch()))
    }
    /// Publishes `binary` as release `version` with its `sha256sums.txt`.
    pub fn publish(&self, version: &str, binary: &Path) {
        let dir = self.release_dir(version);
        std::fs::create_dir_all(&dir).expect("mirror: release dir");
        let dest = self.binary_path(version);
        std::fs::copy(binary, &dest).expect("mirror: copy binary");
        let name = dest
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        std::fs::write(
            dir.join("sha256sums.txt"),
            format!("{}  {name}\n", sha256_of(&dest)),
        )
        .expect("mirror: sha256sums.txt");
    }
    /// Removes the release's `sha256sums.txt` (k0s publishes none before v1.28.2; a private
    /// mirror of a custom build has none).
    pub fn remove_sums(&self, version: &str) {
        std::fs::remove_file(self.release_dir(version).join("sha256sums.txt"))
            .expect("mirror: remove sha256sums.txt");
    }
    /// Sets `stable.txt` (and `latest.txt` to `latest`).
    pub fn set_index(&self, stable: &str, latest: &str) {
        std::fs::write(self.root.join("stable.txt"), format!("{stable}\n")).expect("stable.txt");
        std::fs::write(self.root.join("latest.txt"), format!("{latest}\n")).expect("latest.txt");
    }
    /// How many times the binary of `version` was served (status 200).
    pub fn downloads(&self, version: &str) -> usize {
        let log =
            std::fs::read_to_string(self.root.parent().expect("mirror dir").join("mirror.log"))
                .unwrap_or_default();
        let name = format!("k0s-{}-{}", version.replace('+', "%2B"), k0s_arch());
        let plain = format!("k0s-{version}-{}", k0s_arch());
        log.lines()
            .filter(|l| (l.contains(&name) || l.contains(&plain)) && l.ends_with(" 200"))
            .count()
    }
    /// Makes the served binary differ from its published checksum.
    pub fn corrupt(&self, version: &str) {
        let p = self.binary_path(version);
        let mut data = std::fs::read(&p).expect("mirror: read");
        data.extend_from_slice(b"\n# tampered\n");
        std::fs::write(&p, data).expect("mirror: write");
    }
    /// Serves `data` at `<url>/<rel>` (any file, not only releases).
    pub fn put(&self, rel: &str, data: &[u8]) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().expect("mirror: parent")).expect("mirror: dir");
        std::fs::write(p, data).expect("mirror: write");
    }
    /// Removes the binary (a 404), keeping its checksum.
    pub fn remove_binary(&self, version: &str) {
        std::fs::remove_file(self.binary_path(version)).expect("mirror: remove");
    }
    /// GETs of the binary send headers and a few bytes, then stall.
    pub fn stall(&self, version: &str) {
        let mut p = self.binary_path(version).into_os_string();
        p.push(".stall");
        std::fs::write(p, "").expect("mirror: stall marker");
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if std::env::var_os("K0SFORM_LAB_KEEP").is_some() {
            if let Some(d) = self.dir.take() {
                // Tells the lab's keeper process not to tear down when this test process exits.
                let _ = std::fs::write(self.path.join("keep"), b"");
                let kept = d.keep();
                eprintln!("lab: kept {} (K0SFORM_LAB_KEEP)", kept.display());
            }
            return;
        }
        self.teardown();
    }
}
