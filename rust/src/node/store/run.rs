//! The store's event loop: one thread owning its XPUB, SUB, discovery and
//! its storage. It decodes what arrives, hands each message to
//! [`StoreState`], and sends what that returns; at every turn it lets the
//! storage group-commit and sends the ACKs of what the finished syncs made
//! durable. The syncer thread wakes the loop when a sync ends. The decisions
//! are all in [`state`](super::state); this file only moves bytes and time.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::meta;
use crate::node::actor::{Inbox, Ready};
use crate::node::config::NodeConfig;
use crate::node::out::{poll_timeout, Out};
use crate::node::socket::{set_int_option, AnswerForms, Core, Dest, Frames};
use crate::node::stats::Stats;
use crate::wire::{decode, topic_matches, Message, NodeType, RecordBatch, Subscription};

use super::state::{ReplySlice, StoreLog, StoreState, StoreStateConfig};
use super::{Cmd, StoreShared};

/// Messages handled per loop turn before the loop syncs, ACKs and answers.
const BATCH: usize = 4096;
/// FETCH answer slices sent per turn at most (each is one read of the log).
const REPLY_SLICES: usize = 256;
/// After a storage error, try to recover the log this often.
const RECOVER_EVERY: Duration = Duration::from_secs(1);
/// Asking other stores for their heads: after start-up, shortly after a
/// store connected to us, once more a little later, then this often.
const PEER_HEADS_FIRST: Duration = Duration::from_secs(1);
const PEER_HEADS_JOINED: Duration = Duration::from_millis(100);
const PEER_HEADS_AGAIN: Duration = Duration::from_secs(2);
const PEER_HEADS_EVERY: Duration = Duration::from_secs(60);

/// When the store next asks the other stores for every head they hold
/// (GET-HEADS with an empty topic), so it replicates partitions whose
/// producers are gone: HEADs only come from live producers. Another store
/// connecting to us shows as its catch-all `G` subscription on our XPUB; our
/// own `E<address>` subscription may reach it a moment later than its
/// answer, hence the second ask.
struct PeerHeads {
    next: Instant,
    again: bool,
}

impl PeerHeads {
    fn new(now: Instant) -> Self {
        Self {
            next: now + PEER_HEADS_FIRST,
            again: true,
        }
    }
    fn store_joined(&mut self, now: Instant) {
        self.next = self.next.min(now + PEER_HEADS_JOINED);
        self.again = true;
    }
    /// True (and the next time set) when an ask is due.
    fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now
            + if self.again {
                PEER_HEADS_AGAIN
            } else {
                PEER_HEADS_EVERY
            };
        self.again = false;
        true
    }
}

/// Copies the counters and the current storage error (a failing sync wins
/// over an append error) for the handle to read.
fn publish(shared: &StoreShared, st: &StoreState<impl StoreLog>, sync_error: Option<&str>) {
    *shared.counters.lock().unwrap_or_else(|p| p.into_inner()) = st.counters().clone();
    *shared.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
        sync_error.or(st.last_error()).map(str::to_string);
    let (files, damaged) = st.log().files_and_damaged();
    shared.open_files.store(files as u64, Relaxed);
    shared.damaged_partitions.store(damaged as u64, Relaxed);
    shared
        .parked_partitions
        .store(st.log().parked() as u64, Relaxed);
    shared
        .active_partitions
        .store(st.partition_states() as u64, Relaxed);
}

/// Sends `outs` (ACKs, FETCHes, GET-HEADS, DIRECT-HEADs, STORE-HELLOs)
/// lossy: one goes to every subscriber with room, and a subscriber whose
/// queue is full (a store catching up from us, reading our FETCH answers
/// slower than we send them) misses it. They are repeated by their own
/// timers or requests. Without this, the no-drop XPUB refused a FETCH to
/// every producer and store while any one store's queue was full, and the
/// store never fetched its own gaps. FETCH answers go through `send_slice`,
/// no-drop.
fn send_all(core: &mut Core, outs: &[Out]) -> Result<()> {
    if outs.is_empty() {
        return Ok(());
    }
    set_int_option(&mut core.xpub, zmq_sys::ZMQ_XPUB_NODROP, 0)?;
    let mut sent = Ok(());
    for o in outs {
        match core.emit(o) {
            Ok(()) => {}
            Err(Error::Zmq(zmq::Error::EAGAIN)) => {}
            Err(e) => {
                sent = Err(e);
                break;
            }
        }
    }
    set_int_option(&mut core.xpub, zmq_sys::ZMQ_XPUB_NODROP, 1)?;
    sent
}

/// Sends a slice of FETCH answers until the requester's queue is full:
/// how many went out (to a requester whose subscriptions were not read yet,
/// none, and the slice counts as done). In the form the requester takes.
fn send_slice(core: &mut Core, slice: &ReplySlice, forms: &AnswerForms) -> Result<usize> {
    let dest = Dest::Direct {
        to: &slice.to,
        partition: &slice.partition,
        topic: &slice.topic,
    };
    match forms.form(&slice.to) {
        Some(form) => core.send_records(dest, slice.first, slice.contents(), form),
        // Not known yet (AnswerForms): nothing goes out, as libzmq drops an
        // answer to a requester it does not know; the requester FETCHes again.
        None => Ok(slice.len()),
    }
}

/// The bodies of records that came without metadata (from a node that
/// knows none, e.g. a C-reference producer), stamped with their append
/// time `now_ms`, as a batch's values frame in `out`. False if one is too
/// long to be framed (a value of nearly 4 GiB: the message is malformed).
fn wrap_values<'v>(out: &mut Vec<u8>, values: impl Iterator<Item = &'v [u8]>, now_ms: u64) -> bool {
    out.clear();
    for v in values {
        let Ok(n) = u32::try_from(meta::PLAIN_LEN + v.len()) else {
            return false;
        };
        out.extend_from_slice(&n.to_be_bytes());
        meta::wrap(out, Some(now_ms), v);
    }
    true
}

/// Reads the subscriptions waiting on the XPUB (at most [`BATCH`]): who
/// takes which form of FETCH answers and ACKs, consumers saying hello
/// (`L`), stores joining (`G`). Also right before FETCH answers go out:
/// libzmq applies a requester's subscriptions to its filter as they arrive,
/// before this loop reads them, so an answer could otherwise go out in the
/// form of a requester whose `Y` subscription was not read yet (plain values
/// to a node that takes metadata).
fn subscriptions<L: StoreLog>(
    core: &mut Core,
    frames: &mut Frames,
    st: &mut StoreState<L>,
    forms: &mut AnswerForms,
    peer_heads: &mut PeerHeads,
    now: Instant,
    stats: &Stats,
) -> Result<()> {
    for _ in 0..BATCH {
        if !core.recv_xpub(frames, stats)? {
            break;
        }
        let (s, n) = frames.slices();
        match Subscription::decode(s[0]) {
            Ok(sub) if n == 1 => {
                forms.on_subscription(sub.prefix, sub.subscribe);
                core.addressed_acks
                    .on_subscription(sub.prefix, sub.subscribe);
                if !sub.subscribe {
                    continue;
                }
                if sub.prefix == b"G" {
                    peer_heads.store_joined(now);
                    st.store_joined();
                }
                let outs = st.on_subscribe(sub.prefix);
                send_all(core, &outs)?;
            }
            Ok(_) => {}
            Err(_) => Stats::add(&stats.malformed, 1),
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run<L: StoreLog>(
    inbox: &mut Inbox<Cmd<L>>,
    ready: &mut Ready<String>,
    ctx: &zmq::Context,
    node: NodeConfig,
    state_cfg: StoreStateConfig,
    address: &str,
    log: L,
    shared: &StoreShared,
) -> Result<()> {
    let mut core = Core::open(ctx, &node, NodeType::Store, address, &[])?;
    // A full subscriber queue makes `send` fail with EAGAIN instead of
    // silently dropping.
    core.set_xpub_option(zmq_sys::ZMQ_XPUB_NODROP, 1)?;
    ready.send(core.endpoint.clone());
    let own = address.as_bytes().to_vec();
    let mut st = StoreState::new(own.clone(), log, state_cfg);
    st.log_mut().set_waker(inbox.waker());
    let stats = &shared.stats;
    let mut frames = Frames::default();
    // How each requester's FETCHes are answered.
    let mut forms = AnswerForms::default();
    // Bodies made of records that came without metadata.
    let mut wrapped = Vec::new();
    let mut slice = ReplySlice::default();
    let mut sync_error: Option<String> = None;
    let mut error_mark = 0u64;
    // The last storage failure seen: the error is reported until appends
    // after it were synced *and* a whole recovery period went by without
    // another (a nearly full disk lets a few appends through after each
    // recovery; that is no reason to report it healthy for a moment).
    let mut last_failure = Instant::now();
    let mut last_recover = Instant::now();
    let mut peer_heads = PeerHeads::new(Instant::now());
    loop {
        if inbox.terminated() {
            let r = st.log_mut().sync_all();
            publish(shared, &st, None);
            let r = r.and_then(|()| st.log_mut().close());
            return r.map_err(|e| Error::died(format!("final sync failed: {e}")));
        }
        while let Some(cmd) = inbox.try_recv() {
            match cmd {
                Cmd::Connect(ep) => core.connect(&ep),
                Cmd::Query(f) => f(st.log()),
            }
        }

        core.count_unsendable(stats);
        let now = Instant::now();
        let replies_at = st.next_reply_at(now);
        let replies_ready = replies_at.is_some_and(|t| t <= now);
        let timeout = if replies_ready {
            0
        } else {
            poll_timeout(
                now,
                [
                    st.next_deadline(now),
                    core.disc.next_deadline(),
                    replies_at,
                    Some(peer_heads.next),
                ],
            )
        };
        let r = core.poll(inbox, timeout, true)?;
        let (xpub_in, sub_in, beacon_in) = (r.xpub, r.sub, r.beacon);
        let now = Instant::now();

        if xpub_in {
            let ps = &mut peer_heads;
            subscriptions(&mut core, &mut frames, &mut st, &mut forms, ps, now, stats)?;
        }
        if sub_in {
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
                // Records without metadata get bodies stamped now.
                let stamp = meta::now_ms();
                let outs = match decoded {
                    Ok((Message::MetaRecordBatch(b), _)) if b.topic == b.subject => {
                        Stats::add(&stats.records_received, u64::from(b.count));
                        st.on_record_batch(&b, now)
                    }
                    Ok((Message::DirectMetaRecordBatch(b), _)) if topic_matches(&own, b.topic) => {
                        Stats::add(&stats.records_received, u64::from(b.count));
                        let mut outs = Vec::new();
                        for r in b.records() {
                            outs.extend(st.on_direct_record(
                                r.subject, r.address, r.sequence, r.content, now,
                            ));
                        }
                        outs
                    }
                    Ok((Message::Record(r), _)) if r.topic == r.subject => {
                        Stats::add(&stats.records_received, 1);
                        wrapped.clear();
                        meta::wrap(&mut wrapped, Some(stamp), r.content);
                        st.on_record(r.subject, r.address, r.sequence, &wrapped, now)
                    }
                    Ok((Message::RecordBatch(b), _)) if b.topic == b.subject => {
                        Stats::add(&stats.records_received, u64::from(b.count));
                        if wrap_values(&mut wrapped, b.values(), stamp) {
                            st.on_record_batch(
                                &RecordBatch {
                                    values: &wrapped,
                                    ..b
                                },
                                now,
                            )
                        } else {
                            Stats::add(&stats.malformed, 1);
                            Vec::new()
                        }
                    }
                    Ok((Message::DirectRecordBatch(b), _)) if topic_matches(&own, b.topic) => {
                        Stats::add(&stats.records_received, u64::from(b.count));
                        let mut outs = Vec::new();
                        let mut body = Vec::new();
                        for r in b.records() {
                            body.clear();
                            meta::wrap(&mut body, Some(stamp), r.content);
                            outs.extend(
                                st.on_direct_record(r.subject, r.address, r.sequence, &body, now),
                            );
                        }
                        outs
                    }
                    Ok((Message::DirectRecord(r), _)) if topic_matches(&own, r.topic) => {
                        Stats::add(&stats.records_received, 1);
                        wrapped.clear();
                        meta::wrap(&mut wrapped, Some(stamp), r.content);
                        st.on_direct_record(r.subject, r.address, r.sequence, &wrapped, now)
                    }
                    Ok((Message::TimeQuery(q), _)) => st.on_time_query(&q),
                    Ok((Message::Head(h), _)) if h.topic == h.subject => st.on_head(&h, now),
                    Ok((Message::Fetch(f), _)) => {
                        Stats::add(&stats.fetches_received, 1);
                        st.on_fetch(&f)
                    }
                    Ok((Message::GetHeads(g), _)) => st.on_get_heads(&g),
                    Ok((Message::DirectHead(h), _)) if h.topic == own.as_slice() => {
                        st.on_peer_head(&h, now)
                    }
                    Ok((Message::ConsumerHello(c), _)) if topic_matches(&own, c.topic) => {
                        st.on_consumer_hello(&c)
                    }
                    Ok(_) => {
                        Stats::add(&stats.ignored, 1);
                        Vec::new()
                    }
                    Err(_) => {
                        Stats::add(&stats.malformed, 1);
                        Vec::new()
                    }
                };
                send_all(&mut core, &outs)?;
            }
        }
        if beacon_in {
            core.on_beacons(stats)?;
        }

        // Group commit (the turn's appends written, a finished sync taken
        // in), then ACK what it made durable, retry FETCHes. A storage
        // error stays reported until records appended after it were written.
        match st.log_mut().sync_if_due() {
            Ok(()) => {
                if sync_error.is_some()
                    && st.counters().appended > error_mark
                    && now.duration_since(last_failure) >= RECOVER_EVERY
                {
                    tracing::info!("store writes succeed again");
                    sync_error = None;
                }
            }
            Err(e) => {
                if sync_error.is_none() {
                    tracing::error!("store sync failed: {e}");
                }
                shared.storage_errors.fetch_add(1, Relaxed);
                sync_error = Some(format!("sync failed: {e}"));
                error_mark = st.counters().appended;
                last_failure = now;
            }
        }
        // After a storage error (disk full, I/O): stop ACKing (nothing new is
        // durable) and try to recover the log every second; once it works the
        // gaps are fetched again from producers and stores.
        if (sync_error.is_some() || st.last_error().is_some())
            && now.duration_since(last_recover) >= RECOVER_EVERY
        {
            last_recover = now;
            // An append failed since the last look: a failure now. (A
            // recovery for a sync error alone is not one.)
            let failed = st.last_error().is_some();
            if failed {
                last_failure = now;
            }
            match st.log_mut().recover() {
                Ok(()) => {
                    if let Some(e) = st.last_error() {
                        sync_error.get_or_insert_with(|| e.to_string());
                    }
                    st.clear_error();
                    if failed {
                        error_mark = st.counters().appended;
                    }
                }
                Err(e) => {
                    sync_error = Some(format!("recovery failed: {e}"));
                    error_mark = st.counters().appended;
                    last_failure = now;
                }
            }
        } else if now.duration_since(last_recover) >= RECOVER_EVERY {
            // Partitions set aside as damaged come back (or are forgotten)
            // once repaired or moved away; still damaged, they stay counted.
            last_recover = now;
            let _ = st.log_mut().retry_set_aside();
        }
        let outs = st.tick(now);
        send_all(&mut core, &outs)?;
        if peer_heads.due(now) {
            send_all(&mut core, &[st.ask_peer_heads()])?;
        }

        // FETCH answers between receives: about as many records per turn as
        // a turn may receive, in up to REPLY_SLICES slices (many small jobs,
        // a consumer catching up on thousands of partitions, must not wait
        // behind the FETCHes that keep coming in).
        // A requester whose queue is full waits (backing off) with its jobs,
        // and the others' answers go on.
        if st.next_reply_at(now).is_some_and(|t| t <= now) {
            // Who takes which form, as of now (see `subscriptions`).
            let ps = &mut peer_heads;
            subscriptions(&mut core, &mut frames, &mut st, &mut forms, ps, now, stats)?;
            let mut records = 0;
            for _ in 0..REPLY_SLICES {
                if records >= BATCH || !st.next_reply_slice(&mut slice, now) {
                    break;
                }
                let sent = send_slice(&mut core, &slice, &forms)?;
                records += sent;
                if sent < slice.len() {
                    st.requeue_slice(&slice, sent, now);
                } else {
                    st.reply_sent(&slice);
                }
            }
        }
        if core.disc.next_deadline().is_some_and(|d| d <= now) {
            core.on_timer(now, stats)?;
        }
        publish(shared, &st, sync_error.as_deref());
    }
}
