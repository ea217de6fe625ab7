//! `k0sform apply [FILE]` and `destroy`: plan (or take a saved plan), show it, ask, and let
//! `ops::apply` run it.

mod k0sctl;

use super::prompt::{confirm, confirm_destroy};
use crate::cli::{ApplyArgs, DestroyArgs, GlobalArgs};
use crate::exit::Exit;
use crate::ops::{self, Failure, apply::Deadline};
use crate::plan::PlanOptions;
use crate::ssh::SshTransport;
use crate::ui::render;
use crate::ui::{self, ApplyEvent, EventSink, HumanSink, JsonSink};
use std::io::IsTerminal;

pub fn run(global: &GlobalArgs, args: &ApplyArgs) -> Exit {
    ops::with_ssh(|transport| async move { apply(global, args, &transport).await })
}

/// `k0sform destroy`: `apply` of a destroy plan, confirmed by typing the cluster's name.
pub fn destroy(global: &GlobalArgs, args: &DestroyArgs) -> Exit {
    let apply_args = ApplyArgs {
        plan_file: None,
        target: args.target_args(),
        destroy: true,
        // k0sctl reset's --force is its confirmation bypass (action/reset.go).
        auto_approve: args.auto_approve || args.force,
        json: args.json,
        kubeconfig_out: None,
        show_secrets: false,
        run: args.run.clone(),
        k0sctl: Default::default(),
    };
    ops::with_ssh(|transport| async move { apply(global, &apply_args, &transport).await })
}

/// Refused before anything is read: what cannot be asked for, or does not go together.
fn refuse_flags(global: &GlobalArgs, args: &ApplyArgs, dry_run: bool) -> Result<(), Failure> {
    if args.destroy {
        super::refuse_with_destroy(&args.target)?;
    }
    // A dry run (k0sctl's --dry-run, DRY_RUN) only plans: it never asks.
    let asks = !args.auto_approve && !dry_run;
    let refuse = |why: &str| Err(Failure::error(why));
    if args.destroy && asks && !global.input {
        return refuse(
            "destroy needs confirmation but -input=false forbids asking: review `k0sform plan -destroy` and use -auto-approve",
        );
    }
    if args.plan_file.is_none() && asks && !global.input {
        return refuse(
            "apply needs confirmation but -input=false forbids asking: review the plan and use -auto-approve, or apply a saved plan file",
        );
    }
    if args.show_secrets && args.plan_file.is_some() {
        return refuse(
            "-show-secrets cannot be used with a saved plan: it holds no secret values; run apply without a plan file to see them",
        );
    }
    Ok(())
}

async fn apply(
    global: &GlobalArgs,
    args: &ApplyArgs,
    transport: &SshTransport,
) -> Result<Exit, Failure> {
    let destroy = args.destroy;
    let dry_run = args.run.dry_run().map_err(Failure::error)?;
    refuse_flags(global, args, dry_run)?;
    let deadline = Deadline::starting_now(args.run.deadline());
    k0sctl::k0sctl_checks(args, dry_run)?;
    // The lock comes first: planning against a state another apply is about to change is useless.
    let (mut loaded, mut ctx) = super::load_inputs(global)?;
    k0sctl::k0sctl_overrides(&mut loaded.spec, &args.k0sctl, &args.run)?;
    // k0sctl's --concurrency (now the spec's limit) or the spec's limit; -parallelism wins.
    let parallelism =
        ops::hosts_at_once(args.target.parallelism, &loaded.spec, ctx.state.hosts.len());
    let operation = if destroy { "destroy" } else { "apply" };
    let _lock = ops::apply::lock(&mut ctx, operation, global.lock_timeout)?;
    let color = !global.no_color && ui::stdout_color();
    let planned = match &args.plan_file {
        Some(file) => {
            let saved = ops::read_saved(file)?;
            let cli = PlanOptions {
                destroy,
                ..super::plan_options(&args.target)?
            };
            let saved = (file.as_path(), &saved);
            let with = (&cli, parallelism);
            let planned =
                ops::apply::rederive(saved, loaded, ctx, transport, with, &deadline).await?;
            // What runs is what was derived now (equal to the file's plan, or refused above).
            show_plan(args, &planned.plan, color);
            // A plan file that destroys the cluster is applied only with -destroy (checked when
            // its options were compared) and confirmed like `destroy`: typing the cluster's name,
            // unless -auto-approve.
            if planned.plan.destroy && planned.plan.has_changes() && !args.auto_approve {
                confirm_destroy(global.input, args.json, &planned.plan.cluster_name)?;
            }
            planned
        }
        None => {
            let opts = PlanOptions {
                show_secrets: args.show_secrets,
                destroy,
                ..super::plan_options(&args.target)?
            };
            let with = (&opts, parallelism);
            let planned = ops::apply::plan(loaded, ctx, transport, with, &deadline).await?;
            show_plan(args, &planned.plan, color);
            if dry_run {
                eprintln!("Dry run: nothing was changed.");
                return Ok(Exit::Success);
            }
            if planned.plan.has_changes() && !args.auto_approve {
                if destroy {
                    confirm_destroy(global.input, args.json, &planned.plan.cluster_name)?;
                } else {
                    confirm(global.input, args.json)?;
                }
            }
            planned
        }
    };
    let spec = planned.loaded.spec.clone();
    let run = ops::apply::RunOptions {
        parallelism,
        parallelism_flag: args.target.parallelism,
        deadline,
        progress: !args.json && ui::stderr_is_tty(),
    };
    let mut human = HumanSink::new(std::io::stdout(), color, ui::stderr_is_tty());
    let mut json = JsonSink::new(std::io::stdout());
    let sink: &mut dyn EventSink = if args.json { &mut json } else { &mut human };
    let exit = ops::apply::run(planned, transport, &run, sink).await?;
    if let Some(path) = &args.kubeconfig_out
        && exit == Exit::Success
    {
        let over = ops::kubeconfig::Overrides {
            user: args.k0sctl.kubeconfig_user.clone(),
            cluster: args.k0sctl.kubeconfig_cluster.clone(),
            address: args.k0sctl.kubeconfig_api_address.clone(),
        };
        let refuse = args.target.host_keys.refuse_first_contact();
        let store = super::open_store(global)?;
        ops::kubeconfig::fetch_into(store, &spec, transport, path, (&over, refuse)).await?;
        eprintln!("Kubeconfig written to {}", path.display());
    }
    Ok(exit)
}

/// The plan before anything runs: as text on stdout, or with `-json` as a `planned` event line
/// on stdout, and then as text on stderr when that is a terminal and a `yes` will be asked for,
/// so the person answering sees what they approve.
fn show_plan(args: &ApplyArgs, plan: &crate::plan::Plan, color: bool) {
    if !args.json {
        print!("{}", render::text(plan, color));
        return;
    }
    JsonSink::new(std::io::stdout()).event(&ApplyEvent::Planned {
        plan: Box::new(plan.clone()),
    });
    let asks =
        (args.plan_file.is_none() || plan.destroy) && plan.has_changes() && !args.auto_approve;
    if asks && std::io::stderr().is_terminal() {
        let color = color && ui::stderr_is_tty();
        eprint!("{}", render::text(plan, color));
    }
}
