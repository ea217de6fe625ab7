//! The controller `kubeconfig` and `backup` work through.

use super::Failure;
use crate::exit::Exit;
use crate::plan::PlanOptions;
use crate::probe::{self, ProbeOptions};
use crate::reality::Reality;
use crate::spec::Spec;
use crate::state::State;
use crate::transport::Transport;

/// The controller `kubeconfig` and `backup` work through, as k0sctl picks its "leader": the
/// first controller of the spec (file order, `reset: true` ones left out) that runs k0s and
/// whose API answers. With a state, only a controller of the recorded cluster counts: another
/// identity is refused (exit 3). Each candidate is probed once (its host key checked as `plan`
/// checks it) until one qualifies; with `refuse_first_contact` (`-trust-new-host-keys=false`)
/// a candidate reached by trusting its key or a bastion's on first contact is refused (exit 3)
/// right after the key exchange, before anything runs on it.
pub async fn healthy_controller<'a, T: Transport + Clone + 'static>(
    spec: &'a Spec,
    state: &State,
    transport: &T,
    purpose: &str,
    refuse_first_contact: bool,
) -> Result<(&'a crate::spec::HostSpec, crate::reality::HostFacts), Failure> {
    use crate::reality::{HostReality, Probe};
    let probes = probe::plan_probes(spec, state, &ProbeOptions::default());
    let mut why = Vec::new();
    let mut other_cluster = false;
    for h in spec.controllers().filter(|h| !h.reset) {
        let id = h.id();
        let Some(p) = probe::find_probe(&probes, &id) else {
            continue;
        };
        let probed = match probe::connect_host(transport, p).await {
            Ok(c) => {
                // Before the probe runs on it (`refuse_first_contacts` below checks again).
                if refuse_first_contact {
                    let opts = PlanOptions::default();
                    crate::plan::refuse_first_contact_keys(spec, state, &opts, &[(&id, &c)])?;
                }
                probe::run_probe(transport, p, c).await
            }
            Err(probe) => probe,
        };
        let mut seen = Reality {
            hosts: vec![HostReality {
                id: id.clone(),
                probe: probed,
            }],
        };
        if refuse_first_contact {
            crate::plan::refuse_first_contacts(spec, state, &seen)?;
        }
        let Some(HostReality { probe: probed, .. }) = seen.hosts.pop() else {
            continue;
        };
        match probed {
            Probe::Reached(facts) => {
                let uid = facts.view.as_ref().and_then(|v| v.cluster_uid.clone());
                match (&facts.status, uid) {
                    (None, _) => why.push(format!("{id}: k0s is not running")),
                    (Some(s), _) if s.role != "controller" => {
                        why.push(format!("{id}: k0s runs as {}, not as a controller", s.role))
                    }
                    (Some(_), None) => {
                        why.push(format!("{id}: the Kubernetes API does not answer"))
                    }
                    (Some(_), Some(uid)) => match &state.cluster {
                        Some(c) if c.uid != uid => {
                            other_cluster = true;
                            why.push(format!(
                                "{id}: runs cluster {uid}, the state records {}",
                                c.uid
                            ));
                        }
                        _ => return Ok((h, *facts)),
                    },
                }
            }
            Probe::Unreachable { error } => why.push(format!("{id}: unreachable: {error}")),
            Probe::HostKeyChanged {
                expected,
                offered,
                bastion,
            } => why.push(format!(
                "{id}: {}",
                crate::reality::key_change_text(&expected, &offered, bastion.as_ref())
            )),
            Probe::K0sNotAnswering { error } => {
                why.push(format!("{id}: k0s not answering: {error}"))
            }
        }
    }
    if why.is_empty() {
        why.push("the spec has no controller".into());
    }
    let code = if other_cluster {
        Exit::Refused
    } else {
        Exit::Error
    };
    Err(Failure::new(
        code,
        format!(
            "no healthy controller to {purpose}:\n  {}",
            why.join("\n  ")
        ),
    ))
}
