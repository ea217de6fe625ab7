//! End-to-end harness: a lab (real sshd, real etcd, the k0s double) plus the k0sform binary run
//! against it with a spec and a state file in the lab's folder.
#![allow(dead_code)]

use crate::support::lab::{Lab, LabOptions, SpecOptions, stderr, stdout};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

pub struct Cluster {
    pub lab: Lab,
    pub spec: PathBuf,
    pub state: PathBuf,
    pub spec_opts: SpecOptions,
    /// Environment of every k0sform run (later entries win). By default the k0s release and
    /// version URLs point at a closed loopback port, so no test ever reaches the internet, and
    /// the download cache is the lab's own.
    pub env: Vec<(String, String)>,
}

/// What one k0sform run printed and returned.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: stdout(&o),
            stderr: stderr(&o),
        }
    }
    pub fn text(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
    #[track_caller]
    pub fn expect(&self, code: i32) -> &Run {
        assert_eq!(
            self.code, code,
            "k0sform exited {} (expected {code})\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }
    #[track_caller]
    pub fn contains(&self, needle: &str) -> &Run {
        assert!(
            self.text().contains(needle),
            "expected {needle:?} in output\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

impl Cluster {
    pub fn new(hosts: &[(&str, &str)]) -> Cluster {
        Self::with(hosts, LabOptions::default(), SpecOptions::default())
    }

    pub fn with(hosts: &[(&str, &str)], lab_opts: LabOptions, spec_opts: SpecOptions) -> Cluster {
        let lab = Lab::create_with(hosts, lab_opts);
        let spec = lab.dir().join("k0sctl.yaml");
        let state = lab.dir().join("k0sform.state.json");
        let env = vec![
            (
                "K0SFORM_K0S_DOWNLOAD_URL".into(),
                "http://127.0.0.1:9/releases".into(),
            ),
            (
                "K0SFORM_K0S_VERSION_URL".into(),
                "http://127.0.0.1:9".into(),
            ),
            (
                "XDG_CACHE_HOME".into(),
                lab.dir().join("cache").display().to_string(),
            ),
        ];
        let c = Cluster {
            lab,
            spec,
            state,
            spec_opts,
            env,
        };
        let names: Vec<&str> = hosts
            .iter()
            .filter(|(_, r)| *r != "bastion")
            .map(|(n, _)| *n)
            .collect();
        c.write_spec(&names);
        c
    }

    /// Point k0sform's release and version lookups at `mirror`.
    pub fn use_mirror(&mut self, mirror: &crate::support::lab::Mirror) {
        self.env
            .push(("K0SFORM_K0S_DOWNLOAD_URL".into(), mirror.download_url()));
        self.env
            .push(("K0SFORM_K0S_VERSION_URL".into(), mirror.version_url()));
    }

    /// Rewrite the spec with these hosts (lab names), keeping the options.
    pub fn write_spec(&self, names: &[&str]) {
        self.lab.write_spec_with(&self.spec, names, &self.spec_opts);
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = super::bin::k0sform();
        c.arg("-c")
            .arg(&self.spec)
            .arg("-state")
            .arg(&self.state)
            .arg("-no-color")
            .args(args)
            .current_dir(self.lab.dir());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Run k0sform with `args` (after `-c SPEC -state STATE`) and wait for it.
    pub fn run(&self, args: &[&str]) -> Run {
        let out = self
            .command(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run k0sform");
        Run::from(out)
    }

    /// Run k0sform on a terminal (util-linux `script` gives it a pty) and type `answer` at its
    /// prompt: the interactive confirmation an operator sees.
    pub fn run_on_terminal(&self, args: &[&str], answer: &str) -> Run {
        use std::io::Write;
        let c = self.command(args);
        let quote =
            |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', r"'\''"));
        let line: Vec<String> = std::iter::once(quote(c.get_program()))
            .chain(c.get_args().map(quote))
            .collect();
        let mut s = Command::new("script");
        s.arg("-qec").arg(line.join(" ")).arg("/dev/null");
        s.current_dir(self.lab.dir())
            .env("NO_COLOR", "1")
            .env_remove("SSH_AUTH_SOCK");
        for (k, v) in &self.env {
            s.env(k, v);
        }
        let mut child = s
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("script");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(answer.as_bytes()).expect("answer");
        stdin.write_all(b"\n").expect("answer");
        drop(stdin);
        Run::from(child.wait_with_output().expect("run k0sform on a pty"))
    }

    #[track_caller]
    pub fn apply(&self) -> Run {
        let r = self.run(&["apply", "-auto-approve"]);
        r.expect(0);
        r
    }

    pub fn state_json(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(&self.state).expect("state file");
        serde_json::from_str(&text).expect("state JSON")
    }

    pub fn state_serial(&self) -> u64 {
        self.state_json()["serial"].as_u64().expect("serial")
    }

    /// The recorded entry of a lab host in the state.
    pub fn state_host(&self, name: &str) -> Option<serde_json::Value> {
        let addr = self.lab.address(name);
        self.state_json()["hosts"]
            .as_array()
            .expect("hosts")
            .iter()
            .find(|h| h["address"] == addr.as_str())
            .cloned()
    }

    /// `k0s etcd member-list` on a host, as name → peer URL.
    pub fn members(&self, name: &str) -> BTreeMap<String, String> {
        let out = self.lab.ssh(
            name,
            "timeout 20 k0s etcd member-list --data-dir=/var/lib/k0s",
        );
        assert!(
            out.status.success(),
            "member-list on {name} failed: {}",
            stderr(&out)
        );
        let v: serde_json::Value =
            serde_json::from_str(stdout(&out).trim()).expect("member-list JSON");
        v["members"]
            .as_object()
            .expect("members")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
            .collect()
    }

    /// The cluster identity as this controller sees it.
    pub fn uid(&self, name: &str) -> String {
        self.try_uid(name)
            .unwrap_or_else(|e| panic!("uid on {name}: {e}"))
    }

    /// The cluster identity as this controller sees it, or why it cannot tell (yet: a fresh
    /// controller answers before its kube-system namespace exists).
    pub fn try_uid(&self, name: &str) -> Result<String, String> {
        let out = self.lab.ssh(
            name,
            "KUBECONFIG=/var/lib/k0s/pki/admin.conf timeout 20 k0s kubectl --data-dir=/var/lib/k0s get namespace kube-system -o 'jsonpath={.metadata.uid}'",
        );
        if out.status.success() {
            Ok(stdout(&out).trim().to_string())
        } else {
            Err(stderr(&out))
        }
    }

    /// Node names and readiness as a controller sees them.
    pub fn nodes(&self, via: &str) -> BTreeMap<String, bool> {
        let out = self.lab.ssh(
            via,
            "KUBECONFIG=/var/lib/k0s/pki/admin.conf timeout 20 k0s kubectl --data-dir=/var/lib/k0s get nodes -o json",
        );
        assert!(out.status.success(), "nodes via {via}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("nodes JSON");
        v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|n| {
                let ready = n["status"]["conditions"]
                    .as_array()
                    .map(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                    .unwrap_or(false);
                (
                    n["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    ready,
                )
            })
            .collect()
    }

    /// Names of objects of a kind (`etcdmembers`, `controlnodes`) via a controller.
    pub fn objects(&self, via: &str, kind: &str) -> Vec<String> {
        let out = self.lab.ssh(
            via,
            &format!("KUBECONFIG=/var/lib/k0s/pki/admin.conf timeout 20 k0s kubectl --data-dir=/var/lib/k0s get {kind} -o json"),
        );
        assert!(
            out.status.success(),
            "get {kind} via {via}: {}",
            stderr(&out)
        );
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("list JSON");
        let mut names: Vec<String> = v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect();
        names.sort();
        names
    }

    /// A fingerprint of what k0sform could change on a host: the files under /etc/k0s, the
    /// service units, the binaries, the top of the data dir, and whether k0s runs. Equal before
    /// and after ⇒ nothing was installed, written, started, stopped or reset there.
    pub fn host_snapshot(&self, name: &str) -> String {
        let out = self.lab.exec(
            name,
            "find /etc/k0s /etc/systemd/system /usr/local/bin -type f -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum; ls -a /var/lib/k0s 2>/dev/null; k0s status >/dev/null 2>&1 && echo running || echo stopped",
        );
        stdout(&out)
    }

    /// Wait until `cond` holds (polling), panicking with `what` after `secs`.
    #[track_caller]
    pub fn eventually(&self, secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
        if !self.lab.wait_until(Duration::from_secs(secs), &mut cond) {
            panic!(
                "timed out after {secs}s waiting for {what}; k0s logs:\n{}",
                self.lab.service_logs()
            );
        }
    }
}

/// Day-2 operations: kubeconfig, backup and restore.
impl Cluster {
    /// Run k0sform with another state file than the cluster's (a new lineage, say).
    pub fn run_with_state(&self, state: &std::path::Path, args: &[&str]) -> Run {
        let out = super::bin::k0sform()
            .arg("-c")
            .arg(&self.spec)
            .arg("-state")
            .arg(state)
            .arg("-no-color")
            .args(args)
            .current_dir(self.lab.dir())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run k0sform");
        Run::from(out)
    }

    /// `k0s kubectl --kubeconfig FILE …` run on this machine (the double reaches the API server
    /// the file names over the network, as kubectl would).
    pub fn kubectl_with(&self, kubeconfig: &std::path::Path, args: &[&str]) -> Output {
        Command::new(crate::support::lab::k0s_double_path())
            .arg("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .expect("run the k0s double")
    }
}
