//! Cluster configuration through the cluster: extra manifests, the dynamic config's status and
//! edits, and the probe's redaction of config secrets.

use super::*;

/// Issue 28, item 8: `plan -probe-out` keeps no k0s.yaml secret (nor its sha256), says so in
/// the file and on stderr; the plan's diff shows the secret as changed without its value or a
/// hash of it, and the URL's credentials likewise. The lab's plain-http mirror is warned about.
#[test]
fn probe_out_redacts_the_config_secrets_and_says_so() {
    require_lab!();
    // A config of the spec's own: without one the leader's k0s.yaml, hand edits included, is
    // the base (as k0sctl), and the edit below would not be a difference to show.
    let c = Cluster::with(
        &[("c1", "controller")],
        LabOptions::default(),
        SpecOptions {
            k0s_config: Some("spec:\n  telemetry:\n    enabled: false".into()),
            ..SpecOptions::default()
        },
    );
    bootstrap(&c);
    c.lab.exec_ok(
        "c1",
        "printf 'x-notes:\\n  password: s3cr3t-pw\\n  mirror: https://ci:t0ken@charts.example/x\\n' >> /etc/k0s/k0s.yaml",
    );
    let out = c.lab.dir().join("probe.json");
    let r = c.run(&["plan", "-probe-out", out.to_str().unwrap()]);
    r.expect(0)
        .contains("password: (secret, changed: old value)")
        .contains("https://(secret, changed: old value)@charts.example/x")
        .contains("saved with its secrets redacted");
    let cfg = c.lab.exec_ok("c1", "cat /etc/k0s/k0s.yaml");
    let file = std::fs::read_to_string(&out).unwrap();
    for secret in [
        "s3cr3t-pw".to_string(),
        "t0ken".to_string(),
        k0sform::hash::sha256_hex(&cfg),
        k0sform::hash::sha256_hex("s3cr3t-pw")[..8].to_string(),
    ] {
        assert!(!file.contains(&secret), "{secret} in\n{file}");
        assert!(!r.text().contains(&secret), "{secret} in\n{}", r.text());
    }
    assert!(file.contains("\"redacted\""), "{file}");
    // The lab's mirror is plain http.
    r.contains("Warning: K0SFORM_K0S_DOWNLOAD_URL is plain http");
    // The file plans again (offline).
    c.run(&["plan", "-probe-in", out.to_str().unwrap()])
        .expect(0)
        .contains("password: (secret");
}

/// Write the spec of `names` with these extra documents after the Cluster document (a k0sctl
/// multi-document spec).
fn write_spec_with_docs(c: &Cluster, names: &[&str], docs: &str) {
    c.write_spec(names);
    let mut text = std::fs::read_to_string(&c.spec).expect("spec");
    text.push_str(docs);
    std::fs::write(&c.spec, text).expect("spec");
}

/// `k0s kubectl apply -f -` of `json` on a controller by hand: what kubectl says of it.
fn apply_by_hand(c: &Cluster, host: &str, json: &str) -> String {
    c.lab.exec_ok(
        host,
        &format!("echo '{json}' | KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl apply -f -"),
    )
}

const NAMESPACE_DOC: &str = "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n";

const SETTINGS_DOC: &str = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: apps\ndata:\n  color: COLOR\n";

const SETTINGS_JSON: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"apps"},"data":{"color":"COLOR"}}"#;

/// Issue 30: the extra manifests of a multi-document spec (k0sctl phase/apply_manifests.go) are
/// shown in the plan, applied through a controller with `k0s kubectl apply -f -` after every
/// other step, and not applied again while their content is the one recorded; a changed one is
/// applied again; one the spec lost stays in the cluster; one kubectl refuses fails the apply
/// with kubectl's error and is not recorded.
#[test]
fn extra_manifests_are_applied_once_then_only_when_changed() {
    require_lab!();
    let c = Cluster::new(C1_W1);
    let settings = |color: &str| SETTINGS_DOC.replace("COLOR", color);
    write_spec_with_docs(
        &c,
        &["c1", "w1"],
        &format!("{NAMESPACE_DOC}{}", settings("blue")),
    );
    c.run(&["plan"])
        .expect(0)
        .contains("+ Namespace apps: created")
        .contains("+ ConfigMap apps/settings: created")
        .contains("2 manifests to apply.");
    c.apply()
        .contains("Applying manifest ConfigMap apps/settings")
        .contains("Apply complete");
    let blue = SETTINGS_JSON.replace("COLOR", "blue");
    assert_eq!(
        apply_by_hand(&c, "c1", &blue),
        "configmap/settings unchanged\n"
    );
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("Manifests: 2 unchanged")
        .contains("No changes.");

    // A changed manifest is applied again.
    write_spec_with_docs(
        &c,
        &["c1", "w1"],
        &format!("{NAMESPACE_DOC}{}", settings("green")),
    );
    c.run(&["plan"])
        .expect(0)
        .contains("~ ConfigMap apps/settings: changed")
        .contains("    Namespace apps: unchanged")
        .contains("1 manifest to apply.");
    // Through a saved plan, as any other change.
    let saved = c.lab.dir().join("manifests.plan").display().to_string();
    c.run(&["plan", "-out", &saved])
        .expect(0)
        .contains("Saved the plan");
    c.run(&["apply", &saved])
        .expect(0)
        .contains("Applying manifest ConfigMap apps/settings")
        .contains("Apply complete");
    let green = SETTINGS_JSON.replace("COLOR", "green");
    assert_eq!(
        apply_by_hand(&c, "c1", &green),
        "configmap/settings unchanged\n"
    );

    // One the spec lost stays in the cluster; the state forgets it.
    write_spec_with_docs(&c, &["c1", "w1"], &settings("green"));
    c.run(&["plan"])
        .expect(0)
        .contains("- Namespace apps: no longer in the spec: left in the cluster, not deleted");
    c.apply();
    c.lab.exec_ok(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl get namespace apps",
    );
    assert_eq!(
        c.state_json()["manifests"].as_array().map(Vec::len),
        Some(1)
    );
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("No changes.");

    // kubectl refuses a ConfigMap whose data is not strings: the apply fails with its error,
    // and the manifest stays to be applied.
    let bad = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: apps\ndata:\n  replicas: 3\n";
    write_spec_with_docs(&c, &["c1", "w1"], &format!("{}{bad}", settings("green")));
    c.run(&["apply", "-auto-approve"])
        .expect(1)
        .contains("kubectl apply of manifest ConfigMap apps/bad failed")
        .contains("cannot unmarshal number into Go struct field ConfigMap.data of type string");
    c.run(&["plan"])
        .expect(0)
        .contains("+ ConfigMap apps/bad: created");
}

/// A one-controller cluster with dynamic config (the controller's `--enable-dynamic-config`
/// turns it on, as in k0sctl) and `telemetry.enabled: false` in spec.k0s.config, applied.
fn dynamic_config_cluster() -> Cluster {
    let mut host_yaml = BTreeMap::new();
    host_yaml.insert(
        "c1".to_string(),
        "installFlags:\n- --enable-dynamic-config\n".to_string(),
    );
    let c = Cluster::with(
        &[("c1", "controller")],
        LabOptions::default(),
        SpecOptions {
            host_yaml,
            k0s_config: Some("spec:\n  telemetry:\n    enabled: false\n".into()),
            ..SpecOptions::default()
        },
    );
    c.write_spec(&["c1"]);
    c.apply().contains("Apply complete");
    c
}

/// Issue 30: `config status` and `config edit` as k0sctl's (action/config_status.go,
/// action/config_edit.go): the ClusterConfig's reconcile events, and an edit by $EDITOR (here a
/// script) applied through the controller, after which `plan` shows the object's drift from
/// spec.k0s.config (read through the controller in the probe, changing nothing); an edit that
/// changes nothing applies nothing and fails.
#[test]
fn config_status_and_edit_through_a_controller() {
    require_lab!();
    let c = dynamic_config_cluster();
    let r = c.run(&["config", "status"]);
    r.expect(0)
        .contains("SuccessfulReconcile")
        .contains("clusterconfig/k0s")
        .contains("Successfully reconciled cluster config");
    assert_eq!(
        r.stdout.matches("SuccessfulReconcile").count(),
        1,
        "{}",
        r.text()
    );
    let r = plan_changes_nothing(&c, &[]);
    r.expect(0).contains("No changes.");
    assert!(!r.text().contains("dynamic config:"), "{}", r.text());
    c.run(&["config", "status", "-o", "json"])
        .expect(0)
        .contains("\"reason\": \"SuccessfulReconcile\"");

    // An editor script flips telemetry on.
    let editor = c.lab.dir().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/enabled: false/enabled: true/' \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cmd = c.command(&["config", "edit"]);
    cmd.env("EDITOR", &editor).env_remove("VISUAL");
    let out = cmd.output().expect("config edit");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("clusterconfig.k0s.k0sproject.io/k0s configured"),
        "{text}"
    );
    let live = c.lab.exec_ok(
        "c1",
        "KUBECONFIG=/var/lib/k0s/pki/admin.conf k0s kubectl -n kube-system get clusterconfig k0s -o json",
    );
    let live: serde_json::Value = serde_json::from_str(&live).expect("JSON");
    assert_eq!(live["spec"]["telemetry"]["enabled"], true);
    let r = c.run(&["config", "status"]);
    assert_eq!(
        r.stdout.matches("SuccessfulReconcile").count(),
        2,
        "{}",
        r.text()
    );
    // The plan shows the object's drift from spec.k0s.config, read-only.
    plan_changes_nothing(&c, &[])
        .expect(0)
        .contains("dynamic config: the ClusterConfig object")
        .contains("spec.telemetry.enabled: false in the spec, true in the cluster")
        .contains("No changes.");

    // Saved unchanged: nothing applied, and it fails as k0sctl's.
    let mut cmd = c.command(&["config", "edit"]);
    cmd.env("EDITOR", "true").env_remove("VISUAL");
    let out = cmd.output().expect("config edit");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("configuration was not changed"));
    let r = c.run(&["config", "status"]);
    assert_eq!(
        r.stdout.matches("SuccessfulReconcile").count(),
        2,
        "{}",
        r.text()
    );
}
