//! Node watches: while steps wait for Nodes through a controller, one `kubectl get nodes
//! --watch-only -o name` runs there (`k0s::watch_nodes`), and a line naming a Node wakes the steps
//! waiting for that Node to ask again at once. The answer itself still comes from `kubectl get
//! nodes -o json` (`nodes_via`); the watch only says when to ask. While it runs, the steps' own
//! polls slow down to a safety net (`WATCHED_POLL`); if it cannot start or ends, they poll at the
//! usual interval. It stops when the last step waiting through that controller is done.

use crate::hostid::HostId;
use crate::k0s;
use crate::transport::{RemoteCommand, Transport};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// How often a step waiting for a Node asks anyway while a watch runs: in case the watch
/// misses an event (a change between the step's first answer and the watch's start).
pub(super) const WATCHED_POLL: Duration = Duration::from_secs(5);

/// What a watch tells its waiters: a Node changed, or the watch ended.
#[derive(Clone, Debug)]
pub(super) enum NodeEvent {
    Changed(Arc<str>),
    Ended,
}

/// One controller's running watch and how many steps use it.
pub(super) struct NodeWatch {
    events: broadcast::Sender<NodeEvent>,
    alive: Arc<AtomicBool>,
    users: usize,
    task: tokio::task::JoinHandle<()>,
}

/// The Node watches running on controllers, by controller.
#[derive(Default)]
pub(super) struct NodeWatches(Mutex<HashMap<HostId, NodeWatch>>);

/// A step's use of a controller's watch; dropping it leaves, and the last one out stops it.
pub(super) struct WatchGuard<'a> {
    watches: &'a NodeWatches,
    via: HostId,
    events: broadcast::Receiver<NodeEvent>,
    alive: Arc<AtomicBool>,
}

impl WatchGuard<'_> {
    /// Whether the watch still runs (as far as is known: it may be starting).
    pub(super) fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Wait until Node `node` changes or the watch ends; forever once it has ended (the caller
    /// races this against its poll).
    pub(super) async fn changed(&mut self, node: &str) {
        if !self.alive() {
            return std::future::pending().await;
        }
        loop {
            match self.events.recv().await {
                Ok(NodeEvent::Changed(n)) if &*n == node => return,
                Ok(NodeEvent::Changed(_)) => {}
                // Events were missed: one of them may have been this Node.
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                // Ended: the caller asks again and from then on polls at its usual interval.
                Ok(NodeEvent::Ended) | Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

impl Drop for WatchGuard<'_> {
    fn drop(&mut self) {
        let Ok(mut all) = self.watches.0.lock() else {
            return;
        };
        if let Some(w) = all.get_mut(&self.via) {
            w.users -= 1;
            if w.users == 0 {
                // Dropping the session ends the command on the host (`k0s::watch_nodes`).
                w.task.abort();
                all.remove(&self.via);
            }
        }
    }
}

impl NodeWatches {
    /// Join the Node watch on controller `via`, starting it with `cmd` (`k0s::watch_nodes`)
    /// through `transport` if none runs.
    pub(super) fn join<T: Transport + 'static>(
        &self,
        transport: &Arc<T>,
        via: &HostId,
        cmd: RemoteCommand,
    ) -> Option<WatchGuard<'_>> {
        let mut all = self.0.lock().ok()?;
        if let Some(w) = all.get_mut(via) {
            w.users += 1;
            return Some(WatchGuard {
                watches: self,
                via: via.clone(),
                events: w.events.subscribe(),
                alive: w.alive.clone(),
            });
        }
        let (events, rx) = broadcast::channel(256);
        let alive = Arc::new(AtomicBool::new(true));
        let transport = transport.clone();
        let host = via.clone();
        let (tx, task_events, task_alive) = (events.clone(), events.clone(), alive.clone());
        let task = tokio::spawn(async move {
            let (lines_tx, mut lines) = mpsc::channel::<String>(64);
            let relay = async {
                while let Some(line) = lines.recv().await {
                    if let Some(name) = k0s::parse_watched_node(&line) {
                        let _ = tx.send(NodeEvent::Changed(Arc::from(name)));
                    }
                }
            };
            let (ended, ()) = tokio::join!(transport.run_lines(&host, cmd, lines_tx), relay);
            tracing::debug!(%host, ?ended, "node watch ended; waiting steps poll instead");
            task_alive.store(false, Ordering::Release);
            let _ = task_events.send(NodeEvent::Ended);
        });
        all.insert(
            via.clone(),
            NodeWatch {
                events,
                alive: alive.clone(),
                users: 1,
                task,
            },
        );
        Some(WatchGuard {
            watches: self,
            via: via.clone(),
            events: rx,
            alive,
        })
    }
}
