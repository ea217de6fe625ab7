//! `k0sform validate`: check the spec offline. Diagnostics (errors and warnings) go to stderr,
//! the one-line summary to stdout; with `-json` one object with both goes to stdout. Exit 0 when
//! there is no error, 1 otherwise.

use crate::cli::{GlobalArgs, ValidateArgs};
use crate::exit::Exit;
use crate::spec::{self, Role, Spec, ValidationReport};

pub fn run(global: &GlobalArgs, args: &ValidateArgs) -> Exit {
    let loaded = spec::load(&global.config);
    if args.json {
        let report = match &loaded {
            Ok(l) => ValidationReport::new(&l.warnings, summary(&l.spec)),
            Err(diags) => ValidationReport::new(&diags.0, invalid_summary(diags.error_count())),
        };
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("Error: {e}");
                return Exit::Error;
            }
        }
        return if report.valid {
            Exit::Success
        } else {
            Exit::Error
        };
    }
    match loaded {
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
            eprintln!("{}", invalid_summary(diags.error_count()));
            Exit::Error
        }
    }
}

fn invalid_summary(n: usize) -> String {
    format!(
        "The spec is not valid: {n} error{}.",
        if n == 1 { "" } else { "s" }
    )
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
