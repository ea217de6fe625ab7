//! Building real inputs (spec, state, reality) from a compact case.

use super::*;

pub(super) fn member_id(name: &str) -> String {
    sha256_hex(format!("member {name}"))[..16].to_string()
}

pub(super) fn peer_url(addr: &str) -> String {
    format!("https://{addr}:2380")
}

/// What `k0s status` reports of a controller's storage: (etcd peer address, type). A `single`
/// host runs kine (no peer address); workers report neither.
/// What `k0s status` reports about storage on a host running the desired k0s.yaml.
pub(super) fn storage_of(
    spec: &Spec,
    hs: &HostSpec,
    controller: bool,
) -> (Option<String>, Option<String>) {
    if !controller {
        return (None, None);
    }
    match desired::host_storage_type(spec, hs).as_str() {
        "etcd" => (Some(hs.peer_address().to_string()), Some("etcd".into())),
        other => (None, Some(other.into())),
    }
}

pub(super) fn host_spec(h: &HostCase, index: usize) -> HostSpec {
    let mut ssh = SshTarget::new(h.addr.clone(), h.port.unwrap_or(22));
    ssh.host_key = h.pin.clone();
    let mut hs = HostSpec::new(h.role, ssh, index);
    hs.hostname = Some(h.name.clone());
    hs.private_address = h.private.clone();
    hs.reset = h.reset;
    hs.install_flags = h.flags.clone();
    hs.hooks = h.hooks.clone();
    hs
}

pub(super) fn build(case: &Case) -> Inputs {
    let mut options = Options::default();
    if let Some(p) = case.spec.worker_disruption_percent {
        options.worker_disruption_percent = p;
    }
    if let Some(d) = case.spec.drain {
        options.drain.enabled = d;
    }
    options.evict_taint = case.spec.evict_taint.clone();
    let mut spec = Spec {
        name: case.spec.name.clone(),
        user: "admin".into(),
        hosts: case
            .spec
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| host_spec(h, i + 1))
            .collect(),
        k0s: K0sSpec {
            version: case.spec.version.clone(),
            version_channel: None,
            dynamic_config: case.spec.dynamic_config,
            config: case.spec.config.clone(),
            controllers_run: false,
        },
        options,
        manifests: vec![],
        env_values: vec![],
    };
    // Hosts only the state knows still need a HostSpec to derive their running args/config.
    // The harness names hosts by `hostname`; the planner's spec has it only where the case sets it.
    let mut all_specs: Vec<HostSpec> = spec.hosts.clone();
    for (hs, h) in spec.hosts.iter_mut().zip(&case.spec.hosts) {
        if !h.set_hostname {
            hs.hostname = None;
        }
    }
    let mut state = State {
        format_version: 1,
        lineage: "00000000-0000-4000-8000-000000000001".into(),
        serial: 0,
        tool_version: "0.1.0".into(),
        cluster: None,
        hosts: vec![],
        intents: vec![],
        bastions: vec![],
        downloads: vec![],
        manifests: vec![],
    };
    if let Some(st) = &case.state {
        state.serial = st.serial;
        state.cluster = Some(ClusterState {
            name: case.spec.name.clone(),
            uid: st.uid.clone(),
            etcd_cluster_id: None,
            k0s_version: None,
            config_sha256: None,
        });
        for h in &st.hosts {
            let port = h.port.unwrap_or(22);
            if !all_specs
                .iter()
                .any(|s| s.id() == HostId::new(h.addr.clone(), port))
            {
                let mut hc = HostCase::new(&h.addr, h.role, &h.name);
                hc.port = h.port;
                all_specs.push(host_spec(&hc, 0));
            }
            state.upsert_host(HostState {
                address: h.addr.clone(),
                port,
                role: h.role,
                node_name: Some(h.name.clone()),
                machine_id: h.machine_id.clone().unwrap_or(format!("mid-{}", h.name)),
                host_key: h
                    .host_key
                    .clone()
                    .unwrap_or(format!("SHA256:key-{}", h.name)),
                host_public_key: None,
                etcd: h.role.is_controller().then(|| EtcdMemberState {
                    member_id: member_id(&h.name),
                    peer_url: peer_url(&h.addr),
                }),
                k0s_version: h.version.clone().or(case.spec.version.clone()),
                install_flags_sha256: None,
                config_sha256: None,
                k0s_binary: None,
                access: None,
            });
        }
    }
    let name_of_addr = |addr: &str, port: u16| -> Option<&HostSpec> {
        all_specs
            .iter()
            .find(|s| s.ssh.address == addr && s.ssh.port == port)
    };
    let addr_of_name = |name: &str| -> String {
        all_specs
            .iter()
            .find(|s| s.hostname.as_deref() == Some(name))
            .map(|s| s.peer_address().to_string())
            .unwrap_or_else(|| format!("10.9.9.{}", name.len()))
    };
    let scheme = case.reality.peer_scheme.as_deref().unwrap_or("https");
    let seen_url = |addr: &str| format!("{scheme}://{addr}:2380");
    let seen_id = |n: &str| {
        case.reality
            .member_ids
            .get(n)
            .cloned()
            .unwrap_or_else(|| member_id(n))
    };
    let view_members = |names: &[String]| -> Vec<MemberView> {
        let mut v: Vec<MemberView> = names
            .iter()
            .map(|n| MemberView {
                name: n.clone(),
                peer_url: seen_url(&addr_of_name(n)),
                member_id: Some(seen_id(n)),
                invocation: None,
            })
            .collect();
        for (n, a) in &case.reality.extra_members {
            v.push(MemberView {
                name: n.clone(),
                peer_url: seen_url(a),
                member_id: Some(seen_id(n)),
                invocation: None,
            });
        }
        v
    };
    let running_nodes: Vec<String> = case.reality.nodes.clone().unwrap_or_else(|| {
        case.reality
            .hosts
            .iter()
            .filter(|r| r.running.is_some() && r.view.is_none())
            .filter_map(|r| name_of_addr(&r.addr, r.port.unwrap_or(22)))
            .filter(|s| s.role.has_node())
            .filter_map(|s| s.hostname.clone())
            .collect()
    });
    let control_nodes: Vec<String> = case.reality.members.to_vec();
    let mut reality = Reality::default();
    for r in &case.reality.hosts {
        let id = HostId::new(r.addr.clone(), r.port.unwrap_or(22));
        let probe = if let Some(e) = &r.unreachable {
            Probe::Unreachable { error: e.clone() }
        } else if let Some((expected, offered)) = &r.host_key_changed {
            Probe::HostKeyChanged {
                expected: expected.clone(),
                offered: offered.clone(),
                bastion: None,
            }
        } else {
            let hs = name_of_addr(&r.addr, id.port)
                .unwrap_or_else(|| panic!("reality host {} is not in spec or state", r.addr));
            let name = hs.hostname.clone().unwrap_or_default();
            let version = r.version.clone().or(case.spec.version.clone());
            let mut f = HostFacts {
                machine_id: r.machine_id.clone().unwrap_or(format!("mid-{name}")),
                hostname: name.clone(),
                host_key: r.host_key.clone().unwrap_or(format!("SHA256:key-{name}")),
                os: "debian".into(),
                arch: "amd64".into(),
                worker_token_file: r.token_file,
                ..Default::default()
            };
            if let Some(kind) = &r.running {
                // `controller+worker` and `single` run as a controller with workloads; plain
                // `controller` (or `worker`) runs with the workloads of the spec's role.
                let (kind, workloads, single) = match kind.as_str() {
                    "controller+worker" => (&"controller".to_string(), true, false),
                    "single" => (&"controller".to_string(), true, true),
                    _ => (kind, hs.role.has_node(), hs.role == Role::Single),
                };
                let controller = kind == "controller";
                let mut args = vec![
                    hs.k0s_install_path.clone(),
                    if controller { "controller" } else { "worker" }.to_string(),
                ];
                match &r.args {
                    Some(recorded) => args.extend(recorded.iter().cloned()),
                    None => args.extend(desired::install_args(&spec, hs)),
                }
                args.extend(r.extra_args.iter().cloned());
                f.k0s_version = version.clone();
                f.k0s_binary_sha256 = version.as_ref().map(|v| sha256_hex(format!("k0s {v}")));
                f.service = Some(if controller {
                    ServiceKind::Controller
                } else {
                    ServiceKind::Worker
                });
                f.status = Some(K0sStatus {
                    version: version
                        .clone()
                        .unwrap_or_else(|| "v1.33.4+k0s.0".parse().unwrap()),
                    pid: 100,
                    role: kind.clone(),
                    workloads,
                    single_node: single,
                    args,
                    peer_address: r
                        .peer_address
                        .clone()
                        .or(storage_of(&spec, hs, controller).0),
                    storage_type: r.storage.clone().or(storage_of(&spec, hs, controller).1),
                    invocation_id: None,
                });
                f.config_defaults = r.defaults.clone();
                if controller {
                    f.has_etcd_data = true;
                    let text = match r.config.as_deref() {
                        None | Some("desired") => Some(desired::config_yaml(&spec, hs)),
                        Some("none") => None,
                        Some(t) => Some(t.to_string()),
                    };
                    f.config_sha256 = text.as_ref().map(sha256_hex);
                    f.config_text = text;
                    let view = match &r.view {
                        Some(v) => ClusterView {
                            cluster_uid: Some(v.uid.clone()),
                            members: view_members(&v.members),
                            nodes: vec![],
                            control_nodes: v.members.clone(),
                            errors: vec![],
                        },
                        None => ClusterView {
                            cluster_uid: case.reality.uid.clone(),
                            members: view_members(&case.reality.members),
                            nodes: running_nodes
                                .iter()
                                .map(|n| NodeView {
                                    name: n.clone(),
                                    ready: true,
                                    ..Default::default()
                                })
                                .collect(),
                            control_nodes: control_nodes.clone(),
                            errors: vec![],
                        },
                    };
                    let mut view = view;
                    if !r.view_errors.is_empty() {
                        view.cluster_uid = None;
                        view.nodes.clear();
                        view.errors = r.view_errors.clone();
                    }
                    f.view = Some(view);
                }
            } else if r.leftovers {
                f.k0s_version = version.clone();
                f.service = Some(if hs.role.is_controller() {
                    ServiceKind::Controller
                } else {
                    ServiceKind::Worker
                });
                f.has_etcd_data = hs.role.is_controller();
            } else if let Some(v) = &r.binary {
                f.k0s_version = Some(v.clone());
                f.k0s_binary_sha256 = Some(sha256_hex(format!("k0s {v}")));
            }
            // The probe reports every file the spec names for the host, present or not.
            let spec_files = case
                .spec
                .hosts
                .iter()
                .find(|c| c.addr == r.addr && c.port == r.port)
                .map(|c| c.files.clone())
                .unwrap_or_default();
            f.files = spec_files
                .iter()
                .map(
                    |want| match r.files.iter().find(|h| h.remote == want.remote) {
                        Some(have) => RemoteFile {
                            path: want.remote.clone(),
                            sha256: Some(sha256_hex(&have.data)),
                            mode: k0sform::files::octal(&have.mode),
                            user: Some(have.user.clone().unwrap_or("root".into())),
                            group: Some(have.group.clone().unwrap_or("root".into())),
                            uid: have.user.is_none().then_some(0),
                            gid: have.group.is_none().then_some(0),
                        },
                        None => RemoteFile {
                            path: want.remote.clone(),
                            ..Default::default()
                        },
                    },
                )
                .collect();
            Probe::Reached(Box::new(f))
        };
        reality.hosts.push(HostReality { id, probe });
    }
    reality.sort();
    // As the engine does after the probe.
    k0sform::k0s::desired::note_running_controllers(&mut spec, &reality);
    // The caller resolves the spec's version to a binary for every host.
    let local = case.binary.as_ref().or(case.spec.version.as_ref());
    let desired = match local.filter(|_| !case.no_local_binary) {
        Some(v) if case.host_download.is_some() => {
            let d = case.host_download.as_ref().unwrap();
            let mut ids: Vec<HostId> = spec.hosts.iter().map(|h| h.id()).collect();
            ids.sort();
            Desired {
                hosts: ids
                    .into_iter()
                    .map(|host| k0sform::plan::DesiredHost {
                        host,
                        local_binary: None,
                        host_download: Some(k0sform::plan::HostDownload {
                            url: d.url.clone(),
                            sha256: d.sha256.clone(),
                            version: v.clone(),
                        }),
                        files: Vec::new(),
                    })
                    .collect(),
            }
        }
        Some(v) => Desired::same_binary(
            &spec.hosts.iter().map(|h| h.id()).collect::<Vec<_>>(),
            LocalBinary {
                sha256: sha256_hex(format!("k0s {v}")),
                version: Some(v.clone()),
                url: None,
            },
        ),
        None => Desired::default(),
    };
    let mut desired = desired;
    for c in case.spec.hosts.iter().filter(|c| !c.files.is_empty()) {
        let id = HostId::new(c.addr.clone(), c.port.unwrap_or(22));
        let mut files: Vec<_> = c.files.iter().map(FileCase::desired).collect();
        files.sort_by(|a, b| a.remote.cmp(&b.remote));
        match desired.hosts.iter_mut().find(|h| h.host == id) {
            Some(h) => h.files = files,
            None => desired.hosts.push(k0sform::plan::DesiredHost {
                host: id,
                local_binary: None,
                host_download: None,
                files,
            }),
        }
    }
    desired.hosts.sort_by(|a, b| a.host.cmp(&b.host));
    Inputs {
        spec,
        state,
        reality,
        desired,
        options: case.options.clone(),
    }
}

pub(super) fn run(i: &Inputs) -> Result<Plan, Refusal> {
    plan::diff(&i.spec, &i.state, &i.reality, &i.desired, &i.options)
}
