//! [`Holding`]: what a leased generator owns besides its generator — the keeper thread and
//! what it knows — and how it lets go: stop the keeper (which seals the generator, writes the
//! final reservation and releases the node), once, and only in the process that claimed it.

use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::status::LeaseStatus;
use crate::generator::Owner;
use crate::{Error, Stats};

/// The keeper thread of a held node and what it knows.
pub(crate) struct Holding {
    pub(crate) status: Arc<LeaseStatus>,
    node: u64,
    /// The process that claimed the node: only it may stop the keeper and release.
    pid: u32,
    keeper: Option<JoinHandle<Result<(), Error>>>,
}

impl fmt::Debug for Holding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Holding")
            .field("node", &self.node)
            .field("store", &self.status.store)
            .finish_non_exhaustive()
    }
}

impl Holding {
    /// The node `node`, kept by the keeper thread `keeper`.
    pub(crate) fn new(
        status: Arc<LeaseStatus>,
        node: u64,
        keeper: JoinHandle<Result<(), Error>>,
    ) -> Self {
        Holding {
            status,
            node,
            pid: std::process::id(),
            keeper: Some(keeper),
        }
    }

    /// Stops the keeper, which seals the generator, writes the final reservation and releases
    /// the node; once. In a forked child, nothing: the keeper, the claim and the node are the
    /// parent's.
    pub(crate) fn stop(&mut self) -> Result<(), Error> {
        let Some(keeper) = self.keeper.take() else {
            return Ok(());
        };
        if std::process::id() != self.pid {
            // A forked child: the keeper thread, the claim and the node are the parent's. The
            // child has no such thread to join, and must not write a reservation or give the
            // node up; it leaves everything as it is.
            std::mem::forget(keeper);
            return Ok(());
        }
        self.status.signal.stop();
        keeper.join().unwrap_or_else(|_| {
            Err(Error::LeaseLost {
                node: self.node,
                reason: "the keeper panicked".into(),
            })
        })
    }
}

impl Owner for Holding {
    fn fill(&self, stats: &mut Stats) {
        self.status.fill(stats);
    }

    fn release(&mut self) -> Result<(), Error> {
        self.stop()
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
