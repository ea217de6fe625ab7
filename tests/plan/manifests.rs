//! Manifests and the dynamic config.

use super::*;

fn manifest(kind: &str, name: &str, data: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, "data": {"k": data}})
}

/// Extra manifests of the spec (k0sctl `phase/apply_manifests.go`): each is applied through one
/// running controller after every other step and recorded with its content hash; the next plan
/// has no changes; a changed one is applied again; one the spec lost is left in the cluster and
/// forgotten by the state; `-target` applies none (and says so).
#[test]
fn manifests_are_applied_once_then_only_when_changed() {
    let mut i = case_inputs("add_worker");
    i.spec.manifests = vec![
        manifest("ConfigMap", "a", "1"),
        manifest("ConfigMap", "b", "2"),
    ];
    let p = run(&i).expect("plan");
    let applies: Vec<&k0sform::plan::Step> = p
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::ApplyManifest { .. }))
        .collect();
    assert_eq!(applies.len(), 2, "{}", render::text(&p, false));
    let others: Vec<usize> = p
        .steps
        .iter()
        .filter(|s| !matches!(s.kind, StepKind::ApplyManifest { .. }))
        .map(|s| s.id)
        .collect();
    // Every other step comes first: in every order the DAG allows, no apply runs before one.
    for seed in 0..20 {
        let order = random_topological_order(&p, seed);
        let first_apply = order
            .iter()
            .position(|n| applies.iter().any(|a| a.id == *n));
        let last_other = order.iter().rposition(|n| others.contains(n));
        assert!(first_apply > last_other, "seed {seed}: {order:?}");
    }
    // One after the other, in spec order (a Namespace before what goes in it).
    assert_eq!(applies[1].after, [applies[0].id]);
    assert!(step_host_is_controller(&i, &applies[0].host));
    let text = render::text(&p, false);
    assert!(text.contains("+ ConfigMap default/a: created"), "{text}");
    assert!(text.contains("2 manifests to apply."), "{text}");
    check_invariants(&p, &i).expect("invariants");

    let (state, reality) = simulate_apply(&p, &i);
    let again = replan(&i, &state, &reality);
    let text = render::text(&again, false);
    assert!(!again.has_changes(), "{text}");
    assert!(text.contains("Manifests: 2 unchanged"), "{text}");

    // One changed, one removed.
    let mut j = case_inputs("add_worker");
    j.spec = i.spec.clone();
    j.spec.manifests = vec![manifest("ConfigMap", "a", "changed")];
    j.state = state;
    j.reality = reality;
    let third = plan::diff(
        &j.spec,
        &j.state,
        &j.reality,
        &i.desired,
        &PlanOptions::default(),
    )
    .expect("third plan");
    let text = render::text(&third, false);
    assert!(text.contains("~ ConfigMap default/a: changed"), "{text}");
    assert!(
        text.contains("- ConfigMap default/b: no longer in the spec: left in the cluster"),
        "{text}"
    );
    assert!(text.contains("1 manifest to apply."), "{text}");
    assert!(
        third.steps.iter().any(
            |s| matches!(&s.kind, StepKind::ForgetManifest { manifest } if manifest.name == "b")
        )
    );
    let (state, reality) = simulate_apply(&third, &j);
    assert_eq!(state.manifests.len(), 1);
    let fourth = replan(&j, &state, &reality);
    assert!(!fourth.has_changes(), "{}", render::text(&fourth, false));

    // -target works on its hosts only.
    let opts = PlanOptions {
        target: vec!["10.0.0.1".into()],
        ..Default::default()
    };
    let mut k = case_inputs("noop");
    k.spec.manifests = vec![manifest("ConfigMap", "a", "1")];
    let targeted = plan::diff(&k.spec, &k.state, &k.reality, &k.desired, &opts).expect("targeted");
    assert!(!targeted.has_changes());
    assert!(
        targeted
            .warnings
            .iter()
            .any(|w| w.contains("manifests are not applied")),
        "{:?}",
        targeted.warnings
    );
}

/// With `dynamicConfig`, the plan warns where the ClusterConfig object a healthy controller
/// reported differs from what spec.k0s.config sets (only what the spec sets; the node part
/// left out), and plans nothing for it.
#[test]
fn dynamic_config_drift_is_a_warning() {
    let mut i = case_inputs("noop");
    i.spec.k0s.dynamic_config = true;
    i.spec.k0s.config = Some(serde_json::json!({"spec": {
        "telemetry": {"enabled": false},
        "api": {"port": 6443},
        "network": {"provider": "kuberouter"},
    }}));
    let c01 = HostId::new("10.0.0.1".to_string(), 22);
    facts_mut(&mut i.reality, &c01).expect("c01").cluster_config = Some(serde_json::json!({
        "telemetry": {"enabled": true},
        "network": {"provider": "kuberouter", "podCIDR": "10.244.0.0/16"},
    }));
    let p = run(&i).expect("plan");
    let live = facts_mut(&mut i.reality, &c01)
        .expect("c01")
        .cluster_config
        .take();
    assert_eq!(
        p.steps,
        run(&i).expect("plan").steps,
        "the drift plans nothing"
    );
    facts_mut(&mut i.reality, &c01).expect("c01").cluster_config = live;
    let w: Vec<&String> = p
        .warnings
        .iter()
        .filter(|w| w.contains("dynamic config"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings);
    assert!(
        w[0].contains("as 10.0.0.1 reads it")
            && w[0].contains("spec.telemetry.enabled: false in the spec, true in the cluster")
            && !w[0].contains("api"),
        "{}",
        w[0]
    );
    // The same object, or no dynamic config: no warning.
    i.spec.k0s.dynamic_config = false;
    assert!(
        run(&i)
            .expect("plan")
            .warnings
            .iter()
            .all(|w| !w.contains("dynamic config"))
    );
}
