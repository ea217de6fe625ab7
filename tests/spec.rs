//! Spec loading end to end: every valid testdata spec and every file of k0sctl's own smoke-test
//! corpus loads; every broken spec fails with the diagnostics recorded in its snapshot; the
//! checked-in JSON Schema matches the raw model; `k0sform validate` prints and exits right.

use k0sform::spec::{self, Diagnostics, FileSource, LoadOptions, Loaded, Role};
use std::path::{Path, PathBuf};

fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k: &str| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

fn load_env(
    paths: &[PathBuf],
    vars: &'static [(&'static str, &'static str)],
) -> Result<Loaded, Diagnostics> {
    let env = env_with(vars);
    spec::load_with(
        paths,
        &LoadOptions {
            env: &env,
            stdin: None,
        },
    )
}

fn load(paths: &[&str]) -> Result<Loaded, Diagnostics> {
    let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    load_env(&paths, &[("HOME", "/home/tester")])
}

fn sorted_entries(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("testdata folder")
        .map(|e| e.expect("entry").path())
        .collect();
    v.sort();
    v
}

#[test]
fn every_valid_spec_loads() {
    let entries = sorted_entries("testdata/specs/valid");
    assert!(entries.len() >= 6, "valid corpus went missing: {entries:?}");
    for path in entries {
        // A folder is one spec (all its YAML files), as with `-c FOLDER`.
        let loaded = load_env(std::slice::from_ref(&path), &[("HOME", "/home/tester")])
            .unwrap_or_else(|e| panic!("{} does not load:\n{e}", path.display()));
        assert!(!loaded.spec.hosts.is_empty(), "{}", path.display());
        assert_eq!(loaded.sha256.len(), 64);
    }
}

#[test]
fn valid_specs_resolve_as_written() {
    let ha = load(&["testdata/specs/valid/ha.yaml"]).expect("ha loads");
    let s = &ha.spec;
    assert_eq!(s.name, "prod-eu1");
    assert_eq!(s.controllers().count(), 3);
    assert_eq!(s.hosts.len(), 5);
    assert_eq!(s.hosts[0].hostname.as_deref(), Some("cp-1"));
    assert_eq!(s.hosts[0].ssh.user, "ubuntu");
    assert_eq!(s.hosts[4].data_dir, "/srv/k0s");
    assert_eq!(
        s.hosts[3].install_args(),
        vec![
            "--labels=pool=general".to_string(),
            "--kubelet-extra-args=--max-pods=150 --node-labels=disk=ssd".to_string()
        ]
    );
    assert_eq!(s.options.drain.grace_period, 120);
    assert_eq!(s.options.drain.timeout, 300);
    assert_eq!(
        s.k0s
            .config
            .as_ref()
            .and_then(|c| c.pointer("/spec/api/externalAddress")),
        Some(&serde_json::json!("10.0.0.100"))
    );

    let bastion = load(&["testdata/specs/valid/bastion.yaml"]).expect("bastion loads");
    let w = &bastion.spec.hosts[1];
    let b = w.ssh.bastion.as_ref().expect("bastion");
    assert_eq!(
        (b.address.as_str(), b.user.as_str(), b.port),
        ("jump.example.com", "jump", 22)
    );
    assert_eq!(bastion.spec.hosts[0].ssh.port, 2222);
    // k0sctl's `hostKey: <type> <base64>` pins the key's fingerprint, as `ssh-keygen -lf` prints it.
    let pinned = &bastion.spec.hosts[2].ssh;
    assert_eq!(
        pinned.host_key.as_deref(),
        Some("SHA256:KKZgjbkYkPSZ7dv+Vlbs+zaDA4P2tiJT9r0niNMrXCs")
    );
    assert_eq!(
        pinned.bastion.as_ref().and_then(|b| b.host_key.as_deref()),
        Some("SHA256:976FTRrSr3BsrIHSB7x8JbM+GTOXhINu3hozoQiC2/M")
    );

    let airgap = load(&["testdata/specs/valid/airgap/k0sctl.yaml"]).expect("airgap loads");
    let here = std::path::absolute("testdata/specs/valid/airgap").expect("abs");
    let h = &airgap.spec.hosts[1];
    assert_eq!(
        h.k0s_binary_path.as_deref(),
        Some(here.join("bin/k0s").as_path())
    );
    assert_eq!(
        h.files[0].source,
        FileSource::File(here.join("bundles/k0s-airgap-bundle-v1.33.4+k0s.0-amd64"))
    );
    assert_eq!(h.files[0].perm.as_deref(), Some("0640"));
    assert!(
        matches!(h.files[1].source, FileSource::Inline(ref d) if d.contains("BEGIN CERTIFICATE"))
    );
    assert_eq!(
        h.files[1].dst.as_deref(),
        Some("/etc/k0s/containerd.d/ca.crt")
    );

    let cw = load(&["testdata/specs/valid/controller-worker.yaml"]).expect("loads");
    assert_eq!(cw.spec.hosts[0].role, Role::ControllerWorker);
    assert!(cw.spec.hosts[0].no_taints);
    assert!(cw.spec.hosts[0].ssh.host_key.is_some());

    // The same spec twice hashes the same; a different one differently.
    let again = load(&["testdata/specs/valid/ha.yaml"]).expect("loads");
    assert_eq!(ha.sha256, again.sha256);
    assert_ne!(ha.sha256, cw.sha256);
}

#[test]
fn folder_and_multiple_files_read_as_one_spec() {
    let by_folder = load(&["testdata/k0sctl-examples/multidoc"]).expect("folder loads");
    let by_files = load(&[
        "testdata/k0sctl-examples/multidoc/k0sctl-multidoc-1.yaml",
        "testdata/k0sctl-examples/multidoc/k0sctl-multidoc-2.yaml",
    ])
    .expect("pair loads");
    assert_eq!(by_folder.sha256, by_files.sha256);
    assert_eq!(by_files.files.len(), 2);
    // Either file alone is incomplete.
    let e = load(&["testdata/k0sctl-examples/multidoc/k0sctl-multidoc-2.yaml"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("no k0sctl.k0sproject.io/v1beta1 Cluster document"),
        "{e}"
    );
}

const CORPUS: &[&str] = &[
    "k0sctl-controller-swap.yaml",
    "k0sctl-downloadurl.yaml",
    "k0sctl-dryrun.yaml",
    "k0sctl-dynamic.yaml",
    "k0sctl-openssh.yaml",
    "k0sctl-single.yaml",
    "k0sctl.yaml",
];

#[test]
fn k0sctl_smoke_test_corpus_loads_unchanged() {
    let root = Path::new("testdata/k0sctl-examples");
    // Corpus copied unchanged from k0sctl (keep its README with it).
    assert!(root.join("README.md").exists());
    for vars in [
        &[][..],
        &[
            ("K0S_VERSION", "v1.33.4+k0s.0"),
            ("OS_OVERRIDE", ""),
            ("INSTALL_PATH", ""),
        ][..],
    ] {
        let vars: &'static [(&'static str, &'static str)] = vars;
        for f in CORPUS {
            let path = root.join(f);
            let loaded = load_env(std::slice::from_ref(&path), vars)
                .unwrap_or_else(|e| panic!("{} does not load:\n{e}", path.display()));
            assert!(!loaded.spec.hosts.is_empty());
        }
        let pair = load_env(
            &[
                root.join("multidoc/k0sctl-multidoc-1.yaml"),
                root.join("multidoc/k0sctl-multidoc-2.yaml"),
            ],
            vars,
        )
        .unwrap_or_else(|e| panic!("multidoc pair does not load:\n{e}"));
        assert_eq!(pair.spec.hosts.len(), 2);
    }
}

#[test]
fn k0sctl_corpus_details() {
    let root = std::path::absolute("testdata/k0sctl-examples").expect("abs");
    let with = |f: &str, vars: &'static [(&'static str, &'static str)]| {
        load_env(&[root.join(f)], vars).unwrap_or_else(|e| panic!("{f}:\n{e}"))
    };
    // Same address, three ports: three hosts.
    let swap = with(
        "k0sctl-controller-swap.yaml",
        &[("K0S_VERSION", "v1.33.4+k0s.0")],
    );
    let ids: Vec<String> = swap.spec.hosts.iter().map(|h| h.id().to_string()).collect();
    assert_eq!(ids, ["127.0.0.1:9022", "127.0.0.1:9023", "127.0.0.1:9024"]);
    assert_eq!(swap.spec.k0s.version.unwrap(), "v1.33.4+k0s.0");
    // Relative keyPath resolves against the file's folder.
    assert_eq!(
        swap.spec.hosts[0].ssh.key_path.as_deref(),
        Some(root.join("id_rsa_k0s").as_path())
    );
    assert!(
        swap.warnings
            .iter()
            .any(|w| w.field == "spec.hosts[0].ssh.keyPath")
    );

    // `version: "${K0S_VERSION}"` with the variable unset: no version, resolved at plan time
    // (what runs, else the version index), as k0sctl does, so no warning.
    let unset = with("k0sctl-controller-swap.yaml", &[]);
    assert_eq!(unset.spec.k0s.version, None);
    assert!(!unset.warnings.iter().any(|w| w.field == "spec.k0s.version"));

    // Empty expansions mean "default".
    let single = with(
        "k0sctl-single.yaml",
        &[("INSTALL_PATH", ""), ("OS_OVERRIDE", "")],
    );
    let h = &single.spec.hosts[0];
    assert_eq!(h.k0s_install_path, "/usr/local/bin/k0s");
    assert_eq!(h.os, None);
    assert_eq!(h.role, Role::Single);
    assert_eq!(
        h.hooks["apply"]["before"],
        vec!["echo hello > apply.hook".to_string()]
    );
    // apply hooks run (as RunHooks steps) on hosts an apply changes: noted once.
    let hook_notes: Vec<&str> = single
        .warnings
        .iter()
        .filter(|w| w.field.starts_with("spec.hosts[0].hooks"))
        .map(|w| w.field.as_str())
        .collect();
    assert!(
        hook_notes == ["spec.hosts[0].hooks.apply"],
        "{:?}",
        single.warnings
    );
    let custom = with(
        "k0sctl-single.yaml",
        &[("INSTALL_PATH", "/opt/bin/k0s"), ("OS_OVERRIDE", "ubuntu")],
    );
    assert_eq!(custom.spec.hosts[0].k0s_install_path, "/opt/bin/k0s");
    assert_eq!(custom.spec.hosts[0].os.as_deref(), Some("ubuntu"));
    assert!(
        custom
            .warnings
            .iter()
            .any(|w| w.field == "spec.hosts[0].os")
    );

    // openSSH with a relative configPath.
    let openssh = with("k0sctl-openssh.yaml", &[]);
    let t = &openssh.spec.hosts[0].ssh;
    assert!(t.openssh);
    assert_eq!(t.address, "controller");
    assert_eq!(
        t.config_path.as_deref(),
        Some(root.join("ssh/config").as_path())
    );

    let dl = with("k0sctl-downloadurl.yaml", &[]);
    assert_eq!(
        dl.spec.hosts[0].k0s_download_url.as_deref(),
        Some("https://github.com/k0sproject/k0s/releases/download/%v/k0s-%v-%p")
    );
    // Supported now: the host downloads from it.
    assert!(
        !dl.warnings
            .iter()
            .any(|w| w.field == "spec.hosts[0].k0sDownloadURL")
    );

    assert!(with("k0sctl-dynamic.yaml", &[]).spec.k0s.dynamic_config);
    // evictTaint is implemented: k0sctl's defaults, no warning.
    let evict = with("k0sctl.yaml", &[]);
    assert!(
        !evict
            .warnings
            .iter()
            .any(|w| w.field.starts_with("spec.options.evictTaint"))
    );
    let taint = evict
        .spec
        .options
        .evict_taint
        .as_ref()
        .expect("evict taint");
    assert_eq!(taint.spec(), "k0sctl.k0sproject.io/evict=true:NoExecute");
    assert!(!taint.controller_workers);

    // The pair: lower-case clusterconfig merged into spec.k0s.config, the Pod kept as a manifest.
    let pair = load_env(
        &[
            root.join("multidoc/k0sctl-multidoc-1.yaml"),
            root.join("multidoc/k0sctl-multidoc-2.yaml"),
        ],
        &[],
    )
    .expect("pair");
    let config = pair.spec.k0s.config.as_ref().expect("config");
    assert_eq!(
        config.pointer("/spec/extensions/helm/concurrencyLevel"),
        Some(&serde_json::json!(5))
    );
    assert_eq!(
        config.pointer("/spec/telemetry/enabled"),
        Some(&serde_json::json!(false))
    );
    assert_eq!(pair.spec.manifests.len(), 1);
    assert_eq!(pair.spec.manifests[0]["kind"], "Pod");
    assert_eq!(pair.spec.manifests[0]["metadata"]["name"], "hello");
}

/// `files[].src` globs are expanded on this machine when the spec loads, as k0sctl's
/// `cluster/uploadfile.go` does: each match keeps its path below the glob's base (under
/// `dstDir`); folders are skipped; no match, or several for a single-file `dst`, is an error
/// naming the file, line and field.
#[test]
fn files_globs_expand_to_their_matches_below_the_base() {
    let d = tempfile::tempdir().expect("tempdir");
    let root = d.path();
    for f in [
        "images/a.tar",
        "images/b.tar",
        "images/c.tar",
        "images/notes.txt",
        "images/.hidden.tar",
        "images/sub/d.tar",
        "images/sub/deeper/e.tar",
    ] {
        std::fs::create_dir_all(root.join(f).parent().unwrap()).unwrap();
        std::fs::write(root.join(f), f).unwrap();
    }
    std::fs::create_dir_all(root.join("images/dir.tar")).unwrap();
    let spec = |files: &str| {
        let p = root.join("k0sctl.yaml");
        std::fs::write(
            &p,
            format!(
                "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata:\n  name: g\nspec:\n  hosts:\n    - role: controller\n      ssh:\n        address: 10.0.0.1\n      files:\n{files}  k0s:\n    version: v1.33.4+k0s.0\n"
            ),
        )
        .unwrap();
        load_env(&[p], &[("HOME", "/home/tester")])
    };
    let ok = spec(
        "        - {src: images/*.tar, dstDir: /var/lib/k0s/images}\n        - {src: \"images/**/{d,e}.tar\", dstDir: /opt/deep}\n        - {src: \"images/[a]?tar\", dst: /etc/one.tar}\n",
    )
    .expect("globs load");
    let files = &ok.spec.hosts[0].files;
    let base = root.join("images");
    assert_eq!(
        files[0].source,
        FileSource::Glob {
            base: base.clone(),
            files: vec![
                ".hidden.tar".into(),
                "a.tar".into(),
                "b.tar".into(),
                "c.tar".into()
            ]
        }
    );
    assert_eq!(
        files[1].source,
        FileSource::Glob {
            base: base.clone(),
            files: vec!["sub/d.tar".into(), "sub/deeper/e.tar".into()]
        }
    );
    let remotes: Vec<String> = k0sform::files::desired(&ok.spec.hosts[0])
        .expect("expands")
        .into_iter()
        .map(|f| f.remote)
        .collect();
    assert_eq!(
        remotes,
        [
            "/etc/one.tar",
            "/opt/deep/sub/d.tar",
            "/opt/deep/sub/deeper/e.tar",
            "/var/lib/k0s/images/.hidden.tar",
            "/var/lib/k0s/images/a.tar",
            "/var/lib/k0s/images/b.tar",
            "/var/lib/k0s/images/c.tar",
        ]
    );

    let err = spec("        - {src: images/*.iso, dstDir: /x}\n")
        .expect_err("no match")
        .to_string();
    assert!(
        err.contains(
            "k0sctl.yaml:11:17: error: spec.hosts[0].files[0].src: no files match `images/*.iso`"
        ),
        "{err}"
    );
    let err = spec("        - {src: images/*.tar, dst: /x/one.tar}\n")
        .expect_err("several for dst")
        .to_string();
    assert!(
        err.contains("spec.hosts[0].files[0].dst: `images/*.tar` matches 4 files but `dst` names a single file"),
        "{err}"
    );
}

/// A URL `files[].src` (k0sctl `cluster/uploadfile.go` `IsURL`, `ResolveRelativeTo`) loads
/// with its tokens as written; its destination is `dst`, else `dstDir/` + the URL's last path
/// element as written; `sha256` (k0sform's extension) is kept in lower case.
#[test]
fn files_url_sources_load_with_k0sctl_destinations() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("k0sctl.yaml");
    std::fs::write(
        &p,
        "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nmetadata:\n  name: u\nspec:\n  hosts:\n    - role: controller\n      ssh:\n        address: 10.0.0.1\n      files:\n        - {src: \"http://127.0.0.1/a/bundle-%v-%p.tar\", dstDir: /var/lib/k0s/images}\n        - {src: \"https://127.0.0.1/b.tar\", dst: /srv/b.tar, sha256: ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789}\n  k0s:\n    version: v1.33.4+k0s.0\n",
    )
    .unwrap();
    let ok = load_env(&[p], &[("HOME", "/home/tester")]).expect("URLs load");
    let h = &ok.spec.hosts[0];
    assert_eq!(
        h.files[0].source,
        FileSource::Url {
            url: "http://127.0.0.1/a/bundle-%v-%p.tar".into(),
            sha256: None
        }
    );
    let want: Vec<(String, Option<String>, String)> = k0sform::files::desired(h)
        .expect("expands")
        .into_iter()
        .map(|f| (f.remote, f.url, f.sha256))
        .collect();
    assert_eq!(
        want,
        [
            (
                "/srv/b.tar".to_string(),
                Some("https://127.0.0.1/b.tar".to_string()),
                "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789".to_string()
            ),
            (
                "/var/lib/k0s/images/bundle-%v-%p.tar".to_string(),
                Some("http://127.0.0.1/a/bundle-%v-%p.tar".to_string()),
                String::new()
            ),
        ]
    );
}

#[test]
fn every_invalid_spec_fails_with_its_recorded_diagnostics() {
    let entries = sorted_entries("testdata/specs/invalid");
    assert!(entries.len() >= 20, "invalid corpus went missing");
    for path in entries {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("name")
            .to_string();
        let err = match load_env(std::slice::from_ref(&path), &[("HOME", "/home/tester")]) {
            Ok(_) => panic!("{} loaded but must fail", path.display()),
            Err(e) => e,
        };
        assert!(err.has_errors(), "{name}");
        // Absolute paths in messages depend on where the repository is checked out.
        let cwd = std::env::current_dir().expect("cwd").display().to_string();
        insta::assert_snapshot!(
            format!("invalid__{name}"),
            err.to_string().replace(&cwd, "[REPO]")
        );
    }
}

#[test]
fn spec_schema_is_current() {
    let generated = serde_json::to_string_pretty(&spec::raw::schema()).expect("json") + "\n";
    let path = Path::new("schema/spec.schema.json");
    if std::env::var_os("K0SFORM_UPDATE_SCHEMA").is_some() {
        std::fs::write(path, &generated).expect("write schema");
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "schema/spec.schema.json is stale: run `K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform spec::spec_schema_is_current`"
    );
}

#[test]
fn validate_command_prints_diagnostics_and_summary() {
    use crate::support::bin;
    let ok = bin::assert_cmd()
        .args(["-c", "testdata/specs/valid/ha.yaml", "validate"])
        .env("HOME", "/home/tester")
        .output()
        .expect("runs");
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        "The spec is valid: 5 hosts (3 controllers, 2 workers) in cluster \"prod-eu1\".\n"
    );

    let warn = bin::assert_cmd()
        .args([
            "-c",
            "testdata/k0sctl-examples/k0sctl-single.yaml",
            "validate",
        ])
        .env_remove("K0S_VERSION")
        .output()
        .expect("runs");
    assert_eq!(warn.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&warn.stderr);
    // Once: apply hooks run only on hosts an apply changes.
    assert_eq!(
        stderr.lines().filter(|l| l.contains("hooks")).count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("spec.hosts[0].hooks.apply: apply hooks run only on hosts an apply changes (k0sctl runs them on every host at every apply)"),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&warn.stdout),
        "The spec is valid: 1 host (1 controller, 1 worker) in cluster \"k0s-cluster\".\n"
    );

    let bad = bin::assert_cmd()
        .args(["-c", "testdata/specs/invalid/many-errors.yaml", "validate"])
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(1));
    assert!(bad.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("testdata/specs/invalid/many-errors.yaml:15:9: error: spec.hosts[1].ssh.keypath: unknown field `keypath`, did you mean `keyPath`?"),
        "{stderr}"
    );
    assert!(stderr.trim_end().ends_with("errors."), "{stderr}");

    // `-` reads stdin.
    let stdin = bin::assert_cmd()
        .args(["-c", "-", "validate"])
        .write_stdin(std::fs::read("testdata/specs/valid/cluster.json").expect("json"))
        .output()
        .expect("runs");
    assert_eq!(
        stdin.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stdin.stderr)
    );
}

proptest::proptest! {
    #![proptest_config(crate::support::proptest_files::regressions_beside_source(512))]

    /// Damaged specs never panic the loader, failures always carry an error, and every position
    /// points inside the file that was read.
    #[test]
    fn damaged_specs_fail_cleanly(
        cut in 0usize..2000,
        len in 0usize..40,
        insert in "(\\$\\{X|: |\\n  - |\\{|\\]|#|\\t|port: 0|role: x|\"|'|&a|\\*a)",
    ) {
        let original = std::fs::read_to_string("testdata/specs/valid/ha.yaml").expect("ha");
        let chars: Vec<char> = original.chars().collect();
        let at = cut % chars.len();
        let end = (at + len).min(chars.len());
        let damaged: String = chars[..at].iter().chain(insert.chars().collect::<Vec<_>>().iter()).chain(chars[end..].iter()).collect();
        let env = env_with(&[]);
        let result = spec::load_with(
            &[PathBuf::from("-")],
            &LoadOptions { env: &env, stdin: Some(&damaged) },
        );
        let lines = damaged.lines().count() as u32 + 1;
        let diags = match result {
            Ok(l) => l.warnings,
            Err(e) => {
                proptest::prop_assert!(e.has_errors());
                e.0
            }
        };
        for d in diags {
            proptest::prop_assert!(d.line <= lines, "{d} (file has {lines} lines)");
        }
    }
}

/// Issue 14, item 7: values the spec takes from the environment are remembered, so output can
/// show a hook line as written (`${NAME}`) while the host runs the expanded one.
#[test]
fn environment_values_are_shown_as_the_variables_they_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k0sctl.yaml");
    std::fs::write(
        &path,
        "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: controller\n    ssh:\n      address: 127.0.0.1\n    hooks:\n      apply:\n        before:\n        - 'curl -H \"Authorization: Bearer ${API_TOKEN}\" https://example.test/$WHERE'\n        - echo ${SHORT}\n",
    )
    .unwrap();
    let loaded = load_env(
        &[path],
        &[
            ("API_TOKEN", "tok-9f8e7d6c5b4a"),
            ("WHERE", "hooks/run"),
            ("SHORT", "on"),
        ],
    )
    .expect("loads");
    let spec = &loaded.spec;
    let lines = &spec.hosts[0].hooks["apply"]["before"];
    // The host runs the expanded lines.
    assert_eq!(
        lines[0],
        "curl -H \"Authorization: Bearer tok-9f8e7d6c5b4a\" https://example.test/hooks/run"
    );
    // Output shows what the spec wrote.
    assert_eq!(
        spec.shown(&lines[0]),
        "curl -H \"Authorization: Bearer ${API_TOKEN}\" https://example.test/${WHERE}"
    );
    // A two-character value is left alone (it would garble every line and is no secret).
    assert_eq!(spec.shown(&lines[1]), "echo on");
    // Never serialized (the spec's JSON is hashed and may be printed).
    let json = serde_json::to_string(spec).unwrap();
    assert!(!json.contains("env_values"), "{json}");
}

/// `HOME`, looked up to expand a `~` in a key path, is not a value the spec took from the
/// environment: a literal `/root` elsewhere is shown as written, not as `${HOME}`.
#[test]
fn home_for_a_tilde_is_not_shown_as_a_variable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k0sctl.yaml");
    std::fs::write(
        &path,
        "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: controller\n    ssh:\n      address: 127.0.0.1\n      keyPath: ~/.ssh/id_lab\n    hooks:\n      apply:\n        before:\n        - echo hi >> /root/hooks.log\n",
    )
    .unwrap();
    let loaded = load_env(&[path], &[("HOME", "/root")]).expect("loads");
    let spec = &loaded.spec;
    assert_eq!(
        spec.hosts[0].ssh.key_path.as_deref(),
        Some(std::path::Path::new("/root/.ssh/id_lab")),
        "~ expanded with HOME"
    );
    let line = &spec.hosts[0].hooks["apply"]["before"][0];
    assert_eq!(spec.shown(line), "echo hi >> /root/hooks.log");
}

/// Every other k0sctl.yaml-like example in k0sctl's repository (commit f4005b6): the envsubst
/// templates of `smoke-test/*.yaml.tpl`, `examples/bootloose/k0sctl.yaml.example` and the complete
/// YAML blocks of k0sctl's README.md. Each loads with `k0sform validate` semantics, or fails with
/// the one diagnostic named here for it: an explicit table, no blanket skip.
#[test]
fn k0sctl_repository_examples_load_or_fail_as_tabled() {
    let root = Path::new("testdata/k0sctl-examples");
    // (file, variables set, None = loads | Some((field, message fragment)) = the expected error)
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        Option<(&'static str, &'static str)>,
    );
    const H: &[(&str, &str)] = &[("HOME", "/home/tester")];
    const V: &[(&str, &str)] = &[
        ("HOME", "/home/tester"),
        ("K0S_VERSION", "v1.33.4+k0s.0"),
        ("OS_OVERRIDE", ""),
        ("SSH_USER", "k0s"),
        ("K0S_CONTROLLER_FLAG", "--labels=smoke-stage=1"),
        ("K0S_WORKER_FLAG", "--labels=smoke-stage=1"),
    ];
    let table: &[Case] = &[
        // Its `files[].src` (./upload/…) are made by k0sctl's smoke-files.sh before it runs; a
        // missing local source is refused up front (k0sctl fails on it at upload time).
        (
            "templates/k0sctl-files.yaml.tpl",
            V,
            Some(("spec.hosts[0].files[0].src", "cannot read")),
        ),
        ("templates/k0sctl-installflags.yaml.tpl", V, None),
        ("templates/k0sctl-rootless.yaml.tpl", V, None),
        ("examples/bootloose-k0sctl.yaml.example", H, None),
        // README's full example still says `version: 0.10.0`, older than k0sctl's minimum.
        (
            "readme/README-configuration.yaml",
            H,
            Some(("spec.k0s.version", "too old")),
        ),
        ("readme/README-multidoc.yaml", H, None),
    ];
    let mut seen: Vec<String> = Vec::new();
    for sub in ["templates", "examples", "readme"] {
        for e in sorted_entries(root.join(sub).to_str().expect("utf-8")) {
            seen.push(
                e.strip_prefix(root)
                    .expect("under root")
                    .display()
                    .to_string(),
            );
        }
    }
    let tabled: Vec<String> = table.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(seen, tabled, "every collected example is in the table");
    let mut report = String::new();
    for (f, vars, expected) in table {
        let got = load_env(&[root.join(f)], vars);
        match (&got, expected) {
            (Ok(l), None) => assert!(!l.spec.hosts.is_empty(), "{f}"),
            (Err(d), Some((field, msg))) => assert!(
                d.errors()
                    .any(|e| e.field == *field && e.message.contains(msg)),
                "{f}: expected {field}: {msg}, got:\n{d}"
            ),
            (Ok(_), Some(x)) => report.push_str(&format!("{f}: loads, expected {x:?}\n")),
            (Err(d), None) => report.push_str(&format!("{f}: does not load:\n{d}\n")),
        }
    }
    assert!(report.is_empty(), "{report}");
}
