//! The consumer's event loop: hands what the peers send to [`ConsumerState`]
//! through the one receive path ([`Core::receive`],
//! [`Core::drain_subscriptions`]), sends what that returns and passes the
//! records it delivers to the handle. No protocol decision is made here.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc::Sender;
use std::time::Instant;

use crate::error::Result;
use crate::node::actor::{Inbox, Ready};
use crate::node::config::ConsumerConfig;
use crate::node::out::poll_timeout;
use crate::node::socket::{Core, Frames};
use crate::node::stats::Stats;
use crate::wire::NodeType;

use super::state::{lossy, ConsumerState, Delivery};
use super::{Cmd, ConsumerShared};

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
    let stats = &shared.stats;
    let mut frames = Frames::default();
    let mut outs = Vec::new();
    let mut dels = Vec::new();
    // Whether the application was behind at the last turn (for `pauses`).
    let mut was_full = false;
    core.emit_all(&st.get_heads())?;
    loop {
        if inbox.terminated() {
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
            ],
        );
        let r = core.poll(inbox, timeout, !full)?;

        if r.xpub {
            // A peer that answers GET-HEADS for our topic just subscribed:
            // ask now; a producer connected: FETCH it again now.
            core.drain_subscriptions(&mut frames, stats, BATCH, |core, sub| {
                outs.clear();
                st.on_subscription(&sub, Instant::now(), &mut outs);
                core.emit_all(&outs)
            })?;
        }
        if r.sub {
            outs.clear();
            dels.clear();
            let now = Instant::now();
            core.receive(&mut frames, stats, BATCH, |_, _, msg| {
                Ok(st.on_message(msg, now, &mut dels, &mut outs))
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
        stats.duplicates.store(st.duplicates, SeqCst);
        stats
            .partitions_active
            .store(st.active_partitions() as u64, SeqCst);
        stats.gaps.store(st.gaps, SeqCst);
        stats.fetches_sent.store(st.fetches, SeqCst);
    }
}
