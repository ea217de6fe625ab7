//! `k0sform backup [-out DIR | -o FILE] [-trust-new-host-keys=B]`: back the cluster up into a
//! local archive; prints `<sha256>  <path>` (the `sha256sum` format) on stdout, progress on stderr.

use crate::cli::{BackupArgs, GlobalArgs};
use crate::exit::Exit;
use crate::ops::{self, backup::Destination};
use std::path::PathBuf;

pub fn run(global: &GlobalArgs, args: &BackupArgs) -> Exit {
    ops::with_ssh(|transport| async move {
        let (loaded, ctx) = super::load_inputs(global)?;
        let to = match (&args.output, &args.out) {
            (Some(file), _) => Destination::File(file.clone()),
            (None, Some(d)) => Destination::Folder(d.clone()),
            (None, None) => Destination::Folder(PathBuf::from(".")),
        };
        let mut progress = |line: String| eprintln!("{}", crate::ui::escape_lines(&line));
        let refuse = args.host_keys.refuse_first_contact();
        let saved = ops::backup::take_to(
            &loaded.spec,
            &ctx.state,
            &transport,
            (&to, refuse),
            &mut progress,
        )
        .await?;
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
