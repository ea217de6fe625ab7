//! The integration tests, one binary (`cargo test --test k0sform`) rather than one per file: each
//! file below is a module (`cargo test --test k0sform state::` runs one), and the fixtures they
//! share are in `support/`. Filter by module path, e.g. `cargo test --test k0sform plan::props::`.

mod support;

mod apply;
mod cli;
mod e2e;
mod fuzz;
mod lab;
mod localhost;
mod module_graph;
mod plan;
mod probe;
mod source_size;
mod spec;
mod ssh;
mod state;
#[cfg(feature = "etcd-state")]
mod state_etcd;
mod state_store;
