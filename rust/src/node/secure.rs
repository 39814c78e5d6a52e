//! A secure node's sockets (CURVE + ZAP, `docs/security.md`): what [`Core`]
//! does differently when the node has `security` set.
//!
//! - Its XPUB is a CURVE server that asks the node's ZAP handler about each
//!   client key, and applies each subscription itself (`ZMQ_XPUB_MANUAL`)
//!   only if the subscriber's role and topics allow it
//!   ([`check_subscription`]): what a peer receives is what it may read.
//! - It receives from each peer on a socket of its own, connected with that
//!   peer's key (from its beacon, which a secure tower checked against the
//!   key that authenticated it). So every message has a known sender, and is
//!   dropped and counted (`denied`) unless its sender's role and topics
//!   allow it ([`check_message`]): ZeroMQ gives no per-message sender on one
//!   socket fed by many peers, which is why there is one per peer.
//! - It knows which connection to its XPUB each key holds (from the messages
//!   read on them, [`Conns`]). When the trust directory changes, our sockets
//!   to peers no longer trusted close, and their connections to our XPUB are
//!   shut down, and no other (ZAP alone acts only at a handshake): a revoked
//!   key is cut off within about a second, and adding a key reconnects no
//!   one.
//! - Its XPUB's handshakes are watched ([`Monitor`]): one refused before ZAP
//!   is asked (a plaintext peer) counts in `auth_refused` too.
//!
//! [`Core`]: crate::node::socket::Core

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::node::monitor::Monitor;
use crate::security::conns::Conns;
use crate::security::said::Said;
use crate::security::{
    check_group, check_member_subscription, check_message, check_subscription, split_keyed,
    zap::ZapHandler, Denied, Peer, Role, Secure, TopicPatterns,
};
use crate::wire::group::{GroupKind, GroupMessage};
use crate::wire::{Kind, Message, Prefix, Subscription};

/// One peer we receive from, on its own socket.
pub(crate) struct PeerSub {
    pub sock: zmq::Socket,
    /// As discovery or `peers=[...]` named it, with its key.
    pub endpoint: String,
    pub key: [u8; 32],
}

/// Who sent a message a node received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// An insecure node: anyone who reached it.
    Anyone,
    /// The peer holding this key (authenticated by CURVE).
    Key([u8; 32]),
}

/// What [`SecureCore::on_subscription`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Apply it (to the connection it came by).
    Apply,
    /// Drop it (counted in `denied`).
    Refused,
}

pub(crate) struct SecureCore {
    pub id: Arc<Secure>,
    // Closed after the sockets of `Core` (declared last there): libzmq asks
    // it about handshakes until they are gone.
    pub zap: ZapHandler,
    /// The XPUB's monitor: handshakes refused before ZAP (a plaintext peer).
    pub monitor: Monitor,
    /// Handshakes the monitor saw refused.
    pub handshakes_refused: u64,
    /// The connections to our XPUB, with their keys: a revoked key's are cut.
    pub conns: Conns,
    pub peers: Vec<PeerSub>,
    /// Peers named (by discovery or `peers=[...]`) whose key is not trusted
    /// now: connected to if it becomes trusted (a key added to the trust
    /// directory, or put back), until discovery forgets them.
    waiting: Vec<String>,
    /// Where the next `recv` starts (round robin over the peers).
    next: usize,
    /// The subscriptions every peer socket sends (`01` + prefix).
    subscribe: Vec<Vec<u8>>,
    rcvhwm: i32,
    generation: u64,
    said: Said,
    /// The topics this node consumes, and its consumer group once it
    /// subscribes to that group's announcements (the only ones it
    /// publishes): a subscription to them needs a certificate that covers
    /// these topics ([`check_member_subscription`]).
    pub topics: Vec<Vec<u8>>,
    pub group: Option<Vec<u8>>,
}

impl SecureCore {
    pub fn new(
        id: Arc<Secure>,
        zap: ZapHandler,
        monitor: Monitor,
        subscribe: Vec<Vec<u8>>,
        rcvhwm: i32,
    ) -> Self {
        let generation = id.trust.generation();
        Self {
            id,
            zap,
            monitor,
            handshakes_refused: 0,
            conns: Conns::default(),
            peers: Vec::new(),
            waiting: Vec::new(),
            next: 0,
            subscribe,
            rcvhwm,
            generation,
            said: Said::default(),
            topics: Vec::new(),
            group: None,
        }
    }

    /// One more subscription (`01` + prefix) on every peer's socket, now
    /// and for the peers connected later.
    pub fn subscribe(&mut self, frame: Vec<u8>) -> Result<()> {
        for p in &self.peers {
            p.sock.send(frame.as_slice(), 0)?;
        }
        self.subscribe.push(frame);
        Ok(())
    }

    /// Connects a socket of its own to the peer at `endpoint`
    /// (`tcp://HOST:PORT;curve=KEY`), if its key is trusted and it is not
    /// connected yet.
    pub fn connect(&mut self, ctx: &zmq::Context, endpoint: &str) -> Result<()> {
        if self.peers.iter().any(|p| p.endpoint == endpoint) {
            return Ok(());
        }
        let (plain, key) = split_keyed(endpoint)?;
        let Some(key) = key else {
            self.say(endpoint, "a peer without a key (no downgrade)");
            return Ok(());
        };
        if !self.id.trust.snapshot().contains(&key) {
            self.say(endpoint, "a peer whose key is not in the trust directory");
            if !self.waiting.iter().any(|w| w == endpoint) {
                self.waiting.push(endpoint.to_string());
            }
            return Ok(());
        }
        self.waiting.retain(|w| w != endpoint);
        if key == *self.id.public() && self.id.cert.role().ok().flatten() == Some(Role::Store) {
            self.say(
                endpoint,
                "another node uses this store's certificate: producers count stores by \
                 key, so the two count as one store toward min_acks; give every store a \
                 key of its own (dafka keygen)",
            );
        }
        let sock = ctx.socket(zmq::XSUB)?;
        sock.set_rcvhwm(self.rcvhwm)?;
        sock.set_linger(0)?;
        self.id.client(&sock, &key)?;
        for s in &self.subscribe {
            sock.send(s.as_slice(), 0)?;
        }
        sock.connect(plain).map_err(|source| Error::Socket {
            op: "connect",
            endpoint: plain.to_string(),
            source,
        })?;
        self.peers.push(PeerSub {
            sock,
            endpoint: endpoint.to_string(),
            key,
        });
        Ok(())
    }

    pub fn disconnect(&mut self, endpoint: &str) {
        self.peers.retain(|p| p.endpoint != endpoint);
        self.waiting.retain(|w| w != endpoint);
    }

    /// The next message from any peer (round robin), and its sender's key.
    pub fn recv(&mut self, frames: &mut crate::node::socket::Frames) -> Result<Option<Sender>> {
        let n = self.peers.len();
        for i in 0..n {
            let at = (self.next + i) % n;
            if frames.recv(&self.peers[at].sock)? {
                self.next = (at + 1) % n.max(1);
                return Ok(Some(Sender::Key(self.peers[at].key)));
            }
        }
        Ok(None)
    }

    /// Why `msg` from `key` is refused, if it is (and logs it, sparingly).
    pub fn refuse(&mut self, key: &[u8; 32], msg: &Message<'_>) -> Option<Denied> {
        let denied = self.check(key, |peer| check_message(peer, msg))?;
        let who = crate::security::cert::key_z85(key);
        self.say(&who, &format!("a {} refused: {denied}", msg.kind().name()));
        Some(denied)
    }

    /// [`SecureCore::refuse`] for a consumer-group message.
    pub fn refuse_group(&mut self, key: &[u8; 32], msg: &GroupMessage<'_>) -> Option<Denied> {
        let denied = self.check(key, |peer| check_group(peer, msg))?;
        let who = crate::security::cert::key_z85(key);
        self.say(&who, &format!("a {} refused: {denied}", msg.kind().name()));
        Some(denied)
    }

    /// The topics the certificate of `key` allows (none if it is not
    /// trusted now).
    pub fn topics_of(&self, key: &[u8; 32]) -> TopicPatterns {
        let snap = self.id.trust.snapshot();
        snap.get(key)
            .map_or_else(TopicPatterns::none, |t| t.topics.clone())
    }

    /// The topics the peer of `key` may learn of when it asks about every
    /// topic (GET-HEADS, COMMIT-QUERY, PARTITIONS-QUERY): `None` for a store
    /// or a reader of every topic (no limit), else its certificate's (none
    /// for a key no longer trusted).
    pub fn reader_topics(&self, key: &[u8; 32]) -> Option<TopicPatterns> {
        let snap = self.id.trust.snapshot();
        match snap.get(key) {
            Some(t) if t.role == Some(Role::Store) => None,
            Some(t) if t.role == Some(Role::Consumer) && t.topics.is_all() => None,
            Some(t) => Some(t.topics.clone()),
            None => Some(TopicPatterns::none()),
        }
    }

    /// What `rule` says of the peer of `key` (a key revoked since it
    /// connected: its socket closes at the next turn).
    fn check(
        &self,
        key: &[u8; 32],
        rule: impl FnOnce(&Peer<'_>) -> std::result::Result<(), Denied>,
    ) -> Option<Denied> {
        let snap = self.id.trust.snapshot();
        match snap.get(key) {
            None => Some(Denied::NoRole),
            Some(t) => {
                let peer = Peer {
                    key,
                    role: t.role,
                    topics: &t.topics,
                };
                rule(&peer).err()
            }
        }
    }

    /// What to do with the subscription `sub` read from the XPUB, which
    /// came by the connection `fd` of the client `user` (its `User-Id`: its
    /// key in Z85). An applied subscription to every RECORD-BATCH (`R`)
    /// marks the connection a store's.
    pub fn on_subscription(
        &mut self,
        user: Option<&str>,
        fd: Option<i32>,
        sub: &Subscription<'_>,
    ) -> Verdict {
        let key = user.and_then(crate::security::cert::parse_key_z85);
        let Some(key) = key else {
            return Verdict::Refused;
        };
        let snap = self.id.trust.snapshot();
        let Some(t) = snap.get(&key) else {
            // Revoked since it connected, and still talking: cut it off.
            if let Some(fd) = fd {
                self.conns.cut_fd(fd);
            }
            let who = crate::security::cert::key_z85(&key);
            self.say(&who, "a peer whose key was revoked: connection closed");
            return Verdict::Refused;
        };
        if sub.subscribe {
            let peer = Peer {
                key: &key,
                role: t.role,
                topics: &t.topics,
            };
            let own = self.group.as_deref().map(|g| (g, self.topics.as_slice()));
            let checked = check_subscription(&peer, &sub.prefix).and_then(|()| match sub.prefix {
                Prefix::Group {
                    kind: GroupKind::Member,
                    key,
                } => check_member_subscription(&peer, key, own),
                _ => Ok(()),
            });
            if let Err(d) = checked {
                let who = crate::security::cert::key_z85(&key);
                let prefix = String::from_utf8_lossy(&sub.prefix.to_bytes()).into_owned();
                self.say(&who, &format!("subscription {prefix:?} refused: {d}"));
                return Verdict::Refused;
            }
        }
        // Taking back what it had is always fine.
        if let Some(c) = fd.and_then(|fd| self.conns.seen(fd, &key)) {
            if sub.prefix.every(Kind::RecordBatch) {
                c.store = sub.subscribe;
            }
        }
        Verdict::Apply
    }

    /// Distinct store keys among the peers subscribed to every RECORD-BATCH
    /// on our XPUB: a producer counts stores by them (two stores sharing a
    /// certificate count as one).
    pub fn store_keys(&mut self) -> usize {
        self.conns.store_keys()
    }

    /// Whether the trusted keys changed since the last call; if so the
    /// sockets of peers no longer trusted are closed (and wait to be
    /// trusted again), and the peers waiting for their key are connected
    /// to if it is trusted now.
    pub fn trust_changed(&mut self, ctx: &zmq::Context) -> Result<bool> {
        let g = self.id.trust.generation();
        if g == self.generation {
            return Ok(false);
        }
        self.generation = g;
        let snap = self.id.trust.snapshot();
        let before = self.peers.len();
        let (kept, revoked): (Vec<PeerSub>, Vec<PeerSub>) = std::mem::take(&mut self.peers)
            .into_iter()
            .partition(|p| snap.contains(&p.key));
        self.peers = kept;
        for c in self.conns.cut(|k| snap.contains(k)) {
            let who = crate::security::cert::key_z85(&c.key);
            self.say(
                &who,
                &format!("key revoked: connection from {} closed", c.peer()),
            );
        }
        if self.peers.len() != before {
            tracing::info!(
                "trust directory changed: {} peer connection(s) closed",
                before - self.peers.len()
            );
        }
        for ep in std::mem::take(&mut self.waiting) {
            self.connect(ctx, &ep)?;
        }
        self.waiting.extend(revoked.into_iter().map(|p| p.endpoint));
        Ok(true)
    }

    fn say(&mut self, who: &str, what: &str) {
        self.said.say(who, what);
    }
}

#[cfg(test)]
mod tests;
