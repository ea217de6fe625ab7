//! Adopting clusters built by hand or by k0sctl: refresh-only, nothing planned, then upgraded or a
//! controller replaced.

use super::*;

/// Moving from k0sctl: a cluster built by hand (as k0sctl would) is adopted. `plan` shows the
/// adoption and changes nothing; `apply -refresh-only` records every identity without touching
/// a host; afterwards there is nothing to do.
#[test]
fn cluster_built_by_hand_is_adopted_with_refresh_only() {
    require_lab!();
    let c = Cluster::new(&[("c1", "controller"), ("c2", "controller"), ("w1", "worker")]);
    for h in ["c1", "c2", "w1"] {
        c.lab.install_double(h);
    }
    let a1 = c.lab.address("c1");
    c.lab.ssh_ok(
        "c1",
        &format!("mkdir -p /etc/k0s && printf 'apiVersion: k0s.k0sproject.io/v1beta1\\nkind: ClusterConfig\\nspec:\\n  storage:\\n    etcd:\\n      peerAddress: {a1}\\n' > /etc/k0s/k0s.yaml && k0s install controller --config=/etc/k0s/k0s.yaml && k0s start"),
    );
    wait_api_ready(&c, "c1");
    let ctoken = c
        .lab
        .ssh_ok("c1", "k0s token create --role=controller --expiry=30m");
    let wtoken = c
        .lab
        .ssh_ok("c1", "k0s token create --role=worker --expiry=30m");
    let a2 = c.lab.address("c2");
    c.lab.ssh_ok(
        "c2",
        &format!("mkdir -p /etc/k0s && printf '%s' '{}' > /etc/k0s/k0stoken && printf 'apiVersion: k0s.k0sproject.io/v1beta1\\nkind: ClusterConfig\\nspec:\\n  storage:\\n    etcd:\\n      peerAddress: {a2}\\n' > /etc/k0s/k0s.yaml && k0s install controller --config=/etc/k0s/k0s.yaml --token-file=/etc/k0s/k0stoken && k0s start", ctoken.trim()),
    );
    c.lab.ssh_ok(
        "w1",
        &format!("mkdir -p /etc/k0s && printf '%s' '{}' > /etc/k0s/k0stoken && k0s install worker --token-file=/etc/k0s/k0stoken && k0s start", wtoken.trim()),
    );
    c.eventually(60, "two members", || c.members("c1").len() == 2);
    c.eventually(60, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));
    let uid = assert_one_cluster(&c, &["c1", "c2"], &["c1", "c2"]);

    let snaps: Vec<String> = ["c1", "c2", "w1"]
        .iter()
        .map(|n| c.host_snapshot(n))
        .collect();
    c.run(&["plan"])
        .expect(0)
        .contains("<=")
        .contains("found running");
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
    assert_eq!(
        snaps,
        ["c1", "c2", "w1"]
            .iter()
            .map(|n| c.host_snapshot(n))
            .collect::<Vec<_>>(),
        "adoption changed a host"
    );
    let state = c.state_json();
    assert_eq!(state["cluster"]["uid"], uid.as_str());
    for h in c.lab.hosts() {
        let rec = c.state_host(&h.name).expect("host adopted into the state");
        assert_eq!(rec["machine_id"], h.machine_id.as_str());
        assert_eq!(rec["host_key"], h.host_key_fingerprint.as_str());
    }
    assert!(c.state_host("c2").expect("c2")["etcd"]["member_id"].is_string());
}

/// Issue 13: a cluster built exactly as k0sctl v0.32 builds it from the same k0sctl.yaml — its
/// `k0s install` lines (k0sctl `cluster/host.go` `K0sInstallFlags`: the user's flags, then
/// `--data-dir`, `--token-file` on joiners, `--config` on controllers, `--kubelet-extra-args`
/// with `--node-ip` on workers with a private address) and its k0s.yaml files (k0sctl
/// `phase/configure_k0s.go`: a timestamp header, `spec.k0s.config` with every controller's
/// address in `spec.api.sans`, `storage.etcd.peerAddress` = the private address, no
/// `api.address`) — is adopted with `apply -refresh-only` and then plans no changes; a version
/// bump then upgrades every host and changes nothing else.
#[test]
fn cluster_built_by_k0sctl_is_adopted_and_plans_no_changes() {
    require_lab!();
    let hosts = ["c1", "c2", "c3", "w1"];
    let mut spec_opts = SpecOptions {
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        k0s_config: Some(
            "spec:\n  api:\n    sans:\n    - k8s.example.com\n  telemetry:\n    enabled: false"
                .into(),
        ),
        ..SpecOptions::default()
    };
    spec_opts.host_yaml.insert(
        "w1".into(),
        "installFlags:\n- --labels=zone=a,app=x\n- -l kubelet=2".into(),
    );
    let mut c = Cluster::with(THREE_PLUS_ONE, LabOptions::default(), spec_opts);
    for h in hosts {
        c.lab.install_double(h);
    }
    let addr: Vec<String> = ["c1", "c2", "c3"]
        .iter()
        .map(|h| c.lab.address(h))
        .collect();
    // What k0sctl writes on controller `i` (yaml.v2 output of the mapping, keys sorted).
    let k0sctl_config = |i: usize| {
        let sans: String = addr.iter().map(|a| format!("    - {a}\n")).collect();
        format!(
            "# generated-by-k0sctl 2026-08-01T10:00:0{i}Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    sans:\n    - k8s.example.com\n{sans}  storage:\n    etcd:\n      peerAddress: {}\n  telemetry:\n    enabled: false\n",
            addr[i]
        )
    };
    controllers_as_k0sctl(&c, &k0sctl_config);
    join_worker_as_k0sctl(&c, "w1", "--labels=zone=a,app=x -l kubelet=2 ");
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    // k0s recorded the worker's flags its own way: labels sorted, every log level.
    let unit = c
        .lab
        .ssh_ok("w1", "cat /etc/systemd/system/k0sworker.service");
    assert!(unit.contains("--labels=app=x,zone=a"), "{unit}");
    assert!(
        unit.contains("--logging=containerd=info,etcd=info"),
        "{unit}"
    );

    adopt_changes_nothing(&c, &hosts);
    assert_eq!(c.state_json()["cluster"]["uid"], uid.as_str());

    // A version bump upgrades every host and nothing else: no config rewrite, no flag change.
    let r = plan_upgrade_to_v1_33_5(&mut c, &hosts);
    assert!(!r.text().contains("k0s.yaml differs"), "{}", r.text());
    assert!(!r.text().contains("install flags differ"), "{}", r.text());
    c.apply().contains("Apply complete");
    for h in hosts {
        assert_eq!(
            c.lab.ssh_ok(h, "k0s version").trim(),
            "v1.33.5+k0s.0",
            "{h}"
        );
    }
    for (i, h) in ["c1", "c2", "c3"].iter().enumerate() {
        assert_eq!(
            c.lab.ssh_ok(h, "cat /etc/k0s/k0s.yaml"),
            k0sctl_config(i),
            "{h}: the upgrade rewrote k0sctl's k0s.yaml"
        );
    }
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Adopt the running `hosts` with `apply -refresh-only` (exit 0): the next
/// `plan -detailed-exitcode` exits 0 with "No changes", and no host changed.
#[track_caller]
fn adopt_changes_nothing(c: &Cluster, hosts: &[&str]) {
    let before: Vec<String> = hosts.iter().map(|h| c.host_snapshot(h)).collect();
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
    plan_changes_nothing(c, &["-detailed-exitcode"])
        .expect(0)
        .contains("No changes");
    let after: Vec<String> = hosts.iter().map(|h| c.host_snapshot(h)).collect();
    assert_eq!(before, after, "adoption changed a host");
}

/// `name` joins through c1 as k0sctl joins a worker: a token in /etc/k0s/k0stoken (0600), then
/// `k0s install worker` with the user's `flags` first, the data dir, the token file and
/// `--kubelet-extra-args=--node-ip=<private address>` (k0sctl `cluster/host.go`
/// `K0sInstallFlags`); waits until its Node is Ready.
fn join_worker_as_k0sctl(c: &Cluster, name: &str, flags: &str) {
    join_worker_as_k0sctl_at(c, name, flags, &c.lab.address(name));
}

/// A controller and a worker built as k0sctl builds them (`k0s install` lines of k0sctl
/// `cluster/host.go` `K0sInstallFlags`, k0s.yaml of `phase/configure_k0s.go`), the worker's
/// token file overwritten after the join as k0sctl does (`phase/install_workers.go`:
/// `# overwritten by k0sctl after join`), then adopted with `apply -refresh-only`.
/// The spec's `k0sBinaryPath`, when it names one, is the k0s installed.
fn k0sctl_built_controller_and_worker(c: &Cluster) {
    for h in ["c1", "w1"] {
        match &c.spec_opts.k0s_binary {
            Some(b) => c.lab.install_binary(h, b),
            None => c.lab.install_double(h),
        }
    }
    let a1 = c.lab.address("c1");
    let write = |host: &str, path: &str, text: &str| {
        c.lab.ssh_ok(
            host,
            &format!("mkdir -p /etc/k0s && printf '%s' '{text}' > {path} && chmod 600 {path}"),
        );
    };
    write(
        "c1",
        "/etc/k0s/k0s.yaml",
        &format!(
            "# generated-by-k0sctl 2026-08-01T10:00:00Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    sans:\n    - {a1}\n  storage:\n    etcd:\n      peerAddress: {a1}\n"
        ),
    );
    c.lab.ssh_ok(
        "c1",
        "k0s install controller --data-dir=/var/lib/k0s --config=/etc/k0s/k0s.yaml && k0s start",
    );
    wait_api_ready(c, "c1");
    join_worker_as_k0sctl(c, "w1", "");
    c.lab.ssh_ok(
        "w1",
        "printf '# overwritten by k0sctl after join\\n' > /etc/k0s/k0stoken",
    );
    c.run(&["apply", "-refresh-only", "-auto-approve"])
        .expect(0);
}

/// Issue 27.4, k0s #7202: k0s v1.35.1+k0s.0 workers decode their token file at every start and
/// refuse k0sctl's comment. Upgrading an adopted k0sctl-built worker to that version writes a
/// decodable placeholder first, as k0sctl ≥ v0.29 does (`phase/ensure_join_token_workaround.go`):
/// the worker comes back on the new version.
#[test]
fn k0sctl_built_worker_upgraded_to_v1_35_1_k0s_0_gets_a_decodable_token_file() {
    require_lab!();
    let mut c = c1_w1_at("v1.33.4+k0s.0");
    k0sctl_built_controller_and_worker(&c);
    assert_eq!(
        c.lab.ssh_ok("w1", "cat /etc/k0s/k0stoken"),
        "# overwritten by k0sctl after join\n"
    );
    c.spec_opts.k0s_version = Some("v1.35.1+k0s.0".into());
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version("v1.35.1+k0s.0"));
    c.write_spec(&["c1", "w1"]);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("v1.33.4+k0s.0 → v1.35.1+k0s.0")
        .contains("token file: a decodable placeholder is written first where it holds no join token (k0s v1.35.1+k0s.0 workers refuse to start otherwise, k0s #7202; as k0sctl)");
    c.apply()
        .contains("Apply complete")
        .contains("/etc/k0s/k0stoken held no join token k0s v1.35.1+k0s.0 can decode: a placeholder was written (k0s #7202)");
    assert_eq!(c.lab.ssh_ok("w1", "k0s version").trim(), "v1.35.1+k0s.0");
    let placeholder = k0sform::k0s::placeholder_token(k0sform::k0s::TokenRole::Worker);
    assert_eq!(c.lab.ssh_ok("w1", "cat /etc/k0s/k0stoken"), placeholder);
    assert_eq!(
        c.lab.ssh_ok("w1", "stat -c %a /etc/k0s/k0stoken").trim(),
        "600"
    );
    // It restarts on its own too (a reboot): the file decodes.
    c.lab.power_off("w1");
    c.lab.power_on("w1");
    c.eventually(30, "w1 Ready after a power cycle", || {
        c.nodes("c1").get("w1") == Some(&true)
    });
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27.4, k0s #7202: a k0sctl-built worker already running v1.35.1+k0s.0 with k0sctl's
/// comment in its token file runs fine until its next start, which fails. With nothing else to
/// do, the plan rewrites the file with a decodable placeholder (the probe reports only whether
/// it decodes), the apply writes it without restarting k0s (as k0sctl's
/// `phase/ensure_join_token_workaround.go`, on every apply), the next plan is empty, and the
/// worker's k0s starts again after a restart.
#[test]
fn k0sctl_built_worker_running_v1_35_1_k0s_0_gets_a_decodable_token_file_without_a_restart() {
    require_lab!();
    let mut c = c1_w1_at("v1.35.1+k0s.0");
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version("v1.35.1+k0s.0"));
    c.write_spec(&["c1", "w1"]);
    k0sctl_built_controller_and_worker(&c);
    assert_eq!(c.lab.ssh_ok("w1", "k0s version").trim(), "v1.35.1+k0s.0");
    assert_eq!(
        c.lab.ssh_ok("w1", "cat /etc/k0s/k0stoken"),
        "# overwritten by k0sctl after join\n"
    );
    let pid = || {
        c.lab
            .ssh_ok("w1", "cat /run/k0s-service/k0sworker.service.pid")
    };
    let before = pid();
    plan_changes_nothing(&c, &[]).expect(0).contains(
        "token file /etc/k0s/k0stoken: a decodable placeholder is written, k0s not restarted",
    );
    c.apply()
        .contains("Apply complete")
        .contains("/etc/k0s/k0stoken held no join token k0s v1.35.1+k0s.0 can decode: a placeholder was written (k0s #7202)");
    let placeholder = k0sform::k0s::placeholder_token(k0sform::k0s::TokenRole::Worker);
    assert_eq!(c.lab.ssh_ok("w1", "cat /etc/k0s/k0stoken"), placeholder);
    assert_eq!(
        c.lab.ssh_ok("w1", "stat -c %a /etc/k0s/k0stoken").trim(),
        "600"
    );
    assert_eq!(pid(), before, "k0s was not restarted");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    // Its k0s starts again (a reboot): the file decodes.
    c.lab.power_off("w1");
    c.lab.power_on("w1");
    c.eventually(30, "w1's k0s running after a power cycle", || {
        c.lab.ssh("w1", "k0s status").status.success() && c.nodes("c1").get("w1") == Some(&true)
    });
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 13: a single-host kine cluster built exactly as k0sctl v0.32 builds it (k0sctl
/// `cluster/host.go` `K0sInstallFlags`: `--data-dir`, `--single=true`, `--config`; its k0s.yaml
/// from `phase/configure_k0s.go`: a timestamp header, the spec's config, the host's address in
/// `spec.api.sans`, no `storage:` key because k0sctl's storage type for `single` is kine) is
/// adopted with `apply -refresh-only`: no etcd member is looked for, and the next plan changes
/// nothing.
#[test]
fn single_kine_cluster_built_by_k0sctl_is_adopted_and_plans_no_changes() {
    require_lab!();
    let spec_opts = SpecOptions {
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        k0s_config: Some("spec:\n  telemetry:\n    enabled: false".into()),
        ..SpecOptions::default()
    };
    let c = Cluster::with(&[("s1", "single")], LabOptions::default(), spec_opts);
    c.lab.install_double("s1");
    let addr = c.lab.address("s1");
    let cfg = format!(
        "# generated-by-k0sctl 2026-08-01T10:00:00Z\napiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    sans:\n    - {addr}\n  telemetry:\n    enabled: false\n"
    );
    start_single_as_k0sctl_then_adopt(&c, Some(&cfg), "kine");
    assert!(c.state_host("s1").expect("recorded")["etcd"].is_null());
    assert_eq!(c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml"), cfg);
}

/// Issue 27: a `single` host built as k0sctl builds it without `spec.k0s.config`: its k0s.yaml is
/// `k0s config create` (k0sctl `phase/configure_k0s.go` `Prepare`; the host's own address is
/// already in its SANs), whose `storage.type: etcd` makes it run etcd despite `--single`. The
/// spec names the version without a `v` (valid for k0sctl). Adopted with `apply -refresh-only`,
/// the next plan changes nothing: no switch to kine, no drain.
#[test]
fn single_etcd_host_built_by_k0sctl_without_a_config_is_adopted_and_upgraded() {
    require_lab!();
    let spec_opts = SpecOptions {
        k0s_version: Some("1.33.4+k0s.0".into()),
        ..SpecOptions::default()
    };
    let c = Cluster::with(&[("s1", "single")], LabOptions::default(), spec_opts);
    c.lab.install_double("s1");
    c.lab.ssh_ok(
        "s1",
        "mkdir -p /etc/k0s && k0s config create > /etc/k0s/k0s.yaml && chmod 600 /etc/k0s/k0s.yaml",
    );
    let cfg = c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml");
    // What real k0s prints (cmd/config/create.go, DefaultClusterConfig): the host's address as
    // api.address, in the SANs and as etcd peerAddress; storage type etcd.
    let addr = c.lab.address("s1");
    for line in [
        "apiVersion: k0s.k0sproject.io/v1beta1".to_string(),
        "kind: ClusterConfig".to_string(),
        format!("    address: {addr}"),
        format!("    - {addr}"),
        format!("      peerAddress: {addr}"),
        "    type: etcd".to_string(),
    ] {
        assert!(cfg.lines().any(|l| l == line), "{line:?} not in\n{cfg}");
    }
    start_single_as_k0sctl_then_adopt(&c, None, "etcd");
    assert_eq!(
        c.state_host("s1").expect("recorded")["k0s_version"],
        "v1.33.4+k0s.0"
    );
    assert_eq!(c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml"), cfg);
    // Then an upgrade: the version changes, k0sctl's k0s.yaml stays, and nothing is left to do.
    let mut c = c;
    let r = plan_upgrade_to_v1_33_5(&mut c, &["s1"]);
    assert!(!r.text().contains("k0s.yaml differs"), "{}", r.text());
    c.apply().contains("Apply complete");
    assert_eq!(c.lab.ssh_ok("s1", "k0s version").trim(), "v1.33.5+k0s.0");
    assert_eq!(c.lab.ssh_ok("s1", "cat /etc/k0s/k0s.yaml"), cfg);
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27.3: a cluster k0sctl built from a spec with no `spec.k0s.config`. k0sctl's base is
/// the leader's existing k0s.yaml, else `k0s config create` on the leader (k0sctl
/// `phase/configure_k0s.go` `Prepare`), extended by every controller's address in
/// `spec.api.sans`; `configFor` then sets each controller's `storage.etcd.peerAddress` to its
/// own (private) address, so every controller carries the leader's `api.address` and defaults.
/// Adopted with `apply -refresh-only`, the next plan changes nothing; a version bump upgrades
/// every host without rewriting k0s.yaml or changing a flag; a wiped controller is replaced.
#[test]
fn k0sctl_cluster_without_a_config_is_adopted_upgraded_and_a_controller_replaced() {
    require_lab!();
    let hosts = ["c1", "c2", "c3", "w1"];
    let spec_opts = SpecOptions {
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        k0s_config: None,
        ..SpecOptions::default()
    };
    let mut c = Cluster::with(THREE_PLUS_ONE, LabOptions::default(), spec_opts);
    for h in hosts {
        c.lab.install_double(h);
    }
    // No k0s.yaml on the leader yet: the base is `k0s config create` there.
    let base = c.lab.ssh_ok("c1", "k0s config create");
    let addr: Vec<String> = ["c1", "c2", "c3"]
        .iter()
        .map(|h| c.lab.address(h))
        .collect();
    let sans: String = addr.iter().map(|a| format!("    - {a}\n")).collect();
    let k0sctl_config = |i: usize| {
        let own_sans = format!("    - {}\n", addr[0]);
        let own_peer = format!("      peerAddress: {}\n", addr[0]);
        assert_eq!(base.matches(&own_sans).count(), 1, "{base}");
        assert_eq!(base.matches(&own_peer).count(), 1, "{base}");
        let cfg = base.replacen(&own_sans, &sans, 1).replacen(
            &own_peer,
            &format!("      peerAddress: {}\n", addr[i]),
            1,
        );
        format!("# generated-by-k0sctl 2026-08-01T10:00:0{i}Z\n{cfg}")
    };
    controllers_as_k0sctl(&c, &k0sctl_config);
    join_worker_as_k0sctl(&c, "w1", "");
    let uid = assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]);
    let leader_api = format!("    address: {}\n", addr[0]);
    assert!(
        k0sctl_config(2).contains(&leader_api),
        "{}",
        k0sctl_config(2)
    );

    adopt_changes_nothing(&c, &hosts);

    let r = plan_upgrade_to_v1_33_5(&mut c, &hosts);
    assert!(!r.text().contains("k0s.yaml differs"), "{}", r.text());
    assert!(!r.text().contains("install flags differ"), "{}", r.text());
    c.apply().contains("Apply complete");
    for (i, h) in ["c1", "c2", "c3"].iter().enumerate() {
        assert_eq!(
            c.lab.ssh_ok(h, "cat /etc/k0s/k0s.yaml"),
            k0sctl_config(i),
            "{h}: the upgrade rewrote k0sctl's k0s.yaml"
        );
    }
    for h in hosts {
        assert_eq!(c.lab.ssh_ok(h, "k0s version").trim(), "v1.33.5+k0s.0");
    }

    c.lab.wipe("c3");
    c.run(&["apply", "-auto-approve", "-replace", &c.lab.address("c3")])
        .expect(0);
    assert_eq!(
        assert_one_cluster(&c, &["c1", "c2", "c3"], &["c1", "c2", "c3"]),
        uid
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}
