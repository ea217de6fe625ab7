//! A small, infallible YAML emitter for JSON values (k0s.yaml, kubeconfigs, diffs): block style,
//! strings double-quoted only when plain style would change their meaning. Our own so the bytes
//! (and so the sha256 of every k0s.yaml k0sform writes) never depend on a serializer's version:
//! a change here changes what every host's config compares against.

use serde_json::Value;
use std::fmt::Write as _;

/// `v` as block-style YAML (`write_yaml`).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    write_yaml(&mut out, v, 0);
    out
}

/// A small, infallible YAML emitter for JSON values: block style, strings double-quoted only when
/// plain style would change their meaning. Our own so the bytes (and so the sha256) never depend
/// on a serializer's version.
fn write_yaml(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, val) in m {
                pad(out, indent);
                out.push_str(&scalar(k));
                out.push(':');
                write_child(out, val, indent);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for val in a {
                pad(out, indent);
                out.push('-');
                match val {
                    Value::Object(m) if !m.is_empty() => {
                        // First key on the dash line, the rest aligned under it.
                        let mut first = true;
                        for (k, inner) in m {
                            if first {
                                out.push(' ');
                                first = false;
                            } else {
                                pad(out, indent + 2);
                            }
                            out.push_str(&scalar(k));
                            out.push(':');
                            write_child(out, inner, indent + 2);
                        }
                    }
                    _ => write_child(out, val, indent),
                }
            }
        }
        other => {
            pad(out, indent);
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
}

fn write_child(out: &mut String, val: &Value, indent: usize) {
    match val {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_yaml(out, val, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_yaml(out, val, indent + 2);
        }
        _ => {
            out.push(' ');
            out.push_str(&inline(val));
            out.push('\n');
        }
    }
}

fn inline(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn pad(out: &mut String, n: usize) {
    let _ = write!(out, "{:n$}", "");
}

/// A string as a YAML scalar: plain when that reads back as the same string, else JSON-quoted
/// (a JSON string is a valid YAML double-quoted scalar).
pub fn scalar(s: &str) -> String {
    let plain_ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        && !s.starts_with(['-', '.'])
        && s.parse::<f64>().is_err()
        && !yaml11_number(s)
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n" | "~"
        );
    if plain_ok {
        s.to_string()
    } else {
        serde_json::Value::String(s.to_string()).to_string()
    }
}

/// Numbers that YAML 1.1 readers (Go's yaml.v2 under k0s, serde-saphyr here) take from a plain
/// scalar but Rust's float parser does not: digits with `_` separators (`1_0` is 10) and the
/// `0x`/`0o`/`0b` forms. Only strings that start with a digit are affected, so addresses and
/// versions keep their bytes.
fn yaml11_number(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_digit)
        && (s.contains('_')
            || (b.len() > 1
                && b[0] == b'0'
                && matches!(b[1].to_ascii_lowercase(), b'x' | b'o' | b'b')))
}

/// The value with every mapping's keys sorted (a canonical form to hash or compare).
pub fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            // Strings of every kind: YAML's indicators, numbers, booleans, controls, unicode.
            prop_oneof![
                "[a-z0-9./_-]{0,12}",
                "[ -~]{0,12}",
                any::<String>(),
                Just("yes".to_string()),
                Just("~".to_string()),
                Just("1e3".to_string()),
                Just("- a".to_string()),
            ]
            .prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec(("[ -~]{0,8}|[a-z]{1,8}", inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        // A failing case is printed; nothing is written into the source tree.
        #![proptest_config(ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// What the emitter writes reads back (with the YAML reader the spec uses) as the very
        /// value it was given.
        #[test]
        fn emitted_yaml_reads_back_as_the_value(v in value()) {
            let text = to_yaml(&v);
            let back: Value = serde_saphyr::from_str(&text)
                .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(back, v, "{}", text);
        }
    }

    #[test]
    fn scalars_are_plain_only_when_they_read_back_the_same() {
        assert_eq!(scalar("10.0.0.1"), "10.0.0.1");
        assert_eq!(scalar("/var/lib/k0s"), "/var/lib/k0s");
        assert_eq!(scalar("1000"), "\"1000\"");
        assert_eq!(scalar("yes"), "\"yes\"");
        assert_eq!(scalar("a: b"), "\"a: b\"");
        assert_eq!(scalar("-x"), "\"-x\"");
        assert_eq!(scalar(""), "\"\"");
        // YAML 1.1 numbers Rust's float parser does not know.
        assert_eq!(scalar("1_0"), "\"1_0\"");
        assert_eq!(scalar("0x1F"), "\"0x1F\"");
        assert_eq!(scalar("0o17"), "\"0o17\"");
        assert_eq!(scalar("v1_0"), "v1_0");
    }
}
