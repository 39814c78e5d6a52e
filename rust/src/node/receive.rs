//! The one receive path of every node (producer, consumer, store and the
//! read clients): what moves bytes from a node's sockets to its state.
//!
//! - [`Core::receive`]: the messages peers send (the SUB, or in secure mode
//!   a socket per peer). Each is received whole, decoded once
//!   ([`decode`]), refused if the roles of a secure cluster do not let its
//!   sender send it (counted in `denied`), and handed to the node kind's
//!   dispatch: `ProducerState::on_message`, `ConsumerState::on_message`,
//!   `StoreState::on_message` (the read clients' rounds in
//!   [`fetcher`](crate::node::fetcher)). The dispatch says what became of
//!   it ([`Fate`]), and this path counts it: what could not be decoded
//!   (`malformed`), what was not for the node (`ignored`), and what it
//!   took (`records_received` and their `bytes_received`,
//!   `fetches_received`, `acks_received`).
//!   [`Core::receive_any`] is the same path for the nodes that take the
//!   consumer-group extension too (a group member, a store): a frame whose
//!   ID is a group message's is decoded by [`group::decode`] and handed on
//!   as [`Incoming::Group`] (one that does not decode counts in `malformed`
//!   and `group_malformed`). Secure clusters check group messages by the
//!   rules of `security::acl::check_group` (refused: `denied`).
//! - [`Core::drain_subscriptions`]: the subscriptions on the XPUB, each
//!   parsed once into a [`Subscription`] for the node kind's
//!   `on_subscription`; in secure mode applied only if the subscriber's
//!   role and topics allow it. A producer and a store also drain them right
//!   before they answer a FETCH (see there).

use crate::error::Result;
use crate::node::out::Fate;
use crate::node::secure::{Sender, Verdict};
use crate::node::socket::{Core, Frames};
use crate::node::stats::Stats;
use crate::security::TopicPatterns;
use crate::wire::group::{self, GroupKind, GroupMessage};
use crate::wire::{decode, Kind, Message, Subscription};

/// A message from a peer as [`Core::receive_any`] hands it on: one of the
/// Dafka messages, or one of the consumer-group extension.
#[derive(Debug)]
pub enum Incoming<'a> {
    Message(Message<'a>),
    Group(GroupMessage<'a>),
}

impl Core {
    /// Receives up to `batch` messages from peers without blocking, and
    /// hands each one decoded and allowed to `dispatch` (with this core, to
    /// send what it answers, and who sent it); counts what became of it.
    pub fn receive(
        &mut self,
        frames: &mut Frames,
        stats: &Stats,
        batch: usize,
        mut dispatch: impl FnMut(&mut Core, Sender, Message<'_>) -> Result<Fate>,
    ) -> Result<()> {
        self.receive_any(frames, stats, batch, |core, from, incoming| {
            match incoming {
                Incoming::Message(msg) => dispatch(core, from, msg),
                // Only nodes that subscribe to them get group messages.
                Incoming::Group(_) => Ok(Fate::Ignored),
            }
        })
    }

    /// [`Core::receive`], with the messages of the consumer-group
    /// extension decoded too and handed on as [`Incoming::Group`].
    pub fn receive_any(
        &mut self,
        frames: &mut Frames,
        stats: &Stats,
        batch: usize,
        mut dispatch: impl FnMut(&mut Core, Sender, Incoming<'_>) -> Result<Fate>,
    ) -> Result<()> {
        for _ in 0..batch {
            let Some(from) = self.recv_sub(frames)? else {
                break;
            };
            if frames.too_long() {
                Stats::add(&stats.malformed, 1);
                continue;
            }
            let (s, n) = frames.slices();
            let is_group = s[0]
                .first()
                .is_some_and(|&id| GroupKind::from_id(id).is_some());
            if is_group {
                let Ok((msg, _)) = group::decode(&s[..n]) else {
                    Stats::add(&stats.malformed, 1);
                    Stats::add(&stats.group_malformed, 1);
                    continue;
                };
                if self.refused(from, stats, |sc, key| sc.refuse_group(key, &msg).is_some()) {
                    continue;
                }
                match dispatch(self, from, Incoming::Group(msg))? {
                    Fate::Taken(_) => {}
                    Fate::Ignored => Stats::add(&stats.ignored, 1),
                    Fate::Malformed => Stats::add(&stats.malformed, 1),
                }
                continue;
            }
            let Ok((msg, _)) = decode(&s[..n]) else {
                Stats::add(&stats.malformed, 1);
                continue;
            };
            if self.refuse(from, &msg, stats) {
                continue;
            }
            let (kind, bytes) = (msg.kind(), msg.body_bytes());
            match dispatch(self, from, Incoming::Message(msg))? {
                Fate::Taken(records) => {
                    if records > 0 {
                        Stats::add(&stats.records_received, records);
                        Stats::add(&stats.bytes_received, bytes);
                    }
                    match kind {
                        Kind::Fetch => Stats::add(&stats.fetches_received, 1),
                        Kind::Ack | Kind::AddressedAck => Stats::add(&stats.acks_received, 1),
                        _ => {}
                    }
                }
                Fate::Ignored => Stats::add(&stats.ignored, 1),
                Fate::Malformed => Stats::add(&stats.malformed, 1),
            }
        }
        Ok(())
    }

    /// The next message from a peer, without blocking (`None`: none waits),
    /// and who sent it: in secure mode each peer has a socket of its own,
    /// so the sender is known by its key.
    fn recv_sub(&mut self, frames: &mut Frames) -> Result<Option<Sender>> {
        match &mut self.secure {
            Some(sc) => sc.recv(frames),
            None => Ok(frames.recv(&self.sub)?.then_some(Sender::Anyone)),
        }
    }

    /// Whether what came from `from` is refused by the roles of a secure
    /// cluster (`denied` says, for a secure peer; counted in `denied`);
    /// never in insecure mode.
    fn refused(
        &mut self,
        from: Sender,
        stats: &Stats,
        denied: impl FnOnce(&mut crate::node::secure::SecureCore, &[u8; 32]) -> bool,
    ) -> bool {
        let (Some(sc), Sender::Key(key)) = (&mut self.secure, from) else {
            return false;
        };
        let refused = denied(sc, &key);
        if refused {
            Stats::add(&stats.denied, 1);
        }
        refused
    }

    /// In a secure node, the topics the certificate of `from` allows (none
    /// if its key is no longer trusted); `None` in an insecure one.
    pub fn sender_topics(&self, from: Sender) -> Option<crate::security::TopicPatterns> {
        match (&self.secure, from) {
            (Some(sc), Sender::Key(key)) => Some(sc.topics_of(&key)),
            _ => None,
        }
    }

    /// The topics `from` may learn of when it asks about every topic (a
    /// store answers with those only): `None`, no limit, in insecure mode
    /// and for a store ([`SecureCore::reader_topics`](crate::node::secure::SecureCore::reader_topics)).
    pub fn reader_topics(&self, from: Sender) -> Option<TopicPatterns> {
        match (&self.secure, from) {
            (Some(sc), Sender::Key(key)) => sc.reader_topics(&key),
            _ => None,
        }
    }

    fn refuse(&mut self, from: Sender, msg: &Message<'_>, stats: &Stats) -> bool {
        self.refused(from, stats, |sc, key| sc.refuse(key, msg).is_some())
    }

    /// Reads up to `batch` subscriptions (and unsubscriptions) waiting on
    /// the XPUB, without blocking, and hands each to `on` parsed. What is
    /// no subscription frame is dropped and counted (`malformed`; `denied`
    /// in secure mode). In secure mode each subscription is applied here,
    /// only if the subscriber's role and topics allow it (refused ones are
    /// counted in `denied` and not handed on), to the connection it came by
    /// (libzmq patched so: third_party/zeromq-src/README.dafka.md).
    ///
    /// Bounded per turn, as [`Core::receive`]: a flood of subscriptions
    /// must not keep the loop from everything else. A node also calls it
    /// right before it answers a FETCH: libzmq applies a requester's
    /// subscriptions to its filter as they arrive, before the loop reads
    /// them, so an answer could otherwise go out in the form of a requester
    /// whose `Y` subscription was not read yet (plain values to a node that
    /// takes metadata).
    pub fn drain_subscriptions(
        &mut self,
        frames: &mut Frames,
        stats: &Stats,
        batch: usize,
        mut on: impl FnMut(&mut Core, Subscription<'_>) -> Result<()>,
    ) -> Result<()> {
        for _ in 0..batch {
            if !frames.recv(&self.xpub)? {
                return Ok(());
            }
            let (user, fd) = match &self.secure {
                Some(_) => {
                    let first = frames.first_mut();
                    let user = first.gets("User-Id").map(str::to_string);
                    (user, crate::security::conns::fd_of(first))
                }
                None => (None, None),
            };
            let whole = !frames.too_long();
            let (s, n) = frames.slices();
            let decoded = (whole && n == 1)
                .then(|| Subscription::decode(s[0]).ok())
                .flatten();
            let Some(sub) = decoded else {
                let counter = match self.secure {
                    Some(_) => &stats.denied,
                    None => &stats.malformed,
                };
                Stats::add(counter, 1);
                continue;
            };
            if let Some(sc) = &mut self.secure {
                // A peer's connection ended: libzmq takes back what it asked
                // for (no sender then, and nothing to apply).
                if user.is_some() || sub.subscribe {
                    if sc.on_subscription(user.as_deref(), fd, &sub) != Verdict::Apply {
                        Stats::add(&stats.denied, 1);
                        continue;
                    }
                    let prefix = &s[0][1..];
                    if sub.subscribe {
                        self.xpub.set_subscribe(prefix)?;
                    } else {
                        self.xpub.set_unsubscribe(prefix)?;
                    }
                }
            }
            on(self, sub)?;
        }
        Ok(())
    }
}
