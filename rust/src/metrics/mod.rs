//! Prometheus metrics (docs/metrics.md): what a scrape reads, how it is
//! encoded, and the HTTP server that answers it ([`http`]).
//!
//! A node's figures are the counters it already publishes for `stats()`:
//! relaxed atomics the node thread writes ([`Stats`], the store's
//! [`StoreShared`], its [`SyncTimes`](crate::node::stats::SyncTimes)). A
//! [`Source`] holds an `Arc` of them, so a scrape reads atomics on the
//! server's own thread and never waits on, or takes, a lock a node thread
//! holds. The text is the OpenMetrics exposition of the `prometheus-client`
//! crate ([`families`] builds the families it encodes).
//!
//! The binaries serve their one node ([`Sources::Fixed`]); a Python process
//! serves every node it has open ([`Sources::Process`]): each node class
//! [`register`]s itself when created and ends its [`Registration`] when
//! closed.

mod families;
pub mod http;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::node::stats::Stats;
use crate::node::store::StoreShared;
use crate::node::tower::NodeCounts;

pub use http::MetricsServer;

/// What kind of node a [`Source`] is (the `kind` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Producer,
    Consumer,
    Store,
    Tower,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Producer => "producer",
            Kind::Consumer => "consumer",
            Kind::Store => "store",
            Kind::Tower => "tower",
        }
    }
}

/// Something that holds a node's [`Stats`] (its shared state), kept alive
/// by the [`Source`] while a scrape reads it.
pub trait HasStats: Send + Sync {
    fn stats(&self) -> &Stats;
}

impl HasStats for Stats {
    fn stats(&self) -> &Stats {
        self
    }
}

/// One node's figures, as a scrape reads them.
#[derive(Clone)]
pub struct Source {
    pub(crate) kind: Kind,
    /// The `node` label: a node's address, a tower's endpoint.
    pub(crate) node: String,
    /// The `topic` label, for a node of one topic (a producer).
    pub(crate) topic: Option<String>,
    pub(crate) stats: Arc<dyn HasStats>,
    /// A store's own counters beside its [`Stats`].
    pub(crate) store: Option<Arc<StoreShared>>,
    /// A tower's nodes by kind.
    pub(crate) tower: Option<Arc<NodeCounts>>,
}

impl Source {
    /// A producer, consumer or tower: its [`Stats`] only.
    pub fn new(kind: Kind, node: &str, topic: Option<&str>, stats: Arc<dyn HasStats>) -> Self {
        Self {
            kind,
            node: node.to_string(),
            topic: topic.map(str::to_string),
            stats,
            store: None,
            tower: None,
        }
    }

    /// A store: its [`Stats`] and its own counters.
    pub fn store(node: &str, shared: Arc<StoreShared>) -> Self {
        Self {
            kind: Kind::Store,
            node: node.to_string(),
            topic: None,
            stats: shared.clone(),
            store: Some(shared),
            tower: None,
        }
    }
}

impl HasStats for StoreShared {
    fn stats(&self) -> &Stats {
        &self.stats
    }
}

/// Which nodes a [`MetricsServer`] shows.
#[derive(Clone)]
pub enum Sources {
    /// These (a binary's one node).
    Fixed(Vec<Source>),
    /// Every node of the process registered at the time of the scrape.
    Process,
}

impl Sources {
    fn current(&self) -> Vec<Source> {
        match self {
            Sources::Fixed(v) => v.clone(),
            Sources::Process => live(),
        }
    }
}

/// The nodes of this process, by registration id. Taken only to add, end
/// or copy a registration: never by a node thread.
static LIVE: Mutex<Vec<(u64, Source)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn live_list() -> std::sync::MutexGuard<'static, Vec<(u64, Source)>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Adds `source` to the nodes [`Sources::Process`] shows, until the
/// returned registration is ended or dropped.
pub fn register(source: Source) -> Registration {
    let id = NEXT_ID.fetch_add(1, Relaxed);
    live_list().push((id, source));
    Registration(id)
}

/// The nodes registered now.
pub fn live() -> Vec<Source> {
    live_list().iter().map(|(_, s)| s.clone()).collect()
}

/// A node's place among the process's metrics sources ([`register`]).
#[derive(Debug)]
pub struct Registration(u64);

impl Registration {
    /// Removes the node from the process's sources (a closed node); again
    /// is a no-op.
    pub fn end(&self) {
        live_list().retain(|(id, _)| *id != self.0);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.end();
    }
}

/// The OpenMetrics text of `sources` (ending in `# EOF`).
pub fn encode(sources: &[Source]) -> String {
    families::encode(sources)
}

/// Checks a `HOST:PORT` to listen on (without binding), for a message that
/// says what to give.
pub fn check_listen(what: &str, listen: &str) -> crate::error::Result<()> {
    use std::net::ToSocketAddrs;
    let ok = listen.rsplit_once(':').is_some_and(|(h, p)| {
        // Not a URL or endpoint (no name lookup of one).
        let host_ok = !h.is_empty() && !h.contains(['/', ' ']);
        host_ok && p.parse::<u16>().is_ok()
    }) && listen
        .to_socket_addrs()
        .is_ok_and(|mut a| a.next().is_some());
    if ok {
        Ok(())
    } else {
        Err(crate::error::Error::Config(format!(
            "{what} {listen:?}: give HOST:PORT to serve metrics on, e.g. 127.0.0.1:9100 \
             (port 0: any free port)"
        )))
    }
}

#[cfg(test)]
mod tests;
