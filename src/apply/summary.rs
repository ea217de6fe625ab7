//! How steps and plans are named for people: step labels, the progress lines' wording (with
//! host names, not addresses), intents' names, and the change counts of the final
//! "Apply complete: …" line.

use super::event::{ChangeCounts, StepInfo};
use crate::hostid::HostId;
use crate::plan::{Action, ObjectKind, Plan, Step, StepKind};
use std::collections::HashMap;

/// Display names of hosts, by id: what the plan calls the hosts it changes, else `known` (the
/// spec's or the probe's hostname, e.g. of a controller a join goes through). A host in neither
/// is shown by its address.
#[derive(Debug, Clone, Default)]
pub struct HostNames(HashMap<HostId, String>);

impl HostNames {
    pub fn new(plan: &Plan, known: &HashMap<HostId, String>) -> Self {
        let mut names = known.clone();
        for c in &plan.changes {
            names.insert(c.host.clone(), c.name.clone());
        }
        HostNames(names)
    }

    pub fn get(&self, id: &HostId) -> String {
        match self.0.get(id) {
            Some(n) if !n.is_empty() => n.clone(),
            _ => id.to_string(),
        }
    }
}

/// What a running step is doing, how it ends and how it keeps going, for the progress lines:
/// (`Joining the cluster as controller (token from c2)`, `Joined`, `joining`).
pub fn step_words(step: &Step, names: &HostNames) -> (String, &'static str, &'static str) {
    let n = |id: &HostId| names.get(id);
    match &step.kind {
        StepKind::UploadBinary { sha256, version } => (
            match version {
                Some(v) => format!("Uploading k0s {v}"),
                None => format!("Uploading k0s (sha256 {})", short(sha256)),
            },
            "Uploaded",
            "uploading",
        ),
        StepKind::DownloadBinary { version, .. } => (
            format!("Downloading k0s {version} on the host"),
            "Downloaded and verified",
            "downloading",
        ),
        StepKind::WriteConfig { .. } => ("Writing the k0s config".into(), "Written", "writing"),
        StepKind::RestoreBackup { archive, .. } => (
            format!("Restoring the cluster from {}", file_name(archive)),
            "Restored",
            "restoring",
        ),
        StepKind::Bootstrap => (
            "Bootstrapping the cluster (first controller)".into(),
            "Bootstrapped",
            "bootstrapping",
        ),
        StepKind::JoinController { via } => (
            format!("Joining the cluster as controller (token from {})", n(via)),
            "Joined",
            "joining",
        ),
        StepKind::JoinWorker { via } => (
            format!("Joining the cluster as worker (token from {})", n(via)),
            "Joined",
            "joining",
        ),
        StepKind::WaitHealthy { via } => (
            format!(
                "Waiting until etcd and the API are healthy (asking {})",
                n(via)
            ),
            "Healthy",
            "waiting",
        ),
        StepKind::RemoveMember {
            member_id,
            peer_url,
            via,
        } => (
            format!(
                "Removing etcd member {member_id} ({peer_url}) via {}",
                n(via)
            ),
            "Removed",
            "removing",
        ),
        StepKind::RemoveUnknownMember {
            name,
            member_id,
            peer_url,
            via,
        } => (
            format!(
                "Removing etcd member {}, which no host owns, via {}",
                crate::plan::unknown_member_text(name, member_id.as_deref(), peer_url),
                n(via)
            ),
            "Removed",
            "removing",
        ),
        StepKind::Drain {
            node,
            via,
            evict_taint,
        } => (
            match evict_taint {
                Some(t) => format!(
                    "Cordoning node \"{node}\", tainting it {t} and draining it via {}",
                    n(via)
                ),
                None => format!("Draining node \"{node}\" via {}", n(via)),
            },
            "Drained",
            "draining",
        ),
        StepKind::Uncordon { node, via, .. } => (
            format!(
                "Uncordoning node \"{node}\" once it is Ready via {}",
                n(via)
            ),
            "Uncordoned",
            "uncordoning",
        ),
        StepKind::DeleteObjects { via, .. } => (
            format!(
                "Deleting {} via {}",
                named_objects(&step.kind.object_names()),
                n(via)
            ),
            "Deleted",
            "deleting",
        ),
        StepKind::ResetHost { .. } => ("Stopping and resetting k0s".into(), "Reset", "resetting"),
        StepKind::Upgrade { from, to } => (
            match from {
                Some(f) => format!("Upgrading k0s {f} → {to}"),
                None => format!("Upgrading k0s to {to}"),
            },
            "Upgraded",
            "upgrading",
        ),
        StepKind::Reconfigure => (
            "Reinstalling k0s with the new config and restarting it".into(),
            "Reconfigured",
            "reconfiguring",
        ),
        StepKind::WriteTokenPlaceholder => (
            "Writing a decodable placeholder into the token file (k0s #7202)".into(),
            "Token file fixed",
            "writing the token file",
        ),
        StepKind::RunHooks {
            action,
            stage,
            lines,
        } => (
            format!(
                "Running the {action}.{stage} hooks ({} line{})",
                lines.len(),
                plural(lines.len())
            ),
            "Hooks ran",
            "running hooks",
        ),
        StepKind::WriteHostEnvironment { names } => (
            format!(
                "Setting {} in {}",
                names.join(", "),
                crate::k0s::host_env::ETC_ENVIRONMENT
            ),
            "Environment set",
            "updating /etc/environment",
        ),
        StepKind::UploadFiles { files } => (
            format!("Uploading {} file{}", files.len(), plural(files.len())),
            "Uploaded",
            "uploading",
        ),
        StepKind::MoveHost { from } => (
            format!("Moving the host's state record from {from}"),
            "Moved in the state",
            "moving",
        ),
        StepKind::RecordHost => (
            "Recording the host in the state".into(),
            "Recorded",
            "recording",
        ),
        StepKind::RecordBastion { fingerprint, .. } => (
            format!("Recording the bastion's host key {fingerprint} in the state"),
            "Recorded",
            "recording",
        ),
        StepKind::ApplyManifest { manifest, .. } => (
            format!("Applying manifest {manifest} (kubectl apply)"),
            "Applied",
            "applying",
        ),
        StepKind::ForgetManifest { manifest } => (
            format!("Forgetting manifest {manifest} (left in the cluster)"),
            "Forgotten",
            "forgetting",
        ),
        StepKind::ForgetHost => (
            "Removing the host from the state".into(),
            "Removed from the state",
            "removing",
        ),
        StepKind::ForgetCluster => (
            "Removing the cluster's identity from the state".into(),
            "Cluster removed from the state",
            "removing the cluster",
        ),
    }
}

/// The last component of a local path, as progress lines show an archive.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A short human description of a step (no secrets: steps carry none).
pub fn step_label(step: &Step) -> String {
    match &step.kind {
        StepKind::UploadBinary { sha256, version } => match version {
            Some(v) => format!("upload_binary k0s {v}"),
            None => format!("upload_binary (sha256 {})", short(sha256)),
        },
        StepKind::DownloadBinary { version, url, .. } => {
            format!("download_binary k0s {version} from {url}")
        }
        StepKind::WriteConfig { .. } => "write_config".to_string(),
        StepKind::RestoreBackup { archive, sha256 } => {
            format!(
                "restore_backup {} (sha256 {})",
                file_name(archive),
                short(sha256)
            )
        }
        StepKind::Bootstrap => "bootstrap".to_string(),
        StepKind::JoinController { via } => format!("join_controller via {via}"),
        StepKind::JoinWorker { via } => format!("join_worker via {via}"),
        StepKind::WaitHealthy { via } => format!("wait_healthy via {via}"),
        StepKind::RemoveMember {
            member_id,
            peer_url,
            via,
        } => format!("remove_member {member_id} ({peer_url}) via {via}"),
        StepKind::RemoveUnknownMember { peer_url, via, .. } => {
            format!("remove_unknown_member ({peer_url}) via {via}")
        }
        StepKind::Drain { node, via, .. } => format!("drain node \"{node}\" via {via}"),
        StepKind::Uncordon { node, via, .. } => format!("uncordon node \"{node}\" via {via}"),
        StepKind::DeleteObjects { via, .. } => {
            format!(
                "delete {} via {via}",
                named_objects(&step.kind.object_names())
            )
        }
        StepKind::ResetHost { .. } => "reset_host".to_string(),
        StepKind::Upgrade { from, to } => match from {
            Some(f) => format!("upgrade {f} -> {to}"),
            None => format!("upgrade -> {to}"),
        },
        StepKind::Reconfigure => "reconfigure".to_string(),
        StepKind::WriteTokenPlaceholder => "write_token_placeholder".to_string(),
        StepKind::RunHooks {
            action,
            stage,
            lines,
        } => format!(
            "run_hooks {action}.{stage} ({} line{})",
            lines.len(),
            if lines.len() == 1 { "" } else { "s" }
        ),
        StepKind::WriteHostEnvironment { names } => {
            format!("write_host_environment {}", names.join(" "))
        }
        StepKind::UploadFiles { files } => format!(
            "upload_files ({} file{})",
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        ),
        StepKind::MoveHost { from } => format!("move_host from {from}"),
        StepKind::RecordHost => "record_host".to_string(),
        StepKind::RecordBastion { fingerprint, .. } => format!("record_bastion {fingerprint}"),
        StepKind::ApplyManifest { manifest, .. } => format!("apply_manifest {manifest}"),
        StepKind::ForgetManifest { manifest } => format!("forget_manifest {manifest}"),
        StepKind::ForgetHost => "forget_host".to_string(),
        StepKind::ForgetCluster => "forget_cluster".to_string(),
    }
}

pub fn step_info(step: &Step, names: &HostNames) -> StepInfo {
    let (description, done, still) = step_words(step, names);
    StepInfo {
        id: step.id,
        host: step.host.clone(),
        name: names.get(&step.host),
        kind: step.kind.name().to_string(),
        label: step_label(step),
        description,
        done: done.to_string(),
        still: still.to_string(),
    }
}

/// `Node/EtcdMember/ControlNode "c1"` when they share a name (as before), else each named:
/// `Node "ctl-x", EtcdMember "ctl-a", ControlNode "ctl-a"`.
pub fn named_objects(objects: &[(ObjectKind, &str)]) -> String {
    let first = objects.first().map(|(_, n)| *n).unwrap_or_default();
    if objects.iter().all(|(_, n)| *n == first) {
        let kinds: Vec<&str> = objects.iter().map(|(o, _)| object_kind_name(*o)).collect();
        return format!("{} \"{first}\"", kinds.join("/"));
    }
    objects
        .iter()
        .map(|(o, n)| format!("{} \"{n}\"", object_kind_name(*o)))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn object_kind_name(o: ObjectKind) -> &'static str {
    match o {
        ObjectKind::Node => "Node",
        ObjectKind::EtcdMember => "EtcdMember",
        ObjectKind::ControlNode => "ControlNode",
    }
}

/// Counts of the plan's host changes by action (only meaningful when every step succeeded).
pub fn change_counts(plan: &Plan) -> ChangeCounts {
    let mut c = ChangeCounts::default();
    for ch in &plan.changes {
        match ch.action {
            Action::Add => c.added += 1,
            Action::Replace => c.replaced += 1,
            Action::Upgrade
            | Action::Reconfigure
            | Action::Rejoin
            | Action::UpdateFiles
            | Action::Move => c.changed += 1,
            Action::Remove => c.removed += 1,
            Action::Adopt => c.adopted += 1,
        }
    }
    c
}

fn short(hex: &str) -> String {
    hex.chars().take(8).collect::<String>() + "…"
}
