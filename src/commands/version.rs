//! `k0sform version [-k0s [-pre]]`: k0sform's own version, or the newest k0s release.

use crate::cli::VersionArgs;
use crate::exit::Exit;
use crate::ops::{self, Failure};

/// `version`, and `version -k0s [-pre]`: the newest k0s release (`ops::version`).
pub fn run(args: &VersionArgs) -> Exit {
    use crate::k0s::release::Channel;
    if args.k0sctl {
        return Failure::error(
            "-k0sctl: k0sform does not track k0sctl's releases; `k0sform version` prints k0sform's own",
        )
        .exit();
    }
    if !args.k0s {
        println!("k0sform {}", env!("CARGO_PKG_VERSION"));
        return Exit::Success;
    }
    let channel = if args.pre {
        Channel::Latest
    } else {
        Channel::Stable
    };
    match ops::version::newest_k0s(channel) {
        Ok(v) => {
            println!("{v}");
            Exit::Success
        }
        Err(f) => f.exit(),
    }
}
