//! Who hears a producer's live records, and in which messages: counted from
//! every subscription and unsubscription its XPUB sees (`ZMQ_XPUB_VERBOSER`).
//!
//! This project's stores subscribe `X` and consumers `X` + topic (records
//! with their metadata, META-RECORD-BATCH), each beside the `M` (RECORD) one
//! they make for producers that know no metadata. A subscriber that makes
//! only the `M` one (the C reference) is one more `M` than `X`: only then
//! does a producer also send RECORDs. A node of ours gets each record once.

/// Subscriptions to our topic's RECORDs (`M`) and META-RECORD-BATCHes
/// (`X`) that match it, counted.
#[derive(Debug)]
pub struct Routes {
    plain_frame: Vec<u8>,
    meta_frame: Vec<u8>,
    plain: usize,
    meta: usize,
}

impl Routes {
    pub fn new(topic: &[u8]) -> Self {
        let frame = |id: u8| [&[id][..], topic].concat();
        Self {
            plain_frame: frame(b'M'),
            meta_frame: frame(b'X'),
            plain: 0,
            meta: 0,
        }
    }

    /// A subscription (or unsubscription) seen on the XPUB; one that does
    /// not match our records' frames changes nothing.
    pub fn on_subscription(&mut self, prefix: &[u8], subscribe: bool) {
        let n = if self.plain_frame.starts_with(prefix) && prefix.first() == Some(&b'M') {
            &mut self.plain
        } else if self.meta_frame.starts_with(prefix) && prefix.first() == Some(&b'X') {
            &mut self.meta
        } else {
            return;
        };
        *n = if subscribe {
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
mod tests {
    use super::*;

    #[test]
    fn ours_get_bodies_only_and_a_c_node_gets_records() {
        let mut r = Routes::new(b"logs");
        assert!(!r.meta() && !r.plain(), "nobody listens");
        // A store of ours (`X`, `M`) and a consumer of ours.
        for p in [&b"X"[..], b"M", b"Xlogs", b"Mlogs"] {
            r.on_subscription(p, true);
        }
        assert!(r.meta() && !r.plain());
        // A C consumer: `M` + topic only.
        r.on_subscription(b"Mlogs", true);
        assert!(r.meta() && r.plain());
        r.on_subscription(b"Mlogs", false);
        assert!(!r.plain());
        // Other topics, other messages, and a prefix of another topic.
        for p in [&b"Mlogs2"[..], b"Xother", b"Hlogs", b"Flogs", b"L"] {
            r.on_subscription(p, true);
        }
        assert!(!r.plain());
        // `Mlo` matches our frames (ZeroMQ matches prefixes).
        r.on_subscription(b"Mlo", true);
        assert!(r.plain());
        let mut r = Routes::new(b"logs");
        r.on_subscription(b"M", false);
        assert!(!r.plain(), "an unsubscription never goes below nothing");
    }
}
