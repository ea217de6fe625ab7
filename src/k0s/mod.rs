//! Every k0s command line k0sform sends and every parser of k0s output. Nothing else builds k0s commands.
pub mod desired;
