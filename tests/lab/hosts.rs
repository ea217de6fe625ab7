//! The lab's hosts look like separate machines: own SSH, bastion, parallel labs, network
//! namespaces with private networks and NAT, and a teardown that leaves nothing.

use super::*;

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
