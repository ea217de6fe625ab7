//! Properties over generated clusters.

use super::*;
use crate::support::proptest_files;
use proptest::prelude::*;

/// What happened to a host since the state was written.
#[derive(Debug, Clone, Copy)]
enum Fate {
    Healthy,
    Fresh,
    Rebuilt,
    Left,
    OldVersion,
    Removed,
    Reset,
    Down,
    /// Rebuilt with a new host key; the user passed -replace.
    RekeyedReplaced,
    /// Same machine at a new address (issue 16); a controller keeps its old address as
    /// privateAddress, so its etcd peer address does not change.
    Moved,
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        4 => Just(Fate::Healthy),
        1 => Just(Fate::Fresh),
        1 => Just(Fate::Rebuilt),
        1 => Just(Fate::Left),
        1 => Just(Fate::OldVersion),
        1 => Just(Fate::Removed),
        1 => Just(Fate::Reset),
        1 => Just(Fate::Down),
        1 => Just(Fate::RekeyedReplaced),
        1 => Just(Fate::Moved),
    ]
}

fn scenario(ctrl: &[(Fate, bool)], workers: &[Fate], fresh_cluster: bool) -> Case {
    let v_new = "v1.33.4+k0s.0";
    let v_old = "v1.33.3+k0s.0";
    let mut case = Case {
        spec: SpecCase {
            name: "prop".into(),
            version: Some(v_new.parse().unwrap()),
            ..Default::default()
        },
        reality: RealityCase::default(),
        ..Default::default()
    };
    let mut state_hosts = Vec::new();
    let mut excluded = Vec::new();
    let mut replaced = Vec::new();
    let hosts = ctrl
        .iter()
        .enumerate()
        .map(|(n, (f, cw))| {
            let role = if *cw {
                Role::ControllerWorker
            } else {
                Role::Controller
            };
            (format!("10.0.0.{}", n + 1), format!("c{}", n + 1), role, *f)
        })
        .chain(workers.iter().enumerate().map(|(n, f)| {
            (
                format!("10.0.1.{}", n + 1),
                format!("w{}", n + 1),
                Role::Worker,
                *f,
            )
        }));
    for (addr, name, role, fate) in hosts {
        let fate = if fresh_cluster { Fate::Fresh } else { fate };
        // A moved host answers at 10.0.2.x (controllers) or 10.0.3.x (workers).
        let new_addr = match addr.strip_prefix("10.0.0.") {
            Some(n) => format!("10.0.2.{n}"),
            None => format!("10.0.3.{}", addr.trim_start_matches("10.0.1.")),
        };
        if matches!(fate, Fate::Moved) {
            let mut hc = HostCase::new(&new_addr, role, &name);
            if role.is_controller() {
                hc.private = Some(addr.clone());
            }
            case.spec.hosts.push(hc);
        } else if !matches!(fate, Fate::Removed) {
            let mut hc = HostCase::new(&addr, role, &name);
            hc.reset = matches!(fate, Fate::Reset);
            case.spec.hosts.push(hc);
        }
        if !matches!(fate, Fate::Fresh) {
            state_hosts.push(StateHostCase {
                addr: addr.clone(),
                port: None,
                role,
                name: name.clone(),
                machine_id: None,
                host_key: None,
                version: None,
            });
        }
        let running = if role.is_controller() {
            "controller"
        } else {
            "worker"
        };
        let mut r = RealHostCase {
            addr: addr.clone(),
            ..Default::default()
        };
        match fate {
            Fate::Healthy | Fate::Removed | Fate::Reset => {
                r.running = Some(running.into());
                if role.is_controller() {
                    case.reality.members.push(name.clone());
                }
            }
            Fate::OldVersion => {
                r.running = Some(running.into());
                r.version = Some(v_old.parse().unwrap());
                if role.is_controller() {
                    case.reality.members.push(name.clone());
                }
            }
            Fate::Fresh => {}
            Fate::Rebuilt => {
                r.machine_id = Some(format!("new-{name}"));
                if role.is_controller() {
                    case.reality.members.push(name.clone());
                }
            }
            Fate::Left => r.leftovers = true,
            Fate::RekeyedReplaced => {
                r.machine_id = Some(format!("new-{name}"));
                r.host_key = Some(format!("SHA256:new-{name}"));
                replaced.push(addr.clone());
                if role.is_controller() {
                    case.reality.members.push(name.clone());
                }
            }
            Fate::Down => {
                r.unreachable = Some("connection timed out".into());
                excluded.push(addr.clone());
                if role.is_controller() {
                    case.reality.members.push(name.clone());
                }
            }
            Fate::Moved => {
                r.unreachable = Some("no route to host".into());
                case.reality.hosts.push(RealHostCase {
                    addr: new_addr.clone(),
                    running: Some(running.into()),
                    ..Default::default()
                });
                if role.is_controller() {
                    case.reality.members.push(name.clone());
                }
            }
        }
        case.reality.hosts.push(r);
    }
    if !fresh_cluster {
        case.state = Some(StateCase {
            serial: 3,
            uid: "uid-prop".into(),
            hosts: state_hosts,
        });
        case.reality.uid = Some("uid-prop".into());
    }
    case.options.exclude = excluded;
    case.options.replace = replaced;
    case
}

proptest! {
    #![proptest_config(proptest_files::regressions_beside_source(256))]

    #[test]
    fn plans_are_safe_deterministic_and_converge(
        ctrl in proptest::collection::vec((fate(), proptest::bool::weighted(0.3)), 1..6),
        workers in proptest::collection::vec(fate(), 0..3),
        fresh in proptest::bool::weighted(0.15),
        seed in any::<u64>(),
    ) {
        let case = scenario(&ctrl, &workers, fresh);
        let i = build(&case);
        if std::env::var_os("PLAN_PROP_STATS").is_some() {
            match run(&i) {
                Ok(p) => eprintln!("STAT ok steps={} changes={}", p.steps.len(), p.changes.len()),
                Err(r) => eprintln!("STAT refused {:?} {:?} {:?} :: {}", r.kind, ctrl, workers, r.message),
            }
        }
        match run(&i) {
            Err(r) => {
                // Refusals are deterministic too, and say why.
                prop_assert!(!r.message.is_empty());
                prop_assert_eq!(run(&i).unwrap_err(), r);
            }
            Ok(p) => {
                if let Err(e) = check_invariants(&p, &i) {
                    prop_assert!(false, "{}\n{}", e, render::text(&p, false));
                }
                // A moved host is a move: its record follows, it is never removed, added
                // or reset at either address.
                let moved = ctrl
                    .iter()
                    .map(|(f, _)| *f)
                    .enumerate()
                    .map(|(n, f)| (f, format!("10.0.0.{}", n + 1), format!("10.0.2.{}", n + 1)))
                    .chain(workers.iter().enumerate().map(|(n, f)| {
                        (*f, format!("10.0.1.{}", n + 1), format!("10.0.3.{}", n + 1))
                    }))
                    .filter(|(f, _, _)| !fresh && matches!(f, Fate::Moved));
                for (_, old, new) in moved {
                    let ch = p.changes.iter().find(|c| c.host.address == new);
                    prop_assert!(
                        ch.is_some_and(|c| c.moved_from.as_ref().is_some_and(|f| f.address == old)
                            && !matches!(c.action, Action::Add | Action::Remove | Action::Replace)),
                        "{} → {} not planned as a move:\n{}", old, new, render::text(&p, false)
                    );
                    prop_assert!(
                        !p.changes.iter().any(|c| c.host.address == old),
                        "the old address {} is planned:\n{}", old, render::text(&p, false)
                    );
                    prop_assert!(
                        !p.steps.iter().any(|s| (s.host.address == old || s.host.address == new)
                            && matches!(s.kind, StepKind::ResetHost { .. } | StepKind::JoinController { .. } | StepKind::JoinWorker { .. } | StepKind::ForgetHost)),
                        "a moved host is reset, joined or forgotten:\n{}", render::text(&p, false)
                    );
                }
                // Any topological order the executor may pick must work.
                let order = random_topological_order(&p, seed);
                let (state2, reality2) = simulate_apply_in(&p, &i, &order);
                // The replacement is done: the next run does not repeat -replace.
                let next = PlanOptions { exclude: i.options.exclude.clone(), ..Default::default() };
                let again = plan::diff(&i.spec, &state2, &reality2, &i.desired, &next);
                match again {
                    Err(r) => prop_assert!(false, "replan refused: {}\n{}", refusal_text(&r), render::text(&p, false)),
                    Ok(again) => prop_assert!(
                        !again.has_changes(),
                        "first plan:\n{}\nsecond plan:\n{}",
                        render::text(&p, false),
                        render::text(&again, false)
                    ),
                }
            }
        }
    }
}
