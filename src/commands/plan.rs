//! `k0sform plan`: probe, diff, print; `-out` seals the plan for `apply FILE`.

use crate::cli::{GlobalArgs, PlanArgs};
use crate::engine::{self, Failure};
use crate::exit::Exit;
use crate::plan::{SavedPlan, render};

pub fn run(global: &GlobalArgs, args: &PlanArgs) -> Exit {
    engine::with_ssh(|transport| async move { plan(global, args, &transport).await })
}

async fn plan(
    global: &GlobalArgs,
    args: &PlanArgs,
    transport: &crate::ssh::SshTransport,
) -> Result<Exit, Failure> {
    let planned = super::plan_now(
        global,
        &args.target,
        transport,
        args.probe_in.as_deref(),
        args.probe_out.as_deref(),
    )
    .await?;
    if args.json {
        print!("{}", render::json(&planned.plan));
    } else {
        let color = !global.no_color && crate::ui::stdout_color();
        print!("{}", render::text(&planned.plan, color));
    }
    if let Some(out) = &args.out {
        let saved = SavedPlan::with_options(
            planned.plan.clone(),
            &planned.state.sealed_view(),
            &planned.loaded.sha256,
            &planned.reality,
            super::plan_options(&args.target),
        );
        write_private(out, saved.to_json().as_bytes()).map_err(|e| {
            Failure::error(format!("cannot write the plan to {}: {e}", out.display()))
        })?;
        if !args.json {
            println!(
                "\nSaved the plan to {}. To perform exactly these actions, run:\n  k0sform apply {}",
                out.display(),
                out.display()
            );
        }
    }
    Ok(if args.detailed_exitcode && planned.plan.has_changes() {
        Exit::Changes
    } else {
        Exit::Success
    })
}

/// Write a file readable only by its owner, atomically.
pub(crate) fn write_private(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    tmp.write_all(data)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
