//! A plain OpenSSH server on a random loopback address and port (no namespaces, no k0s): the
//! fixture of the SSH transport and probe tests. Tests using it begin with `require_lab!();` (it logs in as root and the lab's sudo user).
#![allow(dead_code)]

use k0sform::hostid::HostId;
use k0sform::spec::{HostSpec, Role, SshTarget};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Sshd {
    dir: tempfile::TempDir,
    pub address: String,
    pub port: u16,
    child: Option<Child>,
    /// Extra sshd_config lines (`start_with`).
    extra: String,
}

pub fn free_address() -> (String, u16) {
    // Loopback only. Random address and port, checked bindable (sshd binds right after).
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

pub fn rand_u32() -> u32 {
    let u = uuid::Uuid::new_v4();
    let b = u.as_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

pub fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "k0sform-test", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

pub fn fingerprint_by_ssh_keygen(pubkey: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(pubkey)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string()
}

impl Sshd {
    pub fn start() -> Sshd {
        Self::start_with("")
    }

    /// `start` with extra sshd_config lines; `{dir}` in them stands for the server's folder.
    pub fn start_with(extra: &str) -> Sshd {
        crate::support::prereq::assert_required("an sshd");
        let dir = tempfile::Builder::new()
            .prefix("k0sform-sshd-")
            .tempdir_in("/tmp")
            .unwrap();
        // Readable by non-root test users (sshd reads authorized_keys as the user).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        keygen(&dir.path().join("host_key"));
        keygen(&dir.path().join("client_key"));
        std::fs::copy(
            dir.path().join("client_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .unwrap();
        std::fs::set_permissions(
            dir.path().join("authorized_keys"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let (address, port) = free_address();
        let mut s = Sshd {
            dir,
            address,
            port,
            child: None,
            extra: String::new(),
        };
        s.extra = extra.replace("{dir}", &s.dir.path().display().to_string());
        s.spawn();
        s
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn spawn(&mut self) {
        let d = self.dir.path().display();
        let cfg = format!(
            "ListenAddress {}:{}\nHostKey {d}/host_key\nPidFile none\nAuthorizedKeysFile {d}/authorized_keys\n\
             PermitRootLogin prohibit-password\nStrictModes no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nAllowTcpForwarding yes\nLogLevel DEBUG1\n\
             MaxStartups 100\n{}",
            self.address, self.port, self.extra
        );
        std::fs::write(self.path("sshd_config"), cfg).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .arg("-D")
            .arg("-f")
            .arg(self.path("sshd_config"))
            .arg("-E")
            .arg(self.path("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((self.address.as_str(), self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Same address, new host key (a rebuilt host).
    pub fn rebuild(&mut self) {
        self.stop();
        std::fs::remove_file(self.path("host_key")).unwrap();
        std::fs::remove_file(self.path("host_key.pub")).unwrap();
        keygen(&self.path("host_key"));
        self.spawn();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
    }

    pub fn accepted_logins(&self) -> usize {
        self.log().matches("Accepted publickey").count()
    }

    pub fn id(&self) -> HostId {
        HostId::new(self.address.clone(), self.port)
    }

    pub fn target(&self, user: &str) -> SshTarget {
        let mut t = SshTarget::new(self.address.clone(), self.port);
        t.user = user.to_string();
        t.key_path = Some(self.path("client_key"));
        t
    }

    pub fn host_fingerprint(&self) -> String {
        fingerprint_by_ssh_keygen(&self.path("host_key.pub"))
    }

    pub fn host_public_key(&self) -> String {
        let text = std::fs::read_to_string(self.path("host_key.pub")).unwrap();
        let mut it = text.split_whitespace();
        format!("{} {}", it.next().unwrap(), it.next().unwrap())
    }
    /// A spec host for this server, logging in as root with the test key.
    pub fn host(&self, role: Role, index: usize) -> HostSpec {
        HostSpec::new(role, self.target("root"), index)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}
