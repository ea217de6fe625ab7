//! `SshTransport` against real OpenSSH servers: each test starts its own `sshd` on a unique
//! loopback address (127.201-250.x.y) with its own host key and an authorized test key.

mod bastion;
mod commands;
mod connection;
mod files;
mod host_keys;

use crate::support::prereq::require_lab;
use crate::support::sshd::*;
use k0sform::hostid::HostId;
use k0sform::spec::SshTarget;
use k0sform::ssh::{SshOptions, SshTransport};
use k0sform::transport::{ConnectedHost, FileAttrs, RemoteCommand, Transport, TransportError};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn transport() -> SshTransport {
    SshTransport::new(SshOptions::default()).unwrap()
}

/// ssh processes whose command line mentions the transport's private directory.
fn ssh_processes(t: &SshTransport) -> Vec<String> {
    let out = Command::new("pgrep")
        .arg("-af")
        .arg(t.control_dir().to_str().unwrap())
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn cmd(argv: &[&str]) -> RemoteCommand {
    RemoteCommand::new(argv.iter().copied()).timeout(Duration::from_secs(20))
}

/// A transport already connected to `sshd` as `user` (first contact: no recorded key).
async fn connected(sshd: &Sshd, user: &str) -> SshTransport {
    let t = transport();
    t.connect(&sshd.id(), &sshd.target(user), None, false, &[])
        .await
        .unwrap();
    t
}

/// `t` connected to `sshd` as root, the host key checked against `recorded` (`None`: first
/// contact).
async fn connect_root(t: &SshTransport, sshd: &Sshd, recorded: Option<&str>) -> ConnectedHost {
    t.connect(&sshd.id(), &sshd.target("root"), recorded, false, &[])
        .await
        .unwrap()
}

/// Logged in to `id` as `k0slab`: commands run as root (through sudo), and as `k0slab` when
/// they are not for root.
async fn assert_root_through_sudo_else_k0slab(t: &SshTransport, id: &HostId) {
    let as_root = t.run(id, cmd(&["id", "-un"])).await.unwrap();
    assert_eq!(
        as_root.stdout_str().trim(),
        "root",
        "{}",
        as_root.stderr_str()
    );
    let mut plain = cmd(&["id", "-un"]);
    plain.root = false;
    assert_eq!(
        t.run(id, plain).await.unwrap().stdout_str().trim(),
        "k0slab"
    );
}

/// Whether this machine has the lab's sudo user `k0slab`.
fn has_sudo_user() -> bool {
    Command::new("id")
        .arg("k0slab")
        .output()
        .is_ok_and(|o| o.status.success())
}
