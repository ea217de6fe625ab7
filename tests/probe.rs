//! `probe::probe_all` over real SSH. Part 1: plain sshd servers on loopback addresses (this
//! machine, no k0s): a fresh host, an unreachable one, a state-only one, a changed key.

use k0sform::hostid::HostId;
use k0sform::probe::{self, ProbeOptions};
use k0sform::reality::Probe;
use k0sform::spec::{HostSpec, K0sSpec, Role, Spec, SshTarget};
use k0sform::ssh::{SshOptions, SshTransport};
use k0sform::state::{HostState, State};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Sshd {
    dir: tempfile::TempDir,
    address: String,
    port: u16,
    child: Child,
}

fn rand_u32() -> u32 {
    let u = uuid::Uuid::new_v4();
    let b = u.as_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn free_address() -> (String, u16) {
    for _ in 0..200 {
        let n = rand_u32();
        let addr = format!(
            "127.{}.{}.{}",
            201 + n % 50,
            (n >> 8) % 256,
            2 + (n >> 16) % 250
        );
        let port = 20000 + ((n >> 4) % 30000) as u16;
        if TcpListener::bind((addr.as_str(), port)).is_ok() {
            return (addr, port);
        }
    }
    panic!("no free loopback address");
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

impl Sshd {
    fn start() -> Sshd {
        let dir = tempfile::Builder::new()
            .prefix("k0sform-sshd-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        keygen(&dir.path().join("host_key"));
        keygen(&dir.path().join("client_key"));
        std::fs::copy(
            dir.path().join("client_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .unwrap();
        let (address, port) = free_address();
        let d = dir.path().display();
        let cfg = format!(
            "ListenAddress {address}:{port}\nHostKey {d}/host_key\nPidFile none\n\
             AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
             StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             UsePAM no\nLogLevel VERBOSE\n"
        );
        std::fs::write(dir.path().join("sshd_config"), cfg).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .arg("-D")
            .arg("-f")
            .arg(dir.path().join("sshd_config"))
            .arg("-E")
            .arg(dir.path().join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((address.as_str(), port)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Sshd {
            dir,
            address,
            port,
            child,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn id(&self) -> HostId {
        HostId::new(self.address.clone(), self.port)
    }

    fn host(&self, role: Role, index: usize) -> HostSpec {
        let mut t = SshTarget::new(self.address.clone(), self.port);
        t.key_path = Some(self.path("client_key"));
        HostSpec::new(role, t, index)
    }

    fn logins(&self) -> usize {
        std::fs::read_to_string(self.path("sshd.log"))
            .unwrap_or_default()
            .matches("Accepted publickey")
            .count()
    }

    fn fingerprint(&self) -> String {
        let out = Command::new("ssh-keygen")
            .arg("-lf")
            .arg(self.path("host_key.pub"))
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spec(hosts: Vec<HostSpec>) -> Spec {
    Spec {
        name: "probe-test".into(),
        hosts,
        k0s: K0sSpec {
            version: None,
            version_channel: None,
            dynamic_config: false,
            config: None,
        },
        options: Default::default(),
        manifests: Vec::new(),
    }
}

fn state_host(id: &HostId, fp: &str, key: Option<String>) -> HostState {
    HostState {
        address: id.address.clone(),
        port: id.port,
        role: Role::Controller,
        node_name: None,
        machine_id: "old".into(),
        host_key: fp.into(),
        host_public_key: key,
        etcd: None,
        k0s_version: None,
        install_flags_sha256: None,
        config_sha256: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fresh_unreachable_and_state_only_hosts() {
    let a = Sshd::start();
    let b = Sshd::start();
    let (dead_addr, dead_port) = free_address();
    let mut dead = SshTarget::new(dead_addr.clone(), dead_port);
    dead.key_path = Some(a.path("client_key"));
    let s = spec(vec![
        a.host(Role::Controller, 1),
        HostSpec::new(Role::Worker, dead, 2),
    ]);
    // b is only in the state: probed with the first host's key, at the state's address.
    let mut state = State::new();
    std::fs::copy(a.path("client_key.pub"), b.path("authorized_keys")).unwrap();
    state.upsert_host(state_host(&b.id(), "", None));

    let t = SshTransport::new(SshOptions::default()).unwrap();
    let reality = probe::probe_all(&s, &state, &t, &ProbeOptions::default()).await;
    let ids: Vec<HostId> = reality.hosts.iter().map(|h| h.id.clone()).collect();
    let dead_id = HostId::new(dead_addr, dead_port);
    let mut want = vec![a.id(), b.id(), dead_id.clone()];
    want.sort();
    assert_eq!(ids, want, "all hosts, sorted");

    let fa = reality.facts(&a.id()).expect("a reached");
    let machine_id = std::fs::read_to_string("/etc/machine-id").unwrap();
    assert_eq!(fa.machine_id, machine_id.trim());
    assert_eq!(fa.host_key, a.fingerprint());
    assert!(
        fa.host_public_key
            .as_deref()
            .unwrap()
            .starts_with("ssh-ed25519 ")
    );
    assert!(!fa.arch.is_empty() && !fa.hostname.is_empty() && !fa.os.is_empty());
    if !Path::new("/usr/local/bin/k0s").exists() {
        assert_eq!(fa.k0s_version, None);
        assert_eq!(fa.status, None);
        assert!(fa.view.is_none());
    }
    assert!(
        reality.facts(&b.id()).is_some(),
        "{:?}",
        reality.get(&b.id())
    );
    match reality.get(&dead_id) {
        Some(Probe::Unreachable { error }) => {
            assert!(error.contains("Connection refused"), "{error}")
        }
        other => panic!("expected unreachable, got {other:?}"),
    }
    assert_eq!(a.logins(), 1);
    assert_eq!(b.logins(), 1);

    // The saved probe reads back identically.
    let dir = tempfile::tempdir().unwrap();
    probe::save(&reality, &dir.path().join("r.json")).unwrap();
    assert_eq!(probe::load(&dir.path().join("r.json")).unwrap(), reality);
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn changed_key_is_reported_and_replace_accepts_it() {
    let a = Sshd::start();
    let s = spec(vec![a.host(Role::Controller, 1)]);
    let mut state = State::new();
    // Recorded: some other host's key.
    let other = tempfile::tempdir().unwrap();
    keygen(&other.path().join("k"));
    let text = std::fs::read_to_string(other.path().join("k.pub")).unwrap();
    let old_key: String = text
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let old_fp = k0sform::ssh::fingerprint(&old_key).unwrap();
    state.upsert_host(state_host(&a.id(), &old_fp, Some(old_key)));

    let t = SshTransport::new(SshOptions::default()).unwrap();
    let r = probe::probe_all(&s, &state, &t, &ProbeOptions::default()).await;
    assert_eq!(
        r.get(&a.id()),
        Some(&Probe::HostKeyChanged {
            expected: old_fp.clone(),
            offered: a.fingerprint()
        })
    );
    assert_eq!(a.logins(), 0, "nothing ran on a host with a changed key");
    t.close_all().await;

    let t = SshTransport::new(SshOptions::default()).unwrap();
    let opts = ProbeOptions {
        replace: vec![a.address.clone()],
        ..Default::default()
    };
    let r = probe::probe_all(&s, &state, &t, &opts).await;
    assert_eq!(
        r.facts(&a.id()).map(|f| f.host_key.clone()),
        Some(a.fingerprint())
    );
    t.close_all().await;

    // An older state with only the fingerprint: first contact, then compared.
    let mut state2 = State::new();
    state2.upsert_host(state_host(&a.id(), &old_fp, None));
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let r = probe::probe_all(&s, &state2, &t, &ProbeOptions::default()).await;
    assert!(
        matches!(r.get(&a.id()), Some(Probe::HostKeyChanged { .. })),
        "{r:?}"
    );
    t.close_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn excluded_hosts_are_not_contacted() {
    let a = Sshd::start();
    let s = spec(vec![a.host(Role::Controller, 1)]);
    let t = SshTransport::new(SshOptions::default()).unwrap();
    let opts = ProbeOptions {
        exclude: vec![a.id().to_string()],
        ..Default::default()
    };
    let r = probe::probe_all(&s, &State::new(), &t, &opts).await;
    assert!(r.hosts.is_empty());
    assert_eq!(a.logins(), 0);
}
