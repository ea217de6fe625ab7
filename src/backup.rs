//! `k0sform backup`: `k0s backup` on a healthy controller, the archive copied here (0600, named
//! after the cluster and the UTC time) and checked against the host's own sha256, the remote
//! copy removed. The controller's `hooks.backup.before`/`after` run around it, as k0sctl runs
//! them around its backup phase (k0sctl `phase/backup.go`). The archive holds the cluster's CA
//! keys: it is only ever written as a 0600 file.

use crate::engine::{self, Failure};
use crate::hostid::HostId;
use crate::k0s::{self, backup as remote};
use crate::spec::{HostSpec, Spec};
use crate::ssh::SshTransport;
use crate::state::State;
use crate::transport::{CommandOutput, RemoteCommand, Transport};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The archive as saved on this machine.
#[derive(Debug, Clone)]
pub struct Saved {
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: usize,
    /// The controller it was taken on.
    pub host: HostId,
}

/// A hook line runs at most this long (as `apply`'s hooks).
const HOOK_TIMEOUT: Duration = Duration::from_secs(600);

/// Take a backup into `out_dir`. `progress` gets one line per stage (no secrets).
/// `refuse_first_contact`: `-trust-new-host-keys=false` (`engine::healthy_controller`).
pub async fn take(
    spec: &Spec,
    state: &State,
    transport: &SshTransport,
    (out_dir, refuse_first_contact): (&Path, bool),
    progress: &mut dyn FnMut(String),
) -> Result<Saved, Failure> {
    if !out_dir.is_dir() {
        return Err(Failure::error(format!(
            "-out {}: not a directory",
            out_dir.display()
        )));
    }
    let (host, _) =
        engine::healthy_controller(spec, state, transport, "back up", refuse_first_contact).await?;
    let id = host.id();
    progress(format!("{id}: backing up"));
    run_hooks(transport, spec, host, "before", progress).await?;
    let dir = format!("/tmp/k0sform-backup-{}", uuid::Uuid::new_v4().simple());
    let taken = fetch_archive(transport, host, &dir).await;
    // The remote copy goes whatever happened: it holds the CA keys.
    match run(transport, &id, remote::remove_dir(&dir)).await {
        Ok(o) if o.success() => {}
        Ok(o) => tracing::warn!(%id, "cannot remove {dir}: {}", o.error_line()),
        Err(e) => tracing::warn!(%id, "cannot remove {dir}: {}", e.message),
    }
    let (data, sha256) = taken?;
    let path = out_dir.join(remote::archive_name(
        &spec.name,
        std::time::SystemTime::now(),
    ));
    crate::private_file::write(&path, &data).map_err(|e| {
        Failure::error(format!(
            "cannot write the backup to {}: {e}",
            path.display()
        ))
    })?;
    run_hooks(transport, spec, host, "after", progress).await?;
    Ok(Saved {
        path,
        sha256,
        bytes: data.len(),
        host: id,
    })
}

/// `k0s backup` into the private scratch dir `dir`, then the archive's bytes and sha256, checked
/// against the host's `sha256sum` and read as a k0s archive.
async fn fetch_archive(
    transport: &SshTransport,
    host: &HostSpec,
    dir: &str,
) -> Result<(Vec<u8>, String), Failure> {
    let id = host.id();
    let step = |what: &str, o: &CommandOutput| {
        Failure::error(format!("{id}: {what} failed: {}", o.error_line()))
    };
    let o = run(transport, &id, remote::make_private_dir(dir)).await?;
    if !o.success() {
        return Err(step(&format!("creating {dir}"), &o));
    }
    let o = run(
        transport,
        &id,
        k0s::backup(&host.k0s_install_path, &host.data_dir, dir),
    )
    .await?;
    if !o.success() {
        return Err(step("`k0s backup`", &o));
    }
    let o = run(transport, &id, remote::list_archives(dir)).await?;
    let archive = remote::parse_archive_list(&o.stdout_str())
        .map_err(|e| Failure::error(format!("{id}: {e}")))?;
    let o = run(transport, &id, remote::sha256sum(&archive)).await?;
    let want = remote::parse_sha256sum(&o.stdout_str())
        .map_err(|e| Failure::error(format!("{id}: {e}: {}", o.error_line())))?;
    let o = run(transport, &id, remote::read_file(&archive)).await?;
    if !o.success() {
        return Err(step(&format!("reading {archive}"), &o));
    }
    let got = crate::hash::sha256_hex(&o.stdout);
    if got != want {
        return Err(Failure::error(format!(
            "{id}: the archive arrived damaged: sha256 {got} here, {want} on the host"
        )));
    }
    k0s::backup::read_archive(o.stdout.as_slice())
        .map_err(|e| Failure::error(format!("{id}: {archive}: {e}")))?;
    Ok((o.stdout, got))
}

/// The host's `hooks.backup.<stage>` lines, one after another as the SSH user; the first that
/// fails stops the backup.
async fn run_hooks(
    transport: &SshTransport,
    spec: &crate::spec::Spec,
    host: &HostSpec,
    stage: &str,
    progress: &mut dyn FnMut(String),
) -> Result<(), Failure> {
    let id = host.id();
    let lines = host
        .hooks
        .get("backup")
        .and_then(|s| s.get(stage))
        .cloned()
        .unwrap_or_default();
    for line in lines {
        // Values from the environment are shown as `${NAME}`, in progress and errors alike.
        let shown = spec.shown(&line);
        progress(format!("{id}: hook backup.{stage}: {shown}"));
        let cmd = RemoteCommand::new(["sh", "-c", line.as_str()])
            .as_login_user()
            .timeout(HOOK_TIMEOUT)
            .shown_as(format!("sh -c {}", crate::ssh::quote(&shown)));
        let o = run(transport, &id, cmd).await.map_err(|mut f| {
            f.message = spec.shown(&f.message);
            f
        })?;
        if !o.success() {
            let how = match o.status {
                Some(c) => format!("exit {c}"),
                None => "killed or timed out".to_string(),
            };
            return Err(Failure::error(spec.shown(&format!(
                "{id}: hook backup.{stage} `{shown}` failed ({how}): {}",
                o.error_line()
            ))));
        }
    }
    Ok(())
}

async fn run(
    transport: &SshTransport,
    id: &HostId,
    cmd: RemoteCommand,
) -> Result<CommandOutput, Failure> {
    transport
        .run(id, cmd)
        .await
        .map_err(|e| Failure::error(e.to_string()))
}
