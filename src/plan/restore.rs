//! `-restore-from`: when a plan may bootstrap the cluster from a backup archive. Only onto new
//! hosts: no cluster in the state (an empty state, or one of a new lineage) and no host running
//! k0s; and only where the restored etcd member can work (k0s restores it at the archive's peer
//! address). Pure: the archive was read before planning (`ops::restore_archive`).

use super::model::{ClusterAction, Refusal, RefusalKind, RestoreArchive};
use crate::reality::{Probe, Reality};
use crate::spec::Spec;
use crate::state::State;

fn refusal(message: String, details: Vec<String>) -> Refusal {
    Refusal {
        kind: RefusalKind::Restore,
        message,
        details,
    }
}

/// Before the cluster is identified: the state and every reached host must be new.
pub(super) fn check_new_hosts(state: &State, reality: &Reality) -> Result<(), Refusal> {
    if let Some(c) = &state.cluster {
        return Err(refusal(
            format!(
                "-restore-from restores onto new hosts only, and the state records cluster \"{}\" \
                 (identity {}); use an empty state or -state with a new file",
                c.name,
                crate::hash::short(&c.uid)
            ),
            vec![],
        ));
    }
    if !state.hosts.is_empty() {
        return Err(refusal(
            format!(
                "-restore-from restores onto new hosts only, and the state records {} host(s); \
                 use an empty state or -state with a new file",
                state.hosts.len()
            ),
            state.hosts.iter().map(|h| h.id().to_string()).collect(),
        ));
    }
    let running: Vec<String> = reality
        .hosts
        .iter()
        .filter_map(|h| match &h.probe {
            Probe::Reached(f) => f
                .status
                .as_ref()
                .map(|s| format!("{}: k0s {} runs as {}", h.id, s.version, s.role)),
            _ => None,
        })
        .collect();
    if !running.is_empty() {
        return Err(refusal(
            "-restore-from restores onto new hosts only, and a host already runs a cluster; \
             never restore over a running cluster"
                .into(),
            running,
        ));
    }
    Ok(())
}

/// After: the plan bootstraps, and on a controller whose etcd peer address is the archive's.
pub(super) fn check_bootstrap(
    spec: &Spec,
    action: &ClusterAction,
    archive: &RestoreArchive,
) -> Result<(), Refusal> {
    let ClusterAction::Bootstrap { host } = action else {
        return Err(refusal(
            "-restore-from restores onto new hosts only, and a cluster was found running".into(),
            vec![],
        ));
    };
    let Some(h) = spec.host(host) else {
        return Ok(());
    };
    match &archive.peer_address {
        Some(pa) if pa != h.peer_address() => Err(refusal(
            format!(
                "the backup's etcd member is at {pa}, and the first controller {host} has peer \
                 address {}: `k0s restore` would register the restored member at {pa}, where no \
                 controller will answer",
                h.peer_address()
            ),
            vec![format!(
                "restore onto a first controller whose privateAddress (or address) is {pa}"
            )],
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostid::HostId;
    use crate::plan::{Desired, PlanOptions, StepKind};
    use crate::reality::{HostFacts, HostReality, K0sStatus};
    use crate::spec::{HostSpec, K0sSpec, Options, Role, SshTarget};
    use crate::state::ClusterState;

    fn spec() -> Spec {
        let mut c1 = HostSpec::new(Role::Controller, SshTarget::new("10.0.0.1", 22), 1);
        c1.hostname = Some("c1".into());
        let mut w1 = HostSpec::new(Role::Worker, SshTarget::new("10.0.0.2", 22), 2);
        w1.hostname = Some("w1".into());
        Spec {
            name: "prod".into(),
            user: "admin".into(),
            hosts: vec![c1, w1],
            k0s: K0sSpec {
                version: Some("v1.33.4+k0s.0".parse().unwrap()),
                version_channel: None,
                dynamic_config: false,
                config: None,
                controllers_run: false,
            },
            options: Options::default(),
            manifests: Vec::new(),
            env_values: Vec::new(),
        }
    }

    fn fresh(addr: &str) -> HostReality {
        HostReality {
            id: HostId::new(addr, 22),
            probe: Probe::Reached(Box::new(HostFacts {
                machine_id: format!("m-{addr}"),
                hostname: "h".into(),
                host_key: "SHA256:k".into(),
                k0s_version: Some("v1.33.4+k0s.0".parse().unwrap()),
                ..HostFacts::default()
            })),
        }
    }

    fn opts(peer: Option<&str>) -> PlanOptions {
        PlanOptions {
            restore: Some(RestoreArchive {
                path: "/backups/k0s_backup_prod.tar.gz".into(),
                sha256: "ab".repeat(32),
                peer_address: peer.map(str::to_string),
            }),
            ..PlanOptions::default()
        }
    }

    fn reality() -> Reality {
        Reality {
            hosts: vec![fresh("10.0.0.1"), fresh("10.0.0.2")],
        }
    }

    #[test]
    fn the_first_controller_is_restored_right_before_it_bootstraps() {
        let plan = crate::plan::diff(
            &spec(),
            &State::default(),
            &reality(),
            &Desired::default(),
            &opts(Some("10.0.0.1")),
        )
        .expect("plans");
        let kinds: Vec<&StepKind> = plan
            .steps
            .iter()
            .filter(|s| s.host.address == "10.0.0.1")
            .map(|s| &s.kind)
            .collect();
        let restore = kinds
            .iter()
            .position(|k| matches!(k, StepKind::RestoreBackup { .. }))
            .expect("a restore step");
        let boot = kinds
            .iter()
            .position(|k| matches!(k, StepKind::Bootstrap))
            .expect("a bootstrap step");
        assert_eq!(restore + 1, boot, "{kinds:?}");
        let restores = plan
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::RestoreBackup { .. }))
            .count();
        assert_eq!(restores, 1);
        // The bootstrap waits for the restore (a DAG edge, not only list order).
        let restore_id = plan
            .steps
            .iter()
            .find(|s| matches!(s.kind, StepKind::RestoreBackup { .. }))
            .map(|s| s.id);
        let boot_step = plan
            .steps
            .iter()
            .find(|s| matches!(s.kind, StepKind::Bootstrap))
            .expect("bootstrap");
        assert!(restore_id.is_some_and(|r| boot_step.after.contains(&r)));
        let text = crate::ui::render::text(&plan, false);
        assert!(
            text.contains("restored from k0s_backup_prod.tar.gz"),
            "{text}"
        );
    }

    #[test]
    fn refused_where_a_cluster_exists_or_the_member_could_not_work() {
        let state = State {
            cluster: Some(ClusterState {
                name: "prod".into(),
                uid: "3d12aaaa".into(),
                etcd_cluster_id: None,
                k0s_version: None,
                config_sha256: None,
            }),
            ..State::default()
        };
        let r = crate::plan::diff(
            &spec(),
            &state,
            &reality(),
            &Desired::default(),
            &opts(None),
        )
        .expect_err("state names a cluster");
        assert_eq!(r.kind, RefusalKind::Restore);
        assert_eq!(r.exit_code(), 3);

        let mut running = reality();
        if let Probe::Reached(f) = &mut running.hosts[1].probe {
            f.status = Some(K0sStatus::running(
                "v1.33.4+k0s.0".parse().unwrap(),
                7,
                "worker",
            ));
        }
        let r = crate::plan::diff(
            &spec(),
            &State::default(),
            &running,
            &Desired::default(),
            &opts(None),
        )
        .expect_err("a host runs k0s");
        assert!(r.message.contains("already runs a cluster"), "{r:?}");
        assert_eq!(r.details, ["10.0.0.2: k0s v1.33.4+k0s.0 runs as worker"]);

        let r = crate::plan::diff(
            &spec(),
            &State::default(),
            &reality(),
            &Desired::default(),
            &opts(Some("10.9.9.9")),
        )
        .expect_err("another peer address");
        assert!(r.message.contains("10.9.9.9"), "{r:?}");
        // Without -restore-from the same hosts simply bootstrap.
        let plan = crate::plan::diff(
            &spec(),
            &State::default(),
            &reality(),
            &Desired::default(),
            &PlanOptions::default(),
        )
        .expect("plans");
        assert!(
            !plan
                .steps
                .iter()
                .any(|s| matches!(s.kind, StepKind::RestoreBackup { .. }))
        );
    }
}
