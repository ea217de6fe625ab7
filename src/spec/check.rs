//! Structural check of a parsed document against the JSON Schema generated from the raw model
//! (`raw::schema()`): unknown keys (with "did you mean"), wrong types, bad enum values and
//! missing required fields, all collected with their positions. It also yields the document as
//! JSON with k0sctl's (yaml.v2) scalar leniency applied: any scalar is accepted where a string
//! is expected, and `yes`/`no`/`on`/`off` where a boolean is. The JSON leaves out what failed
//! (so later checks can still run on the rest); `problems` says whether anything did.

use crate::spec::diag::did_you_mean;
use crate::spec::node::{Node, NodeKind};
use serde_json::{Map, Value};

/// One structural problem: where, which field, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: u32,
    pub column: u32,
    pub field: String,
    pub message: String,
}

pub struct Checker<'s> {
    root: &'s Value,
    pub problems: Vec<Problem>,
}

impl<'s> Checker<'s> {
    pub fn new(root: &'s Value) -> Self {
        Checker {
            root,
            problems: Vec::new(),
        }
    }

    fn problem(&mut self, line: u32, column: u32, field: &str, message: String) {
        self.problems.push(Problem {
            line,
            column,
            field: field.to_string(),
            message,
        });
    }

    fn resolve(&self, mut schema: &'s Value) -> &'s Value {
        // Follow `$ref: "#/$defs/X"` chains.
        for _ in 0..16 {
            let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
                break;
            };
            let Some(target) = r
                .strip_prefix("#/")
                .and_then(|p| self.root.pointer(&format!("/{p}")))
            else {
                break;
            };
            schema = target;
        }
        schema
    }

    /// The JSON types a schema accepts at its top level (after `$ref`), for branch selection.
    fn types_of(&self, schema: &'s Value) -> Vec<&'s str> {
        let schema = self.resolve(schema);
        if let Some(t) = schema.get("type") {
            return match t {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => vec![],
            };
        }
        if schema.get("properties").is_some() {
            return vec!["object"];
        }
        if let Some(branches) = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)
        {
            return branches.iter().flat_map(|b| self.types_of(b)).collect();
        }
        if schema.get("enum").is_some() || schema.get("const").is_some() {
            return vec!["string"];
        }
        vec![]
    }

    /// Check `node` against `schema`; return its JSON form when it conforms.
    pub fn check(&mut self, schema: &'s Value, node: &Node, path: &str) -> Option<Value> {
        let schema = self.resolve(schema);
        if schema == &Value::Bool(true) || schema.as_object().is_some_and(|o| o.is_empty()) {
            return Some(node.to_json());
        }
        if let Some(branches) = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)
        {
            return self.check_branches(branches, node, path);
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            return self.check_enum(allowed, node, path);
        }
        if let Some(c) = schema.get("const") {
            return self.check_enum(std::slice::from_ref(c), node, path);
        }
        let types = self.types_of(schema);
        let kind = &node.kind;
        if matches!(kind, NodeKind::Null) && (types.contains(&"null") || types.is_empty()) {
            return Some(Value::Null);
        }
        if types.contains(&"object")
            && let NodeKind::Map(entries) = kind
        {
            return self.check_object(schema, entries, node, path);
        }
        if types.contains(&"array")
            && let NodeKind::Seq(items) = kind
        {
            let item_schema = schema.get("items").unwrap_or(&Value::Bool(true));
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match self.check(item_schema, item, &format!("{path}[{i}]")) {
                    Some(v) => out.push(v),
                    // Hosts keep their index (diagnostics name hosts by it): a hole.
                    None if path == HOSTS_PATH => out.push(Value::Null),
                    // Elsewhere the item is left out so the rest can still be checked.
                    None => {}
                }
            }
            return Some(Value::Array(out));
        }
        if types.contains(&"integer") {
            let n = match kind {
                NodeKind::Int(i) => Some(i128::from(*i)),
                NodeKind::UInt(u) => Some(i128::from(*u)),
                _ => None,
            };
            if let Some(n) = n {
                let min = schema.get("minimum").and_then(Value::as_i64);
                let max = schema.get("maximum").and_then(Value::as_i64);
                if min.is_some_and(|m| n < i128::from(m)) || max.is_some_and(|m| n > i128::from(m))
                {
                    let range = match (min, max) {
                        (Some(a), Some(b)) => format!("{a} to {b}"),
                        (Some(a), None) => format!("at least {a}"),
                        (None, Some(b)) => format!("at most {b}"),
                        (None, None) => String::new(),
                    };
                    self.problem(
                        node.line,
                        node.column,
                        path,
                        format!("{n} is out of range ({range})"),
                    );
                    return None;
                }
                return Some(node.to_json());
            }
        }
        if types.contains(&"number")
            && matches!(
                kind,
                NodeKind::Int(_) | NodeKind::UInt(_) | NodeKind::Float(_)
            )
        {
            return Some(node.to_json());
        }
        if types.contains(&"boolean") {
            match kind {
                NodeKind::Bool(b) => return Some(Value::Bool(*b)),
                // yaml.v2 (k0sctl) reads YAML 1.1 booleans.
                NodeKind::Str(s) => match s.as_str() {
                    "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
                        return Some(Value::Bool(true));
                    }
                    "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => {
                        return Some(Value::Bool(false));
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        if types.contains(&"string") {
            // yaml.v2 puts any scalar's text into a string field.
            let text = match kind {
                NodeKind::Str(s) => Some(s.clone()),
                NodeKind::Bool(b) => Some(b.to_string()),
                NodeKind::Int(i) => Some(i.to_string()),
                NodeKind::UInt(u) => Some(u.to_string()),
                NodeKind::Float(f) => Some(f.to_string()),
                _ => None,
            };
            if let Some(t) = text {
                return Some(Value::String(t));
            }
        }
        let expected = describe_types(&types);
        self.problem(
            node.line,
            node.column,
            path,
            format!("expected {expected}, found {}", node.describe()),
        );
        None
    }

    fn check_enum(&mut self, allowed: &'s [Value], node: &Node, path: &str) -> Option<Value> {
        let names: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
        if let NodeKind::Str(s) = &node.kind
            && names.contains(&s.as_str())
        {
            return Some(Value::String(s.clone()));
        }
        let found = match &node.kind {
            NodeKind::Str(s) => format!("`{s}`"),
            _ => node.describe(),
        };
        let hint = match &node.kind {
            NodeKind::Str(s) => did_you_mean(s, names.iter().copied())
                .map(|m| format!(" (did you mean `{m}`?)"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        self.problem(
            node.line,
            node.column,
            path,
            format!(
                "{found} is not one of: {}{hint}",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        None
    }

    fn check_branches(&mut self, branches: &'s [Value], node: &Node, path: &str) -> Option<Value> {
        let kind = node_type(node);
        // Prefer the branch whose type matches exactly; fall back to lenient ones (a number
        // where a string is accepted).
        let exact = branches
            .iter()
            .find(|b| self.types_of(b).iter().any(|t| kind.contains(t)));
        if let Some(b) = exact {
            return self.check(b, node, path);
        }
        let lenient = branches.iter().find(|b| {
            let t = self.types_of(b);
            (t.contains(&"string") && is_scalar(node))
                || (t.contains(&"boolean") && matches!(node.kind, NodeKind::Str(_)))
        });
        if let Some(b) = lenient {
            let before = self.problems.len();
            if let Some(v) = self.check(b, node, path) {
                return Some(v);
            }
            self.problems.truncate(before);
        }
        let types: Vec<&str> = branches.iter().flat_map(|b| self.types_of(b)).collect();
        self.problem(
            node.line,
            node.column,
            path,
            format!(
                "expected {}, found {}",
                describe_types(&types),
                node.describe()
            ),
        );
        None
    }

    fn check_object(
        &mut self,
        schema: &'s Value,
        entries: &[(crate::spec::node::Key, Node)],
        node: &Node,
        path: &str,
    ) -> Option<Value> {
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let mut out = Map::new();
        let mut ok = true;
        for (key, value) in entries {
            let child = if path.is_empty() {
                key.name.clone()
            } else {
                format!("{path}.{}", key.name)
            };
            let prop = props.and_then(|p| p.get(&key.name));
            let sub = match (prop, additional) {
                (Some(s), _) => s,
                (None, Some(Value::Bool(false))) => {
                    let known: Vec<&str> = props
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    let msg = match did_you_mean(&key.name, known.iter().copied()) {
                        Some(m) => format!("unknown field `{}`, did you mean `{m}`?", key.name),
                        None => format!(
                            "unknown field `{}` (known fields: {})",
                            key.name,
                            known.join(", ")
                        ),
                    };
                    self.problem(key.line, key.column, &child, msg);
                    continue;
                }
                (None, Some(s)) => s,
                (None, None) => &Value::Bool(true),
            };
            match self.check(sub, value, &child) {
                Some(v) => {
                    out.insert(key.name.clone(), v);
                }
                // A broken required field breaks the object; an optional one is left out so
                // the checks after this one still see the rest.
                None if is_required(schema, &key.name) => ok = false,
                None => {}
            }
        }
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                if !entries.iter().any(|(k, _)| k.name == r) {
                    let child = if path.is_empty() {
                        r.to_string()
                    } else {
                        format!("{path}.{r}")
                    };
                    self.problem(
                        node.line,
                        node.column,
                        &child,
                        format!("missing required field `{r}`"),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(Value::Object(out))
    }
}

/// The one list whose failed items stay as `null` holes (see `check`).
pub const HOSTS_PATH: &str = "spec.hosts";

fn is_required(schema: &Value, key: &str) -> bool {
    schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|v| v == key))
}

fn is_scalar(node: &Node) -> bool {
    !matches!(
        node.kind,
        NodeKind::Seq(_) | NodeKind::Map(_) | NodeKind::Null
    )
}

fn node_type(node: &Node) -> &'static [&'static str] {
    match node.kind {
        NodeKind::Null => &["null"],
        NodeKind::Bool(_) => &["boolean"],
        NodeKind::Int(_) | NodeKind::UInt(_) => &["integer", "number"],
        NodeKind::Float(_) => &["number"],
        NodeKind::Str(_) => &["string"],
        NodeKind::Seq(_) => &["array"],
        NodeKind::Map(_) => &["object"],
    }
}

fn describe_types(types: &[&str]) -> String {
    let mut words: Vec<&str> = types
        .iter()
        .filter(|t| **t != "null")
        .map(|t| match *t {
            "object" => "a mapping",
            "array" => "a list",
            "string" => "a string",
            "integer" => "an integer",
            "number" => "a number",
            "boolean" => "a boolean (true/false)",
            other => other,
        })
        .collect();
    words.dedup();
    match words.len() {
        0 => "nothing".into(),
        1 => words[0].into(),
        _ => {
            let last = words.pop().unwrap_or_default();
            format!("{} or {last}", words.join(", "))
        }
    }
}
