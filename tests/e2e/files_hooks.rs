//! Files and hooks from the spec: uploads, globs and URLs kept as the spec says; hooks around
//! their steps, connect hooks, and secrets from the environment kept out of output.

use super::*;

/// Issue 14, item 7: a hook line written with `${SECRET}` runs on the host with the value from
/// the environment, and the value appears in none of the plan text, `-json` plan, saved plan,
/// apply progress or `-json` events: they show the line as written. `-show-secrets` shows it.
#[test]
fn hook_secrets_from_the_environment_stay_out_of_output() {
    require_lab!();
    const SECRET: &str = "s3cr3t-Hook-Value-4711";
    let hook = "hooks:\n  install:\n    after: ['echo \"${K0SFORM_TEST_SECRET}\" > /tmp/k0sform-hook-secret']\n";
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker"), ("w2", "worker")],
        LabOptions::default(),
        SpecOptions {
            host_yaml: [
                ("w1".to_string(), hook.to_string()),
                ("w2".to_string(), hook.to_string()),
            ]
            .into(),
            ..SpecOptions::default()
        },
    );
    c.env.push(("K0SFORM_TEST_SECRET".into(), SECRET.into()));
    c.write_spec(&["c1", "w1"]);
    let written = "echo \"${K0SFORM_TEST_SECRET}\" > /tmp/k0sform-hook-secret";
    let clean = |what: &str, text: &str| {
        assert!(!text.contains(SECRET), "{what} shows the secret:\n{text}");
    };

    let r = c.run(&["plan"]);
    r.expect(0).contains(written);
    clean("plan", &r.text());
    let r = c.run(&["plan", "-json"]);
    r.expect(0).contains("${K0SFORM_TEST_SECRET}");
    clean("plan -json", &r.text());
    let saved = c.lab.dir().join("hooks.plan");
    let saved_arg = saved.to_str().unwrap();
    let r = c.run(&["plan", "-out", saved_arg]);
    r.expect(0);
    clean("plan -out", &r.text());
    let file = std::fs::read_to_string(&saved).unwrap();
    assert!(file.contains("${K0SFORM_TEST_SECRET}"), "{file}");
    clean("the saved plan", &file);

    // Applied from the saved plan: progress shows the line as written; the host ran the value.
    let r = c.run(&["apply", saved_arg]);
    r.expect(0)
        .contains(&format!("hook install.after: {written}"));
    clean("apply progress", &r.text());
    assert_eq!(
        c.lab.exec_ok("w1", "cat /tmp/k0sform-hook-secret"),
        format!("{SECRET}\n")
    );
    clean("the state", &std::fs::read_to_string(&c.state).unwrap());

    // -json events of the next apply (w2 joins and runs the hook). Asked for, the plan shows
    // the value (so the checks above would see it if it leaked).
    c.write_spec(&["c1", "w1", "w2"]);
    c.run(&["plan", "-show-secrets"]).expect(0).contains(SECRET);
    let r = c.run(&["apply", "-auto-approve", "-json"]);
    r.expect(0).contains("${K0SFORM_TEST_SECRET}");
    clean("apply -json events", &r.text());
    assert_eq!(
        c.lab.exec_ok("w2", "cat /tmp/k0sform-hook-secret"),
        format!("{SECRET}\n")
    );
}

/// Hooks run as the SSH user around what they name (apply.* around everything the run does on
/// the host, install.* around the join), only on hosts the run changes; a failing hook fails its
/// step, and nothing after it runs on that host.
#[test]
fn hooks_run_around_their_steps_and_only_on_changes() {
    require_lab!();
    const LOG: &str = "/root/k0sform-hooks.log";
    // Each hook appends its name, whether the worker service is installed, and the user.
    let rec = |what: &str| {
        format!(
            "echo \"{what} $(test -e /etc/systemd/system/k0sworker.service && echo installed || echo absent) $(id -un)\" >> {LOG}"
        )
    };
    let mut host_yaml = std::collections::BTreeMap::new();
    host_yaml.insert(
        "w1".to_string(),
        format!(
            "hooks:\n  apply:\n    before: ['{}']\n    after: ['{}']\n  install:\n    before: ['{}']\n    after: ['{}']\n  reset:\n    before: ['{}']\n",
            rec("apply.before"),
            rec("apply.after"),
            rec("install.before"),
            rec("install.after"),
            rec("reset.before"),
        ),
    );
    host_yaml.insert(
        "w2".to_string(),
        format!(
            "hooks:\n  install:\n    before: ['echo w2-before >> {LOG}; exit 3']\n    after: ['echo w2-after >> {LOG}']\n"
        ),
    );
    let c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker"), ("w2", "worker")],
        LabOptions::default(),
        SpecOptions {
            host_yaml,
            ..SpecOptions::default()
        },
    );
    c.write_spec(&["c1", "w1"]);
    c.run(&["plan"])
        .expect(0)
        .contains("hooks apply.before run: echo")
        .contains("hooks install.after run: echo");
    c.lab.exec_ok("w1", &format!("test ! -e {LOG}"));
    c.apply()
        .contains("Running the install.before hooks (1 line)")
        .contains("Apply complete");
    let log = |h: &str| c.lab.exec_ok(h, &format!("cat {LOG} 2>/dev/null || true"));
    assert_eq!(
        log("w1"),
        "apply.before absent root\ninstall.before absent root\ninstall.after installed root\napply.after installed root\n"
    );
    assert_eq!(c.nodes("c1").get("w1"), Some(&true));

    // Nothing to change: no hook runs.
    c.apply();
    assert_eq!(log("w1").lines().count(), 4, "hooks ran without changes");

    // A failing install.before: the join never starts, install.after never runs.
    c.write_spec(&["c1", "w1", "w2"]);
    let r = c.run(&["apply", "-auto-approve"]);
    r.expect(1).contains(
        "hook install.before `echo w2-before >> /root/k0sform-hooks.log; exit 3` failed (exit 3)",
    );
    assert_eq!(log("w2"), "w2-before\n");
    c.lab
        .exec_ok("w2", "test ! -e /etc/systemd/system/k0sworker.service");
    assert_eq!(log("w1").lines().count(), 4, "w1 had nothing to change");
}

/// Issue 30: `connect.after` hooks run during `apply`, first on each host the apply changes (as
/// k0sctl runs them right after connecting, phase/detect_os.go), never during `plan`; a plan
/// with nothing to change on a host lists its apply and connect hooks as not run.
#[test]
fn connect_after_hooks_run_during_apply_not_during_plan() {
    require_lab!();
    const LOG: &str = "/root/k0sform-connect.log";
    let mut host_yaml = std::collections::BTreeMap::new();
    host_yaml.insert(
        "w1".to_string(),
        format!(
            "hooks:\n  connect:\n    after: ['echo \"connect.after $(test -e /etc/systemd/system/k0sworker.service && echo installed || echo absent)\" >> {LOG}']\n  apply:\n    before: ['echo apply.before >> {LOG}']\n"
        ),
    );
    let c = c1_w1_with(SpecOptions {
        host_yaml,
        ..SpecOptions::default()
    });
    let log = || {
        c.lab
            .exec_ok("w1", &format!("cat {LOG} 2>/dev/null || true"))
    };
    c.run(&["plan"])
        .expect(0)
        .contains("hooks connect.after run: echo");
    assert_eq!(log(), "", "plan ran a hook");
    c.apply().contains("Apply complete");
    assert_eq!(log(), "connect.after absent\napply.before\n");
    // Nothing changes on w1: its hooks are listed as not run, and do not run.
    let addr = c.lab.address("w1");
    c.run(&["plan"])
        .expect(0)
        .contains("No changes.")
        .contains(&format!("w1 ({addr}): connect.after, apply.before"));
    c.apply();
    assert_eq!(log().lines().count(), 2, "hooks ran without changes");
}

/// `files:` are uploaded before k0s starts on a new host, with the spec's or the local mode and
/// owner; a file changed on the host is put back without restarting k0s; content that changed
/// locally after planning is refused.
#[test]
fn files_are_uploaded_and_kept_as_the_spec_says() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller"), ("w1", "worker")],
        LabOptions::default().sudo_user("w1"),
        SpecOptions::default(),
    );
    let src = c.lab.dir().join("files-src");
    std::fs::create_dir_all(src.join("tree/sub")).unwrap();
    std::fs::write(src.join("app.conf"), "key: value\n").unwrap();
    std::fs::set_permissions(
        src.join("app.conf"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(src.join("tree/a"), "a\n").unwrap();
    std::fs::write(src.join("tree/sub/b"), "b\n").unwrap();
    for f in ["tree/a", "tree/sub/b"] {
        std::fs::set_permissions(
            src.join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();
    }
    let user = lab::SUDO_USER;
    c.spec_opts.host_yaml.insert(
        "w1".to_string(),
        format!(
            "files:\n- {{name: app, src: {s}/app.conf, dstDir: /srv/app}}\n- {{name: tree, src: {s}/tree, dstDir: /opt/tree, dirPerm: '0750'}}\n- {{name: inline, data: \"hello\\n\", dst: /srv/app/inline.txt, perm: '0640', user: {user}, group: {user}}}\n",
            s = src.display()
        ),
    );
    c.write_spec(&["c1", "w1"]);
    let r = c.apply();
    // Before the join: the worker's files are there when k0s starts.
    let out = r.stdout.clone();
    let files_at = out.find("Uploading 4 files").expect("upload_files step");
    let join_at = out
        .find("Joining the cluster as worker")
        .expect("join step");
    assert!(files_at < join_at, "{out}");
    let facts = |cmd: &str| c.lab.exec_ok("w1", cmd);
    assert_eq!(
        facts(
            "cd / && sha256sum srv/app/app.conf srv/app/inline.txt opt/tree/a opt/tree/sub/b | cut -c1-12"
        ),
        facts(
            "printf 'key: value\\n' | sha256sum | cut -c1-12; printf 'hello\\n' | sha256sum | cut -c1-12; printf 'a\\n' | sha256sum | cut -c1-12; printf 'b\\n' | sha256sum | cut -c1-12"
        )
    );
    assert_eq!(
        facts(
            "stat -c '%n %a %U:%G' /srv/app/app.conf /srv/app/inline.txt /opt/tree /opt/tree/a /opt/tree/sub /opt/tree/sub/b"
        ),
        format!(
            "/srv/app/app.conf 600 root:root\n/srv/app/inline.txt 640 {user}:{user}\n/opt/tree 750 root:root\n/opt/tree/a 644 root:root\n/opt/tree/sub 750 root:root\n/opt/tree/sub/b 644 root:root\n"
        )
    );
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // What a killed run leaves (issue 14): a join token not yet replaced by the placeholder
    // (with the join's intent in the state), staging files of uploads (also the older fixed
    // name), a link at a staging name. `plan` touches none of it; the next `apply` cleans it up,
    // and never follows the link.
    facts(
        "printf 'H4sIleftover\\n' > /etc/k0s/k0stoken && touch /srv/app/app.conf.k0sform-tmp /srv/app/app.conf.k0sform-Ab12Cd /usr/local/bin/k0s.k0sform-Xy34Zw && ln -s /etc/hostname /srv/app/inline.txt.k0sform-Qw56Er && cat /etc/hostname > /root/hostname.before",
    );
    // An upload's private folder (root's, 0700) with its half-written file (issue 28, item 7).
    facts(
        "mkdir -m 700 /usr/local/bin/k0s.k0sform-Pq12Rs && echo half > /usr/local/bin/k0s.k0sform-Pq12Rs/f",
    );
    let mut st = c.state_json();
    st["intents"] = serde_json::json!([{
        "step": "join_worker w1", "address": c.lab.address("w1"), "port": 22,
        "kind": "join_worker", "started_at": "2026-01-01T00:00:00Z"
    }]);
    std::fs::write(&c.state, serde_json::to_string_pretty(&st).unwrap()).unwrap();
    c.run(&["plan", "-detailed-exitcode"]).expect(0);
    facts("grep -q H4sIleftover /etc/k0s/k0stoken && test -e /srv/app/app.conf.k0sform-tmp");
    c.apply()
        .contains("cleaned up /etc/k0s/k0stoken, left by an earlier run")
        .contains("cleaned up /srv/app/app.conf.k0sform-tmp, left by an earlier run")
        .contains("cleaned up /usr/local/bin/k0s.k0sform-Pq12Rs, left by an earlier run");
    assert_eq!(
        facts(
            "test -s /etc/k0s/k0stoken && ! grep -q H4sIleftover /etc/k0s/k0stoken && ls -A /srv/app /usr/local/bin | grep -c k0sform- ; cmp /etc/hostname /root/hostname.before && echo same"
        ),
        "0\nsame\n"
    );
    // Without an interrupted join, a token file is left alone (it may be k0sctl's placeholder).
    facts("printf 'H4sIother\\n' > /etc/k0s/k0stoken");
    c.apply();
    assert_eq!(facts("cat /etc/k0s/k0stoken"), "H4sIother\n");

    // Changed on the host: put back, k0s keeps running (same pid).
    let pid = || {
        let st: serde_json::Value =
            serde_json::from_str(&c.lab.ssh_ok("w1", "k0s status -o json")).expect("status");
        st["Pid"].as_u64().expect("pid")
    };
    let before = pid();
    facts(
        "echo changed > /srv/app/app.conf && chmod 0666 /opt/tree/a && chown root:root /srv/app/inline.txt",
    );
    c.run(&["plan", "-detailed-exitcode"])
        .expect(2)
        .contains("will be given its files")
        .contains("/srv/app/app.conf (content differs)")
        .contains("/opt/tree/a (mode 0666 → 0644)")
        .contains(&format!(
            "/srv/app/inline.txt (owner root:root → {user}:{user})"
        ))
        .contains("Plan: 0 to add, 1 to change");
    c.apply()
        .contains("Apply complete: 0 added, 0 replaced, 1 changed");
    assert_eq!(pid(), before, "k0s restarted for a file change");
    assert_eq!(facts("cat /srv/app/app.conf"), "key: value\n");
    c.run(&["plan", "-detailed-exitcode"]).expect(0);

    // Local content changed between plan and apply: the plan derived again at apply uploads
    // other content than the saved one, so the saved plan is stale (exit 5), nothing uploaded.
    facts("rm /opt/tree/sub/b");
    let saved = c.lab.dir().join("files.plan");
    c.run(&["plan", "-out", saved.to_str().unwrap()]).expect(0);
    std::fs::write(src.join("tree/sub/b"), "other\n").unwrap();
    c.run(&["apply", saved.to_str().unwrap()])
        .expect(5)
        .contains("the saved plan is stale")
        .contains("upload_files");
    c.lab.exec_ok("w1", "test ! -e /opt/tree/sub/b");
}

/// A `files[].src` glob (k0sctl `cluster/uploadfile.go`): `images/*.tar` beside the spec with
/// three archives uploads each to `dstDir` (the folder's other files stay here), the plan lists
/// each on its own line, and the next plan is a no-op.
#[test]
fn glob_files_upload_each_match_and_then_plan_nothing() {
    require_lab!();
    let mut c = Cluster::new(&[("c1", "controller")]);
    let images = c.lab.dir().join("images");
    std::fs::create_dir_all(&images).unwrap();
    for n in ["b", "a", "c"] {
        std::fs::write(images.join(format!("{n}.tar")), format!("image {n}\n")).unwrap();
    }
    std::fs::write(images.join("readme.txt"), "not an image\n").unwrap();
    c.spec_opts.host_yaml.insert(
        "c1".to_string(),
        "files:\n- {name: images, src: images/*.tar, dstDir: /var/lib/k0s/images, perm: '0640'}\n"
            .to_string(),
    );
    c.write_spec(&["c1"]);
    let plan = c.run(&["plan"]);
    for n in ["a", "b", "c"] {
        let sha = k0sform::hash::sha256_hex(format!("image {n}\n"));
        plan.contains(&format!(
            "~ file {}/{n}.tar → /var/lib/k0s/images/{n}.tar (0640, sha256 {}…)",
            images.display(),
            &sha[..4]
        ));
    }
    c.apply();
    assert_eq!(
        c.lab.exec_ok(
            "c1",
            "cd /var/lib/k0s/images && ls && cat a.tar b.tar c.tar && stat -c '%a' a.tar"
        ),
        "a.tar\nb.tar\nc.tar\nimage a\nimage b\nimage c\n640\n"
    );
    plan_changes_nothing(&c, &["-detailed-exitcode"]).expect(0);
}

/// A URL `files[].src` (k0sctl `phase/uploadfiles.go` `uploadURL`) is downloaded by the host
/// from the lab's loopback mirror, its `%v` `%p` tokens expanded, through the same curl/wget
/// line as k0s: without `sha256` the plan says it is not verified and the state records the
/// host's hash, so the next plan is a no-op; with the right `sha256` it is verified; a wrong
/// one fails the apply and leaves nothing at the destination.
#[test]
fn url_files_are_downloaded_by_the_host() {
    require_lab!();
    let mut c = Cluster::with(
        &[("c1", "controller")],
        LabOptions::default(),
        SpecOptions {
            k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
            ..SpecOptions::default()
        },
    );
    let mirror = c.lab.start_mirror();
    let arch = lab::k0s_arch();
    let served = format!("b/bundle-v1.33.4+k0s.0-{arch}.tar");
    mirror.put(&served, b"bundle bytes\n");
    mirror.put("b/other.tar", b"other bytes\n");
    let good = k0sform::hash::sha256_hex("other bytes\n");
    let files = |other_sha: &str| {
        format!(
            "files:\n- {{name: bundle, src: \"{u}/b/bundle-%v-%p.tar\", dst: /var/lib/k0s/images/bundle.tar, perm: '0640'}}\n- {{name: other, src: \"{u}/b/other.tar\", dstDir: /srv/dl, sha256: {other_sha}}}\n",
            u = mirror.url
        )
    };
    c.spec_opts.host_yaml.insert("c1".to_string(), files(&good));
    c.write_spec(&["c1"]);
    c.run(&["plan"])
        .expect(0)
        .contains(&format!(
            "~ file {}/b/bundle-v1.33.4%2Bk0s.0-{arch}.tar → /var/lib/k0s/images/bundle.tar (0640, not verified: no sha256 in the spec)",
            mirror.url
        ))
        .contains(&format!(
            "~ file {}/b/other.tar → /srv/dl/other.tar (0644, sha256 {}…)",
            mirror.url,
            &good[..4]
        ));
    c.apply();
    assert_eq!(
        c.lab.exec_ok(
            "c1",
            "cat /var/lib/k0s/images/bundle.tar /srv/dl/other.tar && stat -c '%a' /var/lib/k0s/images/bundle.tar /srv/dl/other.tar && ls -A /var/lib/k0s/images /srv/dl | grep -c k0sform- ; true"
        ),
        "bundle bytes\nother bytes\n640\n644\n0\n"
    );
    let st = c.state_json();
    assert_eq!(
        st["downloads"][0]["sha256"],
        serde_json::json!(k0sform::hash::sha256_hex("bundle bytes\n")),
        "{st:#}"
    );
    plan_changes_nothing(&c, &["-detailed-exitcode"]).expect(0);

    // A wrong sha256: the apply fails, nothing is left at the destination or beside it.
    c.lab.exec_ok("c1", "rm /srv/dl/other.tar");
    c.spec_opts
        .host_yaml
        .insert("c1".to_string(), files(&"0".repeat(64)));
    c.write_spec(&["c1"]);
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains("checksum mismatch");
    assert_eq!(
        c.lab.exec_ok(
            "c1",
            "test ! -e /srv/dl/other.tar && ls -A /srv/dl | grep -c k0sform- ; true"
        ),
        "0\n"
    );
}
