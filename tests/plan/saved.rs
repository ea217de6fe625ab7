//! Saved plans: staleness, resealing, options and versions chosen again, and what a saved
//! plan may and may not decide.

use super::*;

/// `case_inputs` with machine-ids and host key fingerprints that look like real ones, in the
/// state and the probe alike (the cases' `mid-c01` and `SHA256:key-c01` would not pass the
/// checks a saved plan is read with): hex and base64 of the fixtures' own values.
fn saved_case_inputs(name: &str) -> Inputs {
    use base64::Engine as _;
    let mut i = case_inputs(name);
    let machine = |m: &mut String| {
        let hex: String = m.bytes().map(|b| format!("{b:02x}")).collect();
        *m = format!("{hex:0<32}");
    };
    let key = |k: &mut String| {
        *k = format!(
            "SHA256:{}",
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(k.as_bytes())
        );
    };
    for h in &mut i.state.hosts {
        machine(&mut h.machine_id);
        key(&mut h.host_key);
    }
    for h in &mut i.reality.hosts {
        if let Probe::Reached(f) = &mut h.probe {
            machine(&mut f.machine_id);
            key(&mut f.host_key);
        }
    }
    i
}

/// A `files[].src` glob (k0sctl `cluster/uploadfile.go`): each match is planned as its own
/// upload line (source → destination, sha256), in path order whatever order the folder lists
/// them in; once they are on the host, the next plan is a no-op.
#[test]
fn glob_matches_are_planned_one_line_each_and_then_nothing() {
    let _snapshots = snapshots_in_tests_dir();
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(d.path().join("images/sub")).unwrap();
    for f in ["c.tar", "a.tar", "b.tar", "notes.txt", "sub/d.tar"] {
        std::fs::write(d.path().join("images").join(f), f).unwrap();
    }
    let yaml = d.path().join("k0sctl.yaml");
    std::fs::write(
        &yaml,
        "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata:\n  name: prod\nspec:\n  hosts:\n    - role: controller\n      ssh: {address: 10.0.0.1}\n    - role: worker\n      ssh: {address: 10.0.1.1}\n      files:\n        - {name: images, src: images/*.tar, dstDir: /var/lib/k0s/images, perm: '0640'}\n  k0s:\n    version: v1.33.4+k0s.0\n",
    )
    .unwrap();
    let env = |_: &str| None;
    let loaded = k0sform::spec::load_with(
        &[yaml],
        &k0sform::spec::LoadOptions {
            env: &env,
            stdin: None,
        },
    )
    .expect("spec loads");
    let files = k0sform::files::desired(&loaded.spec.hosts[1]).expect("expands");
    // The `files` case's running worker w01 gets the glob's matches instead of its own files.
    let mut i = case_inputs("files");
    let w01 = HostId::new("10.0.1.1".to_string(), 22);
    i.desired
        .hosts
        .iter_mut()
        .find(|h| h.host == w01)
        .expect("w01")
        .files = files.clone();
    // The probe reports every file the spec names, here none present.
    facts_mut(&mut i.reality, &w01).expect("w01 reached").files = files
        .iter()
        .map(|f| RemoteFile {
            path: f.remote.clone(),
            ..Default::default()
        })
        .collect();
    let p = run(&i).expect("plan");
    let dir = d.path().display().to_string();
    let text = render::text(&p, false).replace(&dir, "[DIR]");
    let w01_lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("~ worker w01"))
        .take_while(|l| !l.is_empty())
        .collect();
    insta::assert_snapshot!(w01_lines.join("\n"));
    let (state, reality) = simulate_apply(&p, &i);
    let again = plan::diff(
        &i.spec,
        &state,
        &reality,
        &i.desired,
        &PlanOptions::default(),
    )
    .expect("replan");
    assert!(!again.has_changes(), "{}", render::text(&again, false));
}

/// A URL `files[].src` (k0sctl `phase/uploadfiles.go` `uploadURL`): its `%v` `%p` tokens are
/// expanded for the host (spec version, host architecture) in the planned step; without a
/// `sha256` the plan says the download is not verified, and once the state records the hash
/// the host got from that URL, a host with that file plans nothing; another version (another
/// URL) downloads again; with a `sha256` the plan holds the file to it.
#[test]
fn url_sources_are_expanded_per_host_and_recorded_hashes_hold() {
    let _snapshots = snapshots_in_tests_dir();
    let mut i = case_inputs("files");
    let w01 = HostId::new("10.0.1.1".to_string(), 22);
    let bundle = k0sform::files::DesiredFile {
        name: "bundle".into(),
        remote: "/var/lib/k0s/images/bundle-%v-%p.tar".into(),
        source: String::new(),
        url: Some("http://127.0.0.1:8080/b/bundle-%v-%p.tar".into()),
        sha256: String::new(),
        mode: 0o644,
        user: None,
        group: None,
        dir_mode: 0o755,
    };
    i.desired
        .hosts
        .iter_mut()
        .find(|h| h.host == w01)
        .expect("w01")
        .files = vec![bundle.clone()];
    let facts = facts_mut(&mut i.reality, &w01).expect("w01 reached");
    facts.arch = "x86_64".into();
    facts.files = vec![RemoteFile {
        path: bundle.remote.clone(),
        ..Default::default()
    }];
    let p = run(&i).expect("plan");
    let url = "http://127.0.0.1:8080/b/bundle-v1.33.4%2Bk0s.0-amd64.tar";
    let text = render::text(&p, false);
    let w01_lines = |text: &str| -> String {
        text.lines()
            .skip_while(|l| !l.contains("worker w01"))
            .take_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    insta::assert_snapshot!(w01_lines(&text));
    let planned = p
        .steps
        .iter()
        .find_map(|s| match &s.kind {
            StepKind::UploadFiles { files } if s.host == w01 => Some(files),
            _ => None,
        })
        .expect("w01 upload");
    assert_eq!(planned[0].url.as_deref(), Some(url));
    assert_eq!(
        planned[0].sha256, "",
        "an unverified download checks nothing"
    );

    // The host got it; the state records what the host computed: nothing to do.
    let got = sha256_hex("bundle");
    i.state.record_download(k0sform::state::DownloadRecord {
        address: w01.address.clone(),
        port: 22,
        path: bundle.remote.clone(),
        url_sha256: sha256_hex(url),
        sha256: got.clone(),
    });
    let facts = facts_mut(&mut i.reality, &w01).expect("w01 reached");
    facts.files[0] = RemoteFile {
        path: bundle.remote.clone(),
        sha256: Some(got.clone()),
        mode: Some(0o644),
        user: Some("root".into()),
        group: Some("root".into()),
        uid: Some(0),
        gid: Some(0),
    };
    let p = run(&i).expect("plan");
    assert!(
        !render::text(&p, false).contains("worker w01"),
        "{}",
        render::text(&p, false)
    );
    // A record of another URL (another version) is no record.
    i.spec.k0s.version = Some(K0sVersion::parse("v1.33.5+k0s.0").unwrap());
    let p = run(&i).expect("plan");
    assert!(
        render::text(&p, false)
            .contains("/var/lib/k0s/images/bundle-%v-%p.tar (not downloaded from this URL yet)"),
        "{}",
        render::text(&p, false)
    );
    i.spec.k0s.version = Some(K0sVersion::parse("v1.33.4+k0s.0").unwrap());
    // The spec's sha256 is what counts when it is given.
    let other = sha256_hex("other");
    i.desired
        .hosts
        .iter_mut()
        .find(|h| h.host == w01)
        .expect("w01")
        .files[0]
        .sha256 = other.clone();
    let p = run(&i).expect("plan");
    assert!(
        w01_lines(&render::text(&p, false)).contains(&format!(
            "~ file {url} → /var/lib/k0s/images/bundle-%v-%p.tar (0644, sha256 {}…)",
            &other[..4]
        )),
        "{}",
        render::text(&p, false)
    );
}

#[test]
fn saved_plan_detects_every_kind_of_staleness() {
    let i = saved_case_inputs("replace_machine_id");
    let p = run(&i).expect("plan");
    let saved = SavedPlan::new(p, &i.state, "aaaa", &i.reality);
    saved
        .verify(&i.state, "aaaa", &i.reality)
        .expect("fresh plan verifies");
    let back = SavedPlan::from_json(&saved.to_json()).unwrap();
    assert_eq!(back, saved);
    back.verify(&i.state, "aaaa", &i.reality).unwrap();

    let mut altered = saved.clone();
    altered.plan.cluster_name = "other".into();
    let e = altered.verify(&i.state, "aaaa", &i.reality).unwrap_err();
    assert!(e.reasons[0].contains("altered"), "{e}");

    let mut moved = i.state.clone();
    moved.serial += 1;
    let e = saved.verify(&moved, "aaaa", &i.reality).unwrap_err();
    assert_eq!(
        e.reasons,
        vec!["the state moved from serial 12 to 13".to_string()]
    );

    let e = saved.verify(&i.state, "bbbb", &i.reality).unwrap_err();
    assert_eq!(e.reasons.len(), 1);
    assert!(e.reasons[0].starts_with("the spec changed"), "{e}");

    let mut rebuilt = i.reality.clone();
    if let Probe::Reached(f) = &mut rebuilt.hosts[1].probe {
        f.machine_id = "fresh-machine".into();
    }
    let e = saved.verify(&i.state, "aaaa", &rebuilt).unwrap_err();
    assert_eq!(e.reasons.len(), 1);
    assert!(e.reasons[0].contains("machine-id changed"), "{e}");
    assert!(e.to_string().starts_with("the saved plan is stale"));
}

/// A saved plan is a review artefact: its seal is a plain sha256 anyone can recompute, so a file
/// whose steps were swapped for a hook line (`id > /tmp/x`) and resealed passes the seal, and
/// `apply FILE` must refuse it because the plan derived again from spec, state and probe differs.
#[test]
fn resealed_plan_with_tampered_steps_is_not_the_derived_plan() {
    let i = case_inputs("add_worker");
    let p = run(&i).expect("plan");
    let saved = SavedPlan::with_options(p.clone(), &i.state, "aaaa", &i.reality, i.options.clone());
    let opts = saved.options_for_apply(&i.options).expect("same options");
    assert_eq!(opts, i.options);
    saved
        .matches(&run(&i).unwrap())
        .expect("untampered plan matches");

    let mut evil = saved.clone();
    let host = p.steps[0].host.clone();
    evil.plan.steps = vec![k0sform::plan::Step {
        id: 0,
        host,
        kind: StepKind::RunHooks {
            action: "apply".into(),
            stage: "before".into(),
            lines: vec!["id > /tmp/x".into()],
        },
        after: vec![],
    }];
    evil.seal();
    evil.verify(&i.state, "aaaa", &i.reality)
        .expect("a resealed file passes the seal: it proves nothing");
    let e = evil.matches(&run(&i).unwrap()).unwrap_err();
    assert!(e.to_string().contains("step 0 is run_hooks"), "{e}");
    // Steps kept, only the shown description changed: refused as well.
    let mut evil = saved.clone();
    evil.plan.changes.clear();
    evil.seal();
    assert!(evil.matches(&run(&i).unwrap()).is_err());
}

/// `options.replace` written into a saved plan (resealed) would switch off the host-key check
/// for that host: `apply FILE` takes `-replace` and `-exclude` only from its command line.
#[test]
fn resealed_plan_cannot_grant_replace_or_exclude() {
    let i = case_inputs("add_worker");
    let p = run(&i).expect("plan");
    let addr = p.steps[0].host.address.clone();
    let mut evil = SavedPlan::with_options(p, &i.state, "aaaa", &i.reality, i.options.clone());
    evil.options.replace = vec![addr.clone()];
    evil.seal();
    let e = evil.options_for_apply(&PlanOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "made with -replace {addr} but apply was given no -replace"
        )),
        "{e}"
    );
    // Repeated on the command line, it is the user's choice.
    let cli = PlanOptions {
        replace: vec![addr.clone()],
        ..Default::default()
    };
    assert_eq!(
        evil.options_for_apply(&cli).unwrap().replace,
        vec![addr.clone()]
    );

    let mut evil = saved_plan(&i);
    evil.options.exclude = vec![addr.clone()];
    evil.seal();
    assert!(evil.options_for_apply(&PlanOptions::default()).is_err());
    // Narrowing options come from the file; a stricter host-key rule from either side.
    let mut narrow = saved_plan(&i);
    narrow.options.target = vec![addr.clone()];
    narrow.options.refresh_only = true;
    let strict = PlanOptions {
        refuse_first_contact: true,
        ..Default::default()
    };
    let o = narrow.options_for_apply(&strict).unwrap();
    assert_eq!(
        (o.target, o.refresh_only, o.refuse_first_contact),
        (vec![addr], true, true)
    );
}

/// The plan of `i`, saved.
fn saved_plan(i: &Inputs) -> SavedPlan {
    SavedPlan::new(run(i).unwrap(), &i.state, "aaaa", &i.reality)
}

/// A saved plan of `i` resealed with `set` done to its options (as anyone editing the file
/// could): `apply FILE` without `flag` is refused naming it; with it (`set` done to the command
/// line's options) it is taken (`get`); a plan saved without it is refused with it.
fn check_resealed_flag_is_repeated(
    i: &Inputs,
    flag: &str,
    set: fn(&mut PlanOptions),
    get: fn(&PlanOptions) -> bool,
) {
    let mut evil = saved_plan(i);
    set(&mut evil.options);
    evil.seal();
    let e = evil.options_for_apply(&PlanOptions::default()).unwrap_err();
    let refusal = format!("made with {flag} but apply was run without it");
    assert!(e.to_string().contains(&refusal), "{e}");
    let mut cli = PlanOptions::default();
    set(&mut cli);
    assert!(get(&evil.options_for_apply(&cli).unwrap()), "{flag} taken");
    let plain = saved_plan(i);
    assert!(plain.options_for_apply(&cli).is_err(), "{flag} added");
}

/// `-no-drain` in a saved plan (resealed) would restart hosts under their pods: `apply FILE`
/// must be given it again, and a plan made with drains cannot lose them either.
#[test]
fn saved_plan_cannot_switch_drains_off() {
    let i = case_inputs("upgrade");
    check_resealed_flag_is_repeated(&i, "-no-drain", |o| o.no_drain = true, |o| o.no_drain);
}

/// Issue 28, item 4: `-restore-from` and `-allow-downgrade` in a saved plan (resealed) choose
/// what runs: `apply FILE` must be given them again, the archive as read from the disk now
/// (path, sha256, peer address) must be the file's, and what is used is the disk's.
#[test]
fn saved_plan_cannot_choose_the_archive_or_a_downgrade() {
    use k0sform::plan::RestoreArchive;
    let i = case_inputs("upgrade");
    let archive = |path: &str, sha: &str, peer: Option<&str>| RestoreArchive {
        path: path.into(),
        sha256: sha.into(),
        peer_address: peer.map(str::to_string),
    };
    let with = |r: Option<RestoreArchive>| PlanOptions {
        restore: r,
        ..Default::default()
    };
    let mut evil = saved_plan(&i);
    evil.options.restore = Some(archive("/b/backup.tar.gz", "11", Some("10.0.0.1")));
    evil.seal();
    for (cli, needle) in [
        (
            with(None),
            "made with -restore-from /b/backup.tar.gz but apply was given no -restore-from",
        ),
        (
            with(Some(archive("/c/backup.tar.gz", "11", Some("10.0.0.1")))),
            "apply was given -restore-from /c/backup.tar.gz",
        ),
        (
            with(Some(archive("/b/backup.tar.gz", "22", Some("10.0.0.1")))),
            "/b/backup.tar.gz changed since the plan was made",
        ),
        (
            with(Some(archive("/b/backup.tar.gz", "11", None))),
            "the plan records the etcd peer address 10.0.0.1, the archive has none",
        ),
    ] {
        let e = evil.options_for_apply(&cli).unwrap_err();
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    let disk = archive("/b/backup.tar.gz", "11", Some("10.0.0.1"));
    let o = evil.options_for_apply(&with(Some(disk.clone()))).unwrap();
    assert_eq!(o.restore, Some(disk.clone()));
    let plain = saved_plan(&i);
    assert!(plain.options_for_apply(&with(Some(disk))).is_err());

    check_resealed_flag_is_repeated(
        &i,
        "-allow-downgrade",
        |o| o.allow_downgrade = true,
        |o| o.allow_downgrade,
    );
}

/// Issue 28, item 4: the k0s version a saved plan chose (the spec names none) is never taken
/// from the file: every version it names must be a k0s version when it is read, and the one
/// chosen again at apply must be the file's.
#[test]
fn saved_plan_versions_are_checked_and_chosen_again() {
    use k0sform::plan::ResolvedVersion;
    let i = saved_case_inputs("add_worker");
    let p = run(&i).expect("plan");
    let mut saved = SavedPlan::new(p.clone(), &i.state, "aaaa", &i.reality);
    let version = |v: &str| k0sform::version::K0sVersion::parse(v).expect("a k0s version");
    saved.plan.k0s_version = Some(ResolvedVersion {
        version: version("v1.33.4+k0s.0"),
        source: "latest stable release".into(),
    });
    saved.seal();
    let good = saved.to_json();
    SavedPlan::from_json(&good).expect("a k0s version parses");
    // Not a version at all: refused as the file is read (K0sVersion's own parser).
    for bad in [
        "v1.33.4+k0s.0/../../x",
        "latest",
        "v1.33.4 --help",
        "",
        "v1.33.4+k0s.0\\u001b[2J",
    ] {
        let evil = good.replace("\"v1.33.4+k0s.0\"", &format!("\"{bad}\""));
        assert_ne!(evil, good);
        let e = SavedPlan::from_json(&evil).unwrap_err();
        assert!(e.to_string().contains("is not a k0s version"), "{bad}: {e}");
    }
    // A version too old for k0sform, in the plan's choice and in a step: the field is named.
    let mut evil = saved.clone();
    evil.plan.k0s_version.as_mut().unwrap().version = version("v0.10.0");
    evil.seal();
    let e = SavedPlan::from_json(&evil.to_json()).unwrap_err();
    assert!(e.to_string().contains("plan.k0s_version.version"), "{e}");
    let mut evil = saved.clone();
    evil.plan.steps.insert(
        0,
        k0sform::plan::Step {
            id: 0,
            host: p.steps[0].host.clone(),
            kind: StepKind::DownloadBinary {
                url: "https://example.invalid/k0s".into(),
                sha256: "ab".repeat(32),
                version: version("v0.10.0"),
            },
            after: vec![],
        },
    );
    evil.seal();
    let e = SavedPlan::from_json(&evil.to_json()).unwrap_err();
    assert!(e.to_string().contains("plan.steps[0].kind.version"), "{e}");

    let mut derived = p.clone();
    derived.k0s_version = Some(ResolvedVersion {
        version: version("v1.33.5+k0s.0"),
        source: "latest stable release".into(),
    });
    let e = saved.matches(&derived).unwrap_err();
    assert!(
        e.to_string().contains(
            "the file installs k0s v1.33.4+k0s.0 (latest stable release), k0s v1.33.5+k0s.0 (latest stable release) is chosen now"
        ),
        "{e}"
    );
}

/// A saved destroy plan is applied only with `-destroy` on the command line (issue 28, item 4),
/// is then derived again as a destroy and equals what was saved; a normal plan whose options are
/// edited into a destroy (resealed) is refused without `-destroy`, and with it is not the plan
/// the file shows; `-destroy` with a normal plan is refused too.
#[test]
fn saved_destroy_plans_are_derived_again_as_destroys() {
    let i = saved_case_inputs("destroy");
    let p = run(&i).expect("plan");
    assert!(p.destroy);
    let saved = SavedPlan::with_options(p.clone(), &i.state, "aaaa", &i.reality, i.options.clone());
    let back = SavedPlan::from_json(&saved.to_json()).expect("parses");
    let plain = PlanOptions::default();
    let e = back.options_for_apply(&plain).unwrap_err();
    assert!(
        e.to_string()
            .contains("made with -destroy but apply was run without it"),
        "{e}"
    );
    let cli = PlanOptions {
        destroy: true,
        ..PlanOptions::default()
    };
    let opts = back.options_for_apply(&cli).expect("options");
    assert!(opts.destroy);
    let derived = plan::diff(&i.spec, &i.state, &i.reality, &i.desired, &opts).expect("plan");
    back.matches(&derived)
        .expect("a saved destroy plan is derived again equal");

    // A normal plan of the same inputs, its options switched to destroy and resealed.
    let normal_opts = PlanOptions {
        destroy: false,
        ..i.options.clone()
    };
    let normal = plan::diff(&i.spec, &i.state, &i.reality, &i.desired, &normal_opts).expect("plan");
    assert!(!normal.destroy);
    let honest = SavedPlan::with_options(
        normal.clone(),
        &i.state,
        "aaaa",
        &i.reality,
        normal_opts.clone(),
    );
    let e = honest.options_for_apply(&cli).unwrap_err();
    assert!(
        e.to_string()
            .contains("made without -destroy but apply was run with it"),
        "{e}"
    );
    let mut evil = SavedPlan::with_options(normal, &i.state, "aaaa", &i.reality, normal_opts);
    evil.options.destroy = true;
    evil.seal();
    assert!(evil.options_for_apply(&plain).is_err());
    let opts = evil.options_for_apply(&cli).expect("options");
    let derived = plan::diff(&i.spec, &i.state, &i.reality, &i.desired, &opts).expect("plan");
    assert!(
        evil.matches(&derived).is_err(),
        "an edited mode ran as a destroy"
    );
}
