//! Plan output: the human text (`text`), the versioned JSON, and Graphviz DOT of the step DAG.
//! Rendering never decides anything.

mod manifests;
mod text;

pub use text::text;

use super::EventSink as _;
use crate::plan::{Plan, StepKind};
use std::fmt::Write as _;
use std::io::IsTerminal;

/// The plan before `apply` runs it: as text on stdout, or with `-json` as a `planned` event line
/// on stdout, and then as text on stderr when that is a terminal and a `yes` will be asked for
/// (`asks`), so the person answering sees what they approve.
pub fn before_apply(plan: &Plan, json: bool, asks: bool, color: bool) {
    if !json {
        print!("{}", text(plan, color));
        return;
    }
    super::JsonSink::new(std::io::stdout()).event(&super::ApplyEvent::Planned {
        plan: Box::new(plan.clone()),
    });
    if asks && std::io::stderr().is_terminal() {
        let color = color && super::stderr_is_tty();
        eprint!("{}", text(plan, color));
    }
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
