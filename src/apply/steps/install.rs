//! Putting k0s on a host: the binary (`UploadBinary`, also reused by upgrades), k0s.yaml
//! (`WriteConfig`) and the service unit (`k0s install`).

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s::{self, desired};
use crate::reality::ServiceKind;
use crate::spec::{HostSpec, Role};
use crate::transport::{FileAttrs, Transport};
use crate::version::K0sVersion;
use std::path::PathBuf;

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn write_config(
        &self,
        host: &HostId,
        sha256: &str,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        let yaml = desired::config_yaml(&self.spec, hs);
        let got = crate::hash::sha256_hex(&yaml);
        if !sha256.is_empty() && got != sha256 {
            return Err(failed(format!(
                "{host}: k0s.yaml from the spec now has sha256 {got}, the plan expected {sha256}: plan again"
            )));
        }
        self.put_config(host, yaml).await?;
        Ok(vec![])
    }

    /// `k0s install --force` with `args`; k0sctl's environment drop-in is removed first and,
    /// with `swap_in`, the binary staged for this host moves onto the install path first (it
    /// must only when k0s is stopped or not yet installed), all in one session.
    pub(super) async fn install(
        &self,
        hs: &HostSpec,
        args: &[String],
        swap_in: bool,
    ) -> Result<(), StepError> {
        let kind = if hs.role == Role::Worker {
            ServiceKind::Worker
        } else {
            ServiceKind::Controller
        };
        let id = hs.id();
        let p = self.paths(&id);
        let cmd = k0s::install_service(&p.bin, kind, args, &hs.environment, swap_in);
        let what = if swap_in {
            "moving the new k0s binary into place and k0s install"
        } else {
            "k0s install"
        };
        let out = self.exec_ok(&id, cmd, what).await?;
        if swap_in {
            self.placed(&id, &out.stdout_str());
        }
        Ok(())
    }

    /// After a swap-in command's success (stdout `out`): the staged binary is no longer
    /// staged; if it was moved into place, its stat line and sha256 are remembered.
    fn placed(&self, id: &HostId, out: &str) {
        let sha256 = self
            .staged_binaries
            .lock()
            .ok()
            .and_then(|mut s| s.remove(id));
        let Ok(mut placed) = self.placed_binaries.lock() else {
            return;
        };
        match (k0s::parse_moved_binary_stat(out), sha256) {
            (Some(stat), Some(sha256)) if !sha256.is_empty() => {
                placed.insert(id.clone(), crate::state::BinaryRecord { stat, sha256 });
            }
            // Nothing moved (or its line unreadable): whatever is there is not known here.
            _ => {
                placed.remove(id);
            }
        }
    }

    /// The host downloads k0s from `url` beside the installed binary and checks its sha256.
    pub(super) async fn download_binary(
        &self,
        ctx: &StepContext,
        host: &HostId,
        url: &str,
        sha256: &str,
        version: &K0sVersion,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        let staged = k0s::staged_binary_path(&hs.k0s_install_path);
        let cmd = k0s::release::download_on_host(url, &staged, sha256, self.opts.download_timeout);
        let out = self.exec(host, cmd).await.map_err(failed)?;
        if out.success() {
            // No sha256 to check against (the plan said so): the host's hash of what it
            // downloaded is the one recorded, and shown.
            let got = if sha256.is_empty() {
                let got = k0s::release::staged_sha256(&out.stdout_str()).ok_or_else(|| {
                    failed(format!(
                        "{host}: the download of k0s {version} printed no sha256 of what it staged"
                    ))
                })?;
                ctx.progress(format!(
                    "k0s {version} from {url} has sha256 {got} (not checked against a published sha256, as in k0sctl)"
                ));
                got
            } else {
                sha256.to_string()
            };
            if let Ok(mut s) = self.staged_binaries.lock() {
                s.insert(host.clone(), got);
            }
            return Ok(vec![]);
        }
        Err(failed(format!(
            "{host}: downloading k0s {version} failed, nothing on the host was changed: {}",
            download_failure(&out)
        )))
    }

    pub(super) fn local_binary(
        &self,
        hs: &HostSpec,
        sha256: Option<&str>,
        version: Option<&K0sVersion>,
    ) -> Option<PathBuf> {
        let cached = self.opts.binaries.iter().find(|b| {
            sha256.is_some_and(|s| b.sha256 == s)
                || (sha256.is_none() && version.is_some() && b.version.as_ref() == version)
        });
        cached
            .map(|b| b.path.clone())
            .or_else(|| hs.k0s_binary_path.clone())
    }

    pub(super) async fn upload_binary(
        &self,
        hs: &HostSpec,
        sha256: Option<&str>,
        version: Option<&K0sVersion>,
    ) -> Result<(), StepError> {
        let id = hs.id();
        let local = self.local_binary(hs, sha256, version).ok_or_else(|| {
            failed(format!(
                "{id}: no local k0s binary to upload (set k0sBinaryPath{})",
                version
                    .map(|v| format!(" or provide k0s {v}"))
                    .unwrap_or_default()
            ))
        })?;
        // Staged beside the install path: k0s's unit restarts k0s by itself, and would start a
        // binary put at the install path now at its next crash, out of the upgrade order.
        let staged = k0s::staged_binary_path(&hs.k0s_install_path);
        // Nothing this run staged is there yet (an earlier run's leftover was settled before the
        // steps began, and a leftover is replaced anyway): no round trip asks whether the host
        // already has the bytes. Only a second upload in this run (an upgrade after its
        // UploadBinary step) asks, and is skipped when they are the same.
        let fresh = self
            .staged_binaries
            .lock()
            .is_ok_and(|s| !s.contains_key(&id));
        // The host checks the planned sha256 before the binary is moved to the staging path: a
        // file changed since planning never gets there.
        let mut attrs = FileAttrs::mode(0o755);
        if let Some(want) = sha256.filter(|s| !s.is_empty()) {
            attrs = attrs.expecting(want);
        }
        let got = self
            .upload_local(&id, &local, &staged, &attrs, fresh)
            .await?;
        if let Some(want) = sha256
            && !want.is_empty()
            && got != want
        {
            return Err(failed(format!(
                "{id}: the uploaded k0s binary has sha256 {got}, the plan expected {want} ({} changed since planning)",
                local.display()
            )));
        }
        // Recorded as staged only once the check passed.
        if let Ok(mut s) = self.staged_binaries.lock() {
            s.insert(id.clone(), got);
        }
        Ok(())
    }

    /// Move a staged binary onto the install path: only where k0s is stopped (an upgrade after
    /// `k0s stop`, a host about to be installed).
    pub(super) async fn swap_in_binary(&self, hs: &HostSpec) -> Result<(), StepError> {
        let id = hs.id();
        let cmd = k0s::swap_in_binary(&hs.k0s_install_path);
        let out = self
            .exec_ok(&id, cmd, "moving the new k0s binary into place")
            .await?;
        self.placed(&id, &out.stdout_str());
        Ok(())
    }
}

/// Why `release::download_on_host` failed: the script's own lines (and curl's or wget's), with
/// any credentials in a URL hidden.
pub(super) fn download_failure(out: &crate::transport::CommandOutput) -> String {
    let stderr = out.stderr_str();
    let why: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let why = if why.is_empty() {
        match out.status {
            Some(c) => format!("exit {c}"),
            None => "killed or timed out".into(),
        }
    } else {
        why.join("; ")
    };
    k0s::redact::hide_url_credentials(&why)
}
