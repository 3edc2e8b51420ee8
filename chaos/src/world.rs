//! What every part of a run shares (the world), and the layout names the run's generators use.
//!
//! Its own room so that the parts that take it — the slots, the nemesis, the scenarios —
//! need not import `run`, which drives them: the arrows run one way, `run` → parts → `world`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::checker::Checker;
use crate::etcd::Cluster;
use crate::faketime::Clocks;
use crate::fsys::Disk;
use crate::pg::{Message, Results};
use crate::procs::{Log, Pids};

/// The Twitter layout as a spec, and under other field names with the epoch in Unix ms.
pub const TWITTER_SPEC: &str =
    "time=41,datacenter=5,worker=5,sequence=12,epoch=2010-11-04T01:42:54.657Z,tick=1ms";
pub const RENAMED_SPEC: &str = "time=41,machine=10,sequence=12,epoch=1288834974657";

/// Everything the run's parts share.
#[derive(Debug)]
pub struct World {
    pub run_dir: PathBuf,
    pub procs_dir: PathBuf,
    pub monoflake: PathBuf,
    pub me: PathBuf,
    pub log: Log,
    pub pids: Arc<Pids>,
    pub checker: Checker,
    pub clocks: Arc<Clocks>,
    pub etcd: Cluster,
    pub disk: Arc<Disk>,
    pub rate: u64,
    pub ttl: u64,
    pub seed: u64,
    pub pg_results: Arc<Mutex<Results>>,
    /// The PostgreSQL server's URL, for the PostgreSQL node store's generators.
    pub pg_url: String,
    /// The holder flavours the soak started (reported at the end).
    pub flavours: Mutex<std::collections::BTreeSet<&'static str>>,
    /// The checker's writer (set at construction; `sync_db` talks to it).
    pub(crate) pg: mpsc::UnboundedSender<Message>,
    /// The next stream number (see `stream`).
    pub(crate) streams: AtomicU64,
}

impl World {
    /// A new stream number (one generator's run of IDs that must increase).
    pub fn stream(&self) -> u64 {
        self.streams.fetch_add(1, Ordering::Relaxed)
    }

    /// Returns once every ID observed so far is in the database.
    pub async fn sync_db(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.pg.send(Message::Sync(tx)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(120), rx).await;
        }
    }
}
