//! A real etcd (Debian's etcd-server) on a loopback address of its own (127.210-249.x.y; the lab
//! claims 127.100-199.x.y), with a temp data dir: the etcd state backend's fixture. Tests using it
//! begin with `require_lab!();` (tests/support/prereq.rs).
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

pub struct EtcdServer {
    child: Option<Child>,
    dir: tempfile::TempDir,
    ip: String,
    /// Serve TLS only, and require client certificates signed by the test CA.
    tls: bool,
}

impl EtcdServer {
    /// Start etcd on a free 127.210-249.x.y (the lab claims 127.100-199.x.y) and wait until it
    /// answers.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// etcd with TLS and client certificate checks; `cert(name)` gives the files.
    pub fn start_tls() -> Self {
        Self::start_with(true)
    }

    fn start_with(tls: bool) -> Self {
        crate::support::prereq::assert_required("an etcd");
        let pid = std::process::id();
        let ip = loop {
            let n = NEXT.fetch_add(1, Ordering::SeqCst);
            let ip = format!(
                "127.{}.{}.{}",
                210 + pid % 40,
                (pid / 40 + n / 250) % 256,
                n % 250 + 1
            );
            let free = [2379, 2380]
                .iter()
                .all(|p| TcpListener::bind((ip.as_str(), *p)).is_ok());
            if free {
                break ip;
            }
            assert!(n < 500, "no free loopback address for etcd");
        };
        let mut e = EtcdServer {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            ip,
            tls,
        };
        if tls {
            e.make_certs();
        }
        e.spawn();
        e
    }

    /// A test CA, a server certificate for our IP and a client certificate, with openssl.
    fn make_certs(&self) {
        let d = self.dir.path();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(d)
                .output()
                .expect("openssl");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other-ca"] {
            let subj = format!("/CN=k0sform test {ca}");
            let key = format!("{ca}-key.pem");
            let pem = format!("{ca}.pem");
            let mut args = vec!["req", "-x509"];
            args.extend_from_slice(&ec);
            args.extend_from_slice(&["-keyout", &key, "-out", &pem, "-days", "2", "-subj", &subj]);
            openssl(&args);
        }
        let ip = &self.ip;
        for (name, ext) in [
            (
                "server",
                format!("subjectAltName=IP:{ip}\nextendedKeyUsage=serverAuth,clientAuth\n"),
            ),
            ("client", "extendedKeyUsage=clientAuth\n".to_string()),
        ] {
            std::fs::write(d.join(format!("{name}.ext")), ext).unwrap();
            let subj = format!("/CN={name}");
            let key = format!("{name}-key.pem");
            let csr = format!("{name}.csr");
            let mut args = vec!["req"];
            args.extend_from_slice(&ec);
            args.extend_from_slice(&["-keyout", &key, "-out", &csr, "-subj", &subj]);
            openssl(&args);
            openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-out",
                &format!("{name}.pem"),
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
            ]);
        }
    }

    /// Path of a generated PEM file: `ca`, `other-ca`, `client`, `client-key`.
    pub fn cert(&self, name: &str) -> String {
        self.dir
            .path()
            .join(format!("{name}.pem"))
            .to_str()
            .unwrap()
            .to_string()
    }

    fn spawn(&mut self) {
        let ip = &self.ip;
        let scheme = if self.tls { "https" } else { "http" };
        let log = std::fs::File::create(self.dir.path().join("etcd.log")).unwrap();
        let mut cmd = Command::new("/usr/bin/etcd");
        if self.tls {
            cmd.args([
                "--cert-file",
                &self.cert("server"),
                "--key-file",
                &self.cert("server-key"),
                "--trusted-ca-file",
                &self.cert("ca"),
                "--client-cert-auth",
            ]);
        }
        let child = cmd
            .args([
                "--name",
                "state",
                "--data-dir",
                self.dir.path().join("data").to_str().unwrap(),
                "--listen-client-urls",
                &format!("{scheme}://{ip}:2379"),
                "--advertise-client-urls",
                &format!("{scheme}://{ip}:2379"),
                "--listen-peer-urls",
                &format!("http://{ip}:2380"),
                "--initial-advertise-peer-urls",
                &format!("http://{ip}:2380"),
                "--initial-cluster",
                &format!("state=http://{ip}:2380"),
                "--listen-metrics-urls",
                "",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start /usr/bin/etcd (Debian's etcd-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = self
                .etcdctl_raw(&["endpoint", "health"], None)
                .status
                .success();
            if ok {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                let log = std::fs::read_to_string(self.dir.path().join("etcd.log"));
                panic!("etcd exited with {status}: {}", log.unwrap_or_default());
            }
            assert!(Instant::now() < deadline, "etcd did not become healthy");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn url(&self, prefix: &str) -> String {
        let scheme = if self.tls { "etcds" } else { "etcd" };
        format!("{scheme}://{}:2379{prefix}", self.ip)
    }

    /// kill -9: etcd's WAL keeps what was committed.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn etcdctl_raw(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        let mut c = Command::new("/usr/bin/etcdctl");
        if self.tls {
            c.arg(format!("--cacert={}", self.cert("ca")))
                .arg(format!("--cert={}", self.cert("client")))
                .arg(format!("--key={}", self.cert("client-key")));
        }
        let scheme = if self.tls { "https" } else { "http" };
        c.env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={scheme}://{}:2379", self.ip))
            .arg("--command-timeout=5s")
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("etcdctl (Debian's etcd-client)");
        if let Some(text) = stdin {
            use std::io::Write;
            let mut i = child.stdin.take().unwrap();
            i.write_all(text.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    pub fn etcdctl(&self, args: &[&str]) -> String {
        let out = self.etcdctl_raw(args, None);
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn kvs(&self, key: &str, prefix: bool) -> Vec<serde_json::Value> {
        let mut args = vec!["get", key, "-w", "json"];
        if prefix {
            args.push("--prefix");
        }
        let v: serde_json::Value = serde_json::from_str(&self.etcdctl(&args)).unwrap();
        v["kvs"].as_array().cloned().unwrap_or_default()
    }

    fn b64(v: &serde_json::Value) -> String {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or(""))
            .unwrap();
        String::from_utf8(bytes).unwrap()
    }

    /// The exact value of `key`.
    pub fn get(&self, key: &str) -> Option<String> {
        self.kvs(key, false)
            .first()
            .map(|kv| Self::b64(&kv["value"]))
    }

    pub fn keys(&self, prefix: &str) -> Vec<String> {
        self.kvs(prefix, true)
            .iter()
            .map(|kv| Self::b64(&kv["key"]))
            .collect()
    }

    pub fn put(&self, key: &str, value: &str) {
        // etcdctl reads a value from stdin unless given as an argument, and an empty stdin is no
        // value to it.
        let out = if value.is_empty() {
            self.etcdctl_raw(&["put", "--", key, ""], None)
        } else {
            self.etcdctl_raw(&["put", key], Some(value))
        };
        assert!(out.status.success(), "etcdctl put {key}");
    }

    /// The lease ID `key` is attached to.
    pub fn lease_of(&self, key: &str) -> i64 {
        self.kvs(key, false)[0]["lease"].as_i64().expect("a lease")
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.stop();
    }
}
