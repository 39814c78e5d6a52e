//! The store's event loop: one thread owning its XPUB, SUB, discovery and
//! its storage. What arrives goes through the one receive path
//! ([`Core::receive`], [`Core::drain_subscriptions`]) to [`StoreState`],
//! which says what to send; at every turn [`StoreState::maintain`] lets the
//! storage group-commit and returns the ACKs of what the finished syncs
//! made durable. The syncer thread wakes the loop when a sync ends. The
//! decisions are all in [`state`](super::state); this file only moves bytes
//! and time.

use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::meta;
use crate::node::actor::{Inbox, Ready};
use crate::node::config::NodeConfig;
use crate::node::out::{poll_timeout, Out};
use crate::node::receive::Incoming;
use crate::node::socket::{set_int_option, Core, Frames};
use crate::node::stats::Stats;
use crate::security::TopicPatterns;
use crate::wire::group::{
    subscriptions as group_subscriptions, CommitOffsets, GroupKind, GroupMessage, Subscriber,
};
use crate::wire::{Message, NodeType, Prefix};

use super::groups::{Checks, StoreGroups};
use super::state::{ReplySlice, StoreLog, StoreState, StoreStateConfig};
use super::view;
use super::{Cmd, StoreShared};

/// Messages handled per loop turn before the loop syncs, ACKs and answers.
const BATCH: usize = 4096;
/// FETCH answer slices sent per turn at most (each is one read of the log).
const REPLY_SLICES: usize = 256;

/// Sends one group answer lossy, as [`send_all`]: a requester whose queue
/// is full misses it (it asks again; a member commits again).
fn send_group(core: &mut Core, msg: &GroupMessage<'_>) -> Result<()> {
    set_int_option(&mut core.xpub, zmq_sys::ZMQ_XPUB_NODROP, 0)?;
    let sent = match core.send_group(msg) {
        Err(Error::Zmq(zmq::Error::EAGAIN)) => Ok(()),
        r => r,
    };
    set_int_option(&mut core.xpub, zmq_sys::ZMQ_XPUB_NODROP, 1)?;
    sent
}

/// Sends a COMMIT-OFFSETS answering a consumer's question about every
/// group or topic with the commits of the topics it may read (`only`)
/// only; of every group, a group with none of them is left out.
fn send_commits_for(
    core: &mut Core,
    msg: &GroupMessage<'_>,
    only: Option<&TopicPatterns>,
    every_group: bool,
) -> Result<()> {
    match (only, msg) {
        (Some(only), GroupMessage::CommitOffsets(o)) => {
            let entries: Vec<_> = o
                .entries
                .iter()
                .filter(|e| only.allows(e.topic))
                .copied()
                .collect();
            if entries.is_empty() && every_group {
                return Ok(());
            }
            let o = CommitOffsets {
                entries,
                ..o.clone()
            };
            send_group(core, &GroupMessage::CommitOffsets(o))
        }
        _ => send_group(core, msg),
    }
}

/// Copies the groups' counters for the handle to read.
fn publish_groups(shared: &StoreShared, groups: &StoreGroups) {
    shared
        .commit_rows
        .store(groups.table().len() as u64, Relaxed);
    shared.commits_taken.store(groups.commits_taken, Relaxed);
    shared
        .commits_refused
        .store(groups.commits_refused, Relaxed);
    shared
        .commits_replicated
        .store(groups.commits_replicated, Relaxed);
    shared.commits_capped.store(groups.commits_capped, Relaxed);
    shared
        .announcements_refused
        .store(groups.announcements_refused, Relaxed);
    shared.commit_compactions.store(groups.compactions, Relaxed);
    shared
        .group_members
        .store(groups.registry().members() as u64, Relaxed);
}

/// Copies the counters and the storage error `error` for the handle to read.
fn publish(shared: &StoreShared, st: &StoreState<impl StoreLog>, error: Option<&str>) {
    shared.counters.publish(st.counters());
    if error.is_some() || shared.failing.load(Relaxed) {
        *shared.last_error.lock().unwrap_or_else(|p| p.into_inner()) = error.map(str::to_string);
        shared.failing.store(error.is_some(), Relaxed);
    }
    shared.storage_errors.store(st.sync_failures(), Relaxed);
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
/// how many went out. One that goes nowhere (its requester's
/// subscriptions were not read yet, [`ReplySlice::form`]) counts as sent.
fn send_slice(core: &mut Core, slice: &ReplySlice) -> Result<usize> {
    match slice.reply() {
        Some(reply) => core.send_reply(reply),
        None => Ok(slice.len()),
    }
}

/// Reads the subscriptions waiting on the XPUB into the state
/// ([`StoreState::on_subscription`]) and sends what it answers; another
/// store's subscription to every COMMIT-QUERY tells the groups a store
/// joined ([`StoreGroups::store_joined`]).
fn subscriptions<L: StoreLog>(
    core: &mut Core,
    frames: &mut Frames,
    (st, groups): (&mut StoreState<L>, &mut StoreGroups),
    now: Instant,
    stats: &Stats,
) -> Result<()> {
    core.drain_subscriptions(frames, stats, BATCH, |core, sub| {
        let every_query = Prefix::Group {
            kind: GroupKind::CommitQuery,
            key: b"",
        };
        if sub.subscribe && sub.prefix == every_query {
            groups.store_joined(now);
        }
        let outs = st.on_subscription(&sub, now);
        send_all(core, &outs)
    })
}

/// `cfg`: the node's settings, the state's, and where the groups'
/// commits are kept (`None`: in memory).
pub(super) fn run<L: StoreLog>(
    inbox: &mut Inbox<Cmd<L>>,
    ready: &mut Ready<String>,
    ctx: &zmq::Context,
    cfg: (NodeConfig, StoreStateConfig, Option<PathBuf>),
    address: &str,
    log: L,
    shared: &StoreShared,
) -> Result<()> {
    let (node, state_cfg, commits) = cfg;
    let mut groups = StoreGroups::open(address.as_bytes(), commits.as_deref(), Instant::now())?;
    let mut core = Core::open(ctx, &node, NodeType::Store, address, &[])?;
    for prefix in group_subscriptions(Subscriber::Store, address.as_bytes(), &[]) {
        core.subscribe(&prefix)?;
    }
    publish_groups(shared, &groups);
    // A full subscriber queue makes `send` fail with EAGAIN instead of
    // silently dropping.
    core.set_xpub_option(zmq_sys::ZMQ_XPUB_NODROP, 1)?;
    ready.send(core.endpoint.clone());
    let mut st = StoreState::new(address.as_bytes().to_vec(), log, state_cfg);
    st.log_mut().set_waker(inbox.waker());
    let stats = &shared.stats;
    let mut frames = Frames::default();
    let mut slice = ReplySlice::default();
    let mut outs = Vec::new();
    loop {
        if inbox.terminated() {
            let r = st.log_mut().sync_all();
            publish(shared, &st, st.last_error());
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
        let timeout = if replies_at.is_some_and(|t| t <= now) {
            0
        } else {
            let deadlines = [
                st.next_deadline(now),
                core.disc.next_deadline(),
                replies_at,
                Some(st.peer_heads_at()),
                Some(groups.next_ask_at()),
                Some(groups.next_maintain_at()),
            ];
            poll_timeout(now, deadlines)
        };
        let r = core.poll(inbox, timeout, true)?;
        let now = Instant::now();

        if r.xpub {
            subscriptions(&mut core, &mut frames, (&mut st, &mut groups), now, stats)?;
        }
        if r.sub {
            // Records without metadata get bodies stamped with the time
            // they were received at (one clock read per turn).
            let stamp = meta::now_ms();
            let mut group_input = false;
            core.receive_any(
                &mut frames,
                stats,
                BATCH,
                |core, from, incoming| match incoming {
                    Incoming::Message(msg) => {
                        outs.clear();
                        // A consumer's GET-HEADS of every topic: the heads
                        // of the topics it may read only.
                        let only = match &msg {
                            Message::GetHeads(g) if g.topic.is_empty() => core.reader_topics(from),
                            _ => None,
                        };
                        let fate = st.on_message(msg, now, stamp, &mut outs);
                        if let Some(only) = only {
                            outs.retain(|o| match o {
                                Out::DirectHead { subject, .. } => only.allows(subject),
                                _ => true,
                            });
                        }
                        send_all(core, &outs)?;
                        Ok(fate)
                    }
                    Incoming::Group(GroupMessage::PartitionsQuery(q)) => {
                        let only = core.reader_topics(from);
                        view::answer(&st, &q, only.as_ref(), &mut |a: &GroupMessage<'_>| {
                            send_group(core, a)
                        })
                    }
                    Incoming::Group(m) => {
                        group_input = true;
                        let log = st.log();
                        let topics = core.sender_topics(from);
                        let checks = Checks {
                            next_offset: &|t, p| log.next_offset(t, p),
                            sender_topics: topics.as_ref(),
                        };
                        // A consumer's question of every group or topic is
                        // answered with the topics its certificate allows.
                        let (only, every_group) = match &m {
                            GroupMessage::CommitQuery(q) => {
                                (core.reader_topics(from), q.group.is_empty())
                            }
                            _ => (None, false),
                        };
                        groups.on_group(&m, (now, stamp), checks, &mut |a| {
                            send_commits_for(core, a, only.as_ref(), every_group)
                        })
                    }
                },
            )?;
            if group_input {
                publish_groups(shared, &groups);
            }
        }
        if r.beacon {
            core.on_beacons(stats)?;
        }

        // Group commit, storage errors, then ACK what it made durable,
        // retry FETCHes, ask the other stores for their heads.
        let outs = st.maintain(now);
        if !outs.is_empty() {
            // What a peer learns from these (an ACK: a producer's `flush`
            // returns), the handle's counters show first.
            publish(shared, &st, st.storage_error());
        }
        send_all(&mut core, &outs)?;
        // Anti-entropy of the commits, as of the heads above; members
        // silent past their timeout forgotten.
        let send = &mut |m: &GroupMessage<'_>| send_group(&mut core, m);
        groups.ask_if_due(now, send)?;
        if now >= groups.next_maintain_at() {
            groups.maintain(now);
            publish_groups(shared, &groups);
        }
        if groups.has_pending() {
            // Commits past a head the records just appended may have reached.
            let log = st.log();
            let next = |t: &[u8], p: &[u8]| log.next_offset(t, p);
            groups.settle_pending(now, &next, &mut |m| send_group(&mut core, m))?;
        }

        // FETCH answers between receives: about as many records per turn as
        // a turn may receive, in up to REPLY_SLICES slices (many small jobs,
        // a consumer catching up on thousands of partitions, must not wait
        // behind the FETCHes that keep coming in).
        // A requester whose queue is full waits (backing off) with its jobs,
        // and the others' answers go on.
        if st.next_reply_at(now).is_some_and(|t| t <= now) {
            // Who takes which form, as of now (`Core::drain_subscriptions`).
            subscriptions(&mut core, &mut frames, (&mut st, &mut groups), now, stats)?;
            let mut records = 0;
            for _ in 0..REPLY_SLICES {
                if records >= BATCH || !st.next_reply_slice(&mut slice, now) {
                    break;
                }
                let sent = send_slice(&mut core, &slice)?;
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
        publish(shared, &st, st.storage_error());
    }
}
