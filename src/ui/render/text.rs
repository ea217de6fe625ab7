//! The plan as people read it: the human text of testdata/reference/DESIGN.md "Plan text" (colour only when the
//! caller says so), in the order it is written: heading, notices, one block per change, hooks
//! and warnings, summary. Names, reasons, details, diffs and warnings can carry text from hosts:
//! they go through `escape`, so no host can write terminal controls above the `yes` prompt.

use crate::escape::escape;
use crate::hash::short;
use crate::hostid::HostId;
use crate::plan::{Action, HostChange, Plan, ReasonCode, StepKind};
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
    heading(plan, &mut out);
    notices(plan, &mut out);
    for c in &plan.changes {
        change(&p, plan, c, &mut out);
    }
    hooks_and_warnings(&p, plan, &mut out);
    summary(plan, &mut out);
    out
}

/// What the plan will do to which cluster, its etcd, identity and state serial, and the k0s
/// version when the spec names none.
fn heading(plan: &Plan, out: &mut String) {
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
}

/// What the run found before any change: changes made outside k0sform, hosts and bastions
/// whose keys are trusted on first contact, objects neither the spec nor the state knows.
fn notices(plan: &Plan, out: &mut String) {
    let outside = plan.outside_changes.iter().map(|c| {
        let changes = escape(&c.changes.join(", ")).into_owned();
        format!("{} {} ({}): {changes}", c.role, escape(&c.name), c.host)
    });
    section(out, "Changed outside k0sform:", outside);
    let first = plan.first_contacts.iter().map(|f| {
        let name = if f.name.is_empty() {
            String::new()
        } else {
            format!("{} ", escape(&f.name))
        };
        format!(
            "{name}({}): first contact: trusting {}",
            f.host,
            escape(&f.fingerprint)
        )
    });
    let title = "First contact (no key recorded in the state, no ssh.hostKey pin):";
    section(out, title, first);
    let bastion_keys = plan.steps.iter().filter_map(|s| match &s.kind {
        StepKind::RecordBastion { fingerprint, .. } => {
            Some(format!("+ bastion ({}): {}", s.host, escape(fingerprint)))
        }
        _ => None,
    });
    let title = "Bastion host keys to record in the state (checked strictly from then on):";
    section(out, title, bastion_keys);
    let drift = plan
        .drift
        .iter()
        .map(|d| format!("{}, seen by {}", escape(&d.what), hosts(&d.seen_by)));
    section(
        out,
        "Not known to k0sctl.yaml or the state (left alone):",
        drift,
    );
}

/// A titled block of the plan text: the title, one line a row (indented by two), a blank line;
/// nothing without rows.
fn section(out: &mut String, title: &str, rows: impl Iterator<Item = String>) {
    let mut rows = rows.peekable();
    if rows.peek().is_none() {
        return;
    }
    out.push_str(title);
    out.push('\n');
    for row in rows {
        let _ = writeln!(out, "  {row}");
    }
    out.push('\n');
}

/// One host's change: why, the sign line, its details and its k0s.yaml diff.
fn change(p: &Painter, plan: &Plan, c: &HostChange, out: &mut String) {
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

/// Hooks that will not run, and the plan's warnings.
fn hooks_and_warnings(p: &Painter, plan: &Plan, out: &mut String) {
    let hooks = plan.hooks_not_run.iter().map(|h| {
        let (host, hooks) = (h.host.to_string(), h.hooks.join(", "));
        format!(
            "{} ({}): {}",
            escape(&h.name),
            escape(&host),
            escape(&hooks)
        )
    });
    let title = "Hooks not run (nothing changes on their host; k0sctl runs apply and connect hooks at every apply):";
    section(out, title, hooks);
    let manifests_via = plan.steps.iter().find_map(|s| match s.kind {
        StepKind::ApplyManifest { .. } | StepKind::ForgetManifest { .. } => Some(&s.host),
        _ => None,
    });
    out.push_str(&super::manifests::render(
        &plan.manifests,
        manifests_via,
        plan.has_changes(),
    ));
    let private = plan.private_addresses.iter().map(|a| {
        let host = a.host.to_string();
        format!(
            "{}: {} ({})",
            escape(&host),
            escape(&a.address),
            escape(&a.found_on)
        )
    });
    let title = "Private addresses (no privateAddress in the spec; found as k0sctl finds them):";
    section(out, title, private);
    for w in &plan.warnings {
        let _ = writeln!(out, "{}: {}", p.paint(YELLOW, "Warning"), escape(w));
    }
    if !plan.warnings.is_empty() {
        out.push('\n');
    }
}

/// The closing lines: no changes, the destroy summary, or the counts and what etcd goes
/// through.
fn summary(plan: &Plan, out: &mut String) {
    if !plan.has_changes() {
        out.push_str(if plan.destroy {
            "No changes. No host and no cluster identity are left to destroy.\n"
        } else {
            "No changes. The cluster matches the spec.\n"
        });
        return;
    }
    if plan.destroy {
        destroy_summary(plan, out);
        return;
    }
    let steps_txt = |is: &dyn Fn(&StepKind) -> bool, one: &str, many: &str| match plan
        .steps
        .iter()
        .filter(|s| is(&s.kind))
        .count()
    {
        0 => String::new(),
        1 => format!(" 1 {one}."),
        n => format!(" {n} {many}."),
    };
    let bastions_txt = steps_txt(
        &|k| matches!(k, StepKind::RecordBastion { .. }),
        "bastion host key to record",
        "bastion host keys to record",
    );
    if plan.refresh_only {
        let _ = writeln!(
            out,
            "Plan: {} to record in the state; no host is changed.{bastions_txt}",
            plan.changes.len()
        );
        return;
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
    let manifests_txt = steps_txt(
        &|k| matches!(k, StepKind::ApplyManifest { .. }),
        "manifest to apply",
        "manifests to apply",
    );
    let _ = writeln!(
        out,
        "Plan: {add} to add, {adopt_txt}{change} to change, {replace} to replace, {remove} to remove{move_txt}.{bastions_txt}{manifests_txt}"
    );
    etcd_summary(plan, out);
}

/// What etcd goes through during the run: the members before and after, and the fewest
/// healthy ones at any time.
fn etcd_summary(plan: &Plan, out: &mut String) {
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
