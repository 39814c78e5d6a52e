//! The store's own counters ([`StoreCounters`], kept by
//! [`StoreState`](super::StoreState)) and their copy in relaxed atomics
//! ([`SharedCounters`]) that the node thread publishes at every turn: a
//! handle, `stats()` or a metrics scrape reads them without a lock the node
//! thread takes. Each field is declared once, with the help text that its
//! documentation and its Prometheus metric (`dafka_store_NAME_total`) share.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! store_counters {
    ($($(#[$m:meta])* $f:ident: $help:literal,)*) => {
        /// Counters the store exposes.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct StoreCounters {
            $(#[doc = $help] $(#[$m])* pub $f: u64,)*
        }

        /// [`StoreCounters`] as the node thread last published them.
        #[derive(Debug, Default)]
        pub struct SharedCounters {
            $($f: AtomicU64,)*
        }

        impl SharedCounters {
            /// The node thread's copy (relaxed stores, no lock).
            pub fn publish(&self, c: &StoreCounters) {
                $(self.$f.store(c.$f, Relaxed);)*
            }

            /// The last published counters (each field as of some publish:
            /// two fields may be a turn apart).
            pub fn snapshot(&self) -> StoreCounters {
                StoreCounters { $($f: self.$f.load(Relaxed),)* }
            }
        }

        impl StoreCounters {
            /// `(name, help, value)` of every counter, in declaration order.
            pub fn named(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$((stringify!($f), $help, self.$f),)*]
            }
        }
    };
}

store_counters! {
    appended: "Records appended to the log.",
    /// Bodies as the log stores them (a record that came without metadata:
    /// its value and the 9 bytes of the body it is given), not the log's own
    /// framing and index.
    bytes_appended: "Bytes of the records appended to the log (metadata and value).",
    duplicates: "Records dropped because the log held their offset already.",
    held: "Records held out of order, waiting for the gap before them.",
    dropped_oversize: "Records dropped for being longer than max_record_bytes.",
    /// A partition name that is not 1-64 bytes of ASCII letters, digits,
    /// '-' and '_', the offset 2^64-1 (no next offset could follow it), or a
    /// new partition's topic too long to name a directory (over 255 bytes
    /// escaped).
    dropped_invalid: "RECORDs and HEADs no store could hold (bad partition name, offset or topic).",
    dropped_held_full: "Records dropped because the held records of their partition were full.",
    fetches_sent: "FETCHes the store sent for the gaps of its partitions.",
    fetches_answered: "FETCHes the store answered from its log.",
    fetches_unknown: "FETCHes for partitions or offsets the store does not hold.",
    records_served: "Records sent in answer to FETCHes.",
    /// Bodies as the log holds them, whatever form the answer takes (a
    /// requester that knows no metadata gets the values only).
    bytes_served: "Bytes of the records sent in answer to FETCHes (metadata and value).",
    acks_sent: "ACKs sent to producers.",
    append_errors: "Appends the storage refused (a storage error).",
    /// See [`StoreLog::set_aside`](super::StoreLog::set_aside).
    dropped_set_aside: "Records for partitions set aside as damaged: dropped, neither held nor fetched.",
    /// Because every peer answered its FETCH from past them: retention
    /// deleted them everywhere.
    records_skipped: "Offsets of known partitions, deleted by retention everywhere, that the store skipped.",
}
