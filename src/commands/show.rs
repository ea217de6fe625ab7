//! `k0sform show [FILE] [-json]`: a saved plan, or the state.

use crate::cli::{GlobalArgs, ShowArgs};
use crate::exit::Exit;
use crate::ops::{self, Failure};
use crate::ui::render;

pub fn run(global: &GlobalArgs, args: &ShowArgs) -> Exit {
    match show(global, args) {
        Ok(()) => Exit::Success,
        Err(f) => f.exit(),
    }
}

fn show(global: &GlobalArgs, args: &ShowArgs) -> Result<(), Failure> {
    match &args.file {
        Some(file) => {
            let saved = ops::read_saved(file)?;
            if args.json {
                print!("{}", render::json(&saved.plan));
            } else {
                let color = !global.no_color && crate::ui::stdout_color();
                print!("{}", render::text(&saved.plan, color));
            }
            Ok(())
        }
        None => {
            let ctx = ops::load_state(super::open_store(global)?)?;
            if !ctx.had_state {
                println!("No state at {}.", ctx.store.location());
                return Ok(());
            }
            if args.json {
                let text = serde_json::to_string_pretty(&ctx.state)
                    .map_err(|e| Failure::error(e.to_string()))?;
                println!("{text}");
            } else {
                print!("{}", crate::ui::state::list(&ctx.state));
            }
            Ok(())
        }
    }
}
