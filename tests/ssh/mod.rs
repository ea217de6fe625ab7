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
use k0sform::transport::{FileAttrs, RemoteCommand, Transport, TransportError};
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

/// Whether this machine has the lab's sudo user `k0slab`.
fn has_sudo_user() -> bool {
    Command::new("id")
        .arg("k0slab")
        .output()
        .is_ok_and(|o| o.status.success())
}
