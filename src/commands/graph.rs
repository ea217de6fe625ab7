//! `k0sform graph [FILE]`: the plan's step DAG as Graphviz DOT.

use crate::cli::{GlobalArgs, GraphArgs};
use crate::engine::{self, Failure};
use crate::exit::Exit;
use crate::plan::render;

pub fn run(global: &GlobalArgs, args: &GraphArgs) -> Exit {
    if let Some(file) = &args.file {
        return match super::show::read_saved(file) {
            Ok(saved) => {
                print!("{}", render::dot(&saved.plan));
                Exit::Success
            }
            Err(f) => f.report(),
        };
    }
    let rt = match engine::runtime() {
        Ok(rt) => rt,
        Err(f) => return f.report(),
    };
    rt.block_on(async {
        let transport = match engine::ssh_transport() {
            Ok(t) => t,
            Err(f) => return f.report(),
        };
        let result: Result<_, Failure> =
            engine::plan_now(global, &args.target, &transport, None, None).await;
        transport.close_all().await;
        match result {
            Ok(planned) => {
                print!("{}", render::dot(&planned.plan));
                Exit::Success
            }
            Err(f) => f.report(),
        }
    })
}
