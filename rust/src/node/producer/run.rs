//! The producer's event loop: publishes what the handle hands over, holds
//! it in [`ProducerState`] until ACKed, and answers FETCH, GET-HEADS and
//! subscriptions with what the state returns. No protocol decision is made
//! here.

use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

use crate::error::Result;
use crate::node::actor::{Inbox, Ready};
use crate::node::batch::Batch;
use crate::node::config::ProducerConfig;
use crate::node::out::poll_timeout;
use crate::node::secure::Sender;
use crate::node::socket::{AnswerForms, Core, Dest, Form, Frames};
use crate::node::stats::Stats;
use crate::wire::{decode, topic_matches, Message, NodeType, Subscription};

use super::routes::Routes;
use super::state::{AckReach, Acker, ProducerState};
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
    // How each requester's FETCHes are answered.
    let mut forms = AnswerForms::default();
    // Who hears our records live, and in which messages.
    let mut routes = Routes::new(tb);
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
    loop {
        if inbox.terminated() {
            // Closing: what was sent goes out (the XPUB lingers for it);
            // waiting for stores' ACKs is `flush`'s business.
            let (mut sent, mut freed) = (0usize, 0usize);
            let released = st.released_upto();
            while let Some(cmd) = inbox.try_recv() {
                if let Some(b) = command_batch(cmd, shared) {
                    sent += b.len();
                    freed += publish(&mut core, &mut st, &routes, cfg.record_batches, b)?;
                }
            }
            // Records sent while the thread napped have no command.
            if let Some(b) = sweep(inbox, shared) {
                sent += b.len();
                freed += publish(&mut core, &mut st, &routes, cfg.record_batches, b)?;
            }
            Stats::add(&stats.records_sent, sent as u64);
            // With `min_acks = 0` what went out is released: closing leaves
            // none of it counted as unacknowledged.
            if st.released_upto() != released {
                release(shared, &st, freed);
            }
            return Ok(());
        }
        // Commands: publish up to BATCH records.
        let mut sent = 0usize;
        let mut freed = 0usize;
        // Released offsets, not freed bytes, tell whether to report: empty
        // records free none.
        let released = st.released_upto();
        while sent < BATCH {
            match inbox.try_recv() {
                Some(Cmd::Connect(ep)) => core.connect(&ep),
                Some(cmd) => {
                    if let Some(b) = command_batch(cmd, shared) {
                        sent += b.len();
                        freed += publish(&mut core, &mut st, &routes, cfg.record_batches, b)?;
                    }
                }
                None => break,
            }
        }
        // Records sent while the thread napped (no command brings them).
        if sent < BATCH {
            if let Some(b) = sweep(inbox, shared) {
                sent += b.len();
                freed += publish(&mut core, &mut st, &routes, cfg.record_batches, b)?;
            }
        }
        if sent > 0 {
            Stats::add(&stats.records_sent, sent as u64);
            st.arm_head(Instant::now());
            if st.released_upto() != released {
                release(shared, &st, freed);
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
        let (napping, waiting) = {
            let mut p = shared.pending();
            let waiting = !p.batch.is_empty();
            p.napping = !routes.meta() && !routes.plain() && (sent > 0 || waiting);
            (p.napping, waiting)
        };
        let nap_end = napping.then(|| now + NAP);
        let timeout = if inbox.pending() > 0 || (waiting && !napping) {
            0
        } else {
            poll_timeout(now, [st.next_head(), core.disc.next_deadline(), nap_end])
        };
        let r = core.poll(inbox, timeout, true)?;
        let (xpub_in, sub_in, beacon_in) = (r.xpub, r.sub, r.beacon);

        if xpub_in {
            subscriptions(
                &mut core,
                &mut subs,
                &mut st,
                &mut routes,
                &mut forms,
                shared,
            )?;
        }
        if sub_in {
            let mut freed = 0;
            let released = st.released_upto();
            for _ in 0..BATCH {
                let Some(from) = core.recv_sub(&mut frames)? else {
                    break;
                };
                if frames.too_long() {
                    Stats::add(&stats.malformed, 1);
                    continue;
                }
                let (s, n) = frames.slices();
                let decoded = decode(&s[..n]);
                if core.refuse(from, &decoded, stats) {
                    continue;
                }
                match decoded {
                    Ok((Message::Ack(a) | Message::AddressedAck(a), _)) => {
                        if a.topic == address.as_bytes() && a.subject == tb {
                            Stats::add(&stats.acks_received, 1);
                            if let AckReach::Unreachable { first } = st.ack_reach(&a) {
                                Stats::add(&stats.min_acks_unreachable, 1);
                                if first {
                                    tracing::warn!(
                                        "producer {address} of topic {topic:?}: min_acks={} \
                                         cannot be reached by the stores whose ACKs it can \
                                         count ({}): C-reference stores' ACKs carry no \
                                         address and count as one store together; records \
                                         are not released until more of dafka's stores ACK, \
                                         or lower min_acks (PROTOCOL.md, ADDRESSED-ACK)",
                                        st.min_acks(),
                                        st.countable_stores(),
                                    );
                                }
                            }
                            if st.last().is_none_or(|last| a.sequence > last) {
                                ack_ahead(stats, topic, address, a.sequence, st.last());
                            }
                            let acker = match &from {
                                Sender::Key(k) => Acker::Key(k),
                                Sender::Anyone => Acker::Address,
                            };
                            freed += st.on_ack(&a, acker);
                        } else {
                            Stats::add(&stats.ignored, 1);
                        }
                    }
                    Ok((Message::Fetch(f), _)) => {
                        Stats::add(&stats.fetches_received, 1);
                        subscriptions(
                            &mut core,
                            &mut subs,
                            &mut st,
                            &mut routes,
                            &mut forms,
                            shared,
                        )?;
                        let range = st.fetch_range(&f);
                        let values = range.clone().map_while(|off| st.get(off));
                        let dest = Dest::Direct {
                            to: f.address,
                            partition: address.as_bytes(),
                            topic: tb,
                        };
                        // A requester not known yet FETCHes again (AnswerForms).
                        if let Some(form) = forms.form(f.address) {
                            let sent = core.send_records(dest, range.start, values, form)?;
                            Stats::add(&stats.direct_records_sent, sent as u64);
                        }
                    }
                    Ok((Message::GetHeads(g), _)) if topic_matches(tb, g.topic) => {
                        outs.clear();
                        outs.extend(st.on_get_heads(&g));
                        core.emit_all(&outs)?;
                    }
                    Ok(_) => Stats::add(&stats.ignored, 1),
                    Err(_) => Stats::add(&stats.malformed, 1),
                }
            }
            if st.released_upto() != released {
                release(shared, &st, freed);
            }
        }
        if beacon_in {
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

/// Reads the subscriptions waiting on the XPUB (at most [`BATCH`]): counts
/// the stores' (every RECORD, `M`), knows the consumers (`L` + address),
/// who takes which messages ([`Routes`], [`AnswerForms`]); who leaves
/// unsubscribes. Also right before a FETCH is answered: libzmq applies a
/// requester's subscriptions to its filter as they arrive, before this loop
/// reads them, so an answer could otherwise go out in the form of a
/// requester whose `Y` subscription was not read yet.
fn subscriptions(
    core: &mut Core,
    frames: &mut Frames,
    st: &mut ProducerState,
    routes: &mut Routes,
    forms: &mut AnswerForms,
    shared: &ProducerShared,
) -> Result<()> {
    let stats = &shared.stats;
    // Subscriptions: count the stores' (every RECORD, `M`) and know
    // the consumers (`L` + address); who leaves unsubscribes.
    // Bounded per turn, as the SUB: a flood of subscriptions must not
    // keep the loop from everything else.
    for _ in 0..BATCH {
        if !core.recv_xpub(frames, stats)? {
            break;
        }
        let (s, n) = frames.slices();
        let decoded = Subscription::decode(s[0]);
        if let (Ok(sub), 1) = (&decoded, n) {
            routes.on_subscription(sub.prefix, sub.subscribe);
        }
        match decoded {
            Ok(sub) if n == 1 && st.on_store_subscription(sub.prefix, sub.subscribe) => {
                // A store connecting: what we published before its
                // subscription arrived never reached it, and stores'
                // GET-HEADS never reach producers. Tell it now, not
                // a `head_interval` later.
                if sub.subscribe && sub.prefix == b"M" {
                    if let Some(h) = st.head() {
                        Stats::add(&stats.heads_sent, 1);
                        core.emit(&h)?;
                    }
                }
                shared.stores_seen.store(st.countable_stores(), SeqCst);
                shared.notify();
            }
            Ok(sub) if n == 1 => {
                forms.on_subscription(sub.prefix, sub.subscribe);
                if let Some(h) = st.on_subscription(sub.prefix, sub.subscribe) {
                    core.emit(&h)?;
                }
            }
            _ => {}
        }
    }
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

/// The records waiting in the pending batch, taken without a command (sent
/// while the thread napped), unless a command is queued: it may bring
/// earlier records (a batch handed over), which go first, so the sweep
/// waits for the next turn. Senders queue record-carrying commands under
/// the pending lock, so none can slip in between the check and the take.
fn sweep<C>(inbox: &Inbox<C>, shared: &ProducerShared) -> Option<Batch> {
    let mut p = shared.pending();
    if inbox.pending() > 0 {
        return None;
    }
    p.take()
}

/// The records a command brings: a [`Cmd::Many`]'s batch, or the pending
/// batch for a [`Cmd::Take`] still of its generation (else its records went
/// with a later command).
fn command_batch(cmd: Cmd, shared: &ProducerShared) -> Option<Batch> {
    match cmd {
        Cmd::Many(b) => Some(b),
        Cmd::Take(gen) => {
            let mut p = shared.pending();
            (p.gen == gen).then(|| p.hand_over())
        }
        Cmd::Connect(_) => None,
    }
}

/// Publishes a batch of bodies from the next offset on and holds it;
/// returns the bytes released at once. In META-RECORD-BATCHes if this
/// project's nodes listen, and also as one RECORD per record if a node that
/// knows no metadata does, unless `batches` (`record_batches`: it FETCHes).
fn publish(
    core: &mut Core,
    st: &mut ProducerState,
    routes: &Routes,
    batches: bool,
    b: Batch,
) -> Result<usize> {
    let dest = Dest::Live { topic: &st.topic };
    let first = st.next_offset();
    if routes.meta() {
        core.send_records(dest, first, b.iter(), Form::Bodies)?;
    }
    if routes.plain() && !batches {
        core.send_records(dest, first, b.iter(), Form::Records)?;
    }
    Ok(st.append_batch(b).1)
}

/// A store ACKed `acked`, past the last offset this producer sent: it holds
/// records of this partition that this producer did not write (an earlier
/// producer of the same `address_seed`), and drops this one's records at
/// those offsets as duplicates, whatever they hold. Counted, and logged the
/// first time.
fn ack_ahead(stats: &Stats, topic: &str, address: &str, acked: u64, last: Option<u64>) {
    if stats.acks_ahead.fetch_add(1, SeqCst) > 0 {
        return;
    }
    let sent = last.map_or("none yet".to_string(), |l| format!("up to {l}"));
    tracing::warn!(
        "producer {address} of topic {topic:?}: a store ACKed offset {acked}, past what this \
         producer sent ({sent}): the stores hold records of this partition that it did not \
         write, and drop its records at offsets up to {acked} as duplicates (counted in \
         stats()[\"acks_ahead\"]). An earlier producer of the same address_seed wrote them: \
         leave first_offset unset to go on where the partition ends (harmless when rewriting \
         the same records, as a retried Spark task does)"
    );
}

fn release(shared: &ProducerShared, st: &ProducerState, freed: usize) {
    shared.unacked_bytes.fetch_sub(freed, SeqCst);
    let acked = i64::try_from(st.released_upto()).unwrap_or(i64::MAX) - 1;
    shared.acked.store(acked, SeqCst);
    shared.notify();
}
