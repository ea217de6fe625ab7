//! `k0sform backup`: `k0s backup` on a healthy controller, the archive copied here (0600, named
//! after the cluster and the UTC time) and checked against the host's own sha256, the remote
//! copy removed. The controller's `hooks.backup.before`/`after` run around it, as k0sctl runs
//! them around its backup phase (k0sctl `phase/backup.go`). The archive holds the cluster's CA
//! keys: it is only ever written as a 0600 file.
//!
//! `-timeout` (`Deadline`) as in k0sctl, whose `--timeout` is a deadline on the context of the
//! whole run (cmd/flags.go `timeoutFlag`): connecting and probing take that context and stop at
//! it (phase/connect.go, phase/gather_k0s_facts.go), and the phase manager checks it before each
//! phase (phase/manager.go `Run`: "context canceled before entering phase"). Its Backup phase
//! takes no context (phase/backup.go `Run(_ context.Context)`): once begun, `k0s backup` and the
//! download run to the end (stopped part way, the copy with the CA keys would stay on the
//! controller), and the deadline is checked again after it, where k0sctl fails entering its
//! next phase and removes the archive it wrote (cmd/backup.go).

use crate::hostid::HostId;
use crate::k0s::{self, backup as remote};
use crate::ops::{self, Deadline, Failure};
use crate::spec::{HostSpec, Spec};
use crate::state::State;
use crate::transport::{CommandOutput, RemoteCommand, Transport};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The archive as saved on this machine.
#[derive(Debug, Clone)]
pub struct Saved {
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    /// The controller it was taken on.
    pub host: HostId,
}

/// A hook line runs at most this long (as `apply`'s hooks).
const HOOK_TIMEOUT: Duration = Duration::from_secs(600);

/// Take a backup into `out_dir`. `progress` gets one line per stage (no secrets).
/// `refuse_first_contact`: `-trust-new-host-keys=false` (`ops::healthy_controller`).
pub async fn take<T: Transport + Clone + 'static>(
    spec: &Spec,
    state: &State,
    transport: &T,
    (out_dir, refuse_first_contact, deadline): (&Path, bool, &Deadline),
    progress: &mut dyn FnMut(String),
) -> Result<Saved, Failure> {
    if !out_dir.is_dir() {
        return Err(Failure::error(format!(
            "-out {}: not a directory",
            out_dir.display()
        )));
    }
    let finding = ops::healthy_controller(spec, state, transport, "back up", refuse_first_contact);
    let (host, _) = deadline.bounded(finding, BEFORE).await??;
    let id = host.id();
    let path = out_dir.join(remote::archive_name(
        &spec.name,
        std::time::SystemTime::now(),
    ));
    let cannot_write = |e: std::io::Error| {
        Failure::error(format!(
            "cannot write the backup to {}: {e}",
            path.display()
        ))
    };
    // Written beside its final name, 0600 from the start; removed unless it is committed. Made
    // first: a folder it cannot be written to fails the backup before anything runs on the host.
    let mut file = crate::private_file::Pending::new(&path).map_err(cannot_write)?;
    deadline.check(BEFORE)?;
    progress(format!("{id}: backing up"));
    run_hooks(transport, spec, host, "before", progress).await?;
    let dir = format!("/tmp/k0sform-backup-{}", uuid::Uuid::new_v4().simple());
    let taken = fetch_archive(transport, host, &dir, &mut file).await;
    // The remote copy goes whatever happened: it holds the CA keys.
    match run(transport, &id, remote::remove_dir(&dir)).await {
        Ok(o) if o.success() => {}
        Ok(o) => tracing::warn!(%id, "cannot remove {dir}: {}", o.error_line()),
        Err(e) => tracing::warn!(%id, "cannot remove {dir}: {}", e.message()),
    }
    let (bytes, sha256) = taken?;
    check_archive(&file, &id).await?;
    // Not kept (`file` is removed when dropped), as k0sctl removes it.
    deadline.check(&format!(
        " while `k0s backup` ran on {id}: it ran to the end and its copy on the host was removed; the archive is not kept"
    ))?;
    file.commit().map_err(cannot_write)?;
    run_hooks(transport, spec, host, "after", progress).await?;
    Ok(Saved {
        path,
        sha256,
        bytes,
        host: id,
    })
}

/// Reached before `k0s backup` began: nothing ran on the controller.
const BEFORE: &str =
    " before the backup began: nothing was run on a controller, no archive written";

/// Where the archive goes.
pub enum Destination {
    /// Into this folder (`-out DIR`), named after the cluster and the UTC time.
    Folder(PathBuf),
    /// This file (`-o FILE`, k0sctl's --output, cmd/backup.go): taken into a private folder
    /// beside it, then renamed onto it, so it is the whole archive or untouched.
    File(PathBuf),
}

/// `take` into `to`.
pub async fn take_to<T: Transport + Clone + 'static>(
    spec: &Spec,
    state: &State,
    transport: &T,
    (to, refuse_first_contact, deadline): (&Destination, bool, &Deadline),
    progress: &mut dyn FnMut(String),
) -> Result<Saved, Failure> {
    let file = match to {
        Destination::Folder(dir) => {
            let with = (dir.as_path(), refuse_first_contact, deadline);
            return take(spec, state, transport, with, progress).await;
        }
        Destination::File(file) => file,
    };
    let scratch = scratch_beside(file)?;
    let dir = scratch.path().to_path_buf();
    let with = (dir.as_path(), refuse_first_contact, deadline);
    let mut saved = take(spec, state, transport, with, progress).await?;
    std::fs::rename(&saved.path, file).map_err(|e| {
        Failure::error(format!(
            "cannot write the backup to {}: {e}",
            file.display()
        ))
    })?;
    saved.path = file.clone();
    Ok(saved)
}

/// A private (0700) folder in the folder of `file`, removed when dropped; refused when `file`
/// is a folder.
fn scratch_beside(file: &Path) -> Result<tempfile::TempDir, Failure> {
    if file.is_dir() {
        return Err(Failure::error(format!(
            "-o {}: a folder; -o names the archive file (-out DIR picks a folder)",
            file.display()
        )));
    }
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    tempfile::Builder::new()
        .prefix(".k0sform-backup-")
        .tempdir_in(parent)
        .map_err(|e| Failure::error(format!("-o {}: {e}", file.display())))
}

/// `k0s backup` into the private scratch dir `dir`, then the archive streamed into `file`
/// (up to `remote::MAX_ARCHIVE`), hashed on the way and checked against the host's
/// `sha256sum`: its size and sha256.
async fn fetch_archive<T: Transport + Clone + 'static>(
    transport: &T,
    host: &HostSpec,
    dir: &str,
    file: &mut crate::private_file::Pending,
) -> Result<(u64, String), Failure> {
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
    let local = file
        .file()
        .try_clone()
        .map_err(|e| Failure::error(format!("cannot write the backup: {e}")))?;
    let mut local = tokio::fs::File::from_std(local);
    let got = transport
        .run_into(&id, remote::read_file(&archive), &mut local)
        .await
        .map_err(|e| Failure::error(e.to_string()))?;
    if got.status != Some(0) {
        return Err(Failure::error(format!(
            "{id}: reading {archive} failed: {}",
            got.error_line()
        )));
    }
    if got.sha256 != want {
        return Err(Failure::error(format!(
            "{id}: the archive arrived damaged: sha256 {} here, {want} on the host",
            got.sha256
        )));
    }
    Ok((got.bytes, got.sha256))
}

/// Read the archive that arrived as a k0s backup (`k0s::backup::read_archive`), off the async
/// threads: a real one is gigabytes to decompress.
async fn check_archive(file: &crate::private_file::Pending, id: &HostId) -> Result<(), Failure> {
    let path = file.temp_path().to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        let f = std::fs::File::open(&path)?;
        Ok::<_, std::io::Error>(remote::read_archive(std::io::BufReader::new(f)))
    })
    .await;
    match read {
        Ok(Ok(Ok(_))) => Ok(()),
        Ok(Ok(Err(e))) => Err(Failure::error(format!("{id}: {e}"))),
        Ok(Err(e)) => Err(Failure::error(format!("cannot read the backup back: {e}"))),
        Err(e) => Err(Failure::error(format!("cannot read the backup back: {e}"))),
    }
}

/// The host's `hooks.backup.<stage>` lines, one after another as the SSH user; the first that
/// fails stops the backup.
async fn run_hooks<T: Transport + Clone + 'static>(
    transport: &T,
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
        let cmd = crate::k0s::cmdline::hook(&line, &shown, HOOK_TIMEOUT);
        let o = run(transport, &id, cmd)
            .await
            .map_err(|f| f.map_message(|m| spec.shown(m)))?;
        if !o.success() {
            let why = crate::k0s::cmdline::hook_failure(&format!("backup.{stage}"), &shown, &o);
            return Err(Failure::error(spec.shown(&format!("{id}: {why}"))));
        }
    }
    Ok(())
}

async fn run<T: Transport + Clone + 'static>(
    transport: &T,
    id: &HostId,
    cmd: RemoteCommand,
) -> Result<CommandOutput, Failure> {
    transport
        .run(id, cmd)
        .await
        .map_err(|e| Failure::error(e.to_string()))
}
