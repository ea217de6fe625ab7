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
    let loaded = ops::load_spec(&global.config)?;
    let store = super::open_store(global)?;
    let lock_timeout = args.lock.then_some(global.lock_timeout);
    // Held (unless -lock=false) until the plan is printed and saved.
    let (state, _lock) = ops::lock_state(store, &opts, lock_timeout)?;
    let inputs = (loaded, state);
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
