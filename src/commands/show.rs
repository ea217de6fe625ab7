//! `k0sform show [FILE] [-json]`: a saved plan, or the state.

use crate::cli::{GlobalArgs, ShowArgs};
use crate::engine::{self, Failure};
use crate::exit::Exit;
use crate::plan::SavedPlan;
use crate::ui::render;

pub fn run(global: &GlobalArgs, args: &ShowArgs) -> Exit {
    match show(global, args) {
        Ok(()) => Exit::Success,
        Err(f) => f.report(),
    }
}

fn show(global: &GlobalArgs, args: &ShowArgs) -> Result<(), Failure> {
    match &args.file {
        Some(file) => {
            let saved = read_saved(file)?;
            if args.json {
                print!("{}", render::json(&saved.plan));
            } else {
                let color = !global.no_color && crate::ui::stdout_color();
                print!("{}", render::text(&saved.plan, color));
            }
            Ok(())
        }
        None => {
            let ctx = engine::load_state(super::open_store(global)?)?;
            if !ctx.had_state {
                println!("No state at {}.", ctx.store.location());
                return Ok(());
            }
            if args.json {
                let text = serde_json::to_string_pretty(&ctx.state)
                    .map_err(|e| Failure::error(e.to_string()))?;
                println!("{text}");
            } else {
                print!("{}", super::state::render_list(&ctx.state));
            }
            Ok(())
        }
    }
}

/// Read a saved plan file; one that is not a k0sform plan → exit 5. (`apply` also checks its seal.)
pub(crate) fn read_saved(file: &std::path::Path) -> Result<SavedPlan, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::error(format!("cannot read the plan {}: {e}", file.display())))?;
    let saved = SavedPlan::from_json(&text).map_err(|e| Failure {
        exit: Exit::StalePlan,
        message: format!("{}: {e}", file.display()),
    })?;
    Ok(saved)
}
