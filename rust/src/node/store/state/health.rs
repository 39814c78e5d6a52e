//! A store's storage errors (a full disk, an I/O error): which one it
//! reports, when it tries to recover the log, and when it says its writes
//! succeed again. [`StoreState::maintain`] runs it at each loop turn,
//! around the log's group commit.
//!
//! - Any storage failure (a sync, a recovery, an append or a read; a
//!   failing sync's text wins over the others) is reported until records
//!   appended after it were synced *and* a whole [`RECOVER_EVERY`] went by
//!   without another failure. A nearly full disk lets a few appends through
//!   after each recovery (and a buffered append "succeeds" until its
//!   buffer is written): no reason to report it healthy for a moment.
//! - After any storage error the store stops ACKing (nothing new is durable)
//!   and tries to recover the log every [`RECOVER_EVERY`]; once that works,
//!   the gaps are FETCHed again from producers and stores.
//! - Without errors, partitions the log set aside as damaged are looked at
//!   again as often: they come back (or are forgotten) once repaired or
//!   moved away.

use std::time::{Duration, Instant};

use super::{StoreLog, StoreState};
use crate::node::out::Out;

/// After a storage error, try to recover the log this often.
pub const RECOVER_EVERY: Duration = Duration::from_secs(1);

/// The storage error state of a store.
#[derive(Debug)]
pub(super) struct Health {
    /// The storage error reported until writes succeed again.
    error: Option<String>,
    /// Whether `error` is a failing sync's (or recovery's): an append's
    /// does not replace it.
    error_is_sync: bool,
    /// An append or read failure the last turn has not looked at yet
    /// ([`StoreState::note_failure`]): the next [`StoreState::maintain`]
    /// reports it, even if a later append of the same turn succeeded.
    unseen: Option<String>,
    /// Records appended when the error was last seen: it stays reported
    /// until more were appended (and synced).
    error_mark: u64,
    /// The last storage failure seen.
    last_failure: Instant,
    /// The last recovery (or look at the damaged partitions).
    last_recover: Instant,
    /// Syncs that failed.
    sync_failures: u64,
}

impl Health {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            error: None,
            error_is_sync: false,
            unseen: None,
            error_mark: 0,
            last_failure: now,
            last_recover: now,
            sync_failures: 0,
        }
    }

    /// A failure now: reported (a sync's text over an append's), and the
    /// wait before it clears starts again.
    fn failed(&mut self, e: String, is_sync: bool, appended: u64, now: Instant) {
        if self.error.is_none() || is_sync || !self.error_is_sync {
            self.error = Some(e);
            self.error_is_sync = is_sync;
        }
        self.error_mark = appended;
        self.last_failure = now;
    }
}

impl<L: StoreLog> StoreState<L> {
    /// Each loop turn: the log's group commit (the turn's appends written,
    /// a finished sync taken in), storage errors and recovery, then what
    /// is due: ACKs of what syncs made durable, FETCH retries
    /// ([`StoreState::tick`]), the GET-HEADS to the other stores.
    pub fn maintain(&mut self, now: Instant) -> Vec<Out> {
        if let Some(e) = self.health.unseen.take() {
            let appended = self.counters.appended;
            self.health.failed(e, false, appended, now);
        }
        self.group_commit(now);
        self.recover_if_due(now);
        let mut out = self.tick(now);
        out.extend(self.peer_heads_due(now));
        out
    }

    /// The storage error to report, until writes succeed again.
    pub fn storage_error(&self) -> Option<&str> {
        self.health.error.as_deref().or(self.last_error())
    }

    /// An append or a read failed: `last_error` until an append succeeds,
    /// and reported from the next [`StoreState::maintain`] on.
    pub(super) fn note_failure(&mut self, e: String) {
        self.health.unseen = Some(e.clone());
        self.last_error = Some(e);
    }

    /// Syncs that failed so far.
    pub fn sync_failures(&self) -> u64 {
        self.health.sync_failures
    }

    fn group_commit(&mut self, now: Instant) {
        let appended = self.counters.appended;
        let h = &mut self.health;
        match self.log.sync_if_due() {
            Ok(()) => {
                if h.error.is_some()
                    && appended > h.error_mark
                    && now.duration_since(h.last_failure) >= RECOVER_EVERY
                {
                    tracing::info!("store writes succeed again");
                    h.error = None;
                }
            }
            Err(e) => {
                if !h.error_is_sync || h.error.is_none() {
                    tracing::error!("store sync failed: {e}");
                }
                h.sync_failures += 1;
                h.failed(format!("sync failed: {e}"), true, appended, now);
            }
        }
    }

    fn recover_if_due(&mut self, now: Instant) {
        if now.duration_since(self.health.last_recover) < RECOVER_EVERY {
            return;
        }
        self.health.last_recover = now;
        if self.health.error.is_none() {
            // Partitions set aside as damaged come back (or are forgotten)
            // once repaired or moved away; still damaged, they stay counted.
            let _ = self.log.retry_set_aside();
            return;
        }
        // An append failed since the last look: a failure now. (A recovery
        // for a sync error alone is not one.)
        let failed = self.last_error.is_some();
        if failed {
            self.health.last_failure = now;
        }
        let appended = self.counters.appended;
        match self.log.recover() {
            Ok(()) => {
                // Reported as `error` still, until writes succeed again.
                self.last_error = None;
                if failed {
                    self.health.error_mark = appended;
                }
            }
            Err(e) => {
                let e = format!("recovery failed: {e}");
                self.health.failed(e, true, appended, now);
            }
        }
    }
}
