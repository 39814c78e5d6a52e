//! The producer's event loop: publishes what the handle hands over, holds
//! it in [`ProducerState`] until ACKed, and hands what arrives to the state
//! through the one receive path ([`Core::receive`],
//! [`Core::drain_subscriptions`]), sending what it returns. No protocol
//! decision is made here.

use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

use crate::error::Result;
use crate::node::actor::{Inbox, Ready};
use crate::node::answers::{Dest, Form};
use crate::node::batch::Batch;
use crate::node::config::ProducerConfig;
use crate::node::out::{poll_timeout, Fate, Out};
use crate::node::socket::{Core, Frames};
use crate::node::stats::Stats;
use crate::wire::NodeType;

use super::state::{ProducerState, Step};
use super::{Cmd, ProducerShared, NAP};

const BATCH: usize = 4096;

pub(super) fn run(
    inbox: &mut Inbox<Cmd>,
    ready: &mut Ready<String>,
    ctx: &zmq::Context,
    cfg: ProducerConfig,
    topic: &str,
    address: &str,
    shared: &ProducerShared,
) -> Result<()> {
    let tb = topic.as_bytes();
    let node = cfg.socket_config();
    let mut core = Core::open(ctx, &node, NodeType::Producer, address, &[tb])?;
    // Every unsubscription too, also when one of several stores leaves: the
    // count of stores connected goes down again.
    core.set_xpub_option(zmq_sys::ZMQ_XPUB_VERBOSER, 1)?;
    ready.send(core.endpoint.clone());
    let mut st = ProducerState::new(tb, address.as_bytes(), cfg.min_acks, cfg.head_interval);
    st.start_at(cfg.first_offset);
    if let Some(n) = core.store_keys() {
        st.set_keyed_stores(n);
    }
    let stats = &shared.stats;
    let mut frames = Frames::default();
    // The XPUB's, apart: read while a FETCH (in `frames`) is being answered.
    let mut subs = Frames::default();
    let mut outs = Vec::new();
    // Whether the thread napped at its last turn's end (`Unsent::napping` as
    // it set it), and whether the unsent batch may hold records no command
    // announced (sent while it napped): only then does a turn sweep it, and
    // look at the unsent batch at all, so a listened producer's turns take
    // the senders' lock only for the commands' batches, as before the nap.
    let (mut napped, mut orphans) = (false, false);
    loop {
        if inbox.terminated() {
            // Closing: what was sent goes out (the XPUB lingers for it);
            // waiting for stores' ACKs is `flush`'s business.
            let mut sent = Published::default();
            let released = st.released_upto();
            while let Some(cmd) = inbox.try_recv() {
                if let Some(b) = command_batch(cmd, shared) {
                    sent.publish(&mut core, &mut st, cfg.record_batches, b)?;
                }
            }
            // Records sent while the thread napped have no command.
            if let Some(b) = sweep(inbox, shared).flatten() {
                sent.publish(&mut core, &mut st, cfg.record_batches, b)?;
            }
            sent.count(stats);
            // With `min_acks = 0` what went out is released: closing leaves
            // none of it counted as unacknowledged.
            if st.released_upto() != released {
                release(shared, &st, sent.freed);
            }
            return Ok(());
        }
        // Commands: publish up to BATCH records.
        let mut sent = Published::default();
        // Released offsets, not freed bytes, tell whether to report: empty
        // records free none.
        let released = st.released_upto();
        while sent.records < BATCH {
            match inbox.try_recv() {
                Some(Cmd::Connect(ep)) => core.connect(&ep),
                Some(cmd) => {
                    if let Some(b) = command_batch(cmd, shared) {
                        sent.publish(&mut core, &mut st, cfg.record_batches, b)?;
                    }
                }
                None => break,
            }
        }
        // Records sent while the thread napped (no command brings them).
        if orphans && sent.records < BATCH {
            if let Some(taken) = sweep(inbox, shared) {
                orphans = false;
                if let Some(b) = taken {
                    sent.publish(&mut core, &mut st, cfg.record_batches, b)?;
                }
            }
        }
        if sent.records > 0 {
            sent.count(stats);
            st.arm_head(Instant::now());
            if st.released_upto() != released {
                release(shared, &st, sent.freed);
            }
        }

        core.count_unsendable(stats);
        keyed_stores(&mut core, &mut st, shared);
        let now = Instant::now();
        // Nobody listens live and records flow (taken this turn, or
        // waiting): the next ones can wait a nap, unwoken. Once a nap finds
        // none, the thread sleeps until woken again.
        // Records waiting while the thread does not nap: a command brings
        // them, or (napping just ended) no command does and the next turn
        // sweeps them. Either way, no sleep.
        // Listened, not napping and no record left from a nap: every batch
        // started since came with a command, so there is nothing to look at.
        let listened = st.routes().meta() || st.routes().plain();
        let (napping, waiting) = if listened && !napped && !orphans {
            (false, false)
        } else {
            let mut p = shared.unsent();
            let waiting = !p.batch.is_empty();
            let was = p.napping;
            p.napping = !listened && (sent.records > 0 || waiting);
            // Records sent during a nap, also the one ending now: the next
            // turns sweep until one finds no command queued.
            orphans |= was || p.napping;
            (p.napping, waiting)
        };
        napped = napping;
        let nap_end = napping.then(|| now + NAP);
        let timeout = if inbox.pending() > 0 || (orphans && waiting && !napping) {
            0
        } else {
            poll_timeout(now, [st.next_head(), core.disc.next_deadline(), nap_end])
        };
        let r = core.poll(inbox, timeout, true)?;

        if r.xpub {
            subscriptions(&mut core, &mut subs, &mut st, shared)?;
        }
        if r.sub {
            let released = st.released_upto();
            core.receive(&mut frames, stats, BATCH, |core, from, msg| {
                outs.clear();
                match st.on_message(msg, from, &mut outs) {
                    Step::Done(fate) => {
                        core.emit_all(&outs)?;
                        Ok(fate)
                    }
                    Step::Answer(f) => {
                        // Who takes which form, as of now
                        // (`Core::drain_subscriptions`).
                        subscriptions(core, &mut subs, &mut st, shared)?;
                        if let Some(reply) = st.on_fetch(&f) {
                            let first = reply.first;
                            let sent = core.send_reply(reply)? as u64;
                            Stats::add(&stats.direct_records_sent, sent);
                            let bytes = st.body_bytes(first..first + sent);
                            Stats::add(&stats.direct_bytes_sent, bytes);
                        }
                        Ok(Fate::Taken(0))
                    }
                }
            })?;
            Stats::set(&stats.acks_ahead, st.acks_ahead);
            Stats::set(&stats.min_acks_unreachable, st.min_acks_unreachable);
            let freed = st.take_freed();
            if st.released_upto() != released {
                release(shared, &st, freed);
            }
        }
        if r.beacon {
            core.on_beacons(stats)?;
        }
        let now = Instant::now();
        if let Some(h) = st.on_timer(now) {
            Stats::add(&stats.heads_sent, 1);
            core.emit(&h)?;
        }
        if core.disc.next_deadline().is_some_and(|d| d <= now) {
            core.on_timer(now, stats)?;
        }
    }
}

/// Reads the subscriptions waiting on the XPUB ([`Core::drain_subscriptions`])
/// into the state: the stores and consumers connected, who takes which
/// messages. A store that connects is told our head; the handle learns how
/// many stores can be counted.
fn subscriptions(
    core: &mut Core,
    frames: &mut Frames,
    st: &mut ProducerState,
    shared: &ProducerShared,
) -> Result<()> {
    let stats = &shared.stats;
    core.drain_subscriptions(frames, stats, BATCH, |core, sub| {
        let heard = st.on_subscription(&sub);
        if let Some(o) = &heard.send {
            if matches!(o, Out::Head { .. }) {
                Stats::add(&stats.heads_sent, 1);
            }
            core.emit(o)?;
        }
        if heard.stores_changed {
            shared.stores_seen.store(st.countable_stores(), SeqCst);
            shared.notify();
        }
        Ok(())
    })?;
    keyed_stores(core, st, shared);
    Ok(())
}

/// Secure mode: stores count by key, as their ACKs do (after subscriptions,
/// and at every turn: a connection that closed is forgotten a turn later).
fn keyed_stores(core: &mut Core, st: &mut ProducerState, shared: &ProducerShared) {
    if let Some(n) = core.store_keys() {
        if n != st.countable_stores() || shared.stores_seen.load(SeqCst) != n {
            st.set_keyed_stores(n);
            shared.stores_seen.store(n, SeqCst);
            shared.notify();
        }
    }
}

/// The records waiting in the unsent batch, taken without a command (sent
/// while the thread napped): `Some(batch or None)`, or `None` if a command
/// is queued: it may bring earlier records (a batch handed over), which go
/// first, so the sweep waits for the next turn. Senders queue
/// record-carrying commands under the unsent lock, so none can slip in
/// between the check and the take.
fn sweep<C>(inbox: &Inbox<C>, shared: &ProducerShared) -> Option<Option<Batch>> {
    let mut p = shared.unsent();
    if inbox.pending() > 0 {
        return None;
    }
    Some(p.take())
}

/// The records a command brings: a [`Cmd::Many`]'s batch, or the unsent
/// batch for a [`Cmd::Take`] still of its generation (else its records went
/// with a later command).
fn command_batch(cmd: Cmd, shared: &ProducerShared) -> Option<Batch> {
    match cmd {
        Cmd::Many(b) => Some(b),
        Cmd::Take(gen) => {
            let mut p = shared.unsent();
            (p.gen == gen).then(|| p.hand_over())
        }
        Cmd::Connect(_) => None,
    }
}

/// What a turn published: records, the bytes of their bodies
/// (`records_sent`, `bytes_sent`: a batch's length and bytes, counted once
/// whatever forms it goes out in), and the bytes released at once.
#[derive(Default)]
struct Published {
    records: usize,
    bytes: usize,
    freed: usize,
}

impl Published {
    /// [`publish`]es `b` and counts it.
    fn publish(
        &mut self,
        core: &mut Core,
        st: &mut ProducerState,
        batches: bool,
        b: Batch,
    ) -> Result<()> {
        self.records += b.len();
        self.bytes += b.bytes();
        self.freed += publish(core, st, batches, b)?;
        Ok(())
    }

    fn count(&self, stats: &Stats) {
        Stats::add(&stats.records_sent, self.records as u64);
        Stats::add(&stats.bytes_sent, self.bytes as u64);
    }
}

/// Publishes a batch of bodies from the next offset on and holds it;
/// returns the bytes released at once. In META-RECORD-BATCHes if this
/// project's nodes listen, and also as one RECORD per record if a node that
/// knows no metadata does, unless `batches` (`record_batches`: it FETCHes).
fn publish(core: &mut Core, st: &mut ProducerState, batches: bool, b: Batch) -> Result<usize> {
    let dest = Dest::Live { topic: &st.topic };
    let first = st.next_offset();
    if st.routes().meta() {
        core.send_records(dest, first, b.iter(), Form::Bodies)?;
    }
    if st.routes().plain() && !batches {
        core.send_records(dest, first, b.iter(), Form::Records)?;
    }
    Ok(st.append_batch(b).1)
}

fn release(shared: &ProducerShared, st: &ProducerState, freed: usize) {
    shared.unacked_bytes.fetch_sub(freed, SeqCst);
    let acked = i64::try_from(st.released_upto()).unwrap_or(i64::MAX) - 1;
    shared.acked.store(acked, SeqCst);
    shared.notify();
}
