//! `k0sform kubeconfig [-user N] [-cluster N] [-address URL] [-out FILE]
//! [-trust-new-host-keys=B]` (and k0sctl's flags, `k0sctl_day2`): the admin kubeconfig of a
//! healthy controller on stdout, or written 0600 to FILE. Reads the state; never writes it.

use super::k0sctl_day2;
use crate::cli::{GlobalArgs, KubeconfigArgs};
use crate::exit::Exit;
use crate::ops::kubeconfig::{self, Overrides};
use crate::ops::{self, Deadline};

pub fn run(global: &GlobalArgs, args: &KubeconfigArgs) -> Exit {
    // k0sctl's --timeout: the whole run (cmd/flags.go); reached, nothing is printed or written.
    let deadline = Deadline::starting_now(args.k0sctl.timeout);
    ops::with_ssh(|transport| async move {
        let (loaded, ctx) = super::load_inputs(global)?;
        if k0sctl_day2::notes(&args.k0sctl, "kubeconfig")? {
            // As k0sctl's GetKubeconfig.DryRun: nothing read, no kubeconfig printed.
            eprintln!(
                "Dry run: the admin kubeconfig would be read from the first healthy controller; nothing was read or written."
            );
            return Ok(Exit::Success);
        }
        let over = Overrides {
            user: args.user.clone(),
            cluster: args.cluster.clone(),
            address: args.address.clone(),
        };
        let refuse = args.host_keys.refuse_first_contact();
        let fetching = kubeconfig::fetch(&loaded.spec, &ctx.state, &transport, &over, refuse);
        let kc = deadline
            .bounded(fetching, ": no kubeconfig was read")
            .await??;
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
