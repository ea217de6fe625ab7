//! What a host's plan needs from this machine: the k0s binary an install or upgrade requires
//! (refused up front when there is none), and the spec's `files:` that are missing or differ on
//! the host.

use super::host_plan::{Decision, HostPlan};
use super::{Planner, reason};
use crate::hostid::HostId;
use crate::plan::model::{ReasonCode, Refusal, RefusalKind, Step, StepKind};
use crate::reality::TokenFileState;
use crate::version::K0sVersion;

impl Planner<'_> {
    /// The spec's `files:` that are missing or differ on the host (content, mode, owner where
    /// the spec names one) join the host's plan; a host with nothing else to do gets
    /// `Decision::Files`. Not for hosts leaving, unreachable ones or `-refresh-only`.
    pub(super) fn plan_files(&self, p: &mut HostPlan) {
        let h = &self.hosts[p.idx];
        if self.opts.refresh_only || matches!(p.decision, Decision::Remove { .. }) {
            return;
        }
        let (Some(_), Some(f)) = (h.spec, h.facts()) else {
            return;
        };
        let mut why = Vec::new();
        for want in self.desired.files(&h.id) {
            let have = f.files.iter().find(|r| r.path == want.remote);
            // A URL source (k0sctl `phase/uploadfiles.go` `uploadURL`): its tokens expanded
            // for this host (`cluster/host.go` `ExpandTokens`: the spec's k0s version, the
            // host's architecture); the sha256 to hold the host's file to is the spec's, else
            // the one the state recorded when the host downloaded this very URL.
            let mut want = want.clone();
            let mut target = Some(want.sha256.clone());
            if let Some(template) = &want.url {
                let version = self
                    .spec
                    .k0s
                    .version
                    .clone()
                    .or_else(|| self.desired_version(&h.id))
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                let arch = crate::k0s::release::k0s_arch(&f.arch);
                let url = crate::k0s::release::expand_tokens(template, &version, &arch);
                if want.sha256.is_empty() {
                    target = self
                        .state
                        .download(&h.id, &want.remote, &url)
                        .map(|d| d.sha256.clone());
                }
                want.url = Some(url);
            }
            let diff = match (
                have.and_then(|r| r.sha256.as_ref().map(|s| (r, s))),
                &target,
            ) {
                (None, _) => Some("missing".to_string()),
                (Some(_), None) => Some("not downloaded from this URL yet".to_string()),
                (Some((_, sha)), Some(t)) if sha != t => Some("content differs".to_string()),
                (Some((r, _)), _) if r.mode != Some(want.mode) => Some(format!(
                    "mode {} → {}",
                    r.mode.map(crate::files::mode_text).unwrap_or_default(),
                    crate::files::mode_text(want.mode)
                )),
                (Some((r, _)), _) if !r.owned_by(want.user.as_deref(), want.group.as_deref()) => {
                    Some(format!(
                        "owner {}:{} → {}:{}",
                        r.user.as_deref().unwrap_or("?"),
                        r.group.as_deref().unwrap_or("?"),
                        want.user.as_deref().or(r.user.as_deref()).unwrap_or("?"),
                        want.group.as_deref().or(r.group.as_deref()).unwrap_or("?")
                    ))
                }
                (Some(_), _) => None,
            };
            if let Some(d) = diff {
                why.push(format!("{} ({d})", want.remote));
                p.files.push(want);
            }
        }
        if why.is_empty() {
            return;
        }
        if matches!(p.decision, Decision::Noop) {
            p.decision = Decision::Files;
        }
        p.reasons.push(reason(
            ReasonCode::FilesChange,
            format!("files to upload: {}", why.join(", ")),
        ));
    }

    /// k0s issue #7202: a worker that runs a k0s decoding its token file at every start, whose
    /// token file the probe found holding no join token (k0sctl's `# overwritten by k0sctl
    /// after join`), gets a decodable placeholder there now, without a restart, so that its
    /// next start does not fail (k0sctl does so on every apply:
    /// `phase/ensure_join_token_workaround.go`). A host that restarts here gets it before its
    /// restart (`token_file_workaround`); one that joins or leaves needs none. A host with
    /// nothing else to do gets `Decision::Files`.
    pub(super) fn plan_token_file(&self, p: &mut HostPlan) {
        let h = &self.hosts[p.idx];
        if self.opts.refresh_only
            || !matches!(
                p.decision,
                Decision::Noop | Decision::Files | Decision::Adopt | Decision::Move
            )
        {
            return;
        }
        let (Some(sh), Some(f)) = (h.spec, h.facts()) else {
            return;
        };
        let Some(running) = f.status.as_ref().map(|s| &s.version) else {
            return;
        };
        // Workers only, as k0sctl (`Hosts.Workers()` is role `worker`). A controller+worker
        // of that release does not decode its token file at a restart: the controller reads it
        // only while it has not joined (k0s v1.35.1+k0s.0 cmd/controller/controller.go
        // `needToJoin`: no etcd `member/snap/db`, or for other storage no CA), and its embedded
        // worker starts from the admin kubeconfig, never the token (`startWorker`); the file
        // is decoded in the worker command's own RunE only (cmd/worker/worker.go).
        if sh.role != crate::spec::Role::Worker
            || !crate::k0s::quirks::worker_decodes_token_file_at_start(running)
            || !matches!(
                f.worker_token_file,
                Some(TokenFileState::Undecodable | TokenFileState::Missing)
            )
        {
            return;
        }
        p.token_placeholder = true;
        if matches!(p.decision, Decision::Noop) {
            p.decision = Decision::Files;
        }
        p.reasons.push(reason(
            ReasonCode::FilesChange,
            format!(
                "token file {} holds no join token k0s {running} can decode at its next start (k0s #7202)",
                crate::k0s::desired::token_file(sh)
            ),
        ));
    }

    /// A plan that installs or upgrades k0s needs a binary of the wanted version: a local one
    /// to upload (`k0sBinaryPath`, `uploadBinary`), a release the host downloads, or for an
    /// install the one already on the host. Refused up
    /// front (exit 1), before any step could remove a member or reset a host; otherwise an
    /// "upgrade" would restart k0s on its old binary and record the new version.
    pub(super) fn k0s_binary_for(&self, p: &HostPlan) -> Result<(), Refusal> {
        let h = &self.hosts[p.idx];
        if self.desired.local_binary(&h.id).is_some() || self.desired.host_download(&h.id).is_some()
        {
            return Ok(());
        }
        let path = h
            .spec
            .map(|s| s.k0s_install_path.as_str())
            .unwrap_or("the k0s install path");
        let on_host = h.facts().and_then(|f| f.k0s_version.clone());
        let why = match &p.decision {
            Decision::Upgrade { to, .. } => format!("upgrading k0s to {to} needs that binary"),
            d if d.installs() => match (on_host, self.desired_version(&h.id)) {
                (None, _) => format!("there is no k0s binary at {path} to install"),
                (Some(have), Some(want)) if have != want => {
                    format!("{path} is k0s {have}, the spec asks for {want}")
                }
                _ => return Ok(()),
            },
            _ => return Ok(()),
        };
        Err(Refusal {
            kind: RefusalKind::NoK0sBinary,
            message: format!("{} ({}): {why}", h.name(), h.id),
            details: vec![if h.spec.is_some_and(|s| s.use_existing_k0s) {
                "useExistingK0s: k0sform uses the k0s binary on the host as it is; make spec.k0s.version name that binary's version".into()
            } else {
                "set spec.k0s.version (the host then downloads that release, or with uploadBinary k0sform does), or k0sBinaryPath to a k0s binary of that version".into()
            }],
        })
    }

    pub(super) fn desired_version(&self, id: &HostId) -> Option<K0sVersion> {
        self.desired
            .local_binary(id)
            .and_then(|b| b.version.clone())
            .or_else(|| self.desired.host_download(id).map(|d| d.version.clone()))
            .or_else(|| self.spec.k0s.version.clone())
    }

    /// The step that puts the host's new k0s binary beside the installed one, when the host
    /// installs or upgrades k0s and gets it from k0sform (upload) or a release (download).
    pub(super) fn staging(&self, p: &HostPlan) -> Option<StepKind> {
        let h = &self.hosts[p.idx];
        let needs = match &p.decision {
            Decision::Upgrade { .. } => true,
            d => d.installs(),
        };
        if !needs {
            return None;
        }
        if let Some(bin) = self.desired.local_binary(&h.id) {
            return Some(StepKind::UploadBinary {
                sha256: bin.sha256.clone(),
                version: bin.version.clone(),
            });
        }
        self.desired
            .host_download(&h.id)
            .map(|d| StepKind::DownloadBinary {
                url: d.url.clone(),
                sha256: d.sha256.clone(),
                version: d.version.clone(),
            })
    }

    /// Where k0sform differs from k0sctl for safety, said once: hosts that download k0s with no
    /// sha256 to check it against (a `k0sDownloadURL` without `k0sDownloadSha256`, or a release
    /// before v1.28.2, which publishes no `sha256sums.txt`). k0sctl checks none
    /// (`pkg/k0s/binprovider/download.go`); each host's hash of its download is recorded.
    pub(super) fn unchecked_download_warning(&mut self, steps: &[Step]) {
        let hosts: Vec<String> = steps
            .iter()
            .filter(
                |s| matches!(&s.kind, StepKind::DownloadBinary { sha256, .. } if sha256.is_empty()),
            )
            .map(|s| self.name_of(&s.host))
            .collect();
        if hosts.is_empty() {
            return;
        }
        self.warnings.push(format!(
            "the k0s binary that {} download{} is not checked against a published sha256 (as in k0sctl; there is none for a k0sDownloadURL or before k0s v1.28.2): each host's sha256 of its download is recorded; set k0sDownloadSha256 on the host to pin it",
            hosts.join(", "),
            if hosts.len() == 1 { "s" } else { "" }
        ));
    }
}
