//! A pure model of what apply does, to check that an applied plan converges.

use super::*;

pub(super) fn sim_member_id(name: &str) -> String {
    sha256_hex(format!("joined {name}"))[..16].to_string()
}

pub(super) fn facts_mut<'a>(reality: &'a mut Reality, id: &HostId) -> Option<&'a mut HostFacts> {
    reality
        .hosts
        .iter_mut()
        .find(|h| &h.id == id)
        .and_then(|h| match &mut h.probe {
            Probe::Reached(f) => Some(&mut **f),
            _ => None,
        })
}

/// The state and reality after `plan` ran successfully.
pub(super) fn simulate_apply(plan: &Plan, i: &Inputs) -> (State, Reality) {
    let order: Vec<usize> = (0..plan.steps.len()).collect();
    simulate_apply_in(plan, i, &order)
}

/// A topological order of the steps picked pseudo-randomly from `seed` among the ready ones.
/// The plan of `i`'s spec again, after an apply left `state` and `reality`.
pub(super) fn replan(i: &Inputs, state: &State, reality: &Reality) -> Plan {
    plan::diff(&i.spec, state, reality, &i.desired, &PlanOptions::default()).expect("replan")
}

pub(super) fn step_host_is_controller(i: &Inputs, id: &HostId) -> bool {
    i.spec.host(id).is_some_and(|h| h.role.is_controller())
}

pub(super) fn random_topological_order(plan: &Plan, seed: u64) -> Vec<usize> {
    let mut done = vec![false; plan.steps.len()];
    let mut order = Vec::new();
    let mut x = seed | 1;
    while order.len() < plan.steps.len() {
        let ready: Vec<usize> = plan
            .steps
            .iter()
            .filter(|s| !done[s.id] && s.after.iter().all(|a| done[*a]))
            .map(|s| s.id)
            .collect();
        assert!(!ready.is_empty(), "no ready step: cycle");
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let pick = ready[(x % ready.len() as u64) as usize];
        done[pick] = true;
        order.push(pick);
    }
    order
}

/// The state and reality after `plan` ran successfully, its steps run in `order`.
pub(super) fn simulate_apply_in(plan: &Plan, i: &Inputs, order: &[usize]) -> (State, Reality) {
    let mut reality = i.reality.clone();
    let mut state = i.state.clone();
    // The cluster as the managed controllers see it.
    let mut uid = plan.cluster_uid.clone();
    let mut members: Vec<MemberView> = Vec::new();
    let mut nodes: Vec<NodeView> = Vec::new();
    let mut control_nodes: Vec<String> = Vec::new();
    if let Some(u) = &uid {
        let view = reality.hosts.iter().find_map(|h| match &h.probe {
            Probe::Reached(f) => f
                .view
                .as_ref()
                .filter(|v| v.cluster_uid.as_ref() == Some(u)),
            _ => None,
        });
        if let Some(v) = view {
            members = v.members.clone();
            nodes = v.nodes.clone();
            control_nodes = v.control_nodes.clone();
        }
    }
    // Nodes the plan cordoned: each must be uncordoned or deleted by the end.
    let mut cordoned: BTreeSet<String> = BTreeSet::new();
    for &n in order {
        let step = &plan.steps[n];
        // The controller a step acts through must be up and a member at that moment.
        let via = match &step.kind {
            StepKind::JoinController { via }
            | StepKind::JoinWorker { via }
            | StepKind::RemoveMember { via, .. }
            | StepKind::RemoveUnknownMember { via, .. }
            | StepKind::Drain { via, .. }
            | StepKind::Uncordon { via, .. }
            | StepKind::DeleteObjects { via, .. }
            | StepKind::WaitHealthy { via } => Some(via.clone()),
            _ => None,
        };
        if let Some(via) = via {
            let up = facts_mut(&mut reality, &via)
                .and_then(|f| f.status.as_ref())
                .and_then(|st| st.peer_address.clone())
                .is_some_and(|pa| {
                    members
                        .iter()
                        .any(|m| m.peer_url.ends_with(&format!("://{pa}:2380")))
                });
            assert!(
                up,
                "step {n} ({} on {}) acts through {via}, which is not a running member then",
                step.kind.name(),
                step.host
            );
        }
        let hs = i.spec.host(&step.host);
        let f = facts_mut(&mut reality, &step.host);
        match &step.kind {
            StepKind::ResetHost {
                machine_id,
                uninstall,
            } => {
                let f = f.expect("reset of an unreachable host");
                assert_eq!(&f.machine_id, machine_id, "reset of another machine");
                f.status = None;
                f.service = None;
                f.has_etcd_data = false;
                f.view = None;
                if *uninstall {
                    // destroy: the binary and k0s.yaml go too.
                    f.k0s_version = None;
                    f.k0s_binary_sha256 = None;
                    f.config_sha256 = None;
                    f.config_text = None;
                }
            }
            StepKind::UploadBinary { sha256, version } => {
                let f = f.expect("upload to an unreachable host");
                f.k0s_binary_sha256 = Some(sha256.clone());
                f.k0s_version = version.clone();
            }
            StepKind::DownloadBinary {
                sha256, version, ..
            } => {
                let f = f.expect("download on an unreachable host");
                f.k0s_binary_sha256 = Some(sha256.clone());
                f.k0s_version = Some(version.clone());
            }
            StepKind::WriteConfig { sha256 } => {
                let f = f.expect("config to an unreachable host");
                let text = desired::config_yaml(&i.spec, hs.expect("in spec"));
                assert_eq!(&sha256_hex(&text), sha256);
                f.config_sha256 = Some(sha256.clone());
                f.config_text = Some(text);
            }
            StepKind::RestoreBackup { .. } => {
                let f = f.expect("restore onto an unreachable host");
                assert!(f.status.is_none(), "restore where k0s runs");
                assert!(members.is_empty(), "restore over a cluster");
                f.has_etcd_data = true;
            }
            StepKind::Bootstrap | StepKind::JoinController { .. } | StepKind::JoinWorker { .. } => {
                let f = f.expect("join of an unreachable host");
                let hs = hs.expect("in spec");
                let controller = hs.role.is_controller();
                if matches!(step.kind, StepKind::Bootstrap) {
                    assert!(members.is_empty(), "bootstrap over a cluster");
                    uid = Some("sim-uid".into());
                }
                let name = hs.hostname.clone().unwrap_or_default();
                let version = f
                    .k0s_version
                    .clone()
                    .or(i.spec.k0s.version.clone())
                    .unwrap_or_else(|| "v1.33.4+k0s.0".parse().unwrap());
                let mut args = vec![
                    hs.k0s_install_path.clone(),
                    if controller { "controller" } else { "worker" }.to_string(),
                ];
                args.extend(desired::install_args(&i.spec, hs));
                f.status = Some(K0sStatus {
                    version,
                    pid: 1,
                    role: if controller { "controller" } else { "worker" }.into(),
                    workloads: hs.role.has_node(),
                    single_node: hs.role == Role::Single,
                    args,
                    peer_address: storage_of(&i.spec, hs, controller).0,
                    storage_type: storage_of(&i.spec, hs, controller).1,
                    invocation_id: None,
                });
                f.service = Some(if controller {
                    ServiceKind::Controller
                } else {
                    ServiceKind::Worker
                });
                if controller {
                    f.has_etcd_data = true;
                    let url = peer_url(hs.peer_address());
                    assert!(
                        !members.iter().any(|m| m.peer_url == url),
                        "join while {url} is still a member (etcd: Peer URLs already exists)"
                    );
                    members.push(MemberView {
                        name: name.clone(),
                        peer_url: url,
                        member_id: Some(sim_member_id(&name)),
                        invocation: None,
                    });
                    control_nodes.retain(|n| n != &name);
                    control_nodes.push(name.clone());
                }
                if hs.role.has_node() {
                    nodes.retain(|n| n.name != name);
                    nodes.push(NodeView {
                        name,
                        ready: true,
                        ..Default::default()
                    });
                }
            }
            StepKind::RemoveMember { member_id, .. } => {
                let before = members.len();
                members.retain(|m| m.member_id.as_deref() != Some(member_id.as_str()));
                assert_eq!(members.len() + 1, before, "member {member_id} not found");
            }
            StepKind::RemoveUnknownMember { peer_url, via, .. } => {
                assert_eq!(
                    &step.host, via,
                    "an unknown member removed as another host's"
                );
                let before = members.len();
                members.retain(|m| &m.peer_url != peer_url);
                assert_eq!(members.len() + 1, before, "member {peer_url} not found");
            }
            StepKind::DeleteObjects { .. } => {
                for (o, name) in step.kind.object_names() {
                    match o {
                        plan::ObjectKind::Node => nodes.retain(|n| n.name != name),
                        plan::ObjectKind::ControlNode => control_nodes.retain(|n| n != name),
                        plan::ObjectKind::EtcdMember => {}
                    }
                }
            }
            StepKind::Upgrade { .. } | StepKind::Reconfigure => {
                let f = f.expect("restart of an unreachable host");
                let hs = hs.expect("in spec");
                let st = f.status.as_mut().expect("restart of a stopped host");
                if let Some(v) = &f.k0s_version {
                    st.version = v.clone();
                }
                if let Some(v) = &i.spec.k0s.version
                    && i.desired.local_binary(&step.host).is_none()
                {
                    st.version = v.clone();
                    f.k0s_version = Some(v.clone());
                }
                st.args.truncate(2);
                st.args.extend(desired::install_args(&i.spec, hs));
                // A worker restarting on a k0s that decodes its token file gets a placeholder
                // first (`token_file_workaround`).
                if hs.role == Role::Worker
                    && k0sform::k0s::quirks::worker_decodes_token_file_at_start(&st.version)
                    && f.worker_token_file.is_some()
                {
                    f.worker_token_file = Some(k0sform::reality::TokenFileState::Decodes);
                }
            }
            StepKind::WriteTokenPlaceholder => {
                let f = f.expect("token file of an unreachable host");
                assert!(
                    f.worker_token_file.is_some(),
                    "a placeholder for a token file the probe did not report on"
                );
                f.worker_token_file = Some(k0sform::reality::TokenFileState::Decodes);
            }
            StepKind::RecordBastion { .. } => {
                panic!(
                    "the simulated cases have no bastions, yet {} is recorded as one",
                    step.host
                )
            }
            StepKind::RecordHost => {
                let f = f.expect("record of an unreachable host").clone();
                let role = hs.map(|h| h.role).expect("in spec");
                let etcd = members
                    .iter()
                    .find(|m| Some(&m.peer_url) == hs.map(|h| peer_url(h.peer_address())).as_ref())
                    .and_then(|m| {
                        Some(EtcdMemberState {
                            member_id: m.member_id.clone()?,
                            peer_url: m.peer_url.clone(),
                        })
                    });
                if state.cluster.is_none() {
                    state.cluster = Some(ClusterState {
                        name: i.spec.name.clone(),
                        uid: uid.clone().expect("record before the cluster exists"),
                        etcd_cluster_id: None,
                        k0s_version: None,
                        config_sha256: None,
                    });
                }
                state.upsert_host(HostState {
                    address: step.host.address.clone(),
                    port: step.host.port,
                    role,
                    node_name: Some(f.hostname.clone()),
                    machine_id: f.machine_id.clone(),
                    host_key: f.host_key.clone(),
                    host_public_key: None,
                    etcd: if role.is_controller() { etcd } else { None },
                    k0s_version: f.status.as_ref().map(|s| s.version.clone()),
                    install_flags_sha256: None,
                    config_sha256: f.config_sha256.clone(),
                    k0s_binary: None,
                    access: None,
                });
            }
            StepKind::ForgetHost => {
                state.remove_host(&step.host);
            }
            StepKind::ApplyManifest { manifest, sha256 } => {
                let f = f.expect("manifest applied through an unreachable host");
                assert!(
                    f.is_running() && step_host_is_controller(i, &step.host),
                    "manifest applied through {} that runs no controller",
                    step.host
                );
                state
                    .manifests
                    .retain(|m| !m.manifest.same_object(manifest));
                state.manifests.push(k0sform::manifests::ManifestRecord {
                    manifest: manifest.clone(),
                    sha256: sha256.clone(),
                });
            }
            StepKind::ForgetManifest { manifest } => {
                state
                    .manifests
                    .retain(|m| !m.manifest.same_object(manifest));
            }
            StepKind::MoveHost { from } => {
                let f = f.expect("move of an unreachable host");
                assert!(
                    state.host(&step.host).is_none(),
                    "move onto a recorded address"
                );
                let mut rec = state.remove_host(from).expect("move of an unrecorded host");
                assert_eq!(rec.machine_id, f.machine_id, "move of another machine");
                assert_eq!(rec.host_key, f.host_key, "move of another machine");
                rec.address = step.host.address.clone();
                rec.port = step.host.port;
                state.upsert_host(rec);
            }
            StepKind::ForgetCluster => {
                state.cluster = None;
            }
            StepKind::WriteHostEnvironment { names } => {
                let f = f.expect("/etc/environment of an unreachable host");
                let env = &hs.expect("in spec").environment;
                let file = f.etc_environment.get_or_insert_with(BTreeMap::new);
                for k in names {
                    file.insert(k.clone(), sha256_hex(&env[k]));
                }
            }
            StepKind::UploadFiles { files } => {
                let f = f.expect("files for an unreachable host");
                for want in files {
                    let have = f
                        .files
                        .iter_mut()
                        .find(|r| r.path == want.remote)
                        .expect("a planned file the probe did not report");
                    have.sha256 = Some(want.sha256.clone());
                    have.mode = Some(want.mode);
                    if let Some(u) = &want.user {
                        have.user = Some(u.clone());
                    }
                    if let Some(g) = &want.group {
                        have.group = Some(g.clone());
                    }
                }
            }
            StepKind::Drain { node, .. } => {
                cordoned.insert(node.clone());
            }
            StepKind::Uncordon { node, .. } => {
                assert!(
                    cordoned.remove(node),
                    "step {n} uncordons Node {node:?}, which no earlier step drained"
                );
            }
            StepKind::WaitHealthy { .. } | StepKind::RunHooks { .. } => {}
        }
        if let StepKind::DeleteObjects { node, objects, .. } = &step.kind
            && objects.contains(&plan::ObjectKind::Node)
        {
            cordoned.remove(node);
        }
    }
    assert!(
        cordoned.is_empty(),
        "the plan leaves Nodes cordoned: {cordoned:?}"
    );
    // Every managed running controller now reports the resulting cluster.
    let in_cluster: Vec<String> = members.iter().map(|m| m.peer_url.clone()).collect();
    for h in &mut reality.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(st) = &f.status
            && let Some(pa) = &st.peer_address
            && (in_cluster.contains(&peer_url(pa))
                || f.view.as_ref().is_some_and(|v| v.cluster_uid == uid))
        {
            f.view = Some(ClusterView {
                cluster_uid: uid.clone(),
                members: members.clone(),
                nodes: nodes.clone(),
                control_nodes: control_nodes.clone(),
                errors: vec![],
            });
        }
    }
    state.serial += 1;
    (state, reality)
}
