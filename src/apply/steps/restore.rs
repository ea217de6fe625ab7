//! `RestoreBackup`: `apply -restore-from`. The archive is checked against the sha256 the plan
//! saw, uploaded (0600) into a private scratch directory on the first controller, unpacked with
//! `k0s restore` before that controller ever starts, and removed (it holds the cluster's CA
//! keys). As k0sctl's restore phase (`phase/restore.go`), but refused where k0s runs or the state
//! names a cluster: a restore never lands on a live cluster.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepError};
use crate::hostid::HostId;
use crate::k0s::{self, backup as remote};
use crate::transport::{FileAttrs, Transport};

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn restore_backup(
        &self,
        host: &HostId,
        archive: &str,
        sha256: &str,
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        self.refuse_where_a_cluster_is(host, "restore").await?;
        let now = crate::hash::sha256_file(std::path::Path::new(archive))
            .map_err(|e| failed(format!("cannot read {archive}: {e}")))?;
        if now != sha256 {
            return Err(failed(format!(
                "{archive} changed since the plan was made (sha256 {now}, planned {sha256})"
            )));
        }
        gate().await?;
        // `k0s restore` runs the binary at the install path: the one this run uploaded is still
        // staged beside it (k0s does not run here, so it may move in now, as for a bootstrap).
        self.swap_in_binary(self.host_spec(host)?).await?;
        let dir = format!("/tmp/k0sform-restore-{}", uuid::Uuid::new_v4().simple());
        let result = self.restore_in(host, archive, sha256, &dir).await;
        // Whatever happened: the archive holds the CA keys.
        if let Err(e) = self.exec(host, remote::remove_dir(&dir)).await {
            tracing::warn!(%host, "cannot remove {dir}: {e}");
        }
        result.map(|()| vec![])
    }

    async fn restore_in(
        &self,
        host: &HostId,
        archive: &str,
        sha256: &str,
        dir: &str,
    ) -> Result<(), StepError> {
        let p = self.paths(host);
        self.exec_ok(
            host,
            remote::make_private_dir(dir),
            &format!("creating {dir}"),
        )
        .await?;
        let target = format!("{dir}/k0s_backup.tar.gz");
        let sent = self
            .upload_local(
                host,
                std::path::Path::new(archive),
                &target,
                &FileAttrs::mode(0o600).expecting(sha256),
                false,
            )
            .await?;
        if sent != sha256 {
            return Err(failed(format!(
                "{host}: the archive arrived damaged (sha256 {sent}, expected {sha256})"
            )));
        }
        let restore = k0s::restore(&p.bin, &p.data_dir, &target, &format!("{dir}/k0s.yaml"));
        self.exec_ok(host, restore, "`k0s restore`").await?;
        Ok(())
    }
}
