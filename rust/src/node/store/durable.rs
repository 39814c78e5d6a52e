//! The store's storage: [`DurableLog`], the segment log
//! ([`crate::log`]) behind the [`StoreLog`] trait, with group commit on a
//! syncer thread and recovery after an I/O error. What it reports durable
//! ([`StoreLog::durable_next`]) is what the store may ACK.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::log::{FsyncPolicy, Log, LogConfig, LogError, SyncBatch, SyncDone};
use crate::node::actor::Waker;
use crate::node::batch::Batch;
use crate::node::stats::SyncTimes;

use super::state::{PartKey, StoreLog};

/// The durable log as the store's storage.
///
/// Group commit runs on a syncer thread: the store thread keeps appending
/// (into the page cache) while the previous batch is fdatasynced, so ACK
/// throughput is not bounded by fsync latency; `durable_next` advances only
/// once a sync of those bytes returned. After an I/O error the log is reopened
/// in place: it refuses a partition after a failed write or fdatasync (the
/// kernel may have dropped dirty pages), and a reopen recovers it from what is
/// really on disk, then syncs, so nothing is reported durable that is not.
pub struct DurableLog {
    root: PathBuf,
    /// The log's own config, with `fsync = never`: syncing is done here.
    cfg: LogConfig,
    /// The store's fsync policy: `interval` (group commit every
    /// `flush_interval_ms` or `flush_messages`), `always` (after every loop
    /// turn that appended), `never` (ACK what is written, no fdatasync).
    policy: FsyncPolicy,
    log: Option<Log>,
    /// Why the last reopen failed, while the log is closed.
    reopen_error: Option<String>,
    syncer: Syncer,
    in_flight: bool,
    /// When the last sync started: `interval` syncs start at most every
    /// `flush_interval_ms`, counted from one start to the next, so a record
    /// waits at most one interval plus one fdatasync.
    last_sync_start: Option<Instant>,
    pending: Pending,
}

/// Appends gathered during a loop turn, one batch per partition, each
/// written with one `append_bodies` (one write call instead of one per record)
/// before the turn syncs, ACKs or reads. Per partition, so records of
/// several producers arriving interleaved still make one write each.
#[derive(Default)]
struct Pending {
    /// topic → partition → index into `batches`.
    index: FxHashMap<Vec<u8>, FxHashMap<String, usize>>,
    /// `batches[..live]` are in use; the rest keep their buffers.
    batches: Vec<PartBatch>,
    live: usize,
    bytes: usize,
    /// The batch `find` returned last: live records come in runs of one
    /// partition, so most lookups are one comparison instead of two hashes.
    hint: Cell<usize>,
}

/// The records gathered for one partition: offsets `first, first + 1, ...`.
#[derive(Default)]
struct PartBatch {
    topic: Vec<u8>,
    partition: String,
    first: u64,
    values: Batch,
}

/// Pending appends are written once they hold this many bytes. Small enough
/// that the pending values and the log's write buffer stay in the CPU's
/// caches: with RECORD-BATCHes of 100 B records the store took twice the CPU
/// per record at 4 MiB (`benches/RESULTS.md`, "Store", session 22).
const PENDING_BYTES: usize = 256 << 10;

impl PartBatch {
    fn next(&self) -> u64 {
        self.first + self.values.len() as u64
    }
}

impl Pending {
    fn find(&self, topic: &[u8], partition: &str) -> Option<usize> {
        let h = self.hint.get();
        if let Some(b) = self.in_use().get(h) {
            if b.partition == partition && b.topic == topic {
                return Some(h);
            }
        }
        let i = self.index.get(topic)?.get(partition).copied()?;
        self.hint.set(i);
        Some(i)
    }
    fn get(&self, topic: &[u8], partition: &str) -> Option<&PartBatch> {
        self.find(topic, partition).map(|i| &self.batches[i])
    }
    fn in_use(&self) -> &[PartBatch] {
        &self.batches[..self.live]
    }
    /// A new batch for a partition that has none this turn.
    fn start(&mut self, topic: &[u8], partition: &str, first: u64) -> usize {
        if self.live == self.batches.len() {
            self.batches.push(PartBatch::default());
        }
        let i = self.live;
        self.live += 1;
        let b = &mut self.batches[i];
        b.topic.clear();
        b.topic.extend_from_slice(topic);
        b.partition.clear();
        b.partition.push_str(partition);
        b.first = first;
        self.index
            .entry(topic.to_vec())
            .or_default()
            .insert(partition.to_string(), i);
        self.hint.set(i);
        i
    }
    fn push(&mut self, i: usize, content: &[u8]) {
        self.batches[i].values.push(content);
        self.bytes += content.len();
    }
    fn clear(&mut self) {
        for b in &mut self.batches[..self.live] {
            b.values.clear();
        }
        self.index.clear();
        self.live = 0;
        self.bytes = 0;
    }
}

/// The syncer thread: runs [`SyncBatch`]es, returns [`SyncDone`]s and wakes
/// the store loop (once it gave its waker) after each.
struct Syncer {
    tx: Option<Sender<SyncBatch>>,
    rx: Receiver<SyncDone>,
    waker: Arc<OnceLock<Arc<Waker>>>,
    times: Arc<SyncTimes>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl Syncer {
    fn start() -> Result<Self> {
        let (tx, jobs) = channel::<SyncBatch>();
        let (done, rx) = channel::<SyncDone>();
        let waker = Arc::new(OnceLock::<Arc<Waker>>::new());
        let wake = waker.clone();
        let times = Arc::new(SyncTimes::default());
        let timed = times.clone();
        let join = std::thread::Builder::new()
            .name("dafka-store-sync".into())
            .spawn(move || {
                for batch in jobs {
                    let start = Instant::now();
                    let result = batch.run();
                    timed.record(start.elapsed());
                    if done.send(result).is_err() {
                        return;
                    }
                    if let Some(w) = wake.get() {
                        w.wake();
                    }
                }
            })
            .map_err(|e| Error::died(format!("cannot start the sync thread: {e}")))?;
        Ok(Self {
            tx: Some(tx),
            rx,
            waker,
            times,
            join: Some(join),
        })
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl DurableLog {
    /// When the next group commit is due, if anything is unsynced.
    fn next_group_commit(&self, log: &Log) -> Option<Instant> {
        if self.in_flight {
            // The syncer wakes the loop when it is done; without a waker
            // (a loop that never gave one) look again shortly.
            return match self.syncer.waker.get() {
                Some(_) => None,
                None => Some(Instant::now() + Duration::from_millis(1)),
            };
        }
        if self.policy == FsyncPolicy::Never || !log.has_unsynced() {
            return None;
        }
        match (self.policy, self.last_sync_start) {
            (FsyncPolicy::Interval, Some(t)) => Some(t + self.interval()),
            _ => Some(Instant::now()),
        }
    }

    pub fn open(root: impl Into<PathBuf>, cfg: LogConfig) -> Result<Self> {
        let root = root.into();
        let policy = cfg.fsync;
        let cfg = LogConfig {
            fsync: FsyncPolicy::Never,
            ..cfg
        };
        let log = Log::open(&root, cfg.clone())?;
        Ok(Self {
            root,
            cfg,
            policy,
            log: Some(log),
            reopen_error: None,
            syncer: Syncer::start()?,
            in_flight: false,
            last_sync_start: None,
            pending: Pending::default(),
        })
    }

    /// The open log (None between a failed reopen and the next try).
    pub fn log(&self) -> Option<&Log> {
        self.log.as_ref()
    }

    fn closed(&self) -> LogError {
        LogError::Invalid(format!(
            "the log at {} could not be reopened after an I/O error ({}); retrying",
            self.root.display(),
            self.reopen_error.as_deref().unwrap_or("unknown")
        ))
    }

    fn get_mut(&mut self) -> std::result::Result<&mut Log, LogError> {
        let e = self.closed();
        self.log.as_mut().ok_or(e)
    }

    /// Writes the gathered appends. On error a prefix may be stored; the
    /// partition's `next_offset` says where it stands, and the store fetches
    /// the rest again.
    fn flush_pending(&mut self) -> std::result::Result<(), LogError> {
        if self.pending.live == 0 {
            return Ok(());
        }
        let mut first_err = None;
        let mut values: Vec<&[u8]> = Vec::new();
        for b in self.pending.in_use() {
            values.clear();
            values.extend(b.values.iter());
            let r = match self.log.as_mut() {
                Some(log) => log.append_checked_bodies(&b.topic, &b.partition, b.first, &values),
                None => Err(self.closed()),
            };
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        drop(values);
        // Keeps the buffers' capacity for the next turn.
        self.pending.clear();
        first_err.map_or(Ok(()), Err)
    }

    /// Applies a finished sync, waiting for it up to `wait`.
    fn collect(&mut self, wait: Duration) -> std::result::Result<(), LogError> {
        if !self.in_flight {
            return Ok(());
        }
        // Disconnected: the sync thread ended (a panic) without an answer.
        // Said as an error: before, the sync stayed "in flight" for good, and
        // the store stopped ACKing with no error reported.
        let got = if wait.is_zero() {
            self.syncer
                .rx
                .try_recv()
                .map_err(|e| e == TryRecvError::Disconnected)
        } else {
            self.syncer
                .rx
                .recv_timeout(wait)
                .map_err(|e| e == RecvTimeoutError::Disconnected)
        };
        let done = match got {
            Ok(done) => done,
            Err(false) => return Ok(()),
            Err(true) => {
                return Err(LogError::Invalid(
                    "the store's sync thread stopped (see the log for its panic): nothing \
                     more becomes durable or is acknowledged; restart the store"
                        .into(),
                ))
            }
        };
        self.in_flight = false;
        match self.log.as_mut() {
            Some(log) => log.finish_sync(done),
            None => Ok(()),
        }
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.cfg.flush_interval_ms)
    }

    /// True if no sync started within the last `flush_interval_ms`.
    fn interval_passed(&self, now: Instant) -> bool {
        self.last_sync_start
            .is_none_or(|t| now.duration_since(t) >= self.interval())
    }

    /// Starts a sync of everything appended so far on the syncer thread.
    fn start_sync(&mut self) -> std::result::Result<(), LogError> {
        let batch = self.get_mut()?.begin_sync();
        if batch.is_empty() {
            return Ok(());
        }
        match self.syncer.tx.as_ref().map(|tx| tx.send(batch)) {
            Some(Ok(())) => {
                self.in_flight = true;
                self.last_sync_start = Some(Instant::now());
                Ok(())
            }
            _ => Err(LogError::Invalid("the sync thread stopped".into())),
        }
    }
}

fn part_name(partition: &[u8]) -> Option<&str> {
    std::str::from_utf8(partition).ok()
}

impl StoreLog for DurableLog {
    type Error = LogError;

    fn next_offset(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        let p = part_name(partition)?;
        if let Some(b) = self.pending.get(topic, p) {
            return Some(b.next());
        }
        self.log.as_ref()?.next_offset(topic, p)
    }
    fn first_offset(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        let p = part_name(partition)?;
        let held = self.log.as_ref()?.first_offset(topic, p);
        held.or_else(|| self.pending.get(topic, p).map(|b| b.first))
    }
    fn append(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        offset: u64,
        content: &[u8],
    ) -> std::result::Result<(), LogError> {
        let p = part_name(partition)
            .ok_or_else(|| LogError::Invalid("partition name is not UTF-8".into()))?;
        let mut at = self.pending.find(topic, p);
        if at.is_some_and(|i| self.pending.batches[i].next() != offset) {
            // Not the next of this partition's batch: write what is gathered,
            // then the log says what it expects.
            self.flush_pending()?;
            at = None;
        }
        if at.is_none() {
            let log = self.get_mut()?;
            if let Some(expected) = log.next_offset(topic, p).filter(|&e| e != offset) {
                return Err(LogError::OffsetMismatch {
                    topic: String::from_utf8_lossy(topic).into_owned(),
                    partition: p.to_string(),
                    expected,
                    got: offset,
                });
            }
            at = Some(self.pending.start(topic, p, offset));
        }
        self.pending.push(at.expect("set above"), content);
        if self.pending.bytes >= PENDING_BYTES {
            self.flush_pending()?;
        }
        Ok(())
    }
    fn append_run(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        first: u64,
        values: &mut dyn Iterator<Item = &[u8]>,
    ) -> (u64, Option<LogError>) {
        let Some(p) = part_name(partition) else {
            let e = LogError::Invalid("partition name is not UTF-8".into());
            return (0, values.next().map(|_| e));
        };
        // `append` finds (or starts) the partition's pending batch and checks
        // the offset; the values after it go straight into that batch, until
        // the pending bytes are written out.
        let mut n = 0;
        let mut at = None;
        for v in values {
            match at {
                Some(i) => {
                    self.pending.push(i, v);
                    if self.pending.bytes >= PENDING_BYTES {
                        at = None;
                        if let Err(e) = self.flush_pending() {
                            return (n, Some(e));
                        }
                    }
                }
                None => {
                    if let Err(e) = self.append(topic, partition, first + n, v) {
                        return (n, Some(e));
                    }
                    at = self.pending.find(topic, p);
                }
            }
            n += 1;
        }
        (n, None)
    }
    fn read_into(
        &self,
        topic: &[u8],
        partition: &[u8],
        start: u64,
        max_records: usize,
        max_bytes: usize,
        out: &mut Batch,
    ) -> std::result::Result<Option<u64>, LogError> {
        out.clear();
        let (Some(log), Some(p)) = (self.log.as_ref(), part_name(partition)) else {
            return Ok(None);
        };
        let mut first = None;
        let r = log.read_with(topic, p, start, max_records, max_bytes, |offset, _, v| {
            first.get_or_insert(offset);
            // A body (metadata, value), as the store holds and serves records.
            out.push(v);
        });
        match r {
            Ok(_) => Ok(first),
            // Retention removed it meanwhile, or it is past the end: nothing.
            Err(LogError::OffsetOutOfRange { .. } | LogError::UnknownPartition { .. }) => {
                out.clear();
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
    fn offset_for_time(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        ts: u64,
    ) -> std::result::Result<Option<u64>, LogError> {
        let Some(p) = part_name(partition) else {
            return Ok(None);
        };
        // Records gathered but not yet written count too.
        self.flush_pending()?;
        match self.log.as_ref() {
            Some(log) => match log.offset_for_time(topic, p, ts) {
                Err(LogError::UnknownPartition { .. }) => Ok(None),
                r => r,
            },
            None => Ok(None),
        }
    }
    fn skip_to(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        offset: u64,
    ) -> std::result::Result<(), LogError> {
        let p = part_name(partition)
            .ok_or_else(|| LogError::Invalid("partition name is not UTF-8".into()))?;
        // What is gathered for it goes to the log first (in order), then goes.
        self.flush_pending()?;
        self.get_mut()?.skip_to(topic, p, offset)
    }
    fn durable_next(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        let log = self.log.as_ref()?;
        let p = part_name(partition)?;
        if self.policy == FsyncPolicy::Never {
            log.next_offset(topic, p)
        } else {
            log.durable_next(topic, p)
        }
    }
    fn partitions(&self, topic: Option<&[u8]>) -> Vec<PartKey> {
        let Some(log) = self.log.as_ref() else {
            return Vec::new();
        };
        // Parked partitions hold no record: no head to tell (a store that
        // has seen a million partitions would walk them all at every ask).
        let mut keys: Vec<PartKey> = log
            .open_partitions(topic)
            .into_iter()
            .map(|(t, p)| (t, p.into_bytes()))
            .collect();
        for b in self.pending.in_use() {
            if topic.is_none_or(|t| t == b.topic.as_slice())
                && log.next_offset(&b.topic, &b.partition).is_none()
            {
                keys.push((b.topic.clone(), b.partition.clone().into_bytes()));
            }
        }
        keys
    }
    fn sync_if_due(&mut self) -> std::result::Result<(), LogError> {
        self.flush_pending()?;
        self.collect(Duration::ZERO)?;
        // Retention (the log's own fsync is off, so its tick never syncs).
        self.get_mut()?.tick()?;
        if self.in_flight {
            return Ok(());
        }
        let (policy, interval_passed) = (self.policy, self.interval_passed(Instant::now()));
        let log = self.get_mut()?;
        let due = match policy {
            FsyncPolicy::Always => log.has_unsynced(),
            // `sync_due` adds the `flush_messages` bound.
            FsyncPolicy::Interval => log.has_unsynced() && (interval_passed || log.sync_due()),
            FsyncPolicy::Never => false,
        };
        if due {
            self.start_sync()?;
        }
        Ok(())
    }
    fn sync_all(&mut self) -> std::result::Result<(), LogError> {
        self.flush_pending()?;
        self.collect(Duration::from_secs(60))?;
        self.get_mut()?.sync()
    }
    fn close(&mut self) -> std::result::Result<(), LogError> {
        match self.log.take() {
            Some(log) if !self.in_flight => log.close(),
            // A sync still running: dropped, and the next open syncs all.
            _ => Ok(()),
        }
    }
    fn next_sync(&self) -> Option<Instant> {
        let log = self.log.as_ref()?;
        // Retention goes on a batch at a time: at the next turn (1 ms on, so
        // a turn that cannot reach it does not spin), not the next wake-up
        // for something else (an idle store without a tower wakes once a
        // minute).
        let retention = log
            .retention_pending()
            .then(|| Instant::now() + Duration::from_millis(1));
        retention
            .into_iter()
            .chain(self.next_group_commit(log))
            .min()
    }
    fn set_waker(&mut self, waker: Arc<Waker>) {
        let _ = self.syncer.waker.set(waker);
    }
    fn sync_times(&self) -> Option<Arc<SyncTimes>> {
        Some(self.syncer.times.clone())
    }
    fn files_and_damaged(&self) -> (usize, usize) {
        self.log
            .as_ref()
            .map_or((0, 0), |l| (l.open_files(), l.damaged_count()))
    }
    fn parked(&self) -> usize {
        self.log.as_ref().map_or(0, Log::parked_count)
    }
    fn set_aside(&self, topic: &[u8], partition: &[u8]) -> bool {
        match (self.log.as_ref(), part_name(partition)) {
            (Some(log), Some(p)) => log.is_set_aside(topic, p),
            _ => false,
        }
    }
    fn retry_set_aside(&mut self) -> std::result::Result<(), LogError> {
        self.log.as_mut().map_or(Ok(()), Log::retry_set_aside)
    }
    fn recover(&mut self) -> std::result::Result<(), LogError> {
        // Let a sync in flight end, then recover from the files: the
        // partitions that failed (or were set aside at open) only, or the
        // whole log if it is closed.
        let _ = self.collect(Duration::from_secs(60));
        self.in_flight = false;
        self.pending.clear();
        if let Some(log) = self.log.as_mut() {
            return log.reopen_failed().and_then(|()| log.sync());
        }
        let reopened = Log::open(&self.root, self.cfg.clone()).and_then(|mut log| {
            log.sync()?;
            Ok(log)
        });
        match reopened {
            Ok(log) => {
                self.log = Some(log);
                self.reopen_error = None;
                Ok(())
            }
            Err(e) => {
                self.reopen_error = Some(e.to_string());
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::out::Out;
    use crate::node::store::state::tests::{fetch_of, ME, P, T};
    use crate::node::store::state::{StoreState, StoreStateConfig};
    use crate::wire::Head;

    /// A record the durable log wrote although `append` reported an error (the
    /// error came from another partition's batch, written in the same flush of
    /// pending appends) is put back among the held records, below the
    /// partition's next offset. `fetch_gap` used to see a held record at or
    /// below the next offset ("drain_held will make progress") and return, and
    /// `tick` drains only when the next offset itself is held: the gap after it
    /// was never FETCHed again, and the store stalled although the producer held
    /// it. Now `fetch_gap` drops held records below the next offset first.
    #[test]
    fn a_gap_is_fetched_after_an_append_error_from_another_partitions_batch() {
        use crate::log::{IoOp, LogConfig};
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        use std::sync::Arc;
        const B: &[u8] = b"PRODUCER00000000000000000000000B";
        let dir = tempfile::tempdir().unwrap();
        let failing = Arc::new(AtomicBool::new(false));
        let f = failing.clone();
        let cfg = LogConfig {
            failpoint: Some(Arc::new(move |op, path: &std::path::Path| {
                let b = std::str::from_utf8(B).unwrap();
                if f.load(SeqCst) && op == IoOp::Write && path.to_string_lossy().contains(b) {
                    Err(std::io::Error::from_raw_os_error(28)) // ENOSPC
                } else {
                    Ok(())
                }
            })),
            ..LogConfig::default()
        };
        let log = DurableLog::open(dir.path().join("log"), cfg).unwrap();
        let mut s = StoreState::new(ME.to_vec(), log, StoreStateConfig::default());
        let t0 = Instant::now();
        // The store holds bodies (metadata, value).
        let body = |v: &[u8]| {
            let mut b = Vec::new();
            crate::meta::wrap(&mut b, Some(1), v);
            b
        };
        s.on_record(T, B, 0, &body(b"b0"), t0);
        s.on_record(T, P, 0, &body(b"r0"), t0);
        // 2 and 4 arrive before 1 and 3: held, 1 fetched.
        let big = body(&vec![7u8; 4 << 20]);
        assert_eq!(fetch_of(&s.on_record(T, P, 2, &big, t0)), vec![(1, 1)]);
        s.on_record(T, P, 4, &body(b"r4"), t0);
        // B's disk fails; the answer 1 comes: 1 and the held 2 are appended, and
        // 2's append flushes the pending appends, where B's fails.
        failing.store(true, SeqCst);
        s.on_direct_record(T, P, 1, &body(b"r1"), t0);
        failing.store(false, SeqCst);
        assert!(s.last_error().is_some());
        assert_eq!(s.log().next_offset(T, P), Some(3), "0..=2 were written");
        // What the store loop does: recover, then tick on.
        s.log_mut().recover().unwrap();
        s.clear_error();
        let mut fetched = Vec::new();
        let mut t = t0;
        for _ in 0..20 {
            t += Duration::from_millis(600);
            s.log_mut().sync_if_due().unwrap();
            // The producer, alive, tells its head every second.
            let head = Head {
                topic: T,
                address: P,
                subject: T,
                sequence: 4,
            };
            let mut outs = s.on_head(&head, t);
            outs.extend(s.tick(t));
            for o in outs {
                if let Out::Fetch {
                    partition,
                    sequence,
                    count,
                    ..
                } = o
                {
                    if partition == P {
                        fetched.push((sequence, count));
                    }
                }
            }
        }
        assert!(
            fetched.iter().any(|&(seq, _)| seq == 3),
            "record 3 (the gap before the held 4) was never fetched: {fetched:?}"
        );
    }
}
