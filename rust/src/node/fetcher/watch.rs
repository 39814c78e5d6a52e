//! [`HeadsWatch`]: a read client kept across rounds of
//! [`offsets`](super::offsets) for one topic, and the keeper thread that
//! goes on beaconing and reading for it between rounds.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::node::config::{check_name, NodeConfig};
use crate::wire::Message;

use super::client::Client;
use super::heads::Probe;
use super::Offsets;

/// A read client kept across rounds of [`offsets`] for one topic: a
/// streaming source's planning, once per micro-batch. The first round (and
/// one in which a peer connects) waits `settle` as [`offsets`] does; a later
/// round asks once and ends when as many answers came as in the round before,
/// so it costs a round trip, not `settle` (see `Client::heads_round`). Heads
/// only rise.
///
/// Between rounds a keeper thread (started after the first round) goes on
/// beaconing and reading for the client, every `KEEP_SLICE`, so after a
/// pause longer than the stores' `beacon_timeout` (a `processingTime`
/// trigger of a minute) they still know it and the next round is a quick
/// one. The keeper touches the sockets only under the client's lock, never
/// during a round.
pub struct HeadsWatch {
    state: Arc<Mutex<WatchState>>,
    stop: Arc<AtomicBool>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

/// Rounds of a [`HeadsWatch`] so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WatchStats {
    /// Rounds, and how many of them ended on their count of answers.
    pub rounds: u64,
    pub quick_rounds: u64,
    /// Rounds that probed first offsets, and how many of those probes ended
    /// at once (every partition answered 0) instead of on `settle`.
    pub probes: u64,
    pub quick_probes: u64,
}

/// How often the keeper of an idle [`HeadsWatch`] beacons and reads.
const KEEP_SLICE: Duration = Duration::from_millis(100);

/// The client of a [`HeadsWatch`] and what its rounds learnt.
pub(super) struct WatchState {
    client: Client,
    topic: String,
    heads: BTreeMap<String, u64>,
    /// When each partition of `heads` last answered, and how long one that
    /// no longer answers is kept (None: for good).
    seen: HashMap<String, Instant>,
    forget_after: Option<Duration>,
    /// Answers per ask in the last round.
    expect: usize,
    stats: WatchStats,
}

impl WatchState {
    pub(super) fn open(
        cfg: &NodeConfig,
        topic: &str,
        forget_after: Option<Duration>,
    ) -> Result<Self> {
        check_name("topic", topic)?;
        if forget_after.is_some_and(|f| f.is_zero()) {
            return Err(Error::Config(
                "forget_after must be > 0 (None: never forget)".into(),
            ));
        }
        let mut client = Client::open(cfg)?;
        client.answered = forget_after.map(|_| Vec::new());
        Ok(Self {
            client,
            topic: topic.to_string(),
            heads: BTreeMap::new(),
            seen: HashMap::new(),
            forget_after,
            expect: 0,
            stats: WatchStats::default(),
        })
    }

    pub(super) fn round<E: From<Error>>(
        &mut self,
        only: Option<&[String]>,
        exclude: &[String],
        timeout: Duration,
        settle: Duration,
        mut check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<BTreeMap<String, Offsets>, E> {
        let (mut got, round) = self.client.offsets_round(
            &self.topic,
            &mut self.heads,
            only,
            exclude,
            timeout,
            settle,
            Some(self.expect),
            &mut check,
        )?;
        self.age_out(Instant::now());
        got.retain(|p, _| self.heads.contains_key(p));
        let st = &mut self.stats;
        self.expect = round.answers;
        st.rounds += 1;
        st.quick_rounds += u64::from(round.quick);
        st.probes += u64::from(round.probe != Probe::None);
        st.quick_probes += u64::from(round.probe == Probe::Quick);
        Ok(got)
    }

    /// Notes the partitions that answered, and forgets those that have not
    /// for `forget_after`: no store holds records of them any more (or every
    /// store that does has been away that long).
    fn age_out(&mut self, now: Instant) {
        let (Some(after), Some(answered)) = (self.forget_after, self.client.answered.as_mut())
        else {
            // Nothing is forgotten: no answers kept, no answer times.
            return;
        };
        let seen = &mut self.seen;
        seen.extend(answered.drain(..).map(|p| (p, now)));
        seen.retain(|_, t| now.saturating_duration_since(*t) < after);
        self.heads.retain(|p, _| seen.contains_key(p));
    }

    /// Between rounds, without waiting: beacons when due, takes in peers'
    /// beacons and subscriptions (a peer that connects makes the next round
    /// a full one) and late answers (heads only rise).
    fn idle(&mut self) -> Result<()> {
        let own = self.client.core.address.clone();
        let topic = self.topic.as_bytes().to_vec();
        let heads = &mut self.heads;
        // Out while `step` borrows the client; back below.
        let mut answered = self.client.answered.take();
        let r = self.client.step(Instant::now(), &mut |_| {}, &mut |m| {
            if let Message::DirectHead(h) = m {
                if h.topic == own.as_slice() && h.subject == topic.as_slice() {
                    let p = String::from_utf8_lossy(h.address).into_owned();
                    let next = h.sequence.saturating_add(1);
                    if let Some(a) = answered.as_mut() {
                        a.push(p.clone());
                    }
                    let e = heads.entry(p).or_insert(next);
                    *e = (*e).max(next);
                }
            }
        });
        self.client.answered = answered;
        r
    }
}

impl HeadsWatch {
    /// A read client for heads rounds of `topic`; a partition no store has
    /// announced for `forget_after` (if given) leaves its answers.
    pub fn open(cfg: &NodeConfig, topic: &str, forget_after: Option<Duration>) -> Result<Self> {
        Ok(Self {
            state: Arc::new(Mutex::new(WatchState::open(cfg, topic, forget_after)?)),
            stop: Arc::new(AtomicBool::new(false)),
            keeper: None,
        })
    }

    /// One round: every partition known with `first` (probed as in
    /// [`offsets`] for the partitions of `only` not in `exclude`) and `next`.
    pub fn offsets<E: From<Error>>(
        &mut self,
        only: Option<&[String]>,
        exclude: &[String],
        timeout: Duration,
        settle: Duration,
        check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<BTreeMap<String, Offsets>, E> {
        let got = lock(&self.state).round(only, exclude, timeout, settle, check);
        if self.keeper.is_none() {
            self.keeper = Some(self.spawn_keeper()?);
        }
        got
    }

    /// Rounds so far.
    pub fn stats(&self) -> WatchStats {
        lock(&self.state).stats
    }

    fn spawn_keeper(&self) -> Result<std::thread::JoinHandle<()>> {
        let (state, stop) = (self.state.clone(), self.stop.clone());
        std::thread::Builder::new()
            .name("dafka-heads-watch".into())
            .spawn(move || loop {
                std::thread::park_timeout(KEEP_SLICE);
                if stop.load(Ordering::Acquire) {
                    return;
                }
                // A round in progress reads the sockets itself.
                let Ok(mut st) = state.try_lock() else {
                    continue;
                };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.idle()));
                match r {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        // The next round meets the same socket error itself.
                        tracing::warn!(
                            "heads watch of {:?}: stops keeping between rounds: {e}",
                            st.topic
                        );
                        return;
                    }
                    Err(_) => {
                        tracing::error!(
                            "heads watch of {:?}: its keeper panicked; rounds go on without it",
                            st.topic
                        );
                        return;
                    }
                }
            })
            .map_err(|e| {
                Error::Config(format!("cannot start the heads watch's keeper thread: {e}"))
            })
    }
}

impl Drop for HeadsWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.keeper.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

/// The watch's state, even after a keeper panicked holding it (its state
/// is a socket client and counters: a round works from whatever it left).
fn lock(m: &Mutex<WatchState>) -> std::sync::MutexGuard<'_, WatchState> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
