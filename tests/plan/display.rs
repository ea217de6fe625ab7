//! What the plan shows: environment values as written, colour, redacted secrets and
//! credentials, and planned environment changes.

use super::*;

/// Hook lines show values from the environment as the `${NAME}` they came from, in the plan's
/// steps, text, JSON and saved plan; `-show-secrets` shows them (issue 14, item 7).
#[test]
fn hook_lines_show_environment_values_as_written() {
    let mut i = case_inputs("hooks");
    // As if the spec said `echo ${STAGE_SECRET}` with STAGE_SECRET=up-before in the environment.
    i.spec
        .set_env_values([("STAGE_SECRET".to_string(), "up-before".to_string())]);
    let p = run(&i).expect("plan");
    let hook_lines: Vec<&String> = p
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::RunHooks { lines, .. } => Some(lines),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(
        hook_lines
            .iter()
            .any(|l| l.as_str() == "echo ${STAGE_SECRET}"),
        "{hook_lines:?}"
    );
    let text = render::text(&p, false);
    let json = render::json(&p);
    let saved = SavedPlan::new(p.clone(), &i.state, "aaaa", &i.reality).to_json();
    for (what, out) in [("text", &text), ("json", &json), ("saved plan", &saved)] {
        assert!(!out.contains("up-before"), "{what}: {out}");
        assert!(out.contains("${STAGE_SECRET}"), "{what}: {out}");
    }
    assert!(
        text.contains("hooks upgrade.before run: echo ${STAGE_SECRET}"),
        "{text}"
    );
    i.options.show_secrets = true;
    let p = run(&i).expect("plan");
    assert!(render::text(&p, false).contains("hooks upgrade.before run: echo up-before"));
}

/// Values from the environment in install flags and k0s.yaml are shown as their `${NAME}`
/// in the plan's reasons and config diff, unless `-show-secrets` (issue 14, item 7).
#[test]
fn flags_and_config_show_environment_values_as_written() {
    let mut i = case_inputs("reconfigure");
    i.spec.set_env_values([
        (
            "METRICS".to_string(),
            "--enable-metrics-scraper=true".to_string(),
        ),
        ("TELEMETRY".to_string(), "false".to_string()),
    ]);
    let text = render::text(&run(&i).expect("plan"), false);
    assert!(
        text.contains("install flags differ (not wanted: ${METRICS})"),
        "{text}"
    );
    assert!(text.contains("+    enabled: ${TELEMETRY}"), "{text}");
    assert!(!text.contains("--enable-metrics-scraper=true"), "{text}");
    i.options.show_secrets = true;
    let text = render::text(&run(&i).expect("plan"), false);
    assert!(
        text.contains("not wanted: --enable-metrics-scraper=true"),
        "{text}"
    );
    assert!(text.contains("+    enabled: false"), "{text}");
}

#[test]
fn colour_only_when_asked() {
    let (_, case) = load_cases()
        .into_iter()
        .find(|(n, _)| n == "replace_host_key_change")
        .expect("case");
    let p = run(&build(&case)).expect("plan");
    let plain = render::text(&p, false);
    let coloured = render::text(&p, true);
    assert!(!plain.contains('\x1b'));
    assert!(coloured.contains("\x1b[33m-/+\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[32m+\x1b[0m k0s"), "{coloured}");
    assert!(
        coloured.contains("\x1b[31m-\x1b[0m etcd member"),
        "{coloured}"
    );
    // Same words either way.
    let strip = |s: &str| {
        let mut out = String::new();
        let mut esc = false;
        for c in s.chars() {
            match (esc, c) {
                (false, '\x1b') => esc = true,
                (true, 'm') => esc = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    };
    assert_eq!(strip(&coloured), plain);
}

/// Issue 14, item 7: secret values of k0s.yaml (helm repository passwords, a kine DSN) reach
/// neither the plan text, `-json` nor a saved plan; a changed secret still shows as a changed
/// line (`(secret, changed: old value)` / `… new value)`). `-show-secrets` (PlanOptions::show_secrets) shows them, and is
/// never saved.
#[test]
fn secrets_in_the_config_diff_are_redacted_unless_asked_for() {
    let mut i = case_inputs("reconfigure");
    let repo = |password: &str| {
        serde_json::json!({"helm": {"repositories": [
            {"name": "private", "url": "https://charts.example.com", "username": "ci", "password": password}
        ]}})
    };
    let config = i
        .spec
        .k0s
        .config
        .get_or_insert_with(|| serde_json::json!({}));
    config["spec"]["extensions"] = repo("n3w-s3cret");
    let c01 = HostId::new("10.0.0.1", 22);
    let f = facts_mut(&mut i.reality, &c01).expect("c01 probed");
    let host_config = f.config_text.clone().expect("c01 has a k0s.yaml");
    f.config_text = Some(format!(
        "{host_config}  extensions:\n    helm:\n      repositories:\n      - name: private\n        url: https://charts.example.com\n        username: ci\n        password: 0ld-s3cret\n"
    ));

    let p = run(&i).expect("plan");
    let saved = SavedPlan::new(p.clone(), &i.state, "aaaa", &i.reality).to_json();
    for (what, out) in [
        ("text", render::text(&p, false)),
        ("json", render::json(&p)),
        ("saved plan", saved),
    ] {
        for secret in ["n3w-s3cret", "0ld-s3cret"] {
            assert!(!out.contains(secret), "{what} shows {secret}:\n{out}");
        }
        assert!(
            out.contains("password: (secret, changed: "),
            "{what}:\n{out}"
        );
        // No hash of a secret, not even a short one (issue 28, item 8).
        for secret in ["n3w-s3cret", "0ld-s3cret"] {
            let sum = k0sform::hash::sha256_hex(secret);
            assert!(
                !out.contains(&sum[..8]),
                "{what} shows {secret}'s hash:\n{out}"
            );
        }
    }
    let text = render::text(&p, false);
    // c01's diff: the old secret's line removed, the new one's added.
    let c01 = &text[text.find("(on c01)").expect("c01's diff")..];
    let secret_line = |sign: char| {
        c01.lines()
            .map(str::trim)
            .find(|l| l.starts_with(sign) && l.contains("password:"))
            .unwrap_or_else(|| panic!("no {sign} password line:\n{text}"))
    };
    let (old, new) = (secret_line('-'), secret_line('+'));
    assert_ne!(
        old[1..],
        new[1..],
        "a changed secret must show as changed:\n{text}"
    );

    i.options.show_secrets = true;
    let shown = render::text(&run(&i).expect("plan"), false);
    assert!(
        shown.contains("n3w-s3cret") && shown.contains("0ld-s3cret"),
        "{shown}"
    );
    let mut saved = SavedPlan::new(run(&i).unwrap(), &i.state, "aaaa", &i.reality);
    saved.options = i.options.clone();
    assert!(!saved.to_json().contains("show_secrets"));
    assert!(!saved.options_for_apply(&i.options).unwrap().show_secrets);
}

/// Issue 28, item 8: a download URL with credentials (a mirror's token) is shown without them.
#[test]
fn download_urls_are_shown_without_their_credentials() {
    let mut i = case_inputs("add_worker");
    let w02 = HostId::new("10.0.1.2", 22);
    let h = i
        .desired
        .hosts
        .iter_mut()
        .find(|h| h.host == w02)
        .expect("w02 desired");
    let sha256 = h.local_binary.take().expect("a local binary").sha256;
    h.host_download = Some(k0sform::plan::HostDownload {
        url: "https://ci:t0ken@mirror.example/k0s/v1.33.4%2Bk0s.0/k0s-v1.33.4+k0s.0-amd64".into(),
        sha256,
        version: k0sform::version::K0sVersion::parse("v1.33.4+k0s.0").unwrap(),
    });
    let text = render::text(&run(&i).expect("plan"), false);
    assert!(
        text.contains("downloaded by the host from https://(secret)@mirror.example/k0s/"),
        "{text}"
    );
    assert!(!text.contains("t0ken"), "{text}");
}

/// Issue 16: `environment` is what `k0s install -e` put in the service; the probe reads it
/// (values as sha256 only). A difference is a reconfigure (reinstall with the new environment,
/// restart, with the drain of any restart); the same environment plans nothing; values stay
/// hidden unless `-show-secrets`.
#[test]
fn environment_changes_are_a_planned_reconfigure_with_hidden_values() {
    let mut i = case_inputs("noop");
    let w01 = HostId::new("10.0.1.1", 22);
    let hash = |v: &str| sha256_hex(v);
    let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let installed = env(&[("HTTP_PROXY", "http://proxy:3128"), ("TOKEN", "0ld-s3cret")]);
    facts_mut(&mut i.reality, &w01).unwrap().service_env = Some(
        installed
            .iter()
            .map(|(k, v)| (k.clone(), hash(v)))
            .collect(),
    );
    let at = i.spec.hosts.iter().position(|h| h.id() == w01).unwrap();

    // The same environment: nothing to do.
    i.spec.hosts[at].environment = installed.clone();
    let p = run(&i).expect("plan");
    assert!(!p.has_changes(), "{}", render::text(&p, false));

    // A changed secret, an added and a removed variable: reconfigured (no drain, as k0sctl),
    // values hidden.
    i.spec.hosts[at].environment = env(&[("TOKEN", "n3w-s3cret"), ("NO_PROXY", "10.0.0.0/8")]);
    let p = run(&i).expect("plan");
    let ch = p
        .changes
        .iter()
        .find(|c| c.host == w01)
        .expect("w01 changes");
    assert_eq!(ch.action, Action::Reconfigure);
    let kinds: Vec<&str> = ch.steps.iter().map(|s| p.steps[*s].kind.name()).collect();
    assert_eq!(kinds, ["reconfigure", "record_host"]);
    let text = render::text(&p, false);
    assert!(
        text.contains(
            "the service environment differs (added: NO_PROXY; changed: TOKEN; removed: HTTP_PROXY, values hidden (-show-secrets))"
        ),
        "{text}"
    );
    assert!(
        text.contains("reinstalled with the spec's flags and environment"),
        "{text}"
    );
    for out in [text, render::json(&p)] {
        assert!(
            !out.contains("s3cret") && !out.contains("10.0.0.0/8"),
            "{out}"
        );
    }
    i.options.show_secrets = true;
    let shown = render::text(&run(&i).expect("plan"), false);
    assert!(shown.contains("changed: TOKEN=n3w-s3cret"), "{shown}");

    // No service environment read (an older probe file): not compared.
    i.options.show_secrets = false;
    facts_mut(&mut i.reality, &w01).unwrap().service_env = None;
    assert!(!run(&i).expect("plan").has_changes());
}

/// Issue 27 item 8: k0sctl also writes a host's `environment` to /etc/environment
/// (phase/prepare_hosts.go). A variable missing there or with another value is set by a
/// preflight step that the host's download follows (it may need the proxy); values stay
/// hidden; once the file has them, nothing is planned; a variable only in the file stays.
#[test]
fn etc_environment_is_set_before_the_download_and_then_planned_no_more() {
    let mut i = case_inputs("add_worker_download_unchecked");
    let w01 = HostId::new("10.0.1.1", 22);
    let at = i.spec.hosts.iter().position(|h| h.id() == w01).unwrap();
    i.spec.hosts[at].environment = [
        ("HTTPS_PROXY", "http://user:s3cret@proxy:3128"),
        ("NO_PROXY", "10.0.0.0/8"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    // The file has NO_PROXY already, and a variable the spec does not name.
    facts_mut(&mut i.reality, &w01).unwrap().etc_environment = Some(
        [
            ("NO_PROXY".to_string(), sha256_hex("10.0.0.0/8")),
            ("LANG".to_string(), sha256_hex("C.UTF-8")),
        ]
        .into(),
    );
    let p = run(&i).expect("plan");
    let ch = p.changes.iter().find(|c| c.host == w01).unwrap();
    let kinds: Vec<&str> = ch.steps.iter().map(|s| p.steps[*s].kind.name()).collect();
    assert_eq!(
        kinds,
        [
            "write_host_environment",
            "download_binary",
            "join_worker",
            "record_host"
        ]
    );
    let env_step = &p.steps[ch.steps[0]];
    assert_eq!(
        env_step.kind,
        StepKind::WriteHostEnvironment {
            names: vec!["HTTPS_PROXY".into()]
        }
    );
    assert!(
        env_step.after.is_empty(),
        "a preflight step waits for nothing"
    );
    assert!(env_step.kind.is_preflight());
    assert!(p.steps[ch.steps[1]].after.contains(&env_step.id));
    let text = render::text(&p, false);
    assert!(
        text.contains("/etc/environment sets HTTPS_PROXY (as k0sctl"),
        "{text}"
    );
    for out in [text, render::json(&p)] {
        assert!(!out.contains("s3cret"), "{out}");
    }

    // After the apply the file has both: nothing more to do there (a second plan has no
    // changes); LANG, which the spec never named, is left alone.
    let (state, mut reality) = simulate_apply(&p, &i);
    let file = facts_mut(&mut reality, &w01)
        .unwrap()
        .etc_environment
        .clone();
    assert_eq!(file.unwrap().len(), 3);
    let copy = |i: &Inputs| Inputs {
        spec: i.spec.clone(),
        state: i.state.clone(),
        reality: i.reality.clone(),
        desired: i.desired.clone(),
        options: i.options.clone(),
    };
    let mut again = copy(&i);
    again.state = state;
    again.reality = reality;
    let p = run(&again).expect("plan");
    assert!(!p.has_changes(), "{}", render::text(&p, false));

    // A host with nothing else to do: only its /etc/environment, no restart.
    let mut changed = copy(&again);
    let at = changed
        .spec
        .hosts
        .iter()
        .position(|h| h.id() == w01)
        .unwrap();
    changed.spec.hosts[at]
        .environment
        .insert("NO_PROXY".into(), "10.0.0.0/8,.internal".into());
    let p = run(&changed).expect("plan");
    let ch = p.changes.iter().find(|c| c.host == w01).unwrap();
    assert_eq!(ch.action, Action::UpdateFiles);
    let kinds: Vec<&str> = ch.steps.iter().map(|s| p.steps[*s].kind.name()).collect();
    assert_eq!(kinds, ["write_host_environment"]);

    // Not read (an older probe file): not compared; -refresh-only changes nothing.
    let mut old = copy(&i);
    facts_mut(&mut old.reality, &w01).unwrap().etc_environment = None;
    let p = run(&old).expect("plan");
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::WriteHostEnvironment { .. }))
    );
    changed.options.refresh_only = true;
    let p = run(&changed).expect("plan");
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::WriteHostEnvironment { .. }))
    );
}
