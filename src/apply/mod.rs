//! The DAG executor: runs a plan's steps in topological order, records intents, checkpoints the state.
