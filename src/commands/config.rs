//! `k0sform config edit` and `config status`: the dynamic config through a healthy controller
//! (`ops::config`). Read the state; never write it.

use crate::cli::{ConfigCommand, GlobalArgs};
use crate::exit::Exit;
use crate::ops;

pub fn run(global: &GlobalArgs, cmd: &ConfigCommand) -> Exit {
    ops::with_ssh(|transport| async move {
        let (loaded, ctx) = super::load_inputs(global)?;
        match cmd {
            ConfigCommand::Status(args) => {
                let refuse = args.host_keys.refuse_first_contact();
                let out = ops::config::status(
                    &loaded.spec,
                    &ctx.state,
                    &transport,
                    args.output.as_deref(),
                    refuse,
                )
                .await?;
                println!("{out}");
            }
            ConfigCommand::Edit(args) => {
                let refuse = args.host_keys.refuse_first_contact();
                let out = ops::config::edit(&loaded.spec, &ctx.state, &transport, refuse).await?;
                print!("{out}");
            }
        }
        Ok(Exit::Success)
    })
}
