//! `ApplyManifest`: a spec manifest applied through a controller (k0sctl
//! `phase/apply_manifests.go`), then recorded with its content hash.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepError};
use crate::hostid::HostId;
use crate::k0s;
use crate::manifests::{self, ManifestId, ManifestRecord};
use crate::transport::Transport;

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn apply_manifest(
        &self,
        via: &HostId,
        id: &ManifestId,
        sha256: &str,
    ) -> Result<Vec<StateChange>, StepError> {
        // The document planned, with the content planned: the spec is the one the plan was
        // made from (a saved plan checks its hash), so this only fails on a planner bug.
        let doc = manifests::find(&self.spec.manifests, id)
            .filter(|d| manifests::sha256(d) == sha256)
            .ok_or_else(|| failed(format!("manifest {id} is not in the spec as planned")))?;
        let p = self.paths(via);
        let cmd = k0s::kubectl_apply(&p.bin, &p.data_dir, manifests::body(doc));
        let out = self.exec(via, cmd).await.map_err(failed)?;
        if !out.success() {
            return Err(failed(format!(
                "{via}: kubectl apply of manifest {id} failed: {}",
                out.error_line()
            )));
        }
        Ok(vec![StateChange::RecordManifest(ManifestRecord {
            manifest: id.clone(),
            sha256: sha256.to_string(),
        })])
    }
}
