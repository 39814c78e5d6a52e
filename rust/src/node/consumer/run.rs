//! The consumer's event loop: hands what the peers send to [`ConsumerState`]
//! through the one receive path ([`Core::receive`],
//! [`Core::drain_subscriptions`]), sends what that returns and passes the
//! records it delivers to the handle. No protocol decision is made here: a
//! group member's are [`Membership`]'s, applied by [`group_turn`].

use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc::Sender;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::group::view::Part;
use crate::node::actor::{Inbox, Ready};
use crate::node::config::ConsumerConfig;
use crate::node::out::{poll_timeout, Fate, Out};
use crate::node::receive::Incoming;
use crate::node::socket::{Core, Frames};
use crate::node::stats::Stats;
use crate::wire::group::{subscriptions as group_subscriptions, GroupMessage, Subscriber};
use crate::wire::NodeType;

use super::group::{Act, Membership, PositionOf};
use super::state::{lossy, ConsumerState, Delivery};
use super::{Cmd, ConsumerShared, GroupEvent};
use crate::wire::Message;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sends group messages on the XPUB; a full queue drops one (the
/// announcement and the lookups repeat, the next commit covers this one).
fn sender(core: &mut Core) -> impl FnMut(&GroupMessage<'_>) -> Result<()> + '_ {
    move |m: &GroupMessage<'_>| match core.send_group(m) {
        Err(Error::Zmq(zmq::Error::EAGAIN)) => Ok(()),
        r => r,
    }
}

/// The next offset `poll` returns of `part` (what it returned before it
/// is the position a group member commits).
fn position(shared: &ConsumerShared, part: &Part) -> Option<u64> {
    let name = String::from_utf8_lossy(&part.1);
    lock(&shared.positions).get(name.as_ref()).copied()
}

/// A group member's turn: the partitions heard of go to its view; what the
/// view decides is applied to the consumer's partitions (stops first: what
/// `poll` has not returned of a stopped partition is dropped by a new seek
/// epoch, and where `poll` stopped is where the next owner starts), then
/// the commits, lookups and announcements due go out. While the node does
/// not read its peers (`reading` false: the application is behind), nothing
/// is decided: their announcements wait unread.
fn group_turn(
    g: &mut Membership,
    st: &mut ConsumerState,
    core: &mut Core,
    shared: &ConsumerShared,
    (now, reading): (Instant, bool),
    outs: &mut Vec<Out>,
) -> Result<()> {
    for (topic, partition) in st.take_seen() {
        g.partition_seen(&topic, &partition);
    }
    let acts = if reading {
        g.decide(now)
    } else {
        g.hold(now);
        Vec::new()
    };
    let names = |p: &Part| {
        let t = String::from_utf8_lossy(&p.0).into_owned();
        (t, String::from_utf8_lossy(&p.1).into_owned())
    };
    let (mut revoked, mut assigned) = (Vec::new(), Vec::new());
    for act in acts {
        match act {
            Act::Stop(part) => {
                revoked.push(names(&part));
                let name = lossy(&part.1);
                let left = st.release(&part.1);
                let offset = {
                    let positions = lock(&shared.positions);
                    shared.seeks.fetch_add(1, SeqCst);
                    *lock(&shared.epochs).entry(name.clone()).or_insert(0) += 1;
                    positions.get(&name).copied().or(left).unwrap_or(0)
                };
                g.stopped(&part, offset, now, &mut sender(core))?;
            }
            Act::Start(part, at) => {
                assigned.push(names(&part));
                let name = lossy(&part.1);
                let mut positions = lock(&shared.positions);
                let epoch = lock(&shared.epochs).get(&name).copied().unwrap_or(0);
                outs.clear();
                let from = st.start_owned(&part.0, &part.1, at, epoch, now, outs);
                positions.insert(name, from);
                drop(positions);
                core.emit_all(outs)?;
            }
        }
    }
    if !revoked.is_empty() || !assigned.is_empty() {
        // `assignment()` shows the change before the callbacks run (a
        // `pause` checks it).
        publish_assignment(shared, g);
        // Stops come first in a turn: so do their events.
        let mut events = lock(&shared.events);
        if !revoked.is_empty() {
            events.push(GroupEvent::Revoked(revoked));
        }
        if !assigned.is_empty() {
            events.push(GroupEvent::Assigned(assigned));
        }
    }
    // Announcements first: a store takes a member's COMMITs only once it
    // heard the member hold the partitions (a restarted store, just
    // subscribed, hears it in this turn).
    g.due(now, &mut sender(core))?;
    g.auto_commit(now, &|p: &Part| position(shared, p), &mut sender(core))?;
    publish_assignment(shared, g);
    shared.members.store(g.members(), SeqCst);
    Ok(())
}

/// The member's partitions as the handle's `assignment()` shows them.
fn publish_assignment(shared: &ConsumerShared, g: &Membership) {
    let mut mine: Vec<(String, String)> = g
        .assignment()
        .iter()
        .map(|(t, p)| {
            let t = String::from_utf8_lossy(t).into_owned();
            (t, String::from_utf8_lossy(p).into_owned())
        })
        .collect();
    mine.sort();
    *lock(&shared.assignment) = mine;
}

const BATCH: usize = 4096;

#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    inbox: &mut Inbox<Cmd>,
    ready: &mut Ready<String>,
    ctx: &zmq::Context,
    cfg: ConsumerConfig,
    topics: &[String],
    address: &str,
    shared: &ConsumerShared,
    tx: Sender<Vec<Delivery>>,
) -> Result<()> {
    let tb: Vec<&[u8]> = topics.iter().map(|t| t.as_bytes()).collect();
    let mut core = Core::open(ctx, &cfg.node, NodeType::Consumer, address, &tb)?;
    ready.send(core.endpoint.clone());
    let mut st = ConsumerState::new(address.as_bytes(), &tb, &cfg);
    let mut group = match &cfg.group {
        Some(name) => {
            let g = [name.as_bytes()];
            for prefix in group_subscriptions(Subscriber::Member, address.as_bytes(), &g) {
                core.subscribe(&prefix)?;
            }
            let (timeout, heartbeat) = (cfg.node.beacon_timeout, cfg.node.beacon_interval);
            let every = cfg.auto_commit_interval;
            let now = Instant::now();
            Some(Membership::new(
                g[0],
                address.as_bytes(),
                &tb,
                timeout,
                heartbeat,
                every,
                now,
            ))
        }
        None => None,
    };
    let stats = &shared.stats;
    let mut frames = Frames::default();
    let mut outs = Vec::new();
    let mut dels = Vec::new();
    // Whether the application was behind at the last turn (for `pauses`).
    let mut was_full = false;
    core.emit_all(&st.get_heads())?;
    loop {
        if inbox.terminated() {
            if let Some(g) = &mut group {
                // Leaving cleanly: every partition stopped and committed,
                // then the last announcement releases them all.
                g.leave();
                let now = (Instant::now(), true);
                group_turn(g, &mut st, &mut core, shared, now, &mut outs)?;
            }
            return Ok(());
        }
        while let Some(cmd) = inbox.try_recv() {
            match cmd {
                Cmd::Seek(p, off) => {
                    outs.clear();
                    st.seek(&p, off, Instant::now(), &mut outs);
                    core.emit_all(&outs)?;
                }
                Cmd::Connect(ep) => core.connect(&ep),
                Cmd::Commit(offsets, confirm) => {
                    if let Some(g) = &mut group {
                        let pos = |p: &Part| position(shared, p);
                        let now = (Instant::now(), &pos as PositionOf<'_>);
                        g.commit_request(offsets, confirm, now, &mut sender(&mut core))?;
                    }
                }
                Cmd::Committed(done) => {
                    if let Some(g) = &mut group {
                        g.ask_committed(&tb, Instant::now(), done, &mut sender(&mut core))?;
                    }
                }
                Cmd::Pause(p) => st.pause(&p, Instant::now()),
                Cmd::Resume(p, off) => {
                    outs.clear();
                    st.resume(&p, off, Instant::now(), &mut outs);
                    core.emit_all(&outs)?;
                }
            }
        }
        // Paused is published before buffered is read, so a handle that drains
        // concurrently either is seen here or sees `paused` and wakes us.
        shared.paused.store(true, SeqCst);
        let full = shared.full(cfg.max_buffered, cfg.max_buffered_bytes);
        if !full {
            shared.paused.store(false, SeqCst);
        } else if !was_full {
            Stats::add(&stats.pauses, 1);
        }
        was_full = full;
        core.count_unsendable(stats);
        let now = Instant::now();
        let timeout = poll_timeout(
            now,
            [
                st.next_deadline(),
                st.next_sweep(),
                core.disc.next_deadline(),
                group.as_ref().map(Membership::next_deadline),
            ],
        );
        // A member whose application is behind still reads while the
        // stores are to answer it (a synchronous commit, `committed()`):
        // what else comes meanwhile is dropped, to be fetched once the
        // application caught up, as what a full queue drops.
        let answers_due = full && group.as_ref().is_some_and(Membership::waiting);
        let r = core.poll(inbox, timeout, !full || answers_due)?;

        if r.xpub {
            // A peer that answers GET-HEADS for our topic just subscribed:
            // ask now; a producer connected: FETCH it again now.
            core.drain_subscriptions(&mut frames, stats, BATCH, |core, sub| {
                if let Some(g) = &mut group {
                    // A store (re)started, or a member joined: it hears
                    // us at once, not a heartbeat later (a store takes
                    // COMMITs only from members it heard).
                    g.on_subscription(&sub);
                }
                outs.clear();
                st.on_subscription(&sub, Instant::now(), &mut outs);
                core.emit_all(&outs)
            })?;
        }
        // Group messages came, to be decided on this turn.
        let mut group_input = false;
        if r.sub {
            outs.clear();
            dels.clear();
            let now = Instant::now();
            core.receive_any(&mut frames, stats, BATCH, |_, _, incoming| {
                Ok(match (incoming, &mut group) {
                    (Incoming::Message(msg), Some(g)) => {
                        let hello = matches!(&msg, Message::StoreHello(_));
                        if let Message::StoreHello(h) = &msg {
                            if h.topic == address.as_bytes() {
                                g.store_seen(h.address);
                            }
                        }
                        if answers_due && !hello {
                            Fate::Ignored
                        } else {
                            st.on_message(msg, now, &mut dels, &mut outs)
                        }
                    }
                    (Incoming::Message(msg), None) => st.on_message(msg, now, &mut dels, &mut outs),
                    (Incoming::Group(m), Some(g)) => {
                        group_input = true;
                        g.on_group(&m, now)
                    }
                    (Incoming::Group(_), None) => Fate::Ignored,
                })
            })?;
            core.emit_all(&outs)?;
            // Before the records go out, as `records_lost` below: a reader
            // that got them sees the stats that go with them.
            if st.stalled > 0 {
                st.count_stalled();
                stats.stalled_partitions.store(st.stalled, SeqCst);
            }
            shared.deliver(&tx, &mut dels);
        }
        if r.beacon {
            core.on_beacons(stats)?;
        }
        let now = Instant::now();
        if st.next_deadline().is_some_and(|d| d <= now) {
            outs.clear();
            dels.clear();
            st.on_timer(now, &mut dels, &mut outs);
            core.emit_all(&outs)?;
            // Counted before the records that follow the skip are delivered.
            stats.records_lost.store(st.lost, SeqCst);
            stats.stalled_partitions.store(st.stalled, SeqCst);
            shared.deliver(&tx, &mut dels);
        }
        if st.next_sweep().is_some_and(|d| d <= now) {
            Stats::add(&stats.partitions_idled, st.sweep_idle(now) as u64);
            let gone = st.forget_idle(now);
            if !gone.is_empty() {
                let mut f = shared.forgotten.lock().unwrap_or_else(|p| p.into_inner());
                f.extend(gone.iter().map(|k| lossy(k)));
                stats.partitions_forgotten.store(st.forgotten, SeqCst);
            }
        }
        if core.disc.next_deadline().is_some_and(|d| d <= now) {
            core.on_timer(now, stats)?;
        }
        if let Some(g) = &mut group {
            if group_input || st.has_seen() || g.next_deadline() <= now {
                group_turn(g, &mut st, &mut core, shared, (now, !full), &mut outs)?;
            }
        }
        stats.duplicates.store(st.duplicates, SeqCst);
        stats
            .partitions_active
            .store(st.active_partitions() as u64, SeqCst);
        stats.gaps.store(st.gaps, SeqCst);
        stats.fetches_sent.store(st.fetches, SeqCst);
    }
}
