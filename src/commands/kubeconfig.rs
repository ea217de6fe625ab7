//! `k0sform kubeconfig [-user N] [-cluster N] [-address URL] [-out FILE]
//! [-trust-new-host-keys=B]`: the admin kubeconfig of a healthy controller on stdout, or written
//! 0600 to FILE. Reads the state; never writes it.

use crate::cli::{GlobalArgs, KubeconfigArgs};
use crate::exit::Exit;
use crate::ops;
use crate::ops::kubeconfig::{self, Overrides};

pub fn run(global: &GlobalArgs, args: &KubeconfigArgs) -> Exit {
    ops::with_ssh(|transport| async move {
        let (loaded, ctx) = super::load_inputs(global)?;
        let over = Overrides {
            user: args.user.clone(),
            cluster: args.cluster.clone(),
            address: args.address.clone(),
        };
        let refuse = args.host_keys.refuse_first_contact();
        let kc = kubeconfig::fetch(&loaded.spec, &ctx.state, &transport, &over, refuse).await?;
        match &args.out {
            Some(path) => {
                kubeconfig::write(path, &kc)?;
                eprintln!("Kubeconfig written to {}", path.display());
            }
            None => print!("{kc}"),
        }
        Ok(Exit::Success)
    })
}
