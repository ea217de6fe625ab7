//! A YAML document as a tree where every node and every mapping key keeps its line and column,
//! so that checks after parsing (unknown keys, types, cross-field rules) can point at the spot.
//! Built with serde-saphyr's `Spanned`.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub line: u32,
    pub column: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub line: u32,
    pub column: u32,
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            NodeKind::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn key(&self, key: &str) -> Option<&Key> {
        match &self.kind {
            NodeKind::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(k, _)| k),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Str(s) => Some(s),
            _ => None,
        }
    }

    /// "a string", "a mapping"… for type errors.
    pub fn describe(&self) -> String {
        match &self.kind {
            NodeKind::Null => "nothing (null)".into(),
            NodeKind::Bool(b) => format!("a boolean ({b})"),
            NodeKind::Int(i) => format!("an integer ({i})"),
            NodeKind::UInt(u) => format!("an integer ({u})"),
            NodeKind::Float(f) => format!("a number ({f})"),
            NodeKind::Str(s) => format!("a string ({s:?})"),
            NodeKind::Seq(_) => "a list".into(),
            NodeKind::Map(_) => "a mapping".into(),
        }
    }

    /// The node at a dotted path like `spec.hosts[1].ssh.port`, or the deepest existing
    /// ancestor: the best place to point at for a field that is wrong or missing.
    pub fn locate(&self, path: &str) -> (u32, u32) {
        let node = self.walk(path).unwrap_or_else(|ancestor| ancestor);
        (node.line, node.column)
    }

    /// The node at a dotted path (`Ok`), else the deepest existing ancestor (`Err`).
    fn walk(&self, path: &str) -> Result<&Node, &Node> {
        let mut node = self;
        for seg in path_segments(path) {
            let next = match seg {
                Seg::Key(k) => node.get(k),
                Seg::Index(i) => match &node.kind {
                    NodeKind::Seq(items) => items.get(i),
                    _ => None,
                },
            };
            node = next.ok_or(node)?;
        }
        Ok(node)
    }

    /// Like `locate`, but for a key that exists, point at the key rather than its value.
    pub fn locate_key(&self, path: &str) -> (u32, u32) {
        if let Some((parent, last)) = path.rsplit_once('.')
            && !last.contains('[')
        {
            let Ok(node) = self.walk(parent) else {
                return self.locate(path);
            };
            if let Some(k) = node.key(last) {
                return (k.line, k.column);
            }
        }
        self.locate(path)
    }

    /// Rewrite every position with `f` (used to map expanded text back to the file).
    pub fn remap(&mut self, f: &dyn Fn(u32, u32) -> (u32, u32)) {
        (self.line, self.column) = f(self.line, self.column);
        match &mut self.kind {
            NodeKind::Seq(items) => items.iter_mut().for_each(|n| n.remap(f)),
            NodeKind::Map(entries) => {
                for (k, v) in entries {
                    (k.line, k.column) = f(k.line, k.column);
                    v.remap(f);
                }
            }
            _ => {}
        }
    }

    /// Plain JSON, for free-form parts (k0s config, manifests). Keys become strings.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Int(i) => Value::from(*i),
            NodeKind::UInt(u) => Value::from(*u),
            NodeKind::Float(f) => serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or_else(|| Value::String(f.to_string())),
            NodeKind::Str(s) => Value::String(s.clone()),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Split `spec.hosts[1].ssh` into `spec`, `hosts`, `[1]`, `ssh`.
pub fn path_segments(path: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push(Seg::Key(name));
        }
        for idx in rest.split('[') {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                out.push(Seg::Index(i));
            }
        }
    }
    out
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Spanned::<NodeKind>::deserialize(d)?;
        Ok(Node {
            kind: s.value,
            line: s.referenced.line() as u32,
            column: s.referenced.column() as u32,
        })
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Spanned::<KeyText>::deserialize(d)?;
        Ok(Key {
            name: s.value.0,
            line: s.referenced.line() as u32,
            column: s.referenced.column() as u32,
        })
    }
}

/// A mapping key of any scalar type, as text.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scalar mapping key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".into()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for NodeKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NodeKind;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<NodeKind, E> {
                Ok(NodeKind::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<NodeKind, E> {
                Ok(NodeKind::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<NodeKind, E> {
                Ok(NodeKind::UInt(v))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<NodeKind, E> {
                Ok(NodeKind::Str(v.to_string()))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<NodeKind, E> {
                Ok(NodeKind::Str(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<NodeKind, E> {
                Ok(NodeKind::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NodeKind, E> {
                Ok(NodeKind::Str(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<NodeKind, E> {
                Ok(NodeKind::Str(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<NodeKind, E> {
                Ok(NodeKind::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<NodeKind, E> {
                Ok(NodeKind::Null)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<NodeKind, D2::Error> {
                NodeKind::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeKind, A::Error> {
                let mut items = Vec::new();
                while let Some(n) = seq.next_element::<Node>()? {
                    items.push(n);
                }
                Ok(NodeKind::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeKind, A::Error> {
                let mut entries = Vec::new();
                while let Some(k) = map.next_key::<Key>()? {
                    let v = map.next_value::<Node>()?;
                    entries.push((k, v));
                }
                Ok(NodeKind::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_have_positions() {
        let docs: Vec<Node> =
            serde_saphyr::from_multiple("a: 1\nb:\n  - x: \"s\"\n    yk: [1, 2]\n---\nc: ~\n")
                .expect("parses");
        assert_eq!(docs.len(), 2);
        let d = &docs[0];
        let b = d.get("b").expect("b");
        let NodeKind::Seq(items) = &b.kind else {
            panic!("seq")
        };
        assert_eq!((items[0].line, items[0].column), (3, 5));
        let x = items[0].get("x").expect("x");
        assert_eq!(x.kind, NodeKind::Str("s".into()));
        assert_eq!((x.line, x.column), (3, 8));
        assert_eq!(d.locate_key("b[0].yk"), (4, 5));
        assert_eq!(d.locate("b[0].yk"), (4, 9));
        assert_eq!(d.locate("b[0].nope"), (3, 5));
        assert_eq!(docs[1].get("c").map(|n| &n.kind), Some(&NodeKind::Null));
    }
}
