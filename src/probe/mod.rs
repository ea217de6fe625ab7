//! Gathers `Reality` from all hosts in parallel: one connection and one batched command per host.
