//! In which form a node's FETCH answers and ACKs go to each peer, as the
//! subscriptions on its XPUB show (pure: no sockets). A C-reference node
//! subscribes none of this project's extensions, so it gets the RFC's
//! messages; this project's nodes get batches, bodies and addressed ACKs.
//!
//! - [`AnswerForms`]: a requester's FETCH answers as DIRECT-META-RECORD-
//!   BATCHes (`Y` + its address), DIRECT-RECORD-BATCHes (`Q`), or
//!   DIRECT-RECORDs (`D`), and none before its `D` subscription was read.
//! - [`Takers::addressed_acks`]: partitions whose producer subscribed `A` +
//!   its address get ADDRESSED-ACKs instead of ACKs.
//! - [`Reply`]: one FETCH answer, the records and where and how they go
//!   ([`Core::send_reply`](crate::node::socket::Core::send_reply) sends it).

use crate::wire::{Kind, Subscription};

/// Where [`Core::send_records`](crate::node::socket::Core::send_records) sends.
#[derive(Debug, Clone, Copy)]
pub enum Dest<'a> {
    /// RECORDs (RECORD-BATCHes) of our own partition of `topic`.
    Live { topic: &'a [u8] },
    /// DIRECT-RECORDs (DIRECT-RECORD-BATCHes) to `to`, of `partition` of
    /// `topic`: a FETCH answer.
    Direct {
        to: &'a [u8],
        partition: &'a [u8],
        topic: &'a [u8],
    },
}

/// How records are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// One RECORD (DIRECT-RECORD) per record, values only: for the C reference.
    Records,
    /// RECORD-BATCHes (DIRECT-...), values only: for a node that knows
    /// batches but not metadata.
    Batches,
    /// META-RECORD-BATCHes (DIRECT-...): bodies, for this project's nodes.
    Bodies,
}

/// One FETCH answer: the records `first, first + 1, ...` given by their
/// `bodies` (metadata + value, [`crate::meta`]), to `dest`, in `form`.
#[derive(Debug, Clone)]
pub struct Reply<'a, I> {
    pub dest: Dest<'a>,
    pub first: u64,
    pub bodies: I,
    pub form: Form,
}

/// The most requesters a node answers in DIRECT-RECORD-BATCHes (or
/// partitions it ACKs with ADDRESSED-ACKs) at once; the others get
/// DIRECT-RECORDs (plain ACKs).
pub const MAX_TAKERS: usize = 16_384;

/// The peers that take one of this project's extensions, known by a
/// subscription to its kind + their address on our XPUB, gone again with
/// its unsubscription; at most [`MAX_TAKERS`]. A C-reference node never
/// subscribes either kind.
/// - [`Takers::batches`]: requesters whose `Q` + address subscription
///   reached us (this project's consumers, stores and read clients) get
///   their FETCH answers in DIRECT-RECORD-BATCHes.
/// - [`Takers::addressed_acks`]: partitions whose producer subscribed `A` +
///   its address get ADDRESSED-ACKs instead of ACKs.
#[derive(Debug)]
pub struct Takers {
    kind: Kind,
    who: std::collections::HashSet<Vec<u8>>,
}

impl Takers {
    fn of(kind: Kind) -> Self {
        Self {
            kind,
            who: Default::default(),
        }
    }

    /// Requesters that take DIRECT-RECORD-BATCHes (`Q`).
    pub fn batches() -> Self {
        Self::of(Kind::DirectRecordBatch)
    }

    /// Requesters that take DIRECT-META-RECORD-BATCHes (`Y`): bodies.
    pub fn bodies() -> Self {
        Self::of(Kind::DirectMetaRecordBatch)
    }

    /// Requesters whose DIRECT-RECORD subscription (`D`) was read.
    pub fn direct() -> Self {
        Self::of(Kind::DirectRecord)
    }

    /// Partitions whose producer takes ADDRESSED-ACKs (`A`).
    pub fn addressed_acks() -> Self {
        Self::of(Kind::AddressedAck)
    }

    /// A subscription (or unsubscription) seen on the XPUB.
    pub fn on_subscription(&mut self, sub: &Subscription<'_>) {
        let Some(who) = sub.prefix.keyed(self.kind) else {
            return;
        };
        if !sub.subscribe {
            self.who.remove(who);
        } else if self.who.len() < MAX_TAKERS {
            self.who.insert(who.to_vec());
        }
    }

    /// Whether `who` takes the extension.
    pub fn takes(&self, who: &[u8]) -> bool {
        self.who.contains(who)
    }

    /// No more can be known ([`MAX_TAKERS`]).
    fn full(&self) -> bool {
        self.who.len() >= MAX_TAKERS
    }
}

/// How a requester gets FETCH answers: bodies if it subscribed `Y` + its
/// address, batches of values if `Q` + it, else DIRECT-RECORDs; and not
/// before its `D` + address subscription was read. This project's nodes
/// subscribe `Y` and `Q` before `D`, and libzmq lets an answer through as
/// soon as its filter has `D`, which can be before this node read the
/// subscriptions: an answer sent then in the form of a node that takes
/// neither would strip a record's key, headers and timestamp. A requester
/// not known yet FETCHes again.
#[derive(Debug)]
pub struct AnswerForms {
    bodies: Takers,
    batches: Takers,
    direct: Takers,
}

impl Default for AnswerForms {
    fn default() -> Self {
        Self {
            bodies: Takers::bodies(),
            batches: Takers::batches(),
            direct: Takers::direct(),
        }
    }
}

impl AnswerForms {
    /// A subscription (or unsubscription) seen on the XPUB.
    pub fn on_subscription(&mut self, sub: &Subscription<'_>) {
        self.bodies.on_subscription(sub);
        self.batches.on_subscription(sub);
        self.direct.on_subscription(sub);
    }

    /// The form `who`'s FETCH answers take; None while its `D` + address
    /// subscription is not read yet (past [`MAX_TAKERS`] requesters known,
    /// any is answered, as DIRECT-RECORDs if nothing else is known).
    pub fn form(&self, who: &[u8]) -> Option<Form> {
        if self.bodies.takes(who) {
            Some(Form::Bodies)
        } else if self.batches.takes(who) {
            Some(Form::Batches)
        } else if self.direct.takes(who) || self.direct.full() {
            Some(Form::Records)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests;
