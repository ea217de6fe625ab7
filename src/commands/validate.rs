//! `k0sform validate`: check the spec offline. Diagnostics (errors and warnings) go to stderr,
//! the one-line summary to stdout; exit 0 when there is no error, 1 otherwise.

use crate::cli::GlobalArgs;
use crate::exit::Exit;
use crate::spec::{self, Role, Spec};

pub fn run(global: &GlobalArgs) -> Exit {
    match spec::load(&global.config) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("{w}");
            }
            println!("{}", summary(&loaded.spec));
            Exit::Success
        }
        Err(diags) => {
            for d in &diags.0 {
                eprintln!("{d}");
            }
            let n = diags.error_count();
            eprintln!(
                "The spec is not valid: {n} error{}.",
                if n == 1 { "" } else { "s" }
            );
            Exit::Error
        }
    }
}

/// `The spec is valid: 5 hosts (3 controllers, 2 workers) in cluster "prod".` A
/// controller+worker or single host counts as both.
pub fn summary(spec: &Spec) -> String {
    let hosts = spec.hosts.len();
    let controllers = spec.hosts.iter().filter(|h| h.role.is_controller()).count();
    let workers = spec
        .hosts
        .iter()
        .filter(|h| matches!(h.role, Role::Worker | Role::ControllerWorker | Role::Single))
        .count();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "The spec is valid: {} ({}, {}) in cluster \"{}\".",
        plural(hosts, "host"),
        plural(controllers, "controller"),
        plural(workers, "worker"),
        spec.name
    )
}
