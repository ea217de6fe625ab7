//! Issue 30: `backup -timeout D` (k0sctl's --timeout) bounds the run as k0sctl's does
//! (cmd/flags.go `timeoutFlag`, phase/manager.go `Run`, phase/backup.go): finding a healthy
//! controller stops at the deadline with nothing run on it; a `k0s backup` that has begun runs
//! to the end and its copy on the host is removed, and past the deadline the archive is not kept.

use crate::support::e2e::Cluster;
use crate::support::lab::{LabOptions, SpecOptions};
use crate::support::prereq::require_lab;
use std::time::{Duration, Instant};

/// The files in `dir`.
fn files_in(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .expect("backups")
        .map(|e| e.expect("entry").file_name())
        .collect()
}

#[test]
fn backup_timeout_bounds_the_run_and_never_stops_k0s_backup_part_way() {
    require_lab!();
    let mut spec_opts = SpecOptions::default();
    // A slow hook before the backup: the deadline passes while the backup phase runs.
    spec_opts.host_yaml.insert(
        "c1".into(),
        "hooks:\n  backup:\n    before: [\"touch /tmp/hook-ran; sleep 5\"]\n".into(),
    );
    let c = Cluster::with(&[("c1", "controller")], LabOptions::default(), spec_opts);
    c.apply().contains("Apply complete");
    let out_dir = c.lab.dir().join("backups");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.to_str().expect("utf-8");
    let remote_copies = || {
        c.lab
            .exec_ok("c1", "ls -d /tmp/k0sform-backup-* 2>/dev/null; true")
    };

    // `k0s status` blocks on c1 (the probe gives up after 10 s): the deadline stops the search
    // for a healthy controller; no hook and no `k0s backup` ran.
    c.lab.exec_ok("c1", "touch /etc/k0s-lab/status-blocks");
    let started = Instant::now();
    let r = c.run(&["backup", "-out", out, "-timeout", "3s"]);
    let took = started.elapsed();
    c.lab.exec_ok("c1", "rm /etc/k0s-lab/status-blocks");
    r.expect(1)
        .contains("-timeout 3s reached before the backup began: nothing was run on a controller");
    assert!(took < Duration::from_secs(9), "took {took:?}");
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert_eq!(files_in(&out_dir), Vec::<std::ffi::OsString>::new());
    assert!(c.lab.exec("c1", "test -e /tmp/hook-ran").status.code() == Some(1));
    assert_eq!(remote_copies(), "");

    // The deadline passes in the backup phase (its slow hook): `k0s backup` runs to the end,
    // its copy on c1 is removed, and the run fails without keeping the archive.
    let r = c.run(&["backup", "-out", out, "-timeout", "3s"]);
    r.expect(1)
        .contains("-timeout 3s reached while `k0s backup` ran on");
    r.contains("the archive is not kept");
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert_eq!(files_in(&out_dir), Vec::<std::ffi::OsString>::new());
    c.lab.exec_ok("c1", "test -e /tmp/hook-ran");
    assert_eq!(remote_copies(), "");

    // Time enough (and 0, no limit): the backup is taken.
    for timeout in ["60s", "0"] {
        let r = c.run(&["backup", "-out", out, "-timeout", timeout]);
        r.expect(0);
        assert!(r.stdout.ends_with(".tar.gz\n"), "{}", r.stdout);
    }
    assert_eq!(files_in(&out_dir).len(), 2);
    assert_eq!(remote_copies(), "");
}
