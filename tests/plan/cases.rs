//! The table-driven cases (testdata/plans/<case>/case.yaml) with their snapshots, and the
//! invariants every plan must satisfy.

use super::*;

pub(super) fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/plans")
}

pub(super) fn load_cases() -> Vec<(String, Case)> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("testdata/plans")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("case.yaml").exists())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(d.join("case.yaml")).unwrap();
        let case: Case = serde_saphyr::from_str(&text)
            .unwrap_or_else(|e| panic!("testdata/plans/{name}/case.yaml: {e}"));
        out.push((name, case));
    }
    out
}

pub(super) fn refusal_text(r: &Refusal) -> String {
    let mut s = format!(
        "refused ({:?}, exit {}): {}\n",
        r.kind,
        r.exit_code(),
        r.message
    );
    for d in &r.details {
        s.push_str(&format!("  {d}\n"));
    }
    s
}

pub(super) fn check_case(name: &str, case: &Case) -> Result<(), String> {
    let _snapshots = snapshots_in_tests_dir();
    let inputs = build(case);
    let result = run(&inputs);
    let e = &case.expect;
    match (&result, &e.refusal) {
        (Err(r), Some(kind)) => {
            let got = serde_json::to_value(r.kind).unwrap();
            if got != serde_json::Value::String(kind.clone()) {
                return Err(format!(
                    "refusal kind {got}, expected {kind}: {}",
                    r.message
                ));
            }
            if let Some(code) = e.exit
                && code != r.exit_code()
            {
                return Err(format!("exit {} expected {code}", r.exit_code()));
            }
            let text = refusal_text(r);
            for c in &e.contains {
                if !text.contains(c) {
                    return Err(format!("refusal lacks {c:?}:\n{text}"));
                }
            }
            insta::assert_snapshot!(format!("{name}__refusal"), text);
            Ok(())
        }
        (Err(r), None) => Err(format!("unexpected refusal: {}", refusal_text(r))),
        (Ok(_), Some(kind)) => Err(format!("expected refusal {kind}, got a plan")),
        (Ok(p), None) => {
            let actions: BTreeMap<String, Action> = p
                .changes
                .iter()
                .map(|c| (c.host.to_string(), c.action))
                .collect();
            if actions != e.actions {
                return Err(format!("actions {actions:?}, expected {:?}", e.actions));
            }
            if let Some(ca) = &e.cluster_action {
                let got = match &p.cluster_action {
                    ClusterAction::Existing => "existing".to_string(),
                    ClusterAction::Adopt => "adopt".to_string(),
                    ClusterAction::Bootstrap { host } => format!("bootstrap {host}"),
                };
                if &got != ca {
                    return Err(format!("cluster action {got}, expected {ca}"));
                }
            }
            for (host, kinds) in &e.steps {
                let got: Vec<&str> = p
                    .steps
                    .iter()
                    .filter(|s| &s.host.to_string() == host)
                    .map(|s| s.kind.name())
                    .collect();
                if &got != kinds {
                    return Err(format!("steps of {host}: {got:?}, expected {kinds:?}"));
                }
            }
            if let Some((b, a, h, q)) = e.etcd {
                let got = (
                    p.etcd.members_before,
                    p.etcd.members_after,
                    p.etcd.min_healthy,
                    p.etcd.quorum,
                );
                if got != (b, a, h, q) {
                    return Err(format!("etcd {got:?}, expected {:?}", (b, a, h, q)));
                }
            }
            let find = |what: &str| -> Result<usize, String> {
                let (host, kind) = what
                    .split_once(' ')
                    .ok_or(format!("bad step name {what}"))?;
                p.steps
                    .iter()
                    .find(|s| s.host.to_string() == host && s.kind.name() == kind)
                    .map(|s| s.id)
                    .ok_or(format!("no step {what}"))
            };
            for (a, b) in &e.ordered {
                if !graph::precedes(&p.steps, find(a)?, find(b)?) {
                    return Err(format!("{a} does not precede {b}"));
                }
            }
            if p.drift.len() != e.drift {
                return Err(format!(
                    "{} drift entries, expected {}",
                    p.drift.len(),
                    e.drift
                ));
            }
            let text = render::text(p, false);
            for c in &e.contains {
                if !text.contains(c) {
                    return Err(format!("plan text lacks {c:?}:\n{text}"));
                }
            }
            check_invariants(p, &inputs)?;
            // An applied plan converges: planning again changes nothing.
            // (A host the probe could not run on has no facts to simulate.)
            let unprobed = inputs
                .reality
                .hosts
                .iter()
                .any(|h| matches!(h.probe, Probe::HostKeyChanged { .. }));
            if !p.refresh_only && p.has_changes() && inputs.options.target.is_empty() && !unprobed {
                let (state2, reality2) = simulate_apply(p, &inputs);
                if p.destroy {
                    // A destroy ends with an empty state of the same lineage.
                    if !state2.hosts.is_empty() || state2.cluster.is_some() {
                        return Err(format!("state after destroy is not empty: {state2:?}"));
                    }
                    if state2.lineage != inputs.state.lineage {
                        return Err("destroy changed the state's lineage".into());
                    }
                }
                let again = plan::diff(
                    &inputs.spec,
                    &state2,
                    &reality2,
                    &inputs.desired,
                    &PlanOptions {
                        exclude: inputs.options.exclude.clone(),
                        destroy: p.destroy,
                        ..Default::default()
                    },
                )
                .map_err(|r| format!("replanning after apply refused: {}", refusal_text(&r)))?;
                if again.has_changes() {
                    return Err(format!(
                        "replanning after apply still has changes:\n{}",
                        render::text(&again, false)
                    ));
                }
            }
            insta::assert_snapshot!(format!("{name}__text"), text);
            insta::assert_snapshot!(format!("{name}__json"), render::json(p));
            insta::assert_snapshot!(format!("{name}__dot"), render::dot(p));
            Ok(())
        }
    }
}

#[test]
fn decision_table_cases() {
    let cases = load_cases();
    assert!(cases.len() >= 20, "only {} cases found", cases.len());
    let mut failures = Vec::new();
    for (name, case) in &cases {
        if let Err(e) = check_case(name, case) {
            failures.push(format!("{name} ({}): {e}", case.description));
        }
    }
    assert!(
        failures.is_empty(),
        "failing cases:\n{}",
        failures.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Invariants every plan must satisfy.

pub(super) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

pub(super) fn check_invariants(p: &Plan, i: &Inputs) -> Result<(), String> {
    graph::check_acyclic(&p.steps).map_err(|e| e.to_string())?;
    for (pos, s) in p.steps.iter().enumerate() {
        if s.id != pos || s.after.iter().any(|a| *a >= s.id) {
            return Err(format!("step {pos} is out of topological order"));
        }
    }
    // Membership changes are totally ordered, each followed by a health gate before the next.
    let membership: Vec<usize> = p
        .steps
        .iter()
        .filter(|s| s.kind.is_membership_change())
        .map(|s| s.id)
        .collect();
    for w in membership.windows(2) {
        if !graph::precedes(&p.steps, w[0], w[1]) {
            return Err(format!(
                "membership steps {} and {} are not ordered",
                w[0], w[1]
            ));
        }
        let gated = p.steps.iter().any(|g| {
            matches!(g.kind, StepKind::WaitHealthy { .. })
                && graph::precedes(&p.steps, w[0], g.id)
                && graph::precedes(&p.steps, g.id, w[1])
        });
        if !gated {
            return Err(format!(
                "no health gate between steps {} and {}",
                w[0], w[1]
            ));
        }
    }
    // Replay the (totally ordered) membership changes: every topological order sees them in
    // this order, so this checks them all.
    // (member ID, peer URL, healthy)
    let mut members: Vec<(String, String, bool)> = Vec::new();
    if let Some(uid) = &p.cluster_uid {
        let healthy_urls: Vec<String> = i
            .reality
            .hosts
            .iter()
            .filter_map(|h| match &h.probe {
                Probe::Reached(f)
                    if f.view.as_ref().and_then(|v| v.cluster_uid.as_ref()) == Some(uid) =>
                {
                    f.status
                        .as_ref()?
                        .peer_address
                        .as_ref()
                        .map(|a| format!("{a}:2380"))
                }
                _ => None,
            })
            .collect();
        if let Some(v) = i.reality.hosts.iter().find_map(|h| match &h.probe {
            Probe::Reached(f) => f
                .view
                .as_ref()
                .filter(|v| v.cluster_uid.as_ref() == Some(uid)),
            _ => None,
        }) {
            members = v
                .members
                .iter()
                .map(|m| {
                    (
                        m.member_id.clone().unwrap_or_default(),
                        m.peer_url.clone(),
                        // Scheme-blind, like the planner: doubles speak http to peers.
                        healthy_urls
                            .iter()
                            .any(|u| m.peer_url.ends_with(&format!("://{u}"))),
                    )
                })
                .collect();
        }
    }
    // Controller restarts (one member down until it is back) count too; they are chained with
    // the membership changes.
    let restarts_controller = |s: &k0sform::plan::Step| {
        matches!(s.kind, StepKind::Upgrade { .. } | StepKind::Reconfigure)
            && i.spec.host(&s.host).is_some_and(|h| h.role.is_controller())
    };
    let replayed: Vec<usize> = p
        .steps
        .iter()
        .filter(|s| s.kind.is_membership_change() || restarts_controller(s))
        .map(|s| s.id)
        .collect();
    for w in replayed.windows(2) {
        if !graph::precedes(&p.steps, w[0], w[1]) {
            return Err(format!(
                "membership change or controller restart {} and {} are not ordered",
                w[0], w[1]
            ));
        }
    }
    let mut min_healthy = members.iter().filter(|m| m.2).count();
    for id in &replayed {
        let s = &p.steps[*id];
        let healthy = members.iter().filter(|m| m.2).count();
        match &s.kind {
            StepKind::Upgrade { .. } | StepKind::Reconfigure if !members.is_empty() => {
                min_healthy = min_healthy.min(healthy.saturating_sub(1));
            }
            StepKind::RemoveMember { member_id, via, .. } => {
                if via == &s.host {
                    return Err(format!("member of {} removed through itself", s.host));
                }
                let pos = members
                    .iter()
                    .position(|m| &m.0 == member_id)
                    .ok_or(format!("removing unknown member {member_id}"))?;
                let (_, _, was_healthy) = members.remove(pos);
                let h = healthy - usize::from(was_healthy);
                if members.is_empty() || h < quorum(members.len()) {
                    return Err(format!("step {id} leaves {h} healthy of {}", members.len()));
                }
                min_healthy = min_healthy.min(h);
            }
            StepKind::RemoveUnknownMember { peer_url, .. } => {
                if !p.destroy {
                    return Err(format!(
                        "step {id} removes an unknown member outside destroy"
                    ));
                }
                let pos = members
                    .iter()
                    .position(|m| &m.1 == peer_url)
                    .ok_or(format!("removing {peer_url}, which is no member"))?;
                let (_, _, was_healthy) = members.remove(pos);
                let h = healthy - usize::from(was_healthy);
                if members.is_empty() || h < quorum(members.len()) {
                    return Err(format!("step {id} leaves {h} healthy of {}", members.len()));
                }
                min_healthy = min_healthy.min(h);
            }
            StepKind::JoinController { .. } => {
                // The cluster must be whole before an add, and reach quorum once the new
                // member runs.
                if healthy < members.len() || healthy + 1 < quorum(members.len() + 1) {
                    return Err(format!(
                        "step {id} joins with {healthy} healthy of {} members",
                        members.len()
                    ));
                }
                min_healthy = min_healthy.min(healthy);
                members.push((format!("new{id}"), String::new(), true));
            }
            StepKind::Bootstrap => {
                if !members.is_empty() {
                    return Err("bootstrap over an existing cluster".into());
                }
                members.push((format!("new{id}"), String::new(), true));
            }
            _ => {}
        }
    }
    if !replayed.is_empty() && p.etcd.min_healthy != min_healthy {
        return Err(format!(
            "summary says min healthy {}, replay says {min_healthy}",
            p.etcd.min_healthy
        ));
    }
    // A host is reset only after its membership is gone, and only with a machine-id.
    for s in &p.steps {
        if let StepKind::ResetHost { machine_id, .. } = &s.kind {
            if machine_id.is_empty() {
                return Err(format!("reset of {} without a machine-id", s.host));
            }
            for r in &p.steps {
                if let StepKind::RemoveMember { .. } = r.kind
                    && r.host == s.host
                    && !graph::precedes(&p.steps, r.id, s.id)
                {
                    return Err(format!("{} reset before its member is removed", s.host));
                }
                if let StepKind::DeleteObjects { .. } = r.kind
                    && r.host == s.host
                    && r.id > s.id
                    && matches!(
                        p.changes
                            .iter()
                            .find(|c| c.host == s.host)
                            .map(|c| c.action),
                        Some(Action::Remove)
                    )
                {
                    return Err(format!("{} reset before its objects are deleted", s.host));
                }
            }
        }
        // Upload and config come before install.
        if matches!(
            s.kind,
            StepKind::JoinController { .. } | StepKind::JoinWorker { .. } | StepKind::Bootstrap
        ) {
            for r in &p.steps {
                if r.host == s.host
                    && matches!(
                        r.kind,
                        StepKind::UploadBinary { .. } | StepKind::WriteConfig { .. }
                    )
                    && !graph::precedes(&p.steps, r.id, s.id)
                {
                    return Err(format!("{}: {} not before the join", s.host, r.kind.name()));
                }
            }
        }
    }
    // Deterministic.
    let again = run(i).map_err(|r| r.message)?;
    if &again != p {
        return Err("planning twice gave different plans".into());
    }
    Ok(())
}
