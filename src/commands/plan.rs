//! `k0sform plan`: probe, diff, print; `-out` seals the plan for `apply FILE`.

use crate::cli::{GlobalArgs, PlanArgs};
use crate::exit::Exit;
use crate::ops::{self, Failure};
use crate::ui::render;

pub fn run(global: &GlobalArgs, args: &PlanArgs) -> Exit {
    ops::with_ssh(|transport| async move { plan(global, args, &transport).await })
}

async fn plan(
    global: &GlobalArgs,
    args: &PlanArgs,
    transport: &crate::ssh::SshTransport,
) -> Result<Exit, Failure> {
    if args.show_secrets && args.out.is_some() {
        return Err(Failure::error(
            "-show-secrets cannot be used with -out: a saved plan never holds secret values",
        ));
    }
    if args.destroy {
        super::refuse_with_destroy(&args.target)?;
    }
    let opts = super::plan_options(&args.target, args.show_secrets, args.destroy)?;
    // The lock is held while the state is read and the hosts are probed, so a plan never reads
    // a state an apply is half-way through (-lock=false skips it; testdata/reference/DESIGN.md exit 4 when held).
    let loaded = ops::load_spec(&global.config)?;
    let store = super::open_store(global)?;
    let _lock = if args.lock {
        let operation = if args.destroy {
            "plan -destroy"
        } else {
            "plan"
        };
        Some(store.lock(operation, global.lock_timeout)?)
    } else {
        None
    };
    let inputs = (loaded, ops::load_state(store)?);
    let probe = (args.probe_in.as_deref(), args.probe_out.as_deref());
    let planned = super::plan_now(inputs, (&args.target, &opts), transport, probe).await?;
    if args.json {
        print!("{}", render::json(&planned.plan));
    } else {
        let color = !global.no_color && crate::ui::stdout_color();
        print!("{}", render::text(&planned.plan, color));
    }
    if let Some(out) = &args.out {
        ops::save_plan(&planned, &opts, out)?;
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
