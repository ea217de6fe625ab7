//! Probe tests of the host's identity and environment files (machine-id, os-release,
//! /etc/environment, OpenRC's conf.d).

use super::frames::tests::{NONCE, framed};
use super::tests::probe_nowhere;
use super::*;
use std::process::Command;

/// The probe script with its machine-id paths moved under `root`.
fn script_with_root(root: &std::path::Path) -> String {
    SCRIPT
        .replace(
            "/etc/machine-id",
            &format!("{}/etc/machine-id", root.display()),
        )
        .replace(
            "/var/lib/dbus/machine-id",
            &format!("{}/var/lib/dbus/machine-id", root.display()),
        )
        .replace(
            GENERATED_MACHINE_ID,
            &format!("{}{GENERATED_MACHINE_ID}", root.display()),
        )
}

fn machine_id_under(root: &std::path::Path) -> Result<String, ProbeError> {
    let p = probe_nowhere(&[], &[]);
    let mut argv = p.command.argv.clone();
    argv[2] = script_with_root(root);
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    let out = CommandOutput {
        status: out.status.code(),
        stdout: out.stdout,
        stderr: out.stderr,
    };
    p.reader.parse(&out).map(|f| f.machine_id)
}

#[test]
fn machine_id_falls_back_to_dbus_then_to_a_generated_stable_id() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/dbus")).unwrap();
    std::fs::write(
        root.join("var/lib/dbus/machine-id"),
        "d0b5000000000000000000000000d0b5\n",
    )
    .unwrap();
    assert_eq!(
        machine_id_under(root).unwrap(),
        "d0b5000000000000000000000000d0b5"
    );
    std::fs::write(
        root.join("etc/machine-id"),
        "e7c0000000000000000000000000e7c0\n",
    )
    .unwrap();
    assert_eq!(
        machine_id_under(root).unwrap(),
        "e7c0000000000000000000000000e7c0"
    );

    // Neither: one is generated and kept, so the next probe sees the same.
    std::fs::remove_file(root.join("etc/machine-id")).unwrap();
    std::fs::remove_file(root.join("var/lib/dbus/machine-id")).unwrap();
    let first = machine_id_under(root).unwrap();
    assert_eq!(first.len(), 32, "{first}");
    assert!(first.chars().all(|c| c.is_ascii_hexdigit()), "{first}");
    assert_eq!(machine_id_under(root).unwrap(), first);
    let kept = root.join(GENERATED_MACHINE_ID.trim_start_matches('/'));
    assert_eq!(std::fs::read_to_string(kept).unwrap().trim(), first);
}

#[test]
fn a_status_that_times_out_is_k0s_not_answering() {
    assert!(SCRIPT.contains(&format!("status_bound={STATUS_BOUND_SECS}\n")));
    for rc in [124, 137] {
        let out = framed(
            &[("machine_id", 0, "abc\n", ""), ("status", rc, "", "")],
            true,
        );
        let err = parse_probe(&out, NONCE, &[], &[]).unwrap_err();
        assert_eq!(err, ProbeError::K0sNotAnswering(STATUS_BOUND_SECS));
        assert!(err.to_string().starts_with("k0s not answering"), "{err}");
    }
}

#[test]
fn helpers() {
    assert_eq!(peer_url_host("https://10.0.0.1:2380"), "10.0.0.1");
    assert_eq!(peer_url_host("https://[fd00::1]:2380"), "fd00::1");
    assert_eq!(peer_url_host("http://c1.example:2380/"), "c1.example");
    assert_eq!(
        os_name("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n"),
        "debian 12"
    );
    assert_eq!(os_name("PRETTY_NAME=\"Alpine\"\n"), "Alpine");
}

/// Issue 27 item 8: the probe reads /etc/environment (a sha256 per value, the first `NAME=`
/// line as k0sctl's update matches it; a missing file is an empty one) and, on OpenRC, the
/// `export` lines k0sctl writes to /etc/conf.d/<unit> (rig initsystem/openrc.go), which
/// openrc-run sources before the init script `k0s install -e` wrote: the script's own exports
/// win.
#[test]
fn etc_environment_and_the_openrc_conf_d_file_are_read() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    for dir in ["etc/init.d", "etc/conf.d"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(
        root.join("etc/machine-id"),
        "e7c0000000000000000000000000e7c0\n",
    )
    .unwrap();
    std::fs::write(
        root.join("etc/init.d/k0sworker"),
        "#!/sbin/openrc-run\nexport A=init\nsupervisor=supervise-daemon\n",
    )
    .unwrap();
    std::fs::write(
        root.join("etc/conf.d/k0sworker"),
        "rc_ulimit=\"-n 1\"\nexport 'A=confd'\nexport 'B=only here'\n",
    )
    .unwrap();
    let run = || {
        let p = probe_nowhere(&[], &[]);
        let mut argv = p.command.argv.clone();
        argv[2] = SCRIPT.replace("/etc/", &format!("{}/etc/", root.display()));
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        let out = CommandOutput {
            status: out.status.code(),
            stdout: out.stdout,
            stderr: out.stderr,
        };
        p.reader.parse(&out).unwrap()
    };
    let f = run();
    assert_eq!(f.etc_environment, Some(BTreeMap::new()), "no file: empty");
    let env = f.service_env.expect("an OpenRC worker's environment");
    assert_eq!(env["A"], crate::hash::sha256_hex("init"));
    assert_eq!(env["B"], crate::hash::sha256_hex("only here"));
    assert_eq!(env.len(), 2);

    std::fs::write(
        root.join("etc/environment"),
        "HTTPS_PROXY=http://u:s3cret@p:3128\nHTTPS_PROXY=second\n",
    )
    .unwrap();
    let file = run().etc_environment.expect("read");
    assert_eq!(file.len(), 1);
    assert_eq!(
        file["HTTPS_PROXY"],
        crate::hash::sha256_hex("http://u:s3cret@p:3128")
    );
}
