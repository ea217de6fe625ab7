//! The k0s double's command line against the samples in testdata/reference/k0s-cli.md: output,
//! flags gated by version, kubectl get and watch, reset's failures.

use super::*;

const NOT_RUNNING: &str = "Error: status: can't get \"status\" via \"/run/k0s/status.sock\": Get \"http://localhost/status\": dial unix /run/k0s/status.sock: connect: no such file or directory\n";

/// `out` as k0s prints a JSON object: starting with `start` (its indentation), with exactly
/// `keys` in that order; parsed.
#[track_caller]
fn json_object_of(out: &str, start: &str, keys: &[&str]) -> serde_json::Value {
    assert!(out.starts_with(start), "{out}");
    let v: serde_json::Value = serde_json::from_str(out).unwrap();
    let got: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(got, keys);
    v
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
    let v = json_object_of(
        &out,
        "{\n   \"k0s\": \"v1.33.4+k0s.0\",\n   \"runc\": ",
        &[
            "k0s",
            "runc",
            "containerd",
            "kubernetes",
            "kine",
            "etcd",
            "konnectivity",
        ],
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
    let st = json_object_of(
        &out,
        "{\n   \"Version\": \"v1.33.4+k0s.0\",\n   \"Pid\": ",
        &[
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
            "K0sVars",
        ],
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

fn is_bootstrap_token(t: &str) -> bool {
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    matches!(t.split_once('.'), Some((a, b)) if ok(a, 6) && ok(b, 16))
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
