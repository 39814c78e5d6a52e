//! Who hears a producer's live records, and in which messages: counted from
//! every subscription and unsubscription its XPUB sees (`ZMQ_XPUB_VERBOSER`).
//!
//! This project's stores subscribe `X` and consumers `X` + topic (records
//! with their metadata, META-RECORD-BATCH), each beside the `M` (RECORD) one
//! they make for producers that know no metadata. A subscriber that makes
//! only the `M` one (the C reference) is one more `M` than `X`: only then
//! does a producer also send RECORDs. A node of ours gets each record once.

use crate::wire::{Kind, Subscription};

/// Subscriptions to our topic's RECORDs (`M`) and META-RECORD-BATCHes
/// (`X`) that match it, counted.
#[derive(Debug)]
pub struct Routes {
    topic: Vec<u8>,
    plain: usize,
    meta: usize,
}

impl Routes {
    pub fn new(topic: &[u8]) -> Self {
        Self {
            topic: topic.to_vec(),
            plain: 0,
            meta: 0,
        }
    }

    /// A subscription (or unsubscription) seen on the XPUB; one that does
    /// not let our records through changes nothing.
    pub fn on_subscription(&mut self, sub: &Subscription<'_>) {
        let n = if sub.prefix.lets_through(Kind::Record, &self.topic) {
            &mut self.plain
        } else if sub.prefix.lets_through(Kind::MetaRecordBatch, &self.topic) {
            &mut self.meta
        } else {
            return;
        };
        *n = if sub.subscribe {
            n.saturating_add(1)
        } else {
            n.saturating_sub(1)
        };
    }

    /// Someone takes META-RECORD-BATCHes: send them.
    pub fn meta(&self) -> bool {
        self.meta > 0
    }

    /// Someone takes RECORDs but not META-RECORD-BATCHes: send RECORDs too.
    pub fn plain(&self) -> bool {
        self.plain > self.meta
    }
}

#[cfg(test)]
mod tests;
