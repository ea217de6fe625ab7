//! What a host reports is checked when it is probed, not when it is used: names that become
//! kubectl arguments must be Kubernetes object names (RFC 1123), identities must look like
//! identities. A host that answers otherwise fails its probe with the reason, so a hostile or
//! broken host can neither steer a destructive call nor plant text that the state writer would
//! later refuse as a secret (which made every checkpoint fail).

use crate::hash::is_hex;
use crate::reality::HostFacts;

use crate::spec::is_object_name;

/// A peer URL or address: a scheme, a host name or IP and a port, nothing else.
fn is_peer(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 300
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:/[]%_".contains(&b))
}

/// Every fact of `f` a later step uses as a name, an identity or a state field, checked; the
/// first one that is not what it claims to be, described.
pub fn check(f: &HostFacts) -> Result<(), String> {
    let bad = |what: &str, v: &str| {
        Err(format!(
            "the host reports {what} {:?}, which is not valid",
            crate::hash::short_n(v, 80)
        ))
    };
    if !is_hex(&f.machine_id, 16, 64) {
        return bad("machine-id", &f.machine_id);
    }
    // Bastion keys become known_hosts lines once recorded: a key, with its own fingerprint.
    for b in &f.bastions {
        let ok = crate::ssh_key::PublicKey::parse(&b.host_public_key).is_ok_and(|k| {
            k.fingerprint() == b.host_key
                && k.key_type
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-@.".contains(c))
        });
        if !ok {
            return bad(
                &format!("for bastion {} the host key", b.bastion),
                &b.host_public_key,
            );
        }
    }
    if !f.hostname.is_empty() && !is_object_name(&f.hostname.to_lowercase()) {
        return Err(format!(
            "the host's name {:?} is not a valid Kubernetes node name (RFC 1123): set `hostname` in the spec or fix the host",
            crate::hash::short_n(&f.hostname, 80)
        ));
    }
    if !f
        .arch
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return bad("architecture", &f.arch);
    }
    // Versions are `K0sVersion`s: checked when parsed.
    for (what, v) in [
        ("a k0s.yaml sha256", f.config_sha256.as_deref()),
        ("a k0s binary sha256", f.k0s_binary_sha256.as_deref()),
    ] {
        if let Some(v) = v
            && !is_hex(v, 64, 64)
        {
            return bad(what, v);
        }
    }
    if let Some(v) = f.k0s_binary_stat.as_deref()
        && !crate::state::is_binary_stat(v)
    {
        return bad("a k0s binary stat line", v);
    }
    if let Some(p) = f.status.as_ref().and_then(|s| s.peer_address.as_deref())
        && !is_peer(p)
    {
        return bad("an etcd peer address", p);
    }
    if let Some(v) = &f.view {
        for m in &v.members {
            // An unstarted member has no name yet. A started one is named after the raw hostname,
            // capitals kept (k0s pkg/component/controller/etcd.go).
            if !m.name.is_empty() && !is_object_name(&m.name.to_lowercase()) {
                return bad("an etcd member named", &m.name);
            }
            // Recorded in the state; reaches `k0s etcd leave --peer-address`.
            if crate::spec::peer_url_problem(&m.peer_url).is_some() {
                return bad("an etcd peer URL", &m.peer_url);
            }
            if let Some(id) = &m.member_id
                && !is_hex(id, 1, 16)
            {
                return bad("an etcd member ID", id);
            }
        }
        for n in &v.nodes {
            if !is_object_name(&n.name) {
                return bad("a Node named", &n.name);
            }
        }
        for n in &v.control_nodes {
            if !is_object_name(n) {
                return bad("a ControlNode named", n);
            }
        }
    }
    for file in &f.files {
        for (what, v) in [("a file owner", &file.user), ("a file group", &file.group)] {
            if let Some(v) = v
                && !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-$".contains(&b))
            {
                return bad(what, v);
            }
        }
        if let Some(s) = &file.sha256
            && !is_hex(s, 64, 64)
        {
            return bad("a file sha256", s);
        }
    }
    // A live probe records k0sform's own paths here; a probe file may say anything. They are
    // shown and passed to no command, but must still look like the destinations they claim to be.
    let mut seen = std::collections::BTreeSet::new();
    for d in &f.staging_leftovers {
        if !d.starts_with('/')
            || d.len() > 4096
            || d.chars().any(char::is_control)
            || !seen.insert(d)
        {
            return bad("staging files beside", d);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reality::{ClusterView, MemberView, NodeView};

    fn facts() -> HostFacts {
        HostFacts {
            machine_id: "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3".into(),
            hostname: "C01".into(),
            arch: "x86_64".into(),
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            view: Some(ClusterView {
                members: vec![MemberView {
                    // etcd keeps the hostname's case.
                    name: "C01".into(),
                    peer_url: "https://10.0.0.1:2380".into(),
                    member_id: Some("8e9e05c52164694d".into()),
                    invocation: None,
                }],
                nodes: vec![NodeView {
                    name: "c01".into(),
                    ready: true,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn hostile_facts_fail_the_probe() {
        assert_eq!(check(&facts()), Ok(()));
        let mut left = facts();
        left.staging_leftovers = vec!["/usr/local/bin/k0s".into(), "/srv/app/a b.conf".into()];
        assert_eq!(check(&left), Ok(()));
        type Spoil = Box<dyn Fn(&mut HostFacts)>;
        let cases: Vec<Spoil> = vec![
            Box::new(|f| f.hostname = "--all".into()),
            Box::new(|f| f.hostname = "token: abc".into()),
            Box::new(|f| f.machine_id = "H4sIAAAAAAAA".into()),
            Box::new(|f| f.machine_id = "token: 1234".into()),
            Box::new(|f| f.view.as_mut().unwrap().members[0].name = "--all".into()),
            Box::new(|f| f.view.as_mut().unwrap().members[0].member_id = Some("H4sI".into())),
            Box::new(|f| f.view.as_mut().unwrap().members[0].peer_url = "token: x".into()),
            Box::new(|f| f.view.as_mut().unwrap().nodes[0].name = "-l".into()),
            Box::new(|f| f.staging_leftovers = vec!["etc/k0s/k0s.yaml".into()]),
            Box::new(|f| f.staging_leftovers = vec!["/etc/k0s/k0s.yaml\u{1b}[2K".into()]),
            Box::new(|f| f.staging_leftovers = vec!["/a".into(), "/a".into()]),
        ];
        for (i, spoil) in cases.iter().enumerate() {
            let mut f = facts();
            spoil(&mut f);
            assert!(check(&f).is_err(), "case {i}: {f:?}");
        }
    }
}
