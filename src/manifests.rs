//! Extra Kubernetes manifests of a multi-document spec: every document that is neither the
//! k0sctl Cluster nor a k0s ClusterConfig. k0sctl `kubectl apply`s each of them through the
//! leader at the end of every apply (k0sctl `phase/apply_manifests.go`: `env
//! KUBECONFIG=<dataDir>/pki/admin.conf k0s kubectl apply -f -`, the document on stdin, no other
//! flag); k0sform does the same through a healthy controller, as the last steps of the plan, but
//! only for documents whose content changed since the state recorded them (a sha256 per
//! manifest). A manifest removed from the spec is left in the cluster, as k0sctl leaves it; the
//! plan says so and the state forgets it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Which object a manifest is: what the plan shows and the state records it by.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ManifestId {
    pub api_version: String,
    pub kind: String,
    /// `metadata.namespace`; None when the document names none (kubectl then uses the
    /// kubeconfig's namespace, `default`, for namespaced kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for ManifestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

impl ManifestId {
    /// The API group (`""` for the core group): an object keeps its identity when only the
    /// version of its apiVersion changes (`apps/v1beta2` → `apps/v1`).
    fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// The same object (group, kind, namespace, name).
    pub fn same_object(&self, other: &ManifestId) -> bool {
        self.group() == other.group()
            && self.kind == other.kind
            && self.namespace == other.namespace
            && self.name == other.name
    }

    /// Checked field by field: from a spec (so the plan names it plainly) or from a state file
    /// (untrusted: only compared and shown, never run).
    pub fn check(&self) -> Result<(), String> {
        let ok_api = !self.api_version.is_empty()
            && self.api_version.len() <= 253
            && self
                .api_version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '/'));
        if !ok_api {
            return Err(format!("apiVersion `{}` is not one", self.api_version));
        }
        let ok_kind = self.kind.len() <= 63
            && self.kind.starts_with(|c: char| c.is_ascii_alphabetic())
            && self.kind.chars().all(|c| c.is_ascii_alphanumeric());
        if !ok_kind {
            return Err(format!("kind `{}` is not a Kubernetes kind", self.kind));
        }
        if self.kind.ends_with("List") {
            return Err(format!(
                "a {} document: give its items as documents of their own",
                self.kind
            ));
        }
        let name_chars = |s: &str| {
            !s.is_empty()
                && s.len() <= 253
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '@'))
        };
        if !name_chars(&self.name) {
            return Err(format!(
                "metadata.name `{}` is not an object name (kubectl apply needs one)",
                self.name
            ));
        }
        if let Some(ns) = &self.namespace
            && !(ns.len() <= 63
                && !ns.is_empty()
                && ns
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        {
            return Err(format!("metadata.namespace `{ns}` is not a namespace name"));
        }
        Ok(())
    }
}

/// The identity of a manifest document, checked. The error says what is missing or wrong.
pub fn identify(doc: &Value) -> Result<ManifestId, String> {
    let s = |v: Option<&Value>, what: &str| match v {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("{what} must be a string, found {other}")),
        None => Err(format!("{what} is missing (kubectl apply needs it)")),
    };
    let meta = doc.get("metadata");
    if meta.is_some_and(|m| !m.is_object()) {
        return Err("metadata must be a mapping".into());
    }
    let id = ManifestId {
        api_version: s(doc.get("apiVersion"), "apiVersion")?,
        kind: s(doc.get("kind"), "kind")?,
        namespace: match meta.and_then(|m| m.get("namespace")) {
            None | Some(Value::Null) => None,
            v => Some(s(v, "metadata.namespace")?),
        },
        name: s(meta.and_then(|m| m.get("name")), "metadata.name")?,
    };
    id.check()?;
    Ok(id)
}

/// sha256 over the document's JSON with its keys sorted: the same content gives the same
/// hash however its keys were ordered in the file.
pub fn sha256(doc: &Value) -> String {
    crate::hash::sha256_hex(serde_json::to_vec(&crate::yaml::sorted(doc)).unwrap_or_default())
}

/// What `kubectl apply -f -` reads: the document as JSON (kubectl reads JSON as it reads YAML).
pub fn body(doc: &Value) -> Vec<u8> {
    serde_json::to_vec(doc).unwrap_or_default()
}

/// A manifest as the state recorded it when it was last applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestRecord {
    pub manifest: ManifestId,
    /// `sha256` of the document applied (lower-case hex).
    pub sha256: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ManifestAction {
    /// Not recorded in the state: applied (kubectl creates it, or configures an object that
    /// exists already).
    Create,
    /// Its content differs from what the state recorded: applied again.
    Change,
    /// Same content as recorded: not applied.
    Unchanged,
    /// In the state, no longer in the spec: left in the cluster (k0sctl deletes nothing either)
    /// and forgotten by the state.
    Left,
}

/// A manifest in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ManifestChange {
    pub manifest: ManifestId,
    pub action: ManifestAction,
}

/// Every manifest of the spec (in spec order) and every recorded one the spec no longer has,
/// each with what happens to it; warnings for state records that do not check out (ignored).
pub fn changes(spec: &[Value], recorded: &[ManifestRecord]) -> (Vec<ManifestChange>, Vec<String>) {
    let mut warnings = Vec::new();
    let recorded: Vec<&ManifestRecord> = recorded
        .iter()
        .filter(|r| match r.manifest.check() {
            Ok(()) if r.sha256.len() == 64 && r.sha256.bytes().all(|b| b.is_ascii_hexdigit()) => {
                true
            }
            _ => {
                warnings.push(
                    "the state records a manifest entry that is not valid; it is ignored".into(),
                );
                false
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut seen: Vec<ManifestId> = Vec::new();
    for doc in spec {
        let Ok(id) = identify(doc) else {
            // The spec's loader refused it already; a spec built in code is not planned blind.
            warnings
                .push("a manifest of the spec has no usable identity; it is not applied".into());
            continue;
        };
        let action = match recorded.iter().find(|r| r.manifest.same_object(&id)) {
            None => ManifestAction::Create,
            Some(r) if r.sha256 == sha256(doc) => ManifestAction::Unchanged,
            Some(_) => ManifestAction::Change,
        };
        seen.push(id.clone());
        out.push(ManifestChange {
            manifest: id,
            action,
        });
    }
    for r in recorded {
        if !seen.iter().any(|id| id.same_object(&r.manifest)) {
            out.push(ManifestChange {
                manifest: r.manifest.clone(),
                action: ManifestAction::Left,
            });
        }
    }
    (out, warnings)
}

/// The spec's document for a planned manifest, if its content is still the one planned.
pub fn find<'a>(spec: &'a [Value], id: &ManifestId) -> Option<&'a Value> {
    spec.iter()
        .find(|d| identify(d).is_ok_and(|i| i.same_object(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str, data: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {"k": data}})
    }

    fn record(doc: &Value) -> ManifestRecord {
        ManifestRecord {
            manifest: identify(doc).unwrap(),
            sha256: sha256(doc),
        }
    }

    #[test]
    fn identity_is_checked() {
        assert_eq!(
            identify(&cm("a", "1")).unwrap().to_string(),
            "ConfigMap default/a"
        );
        let no_name = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
        assert!(identify(&no_name).unwrap_err().contains("metadata.name"));
        let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {"name": "x"}});
        assert!(identify(&list).unwrap_err().contains("items"));
        let evil =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a\u{1b}[2J"}});
        assert!(identify(&evil).is_err());
        let ns = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "Bad NS"}});
        assert!(identify(&ns).is_err());
    }

    #[test]
    fn hash_ignores_key_order() {
        let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let b = json!({"metadata": {"name": "a"}, "kind": "ConfigMap", "apiVersion": "v1"});
        assert_eq!(sha256(&a), sha256(&b));
        assert_ne!(sha256(&cm("a", "1")), sha256(&cm("a", "2")));
    }

    #[test]
    fn changes_from_the_recorded_hashes() {
        let spec = [cm("a", "1"), cm("b", "2"), cm("c", "3")];
        let old = cm("gone", "x");
        let recorded = [record(&cm("a", "1")), record(&cm("b", "old")), record(&old)];
        let (c, w) = changes(&spec, &recorded);
        assert!(w.is_empty());
        let actions: Vec<(String, ManifestAction)> = c
            .iter()
            .map(|c| (c.manifest.name.clone(), c.action))
            .collect();
        assert_eq!(
            actions,
            [
                ("a".into(), ManifestAction::Unchanged),
                ("b".into(), ManifestAction::Change),
                ("c".into(), ManifestAction::Create),
                ("gone".into(), ManifestAction::Left),
            ]
        );
    }

    #[test]
    fn an_invalid_record_is_ignored_with_a_warning() {
        let mut r = record(&cm("a", "1"));
        r.sha256 = "zz".into();
        let (c, w) = changes(&[cm("a", "1")], &[r]);
        assert_eq!(c[0].action, ManifestAction::Create);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn a_new_api_version_is_the_same_object() {
        let old =
            json!({"apiVersion": "apps/v1beta2", "kind": "Deployment", "metadata": {"name": "w"}});
        let new = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"}});
        let (c, _) = changes(&[new], &[record(&old)]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].action, ManifestAction::Change);
    }
}
