//! `config status` and `config edit`: the ClusterConfig object of a cluster with dynamic config,
//! read and changed through a healthy controller as k0sctl's `action/config_status.go` and
//! `action/config_edit.go` do (`crate::cluster_config` holds the object's pure parts).

use super::Failure;
use crate::escape::escape_lines;
use crate::k0s;
use crate::ops;
use crate::spec::{HostSpec, Spec};
use crate::ssh::SshTransport;
use crate::state::State;
use crate::transport::{CommandOutput, Transport};
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
