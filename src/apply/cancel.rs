//! Interrupt escalation (nextest's model): the first interrupt stops scheduling and lets running
//! steps finish; the second abandons them at once. Every state write is atomic, so both leave a
//! valid state file.

use std::sync::Arc;
use tokio::sync::watch;

/// How far the user asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CancelLevel {
    Running,
    /// Start nothing new; let running steps finish.
    Graceful,
    /// Abandon running steps now.
    Abort,
}

/// A cloneable token: `interrupt()` escalates, the executor watches it.
#[derive(Debug, Clone)]
pub struct Cancel {
    tx: Arc<watch::Sender<CancelLevel>>,
}

impl Default for Cancel {
    fn default() -> Self {
        Self::new()
    }
}

impl Cancel {
    pub fn new() -> Self {
        let (tx, _rx) = watch::channel(CancelLevel::Running);
        Cancel { tx: Arc::new(tx) }
    }

    /// One interrupt: Running → Graceful → Abort. Returns the new level.
    pub fn interrupt(&self) -> CancelLevel {
        let mut new = CancelLevel::Abort;
        self.tx.send_modify(|l| {
            *l = match *l {
                CancelLevel::Running => CancelLevel::Graceful,
                _ => CancelLevel::Abort,
            };
            new = *l;
        });
        new
    }

    pub fn level(&self) -> CancelLevel {
        *self.tx.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<CancelLevel> {
        self.tx.subscribe()
    }

    /// Feed Ctrl-C into this token for as long as the runtime lives.
    pub fn interrupt_on_ctrl_c(&self) {
        let me = self.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                if me.interrupt() == CancelLevel::Abort {
                    break;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escalates() {
        let c = Cancel::new();
        assert_eq!(c.level(), CancelLevel::Running);
        assert_eq!(c.clone().interrupt(), CancelLevel::Graceful);
        assert_eq!(c.level(), CancelLevel::Graceful);
        assert_eq!(c.interrupt(), CancelLevel::Abort);
        assert_eq!(c.interrupt(), CancelLevel::Abort);
    }
}
