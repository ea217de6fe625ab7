//! `k0sform graph [FILE]`: the plan's step DAG as Graphviz DOT.

use crate::cli::{GlobalArgs, GraphArgs};
use crate::exit::Exit;
use crate::ops;
use crate::ui::render;

pub fn run(global: &GlobalArgs, args: &GraphArgs) -> Exit {
    if let Some(file) = &args.file {
        return match ops::read_saved(file) {
            Ok(saved) => {
                print!("{}", render::dot(&saved.plan));
                Exit::Success
            }
            Err(f) => f.exit(),
        };
    }
    ops::with_ssh(|transport| async move {
        let opts = super::plan_options(&args.target, false, false)?;
        let inputs = super::load_inputs(global)?;
        let with = (&args.target, &opts);
        let planned = super::plan_now(inputs, with, &transport, (None, None)).await?;
        print!("{}", render::dot(&planned.plan));
        Ok(Exit::Success)
    })
}
