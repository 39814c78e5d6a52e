//! The store's storage: [`DurableLog`], the segment log ([`crate::log`])
//! behind the [`StoreLog`] trait, with its group commit run on a syncer
//! thread and recovery after an I/O error. What each sync made durable
//! ([`StoreLog::take_durable`]) is what the store ACKs.
//!
//! The group commit is the log's (`log/sync.rs`): its fsync policy says
//! when one is due, its write buffer gathers the appends of a loop turn, and
//! a finished sync tells which partitions reached which durable offset. This
//! file only runs the fdatasyncs off the store's thread, wakes the store's
//! loop when they end, and hands their report over.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{Error, Result};
use crate::log::{Durable, FsyncPolicy, Log, LogConfig, LogError, SyncBatch, SyncDone};
use crate::node::actor::Waker;
use crate::node::batch::Batch;
use crate::node::stats::SyncTimes;

use super::state::{PartKey, StoreLog};

/// The durable log as the store's storage.
///
/// Group commit runs on a syncer thread: the store thread keeps appending
/// (into the page cache) while the previous batch is fdatasynced, so ACK
/// throughput is not bounded by fsync latency; a partition is reported
/// durable only once a sync of its bytes returned. After an I/O error the
/// log is reopened in place: it refuses a partition after a failed write or
/// fdatasync (the kernel may have dropped dirty pages), and a reopen
/// recovers it from what is really on disk, then syncs, so nothing is
/// reported durable that is not.
pub struct DurableLog {
    root: PathBuf,
    cfg: LogConfig,
    log: Option<Log>,
    /// Why the last reopen failed, while the log is closed.
    reopen_error: Option<String>,
    syncer: Syncer,
    in_flight: bool,
    /// What syncs made durable since the store last took it.
    durable: Vec<Durable>,
    /// `fsync = never` (ACK what is written, no fdatasync): the partitions
    /// appended to since the store last took what is durable.
    written: FxHashMap<Vec<u8>, FxHashSet<String>>,
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

/// Opens the log for the store: the store runs its group commits.
fn open_log(root: &std::path::Path, cfg: &LogConfig) -> std::result::Result<Log, LogError> {
    let mut log = Log::open(root, cfg.clone())?;
    log.sync_elsewhere();
    Ok(log)
}

impl DurableLog {
    pub fn open(root: impl Into<PathBuf>, cfg: LogConfig) -> Result<Self> {
        let root = root.into();
        let log = open_log(&root, &cfg)?;
        Ok(Self {
            root,
            cfg,
            log: Some(log),
            reopen_error: None,
            syncer: Syncer::start()?,
            in_flight: false,
            durable: Vec::new(),
            written: FxHashMap::default(),
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

    /// `fsync = never`: ACKs follow the writes.
    fn never(&self) -> bool {
        self.cfg.fsync == FsyncPolicy::Never
    }

    /// Notes a partition appended to, for `fsync = never` (where what is
    /// written is what is ACKed).
    fn note_written(&mut self, topic: &[u8], partition: &str) {
        if !self.never() {
            return;
        }
        if !self
            .written
            .get(topic)
            .is_some_and(|ps| ps.contains(partition))
        {
            let ps = self.written.entry(topic.to_vec()).or_default();
            ps.insert(partition.to_string());
        }
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
            Some(log) => log.finish_sync_into(done, &mut self.durable),
            None => Ok(()),
        }
    }

    /// Starts a sync of everything appended so far on the syncer thread.
    fn start_sync(&mut self) -> std::result::Result<(), LogError> {
        let batch = self.get_mut()?.begin_sync();
        if batch.is_empty() {
            return Ok(());
        }
        let sent = self
            .syncer
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send(batch).is_ok());
        if !sent {
            return Err(LogError::Invalid("the sync thread stopped".into()));
        }
        self.in_flight = true;
        Ok(())
    }
}

fn part_name(partition: &[u8]) -> Option<&str> {
    std::str::from_utf8(partition).ok()
}

impl StoreLog for DurableLog {
    type Error = LogError;

    fn next_offset(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        self.log.as_ref()?.next_offset(topic, part_name(partition)?)
    }
    fn first_offset(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        self.log
            .as_ref()?
            .first_offset(topic, part_name(partition)?)
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
        self.note_written(topic, p);
        self.get_mut()?.append_buffered(topic, p, offset, content)
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
        self.note_written(topic, p);
        match self.log.as_mut() {
            Some(log) => log.append_buffered_run(topic, p, first, values),
            None => {
                let e = self.closed();
                (0, values.next().map(|_| e))
            }
        }
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
            // Retention removed it meanwhile, or it is past the end (or
            // still in the write buffer): nothing.
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
        let Some(log) = self.log.as_mut() else {
            return Ok(None);
        };
        // Records buffered but not yet written count too.
        log.flush_writes()?;
        match log.offset_for_time(topic, p, ts) {
            Err(LogError::UnknownPartition { .. }) => Ok(None),
            r => r,
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
        // What is buffered for it is written first (in order), then goes.
        self.get_mut()?.skip_to(topic, p, offset)
    }
    fn durable_next(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        let log = self.log.as_ref()?;
        let p = part_name(partition)?;
        if self.never() {
            log.written_next(topic, p)
        } else {
            log.durable_next(topic, p)
        }
    }
    fn take_durable(&mut self, out: &mut Vec<(PartKey, u64)>) {
        out.extend(
            self.durable
                .drain(..)
                .map(|d| ((d.topic, d.partition.into_bytes()), d.next)),
        );
        if !self.written.is_empty() {
            // `never`: what was written (the turn's appends were flushed by
            // `sync_if_due`) is what is ACKed.
            for (t, ps) in std::mem::take(&mut self.written) {
                for p in ps {
                    if let Some(next) = self.log.as_ref().and_then(|l| l.written_next(&t, &p)) {
                        out.push(((t.clone(), p.into_bytes()), next));
                    }
                }
            }
        }
    }
    fn partitions(&self, topic: Option<&[u8]>) -> Vec<PartKey> {
        let Some(log) = self.log.as_ref() else {
            return Vec::new();
        };
        // Parked partitions hold no record: no head to tell (a store that
        // has seen a million partitions would walk them all at every ask).
        log.open_partitions(topic)
            .into_iter()
            .map(|(t, p)| (t, p.into_bytes()))
            .collect()
    }
    fn sync_if_due(&mut self) -> std::result::Result<(), LogError> {
        // The turn's appends are written, a finished sync applied, then
        // retention (`tick`) and the next group commit if the policy wants it.
        self.get_mut()?.flush_writes()?;
        self.collect(Duration::ZERO)?;
        self.get_mut()?.tick()?;
        if self.in_flight || self.never() {
            return Ok(());
        }
        if self.get_mut()?.sync_due() {
            self.start_sync()?;
        }
        Ok(())
    }
    fn sync_all(&mut self) -> std::result::Result<(), LogError> {
        self.collect(Duration::from_secs(60))?;
        let durable = &mut self.durable;
        match self.log.as_mut() {
            Some(log) => log.sync_into(durable),
            None => Err(self.closed()),
        }
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
        let now = Instant::now();
        // Retention goes on a batch at a time: at the next turn (1 ms on, so
        // a turn that cannot reach it does not spin), not the next wake-up
        // for something else (an idle store without a tower wakes once a
        // minute).
        let retention = log
            .retention_pending()
            .then(|| now + Duration::from_millis(1));
        let commit = if self.in_flight {
            // The syncer wakes the loop when it is done; without a waker
            // (a loop that never gave one) look again shortly.
            match self.syncer.waker.get() {
                Some(_) => None,
                None => Some(now + Duration::from_millis(1)),
            }
        } else if self.never() {
            None
        } else {
            log.next_sync_at()
        };
        retention.into_iter().chain(commit).min()
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
        // whole log if it is closed. Appends not yet written are dropped
        // (the store fetches them again).
        let _ = self.collect(Duration::from_secs(60));
        self.in_flight = false;
        if let Some(log) = self.log.as_mut() {
            log.discard_writes();
            let durable = &mut self.durable;
            return log.reopen_failed().and_then(|()| log.sync_into(durable));
        }
        let reopened = open_log(&self.root, &self.cfg).and_then(|mut log| {
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

    /// Takes what the syncs reported durable, turning the store's loop
    /// (`sync_if_due`) until something is reported (a generous bound: the
    /// syncer thread may be slow on a busy machine).
    fn wait_durable(log: &mut DurableLog) -> Vec<(PartKey, u64)> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = Vec::new();
        while got.is_empty() {
            assert!(Instant::now() < deadline, "no sync was reported");
            log.sync_if_due().unwrap();
            log.take_durable(&mut got);
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    }

    /// The store's storage reports, after each sync on its syncer thread,
    /// exactly the partitions that sync made durable with their durable
    /// offsets; nothing before the fdatasync returned, nothing for a
    /// partition not written since.
    #[test]
    fn a_finished_sync_reports_the_partitions_it_made_durable() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            flush_interval_ms: 1,
            ..LogConfig::default()
        };
        let mut log = DurableLog::open(dir.path().join("log"), cfg).unwrap();
        let body = |v: &[u8]| {
            let mut b = Vec::new();
            crate::meta::wrap(&mut b, Some(1), v);
            b
        };
        let (a, b, c): (&[u8], &[u8], &[u8]) = (b"A0", b"B0", b"C0");
        log.append(T, c, 0, &body(b"c")).unwrap();
        let mut got = wait_durable(&mut log);
        assert_eq!(got, vec![((T.to_vec(), c.to_vec()), 1)]);
        // Buffered appends count at once, and are not durable before a sync.
        log.append(T, a, 0, &body(b"a0")).unwrap();
        let bodies = [body(b"b0"), body(b"b1"), body(b"b2")];
        let (n, e) = log.append_run(T, b, 0, &mut bodies.iter().map(|v| v.as_slice()));
        assert_eq!((n, e.is_none()), (3, true));
        assert_eq!(log.next_offset(T, b), Some(3));
        assert_eq!(log.durable_next(T, b), None, "not even written yet");
        got.clear();
        log.take_durable(&mut got);
        assert!(got.is_empty());
        let mut got = wait_durable(&mut log);
        // Both may take more than one sync: gather until both are in.
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.len() < 2 {
            assert!(Instant::now() < deadline, "{got:?}");
            got.extend(wait_durable(&mut log));
        }
        got.sort();
        assert_eq!(
            got,
            vec![((T.to_vec(), a.to_vec()), 1), ((T.to_vec(), b.to_vec()), 3)]
        );
        assert_eq!(log.durable_next(T, b), Some(3));
        // `fsync = never`: what is written is reported, each turn.
        let mut never = DurableLog::open(
            dir.path().join("never"),
            LogConfig {
                fsync: FsyncPolicy::Never,
                ..LogConfig::default()
            },
        )
        .unwrap();
        never.append(T, a, 0, &body(b"a0")).unwrap();
        never.append(T, a, 1, &body(b"a1")).unwrap();
        assert_eq!(
            wait_durable(&mut never),
            vec![((T.to_vec(), a.to_vec()), 2)]
        );
        never.sync_if_due().unwrap();
        let mut none = Vec::new();
        never.take_durable(&mut none);
        assert!(none.is_empty(), "nothing written since: {none:?}");
    }

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
