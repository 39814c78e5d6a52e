//! The owner's periodic work ([`Log::tick`]): interval syncs that fell
//! due, retention every `retention_check_ms`, and settling idle partitions.

use super::config::FsyncPolicy;
use super::error::Result;
use super::Log;

impl Log {
    /// Periodic work for the owner's event loop: interval syncs that fell due and,
    /// every `retention_check_ms`, retention. Cheap when nothing is due.
    pub fn tick(&mut self) -> Result<()> {
        let mut first_err = self.flush_writes().err();
        // Other logs of the process may need descriptors this one holds.
        self.close_idle_files();
        let now = self.cfg.now();
        if self.cfg.fsync == FsyncPolicy::Interval && !self.sync_elsewhere {
            for p in self.parts.values_mut() {
                if let Err(e) = p.maybe_sync(now) {
                    first_err.get_or_insert(e);
                }
            }
        }
        let more = self.park_more || self.retain_more;
        if !self.cfg.read_only
            && (more || now.saturating_sub(self.last_retention_ms) >= self.cfg.retention_check_ms)
        {
            if !more {
                self.last_retention_ms = now;
                self.settle_idle();
            }
            // Parks at most PARK_BATCH partitions and deletes at most
            // RETAIN_BATCH other segments: many expiring at once (every task
            // of a large Spark job) would hold up the owner's loop (a store's
            // ACKs) for seconds.
            if let Err(e) = self.retention_sweep(true) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Partitions not appended to since the last periodic check write out
    /// the index entries they hold in memory and drop the buffer (up to 4
    /// KiB each: a finished Spark task's partition would keep it for the
    /// whole of retention).
    pub(super) fn settle_idle(&mut self) {
        let since = std::mem::replace(&mut self.uses_at_check, self.uses);
        for p in self.parts.values_mut() {
            if p.last_used <= since {
                p.settle_index();
            }
        }
    }

    /// When [`Log::tick`] next has work (ms since the epoch, by the log's clock).
    pub fn next_deadline(&self) -> u64 {
        let retention = if self.park_more || self.retain_more {
            self.last_retention_ms
        } else {
            self.last_retention_ms
                .saturating_add(self.cfg.retention_check_ms)
        };
        if self.sync_elsewhere {
            return retention;
        }
        self.parts
            .values()
            .filter_map(|p| p.sync_deadline())
            .fold(retention, u64::min)
    }
}
