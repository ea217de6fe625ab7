//! The state: model, format versioning, atomic store with backup, and the lock.

mod model;

pub use model::*;
