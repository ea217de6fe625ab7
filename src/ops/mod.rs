//! The operations: one file per thing k0sform does (as cargo's `ops`). Each takes the spec,
//! the state and the transport, and returns what it did or a `Failure`; commands
//! (`crate::commands`) only translate flags and print.
//!
//! Data flow of `plan` and `apply`: spec + state (`inputs`) + probed reality (`refresh`) →
//! `plan::diff` → plan → `apply` runs the DAG, checkpointing the state after every step.

pub mod apply;
pub mod backup;
pub mod config;
mod controller;
mod deadline;
mod destroy;
mod failure;
pub mod init;
mod inputs;
pub mod kubeconfig;
mod plan;
mod refresh;
mod runtime;
pub mod spec_flags;
pub mod state;
pub mod version;

pub use apply::{Reprober, settle_leftovers};
pub use controller::healthy_controller;
pub use deadline::Deadline;
pub use failure::Failure;
pub use inputs::{
    StateCtx, desired, hosts_at_once, load_spec, load_state, mirror, open_store, restore_archive,
    state_location,
};
pub use plan::{Planned, lock_state, plan_with, read_saved, release_sources, save_plan};
pub use refresh::{reality, staging_destinations};
pub use runtime::{runtime, ssh_transport, with_ssh};

use plan::{desired_and_reality, diff_seen};
