//! Sample states for the state store tests: every field filled in, four hosts (two on one address),
//! one unfinished step; and a bare host entry to fill in.

use k0sform::spec::Role;
use k0sform::state::{ClusterState, EtcdMemberState, HostState, Intent, State};

/// Host `n` at `address:port` with every field that has a value for `role`.
pub fn host(address: &str, port: u16, role: Role, n: u32) -> HostState {
    HostState {
        address: address.into(),
        port,
        role,
        node_name: Some(format!("node{n}")),
        machine_id: format!("{n:02}d12a9b7c0e4f8a1b2c3d4e5f6a7b8c9"),
        host_key: format!("SHA256:Qx{n}k5c2b0GdqKxH0m1c3cZ3pY8mNqS7a0Uo1p2q3r4"),
        host_public_key: Some(format!(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{n}Ht7q0n4b0dD4c2bA1 root@node{n}"
        )),
        etcd: role.is_controller().then(|| EtcdMemberState {
            member_id: format!("8e9e05c5216469{n:02x}"),
            peer_url: format!("https://{address}:2380"),
        }),
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        install_flags_sha256: Some("aa".repeat(32)),
        config_sha256: Some("bb".repeat(32)),
        k0s_binary: None,
        access: None,
    }
}

/// Host `address:port` as a state file may record it: its role and host key, none of the
/// optional fields, no machine ID.
pub fn bare_host(address: &str, port: u16, role: Role, host_key: &str) -> HostState {
    let entry = serde_json::json!({
        "address": address,
        "port": port,
        "role": role,
        "machine_id": "",
        "host_key": host_key,
    });
    serde_json::from_value(entry).expect("a host entry")
}

/// A state with every field filled in: controllers 127.0.0.1, 127.0.0.1:2222 (also a worker)
/// and 127.0.0.2, worker 127.0.1.1, and an unfinished `remove-member node2`.
pub fn sample_state() -> State {
    let mut s = State::new();
    s.cluster = Some(ClusterState {
        name: "prod".into(),
        uid: "7c3f2a10-4b9e-4a51-9d2e-3f0c1b2a3d4e".into(),
        etcd_cluster_id: Some("cdf818194e3a8c32".into()),
        k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
        config_sha256: Some("cc".repeat(32)),
    });
    s.hosts = vec![
        host("127.0.0.2", 22, Role::Controller, 2),
        host("127.0.0.1", 2222, Role::ControllerWorker, 3),
        host("127.0.0.1", 22, Role::Controller, 1),
        host("127.0.1.1", 22, Role::Worker, 4),
    ];
    s.intents = vec![Intent {
        step: "remove-member node2".into(),
        address: "127.0.0.2".into(),
        port: 22,
        kind: "remove_member".into(),
        member_id: Some("8e9e05c521646902".into()),
        peer_url: Some("https://127.0.0.2:2380".into()),
        started_at: "2026-12-02T15:00:00Z".into(),
    }];
    s
}
