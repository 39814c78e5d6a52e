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
    fn bytes(&self, topic: &[u8], partition: &[u8]) -> u64 {
        let info = || self.log.as_ref()?.partition(topic, part_name(partition)?);
        info().map_or(0, |i| i.bytes)
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
mod tests;
