//! `k0sform version [-k0s [-pre]]`: k0sform's own version, or the newest k0s release.

use crate::cli::VersionArgs;
use crate::exit::Exit;
use crate::ops::{self, Failure};

/// `version`, and `version -k0s [-pre]`: the newest k0s release from the version index k0sctl
/// reads (cmd/version.go; `stable.txt`, with -pre `latest.txt`, of K0SFORM_K0S_VERSION_URL).
pub fn run(args: &VersionArgs) -> Exit {
    use crate::k0s::release::{self, Channel};
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
    let looked_up = ops::mirror().and_then(|m| {
        let url = m.version_index_url(channel);
        crate::download::fetch_text(&url, crate::download::TEXT_TIMEOUT)
            .and_then(|t| release::parse_version_index(&t).map_err(|e| format!("{url}: {e}")))
            .map_err(Failure::error)
    });
    match looked_up {
        Ok(v) => {
            println!("{v}");
            Exit::Success
        }
        Err(f) => f.exit(),
    }
}
