//! Host keys (the key type itself is `crate::ssh_key`): the private per-host known_hosts files
//! k0sform writes, reading ssh's "host key changed" report, and deciding whether the key a host
//! (or its bastion) was accepted with is the recorded or pinned one.

use super::other;
use crate::hostid::HostId;
use crate::spec::SshTarget;
use crate::ssh_key::PublicKey;
use crate::transport::TransportError;
use std::path::{Path, PathBuf};

/// The name every entry in a private known_hosts file is stored under (ssh `HostKeyAlias`):
/// each host has its own file, so the name only has to be constant, and it keeps the entry
/// independent of how the address is spelled (alias in ~/.ssh/config, port, IPv6 brackets).
pub const TARGET_ALIAS: &str = "k0sform-host";
pub const BASTION_ALIAS: &str = "k0sform-bastion";

use crate::transport::{BastionTrust, ConnectedBastion};

/// The keys stored for `alias` in a known_hosts file's text, in file order.
pub fn keys_for(known_hosts: &str, alias: &str) -> Vec<PublicKey> {
    known_hosts
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with('#') {
                return None;
            }
            let (hosts, key) = line.split_once(char::is_whitespace)?;
            if !hosts.split(',').any(|h| h == alias) {
                return None;
            }
            PublicKey::parse(key).ok()
        })
        .collect()
}

/// The known_hosts file and ssh log of bastion hop `depth` for the host whose files start
/// with `base`.
pub(super) fn bastion_files(base: &Path, depth: usize) -> (PathBuf, PathBuf) {
    let stem = format!(
        "{}.b{depth}",
        base.file_name().and_then(|s| s.to_str()).unwrap_or("h")
    );
    let dir = base.parent().unwrap_or(Path::new("/tmp"));
    (
        dir.join(format!("{stem}.known_hosts")),
        dir.join(format!("{stem}.log")),
    )
}

/// From ssh's log after a failed connection: the fingerprint the host offered when ssh refused it
/// because the recorded key differs ("REMOTE HOST IDENTIFICATION HAS CHANGED"). None when the log
/// reports anything else.
pub fn changed_key_offered(ssh_log: &str) -> Option<String> {
    if !ssh_log.contains("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        return None;
    }
    let mut lines = ssh_log.lines();
    while let Some(line) = lines.next() {
        if line.contains("key sent by the remote host is") {
            // The fingerprint is on the next line, ending with a full stop.
            let fp = lines.next()?.trim().trim_end_matches('.');
            return fp.starts_with("SHA256:").then(|| fp.to_string());
        }
    }
    None
}

/// The key ssh accepted for the target: the last one it recorded in the host's known_hosts
/// file. With a recorded key, ssh refuses a different key of the same type but would add a key
/// of another type as "new": that is a change too. A `pin` (`ssh.hostKey`) must name it.
pub(super) fn accepted_key(
    host: &HostId,
    known_hosts: &str,
    trusted: Option<&PublicKey>,
    pin: Option<&str>,
) -> Result<PublicKey, TransportError> {
    let keys = keys_for(known_hosts, TARGET_ALIAS);
    let accepted = match (trusted, keys.last()) {
        (_, None) => return Err(other(host, "ssh connected but recorded no host key")),
        (Some(rec), Some(last)) if last != rec => {
            return Err(TransportError::HostKeyChanged {
                host: host.clone(),
                expected: rec.fingerprint(),
                offered: last.fingerprint(),
            });
        }
        (_, Some(last)) => last.clone(),
    };
    let fingerprint = accepted.fingerprint();
    if let Some(pin) = pin
        && pin != fingerprint
    {
        return Err(TransportError::HostKeyChanged {
            host: host.clone(),
            expected: pin.to_string(),
            offered: fingerprint,
        });
    }
    Ok(accepted)
}

/// The key each bastion hop was accepted with, checked like the target's (`accepted_key`):
/// the recorded one unless the change was accepted, and the `ssh.hostKey` pin where one is set.
/// `trust[i]` is hop `i + 1`'s (missing: nothing recorded).
pub(super) fn accepted_bastion_keys(
    host: &HostId,
    target: &SshTarget,
    trust: &[BastionTrust],
    base: &Path,
) -> Result<Vec<ConnectedBastion>, TransportError> {
    let mut out = Vec::new();
    let mut hop = target.bastion.as_deref();
    let mut depth = 0;
    while let Some(b) = hop {
        depth += 1;
        let id = HostId::new(b.address.clone(), b.port);
        let (kh, _) = bastion_files(base, depth);
        let text = std::fs::read_to_string(&kh).unwrap_or_default();
        let trusted = bastion_trusted(host, &id, trust.get(depth - 1))?;
        let keys = keys_for(&text, BASTION_ALIAS);
        let accepted = match (&trusted, keys.last()) {
            (_, None) => {
                return Err(other(
                    host,
                    format!("ssh connected but recorded no host key for bastion {id}"),
                ));
            }
            (Some(rec), Some(last)) if last != rec => {
                return Err(TransportError::BastionKeyChanged {
                    host: host.clone(),
                    bastion: id,
                    expected: rec.fingerprint(),
                    offered: last.fingerprint(),
                });
            }
            (_, Some(last)) => last.clone(),
        };
        let fingerprint = accepted.fingerprint();
        if let Some(pin) = &b.host_key
            && pin != &fingerprint
        {
            return Err(other(
                host,
                format!(
                    "bastion {}:{} offered host key {fingerprint}, but ssh.hostKey pins {pin}",
                    b.address, b.port
                ),
            ));
        }
        out.push(ConnectedBastion {
            id,
            fingerprint,
            public_key: accepted.to_line(),
            first_contact: trusted.is_none(),
        });
        hop = b.bastion.as_deref();
    }
    Ok(out)
}

/// The key a bastion hop is held to (None: trusted on first use), from its `BastionTrust`.
pub(super) fn bastion_trusted(
    host: &HostId,
    bastion: &HostId,
    trust: Option<&BastionTrust>,
) -> Result<Option<PublicKey>, TransportError> {
    match trust {
        Some(BastionTrust {
            recorded_key: Some(k),
            accept_changed: false,
        }) => PublicKey::parse(k).map(Some).map_err(|e| {
            other(
                host,
                format!("the state's recorded host key of bastion {bastion} is unusable: {e}"),
            )
        }),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real ed25519 host key and its `ssh-keygen -lf` fingerprint.
    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvZ/q36TdInhTZoW5bXPQ/Hey6Hm97hfZmb+65XdDbu comment@host";
    const FP: &str = "SHA256:ZCtcFOh8vMSvn0x0cRTf/Lk5y5381qr56Z8Pi9bFzfU";

    #[test]
    fn keys_for_alias_only() {
        let text = format!(
            "# comment\nother {}\n{TARGET_ALIAS} {}\n{TARGET_ALIAS},x ecdsa-sha2-nistp256 AAAA\n",
            "ssh-rsa AAAA", KEY
        );
        let keys = keys_for(&text, TARGET_ALIAS);
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].fingerprint(), FP);
        assert_eq!(keys[1].key_type, "ecdsa-sha2-nistp256");
        let line = PublicKey::parse(KEY)
            .unwrap()
            .known_hosts_line(TARGET_ALIAS);
        assert_eq!(
            keys_for(&line, TARGET_ALIAS)[0].to_line(),
            KEY.rsplit_once(' ').unwrap().0
        );
    }

    #[test]
    fn accepted_key_is_the_recorded_or_pinned_one() {
        let host = HostId::new("127.0.0.1", 22);
        let key = PublicKey::parse(KEY).unwrap();
        let line = key.known_hosts_line(TARGET_ALIAS);
        assert!(matches!(
            accepted_key(&host, "", None, None),
            Err(TransportError::Other { .. })
        ));
        assert_eq!(accepted_key(&host, &line, None, None).unwrap(), key);
        assert_eq!(
            accepted_key(&host, &line, Some(&key), Some(FP)).unwrap(),
            key
        );
        // A key of another type, added by ssh as "new" beside the recorded one, is a change.
        let added = format!("{line}{TARGET_ALIAS} ecdsa-sha2-nistp256 AAAA\n");
        match accepted_key(&host, &added, Some(&key), None) {
            Err(TransportError::HostKeyChanged {
                expected, offered, ..
            }) => {
                assert_eq!(expected, FP);
                assert_ne!(offered, FP);
            }
            other => panic!("{other:?}"),
        }
        match accepted_key(&host, &line, None, Some("SHA256:pinned")) {
            Err(TransportError::HostKeyChanged {
                expected, offered, ..
            }) => {
                assert_eq!(expected, "SHA256:pinned");
                assert_eq!(offered, FP);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn changed_key_report_is_parsed() {
        let log = "\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8.
Please contact your system administrator.
Add correct host key in /tmp/k0sform-x/h0.known_hosts to get rid of this message.
Offending ED25519 key in /tmp/k0sform-x/h0.known_hosts:1
Host key for k0sform-host has changed and you have requested strict checking.
Host key verification failed.
";
        assert_eq!(
            changed_key_offered(log).as_deref(),
            Some("SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8")
        );
        assert_eq!(
            changed_key_offered("ssh: connect to host x port 22: Connection refused"),
            None
        );
    }
}
