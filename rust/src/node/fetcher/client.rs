//! The read clients' node: a consumer-shaped node with no topic, which
//! hears only what is addressed to it. [`Client::step`] waits a slice and
//! hands what arrived, through the one receive path, to the round that
//! reads; [`Client::settle_round`] is the round of the questions whose
//! answers have no count: ask once a peer that answers connected, again
//! every [`RETRY`] and whenever another connects, and end `settle` after the
//! last change.

use std::time::{Duration, Instant};

use crate::error::{Error, Result, Unanswered};
use crate::meta;
use crate::node::config::NodeConfig;
use crate::node::out::{poll_timeout, Fate, Out};
use crate::node::receive::Incoming;
use crate::node::socket::{Core, Frames};
use crate::node::stats::Stats;
use crate::wire::group::GroupMessage;
use crate::wire::{Kind, Message, NodeType, Prefix, Record};

use super::{RETRY, SLICE, SUB_BATCH, XPUB_BATCH};

pub(super) struct Client {
    pub(super) core: Core,
    frames: Frames,
    stats: Stats,
    /// The topics (empty: every topic) of the GET-HEADS subscriptions that
    /// arrived since a heads round last looked: peers that connected, seen
    /// by whichever phase was reading, kept for the next heads round.
    joined: Vec<Vec<u8>>,
    /// Partitions that answered a heads round, kept only for a
    /// [`HeadsWatch`](super::HeadsWatch) that forgets (it takes them to age
    /// out the ones no store announces any more); None: nobody reads them.
    pub(super) answered: Option<Vec<String>>,
}

impl Client {
    pub(super) fn open(cfg: &NodeConfig) -> Result<Self> {
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
    pub(super) fn timeout(
        &self,
        topic: impl Into<String>,
        unanswered: Unanswered,
        waited: Duration,
    ) -> Error {
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
    pub(super) fn take_joined(&mut self, topic: &str) -> bool {
        let t = topic.as_bytes();
        let any = self.joined.iter().any(|k| k.is_empty() || k == t);
        self.joined.clear();
        any
    }

    /// Waits up to `until` (at most one slice) for input; hands the prefix
    /// of every subscription that arrives on the XPUB to `on_sub`, and every
    /// message from a peer to `on_msg`. FETCH answers come as
    /// DIRECT-RECORDs of bodies: a batch record by record, and a record of a
    /// node that knows no metadata with a body with no time.
    pub(super) fn step(
        &mut self,
        until: Instant,
        on_sub: &mut dyn FnMut(Prefix<'_>),
        on_msg: &mut dyn FnMut(&Message<'_>),
    ) -> Result<()> {
        self.step_any(until, on_sub, on_msg, &mut |_| {})
    }

    /// [`Client::step`], handing the consumer-group messages that arrive
    /// (those it subscribed to) to `on_group`.
    pub(super) fn step_any(
        &mut self,
        until: Instant,
        on_sub: &mut dyn FnMut(Prefix<'_>),
        on_msg: &mut dyn FnMut(&Message<'_>),
        on_group: &mut dyn FnMut(&GroupMessage<'_>),
    ) -> Result<()> {
        self.core.count_unsendable(&self.stats);
        let now = Instant::now();
        let cap = Some(until.min(now + SLICE));
        let timeout = poll_timeout(now, [cap, self.core.disc.next_deadline()]);
        let r = self.core.poll_sockets(timeout)?;
        if r.xpub {
            let joined = &mut self.joined;
            self.core.drain_subscriptions(
                &mut self.frames,
                &self.stats,
                XPUB_BATCH,
                |_, sub| {
                    if !sub.subscribe {
                        return Ok(());
                    }
                    if let Some(key) = sub.prefix.key_of(Kind::GetHeads) {
                        if !joined.iter().any(|k| k == key) {
                            // Once per topic (the empty one: every topic): a
                            // client that never asks (`fetch_ranges`) keeps
                            // one entry per topic, not one per connect.
                            joined.push(key.to_vec());
                        }
                    }
                    on_sub(sub.prefix);
                    Ok(())
                },
            )?;
        }
        if r.sub {
            let mut body = Vec::new();
            self.core.receive_any(
                &mut self.frames,
                &self.stats,
                SUB_BATCH,
                |_, _, incoming| {
                    let msg = match incoming {
                        Incoming::Message(msg) => msg,
                        Incoming::Group(g) => {
                            on_group(&g);
                            return Ok(Fate::Taken(0));
                        }
                    };
                    match msg {
                        Message::DirectMetaRecordBatch(b) => {
                            for r in b.records() {
                                on_msg(&Message::DirectRecord(r));
                            }
                        }
                        Message::DirectRecordBatch(b) => {
                            for r in b.records() {
                                on_plain(&mut body, r, on_msg);
                            }
                        }
                        Message::DirectRecord(r) => on_plain(&mut body, r, on_msg),
                        m => on_msg(&m),
                    }
                    Ok(Fate::Taken(0))
                },
            )?;
        }
        if r.beacon {
            self.core.on_beacons(&self.stats)?;
        }
        let now = Instant::now();
        if self.core.disc.next_deadline().is_some_and(|d| d <= now) {
            self.core.on_timer(now, &self.stats)?;
        }
        Ok(())
    }

    /// A round of a question whose answers have no count (a TIME-QUERY, a
    /// GET-HEADS for every topic): `ask` goes out once a peer that answers
    /// it connected (`answers` says which subscriptions show one), again
    /// every [`RETRY`] and at once whenever another connects; each message
    /// goes to `take`, which says whether it changed what the round found.
    /// Ends `settle` after the first such peer connected with no new one
    /// and no change since; fails with [`Error::Timeout`] (about `topic`)
    /// when none connected within `timeout`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn settle_round<E: From<Error>>(
        &mut self,
        topic: &str,
        ask: &Out,
        answers: impl Fn(&Prefix<'_>) -> bool,
        mut take: impl FnMut(&Message<'_>) -> bool,
        timeout: Duration,
        settle: Duration,
        check: &mut impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let deadline = Instant::now() + timeout;
        // Since the first peer connected: the last time something changed.
        let mut changed: Option<Instant> = None;
        let mut next_ask: Option<Instant> = None;
        loop {
            let now = Instant::now();
            match changed {
                Some(t) if now.duration_since(t) >= settle => return Ok(()),
                None if now >= deadline => {
                    let e = self.timeout(topic.to_string(), Unanswered::Topic, timeout);
                    return Err(e.into());
                }
                _ => {}
            }
            if next_ask.is_some_and(|t| now >= t) {
                self.core.emit(ask)?;
                next_ask = Some(now + RETRY);
            }
            let until = changed.map_or(deadline, |t| t + settle);
            let (mut joined, mut news) = (false, false);
            self.step(until, &mut |prefix| joined |= answers(&prefix), &mut |m| {
                news |= take(m)
            })?;
            let now = Instant::now();
            if joined {
                // A peer connected: ask it now, and give it a settle period.
                next_ask = Some(now);
                changed = Some(now);
            } else if news && changed.is_some() {
                changed = Some(now);
            }
            check()?;
        }
    }
}

/// A FETCH answer of a node that knows no metadata: its value given a body
/// with no time ([`meta::wrap`]).
fn on_plain(body: &mut Vec<u8>, r: Record<'_>, on_msg: &mut dyn FnMut(&Message<'_>)) {
    body.clear();
    meta::wrap(body, None, r.content);
    on_msg(&Message::DirectRecord(Record { content: body, ..r }));
}
