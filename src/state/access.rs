//! A host's recorded access (`hosts[].access`) is read from a file others can write (a shared
//! folder, a repository, an etcd without authentication), so it is data to check, never a way to
//! run commands here: it is held to the spec's rules, only an allow-list of ssh options is taken
//! from it, and an ssh_config file only where the spec itself uses that file.

use super::{HostAccess, HostState};
use crate::spec::{Spec, SshTarget, TargetFinding};

/// ssh options a state may carry: tuning of time-outs, keep-alives and authentication order.
/// Everything else is dropped: options that run local commands (`ProxyCommand`, `LocalCommand`,
/// `KnownHostsCommand`, `Match exec` through `Include`), send secrets or the agent elsewhere
/// (`SendEnv`, `ForwardAgent`, `IdentityAgent`), redirect the connection (`Hostname`,
/// `ProxyJump`), load code (`PKCS11Provider`) or weaken the crypto (`Ciphers`, `KexAlgorithms`).
pub const STATE_SSH_OPTIONS: &[&str] = &[
    "AddressFamily",
    "Compression",
    "ConnectionAttempts",
    "ConnectTimeout",
    "IdentitiesOnly",
    "IPQoS",
    "LogLevel",
    "PreferredAuthentications",
    "ServerAliveCountMax",
    "ServerAliveInterval",
    "TCPKeepAlive",
];

/// How a host known only to the state may be reached: its checked recorded access, what was left
/// out of it and why (shown in the plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    pub ssh: SshTarget,
    pub k0s_install_path: String,
    pub data_dir: String,
    pub kubelet_root_dir: Option<String>,
    /// One sentence per option or file of the state that is not used.
    pub dropped: Vec<String>,
}

/// The state's access for `h`, checked. `Err` lists what is invalid: the host is then not
/// contacted at all. `template` is the first spec host's connection (the fallback for states
/// that recorded no access, and for key and config files missing on this machine).
pub fn reach(h: &HostState, spec: &Spec) -> Result<Reach, Vec<String>> {
    let template = spec.hosts.first().map(|s| &s.ssh);
    let recorded = h.access.clone();
    let from_state = recorded.is_some();
    let mut dropped = Vec::new();
    let mut problems = recorded_path_problems(h);
    let (mut ssh, bin, data_dir, kubelet) = match recorded {
        Some(HostAccess {
            ssh,
            k0s_install_path,
            data_dir,
            kubelet_root_dir,
            cluster_address: _,
        }) => (ssh, k0s_install_path, data_dir, kubelet_root_dir),
        None => {
            let ssh = match template {
                Some(t) => SshTarget {
                    host_key: None,
                    ..t.clone()
                },
                None => SshTarget::new(h.address.clone(), h.port),
            };
            (
                ssh,
                crate::spec::DEFAULT_K0S_INSTALL_PATH.to_string(),
                crate::spec::DEFAULT_DATA_DIR.to_string(),
                None,
            )
        }
    };
    // Reached at the address the state names the host by, whatever `access` says.
    ssh.address = h.address.clone();
    ssh.port = h.port;
    for f in crate::spec::target_findings(&ssh, "access.ssh") {
        if let TargetFinding::Error { field, message } = f {
            problems.push(format!("{field}: {message}"));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    // Without recorded access the connection is the spec's own: nothing to restrict.
    if from_state {
        restrict(&mut ssh, spec, template, "access.ssh", &mut dropped);
    }
    Ok(Reach {
        ssh,
        k0s_install_path: bin,
        data_dir,
        kubelet_root_dir: kubelet,
        dropped,
    })
}

/// Drop from a recorded target (and its bastions) `openssh`, every option outside the allow-list,
/// and an ssh_config file the spec does not use itself. A key or ssh_config file that is not on this
/// machine gives way to the first spec host's (a state written on a laptop, used in CI).
fn restrict(
    t: &mut SshTarget,
    spec: &Spec,
    template: Option<&SshTarget>,
    field: &str,
    dropped: &mut Vec<String>,
) {
    // A state does not get to make k0sform run commands on this machine: only the spec's
    // `localhost` does (k0sctl has no state; a state file can come from anywhere).
    if t.localhost {
        t.localhost = false;
        dropped.push(format!(
            "{field}.localhost is ignored: only the spec can make a host this machine; {} is reached over SSH (to reset it, put it back in the spec as `localhost: true` with `reset: true`)",
            t.address
        ));
    }
    // `openSSH:` lets ssh_config decide the port and login (no `-p`/`-l` for k0sctl's defaults)
    // and took any alias as the address: a state does not get to ask for that.
    if t.openssh {
        t.openssh = false;
        dropped.push(format!(
            "{field}.openssh is ignored: a state cannot make an address an ssh_config alias; {} is reached as user {} on port {}",
            t.address, t.user, t.port
        ));
    }
    t.options.retain(|k, v| {
        let allowed = STATE_SSH_OPTIONS.iter().any(|a| a.eq_ignore_ascii_case(k));
        if !allowed {
            dropped.push(format!(
                "{field}.options.{k} ({v:?}) is ignored: a state may only set {}",
                STATE_SSH_OPTIONS.join(", ")
            ));
        }
        allowed
    });
    if let Some(c) = t.config_path.clone() {
        if !c.exists() {
            t.config_path = template.and_then(|t0| t0.config_path.clone());
        } else if !spec_uses_config(spec, &c) {
            dropped.push(format!(
                "{field}.configPath {} is ignored: an ssh_config file can run commands, so only one the spec names is used",
                c.display()
            ));
            t.config_path = template.and_then(|t0| t0.config_path.clone());
        }
    }
    if t.key_path.as_ref().is_some_and(|k| !k.exists()) {
        t.key_path = template.and_then(|t0| t0.key_path.clone());
    }
    if let Some(b) = t.bastion.as_deref_mut() {
        restrict(b, spec, None, &format!("{field}.bastion"), dropped);
    }
}

fn spec_uses_config(spec: &Spec, path: &std::path::Path) -> bool {
    fn uses(t: &SshTarget, path: &std::path::Path) -> bool {
        t.config_path.as_deref() == Some(path)
            || t.bastion.as_deref().is_some_and(|b| uses(b, path))
    }
    spec.hosts.iter().any(|h| uses(&h.ssh, path))
}

/// For a host in both the spec and the state: the fields of the recorded access that differ from
/// the spec's (the spec's are used). Empty when nothing was recorded or all agree.
pub fn differences(h: &HostState, spec_host: &crate::spec::HostSpec) -> Vec<&'static str> {
    let Some(rec) = &h.access else {
        return Vec::new();
    };
    let now = HostAccess::of(spec_host);
    let mut out = Vec::new();
    target_differences(&rec.ssh, &now.ssh, false, &mut out);
    for (name, a, b) in [
        (
            "k0sInstallPath",
            Some(&rec.k0s_install_path),
            Some(&now.k0s_install_path),
        ),
        ("dataDir", Some(&rec.data_dir), Some(&now.data_dir)),
        (
            "kubeletRootDir",
            rec.kubelet_root_dir.as_ref(),
            now.kubelet_root_dir.as_ref(),
        ),
    ] {
        if a != b {
            out.push(name);
        }
    }
    out
}

fn target_differences(a: &SshTarget, b: &SshTarget, in_bastion: bool, out: &mut Vec<&'static str>) {
    let pick =
        |plain: &'static str, bastion: &'static str| if in_bastion { bastion } else { plain };
    if in_bastion && (a.address != b.address || a.port != b.port) {
        out.push("bastion.address");
    }
    for (differs, plain, bastion) in [
        (a.user != b.user, "user", "bastion.user"),
        (a.key_path != b.key_path, "keyPath", "bastion.keyPath"),
        (
            a.config_path != b.config_path,
            "configPath",
            "bastion.configPath",
        ),
        (a.options != b.options, "options", "bastion.options"),
        (a.host_key != b.host_key, "hostKey", "bastion.hostKey"),
    ] {
        if differs {
            out.push(pick(plain, bastion));
        }
    }
    match (&a.bastion, &b.bastion) {
        (Some(x), Some(y)) if !in_bastion => target_differences(x, y, true, out),
        (x, y) if x == y => {}
        _ => out.push("bastion"),
    }
}

/// Every implausible path the state records for `h` (`access.FIELD: problem`). A record
/// without `access` uses k0s's defaults, which are plausible.
pub fn recorded_path_problems(h: &HostState) -> Vec<String> {
    let Some(a) = &h.access else {
        return Vec::new();
    };
    [
        ("k0sInstallPath", Some(&a.k0s_install_path)),
        ("dataDir", Some(&a.data_dir)),
        ("kubeletRootDir", a.kubelet_root_dir.as_ref()),
    ]
    .into_iter()
    .filter_map(|(field, v)| {
        let e = crate::spec::k0s_path_problem(field, v?)?;
        Some(format!("access.{field}: {e}"))
    })
    .collect()
}
