//! The `k0s install` arguments of a host as k0sctl builds them, and their comparable form.

use super::*;

/// The `k0s install` flags for `host` as k0sctl builds them (k0sctl
/// `pkg/apis/k0sctl.k0sproject.io/v1beta1/cluster/host.go` `K0sInstallFlags`): the user's
/// `installFlags` as written, `--data-dir` (and `--kubelet-root-dir`) replaced by the host's,
/// `--enable-worker=true`/`--no-taints=true`/`--single=true` by role, `--token-file` (every host
/// joins with a token but the bootstrap controller: see [`reinstall_args`]), `--config` on
/// controllers, `--enable-dynamic-config=true` on controllers with dynamic config, and on hosts
/// that run a kubelet `--kubelet-extra-args` with `--node-ip=PRIVATE` (unless
/// `--enable-cloud-provider`) and `--hostname-override`. Each flag already given by the user
/// is left as the user wrote it.
pub fn install_args(spec: &Spec, host: &HostSpec) -> Vec<String> {
    let mut flags: Vec<FlagUse> = install_flags::parse_words(&host.install_args());
    let has = |flags: &[FlagUse], name: &str| flags.iter().any(|f| f.name == name);
    let replace =
        |flags: &mut Vec<FlagUse>, f: FlagUse| match flags.iter().position(|x| x.name == f.name) {
            Some(i) => {
                flags[i] = f.clone();
                let mut seen = false;
                flags.retain(|x| {
                    if x.name != f.name {
                        return true;
                    }
                    let keep = !seen;
                    seen = true;
                    keep
                });
            }
            None => flags.push(f),
        };
    let add_unless = |flags: &mut Vec<FlagUse>, f: FlagUse| {
        if !has(flags, &f.name) {
            flags.push(f);
        }
    };
    replace(&mut flags, FlagUse::new("data-dir", &host.data_dir));
    if let Some(k) = &host.kubelet_root_dir {
        replace(&mut flags, FlagUse::new("kubelet-root-dir", k));
    }
    match host.role {
        Role::ControllerWorker => {
            add_unless(&mut flags, FlagUse::new("enable-worker", "true"));
            if host.no_taints {
                add_unless(&mut flags, FlagUse::new("no-taints", "true"));
            }
        }
        Role::Single => add_unless(&mut flags, FlagUse::new("single", "true")),
        Role::Controller | Role::Worker => {}
    }
    if host.role != Role::Single {
        add_unless(&mut flags, FlagUse::new("token-file", TOKEN_FILE));
    }
    if host.role.is_controller() {
        add_unless(&mut flags, FlagUse::new("config", CONFIG_FILE));
        if spec.k0s.dynamic_config {
            replace(&mut flags, FlagUse::new("enable-dynamic-config", "true"));
        }
    }
    // k0sctl: roles ending in "worker" (worker, controller+worker).
    if matches!(host.role, Role::Worker | Role::ControllerWorker) {
        let mut extra: Vec<FlagUse> = flags
            .iter()
            .find(|f| f.name == "kubelet-extra-args")
            .and_then(|f| f.value.as_deref())
            .map(|v| {
                crate::spec::shell_words(v)
                    .unwrap_or_else(|_| v.split_whitespace().map(str::to_string).collect())
            })
            .map(|words| words.iter().map(|w| kubelet_flag(w)).collect())
            .unwrap_or_default();
        let cloud = flags
            .iter()
            .find(|f| f.name == "enable-cloud-provider")
            .is_some_and(|f| {
                f.value
                    .as_deref()
                    .is_none_or(|v| install_flags::parse_go_bool(v) == Some(true))
            });
        if !cloud
            && let Some(p) = &host.private_address
            && !extra.iter().any(|f| f.name == "--node-ip")
        {
            extra.push(FlagUse::new("--node-ip", p));
        }
        if let Some(h) = &host.hostname {
            match extra.iter_mut().find(|f| f.name == "--hostname-override") {
                Some(f) => f.value = Some(h.clone()),
                None => extra.push(FlagUse::new("--hostname-override", h)),
            }
        }
        if !extra.is_empty() {
            let joined = extra
                .iter()
                .map(|f| match &f.value {
                    Some(v) => format!("{}={v}", f.name),
                    None => f.name.clone(),
                })
                .collect::<Vec<_>>()
                .join(" ");
            replace(&mut flags, FlagUse::new("kubelet-extra-args", joined));
        }
    }
    flags.iter().map(FlagUse::word).collect()
}

/// One word of a kubelet argument string, split as k0sctl's `Flags.Each` does (at the first
/// `=` or space), the name keeping its dashes.
fn kubelet_flag(word: &str) -> FlagUse {
    match word.split_once('=') {
        Some((k, v)) => FlagUse::new(k, v),
        None => FlagUse {
            name: word.to_string(),
            value: None,
        },
    }
}

/// The arguments for reinstalling a host that already runs (upgrade, reconfigure): the desired
/// ones, with `--token-file` kept only when the running service has one. The bootstrap
/// controller never had a token; giving it one on reinstall would make k0s read a missing file.
pub fn reinstall_args<S: AsRef<str>>(spec: &Spec, host: &HostSpec, running: &[S]) -> Vec<String> {
    let had_token = running
        .iter()
        .any(|a| a.as_ref().starts_with("--token-file"));
    install_args(spec, host)
        .into_iter()
        .filter(|a| had_token || !a.starts_with("--token-file="))
        .collect()
}

/// Service arguments reduced to what must match between desired and running: both as k0s
/// records them ([`install_flags::recorded`]), `--token-file` dropped (the bootstrap controller
/// legitimately runs without one) and the words of `--kubelet-extra-args` sorted (kubelet reads
/// them as a set of flags).
pub fn comparable_args<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    install_flags::recorded(args)
        .into_iter()
        .filter(|a| !a.starts_with("--token-file="))
        .map(|a| match a.strip_prefix("--kubelet-extra-args=") {
            Some(v) => {
                let mut words: Vec<&str> = v.split_whitespace().collect();
                words.sort_unstable();
                format!("--kubelet-extra-args={}", words.join(" "))
            }
            None => a,
        })
        .collect()
}

/// sha256 of the comparable install arguments, as recorded in state (`install_flags_sha256`).
pub fn install_flags_sha256<S: AsRef<str>>(args: &[S]) -> String {
    crate::hash::sha256_hex(comparable_args(args).join("\n"))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{host, private, spec};
    use super::*;

    /// Table: a host of the spec and the flags k0sctl v0.32 passes to `k0s install`, compared as
    /// k0s records them.
    #[test]
    fn install_flags_as_k0sctl_builds_them() {
        let c1 = host(Role::Controller, "10.0.0.1");
        let mut cw = private(host(Role::ControllerWorker, "10.0.0.2"), "192.168.0.2");
        cw.no_taints = true;
        let single = host(Role::Single, "10.0.0.3");
        let mut w = private(host(Role::Worker, "10.0.0.4"), "192.168.0.4");
        w.hostname = Some("node-4".into());
        w.install_flags = vec![
            "--kubelet-extra-args=\"--max-pods=150\"".into(),
            "--labels=zone=a,app=x".into(),
        ];
        let mut cloud = private(host(Role::Worker, "10.0.0.5"), "192.168.0.5");
        cloud.install_flags = vec!["--enable-cloud-provider".into()];
        let mut own_ip = private(host(Role::Worker, "10.0.0.6"), "192.168.0.6");
        own_ip.install_flags = vec![
            "--kubelet-extra-args=--node-ip=10.1.1.1".into(),
            "--data-dir=/srv/x".into(),
        ];
        own_ip.data_dir = "/srv/k0s".into();
        let s = spec(
            vec![
                c1.clone(),
                cw.clone(),
                single.clone(),
                w.clone(),
                cloud.clone(),
                own_ip.clone(),
            ],
            None,
        );
        let cases: &[(&HostSpec, &[&str])] = &[
            (
                &c1,
                &["--config=/etc/k0s/k0s.yaml", "--data-dir=/var/lib/k0s"],
            ),
            (
                &cw,
                &[
                    "--config=/etc/k0s/k0s.yaml",
                    "--data-dir=/var/lib/k0s",
                    "--enable-worker=true",
                    "--kubelet-extra-args=--node-ip=192.168.0.2",
                    "--no-taints=true",
                ],
            ),
            (
                &single,
                &[
                    "--config=/etc/k0s/k0s.yaml",
                    "--data-dir=/var/lib/k0s",
                    "--single=true",
                ],
            ),
            (
                &w,
                &[
                    "--data-dir=/var/lib/k0s",
                    "--kubelet-extra-args=--hostname-override=node-4 --max-pods=150 --node-ip=192.168.0.4",
                    "--labels=app=x,zone=a",
                ],
            ),
            (
                &cloud,
                &["--data-dir=/var/lib/k0s", "--enable-cloud-provider=true"],
            ),
            (
                &own_ip,
                &[
                    "--data-dir=/srv/k0s",
                    "--kubelet-extra-args=--node-ip=10.1.1.1",
                ],
            ),
        ];
        for (h, want) in cases {
            assert_eq!(
                comparable_args(&install_args(&s, h)),
                *want,
                "{}",
                h.ssh.address
            );
            if h.role != Role::Single {
                assert!(install_args(&s, h).contains(&format!("--token-file={TOKEN_FILE}")));
            }
        }
        // k0sctl's order inside --kubelet-extra-args: the user's, then --node-ip, then the name.
        assert!(install_args(&s, &w).contains(
            &"--kubelet-extra-args=--max-pods=150 --node-ip=192.168.0.4 --hostname-override=node-4".to_string()
        ));
    }

    /// What k0s recorded for k0sctl's install compares equal to what k0sform wants: the labels
    /// sorted, the logging levels expanded, the order of kubelet's arguments.
    #[test]
    fn running_args_as_k0s_recorded_them_match() {
        let mut w = private(host(Role::Worker, "10.0.0.4"), "192.168.0.4");
        w.install_flags = vec![
            "--labels=zone=a,app=x".into(),
            "--labels=tier=web".into(),
            "-l kubelet=2".into(),
            "--kubelet-extra-args='--max-pods=150'".into(),
        ];
        let s = spec(vec![host(Role::Controller, "10.0.0.1"), w.clone()], None);
        let running = [
            "--data-dir=/var/lib/k0s",
            "--kubelet-extra-args=--max-pods=150 --node-ip=192.168.0.4",
            "--labels=app=x,tier=web,zone=a",
            "--logging=containerd=info,etcd=info,konnectivity-server=1,kube-apiserver=1,kube-controller-manager=1,kube-scheduler=1,kubelet=2",
            "--token-file=/etc/k0s/k0stoken",
        ];
        assert_eq!(
            comparable_args(&install_args(&s, &w)),
            comparable_args(&running)
        );
        assert_eq!(
            install_flags_sha256(&install_args(&s, &w)),
            install_flags_sha256(&running)
        );
        let relabelled = [
            "--data-dir=/var/lib/k0s",
            "--kubelet-extra-args=--max-pods=150 --node-ip=192.168.0.4",
            "--labels=app=x,zone=a",
        ];
        assert_ne!(
            comparable_args(&install_args(&s, &w)),
            comparable_args(&relabelled)
        );
    }

    #[test]
    fn reinstall_keeps_token_file_only_for_joiners() {
        let h = host(Role::Controller, "10.0.0.1");
        let s = spec(vec![h.clone()], None);
        let bootstrap = [
            "/usr/local/bin/k0s",
            "controller",
            "--data-dir=/var/lib/k0s",
        ];
        assert!(
            !reinstall_args(&s, &h, &bootstrap)
                .iter()
                .any(|a| a.starts_with("--token-file"))
        );
        let joiner = [
            "/usr/local/bin/k0s",
            "controller",
            "--token-file=/etc/k0s/k0stoken",
        ];
        assert!(
            reinstall_args(&s, &h, &joiner).contains(&"--token-file=/etc/k0s/k0stoken".to_string())
        );
    }

    /// k0sctl `cluster/host.go` `K0sConfigPath`, `K0sJoinTokenPath`: installFlags move where
    /// k0s.yaml and the join token are written, and the service is given those paths.
    #[test]
    fn install_flags_move_the_config_and_token_files() {
        let mut c = host(Role::Controller, "10.0.0.1");
        let mut w = host(Role::Worker, "10.0.0.2");
        assert_eq!(config_file(&c), CONFIG_FILE);
        assert_eq!(token_file(&w), TOKEN_FILE);
        for flags in [
            vec!["--config=/srv/k0s.yaml".to_string()],
            vec!["--config /srv/k0s.yaml".into()],
            vec!["-c /srv/k0s.yaml".into()],
        ] {
            c.install_flags = flags.clone();
            assert_eq!(config_file(&c), "/srv/k0s.yaml", "{flags:?}");
            assert_eq!(staged_config_file(&c), "/srv/k0s.yaml.k0sform-new");
        }
        w.install_flags = vec!["--token-file=/srv/join.tok".into()];
        assert_eq!(token_file(&w), "/srv/join.tok");
        let s = spec(vec![c.clone(), w.clone()], None);
        let wargs = install_args(&s, &w);
        assert!(
            wargs.contains(&"--token-file=/srv/join.tok".to_string()),
            "{wargs:?}"
        );
        assert_eq!(
            wargs
                .iter()
                .filter(|a| a.starts_with("--token-file"))
                .count(),
            1
        );
        let cargs = install_args(&s, &c);
        assert_eq!(
            cargs
                .iter()
                .filter(|a| a.starts_with("--config") || a.starts_with("-c"))
                .count(),
            1,
            "{cargs:?}"
        );
    }

    /// `hostname:` goes into `--hostname-override` as written (k0sctl `cluster/host.go`
    /// `K0sInstallFlags`); the Node name is lower-cased, as kubelet does. A
    /// `--hostname-override` in installFlags' `--kubelet-extra-args` names the Node too.
    #[test]
    fn hostname_keeps_its_case_in_the_flag_and_the_node_name_is_lower_case() {
        let mut w = host(Role::Worker, "10.0.0.2");
        w.hostname = Some("Worker-1".into());
        let s = spec(vec![w.clone()], None);
        assert!(
            install_args(&s, &w)
                .contains(&"--kubelet-extra-args=--hostname-override=Worker-1".to_string())
        );
        assert_eq!(w.node_name().as_deref(), Some("worker-1"));
        w.hostname = None;
        assert_eq!(w.node_name(), None);
        for flag in [
            "--kubelet-extra-args=\"--max-pods=10 --hostname-override=Node-7\"",
            "--kubelet-extra-args='--hostname-override Node-7'",
            "--kubelet-extra-args=--hostname-override=Node-7",
        ] {
            w.install_flags = vec![flag.into()];
            assert_eq!(w.node_name().as_deref(), Some("node-7"), "{flag}");
        }
    }
}
