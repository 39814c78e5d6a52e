//! The store node: a handle ([`StoreNode`], [`Store`] over the durable log),
//! its configuration ([`StoreConfig`]) and its address file. What the store
//! decides lives in [`state`] ([`StoreState`]: which records
//! to append, which gaps to FETCH, what is durable and may be ACKed, how to
//! answer a FETCH); `run.rs` is the event loop over its sockets; [`durable`] is
//! the storage it runs on ([`DurableLog`]: group commit on a syncer thread,
//! recovery after an I/O error).
//!
//! It subscribes as RFC 46 says for stores (every RECORD, HEAD, FETCH and
//! GET-HEADS; DIRECT-RECORD and CONSUMER-HELLO addressed to itself), feeds each
//! message to [`StoreState`], and sends what that returns. At every loop turn
//! it lets the log group-commit (`sync_if_due`) and then ACKs what became
//! durable, so an ACK never covers a record that could be lost.
//!
//! FETCH answers go out slice by slice between receives. The XPUB is set to
//! not drop (`ZMQ_XPUB_NODROP`): when a requester's queue is full the send
//! fails with EAGAIN, the unsent slice is requeued and retried a little later,
//! so a slow consumer makes the store wait, never buffer without bound.

mod counters;
pub mod durable;
pub mod groups;
mod run;
pub mod state;
mod view;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::log::{FsyncPolicy, LogConfig};
use crate::node::actor::Actor;
use crate::node::config::NodeConfig;
use crate::node::stats::{Stats, SyncTimes};

pub use counters::SharedCounters;
pub use durable::DurableLog;
pub use state::{PartKey, StoreCounters, StoreLog, StoreState, StoreStateConfig};

pub(super) enum Cmd<L: StoreLog> {
    Connect(String),
    /// Runs a read-only query against the log on the node thread.
    Query(Box<dyn FnOnce(&L) + Send>),
}

/// What the handle can read while the node runs.
#[derive(Default)]
pub struct StoreShared {
    pub stats: Stats,
    /// [`StoreCounters`], published at every turn: read without a lock.
    pub counters: SharedCounters,
    pub last_error: Mutex<Option<String>>,
    /// Whether `last_error` is set (a storage error now), read without a
    /// lock (metrics).
    pub failing: AtomicBool,
    /// Storage errors seen (appends or syncs that failed).
    pub storage_errors: AtomicU64,
    /// How long group commits take, when the storage syncs (the durable log).
    pub sync_times: Option<Arc<SyncTimes>>,
    /// Segment files the log holds open.
    pub open_files: AtomicU64,
    /// Partitions the log set aside because they could not be opened.
    pub damaged_partitions: AtomicU64,
    /// Partitions the log parked (no record left; `crate::log::parked`).
    pub parked_partitions: AtomicU64,
    /// Partitions with protocol state beside the log's: those with work
    /// left or a producer heard lately (the others are forgotten).
    pub active_partitions: AtomicU64,
    /// Consumer groups ([`groups`]): the rows of the commit table, the
    /// commits that moved one, and the COMMITs refused (from no live
    /// member, or for a partition the committer does not claim), and the
    /// rows another store's commits moved (anti-entropy).
    pub commit_rows: AtomicU64,
    pub commits_taken: AtomicU64,
    pub commits_refused: AtomicU64,
    pub commits_replicated: AtomicU64,
    /// Commit entries taken at the partition's next offset here (they
    /// named one past it), GROUP-MEMBERs refused (past the registry's
    /// caps), rewrites of `commits.log`, and the members the store hears.
    pub commits_capped: AtomicU64,
    pub announcements_refused: AtomicU64,
    pub commit_compactions: AtomicU64,
    pub group_members: AtomicU64,
}

/// A running store node over any [`StoreLog`].
pub struct StoreNode<L: StoreLog + Send + 'static> {
    actor: Actor<Cmd<L>>,
    shared: Arc<StoreShared>,
    address: String,
    endpoint: String,
}

impl<L: StoreLog + Send + 'static> StoreNode<L> {
    /// Starts the node thread with `log`; returns once the XPUB is bound.
    pub fn start(address: &str, log: L, node: NodeConfig, state: StoreStateConfig) -> Result<Self> {
        Self::start_keeping(address, log, node, state, None)
    }

    /// [`StoreNode::start`], keeping consumer groups' commits in the file
    /// `commits` (read back first; `None`: in memory only).
    pub fn start_keeping(
        address: &str,
        log: L,
        node: NodeConfig,
        state: StoreStateConfig,
        commits: Option<PathBuf>,
    ) -> Result<Self> {
        node.validate()?;
        let shared = Arc::new(StoreShared {
            sync_times: log.sync_times(),
            ..Default::default()
        });
        let ctx = zmq::Context::new();
        let (a, sh) = (address.to_string(), shared.clone());
        let (actor, endpoint) = Actor::spawn("dafka-store", &ctx.clone(), move |inbox, ready| {
            run::run(inbox, ready, &ctx, (node, state, commits), &a, log, &sh)
        })?;
        Ok(Self {
            actor,
            shared,
            address: address.to_string(),
            endpoint,
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }
    /// The XPUB endpoint (what `peers=[...]` of other nodes names).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
    pub fn shared(&self) -> &StoreShared {
        &self.shared
    }
    /// What a metrics scrape reads of this store.
    pub fn metrics_source(&self) -> crate::metrics::Source {
        crate::metrics::Source::store(&self.address, self.shared.clone())
    }
    /// `Ok` while the node thread runs.
    pub fn check(&self) -> Result<()> {
        self.actor.check()
    }
    /// Connects to one more static peer.
    pub fn connect(&self, endpoint: &str) -> Result<()> {
        crate::node::config::check_peer(endpoint)?;
        self.actor.send(Cmd::Connect(endpoint.to_string()))
    }

    /// Runs `f` on the node thread against the log and returns its result.
    pub fn query<T: Send + 'static>(&self, f: impl FnOnce(&L) -> T + Send + 'static) -> Result<T> {
        let (tx, rx) = sync_channel(1);
        self.actor.send(Cmd::Query(Box::new(move |log: &L| {
            let _ = tx.send(f(log));
        })))?;
        rx.recv_timeout(Duration::from_secs(30))
            .map_err(|_| self.actor.check().err().unwrap_or(Error::Closed))
    }

    /// Every (topic, partition) held, with its next offset (parked ones,
    /// with no record left, are not listed; see `crate::log::parked`).
    pub fn heads(&self, topic: Option<Vec<u8>>) -> Result<Vec<(PartKey, u64)>> {
        self.query(move |log| {
            log.partitions(topic.as_deref())
                .into_iter()
                .map(|(t, p)| {
                    let next = log.next_offset(&t, &p).unwrap_or(0);
                    ((t, p), next)
                })
                .collect()
        })
    }

    /// Stops the node: it syncs the log, then the thread exits.
    pub fn close(&self) -> Result<()> {
        self.actor.close()
    }
}

/// Everything a store is configured with.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub node: NodeConfig,
    /// The log's settings. The store's default differs from the log's own:
    /// group commit every `flush_interval_ms` = 1 ms (fdatasync at most ~1000
    /// times a second, never per record: at 500k records/s each covers ~500),
    /// so ACKs follow records within a few ms (p50 ~2 ms at 500k/s here;
    /// 2 ms gave ~2.8) and nothing ACKed is lost to a crash.
    pub log: LogConfig,
    /// The tunables of [`StoreState`] (FETCH retries, held records, answers).
    pub state: StoreStateConfig,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            node: NodeConfig::default(),
            log: LogConfig {
                fsync: FsyncPolicy::Interval,
                flush_interval_ms: 1,
                flush_messages: 100_000,
                isolate_damaged: true,
                ..LogConfig::default()
            },
            state: StoreStateConfig::default(),
        }
    }
}

/// The file in a store's directory that keeps its address across restarts.
pub const IDENTITY_FILE: &str = "store.id";
/// The log lives in this subdirectory of the store's directory.
pub const LOG_DIR: &str = "log";

/// Reads the store's address from `dir/store.id`, creating it on first start
/// (and anew when a secure store's key does not match it: a secure node's
/// address starts with its key).
pub fn store_identity(dir: &Path, node: &NodeConfig) -> Result<String> {
    let path = dir.join(IDENTITY_FILE);
    let io = identity_io(&path);
    match std::fs::read_to_string(&path) {
        Ok(s) => {
            let id = s.trim();
            if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                let id = id.to_ascii_uppercase();
                if !node.owns_address(&id)? {
                    return new_identity(dir, &path, node);
                }
                Ok(id)
            } else {
                Err(Error::Config(format!(
                    "{} does not hold a 32-hex-digit store address; fix or delete it",
                    path.display()
                )))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => new_identity(dir, &path, node),
        Err(e) => Err(io(e)),
    }
}

/// The error of a store address file that cannot be read or written: an
/// IO error of its kind (Python: `LogFileNotFoundError`,
/// `LogPermissionError`, ...), naming the file.
fn identity_io(path: &Path) -> impl Fn(std::io::Error) -> Error + Copy + '_ {
    move |e| {
        Error::Log(crate::log::LogError::io(
            "read or create the store's address file (the store's path must name a \
             directory it can write in)",
            path,
            e,
        ))
    }
}

/// Writes a new address to `path` (through a synced temporary file).
fn new_identity(dir: &Path, path: &Path, node: &NodeConfig) -> Result<String> {
    let io = identity_io(path);
    std::fs::create_dir_all(dir).map_err(io)?;
    let id = node.new_address()?;
    let tmp = dir.join(format!("{IDENTITY_FILE}.tmp"));
    std::fs::write(&tmp, format!("{id}\n")).map_err(io)?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(id)
}

/// A store node persisting to the durable log.
pub type Store = StoreNode<DurableLog>;

impl StoreNode<DurableLog> {
    /// Opens (recovering) the store in `dir` and starts its node thread. The
    /// address is kept in `dir/store.id` and reused after a restart.
    pub fn open(dir: impl AsRef<Path>, cfg: StoreConfig) -> Result<Self> {
        let dir = dir.as_ref();
        if dir.as_os_str().is_empty() {
            // Not the current directory by accident.
            return Err(Error::Config(
                "the store's path is empty: name its directory (\".\" for the current one)".into(),
            ));
        }
        if cfg.state.max_record_bytes == 0 {
            return Err(Error::Config(
                "max_record_bytes must be at least 1 (stores drop larger records)".into(),
            ));
        }
        if cfg.log.flush_messages == 0 {
            return Err(Error::Config(
                "flush_messages must be at least 1 (use fsync=always to sync every append)".into(),
            ));
        }
        // Before anything is written: a refused setting leaves no directory.
        cfg.node.validate()?;
        let address = store_identity(dir, &cfg.node)?;
        let log = DurableLog::open(dir.join(LOG_DIR), cfg.log)?;
        let commits = Some(dir.join(groups::COMMITS_FILE));
        Self::start_keeping(&address, log, cfg.node, cfg.state, commits)
    }
}
