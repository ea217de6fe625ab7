//! `k0sform backup [-out DIR | -o FILE] [-trust-new-host-keys=B]` (and k0sctl's flags,
//! `k0sctl_day2`): back the cluster up into a local archive; prints `<sha256>  <path>` (the
//! `sha256sum` format) on stdout, progress on stderr.

use crate::cli::{BackupArgs, GlobalArgs};
use crate::exit::Exit;
use crate::ops::{self, Deadline, Failure, backup::Destination};
use std::path::PathBuf;

pub fn run(global: &GlobalArgs, args: &BackupArgs) -> Exit {
    // k0sctl's --timeout: the whole run (cmd/flags.go), as `ops::backup` says.
    let deadline = Deadline::starting_now(args.k0sctl.timeout);
    ops::with_ssh(|transport| async move {
        let (loaded, ctx) = super::load_inputs(global)?;
        let to = match (&args.output, &args.out) {
            (Some(file), _) => Destination::File(file.clone()),
            (None, Some(d)) => Destination::Folder(d.clone()),
            (None, None) => Destination::Folder(PathBuf::from(".")),
        };
        if k0sctl_notes(args)? {
            // As k0sctl's Backup phase in a dry run (phase/backup.go `Wet`): nothing runs.
            let dest = match &to {
                Destination::File(f) => f.display().to_string(),
                Destination::Folder(d) => format!("a new archive in {}", d.display()),
            };
            eprintln!(
                "Dry run: `k0s backup` would run on the first healthy controller and the archive be written to {}; nothing was run or written.",
                crate::escape::escape_lines(&dest)
            );
            return Ok(Exit::Success);
        }
        let mut progress = |line: String| eprintln!("{}", crate::escape::escape_lines(&line));
        let refuse = args.host_keys.refuse_first_contact();
        let with = (&to, refuse, &deadline);
        let saved = ops::backup::take_to(&loaded.spec, &ctx.state, &transport, with, &mut progress);
        let saved = saved.await?;
        eprintln!(
            "Backup of cluster \"{}\" taken on {}: {} ({} bytes)",
            crate::escape::escape_lines(&loaded.spec.name),
            saved.host,
            saved.path.display(),
            saved.bytes
        );
        println!("{}  {}", saved.sha256, saved.path.display());
        Ok(Exit::Success)
    })
}

/// k0sctl's backup flags (cmd/backup.go) that change nothing say so; whether this is a dry run.
fn k0sctl_notes(args: &BackupArgs) -> Result<bool, Failure> {
    if args.concurrency.is_some() {
        eprintln!(
            "Note: -concurrency (k0sctl) changes nothing: backup asks one controller at a time."
        );
    }
    super::k0sctl_day2::notes(&args.k0sctl, "backup")
}
