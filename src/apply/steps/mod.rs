//! The real steps: what each `StepKind` does on the hosts, through `k0s` command builders and the
//! `Transport` only. Safety preconditions are re-checked against the live cluster right before a
//! step acts (refusals change nothing); intents are recorded through the coordinator before any
//! non-idempotent action. `runner.rs` dispatches by step kind; each step family has its own file.

mod bootstrap;
mod cluster;
mod deadline;
mod drain;
mod etc_environment;
mod files;
mod hooks;
mod install;
mod join;
mod join_token;
mod manifests;
mod moved;
mod node_watch;
mod record;
mod remote;
mod remove;
mod restore;
mod runner;
mod service;
mod tokens;
mod upgrade;

pub use runner::{HostProber, K0sRunner, Remote};
