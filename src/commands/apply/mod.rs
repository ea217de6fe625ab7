//! `k0sform apply [FILE]` and `destroy`: plan (or take a saved plan), show it, ask, and let
//! `ops::apply` run it.

mod flags;
mod k0sctl;

use super::prompt::approve;
use crate::cli::{ApplyArgs, DestroyArgs, GlobalArgs};
use crate::exit::Exit;
use crate::ops::{self, Deadline, Failure};
use crate::ssh::SshTransport;
use crate::ui;

pub fn run(global: &GlobalArgs, args: &ApplyArgs) -> Exit {
    ops::with_ssh(|transport| async move { apply(global, args, &transport).await })
}

/// `k0sform destroy`: `apply` of a destroy plan, confirmed by typing the cluster's name.
pub fn destroy(global: &GlobalArgs, args: &DestroyArgs) -> Exit {
    run(global, &args.as_apply())
}

async fn apply(
    global: &GlobalArgs,
    args: &ApplyArgs,
    transport: &SshTransport,
) -> Result<Exit, Failure> {
    let dry_run = args.run.dry_run().map_err(Failure::error)?;
    flags::refuse_flags(global, args, dry_run)?;
    let deadline = Deadline::starting_now(args.run.deadline());
    k0sctl::k0sctl_checks(args, dry_run)?;
    // The lock comes first: planning against a state another apply is about to change is useless.
    let (mut loaded, mut ctx) = super::load_inputs(global)?;
    ops::spec_flags::k0sctl_overrides(&mut loaded.spec, &args.k0sctl, &args.run)?;
    // k0sctl's --concurrency (now the spec's limit) or the spec's limit; -parallelism wins.
    let parallelism =
        ops::hosts_at_once(args.target.parallelism, &loaded.spec, ctx.state.hosts.len());
    let operation = if args.destroy { "destroy" } else { "apply" };
    let _lock = ops::apply::lock(&mut ctx, operation, global.lock_timeout)?;
    let opts = super::plan_options(&args.target, args.show_secrets, args.destroy)?;
    let (file, with) = (args.plan_file.as_deref(), (&opts, parallelism));
    let planned =
        ops::apply::plan_or_rederive(file, loaded, ctx, transport, with, &deadline).await?;
    // What runs is what was derived now (equal to the file's plan, or refused above). A saved plan
    // is confirmed only when it destroys (only with -destroy), by typing the cluster's name.
    let plan = &planned.plan;
    let asks =
        (args.plan_file.is_none() || plan.destroy) && plan.has_changes() && !args.auto_approve;
    let color = !global.no_color && ui::stdout_color();
    ui::render::before_apply(plan, args.json, asks, color);
    if dry_run {
        eprintln!("Dry run: nothing was changed.");
        return Ok(Exit::Success);
    }
    if asks {
        approve(global.input, args.json, plan)?;
    }
    let spec = planned.loaded.spec.clone();
    let run = ops::apply::RunOptions {
        parallelism,
        parallelism_flag: args.target.parallelism,
        deadline,
        progress: !args.json && ui::stderr_is_tty(),
    };
    let mut sink = ui::apply_sink(args.json, color);
    let exit = ops::apply::run(planned, transport, &run, &mut *sink).await?;
    if let Some(path) = &args.kubeconfig_out
        && exit == Exit::Success
    {
        let over = (&args.k0sctl).into();
        let refuse = args.target.host_keys.refuse_first_contact();
        let store = super::open_store(global)?;
        ops::kubeconfig::fetch_into(store, &spec, transport, path, (&over, refuse)).await?;
        eprintln!("Kubeconfig written to {}", path.display());
    }
    Ok(exit)
}
