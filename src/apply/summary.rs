//! How steps and plans are named for people: step labels, intents' names, and the change counts
//! of the final "Apply complete: …" line.

use crate::plan::{Action, ObjectKind, Plan, Step, StepKind};
use crate::ui::{ChangeCounts, StepInfo};

/// A short human description of a step (no secrets: steps carry none).
pub fn step_label(step: &Step) -> String {
    match &step.kind {
        StepKind::UploadBinary { sha256, version } => match version {
            Some(v) => format!("upload_binary k0s {v}"),
            None => format!("upload_binary (sha256 {})", short(sha256)),
        },
        StepKind::WriteConfig { .. } => "write_config".to_string(),
        StepKind::Bootstrap => "bootstrap".to_string(),
        StepKind::JoinController { via } => format!("join_controller via {via}"),
        StepKind::JoinWorker { via } => format!("join_worker via {via}"),
        StepKind::WaitHealthy { via } => format!("wait_healthy via {via}"),
        StepKind::RemoveMember {
            member_id,
            peer_url,
            via,
        } => format!("remove_member {member_id} ({peer_url}) via {via}"),
        StepKind::Drain { node, via } => format!("drain node \"{node}\" via {via}"),
        StepKind::DeleteObjects { node, objects, via } => {
            let kinds: Vec<&str> = objects.iter().map(|o| object_kind_name(*o)).collect();
            format!("delete {} \"{node}\" via {via}", kinds.join("/"))
        }
        StepKind::ResetHost { .. } => "reset_host".to_string(),
        StepKind::Upgrade { from, to } => match from {
            Some(f) => format!("upgrade {f} -> {to}"),
            None => format!("upgrade -> {to}"),
        },
        StepKind::Reconfigure => "reconfigure".to_string(),
        StepKind::RunHooks {
            action,
            stage,
            lines,
        } => format!(
            "run_hooks {action}.{stage} ({} line{})",
            lines.len(),
            if lines.len() == 1 { "" } else { "s" }
        ),
        StepKind::UploadFiles { files } => format!(
            "upload_files ({} file{})",
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        ),
        StepKind::RecordHost => "record_host".to_string(),
        StepKind::ForgetHost => "forget_host".to_string(),
    }
}

pub fn step_info(step: &Step) -> StepInfo {
    StepInfo {
        id: step.id,
        host: step.host.clone(),
        kind: step.kind.name().to_string(),
        label: step_label(step),
    }
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
            Action::Upgrade | Action::Reconfigure | Action::Rejoin | Action::UpdateFiles => {
                c.changed += 1
            }
            Action::Remove => c.removed += 1,
            Action::Adopt => c.adopted += 1,
        }
    }
    c
}

fn short(hex: &str) -> String {
    hex.chars().take(8).collect::<String>() + "…"
}
