//! Plan output: the human text of DESIGN.md "Plan text" (colour only when the caller says so),
//! the versioned JSON, and Graphviz DOT of the step DAG. Rendering never decides anything.
//! Names, reasons, details, diffs and warnings can carry text from hosts: the human text shows
//! them through `ui::escape`, so no host can write terminal controls above the `yes` prompt.

use super::model::*;
use crate::hash::short;
use crate::hostid::HostId;
use crate::ui::escape;
use std::fmt::Write as _;

use crate::ui::ansi::{BOLD, GREEN, RED, RESET, YELLOW};

struct Painter {
    color: bool,
}

impl Painter {
    fn sign(&self, sign: &str) -> String {
        if !self.color {
            return sign.to_string();
        }
        let c = match sign {
            "+" => GREEN,
            "-" => RED,
            "<=" => GREEN,
            "-/+" => YELLOW,
            _ => YELLOW,
        };
        format!("{c}{sign}{RESET}")
    }
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("{code}{text}{RESET}")
        } else {
            text.to_string()
        }
    }
}

fn verb(a: Action) -> &'static str {
    match a {
        Action::Add => "added",
        Action::Adopt => "adopted",
        Action::Upgrade => "upgraded",
        Action::Reconfigure => "reconfigured",
        Action::Rejoin => "rejoined",
        Action::Replace => "replaced",
        Action::Remove => "removed",
        Action::UpdateFiles => "given its files",
        Action::Move => "moved",
    }
}

/// The plan as people read it. `color` adds ANSI colours (the caller decides: TTY, NO_COLOR).
pub fn text(plan: &Plan, color: bool) -> String {
    let p = Painter { color };
    let mut out = String::new();
    let identity = match &plan.cluster_uid {
        Some(uid) => format!("identity {}", short(uid)),
        None => "new identity".into(),
    };
    let serial = match plan.state_serial {
        Some(s) => format!("state serial {s}"),
        None => "no state yet".into(),
    };
    let members = match plan.etcd.members_before {
        _ if plan.etcd.kine => "kine, no etcd".to_string(),
        0 => "etcd: no members yet".to_string(),
        1 => "etcd 1 member".to_string(),
        n => format!("etcd {n} members"),
    };
    let opening = if plan.destroy && plan.has_changes() {
        "k0sform will DESTROY cluster"
    } else if plan.destroy {
        "k0sform found nothing to destroy of cluster"
    } else if plan.refresh_only {
        "k0sform will record the hosts of cluster"
    } else if plan.has_changes() {
        "k0sform will perform the following actions on cluster"
    } else {
        "k0sform checked cluster"
    };
    let _ = writeln!(
        out,
        "{opening} \"{}\"\n({members}, {identity}, {serial}):",
        escape(&plan.cluster_name)
    );
    out.push('\n');
    if let Some(v) = &plan.k0s_version {
        // The spec names no version: say which one and why (a lookup, or what runs).
        let _ = writeln!(
            out,
            "k0s version {} ({})\n",
            escape(&v.version.to_string()),
            escape(&v.source)
        );
    }

    if !plan.outside_changes.is_empty() {
        out.push_str("Changed outside k0sform:\n");
        for c in &plan.outside_changes {
            let _ = writeln!(
                out,
                "  {} {} ({}): {}",
                c.role,
                escape(&c.name),
                c.host,
                escape(&c.changes.join(", "))
            );
        }
        out.push('\n');
    }
    if !plan.first_contacts.is_empty() {
        out.push_str("First contact (no key recorded in the state, no ssh.hostKey pin):\n");
        for f in &plan.first_contacts {
            let name = if f.name.is_empty() {
                String::new()
            } else {
                format!("{} ", escape(&f.name))
            };
            let _ = writeln!(
                out,
                "  {name}({}): first contact: trusting {}",
                f.host,
                escape(&f.fingerprint)
            );
        }
        out.push('\n');
    }
    let bastion_keys: Vec<(&HostId, &String)> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::RecordBastion { fingerprint, .. } => Some((&s.host, fingerprint)),
            _ => None,
        })
        .collect();
    if !bastion_keys.is_empty() {
        out.push_str("Bastion host keys to record in the state (checked strictly from then on):\n");
        for (host, fingerprint) in bastion_keys {
            let _ = writeln!(out, "  + bastion ({host}): {}", escape(fingerprint));
        }
        out.push('\n');
    }
    if !plan.drift.is_empty() {
        out.push_str("Not known to k0sctl.yaml or the state (left alone):\n");
        for d in &plan.drift {
            let _ = writeln!(out, "  {}, seen by {}", escape(&d.what), hosts(&d.seen_by));
        }
        out.push('\n');
    }

    for c in &plan.changes {
        // A move is said the way Terraform says it ("has moved to"); what else happens to the
        // host at its new address follows as usual.
        if let Some(from) = &c.moved_from {
            let why: Vec<&str> = c
                .reasons
                .iter()
                .filter(|r| r.code == ReasonCode::Moved)
                .map(|r| r.message.as_str())
                .collect();
            let _ = writeln!(
                out,
                "  # {} {} ({from}) has moved to {}: {}",
                c.role,
                escape(&c.name),
                c.host,
                escape(&why.join("; "))
            );
        }
        let reasons: Vec<&str> = c
            .reasons
            .iter()
            .filter(|r| c.moved_from.is_none() || r.code != ReasonCode::Moved)
            .map(|r| r.message.as_str())
            .collect();
        let what = if plan.refresh_only {
            "recorded".to_string()
        } else if plan.destroy {
            "destroyed".to_string()
        } else {
            verb(c.action).to_string()
        };
        if !reasons.is_empty() {
            let _ = writeln!(
                out,
                "  # {} {} ({}) will be {what}: {}",
                c.role,
                escape(&c.name),
                c.host,
                escape(&reasons.join("; "))
            );
        }
        let sym = format!("{:>3}", c.action.symbol());
        let _ = writeln!(
            out,
            "{} {}",
            p.sign(&sym),
            p.paint(BOLD, &format!("{} {}", c.role, escape(&c.name)))
        );
        for d in &c.details {
            let _ = writeln!(
                out,
                "      {} {}",
                p.sign(&escape(&d.sign.to_string())),
                escape(&d.text)
            );
        }
        if let Some(diff) = &c.config_diff {
            for line in diff.lines() {
                let line = &*escape(line);
                let painted = if line.starts_with("+++") || line.starts_with("---") {
                    p.paint(BOLD, line)
                } else if line.starts_with('+') {
                    p.paint(GREEN, line)
                } else if line.starts_with('-') {
                    p.paint(RED, line)
                } else {
                    line.to_string()
                };
                let _ = writeln!(out, "        {painted}");
            }
        }
        out.push('\n');
    }

    if !plan.hooks_not_run.is_empty() {
        out.push_str(
            "Hooks not run (nothing changes on their host; k0sctl runs apply and connect hooks at every apply):\n",
        );
        for h in &plan.hooks_not_run {
            let _ = writeln!(
                out,
                "  {} ({}): {}",
                escape(&h.name),
                escape(&h.host.to_string()),
                escape(&h.hooks.join(", "))
            );
        }
        out.push('\n');
    }
    if !plan.private_addresses.is_empty() {
        out.push_str(
            "Private addresses (no privateAddress in the spec; found as k0sctl finds them):\n",
        );
        for a in &plan.private_addresses {
            let _ = writeln!(
                out,
                "  {}: {} ({})",
                escape(&a.host.to_string()),
                escape(&a.address),
                escape(&a.found_on)
            );
        }
        out.push('\n');
    }
    for w in &plan.warnings {
        let _ = writeln!(out, "{}: {}", p.paint(YELLOW, "Warning"), escape(w));
    }
    if !plan.warnings.is_empty() {
        out.push('\n');
    }

    if !plan.has_changes() {
        out.push_str(if plan.destroy {
            "No changes. No host and no cluster identity are left to destroy.\n"
        } else {
            "No changes. The cluster matches the spec.\n"
        });
        return out;
    }
    if plan.destroy {
        destroy_summary(plan, &mut out);
        return out;
    }
    let bastions = plan
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::RecordBastion { .. }))
        .count();
    let bastions_txt = match bastions {
        0 => String::new(),
        1 => " 1 bastion host key to record.".to_string(),
        n => format!(" {n} bastion host keys to record."),
    };
    if plan.refresh_only {
        let _ = writeln!(
            out,
            "Plan: {} to record in the state; no host is changed.{bastions_txt}",
            plan.changes.len()
        );
        return out;
    }
    let count = |f: &dyn Fn(Action) -> bool| plan.changes.iter().filter(|c| f(c.action)).count();
    let add = count(&|a| a == Action::Add);
    let adopt = count(&|a| a == Action::Adopt);
    let change = count(&|a| {
        matches!(
            a,
            Action::Upgrade | Action::Reconfigure | Action::Rejoin | Action::UpdateFiles
        )
    });
    let replace = count(&|a| a == Action::Replace);
    let remove = count(&|a| a == Action::Remove);
    let adopt_txt = if adopt > 0 {
        format!("{adopt} to adopt, ")
    } else {
        String::new()
    };
    let moved = plan
        .changes
        .iter()
        .filter(|c| c.moved_from.is_some())
        .count();
    let move_txt = if moved > 0 {
        format!(", {moved} to move")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "Plan: {add} to add, {adopt_txt}{change} to change, {replace} to replace, {remove} to remove{move_txt}.{bastions_txt}"
    );
    let e = &plan.etcd;
    if e.members_before == 0 && e.members_after > 0 {
        let _ = writeln!(
            out,
            "etcd: new cluster, {} members after; members join one at a time (quorum {}).",
            e.members_after, e.quorum
        );
    } else if e.members_before > 0 && e.min_healthy < e.quorum {
        // Only a controller restart goes below quorum: membership changes that would are refused.
        let _ = writeln!(
            out,
            "etcd: {} before, {} after; down to {} healthy (quorum {}) while a controller restarts: etcd and the Kubernetes API are unavailable until it is back.",
            members_n(e.members_before),
            e.members_after,
            e.min_healthy,
            e.quorum
        );
    } else if e.members_before > 0 {
        let _ = writeln!(
            out,
            "etcd: {} before, {} after; never fewer than {} healthy (quorum {}).",
            members_n(e.members_before),
            e.members_after,
            e.min_healthy,
            e.quorum
        );
    }
    out
}

/// The last lines of a destroy plan: how many hosts, and how etcd shrinks.
fn destroy_summary(plan: &Plan, out: &mut String) {
    let hosts = plan.changes.len();
    let _ = writeln!(
        out,
        "Plan: {hosts} host{} to destroy (workers first, then controllers one at a time); the state keeps its lineage and ends empty.",
        if hosts == 1 { "" } else { "s" }
    );
    let e = &plan.etcd;
    let leaves = plan
        .steps
        .iter()
        .filter(|s| {
            matches!(
                s.kind,
                StepKind::RemoveMember { .. } | StepKind::RemoveUnknownMember { .. }
            )
        })
        .count();
    match e.members_before {
        0 => {}
        n if leaves == 0 && n > 1 => {
            let _ = writeln!(
                out,
                "etcd: {n} members, no quorum to remove any: every controller is reset without leaving etcd."
            );
        }
        1 => {
            let _ = writeln!(out, "etcd: 1 member, reset last with the cluster's data.");
        }
        n => {
            let _ = writeln!(
                out,
                "etcd: {n} members before; members leave one at a time, never fewer than {} healthy (largest quorum {}); the last member is reset with the cluster's data.",
                e.min_healthy, e.quorum
            );
        }
    }
}

fn members_n(n: usize) -> String {
    if n == 1 {
        "1 member".into()
    } else {
        format!("{n} members")
    }
}

fn hosts(ids: &[HostId]) -> String {
    ids.iter()
        .map(|h| h.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The versioned plan JSON (schema/plan.schema.json).
pub fn json(plan: &Plan) -> String {
    // Plain data of strings, numbers and vectors: serializing cannot fail.
    serde_json::to_string_pretty(plan).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The JSON Schema of the plan JSON, as checked in under schema/.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Plan);
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}

/// The step DAG as Graphviz DOT: nodes `host: step`, membership changes highlighted.
pub fn dot(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph plan {{");
    let _ = writeln!(
        out,
        "  label={};",
        quote(&format!("k0sform plan: {}", plan.cluster_name))
    );
    let _ = writeln!(out, "  rankdir=TB;");
    let _ = writeln!(out, "  node [shape=box, fontname=\"monospace\"];");
    for s in &plan.steps {
        let mut label = format!("{}: {}", s.host, s.kind.name());
        if let StepKind::RemoveMember { member_id, .. } = &s.kind {
            label.push_str(&format!(" {member_id}"));
        }
        let style = if s.kind.is_membership_change() {
            ", style=\"filled,bold\", fillcolor=\"#f4cccc\""
        } else if matches!(s.kind, StepKind::WaitHealthy { .. }) {
            ", shape=diamond"
        } else {
            ""
        };
        let _ = writeln!(out, "  s{} [label={}{style}];", s.id, quote(&label));
    }
    for s in &plan.steps {
        for a in &s.after {
            let _ = writeln!(out, "  s{a} -> s{};", s.id);
        }
    }
    out.push_str("}\n");
    out
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
