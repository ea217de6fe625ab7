//! A host's private address as k0sctl finds it when the spec gives no `privateAddress`
//! (k0sctl `phase/gather_facts.go` `investigateHost`, `configurer/linux.go`
//! `PrivateInterface`/`PrivateAddress`): the interface is `privateInterface`, else the `dev` of
//! the first `ip route list scope global` line matching `\b(172|10|192\.168)\.`, else the
//! `dev` of the first `default` line of `ip route list`; the address is the first IPv4 address
//! of `ip -o addr show dev IFACE scope global` that is not the SSH address. That address is
//! then the host's private address everywhere (peerAddress, SANs, `--node-ip`).
//!
//! The probe prints what `ip` says (read-only, in its one session); [`parse_net`] checks it
//! (host output is untrusted: names and addresses are validated, counts bounded) and
//! [`detect`] decides, purely. Without `ip` on the host k0sctl detects nothing and uses the
//! SSH address; so does k0sform (no fallback that k0sctl would not take).

use crate::reality::{IfAddress, NetFacts};
use crate::spec::valid_interface;
use std::net::Ipv4Addr;

/// Section markers the probe prints around `ip`'s output (src/k0s/probe.sh `net`).
pub const ADDR_MARK: &str = "@@net-addr";
pub const ROUTE_MARK: &str = "@@net-route";
pub const DEFAULT_MARK: &str = "@@net-default";

/// At most this many lines of each kind are read (a host cannot make the facts grow without end).
const MAX_LINES: usize = 256;

/// A detected private address and the interface it was found on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    pub address: String,
    pub interface: String,
}

/// k0sctl's `\bdev (\w+)` on one line.
fn dev_of(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "dev")?;
    let name = words.get(i + 1)?;
    // `\w+` stops at the first non-word character.
    let word: String = name
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty() && word.len() <= 15).then_some(word)
}

/// k0sctl's `grep -E "\b(172|10|192\.168)\."`.
pub fn matches_private_pattern(line: &str) -> bool {
    let b = line.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    (0..b.len()).any(|i| {
        (i == 0 || !word(b[i - 1]))
            && ["172.", "10.", "192.168."]
                .iter()
                .any(|p| b[i..].starts_with(p.as_bytes()))
    })
}

/// Reads the probe's `ip` sections (`ADDR_MARK`, `ROUTE_MARK`, `DEFAULT_MARK`, each followed
/// by the command's lines). Lines that do not parse are skipped, as k0sctl skips them.
pub fn parse_net(text: &str) -> NetFacts {
    let mut facts = NetFacts::default();
    let mut section = "";
    let mut counts = [0usize; 3];
    for line in text.lines() {
        let t = line.trim();
        if [ADDR_MARK, ROUTE_MARK, DEFAULT_MARK].contains(&t) {
            section = t;
            continue;
        }
        let slot = match section {
            ADDR_MARK => 0,
            ROUTE_MARK => 1,
            DEFAULT_MARK => 2,
            _ => continue,
        };
        counts[slot] += 1;
        if counts[slot] > MAX_LINES {
            continue;
        }
        match slot {
            0 => facts.addresses.extend(parse_addr_line(t)),
            1 if facts.private_route_dev.is_none() && matches_private_pattern(t) => {
                facts.private_route_dev = dev_of(t);
            }
            2 if facts.default_route_dev.is_none() && t.starts_with("default") => {
                facts.default_route_dev = dev_of(t);
            }
            _ => {}
        }
    }
    facts
}

/// One `ip -o -4 addr show` line: `2: eth0    inet 10.0.0.5/24 brd … scope global eth0\ …`.
/// k0sctl takes the fourth field and cuts the prefix length off.
fn parse_addr_line(line: &str) -> Option<IfAddress> {
    let items: Vec<&str> = line.split_whitespace().collect();
    if items.len() < 4 || items[2] != "inet" {
        return None;
    }
    let iface = items[1].split('@').next()?.trim_end_matches(':');
    let addr = items[3].split('/').next()?;
    let ip: Ipv4Addr = addr.parse().ok()?;
    valid_interface(iface).then(|| IfAddress {
        interface: iface.to_string(),
        address: ip.to_string(),
    })
}

/// The private address k0sctl would use for this host, if it finds one.
pub fn detect(
    net: &NetFacts,
    private_interface: Option<&str>,
    ssh_address: &str,
) -> Option<Detected> {
    let iface = private_interface
        .map(str::to_string)
        .or_else(|| net.private_route_dev.clone())
        .or_else(|| net.default_route_dev.clone())?;
    net.addresses
        .iter()
        .find(|a| a.interface == iface && a.address != ssh_address)
        .map(|a| Detected {
            address: a.address.clone(),
            interface: iface,
        })
}

/// After the probe, before planning (as k0sctl's gather-facts phase): every spec host without
/// `privateAddress` gets the one k0sctl would find on it, and `private_address_detected_on`
/// says where. A host the probe did not reach keeps the private address the state recorded for
/// it (validated: the state is untrusted), so an unreachable host's plan does not change its
/// peer address. Two hosts with one private address are refused, as k0sctl refuses them after
/// its detection (`phase/validate_hosts.go` `validateUniquePrivateAddress`).
pub fn fill_detected(
    spec: &mut crate::spec::Spec,
    state: &crate::state::State,
    reality: &crate::reality::Reality,
) -> Result<(), String> {
    let probes = reality.probe_index();
    for h in spec
        .hosts
        .iter_mut()
        .filter(|h| h.private_address.is_none())
    {
        let found = match probes.at(&h.ssh.address, h.ssh.port) {
            Some(p) => p.facts().and_then(|f| f.net.as_ref()).and_then(|n| {
                detect(n, h.private_interface.as_deref(), &h.ssh.address)
                    .map(|d| (d.address, d.interface))
            }),
            None => None,
        };
        let found = found.or_else(|| {
            if probes
                .at(&h.ssh.address, h.ssh.port)
                .is_some_and(|p| p.facts().is_some())
            {
                return None;
            }
            let rec = state
                .host(&h.id())?
                .access
                .as_ref()?
                .cluster_address
                .as_ref()?;
            let ip: std::net::IpAddr = rec.parse().ok()?;
            Some((ip.to_string(), "recorded in the state".to_string()))
        });
        if let Some((address, on)) = found {
            h.private_address = Some(address);
            h.private_address_detected_on = Some(on);
        }
    }
    let mut seen: std::collections::BTreeMap<&str, &crate::spec::HostSpec> = Default::default();
    for h in &spec.hosts {
        let Some(a) = h.private_address.as_deref() else {
            continue;
        };
        if let Some(first) = seen.insert(a, h) {
            return Err(format!(
                "private address {a} is not unique: {} and {} both have it ({}); set \
                 privateAddress (or privateInterface) on them",
                first.ssh.address,
                h.ssh.address,
                [first, h]
                    .iter()
                    .map(|x| match &x.private_address_detected_on {
                        Some(on) => format!("{}: found on {on}", x.ssh.address),
                        None => format!("{}: privateAddress", x.ssh.address),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUAL: &str = "@@net-addr
2: eth0    inet 100.64.3.12/24 scope global eth0\\       valid_lft forever preferred_lft forever
3: eth1    inet 10.244.3.12/24 scope global eth1\\       valid_lft forever preferred_lft forever
@@net-route
10.245.3.0/24 via 10.244.3.1 dev eth1
@@net-default
";

    #[test]
    fn dual_host_takes_the_private_route_interface() {
        let n = parse_net(DUAL);
        assert_eq!(n.addresses.len(), 2);
        assert_eq!(n.private_route_dev.as_deref(), Some("eth1"));
        let d = detect(&n, None, "100.64.3.12").unwrap();
        assert_eq!(
            (d.address.as_str(), d.interface.as_str()),
            ("10.244.3.12", "eth1")
        );
        // privateInterface wins.
        let d = detect(&n, Some("eth0"), "127.0.0.9").unwrap();
        assert_eq!(d.address, "100.64.3.12");
        // ...but never the SSH address.
        assert_eq!(detect(&n, Some("eth0"), "100.64.3.12"), None);
    }

    #[test]
    fn default_route_is_the_fallback_and_nothing_without_routes() {
        let text = "@@net-addr
2: ens3    inet 203.0.113.7/24 brd 203.0.113.255 scope global ens3\\ x
@@net-route
default via 203.0.113.1 dev ens3 proto dhcp
@@net-default
default via 203.0.113.1 dev ens3 proto dhcp
";
        let n = parse_net(text);
        assert_eq!(n.private_route_dev, None);
        assert_eq!(
            detect(&n, None, "127.0.0.1").unwrap().address,
            "203.0.113.7"
        );
        let bare = parse_net("@@net-addr\n2: eth0    inet 10.0.0.5/24 scope global eth0\n");
        assert_eq!(
            detect(&bare, None, "1.2.3.4"),
            None,
            "no route: k0sctl finds no interface"
        );
    }

    #[test]
    fn k0sctl_pattern_is_word_bounded() {
        assert!(matches_private_pattern("default via 172.31.1.1 dev eth0"));
        assert!(matches_private_pattern("x 192.168.1.0/24 via y"));
        assert!(!matches_private_pattern(
            "100.64.3.0/24 via 100.64.3.1 dev eth0"
        ));
        // `\b` before `10.` inside another address counts, as in grep.
        assert!(matches_private_pattern("100.64.10.0/24 dev eth0"));
        assert!(!matches_private_pattern("default via 110.1.1.1 dev eth0"));
    }

    /// Reached hosts get what they show (none without `ip`); an unreachable one keeps the
    /// address the state recorded, if it is an IP address; a spec's privateAddress stands.
    #[test]
    fn fill_detected_takes_the_host_then_the_state() {
        use crate::reality::{HostFacts, HostReality, Probe, Reality};
        use crate::spec::{HostSpec, Role, Spec, SshTarget};
        use crate::state::{HostAccess, HostState, State};
        let mut spec = Spec::default();
        for i in 1..=5 {
            let h = HostSpec::new(
                Role::Controller,
                SshTarget::new(format!("127.0.0.{i}"), 22),
                i,
            );
            spec.hosts.push(h);
        }
        spec.hosts[4].private_address = Some("10.9.9.9".into());
        let mut reality = Reality::default();
        let reached = |net: Option<NetFacts>| {
            Probe::Reached(Box::new(HostFacts {
                net,
                ..HostFacts::default()
            }))
        };
        let probes = [
            reached(Some(parse_net(DUAL))),
            reached(None),
            Probe::Unreachable { error: "x".into() },
            Probe::Unreachable { error: "x".into() },
            reached(Some(parse_net(DUAL))),
        ];
        for (h, probe) in spec.hosts.iter().zip(probes) {
            reality.hosts.push(HostReality { id: h.id(), probe });
        }
        let mut state = State::default();
        for (i, rec) in [(3, "10.0.0.3"), (4, "10.0.0.4; reboot"), (2, "10.0.0.2")] {
            let h = &spec.hosts[i - 1];
            let mut access = HostAccess::of(h);
            access.cluster_address = Some(rec.into());
            state.upsert_host(HostState {
                address: h.ssh.address.clone(),
                port: 22,
                role: Role::Controller,
                node_name: None,
                machine_id: "m".into(),
                host_key: "k".into(),
                host_public_key: None,
                etcd: None,
                k0s_version: None,
                install_flags_sha256: None,
                config_sha256: None,
                k0s_binary: None,
                access: Some(access),
            });
        }
        fill_detected(&mut spec, &state, &reality).unwrap();
        let got: Vec<(Option<&str>, Option<&str>)> = spec
            .hosts
            .iter()
            .map(|h| {
                (
                    h.private_address.as_deref(),
                    h.private_address_detected_on.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some("10.244.3.12"), Some("eth1")),
                (None, None),
                (Some("10.0.0.3"), Some("recorded in the state")),
                (None, None),
                (Some("10.9.9.9"), None),
            ]
        );
        // The same address found on two hosts is refused.
        spec.hosts[1].private_address = None;
        spec.hosts[3].private_address = None;
        reality.hosts[1].probe = reached(Some(parse_net(DUAL)));
        let err = fill_detected(&mut spec, &state, &reality).unwrap_err();
        assert!(
            err.starts_with("private address 10.244.3.12 is not unique: 127.0.0.1 and 127.0.0.2"),
            "{err}"
        );
    }

    #[test]
    fn hostile_output_is_validated() {
        let text = "@@net-addr
2: eth0;rm    inet 10.0.0.5/24 scope global x
2: eth1    inet 10.0.0.999/24 scope global eth1
2: eth2    inet \u{1b}[31m/24 scope global eth2
@@net-route
10.1.0.0/16 via 10.0.0.1 dev \u{1b}[2Jevil
@@net-default
";
        let n = parse_net(text);
        assert!(n.addresses.is_empty(), "{n:?}");
        assert_eq!(n.private_route_dev, None);
        assert!(
            !valid_interface("a/b")
                && !valid_interface("")
                && !valid_interface("x".repeat(16).as_str())
        );
    }
}
