//! `k0sform backup [-out DIR | -o FILE] [-trust-new-host-keys=B]`: back the cluster up into a
//! local archive; prints `<sha256>  <path>` (the `sha256sum` format) on stdout, progress on stderr.

use crate::cli::{BackupArgs, GlobalArgs};
use crate::exit::Exit;
use crate::ops::{self, Failure};
use std::path::{Path, PathBuf};

pub fn run(global: &GlobalArgs, args: &BackupArgs) -> Exit {
    ops::with_ssh(|transport| async move {
        let (loaded, ctx) = super::load_inputs(global)?;
        // -o FILE (k0sctl's --output, cmd/backup.go): taken into a private folder beside FILE,
        // then renamed onto it, so FILE is the whole archive or untouched.
        let scratch = match &args.output {
            Some(file) => Some(scratch_beside(file)?),
            None => None,
        };
        let dir = match (&scratch, &args.out) {
            (Some(s), _) => s.path().to_path_buf(),
            (None, Some(d)) => d.clone(),
            (None, None) => PathBuf::from("."),
        };
        let mut progress = |line: String| eprintln!("{}", crate::ui::escape_lines(&line));
        let refuse = args.host_keys.refuse_first_contact();
        let mut saved = crate::ops::backup::take(
            &loaded.spec,
            &ctx.state,
            &transport,
            (&dir, refuse),
            &mut progress,
        )
        .await?;
        if let Some(file) = &args.output {
            std::fs::rename(&saved.path, file).map_err(|e| {
                Failure::error(format!(
                    "cannot write the backup to {}: {e}",
                    file.display()
                ))
            })?;
            saved.path = file.clone();
        }
        eprintln!(
            "Backup of cluster \"{}\" taken on {}: {} ({} bytes)",
            crate::ui::escape_lines(&loaded.spec.name),
            saved.host,
            saved.path.display(),
            saved.bytes
        );
        println!("{}  {}", saved.sha256, saved.path.display());
        Ok(Exit::Success)
    })
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
