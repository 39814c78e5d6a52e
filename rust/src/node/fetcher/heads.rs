//! A topic's partitions and where they stand: [`heads`] (GET-HEADS →
//! DIRECT-HEAD), [`offsets`] (the same, then each partition's first offset
//! still held, probed with `FETCH(0, 1)`), and [`topics`] (every topic the
//! stores hold). A heads round ends on `settle`, or, for a
//! [`HeadsWatch`](super::HeadsWatch) whose peers answered before, as soon as
//! as many answers came as the last round had (`Client::heads_round`).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

use crate::error::{Error, Unanswered};
use crate::node::config::NodeConfig;
use crate::node::out::Out;
use crate::wire::{Kind, Message};

use super::client::Client;
use super::watch::WatchState;
use super::RETRY;

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

/// The topics the stores hold records of, by name: a GET-HEADS for every
/// topic (the empty one, as stores ask each other) once a store connected,
/// the DIRECT-HEADs' subjects collected until `settle` passed with no new
/// store or topic. Fails with [`Error::Timeout`] when no store connected
/// within `timeout`. In a secure cluster a store answers a consumer's question
/// with the topics its certificate allows only, and those are all it keeps.
pub fn topics<E: From<Error>>(
    cfg: &NodeConfig,
    timeout: Duration,
    settle: Duration,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<BTreeSet<Vec<u8>>, E> {
    let mut c = Client::open(cfg)?;
    let own = c.core.address.clone();
    let mut got = BTreeSet::new();
    c.settle_round(
        "",
        &Out::GetHeads { topic: Vec::new() },
        // A store: every GET-HEADS.
        |p| p.every(Kind::GetHeads),
        |m| match m {
            Message::DirectHead(h) if h.topic == own.as_slice() => got.insert(h.subject.to_vec()),
            _ => false,
        },
        timeout,
        settle,
        &mut check,
    )?;
    // A producer tells every consumer that connects its head, whatever the
    // consumer may read: a secure client keeps the topics it may read only.
    if let Some(sc) = &c.core.secure {
        let allowed = sc.id.cert.topics().map_err(Error::from)?;
        got.retain(|t| allowed.allows(t));
    }
    Ok(got)
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

/// Retry rounds ([`RETRY`] apart) of the first-offset probe for partitions
/// nobody answered before [`offsets`] gives up on them.
const PROBE_ROUNDS: u32 = 5;

/// How a heads round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RoundEnd {
    /// It ended on its count of answers, not on `settle`.
    pub(super) quick: bool,
    /// The most answers one ask had (those that came before the next ask):
    /// what the next round of the same peers expects.
    pub(super) answers: usize,
    /// How the first-offset probe after it ended.
    pub(super) probe: Probe,
}

/// How a round's first-offset probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probe {
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
pub(super) struct AskWindows {
    /// Answers since the last ask, when it went out, and whether it was a
    /// timed re-ask (no peer had just connected).
    pub(super) count: usize,
    since: Option<Instant>,
    timed: bool,
    /// The most answers a timed re-ask had (its answers come within a round
    /// trip, long before the next ask), and the most any ask had.
    best_timed: Option<usize>,
    best: usize,
}

impl AskWindows {
    pub(super) fn asked(&mut self, now: Instant, timed: bool) {
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
    pub(super) fn expect(mut self, now: Instant) -> usize {
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
    pub(super) fn heads_round<E: From<Error>>(
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
            let stepped = self.step(until, &mut |_| {}, &mut |m| {
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
    pub(super) fn offsets_round<E: From<Error>>(
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
            topic: topic.as_bytes().to_vec(),
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
                &mut |prefix| peer |= prefix.key_of(Kind::Fetch).is_some(),
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
