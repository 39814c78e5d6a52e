//! A bounded, blocking read client for batch jobs (Spark executors): [`heads`]
//! asks stores and producers for a topic's partitions and their next offsets
//! (GET-HEADS → DIRECT-HEAD), [`fetch_range`] reads exactly `[start, end)` of
//! one partition with FETCH → DIRECT-RECORD and stops. Both run in the calling
//! thread with their own short-lived node (subscribed only to messages
//! addressed to it), so nothing outlives the call.
//!
//! Stores learn about the client through discovery (towers) and connect to its
//! XPUB; a store listed only in `peers` cannot answer unless it also lists the
//! client, so reads should name `towers`.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result, Unanswered};
use crate::meta;
use crate::node::config::{check_name, NodeConfig};
use crate::node::out::{poll_timeout, Out};
use crate::node::socket::{Core, Frames};
use crate::node::stats::Stats;
use crate::wire::{decode, Kind, Message, NodeType, Record, Subscription};

/// How often an unanswered GET-HEADS or FETCH is repeated.
const RETRY: Duration = Duration::from_millis(200);
/// FETCH rounds whose answers all start past the wanted offset before the
/// missing records count as deleted by retention.
const LOSS_ROUNDS: u32 = 3;
/// The most records one FETCH asks for.
const MAX_FETCH: u64 = 10_000;
/// Subscriptions read from the XPUB per turn.
const XPUB_BATCH: usize = 4096;
/// Slice of a blocking wait between caller checks (Ctrl-C).
const SLICE: Duration = Duration::from_millis(100);

/// What [`fetch_range`] read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// `(offset, body)` in offset order, each offset once: each record's
    /// metadata and value ([`crate::meta::split`]).
    pub records: Vec<(u64, Vec<u8>)>,
    /// Ranges `[from, to)` no store holds any more (only with `fail_on_loss` off).
    pub lost: Vec<(u64, u64)>,
}

struct Client {
    core: Core,
    frames: Frames,
    stats: Stats,
    /// The topics (empty: every topic) of the GET-HEADS subscriptions that
    /// arrived since a heads round last looked: peers that connected, seen
    /// by whichever phase was reading, kept for the next heads round.
    joined: Vec<Vec<u8>>,
    /// Partitions that answered a heads round, kept only for a
    /// [`HeadsWatch`] that forgets (it takes them to age out the ones no
    /// store announces any more); None: nobody reads them.
    answered: Option<Vec<String>>,
}

impl Client {
    fn open(cfg: &NodeConfig) -> Result<Self> {
        let ctx = zmq::Context::new();
        let address = cfg.new_address()?;
        let core = Core::open(&ctx, cfg, NodeType::Consumer, &address, &[])?;
        Ok(Self {
            core,
            frames: Frames::default(),
            stats: Stats::default(),
            joined: Vec::new(),
            answered: None,
        })
    }

    /// [`Error::Timeout`] of a read about `topic` that waited `waited`,
    /// naming the towers if none was heard (then no store could find us).
    fn timeout(&self, topic: impl Into<String>, unanswered: Unanswered, waited: Duration) -> Error {
        let silent = self.core.disc.towers_silent(Instant::now());
        Error::Timeout {
            topic: topic.into(),
            unanswered,
            waited,
            towers_unheard: silent.map(<[String]>::to_vec).unwrap_or_default(),
        }
    }

    /// Whether a peer that answers GET-HEADS for `topic` connected since the
    /// last call.
    fn take_joined(&mut self, topic: &str) -> bool {
        let t = topic.as_bytes();
        let any = self.joined.iter().any(|k| k.is_empty() || k == t);
        self.joined.clear();
        any
    }

    /// Waits up to `until` (at most one slice) for input; hands every XPUB
    /// subscription and decoded SUB message to `on_sub` / `on_msg`.
    fn step(
        &mut self,
        until: Instant,
        on_sub: &mut dyn FnMut(Kind, &[u8]),
        on_msg: &mut dyn FnMut(&Message<'_>),
    ) -> Result<()> {
        self.core.count_unsendable(&self.stats);
        let now = Instant::now();
        let cap = Some(until.min(now + SLICE));
        let timeout = poll_timeout(now, [cap, self.core.disc.next_deadline()]);
        let r = self.core.poll_sockets(timeout)?;
        let (xpub_in, sub_in, beacon_in) = (r.xpub, r.sub, r.beacon);
        if xpub_in {
            // Bounded per turn, as the SUB: a flood of subscriptions must not
            // keep the loop from everything else.
            for _ in 0..XPUB_BATCH {
                if !self.core.recv_xpub(&mut self.frames, &self.stats)? {
                    break;
                }
                let (s, n) = self.frames.slices();
                if n != 1 {
                    continue;
                }
                if let Ok(sub) = Subscription::decode(s[0]) {
                    if let (true, Some((kind, key))) = (sub.subscribe, sub.target()) {
                        if kind == Kind::GetHeads && !self.joined.iter().any(|k| k == key) {
                            // Once per topic (the empty one: every topic): a
                            // client that never asks (`fetch_ranges`) keeps
                            // one entry per topic, not one per connect.
                            self.joined.push(key.to_vec());
                        }
                        on_sub(kind, key);
                    }
                }
            }
        }
        if sub_in {
            let mut body = Vec::new();
            for _ in 0..4096 {
                let Some(from) = self.core.recv_sub(&mut self.frames)? else {
                    break;
                };
                if self.frames.too_long() {
                    continue;
                }
                let (s, n) = self.frames.slices();
                let decoded = decode(&s[..n]);
                if self.core.refuse(from, &decoded, &self.stats) {
                    continue;
                }
                // FETCH answers go on as DIRECT-RECORDs of bodies: one of
                // a node that knows no metadata gets a body with no time.
                match decoded {
                    Ok((Message::DirectMetaRecordBatch(b), _)) => {
                        for r in b.records() {
                            on_msg(&Message::DirectRecord(r));
                        }
                    }
                    Ok((Message::DirectRecordBatch(b), _)) => {
                        for r in b.records() {
                            body.clear();
                            meta::wrap(&mut body, None, r.content);
                            on_msg(&Message::DirectRecord(Record {
                                content: &body,
                                ..r
                            }));
                        }
                    }
                    Ok((Message::DirectRecord(r), _)) => {
                        body.clear();
                        meta::wrap(&mut body, None, r.content);
                        on_msg(&Message::DirectRecord(Record {
                            content: &body,
                            ..r
                        }));
                    }
                    Ok((m, _)) => on_msg(&m),
                    Err(_) => {}
                }
            }
        }
        if beacon_in {
            self.core.on_beacons(&self.stats)?;
        }
        let now = Instant::now();
        if self.core.disc.next_deadline().is_some_and(|d| d <= now) {
            self.core.on_timer(now, &self.stats)?;
        }
        Ok(())
    }
}

/// The partitions of `topic` that stores (and live producers) hold, each with
/// its next offset (last offset + 1). Asks until `settle` has passed with no
/// new peer or partition after the first peer that answers GET-HEADS
/// connected (a head that keeps rising does not hold the round open); fails
/// with [`Error::Timeout`] when none connected within `timeout`.
pub fn heads<E: From<Error>>(
    cfg: &NodeConfig,
    topic: &str,
    timeout: Duration,
    settle: Duration,
    check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<BTreeMap<String, u64>, E> {
    let got = offsets(cfg, topic, Some(&[]), &[], timeout, settle, check)?;
    Ok(got.into_iter().map(|(p, o)| (p, o.next)).collect())
}

/// For each partition of `topic` that stores hold, the first offset whose
/// record time (its timestamp, else its append time) is at or after `time`
/// (ms since the epoch), or the partition's next offset if none is that late:
/// where a reader starting at `time` begins (Kafka's `offsetsForTimes`,
/// with "none" as the end). Asks the stores (TIME-QUERY, PROTOCOL.md) and
/// takes the lowest answer per partition; ends `settle` after the first
/// store connected with no new store or lower answer since; fails with
/// [`Error::Timeout`] when no store connected within `timeout`.
pub fn offsets_for_time<E: From<Error>>(
    cfg: &NodeConfig,
    topic: &str,
    time: u64,
    timeout: Duration,
    settle: Duration,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<BTreeMap<String, u64>, E> {
    check_name("topic", topic)?;
    let mut c = Client::open(cfg)?;
    let own = c.core.address.clone();
    let start = Instant::now();
    let deadline = start + timeout;
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    // Since the first store connected: the last time something changed.
    let mut changed: Option<Instant> = None;
    let mut ask = false;
    let mut next_ask: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if let Some(t) = changed {
            if now.duration_since(t) >= settle {
                return Ok(got);
            }
        } else if now >= deadline {
            return Err(c
                .timeout(topic.to_string(), Unanswered::Topic, timeout)
                .into());
        }
        if ask || next_ask.is_some_and(|t| now >= t) {
            c.core.emit(&Out::TimeQuery {
                topic: topic.as_bytes().to_vec(),
                time,
            })?;
            ask = false;
            next_ask = Some(now + RETRY);
        }
        let until = changed.map_or(deadline, |t| t + settle);
        let mut joined = false;
        let mut lower = false;
        c.step(
            until,
            &mut |kind, key| {
                if kind == Kind::TimeQuery && (key.is_empty() || topic.as_bytes().starts_with(key))
                {
                    joined = true;
                }
            },
            &mut |m| {
                if let Message::TimeOffset(o) = m {
                    if o.topic == own.as_slice() && o.subject == topic.as_bytes() {
                        let p = String::from_utf8_lossy(o.address).into_owned();
                        let e = got.entry(p).or_insert(u64::MAX);
                        if o.sequence < *e {
                            *e = o.sequence;
                            lower = true;
                        }
                    }
                }
            },
        )?;
        let now = Instant::now();
        if joined {
            // A store connected: ask it now, and give it a settle period.
            ask = true;
            changed = Some(now);
        } else if lower && changed.is_some() {
            changed = Some(now);
        }
        check()?;
    }
}

/// The topics the stores hold records of, by name: a GET-HEADS for every
/// topic (the empty one, as stores ask each other) once a store connected,
/// the DIRECT-HEADs' subjects collected until `settle` passed with no new
/// store or topic. Fails with [`Error::Timeout`] when no store connected
/// within `timeout`. In a secure cluster only a store's key may ask for every
/// topic: a reader's question is refused and this finds none.
pub fn topics<E: From<Error>>(
    cfg: &NodeConfig,
    timeout: Duration,
    settle: Duration,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<std::collections::BTreeSet<Vec<u8>>, E> {
    let mut c = Client::open(cfg)?;
    let own = c.core.address.clone();
    let deadline = Instant::now() + timeout;
    let mut got = std::collections::BTreeSet::new();
    let mut changed: Option<Instant> = None;
    let mut next_ask: Option<Instant> = None;
    loop {
        let now = Instant::now();
        match changed {
            Some(t) if now.duration_since(t) >= settle => return Ok(got),
            None if now >= deadline => {
                return Err(c.timeout(String::new(), Unanswered::Topic, timeout).into())
            }
            _ => {}
        }
        if next_ask.is_some_and(|t| now >= t) {
            c.core.emit(&Out::GetHeads { topic: Vec::new() })?;
            next_ask = Some(now + RETRY);
        }
        let until = changed.map_or(deadline, |t| t + settle);
        let (mut joined, mut new) = (false, false);
        c.step(
            until,
            &mut |kind, key| joined |= kind == Kind::GetHeads && key.is_empty(),
            &mut |m| {
                if let Message::DirectHead(h) = m {
                    if h.topic == own.as_slice() {
                        new |= got.insert(h.subject.to_vec());
                    }
                }
            },
        )?;
        let now = Instant::now();
        if joined {
            // A store connected: ask it now, and give it a settle period.
            next_ask = Some(now);
            changed = Some(now);
        } else if new && changed.is_some() {
            changed = Some(now);
        }
        check()?;
    }
}

/// What [`offsets`] found of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// The lowest offset any store or the producer still holds: where a
    /// reader starting at "earliest" begins (retention may have deleted what
    /// came before). 0 when nobody answered for it.
    pub first: u64,
    /// The next offset (last + 1), as [`heads`] reports it.
    pub next: u64,
}

/// [`heads`], plus each partition's first offset still held, so readers
/// resolve "earliest" to where the partition now begins instead of to 0 (what
/// Kafka's `earliest` does). The first-offset probe covers the partitions in
/// `only` (all when `None`) that are not in `exclude`; the others report
/// `first` 0.
///
/// There is no wire field for a first offset: each partition gets a
/// `FETCH(0, 1)`, which a store answers with its first record held (it answers
/// a FETCH below what it holds from there); the lowest answer of every peer
/// wins. Probing ends as soon as every partition answered 0 (nothing lower
/// exists), else once every partition answered and `settle` passed with no new
/// peer or lower answer, or after `PROBE_ROUNDS` retries for the partitions
/// nobody answered.
pub fn offsets<E: From<Error>>(
    cfg: &NodeConfig,
    topic: &str,
    only: Option<&[String]>,
    exclude: &[String],
    timeout: Duration,
    settle: Duration,
    check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<BTreeMap<String, Offsets>, E> {
    // A new client's round is a full one.
    WatchState::open(cfg, topic, None)?.round(only, exclude, timeout, settle, check)
}

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
struct WatchState {
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
    fn open(cfg: &NodeConfig, topic: &str, forget_after: Option<Duration>) -> Result<Self> {
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

    fn round<E: From<Error>>(
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
        let r = self.client.step(Instant::now(), &mut |_, _| {}, &mut |m| {
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

/// Retry rounds ([`RETRY`] apart) of the first-offset probe for partitions
/// nobody answered before [`offsets`] gives up on them.
const PROBE_ROUNDS: u32 = 5;

/// How a heads round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RoundEnd {
    /// It ended on its count of answers, not on `settle`.
    quick: bool,
    /// The most answers one ask had (those that came before the next ask):
    /// what the next round of the same peers expects.
    answers: usize,
    /// How the first-offset probe after it ended.
    probe: Probe,
}

/// How a round's first-offset probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// There was none: no partition to probe.
    None,
    /// Every partition answered offset 0 (nothing lower can come): at once.
    Quick,
    /// On `settle` after the last answer, or on its retries or deadline.
    Settled,
}

/// The answers to each GET-HEADS ask of one round, for what the next round
/// of the same peers expects.
#[derive(Debug, Default)]
struct AskWindows {
    /// Answers since the last ask, when it went out, and whether it was a
    /// timed re-ask (no peer had just connected).
    count: usize,
    since: Option<Instant>,
    timed: bool,
    /// The most answers a timed re-ask had (its answers come within a round
    /// trip, long before the next ask), and the most any ask had.
    best_timed: Option<usize>,
    best: usize,
}

impl AskWindows {
    fn asked(&mut self, now: Instant, timed: bool) {
        self.close(now);
        (self.count, self.since, self.timed) = (0, Some(now), timed);
    }

    fn close(&mut self, now: Instant) {
        self.best = self.best.max(self.count);
        if self.timed && self.since.is_some_and(|t| now >= t + RETRY / 2) {
            self.best_timed = Some(self.best_timed.map_or(self.count, |b| b.max(self.count)));
        }
    }

    /// Answers per ask: rather too many (the next round then waits `settle`
    /// once and learns the new count) than too few (it would end before
    /// every peer answered).
    fn expect(mut self, now: Instant) -> usize {
        self.close(now);
        self.best_timed.unwrap_or(self.best)
    }
}

impl Client {
    /// One heads round into `heads` (raised, never lowered).
    ///
    /// A full round (`expect` None or 0) waits for the first GET-HEADS
    /// subscriber, then asks (again every [`RETRY`], and whenever a peer
    /// connects) until `settle` passed with no new peer or partition.
    ///
    /// A quick round (a [`HeadsWatch`] whose peers answered before) expects
    /// as many answers as the last round had per ask: it first takes in the
    /// answers to earlier asks still queued (into `heads`, not counted), asks
    /// once, and ends as soon as that many answers came: every peer answered
    /// again, in one round trip. It ends on `settle` instead when fewer came
    /// (a peer went away; the next round expects the new count), and turns
    /// into a full round when a peer connects (it may hold partitions nobody
    /// answered for).
    #[allow(clippy::too_many_arguments)]
    fn heads_round<E: From<Error>>(
        &mut self,
        topic: &str,
        heads: &mut BTreeMap<String, u64>,
        timeout: Duration,
        settle: Duration,
        expect: Option<usize>,
        check: &mut impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<RoundEnd, E> {
        let own = self.core.address.clone();
        let start = Instant::now();
        let deadline = start + timeout;
        let mut quick = expect.filter(|&n| n > 0);
        let mut draining = quick.is_some();
        let mut first_peer: Option<Instant> = quick.map(|_| start);
        let mut last_news = start;
        let mut next_ask = start;
        // The next ask follows a peer's connecting (or is the first one).
        let mut peer_ask = true;
        let mut windows = AskWindows::default();
        let ask = Out::GetHeads {
            topic: topic.as_bytes().to_vec(),
        };
        let end = |quick: bool, windows: AskWindows| RoundEnd {
            quick,
            answers: windows.expect(Instant::now()),
            probe: Probe::None,
        };
        loop {
            let now = Instant::now();
            match (quick, first_peer) {
                (Some(n), _) if !draining && windows.count >= n => {
                    return Ok(end(true, windows));
                }
                (Some(_), _) if now >= start + settle => return Ok(end(false, windows)),
                (None, Some(t)) if now >= t + settle && now >= last_news + settle => {
                    return Ok(end(false, windows));
                }
                _ => {}
            }
            if now >= deadline {
                return match first_peer {
                    Some(_) => Ok(end(false, windows)),
                    None => Err(self
                        .timeout(topic.to_string(), Unanswered::Topic, timeout)
                        .into()),
                };
            }
            // A quick round asks once; a full one re-asks every RETRY.
            if !draining && first_peer.is_some() && now >= next_ask {
                self.core.emit(&ask)?;
                windows.asked(now, !peer_ask);
                peer_ask = false;
                next_ask = if quick.is_some() {
                    deadline
                } else {
                    now + RETRY
                };
            }
            let mut outs: Vec<Out> = Vec::new();
            let (mut news, mut received) = (false, 0usize);
            let until = match quick {
                _ if draining => now,
                Some(_) => deadline.min(start + settle),
                None => deadline,
            };
            let counting = !draining;
            // Out while `step` borrows the client; back below.
            let mut answered = self.answered.take();
            let stepped = self.step(until, &mut |_, _| {}, &mut |m| {
                received += 1;
                match m {
                    Message::DirectHead(h)
                        if h.topic == own.as_slice() && h.subject == topic.as_bytes() =>
                    {
                        windows.count += usize::from(counting);
                        let p = String::from_utf8_lossy(h.address).into_owned();
                        let next = h.sequence.saturating_add(1);
                        if let Some(a) = answered.as_mut() {
                            a.push(p.clone());
                        }
                        // Only a partition new to the round is news: a
                        // head that rose (a live producer writing,
                        // re-asked every RETRY) would keep the round
                        // from ever settling.
                        match heads.entry(p) {
                            Entry::Vacant(v) => {
                                v.insert(next);
                                news = true;
                            }
                            Entry::Occupied(mut o) => {
                                let e = o.get_mut();
                                *e = (*e).max(next);
                            }
                        }
                    }
                    Message::StoreHello(s) if s.topic == own.as_slice() => {
                        outs.push(Out::ConsumerHello {
                            to: s.address.to_vec(),
                            subjects: vec![topic.as_bytes().to_vec()],
                        });
                    }
                    _ => {}
                }
            });
            self.answered = answered;
            stepped?;
            let now = Instant::now();
            if draining && received == 0 {
                draining = false;
            }
            // Also those that connected in another phase or between rounds.
            let peer = self.take_joined(topic);
            if peer {
                // A peer that connected now missed the asks so far and may
                // hold partitions nobody answered for: a full round.
                quick = None;
                draining = false;
                first_peer.get_or_insert(now);
                last_news = now;
                next_ask = now;
                peer_ask = true;
            }
            if news {
                last_news = now;
            }
            self.core.emit_all(&outs)?;
            check()?;
        }
    }

    /// A heads round, then the first offsets of the partitions of `only` not
    /// in `exclude` (see [`offsets`]); the probe is skipped when it covers no
    /// partition.
    #[allow(clippy::too_many_arguments)]
    fn offsets_round<E: From<Error>>(
        &mut self,
        topic: &str,
        heads: &mut BTreeMap<String, u64>,
        only: Option<&[String]>,
        exclude: &[String],
        timeout: Duration,
        settle: Duration,
        expect: Option<usize>,
        check: &mut impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<(BTreeMap<String, Offsets>, RoundEnd), E> {
        let deadline = Instant::now() + timeout;
        let round = self.heads_round(topic, heads, timeout, settle, expect, check)?;
        let only: Option<HashSet<&String>> = only.map(|o| o.iter().collect());
        let exclude: HashSet<&String> = exclude.iter().collect();
        let probe: Vec<&String> = heads
            .keys()
            .filter(|p| only.as_ref().is_none_or(|o| o.contains(p)) && !exclude.contains(p))
            .collect();
        let (firsts, probe) = if probe.is_empty() {
            (BTreeMap::new(), Probe::None)
        } else {
            match self.firsts(topic, &probe, deadline, settle, check)? {
                (f, true) => (f, Probe::Quick),
                (f, false) => (f, Probe::Settled),
            }
        };
        let got = heads
            .iter()
            .map(|(p, &next)| {
                let first = firsts.get(p.as_str()).copied().unwrap_or(0).min(next);
                (p.clone(), Offsets { first, next })
            })
            .collect();
        Ok((got, RoundEnd { probe, ..round }))
    }

    /// The lowest offset answered to a `FETCH(0, 1)` of each partition in
    /// `parts` (see [`offsets`]); partitions nobody answered are left out.
    /// True when it ended as soon as every partition answered 0, without
    /// waiting `settle`.
    fn firsts<E: From<Error>>(
        &mut self,
        topic: &str,
        parts: &[&String],
        deadline: Instant,
        settle: Duration,
        check: &mut impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<(BTreeMap<String, u64>, bool), E> {
        let own = self.core.address.clone();
        let wanted: HashSet<&str> = parts.iter().map(|p| p.as_str()).collect();
        let mut firsts: BTreeMap<String, u64> = BTreeMap::new();
        let mut last_news = Instant::now();
        // Everyone is asked at once; a peer that connects later asks again.
        let mut ask_all = true;
        let mut next_retry = Instant::now();
        let mut rounds = 0u32;
        let fetch = |p: &str| Out::Fetch {
            partition: p.as_bytes().to_vec(),
            subject: topic.as_bytes().to_vec(),
            sequence: 0,
            count: 1,
        };
        loop {
            let now = Instant::now();
            let all = firsts.len() == parts.len();
            // Every partition answered from offset 0: no peer can answer
            // lower, so `settle` has nothing left to wait for (a partition
            // new since the last micro-batch, the common case).
            if all && firsts.values().all(|&f| f == 0) {
                return Ok((firsts, true));
            }
            if now >= deadline || (now >= last_news + settle && (all || rounds >= PROBE_ROUNDS)) {
                return Ok((firsts, false));
            }
            if ask_all || (!all && now >= next_retry) {
                let asks: Vec<Out> = parts
                    .iter()
                    .filter(|p| ask_all || !firsts.contains_key(p.as_str()))
                    .map(|p| fetch(p))
                    .collect();
                self.core.emit_all(&asks)?;
                if !ask_all {
                    rounds += 1;
                }
                next_retry = now + RETRY;
            }
            let mut peer = false;
            let mut news = false;
            self.step(
                deadline.min(next_retry),
                &mut |kind, _| peer |= kind == Kind::Fetch,
                &mut |m| {
                    if let Message::DirectRecord(r) = m {
                        if r.topic == own.as_slice() && r.subject == topic.as_bytes() {
                            let p = String::from_utf8_lossy(r.address);
                            if wanted.contains(p.as_ref()) {
                                let e = firsts.entry(p.into_owned()).or_insert(u64::MAX);
                                if r.sequence < *e {
                                    *e = r.sequence;
                                    news = true;
                                }
                            }
                        }
                    }
                },
            )?;
            if peer || news {
                last_news = Instant::now();
            }
            ask_all = peer;
            check()?;
        }
    }
}

/// Reads exactly the records `[start, end)` of `partition` of `topic` from
/// stores (and the live producer), in offset order. Records retention removed
/// from every store fail with [`Error::DataLoss`] when `fail_on_loss`, else are
/// skipped and reported in [`Fetched::lost`]. Fails with [`Error::Timeout`]
/// when the range is not complete within `timeout`.
#[allow(clippy::too_many_arguments)]
pub fn fetch_range<E: From<Error>>(
    cfg: &NodeConfig,
    topic: &str,
    partition: &str,
    start: u64,
    end: u64,
    timeout: Duration,
    fail_on_loss: bool,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<Fetched, E> {
    check_range((topic, partition, start, end))?;
    if start == end {
        return Ok(Fetched::default());
    }
    let mut c = Client::open(cfg)?;
    let mut peers = FetchPeers::default();
    let r = (topic, partition, start, end);
    c.read_range(&mut peers, r, timeout, fail_on_loss, &mut check)
}

/// One range to read: `(topic, partition, start, end)`.
pub type Range<'a> = (&'a str, &'a str, u64, u64);

/// Names as [`check_name`], a partition name a store can hold (a producer's
/// address is 32 hex digits; stores drop records of any other name, so no
/// node could answer and the read would wait out its timeout), and
/// `start <= end`.
fn check_range((topic, partition, start, end): Range<'_>) -> Result<()> {
    check_name("topic", topic)?;
    crate::log::format::check_partition_name(partition).map_err(Error::Config)?;
    if start > end {
        return Err(Error::Config(format!(
            "start {start} is past end {end}: a range is [start, end), empty when they are equal"
        )));
    }
    Ok(())
}

/// [`fetch_range`] of several ranges, one after the other, by one client: its
/// discovery and the stores' connections are paid once (a Spark task reading
/// many small partitions). `timeout` applies to each range.
pub fn fetch_ranges<E: From<Error>>(
    cfg: &NodeConfig,
    ranges: &[Range<'_>],
    timeout: Duration,
    fail_on_loss: bool,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<Vec<Fetched>, E> {
    for r in ranges {
        check_range(*r)?;
    }
    if ranges.iter().all(|r| r.2 == r.3) {
        return Ok(vec![Fetched::default(); ranges.len()]);
    }
    let mut c = Client::open(cfg)?;
    let mut peers = FetchPeers::default();
    ranges
        .iter()
        .map(|&r| c.read_range(&mut peers, r, timeout, fail_on_loss, &mut check))
        .collect()
}

/// The peers that answer FETCH, as their subscriptions on the client's XPUB
/// showed: every partition (a store's catch-all `F`) or named ones (a
/// producer's own). Kept across the ranges one client reads.
#[derive(Debug, Default)]
struct FetchPeers {
    all: bool,
    partitions: HashSet<Vec<u8>>,
}

impl FetchPeers {
    fn serve(&self, partition: &[u8]) -> bool {
        self.all || self.partitions.contains(partition)
    }
}

impl Client {
    fn read_range<E: From<Error>>(
        &mut self,
        peers: &mut FetchPeers,
        (topic, partition, start, end): Range<'_>,
        timeout: Duration,
        fail_on_loss: bool,
        check: &mut impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<Fetched, E> {
        let mut out = Fetched::default();
        if start >= end {
            return Ok(out);
        }
        let want = usize::try_from(end - start).unwrap_or(usize::MAX);
        out.records.reserve(want.min(1 << 20));
        let own = self.core.address.clone();
        let deadline = Instant::now() + timeout;
        let mut next = start;
        let mut pending: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        // FETCH is sent once some peer that answers FETCH for the partition is connected.
        let mut connected = peers.serve(partition.as_bytes());
        let mut next_ask: Option<Instant> = None;
        let mut short_rounds = 0u32;
        let mut progressed = false;
        let mut requested_to = start;
        // In this round, a store answered with records past `next` (it holds
        // none of the records before: retention deleted them?). Evidence
        // counts for its own round only: a store that connects later, or
        // answers slower, may still hold them.
        let mut answered_past = false;
        while next < end {
            let now = Instant::now();
            if now >= deadline {
                return Err(self
                    .timeout(
                        topic.to_string(),
                        Unanswered::Range {
                            partition: partition.to_string(),
                            start,
                            end,
                            next,
                        },
                        timeout,
                    )
                    .into());
            }
            if connected && next_ask.is_none_or(|t| now >= t) {
                if next_ask.is_some() {
                    // A whole retry round passed: did answers start past `next`?
                    let past = std::mem::take(&mut answered_past);
                    if !progressed && past {
                        short_rounds += 1;
                    } else {
                        short_rounds = 0;
                    }
                    progressed = false;
                    if short_rounds >= LOSS_ROUNDS {
                        let first = pending.keys().next().copied().unwrap_or(end);
                        if fail_on_loss {
                            return Err(Error::DataLoss {
                                topic: topic.to_string(),
                                partition: partition.to_string(),
                                from: next,
                                to: first,
                            }
                            .into());
                        }
                        out.lost.push((next, first));
                        next = first;
                        drain(&mut pending, &mut next, end, &mut out.records);
                        short_rounds = 0;
                        continue;
                    }
                }
                let count = (end - next).min(MAX_FETCH) as u32;
                self.core.emit(&Out::Fetch {
                    partition: partition.as_bytes().to_vec(),
                    subject: topic.as_bytes().to_vec(),
                    sequence: next,
                    count,
                })?;
                next_ask = Some(now + RETRY);
                requested_to = next + u64::from(count);
            }
            let mut peer = false;
            let before = next;
            self.step(
                deadline,
                &mut |kind, key| {
                    if kind != Kind::Fetch {
                        return;
                    }
                    if key.is_empty() {
                        peers.all = true;
                    } else {
                        peers.partitions.insert(key.to_vec());
                    }
                    if key.is_empty() || key == partition.as_bytes() {
                        peer = true;
                    }
                },
                &mut |m| {
                    if let Message::DirectRecord(r) = m {
                        if r.topic == own.as_slice()
                            && r.address == partition.as_bytes()
                            && r.subject == topic.as_bytes()
                            && r.sequence >= next
                        {
                            answered_past |= r.sequence > next;
                            if r.sequence < end {
                                pending
                                    .entry(r.sequence)
                                    .or_insert_with(|| r.content.to_vec());
                            }
                        }
                    }
                },
            )?;
            drain(&mut pending, &mut next, end, &mut out.records);
            if next > before {
                progressed = true;
                // Ask for the next window as soon as this one is in; while records
                // of this one flow, hold the retry back.
                next_ask = Some(if next >= requested_to {
                    Instant::now()
                } else {
                    Instant::now() + RETRY
                });
            }
            if peer {
                // Ask the new peer at once, and give it whole rounds before
                // the range counts as deleted: it may hold it.
                connected = true;
                next_ask = None;
                short_rounds = 0;
            }
            check()?;
        }
        Ok(out)
    }
}

fn drain(
    pending: &mut BTreeMap<u64, Vec<u8>>,
    next: &mut u64,
    end: u64,
    into: &mut Vec<(u64, Vec<u8>)>,
) {
    while *next < end {
        match pending.remove(next) {
            Some(v) => {
                into.push((*next, v));
                *next += 1;
            }
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_expects_what_one_timed_ask_had_else_the_most_any_ask_had() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // Full round: asks as two peers connect (their answers overlap the
        // next ask), then timed re-asks every RETRY; the last one shortly
        // before the round ends.
        let mut w = AskWindows::default();
        w.asked(ms(0), false);
        w.count = 1;
        w.asked(ms(5), false);
        w.count = 3; // one late answer to the first ask, two to this one
        w.asked(ms(205), true);
        w.count = 2;
        w.asked(ms(405), true);
        w.count = 2;
        w.asked(ms(605), true);
        w.count = 1; // the round ends before the second answer is in
        assert_eq!(w.expect(ms(610)), 2, "not 3 (overlap), not 1 (cut short)");

        // A round too short for a timed re-ask: the most any ask had.
        let mut w = AskWindows::default();
        w.asked(ms(0), false);
        w.count = 1;
        w.asked(ms(5), false);
        w.count = 3;
        assert_eq!(w.expect(ms(100)), 3);

        // A quick round: one ask, its answers.
        let mut w = AskWindows::default();
        w.asked(ms(0), false);
        w.count = 4;
        assert_eq!(w.expect(ms(1)), 4);
        assert_eq!(AskWindows::default().expect(ms(1)), 0);
    }
}
