//! k0sform: a plan/apply engine for k0s clusters.
//!
//! Data flow: spec + state + probed reality → `plan::diff` → plan (changes + step DAG) →
//! `apply` runs the DAG in topological order, checkpointing the state after every step.

pub mod apply;
pub mod binaries;
pub mod cli;
pub mod cluster_config;
pub mod commands;
pub mod download;
pub mod escape;
pub mod exit;
pub mod files;
pub mod glob;
pub mod hash;
pub mod hostid;
pub mod install_flags;
pub mod k0s;
pub mod manifests;
pub mod ops;
pub mod plan;
pub mod private_file;
pub mod probe;
pub mod quote;
pub mod reality;
pub mod runlog;
pub mod spec;
pub mod ssh;
pub mod ssh_key;
pub mod state;
pub mod transport;
pub mod ui;
pub mod version;
pub mod yaml;

use std::ffi::OsString;

/// Run k0sform with these arguments (argv[0] included) and return the process exit code.
pub fn run(args: Vec<OsString>) -> std::process::ExitCode {
    commands::run(cli::parse(args)).into()
}
