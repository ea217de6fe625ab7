//! Hosts behind a bastion: keys and options carried through, the bastion's own key recorded and
//! checked, and a ProxyCommand that runs nothing of the target's address.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn bastion_connection_carries_keys_and_options() {
    require_lab!();
    let bastion = Sshd::start();
    let target_sshd = Sshd::start();
    let t = transport();
    let mut target = target_sshd.target("root");
    let mut b = bastion.target("root");
    b.host_key = Some(bastion.host_fingerprint());
    target.bastion = Some(Box::new(b));
    let info = t
        .connect(&target_sshd.id(), &target, None, false, &[])
        .await
        .unwrap();
    assert_eq!(info.fingerprint, target_sshd.host_fingerprint());
    let out = t
        .run(&target_sshd.id(), cmd(&["echo", "via bastion"]))
        .await
        .unwrap();
    assert_eq!(out.stdout, b"via bastion\n");
    assert_eq!(bastion.accepted_logins(), 1, "{}", bastion.log());
    assert_eq!(target_sshd.accepted_logins(), 1);
    assert!(
        bastion.log().contains(&format!(
            "server_request_direct_tcpip: originator 127.0.0.1 port 65535, target {} port {}",
            target_sshd.address, target_sshd.port
        )),
        "the target was reached through the bastion: {}",
        bastion.log()
    );
    t.close_all().await;
    assert_eq!(ssh_processes(&t), Vec::<String>::new());

    // A wrong bastion pin is refused.
    let t2 = transport();
    if let Some(b) = target.bastion.as_mut() {
        b.host_key = Some("SHA256:wrongwrongwrongwrongwrongwrongwrongwrongwro".into());
    }
    let err = t2
        .connect(&target_sshd.id(), &target, None, false, &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("bastion"), "{err}");
    assert!(t2.connected(&target_sshd.id()).is_none());
}

/// A bastion's key as the state records it: first contact reports it, a recorded key is checked
/// strictly (a rebuilt bastion is refused as `BastionKeyChanged` naming the bastion, and nothing
/// reaches the target), and accepting the change trusts the new key.
#[tokio::test(flavor = "multi_thread")]
async fn bastion_keys_are_reported_and_checked_against_the_recorded_one() {
    require_lab!();
    use k0sform::transport::BastionTrust;
    let mut bastion = Sshd::start();
    let target_sshd = Sshd::start();
    let mut target = target_sshd.target("root");
    target.bastion = Some(Box::new(bastion.target("root")));
    let bastion_id = HostId::new(bastion.address.clone(), bastion.port);

    // First contact: the hop's key is reported, marked as trusted on first use.
    let t = transport();
    let info = t
        .connect(&target_sshd.id(), &target, None, false, &[])
        .await
        .unwrap();
    assert_eq!(info.bastions.len(), 1, "{info:?}");
    assert_eq!(info.bastions[0].id, bastion_id);
    assert_eq!(info.bastions[0].fingerprint, bastion.host_fingerprint());
    assert_eq!(info.bastions[0].public_key, bastion.host_public_key());
    assert!(info.bastions[0].first_contact);
    t.close_all().await;

    // Recorded: checked strictly, not first contact.
    let recorded = [BastionTrust {
        recorded_key: Some(bastion.host_public_key()),
        accept_changed: false,
    }];
    let t = transport();
    let info = t
        .connect(&target_sshd.id(), &target, None, false, &recorded)
        .await
        .unwrap();
    assert!(!info.bastions[0].first_contact);
    t.close_all().await;

    // The bastion is rebuilt (new key): refused, naming the bastion; the target is not reached.
    let old_fp = bastion.host_fingerprint();
    bastion.rebuild();
    let logins = target_sshd.accepted_logins();
    let t = transport();
    let err = t
        .connect(&target_sshd.id(), &target, None, false, &recorded)
        .await
        .unwrap_err();
    match &err {
        TransportError::BastionKeyChanged {
            bastion: b,
            expected,
            offered,
            ..
        } => {
            assert_eq!(b, &bastion_id);
            assert_eq!(expected, &old_fp);
            assert_eq!(offered, &bastion.host_fingerprint());
        }
        other => panic!("expected BastionKeyChanged, got {other:?}"),
    }
    assert!(
        err.to_string().contains(&format!("bastion {bastion_id}")),
        "{err}"
    );
    assert_eq!(
        target_sshd.accepted_logins(),
        logins,
        "the target was reached"
    );
    assert!(t.connected(&target_sshd.id()).is_none());

    // Accepting the change (-replace BASTION) trusts the offered key.
    let accept = [BastionTrust {
        recorded_key: recorded[0].recorded_key.clone(),
        accept_changed: true,
    }];
    let info = t
        .connect(&target_sshd.id(), &target, None, false, &accept)
        .await
        .unwrap();
    assert_eq!(info.bastions[0].fingerprint, bastion.host_fingerprint());
    assert!(info.bastions[0].first_contact);
    t.close_all().await;
}

/// Issue 28, item 2: the ProxyCommand k0sform gives ssh names the target itself (quoted, `%`
/// doubled), never `%h`. OpenSSH substitutes `%h` into the line after k0sform's quoting and
/// runs it with `$SHELL -c`; clients before 9.6 (CVE-2023-51385) do not refuse a destination
/// with quotes or `$(…)`. `testdata/old-ssh/ssh` behaves as such a client: through it, a host
/// behind a bastion is reached as usual, and an address with shell syntax that reaches the
/// transport (every reader refuses one before: this is the second line of defence) runs
/// nothing here.
#[tokio::test(flavor = "multi_thread")]
async fn proxy_command_names_the_target_and_runs_nothing_of_its_address() {
    require_lab!();
    let bastion = Sshd::start();
    let target_sshd = Sshd::start();
    let stand_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/old-ssh/ssh");
    let old_client = || {
        SshTransport::new(SshOptions {
            ssh_program: stand_in.clone(),
            ..SshOptions::default()
        })
        .unwrap()
    };
    let mut target = target_sshd.target("root");
    target.bastion = Some(Box::new(bastion.target("root")));
    let t = old_client();
    t.connect(&target_sshd.id(), &target, None, false, &[])
        .await
        .unwrap();
    let out = t
        .run(&target_sshd.id(), cmd(&["echo", "via bastion"]))
        .await
        .unwrap();
    assert_eq!(out.stdout, b"via bastion\n");
    t.close_all().await;

    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let hostile = format!("x'$(touch${{IFS}}{})'", marker.display());
    target.address = hostile.clone();
    let id = HostId::new(hostile, 22);
    let t = old_client();
    let err = t.connect(&id, &target, None, false, &[]).await;
    t.close_all().await;
    assert!(err.is_err(), "the hostile address was reached");
    assert!(
        !marker.exists(),
        "a command from the address ran locally through the ProxyCommand"
    );
}
