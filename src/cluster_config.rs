//! The dynamic config (`spec.k0s.dynamicConfig`): with it, k0s keeps the cluster-wide part of
//! its config in the ClusterConfig object `k0s` of kube-system once the cluster exists
//! (k0s pkg/component/controller/clusterconfig.go). `config status` and `config edit` read and
//! change that object through a healthy controller, as k0sctl's `action/config_status.go` and
//! `action/config_edit.go` do; `drift` compares it with `spec.k0s.config` for the plan.

use crate::k0s;
use crate::ops::{self, Failure};
use crate::spec::{HostSpec, Spec};
use crate::ssh::SshTransport;
use crate::state::State;
use crate::transport::{CommandOutput, Transport};
use crate::ui::escape_lines;
use std::path::Path;

/// `config` needs a cluster with dynamic config: without it k0s has no ClusterConfig object
/// (its CRD is applied only with --enable-dynamic-config).
fn needs_dynamic_config(spec: &Spec, what: &str) -> Result<(), Failure> {
    if spec.k0s.dynamic_config {
        return Ok(());
    }
    Err(Failure::error(format!(
        "config {what}: the spec does not set spec.k0s.dynamicConfig: true, so k0s keeps its \
         config in each controller's k0s.yaml, not in a ClusterConfig object; change \
         spec.k0s.config and apply instead"
    )))
}

async fn controller<'a>(
    spec: &'a Spec,
    state: &State,
    transport: &SshTransport,
    purpose: &str,
    refuse_first_contact: bool,
) -> Result<&'a HostSpec, Failure> {
    let (host, _) =
        ops::healthy_controller(spec, state, transport, purpose, refuse_first_contact).await?;
    Ok(host)
}

/// Run `cmd` on `host`; its stdout, or a failure naming the host and kubectl's error.
async fn run_ok(
    transport: &SshTransport,
    host: &HostSpec,
    cmd: crate::transport::RemoteCommand,
    what: &str,
) -> Result<CommandOutput, Failure> {
    let id = host.id();
    let out = transport
        .run(&id, cmd)
        .await
        .map_err(|e| Failure::error(e.to_string()))?;
    if !out.success() {
        return Err(Failure::error(format!(
            "{id}: {what} failed: {}",
            out.error_line()
        )));
    }
    Ok(out)
}

/// `config status [-o FORMAT]`: the ClusterConfig's reconcile events as kubectl prints them
/// (escaped: a host's answer never drives the terminal).
pub async fn status(
    spec: &Spec,
    state: &State,
    transport: &SshTransport,
    output: Option<&str>,
    refuse_first_contact: bool,
) -> Result<String, Failure> {
    needs_dynamic_config(spec, "status")?;
    let host = controller(
        spec,
        state,
        transport,
        "read the config's events through",
        refuse_first_contact,
    )
    .await?;
    let cmd = k0s::cluster_config_events(&host.k0s_install_path, &host.data_dir, output);
    let out = run_ok(transport, host, cmd, "kubectl get event").await?;
    Ok(escape_lines(out.stdout_str().trim_end()).into_owned())
}

/// The editor line: $VISUAL, else $EDITOR, else `vi` (k0sctl `shellEditor`).
fn editor() -> String {
    ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "vi".to_string())
}

/// Run the editor on `file` through `sh -c` (so an editor line with arguments works), with this
/// terminal.
fn run_editor(line: &str, file: &Path) -> Result<(), Failure> {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{line} \"$1\""))
        .arg("sh")
        .arg(file)
        .status()
        .map_err(|e| Failure::error(format!("cannot start the editor ({line}): {e}")))?;
    if !status.success() {
        return Err(Failure::error(format!(
            "the editor ({line}) failed ({status}); nothing was applied"
        )));
    }
    Ok(())
}

/// What the user saved, checked: YAML, a `k0s.k0sproject.io/v1beta1` ClusterConfig; as JSON to
/// send (kubectl reads JSON as it reads YAML).
fn checked_edit(text: &str) -> Result<Vec<u8>, Failure> {
    let doc: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| {
        Failure::error(format!(
            "the edited config is not YAML: {e}; nothing was applied"
        ))
    })?;
    let field = |k: &str| doc.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    if !field("apiVersion").eq_ignore_ascii_case(crate::spec::K0S_API_VERSION)
        || !field("kind").eq_ignore_ascii_case("ClusterConfig")
    {
        return Err(Failure::error(format!(
            "the edited config is not a {} ClusterConfig; nothing was applied",
            crate::spec::K0S_API_VERSION
        )));
    }
    Ok(serde_json::to_vec(&doc).unwrap_or_default())
}

/// `config edit`: get the object as YAML, edit it in a 0600 temporary file, apply what was saved
/// (k0sctl `action/config_edit.go`). Returns kubectl's answer.
pub async fn edit(
    spec: &Spec,
    state: &State,
    transport: &SshTransport,
    refuse_first_contact: bool,
) -> Result<String, Failure> {
    use std::io::IsTerminal;
    needs_dynamic_config(spec, "edit")?;
    let editor_set = ["VISUAL", "EDITOR"]
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| !v.trim().is_empty()));
    if !editor_set && !std::io::stdout().is_terminal() {
        // k0sctl refuses without a terminal; with an editor named, a script may edit.
        return Err(Failure::error(
            "config edit: output is not a terminal and neither $VISUAL nor $EDITOR is set",
        ));
    }
    let host = controller(
        spec,
        state,
        transport,
        "edit the config through",
        refuse_first_contact,
    )
    .await?;
    let (bin, dd) = (&host.k0s_install_path, &host.data_dir);
    let old = run_ok(
        transport,
        host,
        k0s::get_cluster_config(bin, dd),
        "kubectl get clusterconfig",
    )
    .await?
    .stdout_str();
    let file = tempfile::Builder::new()
        .prefix("k0s-config.")
        .suffix(".yaml")
        .tempfile()
        .map_err(|e| Failure::error(format!("cannot create a temporary file: {e}")))?;
    std::fs::write(file.path(), &old)
        .map_err(|e| Failure::error(format!("cannot write {}: {e}", file.path().display())))?;
    run_editor(&editor(), file.path())?;
    let new = std::fs::read_to_string(file.path())
        .map_err(|e| Failure::error(format!("cannot read {}: {e}", file.path().display())))?;
    if new == old {
        return Err(Failure::error(
            "configuration was not changed, aborting (as k0sctl)",
        ));
    }
    let body = checked_edit(&new)?;
    let out = run_ok(
        transport,
        host,
        k0s::apply_cluster_config(bin, dd, body),
        "kubectl apply of the edited config",
    )
    .await?;
    Ok(escape_lines(&out.stdout_str()).into_owned())
}

/// The `spec` of a ClusterConfig object as `kubectl get -o json` printed it; None when the
/// answer is not a `k0s.k0sproject.io/v1beta1` ClusterConfig with a mapping as its spec.
pub fn live_spec(json: &str) -> Option<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(json).ok()?;
    let is = |k: &str, want: &str| doc.get(k).and_then(|v| v.as_str()) == Some(want);
    if !is("apiVersion", crate::spec::K0S_API_VERSION) || !is("kind", "ClusterConfig") {
        return None;
    }
    doc.get("spec").filter(|s| s.is_object()).cloned()
}

/// The part of spec.k0s.config's `spec` k0s keeps in the ClusterConfig object (k0s
/// pkg/apis/k0s/v1beta1/clusterconfig_types.go `GetClusterWideConfig`: no api, storage or
/// install; network without serviceCIDR, clusterDomain, controlPlaneLoadBalancing and
/// primaryAddressFamily, which stay node settings).
fn cluster_wide(spec_config: &serde_json::Value) -> serde_json::Value {
    let mut spec = spec_config
        .get("spec")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    if let Some(m) = spec.as_object_mut() {
        for k in ["api", "storage", "install"] {
            m.remove(k);
        }
        if let Some(n) = m.get_mut("network").and_then(|n| n.as_object_mut()) {
            for k in [
                "serviceCIDR",
                "clusterDomain",
                "controlPlaneLoadBalancing",
                "primaryAddressFamily",
            ] {
                n.remove(k);
            }
        }
    }
    spec
}

/// Where the live ClusterConfig differs from what spec.k0s.config sets (only the settings the
/// spec names: the object also holds k0s's defaults), each `spec.PATH: X in the spec, Y in the
/// cluster` (`absent` when the object lacks it). Values shown are shortened.
pub fn drift(spec_config: &serde_json::Value, live: &serde_json::Value) -> Vec<String> {
    // Secrets stay out (k0s::redact's rules): a value under a secret key, multi-line text
    // (Helm chart values) and URL credentials are not shown.
    fn shown(path: &str, v: Option<&serde_json::Value>) -> String {
        let Some(v) = v else {
            return "absent".into();
        };
        if path.split('.').any(k0s::redact::is_secret_key) {
            return "(secret)".into();
        }
        match v {
            serde_json::Value::String(t) if t.contains('\n') => return "(text)".into(),
            // Their content may hold secrets under any key: named, not shown.
            serde_json::Value::Object(_) => return "(a mapping)".into(),
            serde_json::Value::Array(a) => return format!("(a list of {})", a.len()),
            _ => {}
        }
        let s = k0s::redact::hide_url_credentials(&v.to_string());
        if s.chars().count() > 60 {
            format!("{}…", s.chars().take(60).collect::<String>())
        } else {
            s
        }
    }
    fn walk(
        path: &str,
        want: &serde_json::Value,
        got: Option<&serde_json::Value>,
        out: &mut Vec<String>,
    ) {
        match (want, got) {
            (serde_json::Value::Object(w), Some(serde_json::Value::Object(g))) => {
                for (k, v) in w {
                    walk(&format!("{path}.{k}"), v, g.get(k), out);
                }
            }
            (serde_json::Value::Null, None) => {}
            (w, g) if Some(w) != g => out.push(format!(
                "{path}: {} in the spec, {} in the cluster",
                shown(path, Some(w)),
                shown(path, g)
            )),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let serde_json::Value::Object(w) = cluster_wide(spec_config) {
        for (k, v) in &w {
            walk(&format!("spec.{k}"), v, live.get(k), &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drift_names_what_the_spec_sets_and_the_object_differs_in() {
        let spec = json!({"spec": {
            "api": {"address": "10.0.0.1"},
            "telemetry": {"enabled": false},
            "network": {"provider": "calico", "serviceCIDR": "10.96.0.0/12"},
        }});
        let live = json!({"telemetry": {"enabled": true}, "network": {"provider": "calico", "podCIDR": "10.244.0.0/16"}});
        assert_eq!(
            drift(&spec, &live),
            ["spec.telemetry.enabled: false in the spec, true in the cluster"]
        );
        let secret = json!({"spec": {"extensions": {"helm": {"repositories": [{"password": "hunter2"}]}, "x": {"password": "hunter2", "url": "https://u:p@h"}}}});
        let got = drift(
            &secret,
            &json!({"extensions": {"x": {"password": "other", "url": "https://u:q@h"}}}),
        );
        assert!(
            got.iter()
                .all(|l| !l.contains("hunter2") && !l.contains("u:p@")),
            "{got:?}"
        );
        let same = json!({"telemetry": {"enabled": false}, "network": {"provider": "calico"}});
        assert!(drift(&spec, &same).is_empty());
        let missing = json!({"network": {"provider": "calico"}});
        assert_eq!(
            drift(&spec, &missing),
            ["spec.telemetry: (a mapping) in the spec, absent in the cluster"]
        );
    }

    #[test]
    fn live_spec_takes_only_a_cluster_config() {
        let ok = r#"{"apiVersion": "k0s.k0sproject.io/v1beta1", "kind": "ClusterConfig", "spec": {"a": 1}}"#;
        assert_eq!(live_spec(ok), Some(json!({"a": 1})));
        assert_eq!(
            live_spec(r#"{"apiVersion": "v1", "kind": "ConfigMap", "spec": {}}"#),
            None
        );
        assert_eq!(live_spec("not json"), None);
    }
}
