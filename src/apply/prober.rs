//! Re-probing one host for the executor (after a join, to record its identity). Implementors
//! write a plain `async fn` (`Prober`); the executor holds one as `Arc<dyn HostProber>`, the
//! boxed-future form every `Prober` gets from the blanket impl below.

use super::HostProber;
use crate::hostid::HostId;
use crate::reality::HostFacts;
use crate::state::BinaryRecord;
use std::future::Future;
use std::pin::Pin;

/// Probes one host for its identity (machine-id, host key, k0s status, the cluster as it sees
/// it). The command layer supplies the real probe (it also knows the SSH host key).
pub trait Prober: Send + Sync + 'static {
    /// `known_binary`: the k0s binary at the host's install path as this run placed it, its
    /// stat line and sha256; hashed again only if the host's stat line differs. `None`: as
    /// the state records it.
    fn probe(
        &self,
        host: &HostId,
        known_binary: Option<&BinaryRecord>,
    ) -> impl Future<Output = Result<HostFacts, String>> + Send;
}

// `dyn` cannot hold a trait with an `async fn`: this is the one place the future is boxed.
impl<P: Prober> HostProber for P {
    fn probe<'a>(
        &'a self,
        host: &'a HostId,
        known_binary: Option<&'a BinaryRecord>,
    ) -> Pin<Box<dyn Future<Output = Result<HostFacts, String>> + Send + 'a>> {
        Box::pin(Prober::probe(self, host, known_binary))
    }
}
