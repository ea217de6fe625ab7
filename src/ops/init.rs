//! `k0sform init`: a starting k0sctl.yaml, as `k0sctl init` prints it (same flags, same host
//! syntax `[user@]address[:port]`, addresses from arguments and from stdin when it is not a
//! terminal, the first `--controller-count` hosts controllers). The output passes `validate`.

use crate::cli::InitArgs;
use crate::yaml::scalar;
use std::fmt::Write as _;

/// One host of the generated spec.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InitHost {
    address: String,
    port: u16,
    user: Option<String>,
    role: &'static str,
}

/// k0sctl's `hostFromAddress`: `user@` wins over `--user`; a port that is not a number is ignored
/// (as k0sctl does); a bracketed IPv6 address keeps its brackets out of the address.
fn parse_host(text: &str, role: &'static str, user: Option<&str>) -> Result<InitHost, String> {
    let (user, rest) = match text.split_once('@') {
        Some((u, rest)) if !u.is_empty() => (Some(u.to_string()), rest),
        _ => (user.map(str::to_string), text),
    };
    let (address, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (addr, tail) = v6
            .split_once(']')
            .ok_or_else(|| format!("{text}: missing ']' after an IPv6 address"))?;
        let port = tail.strip_prefix(':').and_then(|p| p.parse().ok());
        (addr.to_string(), port)
    } else if rest.matches(':').count() == 1 {
        let (addr, p) = rest.split_once(':').unwrap_or((rest, ""));
        (addr.to_string(), p.parse().ok())
    } else {
        (rest.to_string(), None)
    };
    if address.is_empty() {
        return Err(format!("{text}: no address"));
    }
    Ok(InitHost {
        address,
        port: port.unwrap_or(22),
        user,
        role,
    })
}

/// k0sctl's `buildHosts`: comments (`#`) and blank lines skipped; without any address, two
/// example hosts (a controller and a worker).
fn build_hosts(
    lines: &[String],
    controllers: usize,
    user: Option<&str>,
) -> Result<Vec<InitHost>, String> {
    let mut hosts = Vec::new();
    for line in lines {
        let text = line.split('#').next().unwrap_or("").trim();
        if text.is_empty() {
            continue;
        }
        let role = if hosts.len() < controllers {
            "controller"
        } else {
            "worker"
        };
        hosts.push(parse_host(text, role, user)?);
    }
    if hosts.is_empty() {
        for (address, role) in [("10.0.0.1", "controller"), ("10.0.0.2", "worker")] {
            hosts.push(InitHost {
                address: address.into(),
                port: 22,
                user: user.map(str::to_string),
                role,
            });
        }
    }
    Ok(hosts)
}

/// The spec text. Written by hand rather than serialized so it can carry the comments a new
/// user needs (where the k0s binary comes from).
pub fn spec_yaml(args: &InitArgs, lines: &[String]) -> Result<String, String> {
    let hosts = build_hosts(lines, args.controller_count, args.user.as_deref())?;
    let mut out = String::new();
    out.push_str("apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata:\n");
    let _ = writeln!(out, "  name: {}", scalar(&args.cluster_name));
    out.push_str("  user: admin\nspec:\n");
    out.push_str(
        "  # Each host downloads k0s (curl or wget) and k0sform checks its sha256; set\n  \
         # uploadBinary: true to download it here and upload it, or k0sBinaryPath for your own.\n",
    );
    out.push_str("  hosts:\n");
    for h in &hosts {
        out.push_str("  - ssh:\n");
        let _ = writeln!(out, "      address: {}", scalar(&h.address));
        let _ = writeln!(
            out,
            "      user: {}",
            scalar(h.user.as_deref().unwrap_or("root"))
        );
        let _ = writeln!(out, "      port: {}", h.port);
        if let Some(k) = &args.key_path {
            let _ = writeln!(out, "      keyPath: {}", key_path(k));
        }
        let _ = writeln!(out, "    role: {}", h.role);
        out.push_str("    # k0sBinaryPath: ./k0s\n");
    }
    out.push_str("  k0s:\n    # version: v1.33.4+k0s.0\n");
    if args.k0s {
        out.push_str("    config:\n");
        for line in DEFAULT_K0S_YAML.lines() {
            let _ = writeln!(out, "      {line}");
        }
    } else {
        out.push_str("    config: {}\n");
    }
    Ok(out)
}

/// k0sctl's `DefaultK0sYaml` ("pretty much what `k0s default-config` outputs").
const DEFAULT_K0S_YAML: &str = "\
apiVersion: k0s.k0sproject.io/v1beta1
kind: Cluster
metadata:
  name: k0s
spec:
  api:
    port: 6443
    k0sApiPort: 9443
  storage:
    type: etcd
  network:
    podCIDR: 10.244.0.0/16
    serviceCIDR: 10.96.0.0/12
    provider: kuberouter
    kuberouter:
      mtu: 0
      peerRouterIPs: \"\"
      peerRouterASNs: \"\"
      autoMTU: true
    kubeProxy:
      disabled: false
      mode: iptables
  telemetry:
    enabled: true
  installConfig:
    users:
      etcdUser: etcd
      kineUser: kube-apiserver
      konnectivityUser: konnectivity-server
      kubeAPIserverUser: kube-apiserver
      kubeSchedulerUser: kube-scheduler
  konnectivity:
    agentPort: 8132
    adminPort: 8133
";

/// A key path as k0sctl init writes it: `~/…` stays plain (YAML reads it as the string it is;
/// k0sform's shared quoter, which also writes k0s.yaml, quotes every `~`).
fn key_path(k: &str) -> String {
    match k.strip_prefix("~/") {
        Some(rest)
            if !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c)) =>
        {
            k.to_string()
        }
        _ => scalar(k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(controllers: usize) -> InitArgs {
        InitArgs {
            addresses: vec![],
            controller_count: controllers,
            user: None,
            key_path: None,
            cluster_name: "k0s-cluster".into(),
            k0s: false,
        }
    }

    #[test]
    fn hosts_parse_as_k0sctl_parses_them() {
        let h = parse_host("admin@10.0.0.5:2222", "worker", Some("root")).unwrap();
        assert_eq!(
            (h.address.as_str(), h.port, h.user.as_deref()),
            ("10.0.0.5", 2222, Some("admin"))
        );
        let h = parse_host("10.0.0.5", "worker", Some("ubuntu")).unwrap();
        assert_eq!((h.port, h.user.as_deref()), (22, Some("ubuntu")));
        let h = parse_host("[fd00::1]:2200", "worker", None).unwrap();
        assert_eq!((h.address.as_str(), h.port), ("fd00::1", 2200));
        let h = parse_host("fd00::1", "worker", None).unwrap();
        assert_eq!((h.address.as_str(), h.port), ("fd00::1", 22));
        assert!(parse_host("[fd00::1", "worker", None).is_err());
    }

    #[test]
    fn first_hosts_are_controllers_comments_skipped() {
        let lines: Vec<String> = ["# list", "10.0.0.1 # first", "", "10.0.0.2", "10.0.0.3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let hosts = build_hosts(&lines, 2, None).unwrap();
        let roles: Vec<&str> = hosts.iter().map(|h| h.role).collect();
        assert_eq!(roles, ["controller", "controller", "worker"]);
        let example = build_hosts(&[], 1, Some("ubuntu")).unwrap();
        assert_eq!(example.len(), 2);
        assert_eq!(example[0].user.as_deref(), Some("ubuntu"));
    }

    #[test]
    fn scalars_quote_what_yaml_would_misread() {
        assert_eq!(scalar("10.0.0.1"), "10.0.0.1");
        assert_eq!(scalar("/home/u/.ssh/id_ed25519"), "/home/u/.ssh/id_ed25519");
        assert_eq!(key_path("~/.ssh/id_ed25519"), "~/.ssh/id_ed25519");
        assert_eq!(key_path("~/a b"), "\"~/a b\"");
        assert_eq!(scalar("1000"), "\"1000\"");
        assert_eq!(scalar("yes"), "\"yes\"");
        assert_eq!(scalar("a: b"), "\"a: b\"");
        assert_eq!(scalar("fd00::1"), "\"fd00::1\"");
    }

    #[test]
    fn generated_specs_load() {
        let lines: Vec<String> = vec!["admin@10.0.0.1:2222".into(), "10.0.0.2".into()];
        for k0s in [false, true] {
            let mut a = args(1);
            a.k0s = k0s;
            a.key_path = Some("/keys/id".into());
            a.cluster_name = "prod".into();
            let yaml = spec_yaml(&a, &lines).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("k0sctl.yaml");
            std::fs::write(&path, &yaml).unwrap();
            let loaded = crate::spec::load(&[path]).unwrap_or_else(|d| panic!("{yaml}\n{:?}", d.0));
            assert_eq!(loaded.spec.name, "prod");
            assert_eq!(loaded.spec.hosts.len(), 2);
            assert_eq!(loaded.spec.hosts[0].ssh.port, 2222);
            assert!(loaded.spec.hosts[0].role.is_controller());
            assert!(!loaded.spec.hosts[1].role.is_controller());
            assert_eq!(yaml.contains("kubeAPIserverUser"), k0s);
        }
    }
}
