//! Where the k0s binary comes from: a release mirror, a URL without sums, uploaded once from
//! here, placed or already on the host; and when it is hashed.

use super::*;

/// Puts a `sha256sum` that logs its arguments (`stdin` for none) ahead of the real one on
/// `host`'s PATH (/usr/local/bin, the host's own disk), with an empty log.
fn log_hashes_on(c: &Cluster, host: &str) {
    c.lab.exec_ok(
        host,
        "printf '%s\\n' '#!/bin/sh' 'echo \"${*:-stdin}\" >> /root/sha256sum.log' \
         'exec /usr/bin/sha256sum \"$@\"' > /usr/local/bin/sha256sum \
         && chmod 755 /usr/local/bin/sha256sum && : > /root/sha256sum.log",
    );
}

/// What the logging `sha256sum` (`log_hashes_on`) hashed on `host` since the last call, a line
/// each; the log starts over.
fn hashes_logged(c: &Cluster, host: &str) -> Vec<String> {
    c.lab
        .exec_ok(host, "cat /root/sha256sum.log && : > /root/sha256sum.log")
        .lines()
        .map(String::from)
        .collect()
}

/// How many of `hashes_logged` were of the k0s binary at /usr/local/bin/k0s.
fn k0s_hashes(c: &Cluster, host: &str) -> usize {
    hashes_logged(c, host)
        .iter()
        .filter(|l| l.contains("/usr/local/bin/k0s"))
        .count()
}

/// A k0s binary k0sform puts in place is hashed on its host once, by the upload's check, and
/// not again by the probe that records the host after its install, nor by later plans while its
/// stat line is the recorded one (a real k0s is a few hundred MB). A binary changed since is
/// hashed. The hashes are counted by a logging `sha256sum` ahead of the real one on each host's
/// PATH (/usr/local/bin, the host's own disk).
#[test]
fn a_placed_k0s_binary_is_hashed_only_by_its_upload_check() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    let names = ["c1", "w1"];
    for n in names {
        log_hashes_on(&c, n);
    }

    // Bootstrap c1 and join w1: each binary is checked as it is uploaded (hashed from stdin),
    // never hashed at its install path.
    bootstrap(&c);
    for n in names {
        let log = hashes_logged(&c, n);
        assert!(log.iter().any(|l| l == "stdin"), "{n}: {log:?}");
        assert!(
            !log.iter().any(|l| l == "/usr/local/bin/k0s"),
            "{n}: {log:?}"
        );
    }
    let st = c.state_json();
    for n in names {
        let rec = &c.state_host(n).unwrap()["k0s_binary"];
        let live = c
            .lab
            .exec_ok(n, "stat -L -c '%s %d %i %y %z' -- /usr/local/bin/k0s");
        assert_eq!(rec["stat"].as_str(), Some(live.trim()), "{n}: {st}");
        let sha = c.lab.exec_ok(n, "/usr/bin/sha256sum /usr/local/bin/k0s");
        assert_eq!(rec["sha256"].as_str(), sha.split_whitespace().next(), "{n}");
    }

    // Later plans trust the recorded stat line.
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    assert_eq!((k0s_hashes(&c, "c1"), k0s_hashes(&c, "w1")), (0, 0));

    // A binary touched since (its change time moved) is hashed again.
    c.lab.exec_ok("w1", "touch /usr/local/bin/k0s");
    c.run(&["plan"]).expect(0);
    assert_eq!((k0s_hashes(&c, "c1"), k0s_hashes(&c, "w1")), (0, 1));
}

/// `useExistingK0s`: the k0s binary already on the host is installed and never replaced; a
/// version bump that would need another binary there is refused before anything runs.
#[test]
fn use_existing_k0s_installs_the_binary_on_the_host() {
    require_lab!();
    let mut c = c1_w1_at("v1.33.4+k0s.0");
    c.lab.install_double("w1");
    let sha = || c.lab.exec_ok("w1", "sha256sum /usr/local/bin/k0s");
    let placed = sha();
    // w1's entry: useExistingK0s instead of k0sBinaryPath.
    let write = |c: &Cluster| {
        c.write_spec(&["c1", "w1"]);
        let text = std::fs::read_to_string(&c.spec).expect("spec");
        let addr = format!("address: {}\n", c.lab.address("w1"));
        let (head, tail) = text.split_at(text.find(&addr).expect("w1 in the spec"));
        let mut out = head.to_string();
        let mut done = false;
        for l in tail.lines() {
            if !done && l.trim_start().starts_with("k0sBinaryPath:") {
                out.push_str("    useExistingK0s: true\n");
                done = true;
            } else {
                out.push_str(l);
                out.push('\n');
            }
        }
        assert!(done, "{text}");
        std::fs::write(&c.spec, out).expect("spec");
    };
    write(&c);
    let r = c.apply();
    assert!(
        !r.stdout
            .contains(&format!("{}: upload_binary", c.lab.address("w1"))),
        "{}",
        r.stdout
    );
    assert_eq!(c.nodes("c1").get("w1"), Some(&true));
    assert_eq!(sha(), placed, "the placed binary was replaced");

    // A newer version for everyone: c1 gets it uploaded, w1 has no way to get it.
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.spec_opts.k0s_binary = Some(c.lab.k0s_double_with_version("v1.33.5+k0s.0"));
    write(&c);
    c.run(&["plan"])
        .expect(1)
        .contains("upgrading k0s to v1.33.5+k0s.0 needs that binary")
        .contains("useExistingK0s: k0sform uses the k0s binary on the host as it is");
    assert_eq!(sha(), placed);
}

/// An apply that must fail before any host changes: exit 1 with `needle`, every host's
/// installed k0s binary, service, config and data as before, the state file byte for byte as
/// before. A host whose own download succeeded keeps that verified binary staged beside the
/// installed one (`k0s.k0sform-new`, not installed, not running); the next run stages over it.
fn apply_fails_and_changes_nothing(c: &Cluster, names: &[&str], needle: &str) {
    let snapshot = |h: &str| -> String {
        format!(
            "{}\n{}",
            c.host_snapshot(h),
            c.lab.ssh_ok(h, "k0s version; ls /usr/local/bin")
        )
        .lines()
        .filter(|l| !l.contains("k0s.k0sform-new"))
        .collect::<Vec<_>>()
        .join("\n")
    };
    let hosts: Vec<String> = names.iter().map(|h| snapshot(h)).collect();
    let state = std::fs::read(&c.state).expect("state");
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains(needle);
    let after: Vec<String> = names.iter().map(|h| snapshot(h)).collect();
    assert_eq!(hosts, after, "a failed download changed a host");
    assert_eq!(
        state,
        std::fs::read(&c.state).expect("state"),
        "a failed download changed the state"
    );
}

/// k0sctl's default: no k0sBinaryPath, no uploadBinary, no version. The version comes from the
/// (loopback) version index, each host downloads k0s from the release mirror with its
/// published sha256; a downgrade is refused; every broken download (checksum, 404, timeout,
/// no curl/wget) fails before any host or the state changes; an upgrade swaps binaries in.
#[test]
fn hosts_download_k0s_from_a_release_mirror() {
    require_lab!();
    let (mut c, mirror) = from_mirror(
        C1_W1,
        SpecOptions::default(),
        &["v1.33.3+k0s.0", "v1.33.4+k0s.0", "v1.33.5+k0s.0"],
    );
    mirror.set_index("v1.33.4+k0s.0", "v1.33.5+k0s.0");
    let hosts = ["c1", "w1"];

    // New cluster without a version: the stable one, shown with where it came from.
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("k0s version v1.33.4+k0s.0 (latest stable release, from http://")
        .contains("k0s v1.33.4+k0s.0 downloaded by the host from http://");
    c.apply().contains("Apply complete");
    runs_swapped_in(&c, &hosts, "v1.33.4+k0s.0");
    assert_eq!(c.state_json()["cluster"]["k0s_version"], "v1.33.4+k0s.0");
    assert_eq!(
        mirror.downloads("v1.33.4+k0s.0"),
        2,
        "one download per host"
    );
    // Converged: the running version is kept, nothing to do, nothing downloaded.
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // Downgrade: refused naming the hosts, unless -allow-downgrade.
    c.spec_opts.k0s_version = Some("v1.33.3+k0s.0".parse().unwrap());
    c.write_spec(&hosts);
    plan_changes_nothing(&c, &[])
        .expect(1)
        .contains("c1 (")
        .contains("w1 (")
        .contains("would be downgraded from v1.33.4+k0s.0 to v1.33.3+k0s.0")
        .contains("-allow-downgrade");
    plan_changes_nothing(&c, &["-allow-downgrade"])
        .expect(0)
        .contains("(-allow-downgrade)");

    // Upgrade, first against broken downloads.
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".parse().unwrap());
    c.write_spec(&hosts);
    let good = c.lab.k0s_double_with_version("v1.33.5+k0s.0");
    mirror.corrupt("v1.33.5+k0s.0");
    apply_fails_and_changes_nothing(&c, &hosts, "checksum mismatch");
    mirror.remove_binary("v1.33.5+k0s.0");
    apply_fails_and_changes_nothing(&c, &hosts, "404");
    mirror.publish("v1.33.5+k0s.0", &good);
    mirror.stall("v1.33.5+k0s.0");
    c.env
        .push(("K0SFORM_K0S_DOWNLOAD_TIMEOUT".into(), "3s".into()));
    apply_fails_and_changes_nothing(&c, &hosts, "timed out");
    c.env.pop();
    std::fs::remove_file(format!(
        "{}.stall",
        mirror.binary_path("v1.33.5+k0s.0").display()
    ))
    .expect("unstall");
    c.lab.hide("w1", &["/usr/bin/curl", "/usr/bin/wget"]);
    apply_fails_and_changes_nothing(&c, &hosts, "neither curl nor wget is installed");
    // Power-cycled, w1 has curl again (and runs k0s again from its unit).
    c.lab.power_off("w1");
    c.lab.power_on("w1");
    c.eventually(30, "w1 Ready", || c.nodes("c1").get("w1") == Some(&true));

    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("k0s version v1.33.4+k0s.0 → v1.33.5+k0s.0");
    c.apply().contains("Apply complete");
    runs_swapped_in(&c, &hosts, "v1.33.5+k0s.0");
    for h in hosts {
        assert_eq!(
            c.state_host(h).expect("recorded")["k0s_version"],
            "v1.33.5+k0s.0"
        );
    }
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}

/// Issue 27.7: hosts with `k0sDownloadURL` (here the lab's loopback mirror) and no
/// `k0sDownloadSha256`, where no `sha256sums.txt` is published. k0sctl checks no checksum
/// (`pkg/k0s/binprovider/download.go`) and needs no internet: `plan` fetches nothing from the
/// default release URL (unreachable here), says in one line that the binary is not checked and
/// how to pin it; `apply` installs, and the sha256 each host computed is shown and recorded.
#[test]
fn k0s_download_url_without_published_sums_plans_and_installs() {
    require_lab!();
    let mut c = c1_w1_with(SpecOptions {
        from_release: true,
        k0s_version: Some("v1.33.4+k0s.0".into()),
        ..SpecOptions::default()
    });
    let mirror = c.lab.start_mirror();
    let v = "v1.33.4+k0s.0";
    mirror.publish(v, &c.lab.k0s_double_with_version(v));
    mirror.remove_sums(v);
    let sha = k0sform::hash::sha256_file(&mirror.binary_path(v)).expect("hash");
    for h in ["c1", "w1"] {
        c.spec_opts.host_yaml.insert(
            h.into(),
            format!("k0sDownloadURL: {}/releases/%v/k0s-%v-%p", mirror.url),
        );
    }
    c.write_spec(&["c1", "w1"]);
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains(&format!("k0s {v} downloaded by the host from {}/releases/v1.33.4%2Bk0s.0/k0s-v1.33.4%2Bk0s.0-", mirror.url))
        .contains("(sha256 not checked, recorded as downloaded)")
        .contains("Warning: the k0s binary that c1, w1 download is not checked against a published sha256 (as in k0sctl; there is none for a k0sDownloadURL or before k0s v1.28.2): each host's sha256 of its download is recorded; set k0sDownloadSha256 on the host to pin it");
    c.apply().contains("Apply complete").contains(&format!(
        "has sha256 {sha} (not checked against a published sha256, as in k0sctl)"
    ));
    runs_swapped_in(&c, &["c1", "w1"], v);
    assert_eq!(mirror.downloads(v), 2, "one download per host");
    for h in ["c1", "w1"] {
        assert_eq!(
            c.state_host(h).expect("recorded")["k0s_binary"]["sha256"],
            sha.as_str(),
            "{h}"
        );
    }
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // Pinned: a binary that is not the pinned one is refused before anything changes.
    for h in ["c1", "w1"] {
        c.spec_opts.host_yaml.insert(
            h.into(),
            format!(
                "k0sDownloadURL: {}/releases/%v/k0s-%v-%p\nk0sDownloadSha256: {}",
                mirror.url,
                "0".repeat(64)
            ),
        );
    }
    c.spec_opts.k0s_version = Some("v1.33.5+k0s.0".into());
    mirror.publish(
        "v1.33.5+k0s.0",
        &c.lab.k0s_double_with_version("v1.33.5+k0s.0"),
    );
    mirror.remove_sums("v1.33.5+k0s.0");
    c.write_spec(&["c1", "w1"]);
    apply_fails_and_changes_nothing(&c, &["c1", "w1"], "checksum mismatch");
}

/// `uploadBinary: true`: k0sform downloads each release once into its local cache and uploads
/// it to every host. The spec names the version without its `v`, as k0sctl allows: the release
/// is still `v1.33.4+k0s.0` (issue 27: that used to be a 404).
#[test]
fn upload_binary_downloads_once_locally_for_every_host() {
    require_lab!();
    let (c, mirror) = from_mirror(
        &[("c1", "controller"), ("w1", "worker"), ("w2", "worker")],
        SpecOptions {
            k0s_version: Some("1.33.4+k0s.0".into()),
            host_yaml: ["c1", "w1", "w2"]
                .iter()
                .map(|h| (h.to_string(), "uploadBinary: true".to_string()))
                .collect(),
            ..SpecOptions::default()
        },
        &["v1.33.4+k0s.0"],
    );
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("uploaded (sha256 ")
        .contains(", downloaded locally from http://");
    assert_eq!(
        mirror.downloads("v1.33.4+k0s.0"),
        0,
        "plan downloads no binary"
    );
    c.apply().contains("Apply complete");
    assert_eq!(mirror.downloads("v1.33.4+k0s.0"), 1, "one local download");
    for h in ["c1", "w1", "w2"] {
        assert_eq!(
            c.lab.ssh_ok(h, "k0s version").trim(),
            "v1.33.4+k0s.0",
            "{h}"
        );
    }
    let cached = c
        .lab
        .dir()
        .join("cache/k0sform/k0s/linux")
        .join(lab::k0s_arch())
        .join("k0s-1.33.4+k0s.0");
    assert!(cached.is_file(), "{} cached", cached.display());
}

/// A real k0s binary is a few hundred MB: a plan hashes a host's binary only when its `stat`
/// line is not the one recorded with its hash, so an unchanged binary costs no hashing, while a
/// binary patched in place (same version, same size and modification time kept or not) is
/// still seen and replaced by the spec's.
#[test]
fn plan_hashes_the_k0s_binary_only_when_it_changed() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    bootstrap(&c);
    for h in ["c1", "w1"] {
        let rec = &c.state_host(h).expect("recorded")["k0s_binary"];
        assert_eq!(rec["sha256"].as_str().map(str::len), Some(64), "{h}: {rec}");
        assert!(
            rec["stat"].as_str().is_some_and(|s| !s.is_empty()),
            "{h}: {rec}"
        );
    }
    // Every sha256sum the probe runs on w1, logged by a wrapper first in its PATH.
    log_hashes_on(&c, "w1");
    let hashed = || k0s_hashes(&c, "w1");
    // The wrapper is what the probe's shell finds.
    c.lab.ssh_ok("w1", "sha256sum /usr/local/bin/k0s");
    assert_eq!(hashed(), 1, "the wrapper logs");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    assert_eq!(hashed(), 0, "the unchanged binary was hashed");

    // The same version patched in place: the stat line moved, the binary is hashed and its
    // other bytes replaced by the spec's binary.
    c.lab.exec_ok(
        "w1",
        "printf '# patched\\n' >>/usr/local/bin/k0s && /usr/local/bin/k0s version",
    );
    c.run(&["plan", "-detailed-exitcode"])
        .expect(2)
        .contains("the k0s binary changed");
    assert_eq!(hashed(), 1, "the patched binary was not hashed");
    let before = c.state_host("w1").expect("w1")["k0s_binary"].clone();
    c.apply();
    let after = c.state_host("w1").expect("w1")["k0s_binary"].clone();
    assert_ne!(
        before["stat"], after["stat"],
        "the new binary's stat line recorded"
    );
    hashes_logged(&c, "w1");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    assert_eq!(hashed(), 0, "the binary k0sform installed was hashed again");
    assert_eq!(
        c.lab
            .exec_ok("w1", "/usr/bin/sha256sum /usr/local/bin/k0s")
            .split(' ')
            .next(),
        after["sha256"].as_str()
    );
}

/// Issue 27 item 8: a host's `environment` also goes to its /etc/environment, as k0sctl writes
/// it (the first `NAME=` line replaced, else appended, the rest kept), before the host
/// downloads k0s, and the download and hooks see it: here `http_proxy` names the lab's
/// mirror, which logs a proxied request in absolute form. Values never show; a second plan has
/// no changes.
#[test]
fn environment_goes_to_etc_environment_and_the_download_goes_through_its_proxy() {
    require_lab!();
    let (mut c, mirror) = from_mirror(C1_W1, SpecOptions::default(), &["v1.33.4+k0s.0"]);
    mirror.set_index("v1.33.4+k0s.0", "v1.33.4+k0s.0");
    let env = format!(
        "environment:\n  http_proxy: \"{}\"\n  NO_PROXY: 10.0.0.0/8\n  SECRET_TOKEN: s3cret-value\nhooks:\n  apply:\n    before:\n      - 'echo \"$$SECRET_TOKEN\" > /tmp/hook-saw'\n",
        mirror.url
    );
    c.spec_opts.host_yaml.insert("w1".into(), env);
    c.spec_opts.k0s_version = Some("v1.33.4+k0s.0".into());
    c.write_spec(&["c1", "w1"]);
    c.lab.exec_ok(
        "w1",
        "printf 'LANG=C.UTF-8\\nNO_PROXY=old\\n' > /etc/environment",
    );

    let plan = c.run(&["plan"]);
    plan.expect(0)
        .contains("/etc/environment sets NO_PROXY, SECRET_TOKEN, http_proxy");
    let applied = c.apply();
    for out in [&plan, &applied] {
        assert!(!out.text().contains("s3cret-value"), "{}", out.text());
    }
    assert_eq!(
        c.lab.exec_ok("w1", "cat /etc/environment"),
        format!(
            "LANG=C.UTF-8\nNO_PROXY=10.0.0.0/8\nSECRET_TOKEN=s3cret-value\nhttp_proxy={}\n",
            mirror.url
        )
    );
    // c1 has no `environment`: its file is untouched.
    assert_eq!(c.lab.exec_ok("c1", "cat /etc/environment"), "");
    // w1 fetched k0s through the proxy (a request in absolute form); c1 directly.
    let log =
        std::fs::read_to_string(c.lab.dir().join("mirror").join("mirror.log")).unwrap_or_default();
    let proxied: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("GET http://") && l.contains("/k0s-v1.33.4"))
        .collect();
    assert_eq!(proxied.len(), 1, "{log}");
    assert_eq!(c.lab.exec_ok("w1", "cat /tmp/hook-saw"), "s3cret-value\n");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
}
