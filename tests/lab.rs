//! Pins the test lab (hosts look like separate machines over real SSH) and the fidelity of the
//! k0s test double against the samples in testdata/reference/k0s-cli.md, including the etcd membership
//! failures that must happen for real. Needs root; run with `cargo test --test k0sform lab::`.

use crate::support::lab::{self, Lab, LabOptions, SpecOptions, stderr, stdout};
use crate::support::prereq::require_lab;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const K0S_LOG: &str = "/var/lib/k0s/logs/k0scontroller.log";
const NOT_RUNNING: &str = "Error: status: can't get \"status\" via \"/run/k0s/status.sock\": Get \"http://localhost/status\": dial unix /run/k0s/status.sock: connect: no such file or directory\n";

fn members(lab: &Lab, host: &str) -> serde_json::Value {
    let out = lab.ssh_ok(host, "timeout 10 k0s etcd member-list");
    assert!(
        out.ends_with("}\n") && out.lines().count() == 1,
        "one compact line: {out:?}"
    );
    serde_json::from_str(&out).expect("member-list JSON")
}

fn member_names(lab: &Lab, host: &str) -> BTreeSet<String> {
    members(lab, host)["members"]
        .as_object()
        .expect("members map")
        .keys()
        .cloned()
        .collect()
}

fn uid(lab: &Lab, host: &str) -> String {
    lab.ssh_ok(
        host,
        "k0s kubectl get namespace kube-system -o jsonpath={.metadata.uid}",
    )
}

fn wait_ready(lab: &Lab, host: &str) {
    let ok = lab.wait_until(Duration::from_secs(40), || {
        let o = lab.ssh(host, "k0s kubectl get --raw=/readyz");
        o.status.success() && stdout(&o) == "ok"
    });
    assert!(ok, "{host} never became ready; log:\n{}", log(lab, host));
}

fn log(lab: &Lab, host: &str) -> String {
    stdout(&lab.exec(host, &format!("cat {K0S_LOG}")))
}

fn bootstrap(lab: &Lab, host: &str) {
    lab.install_double(host);
    lab.ssh_ok(host, "k0s install controller && k0s start");
    wait_ready(lab, host);
}

/// Token from `via`, written to /etc/k0s/k0stoken on `host`, installed with --token-file, started.
fn start_joining(lab: &Lab, via: &str, host: &str, role: &str) {
    lab.install_double(host);
    let token = lab.ssh_ok(via, &format!("k0s token create --role {role} --expiry 1h"));
    lab.ssh_ok(
        host,
        &format!(
            "mkdir -p /etc/k0s && echo {} > /etc/k0s/k0stoken && chmod 600 /etc/k0s/k0stoken",
            token.trim()
        ),
    );
    lab.ssh_ok(
        host,
        &format!("k0s install {role} --token-file /etc/k0s/k0stoken && k0s start"),
    );
}

/// Waits until the service process on `host` has exited (a failed join ends the process).
fn wait_exited(lab: &Lab, host: &str, timeout: Duration) -> bool {
    lab.wait_until(timeout, || !lab.ssh(host, "k0s status").status.success())
}

fn form_cluster(lab: &Lab, hosts: &[&str]) {
    bootstrap(lab, hosts[0]);
    for h in &hosts[1..] {
        start_joining(lab, hosts[0], h, "controller");
        wait_ready(lab, h);
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn lab_hosts_look_like_separate_machines() {
    require_lab!();
    let lab = Lab::create_with(
        &[("c1", "controller"), ("c2", "controller"), ("w1", "worker")],
        LabOptions::default().sudo_user("c1"),
    );
    let hosts = lab.hosts();
    assert_eq!(hosts.len(), 3);
    let mut ids = BTreeSet::new();
    let mut keys = BTreeSet::new();
    for h in &hosts {
        assert_eq!(h.port, 22);
        assert!(h.address.starts_with("127."), "{h:?}");
        let out = lab.ssh_ok(&h.name, "hostname; cat /etc/machine-id");
        assert_eq!(out, format!("{}\n{}\n", h.name, h.machine_id));
        // The key the server presents over SSH is the one recorded in lab.json.
        let scan = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ssh-keyscan -t ed25519 {} 2>/dev/null | ssh-keygen -lf -",
                h.address
            ))
            .output()
            .unwrap();
        assert!(
            stdout(&scan).contains(&h.host_key_fingerprint),
            "{}",
            stdout(&scan)
        );
        ids.insert(h.machine_id.clone());
        keys.insert(h.host_key_fingerprint.clone());
    }
    assert_eq!(ids.len(), 3, "distinct machine-ids");
    assert_eq!(keys.len(), 3, "distinct host keys");

    // Private disks: /etc/k0s, /var/lib/k0s, /usr/local/bin, /opt, /srv and /tmp are per host
    // (neither another host nor the real machine sees them).
    let mark = format!("lab-mark-{}", std::process::id());
    lab.ssh_ok(
        "c1",
        &format!("for d in /etc/k0s /var/lib/k0s /usr/local/bin /opt /srv /tmp; do echo x > $d/{mark}; done"),
    );
    let o = lab.ssh(
        "c2",
        &format!("ls /etc/k0s/{mark} /var/lib/k0s/{mark} /usr/local/bin/{mark} /opt/{mark} /srv/{mark} /tmp/{mark}"),
    );
    assert!(!o.status.success());
    for d in ["/opt", "/srv"] {
        assert!(
            !std::path::Path::new(d).join(&mark).exists(),
            "{d} of a lab host is the real machine's"
        );
    }
    // Each host has its own PID namespace: nothing of c1 is visible on c2.
    let ps = lab.ssh_ok("c2", "ps -eo args");
    assert!(!ps.contains("/hosts/c1"), "{ps}");

    // The sudo user logs in only where allowed and has passwordless sudo.
    lab.install_double("c1");
    let o = lab.ssh_as(lab::SUDO_USER, "c1", "id -un; sudo -n k0s version");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "k0slab\nv1.33.4+k0s.0\n");
    let o = lab.ssh_as(lab::SUDO_USER, "c1", "k0s install controller");
    assert_eq!(stderr(&o), "Error: this command must be run as root\n");
    let o = lab.ssh_as(lab::SUDO_USER, "c2", "true");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Permission denied (publickey)"),
        "{}",
        stderr(&o)
    );

    // sshd logs connections and commands per host.
    let log = lab.sshd_log("c1");
    assert!(log.contains("Accepted publickey for root"), "{log}");
    assert!(log.contains("Starting session: command"), "{log}");

    // Wipe: new machine-id and host key, same address and name, empty disk.
    let before = lab.host("c1");
    lab.wipe("c1");
    let after = lab.host("c1");
    assert_eq!(after.address, before.address);
    assert_ne!(after.machine_id, before.machine_id);
    assert_ne!(after.host_key_fingerprint, before.host_key_fingerprint);
    let out = lab.ssh_ok(
        "c1",
        "hostname; cat /etc/machine-id; ls -A /etc/k0s /var/lib/k0s /usr/local/bin",
    );
    assert_eq!(
        out,
        format!(
            "c1\n{}\n/etc/k0s:\n\n/usr/local/bin:\n\n/var/lib/k0s:\n",
            after.machine_id
        )
    );

    // Power off: SSH fails fast with connection refused; power on keeps identity and disk.
    lab.ssh_ok("w1", "echo kept > /etc/k0s/mark");
    lab.power_off("w1");
    assert!(!lab.is_on("w1"));
    let t = Instant::now();
    let o = lab.ssh("w1", "true");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("Connection refused"), "{}", stderr(&o));
    assert!(t.elapsed() < Duration::from_secs(2));
    lab.power_on("w1");
    let w1 = lab.host("w1");
    assert_eq!(
        lab.ssh_ok("w1", "cat /etc/machine-id /etc/k0s/mark"),
        format!("{}\nkept\n", w1.machine_id)
    );

    lab.destroy("w1");
    assert!(lab.hosts().iter().all(|h| h.name != "w1"));
    assert!(!lab.ssh("w1", "true").status.success());

    // The spec helper lists hosts with the lab's key and the double.
    let spec = lab.spec_yaml(&["c1", "c2"], &SpecOptions::default().pin_host_keys(true));
    assert!(
        spec.contains(&format!("address: {}", after.address)),
        "{spec}"
    );
    assert!(spec.contains(&format!("hostKey: \"{}\"", after.host_key_fingerprint)));
    assert!(spec.contains(&format!(
        "k0sBinaryPath: {}",
        lab::k0s_double_path().display()
    )));
}

#[test]
fn lab_bastion_proxyjump() {
    require_lab!();
    let lab = Lab::create_with(
        &[("b1", "bastion"), ("c1", "controller")],
        LabOptions::default().bastion("b1"),
    );
    assert_eq!(lab.ssh_ok("c1", "hostname"), "c1\n");
    // The jump host authenticated the client but ran no session itself (only a forward);
    // the command ran on c1.
    let b1 = lab.sshd_log("b1");
    assert!(
        b1.contains("Accepted publickey for root"),
        "bastion log: {b1}"
    );
    assert!(!b1.contains("Starting session"), "bastion log: {b1}");
    assert!(lab.sshd_log("c1").contains("Starting session: command"));
    // Without the jump host c1 is still reachable directly, so the test proves the path taken:
    lab.power_off("b1");
    assert!(
        !lab.ssh("c1", "true").status.success(),
        "ssh_config routes c1 through b1"
    );
    let spec = lab.spec_yaml(
        &["c1"],
        &SpecOptions {
            via_bastion: true,
            ..SpecOptions::default()
        },
    );
    assert!(
        spec.contains(&format!("bastion:\n        address: {}", lab.address("b1"))),
        "{spec}"
    );
}

#[test]
fn lab_parallel_labs_do_not_clash_and_teardown_leaves_nothing() {
    require_lab!();
    let labs: Vec<Lab> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| s.spawn(|| Lab::create(&[("c1", "controller"), ("c2", "worker")])))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ranges: BTreeSet<String> = labs
        .iter()
        .map(|l| {
            let a = l.address("c1");
            a[..a.rfind('.').unwrap()].to_string()
        })
        .collect();
    assert_eq!(ranges.len(), 3, "each lab has its own range: {ranges:?}");
    for l in &labs {
        assert_eq!(l.ssh_ok("c2", "hostname"), "c2\n");
    }
    for mut l in labs {
        let state: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(l.dir().join("state.json")).unwrap())
                .unwrap();
        let mut pids: Vec<u64> = state["hosts"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|h| {
                [
                    h["init_pid"].as_u64().unwrap(),
                    h["unshare_pid"].as_u64().unwrap(),
                ]
            })
            .collect();
        pids.push(state["keeper_pid"].as_u64().unwrap());
        let lock = state["lock"].as_str().unwrap().to_string();
        let addrs: Vec<String> = l.hosts().iter().map(|h| h.address.clone()).collect();
        l.teardown();
        l.teardown(); // idempotent
        for p in pids {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            assert!(
                stat.is_empty() || stat.contains(") Z "),
                "process {p} survived teardown"
            );
        }
        assert!(
            !std::path::Path::new(&lock).exists(),
            "range claim {lock} released"
        );
        for a in addrs {
            assert!(std::net::TcpStream::connect((a.as_str(), 22)).is_err());
        }
    }
    // No mount of a lab is visible outside its hosts.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains("k0sform-lab-"), "{mounts}");
}

#[test]
fn double_cli_matches_reference() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker")]);
    let addr = lab.address("c1");
    lab.install_double("c1");
    let run = |cmd: &str| {
        let o = lab.ssh("c1", cmd);
        (o.status.code(), stdout(&o), stderr(&o))
    };

    // §1 version
    assert_eq!(
        run("k0s version"),
        (Some(0), "v1.33.4+k0s.0\n".into(), String::new())
    );
    let (_, out, _) = run("k0s version -j");
    assert!(
        out.starts_with("{\n   \"k0s\": \"v1.33.4+k0s.0\",\n   \"runc\": "),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "k0s",
            "runc",
            "containerd",
            "kubernetes",
            "kine",
            "etcd",
            "konnectivity"
        ]
    );
    assert_eq!(v["kubernetes"], "v1.33.4");
    assert_eq!(run("k0s version --json").1, out);

    // §0 conventions
    assert_eq!(
        run("k0s version --datadir x"),
        (
            Some(1),
            String::new(),
            "Error: unknown flag: --datadir\n".into()
        )
    );
    assert_eq!(
        run("k0s etcd leave x").2,
        "Error: unknown command \"x\" for \"k0s etcd leave\"\n"
    );
    assert_eq!(run("k0s etcd").0, Some(0));

    // §2 / §3.2 before install
    assert_eq!(
        run("k0s status"),
        (Some(1), String::new(), NOT_RUNNING.into())
    );
    assert_eq!(run("k0s status -o json").2, NOT_RUNNING);
    assert_eq!(
        run("k0s start").2,
        "Error: k0s has not been installed as a service\n"
    );
    assert_eq!(
        run("k0s stop").2,
        "Error: k0s has not been installed as a service\n"
    );
    assert_eq!(
        run("k0s install controller -c /some/fake/path").2,
        "Error: failed to load node config: open /some/fake/path: no such file or directory\n"
    );

    // §3.1 install: sorted --name=value args, env lines, silent success, no double install
    lab.exec_ok("c1", "mkdir -p /etc/k0s && : > /etc/k0s/k0s.yaml");
    let flags = "--enable-worker --no-taints -e HTTP_PROXY=http://proxy:3128 --data-dir /var/lib/k0s -c /etc/k0s/k0s.yaml --kubelet-extra-args=--node-ip=1.2.3.4";
    assert_eq!(
        run(&format!("k0s install controller {flags}")),
        (Some(0), String::new(), String::new())
    );
    let unit = lab.ssh_ok("c1", "cat /etc/systemd/system/k0scontroller.service");
    assert!(unit.contains("ExecStart=/usr/local/bin/k0s controller --config=/etc/k0s/k0s.yaml --data-dir=/var/lib/k0s --enable-worker=true --kubelet-extra-args=--node-ip=1.2.3.4 --no-taints=true\n"), "{unit}");
    assert!(
        unit.contains("Environment=\"HTTP_PROXY=http://proxy:3128\""),
        "{unit}"
    );
    assert!(unit.contains("WantedBy=multi-user.target"));
    assert_eq!(
        run("k0s install controller").2,
        "Error: failed to install controller service: Init already exists: /etc/systemd/system/k0scontroller.service\n"
    );
    assert_eq!(
        run(&format!("k0s install controller --force {flags}")).0,
        Some(0)
    );
    assert_eq!(
        lab.ssh_ok("c1", "cat /etc/systemd/system/k0scontroller.service"),
        unit
    );
    // `-e NAME` takes NAME's value from k0s's own environment (cmd/install/util.go
    // resolveEnvVars), each `-e` one line right after ExecStart, in the order given.
    assert_eq!(
        run(&format!(
            "FROM_ENV=v1 k0s install controller --force {flags} -e FROM_ENV -e UNSET"
        ))
        .0,
        Some(0)
    );
    let with_env = lab.ssh_ok("c1", "cat /etc/systemd/system/k0scontroller.service");
    assert!(
        with_env.contains("--no-taints=true\nEnvironment=\"HTTP_PROXY=http://proxy:3128\"\nEnvironment=\"FROM_ENV=v1\"\nEnvironment=\"UNSET=\"\n"),
        "{with_env}"
    );
    assert_eq!(
        run(&format!("k0s install controller --force {flags}")).0,
        Some(0)
    );
    assert_eq!(run("k0s stop").2, "Error: already stopped\n");

    // start, status
    assert_eq!(run("k0s start"), (Some(0), String::new(), String::new()));
    assert_eq!(run("k0s start").2, "Error: already running\n");
    wait_ready(&lab, "c1");
    let (code, out, _) = run("k0s status -o json");
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with("{\n   \"Version\": \"v1.33.4+k0s.0\",\n   \"Pid\": "),
        "{out}"
    );
    let st: serde_json::Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&str> = st.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "Version",
            "Pid",
            "PPid",
            "Role",
            "SysInit",
            "StubFile",
            "Output",
            "Workloads",
            "SingleNode",
            "Args",
            "WorkerToAPIConnectionStatus",
            "ClusterConfig",
            "K0sVars"
        ]
    );
    assert_eq!(st["Role"], "controller");
    assert_eq!(st["Workloads"], true);
    assert_eq!(st["Args"][0], "/usr/local/bin/k0s");
    assert_eq!(st["Args"][1], "controller");
    assert_eq!(
        st["ClusterConfig"]["spec"]["storage"]["etcd"]["peerAddress"],
        addr.as_str()
    );
    assert_eq!(st["K0sVars"]["DataDir"], "/var/lib/k0s");
    assert_eq!(st["K0sVars"]["InvocationID"].as_str().unwrap().len(), 32);
    let (_, text, _) = run("k0s status");
    assert!(
        text.starts_with("Version: v1.33.4+k0s.0\nProcess ID: "),
        "{text}"
    );
    assert!(text.contains(
        "\nRole: controller\nWorkloads: true\nSingleNode: false\nKube-api probing successful: "
    ));

    // §3.3 reset refuses while running (v1.33.1–1.35.4 wording for v1.33.4)
    assert_eq!(
        run("k0s reset"),
        (
            Some(1),
            String::new(),
            "Error: k0s seems to be running, please stop k0s before reset\n".into()
        )
    );

    // §3.4 tokens
    assert_eq!(
        run("k0s token create --role x").2,
        "Error: unsupported role \"x\"; supported roles are \"controller\" and \"worker\"\n"
    );
    // The token carries the local <data-dir>/pki/ca.crt, as k0s reads it, even where the
    // cluster's own copy is not written yet (a controller that just became ready): the double
    // keeps that copy under this etcd key.
    lab.exec_ok(
        "c1",
        &format!("ETCDCTL_API=3 etcdctl --endpoints=http://{addr}:2379 del /k0s/pki/ca.crt"),
    );
    let local_ca = lab.exec_ok("c1", "base64 -w0 /var/lib/k0s/pki/ca.crt");
    let token = lab.ssh_ok(
        "c1",
        "k0s token create --role controller --expiry 30m0s --data-dir=/var/lib/k0s",
    );
    assert_eq!(token.lines().count(), 1);
    let kubeconfig = decode_token(token.trim());
    assert!(
        kubeconfig.contains(&format!("certificate-authority-data: {local_ca}\n")),
        "{kubeconfig}"
    );
    let re_server = format!("    server: https://{addr}:9443\n");
    assert!(
        kubeconfig
            .starts_with("apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: "),
        "{kubeconfig}"
    );
    assert!(kubeconfig.contains(&re_server), "{kubeconfig}");
    assert!(kubeconfig.contains("users:\n- name: controller-bootstrap\n  user:\n    token: "));
    let bearer = kubeconfig
        .rsplit("token: ")
        .next()
        .unwrap()
        .trim()
        .to_string();
    assert!(is_bootstrap_token(&bearer), "{bearer}");
    let worker = decode_token(lab.ssh_ok("c1", "k0s token create").trim());
    assert!(
        worker.contains(&format!("server: https://{addr}:6443\n"))
            && worker.contains("name: kubelet-bootstrap")
    );
    let id = &bearer[..6];
    assert_eq!(
        run(&format!("k0s token invalidate {id}")).1,
        format!("token {id} deleted successfully\n")
    );

    // §4.2 / §4.3 etcd
    assert_eq!(
        run("k0s etcd member-list").1,
        format!("{{\"members\":{{\"c1\":\"http://{addr}:2380\"}}}}\n")
    );
    let (code, out, err) = run("k0s etcd leave --peer-address 127.9.9.9");
    assert_eq!((code, out.as_str()), (Some(1), ""));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].starts_with("time=\""), "{err}");
    assert!(
        lines[0].ends_with(
            "\" level=error msg=\"Failed to get peer name\" peerURL=\"http://127.9.9.9:2380\""
        ),
        "{err}"
    );
    assert_eq!(lines[1], "Error: peer not found: http://127.9.9.9:2380");
    assert_eq!(
        run("k0s etcd leave --peer-address https://1.2.3.4:2380").2,
        "Error: invalid argument \"https://1.2.3.4:2380\" for \"--peer-address\" flag: neither an IP address nor a DNS name\n"
    );

    // kubectl subset
    assert_eq!(run("k0s kubectl get --raw=/readyz").1, "ok");
    assert_eq!(
        run("k0s kubectl delete node nope"),
        (
            Some(1),
            String::new(),
            "Error from server (NotFound): nodes \"nope\" not found\n".into()
        )
    );
    let em: serde_json::Value =
        serde_json::from_str(&run("k0s kubectl get etcdmembers -o json").1).unwrap();
    assert_eq!(em["items"][0]["metadata"]["name"], "c1");
    assert_eq!(em["items"][0]["status"]["peerAddress"], addr.as_str());
    assert_eq!(em["items"][0]["status"]["conditions"][0]["type"], "Joined");
    let (_, uid_json, _) = run("k0s kubectl get namespace kube-system -o json");
    let ns: serde_json::Value = serde_json::from_str(&uid_json).unwrap();
    assert_eq!(ns["metadata"]["uid"].as_str().unwrap(), uid(&lab, "c1"));
    let nodes: serde_json::Value =
        serde_json::from_str(&run("k0s kubectl get nodes -o json").1).unwrap();
    assert_eq!(nodes["items"][0]["metadata"]["name"], "c1");
    assert_eq!(
        run("k0s kubectl get controlnode.autopilot.k0sproject.io -o name").1,
        "controlnode.autopilot.k0sproject.io/c1\n"
    );
    assert_eq!(
        run("k0s kubectl drain c1 --ignore-daemonsets --delete-emptydir-data --force").1,
        "node/c1 cordoned\nnode/c1 drained\n"
    );
    assert_eq!(run("k0s kubectl uncordon c1").1, "node/c1 uncordoned\n");
    // k0s writes `spec: {}` (Go's omitempty drops leave=false) and a custom resource is stored
    // as written: the first patch adds the key, the second changes nothing.
    assert_eq!(em["items"][0]["spec"], serde_json::json!({}));
    assert_eq!(
        run("k0s kubectl patch etcdmember c1 -p '{\"spec\":{\"leave\":false}}' --type merge").1,
        "etcdmember.etcd.k0sproject.io/c1 patched\n"
    );
    assert_eq!(
        run("k0s kubectl patch etcdmember c1 -p '{\"spec\":{\"leave\":false}}' --type merge").1,
        "etcdmember.etcd.k0sproject.io/c1 patched (no change)\n"
    );
    assert_eq!(
        run("k0s kubeconfig admin").1.lines().next(),
        Some("apiVersion: v1")
    );

    // stop, reset keeps binary, config and token; prints the warning
    lab.ssh_ok("c1", "echo tok > /etc/k0s/k0stoken");
    assert_eq!(run("k0s stop"), (Some(0), String::new(), String::new()));
    assert_eq!(run("k0s status").2, NOT_RUNNING);
    let (code, out, err) = run("k0s reset");
    assert_eq!((code, out.as_str()), (Some(0), ""));
    assert!(
        err.starts_with("time=\"")
            && err.ends_with(
                " level=warning msg=\"To ensure a full reset, a node reboot is recommended.\"\n"
            ),
        "{err}"
    );
    assert_eq!(
        lab.ssh_ok(
            "c1",
            "ls /usr/local/bin; ls /etc/k0s; ls -A /var/lib/k0s; ls -A /etc/systemd/system"
        ),
        "k0s\nk0s.yaml\nk0stoken\n"
    );
    assert_eq!(
        run("k0s etcd member-list").2,
        "Error: can't list etcd cluster members: open /var/lib/k0s/pki/apiserver-etcd-client.crt: no such file or directory\n"
    );
    assert_eq!(
        run("k0s kubectl get nodes").2,
        "The connection to the server localhost:6443 was refused - did you specify the right host or port?\n"
    );
}

/// `kubectl get` with several resource types (the probe reads the cluster in one call): one
/// `List` with the items of every type in the order given, each with its own apiVersion and kind;
/// an unknown type fails before anything is printed.
#[test]
fn double_kubectl_get_several_types_is_one_list() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller")]);
    lab.install_double("c1");
    lab.ssh_ok("c1", "k0s install controller --enable-worker && k0s start");
    wait_ready(&lab, "c1");
    let registered = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes -o name") == "node/c1\n"
    });
    assert!(registered, "{}", log(&lab, "c1"));
    let run = |cmd: &str| {
        let o = lab.ssh("c1", cmd);
        (o.status.code(), stdout(&o), stderr(&o))
    };

    let types =
        "etcdmembers.etcd.k0sproject.io,namespaces,nodes,controlnodes.autopilot.k0sproject.io";
    let (code, out, err) = run(&format!("k0s kubectl get {types} -o json"));
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["metadata"], serde_json::json!({"resourceVersion": ""}));
    let items: Vec<(&str, &str, &str)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["apiVersion"].as_str().unwrap(),
                i["kind"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        items,
        [
            ("etcd.k0sproject.io/v1beta1", "EtcdMember", "c1"),
            ("v1", "Namespace", "default"),
            ("v1", "Namespace", "kube-node-lease"),
            ("v1", "Namespace", "kube-public"),
            ("v1", "Namespace", "kube-system"),
            ("v1", "Node", "c1"),
            ("autopilot.k0sproject.io/v1beta2", "ControlNode", "c1"),
        ]
    );
    let em = &list["items"][0];
    assert_eq!(em["status"]["peerAddress"], lab.address("c1").as_str());
    assert_eq!(list["items"][5]["status"]["conditions"][0]["type"], "Ready");

    // Short names, any order; -o name and tables (one per type) work too.
    assert_eq!(
        run("k0s kubectl get no,etcdmember -o name").1,
        "node/c1\netcdmember.etcd.k0sproject.io/c1\n"
    );
    let (code, table, _) = run("k0s kubectl get nodes,namespaces");
    assert_eq!(code, Some(0));
    assert!(table.starts_with("NAME      STATUS   ROLES"), "{table}");
    assert!(
        table.contains("\nnode/c1 ") && table.contains("\n\nNAME "),
        "{table}"
    );
    assert!(table.contains("\nnamespace/kube-system "), "{table}");

    // An unknown type anywhere in the list: kubectl's error, nothing on stdout, exit 1.
    assert_eq!(
        run("k0s kubectl get nodes,bogus,namespaces -o json"),
        (
            Some(1),
            String::new(),
            "error: the server doesn't have a resource type \"bogus\"\n".into()
        )
    );
    assert_eq!(
        run("k0s kubectl get nodes, -o json").2,
        "error: the server doesn't have a resource type \"\"\n"
    );
}

fn decode_token(token: &str) -> String {
    use base64::Engine as _;
    use std::io::Read as _;
    let gz = base64::engine::general_purpose::STANDARD
        .decode(token)
        .expect("base64 token");
    let mut s = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut s)
        .expect("gzip token");
    s
}

fn is_bootstrap_token(t: &str) -> bool {
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    matches!(t.split_once('.'), Some((a, b)) if ok(a, 6) && ok(b, 16))
}

#[test]
fn double_three_controllers_reset_rejoin_and_peer_urls_exist() {
    require_lab!();
    let lab = Lab::create(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
        ("c4", "controller"),
    ]);
    form_cluster(&lab, &["c1", "c2", "c3"]);
    let three = set(&["c1", "c2", "c3"]);
    let identity = uid(&lab, "c1");
    for h in ["c1", "c2", "c3"] {
        assert_eq!(member_names(&lab, h), three, "member list seen from {h}");
        assert_eq!(uid(&lab, h), identity, "one cluster identity seen from {h}");
    }
    let em: serde_json::Value =
        serde_json::from_str(&lab.ssh_ok("c2", "k0s kubectl get etcdmembers -o json")).unwrap();
    let ids: BTreeSet<&str> = em["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"]["memberID"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.iter().all(|i| u64::from_str_radix(i, 16).is_ok()));

    // reset keeps the member registered on the survivors
    lab.ssh_ok("c3", "k0s stop && k0s reset 2>/dev/null");
    assert_eq!(member_names(&lab, "c1"), three);

    // Re-joining while the stale member (now down) is registered: etcd's strict reconfig check
    // refuses the add because a voting member is unreachable.
    let t = Instant::now();
    lab.ssh_ok(
        "c3",
        "k0s install controller --token-file /etc/k0s/k0stoken",
    );
    let token = lab.ssh_ok("c1", "k0s token create --role controller");
    lab.ssh_ok(
        "c3",
        &format!("echo {} > /etc/k0s/k0stoken && k0s start", token.trim()),
    );
    assert!(wait_exited(&lab, "c3", Duration::from_secs(30)));
    let l = log(&lab, "c3");
    assert!(l.contains(&format!("Error: failed to sync etcd config: failed to synchronize etcd config with existing cluster via https://{}:9443: etcdserver: unhealthy cluster", lab.address("c1"))), "{l}");
    assert!(t.elapsed() < Duration::from_secs(30));

    // The stale member is removed by address from a healthy controller (silent), then the
    // re-join works.
    let o = lab.ssh(
        "c1",
        &format!("k0s etcd leave --peer-address {}", lab.address("c3")),
    );
    assert_eq!(
        (o.status.code(), stdout(&o), stderr(&o)),
        (Some(0), String::new(), String::new())
    );
    assert_eq!(member_names(&lab, "c1"), set(&["c1", "c2"]));
    // c3's EtcdMember object outlived its member. The new k0s rewrites it as k0s does, in two
    // calls (labels, then status), here 5 s apart: in between it shows the new start's label
    // beside the old member ID.
    // Null while c1 cannot answer (the membership is changing).
    let object = |name: &str| -> serde_json::Value {
        let o = lab.ssh("c1", "k0s kubectl get etcdmembers -o json");
        let list: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
        let items = list["items"].as_array().cloned().unwrap_or_default();
        items
            .into_iter()
            .find(|i| i["metadata"]["name"] == name)
            .unwrap_or_default()
    };
    const START: &str = "k0s.k0sproject.io/shutdown-on-leave";
    let before = object("c3");
    let old_id = before["status"]["memberID"].clone();
    assert!(old_id.is_string(), "{before}");
    lab.exec_ok(
        "c3",
        "printf 'member_status_gap 5\\n' > /etc/k0s-lab/k0s-knobs",
    );
    lab.ssh_ok("c3", "k0s start");
    let mut between = serde_json::Value::Null;
    let relabelled = lab.wait_until(Duration::from_secs(30), || {
        between = object("c3");
        between["metadata"]["labels"][START].is_string()
            && between["metadata"]["labels"][START] != before["metadata"]["labels"][START]
    });
    assert!(relabelled, "c3's object was never relabelled: {between}");
    assert_eq!(
        between["status"], before["status"],
        "status written with the labels"
    );
    assert_eq!(between["spec"], serde_json::json!({}));
    let mut after = serde_json::Value::Null;
    let rewritten = lab.wait_until(Duration::from_secs(30), || {
        after = object("c3");
        after["status"]["memberID"].is_string() && after["status"]["memberID"] != old_id
    });
    assert!(rewritten, "c3's status was never rewritten: {after}");
    assert_eq!(after["metadata"]["labels"], between["metadata"]["labels"]);
    let (was, now) = (
        &before["status"]["conditions"][0],
        &after["status"]["conditions"][0],
    );
    assert_eq!(
        (&now["type"], &now["status"]),
        (&"Joined".into(), &"True".into())
    );
    assert_eq!(now["message"], "Member joined");
    // SetCondition moves the time only when the status flips (True before, True now).
    assert_eq!(now["lastTransitionTime"], was["lastTransitionTime"]);
    wait_ready(&lab, "c3");
    assert_eq!(member_names(&lab, "c2"), three);
    assert_eq!(uid(&lab, "c3"), identity);

    // A host whose etcd peer address is a live member's: `Peer URLs already exists`.
    lab.install_double("c4");
    lab.exec_ok("c4", &format!("mkdir -p /etc/k0s && printf 'spec:\\n  storage:\\n    etcd:\\n      peerAddress: {}\\n' > /etc/k0s/k0s.yaml", lab.address("c3")));
    start_joining(&lab, "c1", "c4", "controller");
    assert!(wait_exited(&lab, "c4", Duration::from_secs(30)));
    let l = log(&lab, "c4");
    assert!(l.contains("etcdserver: Peer URLs already exists"), "{l}");
    assert_eq!(member_names(&lab, "c1"), three);

    // Declarative removal: spec.leave is reconciled by the leader.
    let o = lab.ssh_ok(
        "c1",
        "k0s kubectl patch etcdmember c2 -p '{\"spec\":{\"leave\":true}}' --type merge",
    );
    assert_eq!(o, "etcdmember.etcd.k0sproject.io/c2 patched\n");
    let gone = lab.wait_until(Duration::from_secs(20), || {
        !member_names(&lab, "c1").contains("c2")
    });
    assert!(gone, "c2 still a member");
    let out = lab.ssh_ok(
        "c1",
        "k0s kubectl wait etcdmember c2 --for condition=Joined=False --timeout=20s",
    );
    assert_eq!(out, "etcdmember.etcd.k0sproject.io/c2 condition met\n");
    assert_eq!(
        lab.ssh_ok("c1", "k0s kubectl delete etcdmember c2"),
        "etcdmember.etcd.k0sproject.io \"c2\" deleted\n"
    );
    assert_eq!(
        lab.ssh_ok("c1", "k0s kubectl delete controlnode c2"),
        "controlnode.autopilot.k0sproject.io \"c2\" deleted\n"
    );
}

#[test]
fn double_unhealthy_cluster_and_split_brain() {
    require_lab!();
    let lab = Lab::create(&[
        ("c1", "controller"),
        ("c2", "controller"),
        ("c3", "controller"),
        ("c4", "controller"),
    ]);
    form_cluster(&lab, &["c1", "c2", "c3"]);
    let identity = uid(&lab, "c1");

    // A voting member is down: adding a controller fails with `unhealthy cluster`.
    lab.power_off("c2");
    start_joining(&lab, "c1", "c4", "controller");
    assert!(wait_exited(&lab, "c4", Duration::from_secs(30)));
    let l = log(&lab, "c4");
    assert!(l.contains("etcdserver: unhealthy cluster"), "{l}");
    assert_eq!(member_names(&lab, "c1"), set(&["c1", "c2", "c3"]));

    // Removing a healthy member while another voter is down is refused too (§4.3 lines).
    let o = lab.ssh(
        "c1",
        &format!("k0s etcd leave --peer-address {}", lab.address("c3")),
    );
    assert_eq!((o.status.code(), stdout(&o)), (Some(1), String::new()));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].contains(" level=error msg=\"Failed to delete node from cluster\" peerID="),
        "{err}"
    );
    assert!(
        lines[0].ends_with(&format!(" peerURL=\"http://{}:2380\"", lab.address("c3"))),
        "{err}"
    );
    assert_eq!(lines[1], "Error: etcdserver: unhealthy cluster");

    // Power on: the installed unit starts k0s like systemd would; c2 rejoins its cluster.
    lab.power_on("c2");
    wait_ready(&lab, "c2");
    assert_eq!(uid(&lab, "c2"), identity);

    // A wiped controller started without a token bootstraps a second cluster (split brain).
    lab.wipe("c1");
    bootstrap(&lab, "c1");
    assert_eq!(member_names(&lab, "c1"), set(&["c1"]));
    assert_eq!(member_names(&lab, "c3"), set(&["c1", "c2", "c3"]));
    let other = uid(&lab, "c1");
    assert_ne!(other, identity);
    let ok = lab.wait_until(Duration::from_secs(20), || {
        let o = lab.ssh(
            "c3",
            "k0s kubectl get namespace kube-system -o jsonpath={.metadata.uid}",
        );
        o.status.success() && stdout(&o) == identity
    });
    assert!(ok, "old cluster keeps its identity");
}

#[test]
fn double_workers_tokens_and_heartbeats() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker"), ("w2", "worker")]);
    bootstrap(&lab, "c1");
    start_joining(&lab, "c1", "w1", "worker");
    let ready = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes")
            .contains("w1     Ready")
    });
    assert!(ready, "{}", lab.ssh_ok("c1", "k0s kubectl get nodes"));
    let st: serde_json::Value =
        serde_json::from_str(&lab.ssh_ok("w1", "k0s status -o json")).unwrap();
    assert_eq!(st["Role"], "worker");
    assert_eq!(st["ClusterConfig"], serde_json::Value::Null);
    assert_eq!(st["Args"][2], "--token-file=/etc/k0s/k0stoken");
    let node: serde_json::Value =
        serde_json::from_str(&lab.ssh_ok("c1", "k0s kubectl get node w1 -o json")).unwrap();
    assert_eq!(
        node["status"]["nodeInfo"]["machineID"],
        lab.host("w1").machine_id.as_str()
    );

    // An invalidated token is rejected on join.
    lab.install_double("w2");
    let token = lab.ssh_ok("c1", "k0s token create --role worker");
    let id = decode_token(token.trim()).rsplit("token: ").next().unwrap()[..6].to_string();
    lab.ssh_ok("c1", &format!("k0s token invalidate {id}"));
    lab.ssh_ok("w2", &format!("mkdir -p /etc/k0s && echo {} > /etc/k0s/k0stoken && k0s install worker --token-file /etc/k0s/k0stoken && k0s start", token.trim()));
    assert!(wait_exited(&lab, "w2", Duration::from_secs(30)));
    assert!(!lab.ssh_ok("c1", "k0s kubectl get nodes").contains("w2"));

    // So is an expired one.
    let expired = lab.ssh_ok("c1", "k0s token create --role worker --expiry 1s");
    std::thread::sleep(Duration::from_secs(2));
    lab.ssh_ok(
        "w2",
        &format!("echo {} > /etc/k0s/k0stoken && k0s start", expired.trim()),
    );
    assert!(wait_exited(&lab, "w2", Duration::from_secs(30)));
    assert!(!lab.ssh_ok("c1", "k0s kubectl get nodes").contains("w2"));
    let wlog = stdout(&lab.exec("w2", "cat /var/lib/k0s/logs/k0sworker.log"));
    assert!(
        wlog.contains("Error: failed to bootstrap kubelet client configuration"),
        "{wlog}"
    );

    // Heartbeats stop with the worker: NotReady after ~10 s.
    lab.ssh_ok("w1", "k0s stop");
    let not_ready = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes")
            .contains("w1     NotReady")
    });
    assert!(not_ready);
    let node: serde_json::Value =
        serde_json::from_str(&lab.ssh_ok("c1", "k0s kubectl get node w1 -o json")).unwrap();
    assert_eq!(node["status"]["conditions"][0]["status"], "Unknown");
    lab.ssh_ok("w1", "k0s start");
    let back = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes")
            .contains("w1     Ready")
    });
    assert!(back);
}

/// Names of the objects of `kind` as `via` lists them.
fn object_names(lab: &Lab, via: &str, kind: &str) -> Result<BTreeSet<String>, String> {
    let o = lab.ssh(via, &format!("k0s kubectl get {kind} -o json"));
    if !o.status.success() {
        return Err(stderr(&o));
    }
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("list JSON");
    Ok(v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect())
}

/// The pid k0s reports, or None while `k0s status` fails.
fn k0s_pid(lab: &Lab, host: &str) -> Option<u64> {
    let o = lab.ssh(host, "k0s status -o json");
    if !o.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).ok()?;
    v["Pid"].as_u64()
}

/// etcd keeps the hostname's case; EtcdMember objects do not exist before v1.30, carry the raw
/// hostname (refused by the API with capitals) up to v1.34.0 and the lower-cased one from
/// v1.34.1; ControlNode and Node are lower-cased, Node after --hostname-override.
#[test]
fn double_object_names_follow_k0s_by_version() {
    require_lab!();
    let lab = Lab::create(&[("Ctl-A", "controller"), ("w1", "worker")]);
    bootstrap(&lab, "Ctl-A");
    assert_eq!(member_names(&lab, "Ctl-A"), set(&["Ctl-A"]));
    let registered = lab.wait_until(Duration::from_secs(20), || {
        object_names(&lab, "Ctl-A", "controlnodes").is_ok_and(|n| n == set(&["ctl-a"]))
    });
    assert!(
        registered,
        "no ControlNode ctl-a; log:\n{}",
        log(&lab, "Ctl-A")
    );
    assert_eq!(
        object_names(&lab, "Ctl-A", "etcdmembers").unwrap(),
        BTreeSet::new(),
        "v1.33.4: an EtcdMember named \"Ctl-A\" is not a valid object"
    );
    assert!(log(&lab, "Ctl-A").contains("failed to create EtcdMember object"));

    // v1.34.1: lower-cased.
    let v1341 = lab.k0s_double_with_version("v1.34.1+k0s.0");
    lab.ssh_ok("Ctl-A", "k0s stop");
    lab.install_binary("Ctl-A", &v1341);
    lab.ssh_ok("Ctl-A", "k0s start");
    wait_ready(&lab, "Ctl-A");
    let named = lab.wait_until(Duration::from_secs(20), || {
        object_names(&lab, "Ctl-A", "etcdmembers").is_ok_and(|n| n == set(&["ctl-a"]))
    });
    assert!(named, "no EtcdMember ctl-a; log:\n{}", log(&lab, "Ctl-A"));
    assert_eq!(member_names(&lab, "Ctl-A"), set(&["Ctl-A"]));

    // A worker's Node is named after --hostname-override, lower-cased.
    lab.install_binary("w1", &v1341);
    let token = lab.ssh_ok("Ctl-A", "k0s token create --role worker");
    lab.ssh_ok("w1", &format!("mkdir -p /etc/k0s && echo {} > /etc/k0s/k0stoken && k0s install worker --token-file /etc/k0s/k0stoken --kubelet-extra-args=--hostname-override=W-One && k0s start", token.trim()));
    let node = lab.wait_until(Duration::from_secs(20), || {
        object_names(&lab, "Ctl-A", "nodes").is_ok_and(|n| n.contains("w-one"))
    });
    assert!(node, "{:?}", object_names(&lab, "Ctl-A", "nodes"));

    // Before v1.30 there is no EtcdMember type at all.
    let v129 = lab.k0s_double_with_version("v1.29.9+k0s.0");
    lab.ssh_ok("Ctl-A", "k0s stop");
    lab.install_binary("Ctl-A", &v129);
    lab.ssh_ok("Ctl-A", "k0s start");
    wait_ready(&lab, "Ctl-A");
    let err = object_names(&lab, "Ctl-A", "etcdmembers").unwrap_err();
    assert!(
        err.contains("the server doesn't have a resource type \"etcdmembers\""),
        "{err}"
    );
}

/// Restart=always, RestartSec=10: a k0s killed from outside comes back after about 10 s with
/// whatever binary is at the install path; `k0s stop` keeps it down.
#[test]
fn double_service_restarts_by_itself_unless_stopped() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller")]);
    bootstrap(&lab, "c1");
    let pid = k0s_pid(&lab, "c1").expect("running");
    let newer = lab.k0s_double_with_version("v1.33.5+k0s.0");
    lab.install_binary("c1", &newer);
    lab.exec_ok(
        "c1",
        "kill -9 $(cat /run/k0s-service/k0scontroller.service.pid)",
    );
    let killed = Instant::now();
    assert!(lab.wait_until(Duration::from_secs(5), || k0s_pid(&lab, "c1").is_none()));
    let back = lab.wait_until(Duration::from_secs(30), || {
        k0s_pid(&lab, "c1").is_some_and(|p| p != pid)
    });
    assert!(back, "k0s did not come back; log:\n{}", log(&lab, "c1"));
    assert!(
        killed.elapsed() >= Duration::from_secs(9),
        "restarted after {:?}, not RestartSec=10",
        killed.elapsed()
    );
    assert!(
        lab.ssh_ok("c1", "k0s status")
            .contains("Version: v1.33.5+k0s.0"),
        "the restart runs the binary at the install path"
    );
    wait_ready(&lab, "c1");

    lab.ssh_ok("c1", "k0s stop");
    std::thread::sleep(Duration::from_secs(13));
    assert_eq!(k0s_pid(&lab, "c1"), None, "a stopped service came back");
}

/// v1.35.1+k0s.0 workers read and decode the token file at every start: an empty one or
/// k0sctl's comment makes a joined worker exit (+k0s.1 and earlier releases start); a
/// placeholder token (k0sctl's workaround, k0sform's too) keeps it starting.
#[test]
fn double_v1_35_1_worker_needs_a_token_in_its_file() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&lab, "c1");
    let v1351 = lab.k0s_double_with_version("v1.35.1+k0s.0");
    start_joining(&lab, "c1", "w1", "worker");
    let ready = lab.wait_until(Duration::from_secs(20), || {
        lab.ssh_ok("c1", "k0s kubectl get nodes")
            .contains("w1     Ready")
    });
    assert!(ready);
    lab.ssh_ok("w1", "k0s stop && : > /etc/k0s/k0stoken");
    lab.install_binary("w1", &v1351);
    let o = lab.ssh("w1", "k0s start; sleep 1; k0s status");
    assert!(
        !o.status.success(),
        "a v1.35.1 worker ran with an empty token file"
    );
    let wlog = stdout(&lab.exec("w1", "cat /var/lib/k0s/logs/k0sworker.log"));
    assert!(
        wlog.contains("Error: token file \"/etc/k0s/k0stoken\" is empty: obtain a new token via \"k0s token create ...\""),
        "{wlog}"
    );
    // What k0sctl leaves in the file after a join (k0sctl phase/install_workers.go): Go's
    // base64 refuses the `#` (k0s #7202).
    lab.ssh_ok(
        "w1",
        "k0s stop 2>/dev/null; echo '# overwritten by k0sctl after join' > /etc/k0s/k0stoken",
    );
    let o = lab.ssh("w1", "k0s start; sleep 1; k0s status");
    assert!(
        !o.status.success(),
        "a v1.35.1+k0s.0 worker ran with k0sctl's comment"
    );
    let wlog = stdout(&lab.exec("w1", "cat /var/lib/k0s/logs/k0sworker.log"));
    assert!(
        wlog.contains("Error: failed to decode join token: illegal base64 data at input byte 0"),
        "{wlog}"
    );
    // v1.35.1+k0s.1 parses the token only when it needs one (k0s 81049b30b8), and v1.33.4
    // never did: a joined worker starts with the comment.
    for v in ["v1.35.1+k0s.1", "v1.33.4+k0s.0"] {
        lab.install_binary("w1", &lab.k0s_double_with_version(v));
        lab.ssh_ok("w1", "k0s stop 2>/dev/null; k0s start");
        assert!(
            lab.wait_until(Duration::from_secs(5), || k0s_pid(&lab, "w1").is_some()),
            "{v} refused k0sctl's comment"
        );
    }
    lab.ssh_ok("w1", "k0s stop");

    lab.install_binary("w1", &v1351);
    let placeholder = k0sform::k0s::placeholder_token(k0sform::k0s::TokenRole::Worker);
    lab.ssh_ok(
        "w1",
        &format!("echo {placeholder} > /etc/k0s/k0stoken && k0s start"),
    );
    assert!(
        lab.wait_until(Duration::from_secs(5), || k0s_pid(&lab, "w1").is_some()),
        "log:\n{}",
        stdout(&lab.exec("w1", "cat /var/lib/k0s/logs/k0sworker.log"))
    );
}

/// Test knob: `k0s status` blocks while /etc/k0s-lab/status-blocks exists on the host.
#[test]
fn double_status_blocks_while_the_knob_exists() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller")]);
    bootstrap(&lab, "c1");
    lab.exec_ok("c1", "touch /etc/k0s-lab/status-blocks");
    let t = Instant::now();
    let o = lab.ssh("c1", "timeout 3 k0s status");
    assert_eq!(o.status.code(), Some(124), "{}", stderr(&o));
    assert!(t.elapsed() >= Duration::from_secs(3));
    lab.exec_ok("c1", "rm /etc/k0s-lab/status-blocks");
    lab.ssh_ok("c1", "timeout 3 k0s status");
}

/// v1.35.5+: a joining controller is an etcd learner until the leader promotes it (at the
/// leader's next resync, every ~10 s whenever the learner joined); it serves no API before.
#[test]
fn double_v1_35_5_controllers_join_as_learners() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("c2", "controller")]);
    let v1355 = lab.k0s_double_with_version("v1.35.5+k0s.0");
    lab.install_binary("c1", &v1355);
    // The leader resyncs (and promotes) at its first pass after registering, 0.5 s after it is
    // ready, then every 20 s (+-10 %). c2 joins after that first pass (the sleep below), so it
    // stays a learner for 15 s or more, long enough to be seen as one on a loaded machine. A
    // join inside that first half second was promoted at once (seen in CI).
    lab.exec_ok(
        "c1",
        "printf 'promote_every 20\\n' > /etc/k0s-lab/k0s-knobs",
    );
    lab.ssh_ok("c1", "k0s install controller && k0s start");
    wait_ready(&lab, "c1");
    std::thread::sleep(Duration::from_secs(2));
    let token = lab.ssh_ok("c1", "k0s token create --role controller --expiry 1h");
    lab.install_binary("c2", &v1355);
    lab.ssh_ok(
        "c2",
        &format!(
            "mkdir -p /etc/k0s && echo {} > /etc/k0s/k0stoken && k0s install controller --token-file /etc/k0s/k0stoken && k0s start",
            token.trim()
        ),
    );
    let c2 = format!("http://{}:2380", lab.address("c2"));
    let learner = |want: bool| {
        let out = lab.ssh_ok(
            "c1",
            &format!(
                "ETCDCTL_API=3 etcdctl --endpoints=http://{}:2379 member list -w json",
                lab.address("c1")
            ),
        );
        let v: serde_json::Value = serde_json::from_str(&out).expect("etcdctl JSON");
        v["members"].as_array().expect("members").iter().any(|m| {
            m["peerURLs"][0] == c2.as_str() && m["isLearner"].as_bool().unwrap_or(false) == want
        })
    };
    assert!(
        lab.wait_until(Duration::from_secs(10), || learner(true)),
        "c2 was not added as a learner; c1 log:\n{}\nc2 log:\n{}",
        log(&lab, "c1"),
        log(&lab, "c2")
    );
    assert!(
        !lab.ssh("c2", "k0s kubectl get --raw=/readyz")
            .status
            .success(),
        "a learner served the API"
    );
    assert!(
        lab.wait_until(Duration::from_secs(30), || learner(false)),
        "c2 was never promoted; log:\n{}",
        log(&lab, "c1")
    );
    wait_ready(&lab, "c2");
}

/// Knobs `node_grace` and `kubelet_latency`: a stopped kubelet's Node keeps showing Ready with
/// its old heartbeat for the grace time; a restarted worker posts again only after the latency,
/// and the Ready condition keeps its lastTransitionTime (it never showed otherwise).
#[test]
fn double_stale_ready_until_the_restarted_kubelet_posts() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&lab, "c1");
    start_joining(&lab, "c1", "w1", "worker");
    let ready_of = || -> serde_json::Value {
        let node: serde_json::Value =
            serde_json::from_str(&lab.ssh_ok("c1", "k0s kubectl get node w1 -o json")).unwrap();
        node["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .cloned()
            .unwrap()
    };
    assert!(lab.wait_until(Duration::from_secs(20), || ready_of()["status"] == "True"));
    for h in ["c1", "w1"] {
        lab.exec_ok(
            h,
            "printf 'node_grace 30\\nkubelet_latency 4\\n' > /etc/k0s-lab/k0s-knobs",
        );
    }
    lab.ssh_ok("w1", "k0s stop");
    let before = ready_of();
    std::thread::sleep(Duration::from_secs(3));
    // Past the 2 s heartbeat: still Ready, the heartbeat of the stopped kubelet.
    let stale = ready_of();
    assert_eq!(stale["status"], "True", "{stale}");
    assert_eq!(stale["lastHeartbeatTime"], before["lastHeartbeatTime"]);
    lab.ssh_ok("w1", "k0s start");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        ready_of()["lastHeartbeatTime"],
        before["lastHeartbeatTime"],
        "posted before kubelet_latency"
    );
    assert!(
        lab.wait_until(Duration::from_secs(10), || ready_of()["lastHeartbeatTime"]
            != before["lastHeartbeatTime"]),
        "the restarted kubelet never posted"
    );
    let fresh = ready_of();
    assert_eq!(fresh["status"], "True");
    assert_eq!(
        fresh["lastTransitionTime"], before["lastTransitionTime"],
        "{fresh}"
    );
}

/// `kubectl get nodes --watch-only -o name`: nothing for the Nodes as they are, then one
/// `node/NAME` line per change (here w1 joining, then its heartbeats) until killed; formats the
/// double does not watch with are refused.
#[test]
fn double_kubectl_watch_prints_a_line_per_node_change() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller"), ("w1", "worker")]);
    bootstrap(&lab, "c1");
    lab.ssh_ok(
        "c1",
        "setsid timeout 8 k0s kubectl get nodes --watch-only -o name \
         >/root/watch.out 2>&1 </dev/null &",
    );
    start_joining(&lab, "c1", "w1", "worker");
    let lines = || lab.exec_ok("c1", "cat /root/watch.out");
    assert!(
        lab.wait_until(Duration::from_secs(20), || lines().contains("node/w1")),
        "no event for w1: {:?}",
        lines()
    );
    // Ended by its timeout; every line named the one Node.
    assert!(lab.wait_until(Duration::from_secs(20), || {
        !lab.exec_ok(
            "c1",
            "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; echo; done",
        )
        .contains("--watch-only")
    }));
    let out = lines();
    assert!(out.lines().all(|l| l == "node/w1"), "{out}");

    let r = lab.ssh("c1", "k0s kubectl get nodes --watch -o yaml");
    assert_eq!(r.status.code(), Some(1));
    assert!(stderr(&r).starts_with("error: "), "{}", stderr(&r));
}

/// The double reads flags as k0s and kubectl do: `--kubelet-root-dir` exists from v1.32.1 (and
/// v1.31.8), `--start` from v1.35.1 (k0s git tags); kubectl's `--skip-wait-for-delete-timeout`
/// is an integer. Knob: `k0s reset`'s clean-up fails as k0s's does (`Error: errors occurred
/// during clean-up: …`, exit 1, after the reboot warning), uninstalled all the same.
#[test]
fn double_gates_flags_by_version_and_fails_reset_as_k0s() {
    require_lab!();
    let lab = Lab::create(&[("c1", "controller")]);
    lab.install_double("c1");
    lab.exec_ok("c1", "mkdir -p /etc/k0s && : > /etc/k0s/k0s.yaml");
    let run = |cmd: &str| {
        let o = lab.ssh("c1", cmd);
        (o.status.code(), stderr(&o))
    };
    // v1.33.4: --kubelet-root-dir yes, --start no.
    assert_eq!(
        run("k0s install controller --start"),
        (Some(1), "Error: unknown flag: --start\n".into())
    );
    assert_eq!(
        run("k0s install controller --kubelet-root-dir=/srv/kubelet").0,
        Some(0)
    );
    lab.exec_ok("c1", "rm /etc/systemd/system/k0scontroller.service");
    for (version, root_dir, start) in [
        ("v1.31.7+k0s.0", false, false),
        ("v1.31.8+k0s.0", true, false),
        ("v1.32.0+k0s.0", false, false),
        ("v1.32.1+k0s.0", true, false),
        ("v1.35.0+k0s.0", true, false),
        ("v1.35.1+k0s.0", true, true),
    ] {
        lab.install_binary("c1", &lab.k0s_double_with_version(version));
        let (code, err) = run("k0s install controller --kubelet-root-dir=/srv/kubelet");
        if root_dir {
            assert_eq!(code, Some(0), "{version}: {err}");
            lab.exec_ok("c1", "rm /etc/systemd/system/k0scontroller.service");
        } else {
            assert_eq!(
                (code, err.as_str()),
                (Some(1), "Error: unknown flag: --kubelet-root-dir\n"),
                "{version}"
            );
        }
        let (code, err) = run("k0s install controller --start");
        assert_eq!(code == Some(0), start, "{version}: {err}");
        if start {
            lab.ssh_ok("c1", "k0s stop && k0s reset 2>/dev/null");
        } else {
            assert_eq!(err, "Error: unknown flag: --start\n", "{version}");
        }
    }
    lab.install_double("c1");
    bootstrap(&lab, "c1");
    let (code, err) = run(
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl drain --skip-wait-for-delete-timeout=30s node/c1",
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        "error: invalid argument \"30s\" for \"--skip-wait-for-delete-timeout\" flag: strconv.ParseInt: parsing \"30s\": invalid syntax\nSee 'kubectl drain --help' for usage.\n"
    );

    lab.exec_ok(
        "c1",
        "echo 'failed unmount /var/lib/k0s/kubelet' > /etc/k0s-lab/reset-fails",
    );
    let (code, err) = run("k0s stop && k0s reset");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("level=warning msg=\"To ensure a full reset, a node reboot is recommended.\"\nError: errors occurred during clean-up: failed unmount /var/lib/k0s/kubelet\n"),
        "{err}"
    );
    lab.exec_ok("c1", "test ! -e /etc/systemd/system/k0scontroller.service");
}

/// Slot K of a lab with network namespaces (its bridges, netns and nft table are named after it).
fn net_slot(lab: &Lab) -> u64 {
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lab.dir().join("lab.json")).unwrap())
            .unwrap();
    info["net"]["slot"].as_u64().expect("lab.json net.slot")
}

fn listening(lab: &Lab, host: &str, port: u16) -> String {
    lab.exec_ok(host, &format!("ss -Hltn sport = :{port}"))
}

/// Hosts in their own network namespaces (labnet.py): a private network on the lab's bridge, an
/// SSH address that is not on the host (DNAT), two interfaces; nothing reaches this machine or
/// leaves it; k0s's default peer address is the first interface's and etcd listens there;
/// parallel labs get their own slots; teardown leaves no bridge, namespace or nft table.
#[test]
fn lab_netns_hosts_private_networks_nat_and_teardown() {
    require_lab!();
    let hosts = [
        ("c1", "controller"),
        ("c2", "controller"),
        ("w1", "worker"),
        ("w2", "worker"),
    ];
    let opts = || {
        LabOptions::default()
            .net("c1", "nat")
            .net("c2", "dual")
            .net("w1", "private")
    };
    let (mut lab, mut other) = std::thread::scope(|s| {
        let a = s.spawn(|| Lab::create_with(&hosts, opts()));
        let b = s.spawn(|| Lab::create_with(&hosts, opts()));
        (a.join().unwrap(), b.join().unwrap())
    });
    let k = net_slot(&lab);
    assert_ne!(k, net_slot(&other), "parallel labs share a network slot");
    let (c1, c2, w1) = (lab.host("c1"), lab.host("c2"), lab.host("w1"));
    let c1_priv = c1.private_address.clone().unwrap();
    let c2_priv = c2.private_address.clone().unwrap();
    let c2_pub = c2.public_address.clone().unwrap();
    assert_eq!(c1_priv, format!("10.244.{k}.11"));
    assert_eq!(c2_pub, format!("100.64.{k}.12"));
    // nat: SSH at a loopback address that is not on the host.
    assert!(c1.address.starts_with("127."), "{c1:?}");
    let addrs = lab.ssh_ok("c1", "ip -4 -o addr show");
    assert!(addrs.contains(&format!(" {c1_priv}/24 ")), "{addrs}");
    assert!(!addrs.contains(&c1.address), "{addrs}");
    assert_eq!(lab.ssh_ok("c1", "hostname"), "c1\n");
    // dual: SSH at the public address on eth0, the private one on eth1.
    assert_eq!(c2.address, c2_pub);
    let addrs = lab.ssh_ok("c2", "ip -4 -o addr show");
    assert!(
        addrs.contains(&format!("eth0    inet {c2_pub}/24")),
        "{addrs}"
    );
    assert!(
        addrs.contains(&format!("eth1    inet {c2_priv}/24")),
        "{addrs}"
    );
    assert_eq!(
        lab.ssh_ok("c2", "ip route list scope global"),
        format!("10.245.{k}.0/24 via 10.244.{k}.1 dev eth1 \n")
    );
    assert_eq!(w1.address, w1.private_address.clone().unwrap());
    // A host sharing this machine's namespace has no network of its own: `ip` is hidden there
    // (it would show this machine's), so address detection finds nothing, as without `ip`.
    let o = lab.ssh("w2", "ip -o -4 addr show scope global");
    assert!(!o.status.success() && stdout(&o).is_empty(), "{o:?}");
    // The other lab's hosts are on their own bridge.
    assert_ne!(other.host("c1").private_address, c1.private_address);
    // Hosts reach each other on the private network; not this machine, not the 'VPC' route,
    // not the other lab.
    let probe = |to: &str| {
        lab.exec(
            "c1",
            &format!("timeout 3 /usr/bin/python3 -c 'import socket; socket.create_connection((\"{to}\", 22), timeout=1)'"),
        )
        .status
        .success()
    };
    assert!(probe(&c2_priv));
    assert!(
        !probe(&format!("10.244.{k}.1")),
        "a host reaches this machine"
    );
    assert!(
        !probe(&format!("10.245.{k}.9")),
        "a host's traffic leaves the lab"
    );
    assert!(!probe(&other.host("c1").private_address.unwrap()));
    assert!(!probe(&c2_pub), "c1 has no 'public' interface");
    // k0s's default peer address (no peerAddress): the first interface's first address.
    bootstrap(&lab, "c1");
    start_joining(&lab, "c1", "c2", "controller");
    wait_ready(&lab, "c2");
    let peers: BTreeSet<String> = members(&lab, "c1")["members"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        peers,
        set(&[
            &format!("http://{c1_priv}:2380"),
            &format!("http://{c2_pub}:2380")
        ])
    );
    assert!(listening(&lab, "c1", 2380).contains(&format!("{c1_priv}:2380")));
    assert!(listening(&lab, "c2", 2380).contains(&format!("{c2_pub}:2380")));
    // Torn down: nothing of either lab is left on this machine.
    let other_k = net_slot(&other);
    lab.teardown();
    other.teardown();
    for k in [k, other_k] {
        for br in [format!("k0slab{k}p"), format!("k0slab{k}u")] {
            assert!(
                !std::path::Path::new(&format!("/sys/class/net/{br}")).exists(),
                "{br}"
            );
        }
        let netns = std::fs::read_dir("/run/netns")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        assert!(
            !netns.iter().any(|n| n.starts_with(&format!("k0slab{k}-"))),
            "{netns:?}"
        );
        let nft = std::process::Command::new("nft")
            .args(["list", "table", "ip", &format!("k0slab_{k}")])
            .output()
            .unwrap();
        assert!(
            !nft.status.success(),
            "nft table k0slab_{k} survived teardown"
        );
    }
}
