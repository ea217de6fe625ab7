//! `apply`'s flags that are refused before anything is read: what cannot be asked for, or does
//! not go together.

use crate::cli::{ApplyArgs, GlobalArgs};
use crate::ops::Failure;

/// Refused before anything is read: what cannot be asked for, or does not go together.
pub(super) fn refuse_flags(
    global: &GlobalArgs,
    args: &ApplyArgs,
    dry_run: bool,
) -> Result<(), Failure> {
    if args.destroy {
        super::super::refuse_with_destroy(&args.target)?;
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
