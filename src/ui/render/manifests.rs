//! The manifests part of a plan's text (`crate::manifests`).

use crate::escape::escape;
use crate::hostid::HostId;
use crate::manifests::{ManifestAction, ManifestChange};

/// The manifests part of a plan's text: what is applied through which controller, what is left.
pub fn render(changes: &[ManifestChange], via: Option<&HostId>, has_changes: bool) -> String {
    let acting = changes
        .iter()
        .any(|c| c.action != ManifestAction::Unchanged);
    if changes.is_empty() {
        return String::new();
    }
    if !acting || !has_changes {
        let n = changes.len();
        return format!(
            "Manifests: {n} unchanged since k0sform applied {} (content hash in the state; not applied again).\n\n",
            if n == 1 { "it" } else { "them" }
        );
    }
    let through = via.map(|v| format!(" through {v}")).unwrap_or_default();
    let mut out = format!(
        "Manifests (`k0s kubectl apply -f -`{through} after every other step, as k0sctl):\n"
    );
    for c in changes {
        let id = escape(&c.manifest.to_string()).into_owned();
        let line = match c.action {
            ManifestAction::Create => format!("  + {id}: created (not applied by k0sform before)"),
            ManifestAction::Change => format!("  ~ {id}: changed"),
            ManifestAction::Unchanged => format!("    {id}: unchanged"),
            ManifestAction::Left => format!(
                "  - {id}: no longer in the spec: left in the cluster, not deleted (as k0sctl); the state forgets it"
            ),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out.push('\n');
    out
}
