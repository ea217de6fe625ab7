//! k0sform: a plan/apply engine for k0s clusters.
//!
//! Data flow: spec + state + probed reality → `plan::diff` → plan (changes + step DAG) →
//! `apply` runs the DAG in topological order, checkpointing the state after every step.

pub mod apply;
pub mod backup;
pub mod binaries;
pub mod cli;
pub mod cluster_config;
pub mod commands;
pub mod download;
pub mod engine;
pub mod exit;
pub mod files;
pub mod hash;
pub mod hostid;
pub mod k0s;
pub mod kubeconfig;
pub mod manifests;
pub mod plan;
pub mod private_file;
pub mod probe;
pub mod reality;
pub mod runlog;
pub mod spec;
pub mod ssh;
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
