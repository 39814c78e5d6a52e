//! The node side of discovery (PROTOCOL.md, "Discovery"): a beacon PUB to each
//! tower's XSUB and a beacon SUB (subscribed to `B`, the welcome `W`, and the
//! node's kind announcement, [`Announcement`]) to each tower's XPUB; a node
//! beacon at once, on every welcome, whenever a tower's beacon subscription
//! reaches the beacon socket, and every `beacon_interval`; a [`PeerTable`]
//! that turns tower beacons into SUB connects and, after `beacon_timeout` of
//! silence, disconnects. Static peers (`peers=[...]`) are connected once and
//! never expire.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::node::config::{split_tcp, TowerAddr};
use crate::wire::{
    decode_beacon, Announcement, Beacon, NodeType, Prefix, Subscription, BEACON, WELCOME,
};

/// What the node's SUB must do after a beacon or a timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerEvent {
    Connect(String),
    Disconnect(String),
}

/// Whether a tower beacon's endpoint is one a peer can be connected to:
/// `tcp://HOST:PORT` with a host and a port other than 0. Any other (another
/// transport, no port, port 0, a NUL) is malformed: dropped and counted, not
/// taken for a peer that holds a place in the table until it expires.
pub fn connectable(endpoint: &str) -> bool {
    let plain = match crate::security::split_keyed(endpoint) {
        Ok((plain, _)) => plain,
        Err(_) => return false,
    };
    !endpoint.contains('\0')
        && split_tcp(plain).is_some_and(|(host, port)| !host.is_empty() && port != 0)
}

/// Known peers by UUID: pure, no sockets.
///
/// Two UUIDs can name one endpoint for a while: a node that ended is
/// remembered until `timeout`, and a new node may have been given its port.
/// The SUB is connected to an endpoint once and disconnected when no peer
/// names it any more (a ZeroMQ disconnect drops every connection to the
/// endpoint, so dropping the dead peer's would cut the live one off for good).
/// Static peers count as users of their endpoint for good.
///
/// At most [`MAX_PEERS`] discovered peers are known at once: a tower relaying
/// beacons of made-up UUIDs would otherwise make the node keep, and connect
/// to, every one of them. A new peer past the bound is ignored (counted in
/// `refused`) until others expire; the peers already known are kept. The
/// price: a sender that keeps the table full (16,384 made-up UUIDs every
/// beacon interval) stops the node from finding any new peer while it lasts.
#[derive(Debug)]
pub struct PeerTable {
    own: Vec<u8>,
    timeout: Duration,
    peers: HashMap<Vec<u8>, (String, Instant)>,
    /// Peers naming each endpoint.
    users: HashMap<String, usize>,
    cap: usize,
    /// No peer expires before this (beacons only move expiries later), so
    /// that neither [`PeerTable::expire`] nor [`PeerTable::next_expiry`]
    /// walks every peer at every turn of the node's loop.
    expiry: Option<Instant>,
    /// Beacons of new peers ignored because `cap` peers were known.
    pub refused: u64,
    /// Secure mode ([`PeerTable::bind_keys`]): a peer's UUID must be made
    /// from the key in its endpoint, and a known peer keeps its key.
    keyed: bool,
    /// Beacons refused for naming a node that is not their key's.
    pub identity_refused: u64,
}

/// Discovered peers a node knows at once (static peers are not counted).
/// Every Spark task is a producer node, so a large cluster's consumers and
/// stores may know thousands.
pub const MAX_PEERS: usize = 16_384;

impl PeerTable {
    pub fn new(own: &[u8], timeout: Duration) -> Self {
        Self::with_cap(own, timeout, MAX_PEERS)
    }

    pub fn with_cap(own: &[u8], timeout: Duration, cap: usize) -> Self {
        Self {
            own: own.to_vec(),
            timeout,
            peers: HashMap::new(),
            users: HashMap::new(),
            cap,
            expiry: None,
            refused: 0,
            keyed: false,
            identity_refused: 0,
        }
    }

    /// Secure mode: binds every peer's identity to its key. A beacon is
    /// taken only if its UUID (the node's address) is made from the key in
    /// its endpoint ([`crate::security::address_matches_key`]), and a known
    /// peer's endpoint is never replaced by one of another key: an insider
    /// cannot beacon another node's UUID to take its place. (Nodes that
    /// share a certificate share a key, and can.)
    pub fn bind_keys(&mut self) {
        self.keyed = true;
    }

    /// Whether a beacon of `uuid` at `endpoint` may be taken (secure mode).
    fn owns(&self, uuid: &[u8], endpoint: &str) -> bool {
        let key = |ep: &str| crate::security::split_keyed(ep).ok().and_then(|(_, k)| k);
        let Some(k) = key(endpoint) else {
            return false;
        };
        crate::security::address_matches_key(uuid, &k)
            && self
                .peers
                .get(uuid)
                .is_none_or(|(known, _)| key(known) == Some(k))
    }

    /// One more peer names `ep`: connect if it is the first.
    fn add_user(&mut self, ep: &str, out: &mut Vec<PeerEvent>) {
        let n = self.users.entry(ep.to_string()).or_insert(0);
        *n += 1;
        if *n == 1 {
            out.push(PeerEvent::Connect(ep.to_string()));
        }
    }

    /// One peer fewer names `ep`: disconnect if it was the last.
    fn drop_user(users: &mut HashMap<String, usize>, ep: &str, out: &mut Vec<PeerEvent>) {
        if let Some(n) = users.get_mut(ep) {
            *n -= 1;
            if *n == 0 {
                users.remove(ep);
                out.push(PeerEvent::Disconnect(ep.to_string()));
            }
        }
    }

    /// A tower beacon: a new peer (or one that moved) is connected. The
    /// caller checked the endpoint ([`connectable`]).
    pub fn on_beacon(&mut self, uuid: &[u8], endpoint: &str, now: Instant) -> Vec<PeerEvent> {
        if uuid == self.own.as_slice() || !endpoint.starts_with("tcp://") || endpoint.contains('\0')
        {
            return Vec::new();
        }
        if self.keyed && !self.owns(uuid, endpoint) {
            self.identity_refused += 1;
            return Vec::new();
        }
        let mut out = Vec::new();
        let full = self.peers.len() >= self.cap;
        match self.peers.get_mut(uuid) {
            Some((ep, seen)) if ep == endpoint => *seen = now,
            Some((ep, seen)) => {
                let old = std::mem::replace(ep, endpoint.to_string());
                *seen = now;
                Self::drop_user(&mut self.users, &old, &mut out);
                self.add_user(endpoint, &mut out);
            }
            None if full => {
                self.refused += 1;
                if self.refused.is_power_of_two() {
                    tracing::warn!(
                        "{} peers known: no new peer is discovered until some go \
                         silent ({} beacons of new peers ignored so far)",
                        self.cap,
                        self.refused
                    );
                }
            }
            None => {
                self.peers
                    .insert(uuid.to_vec(), (endpoint.to_string(), now));
                let due = now + self.timeout;
                self.expiry = Some(self.expiry.map_or(due, |e| e.min(due)));
                self.add_user(endpoint, &mut out);
            }
        }
        out
    }

    /// Forgets peers silent for `timeout`. Walks the peers only when one may
    /// be due.
    pub fn expire(&mut self, now: Instant) -> Vec<PeerEvent> {
        let mut out = Vec::new();
        if self.expiry.is_none_or(|e| e > now) {
            return out;
        }
        let timeout = self.timeout;
        let users = &mut self.users;
        let mut expiry: Option<Instant> = None;
        self.peers.retain(|_, (ep, seen)| {
            let keep = now.duration_since(*seen) < timeout;
            if keep {
                let due = *seen + timeout;
                expiry = Some(expiry.map_or(due, |e| e.min(due)));
            } else {
                Self::drop_user(users, ep, &mut out);
            }
            keep
        });
        self.expiry = expiry;
        out
    }

    /// A static peer (`peers=[...]`, or `connect` at run time): it names its
    /// endpoint for good, so the connection outlives any discovered peer that
    /// shares it. Connects only if nothing named the endpoint yet.
    pub fn add_static(&mut self, endpoint: &str) -> Vec<PeerEvent> {
        let mut out = Vec::new();
        self.add_user(endpoint, &mut out);
        out
    }

    /// When the next peer could expire (no later than it does).
    pub fn next_expiry(&self) -> Option<Instant> {
        self.expiry
    }

    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Every peer known: its UUID, endpoint, and when its beacon was last
    /// relayed (the cluster view).
    pub fn peers(&self) -> impl Iterator<Item = (&[u8], &str, Instant)> + '_ {
        self.peers
            .iter()
            .map(|(uuid, (ep, seen))| (uuid.as_slice(), ep.as_str(), *seen))
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
}

/// Whether a message read on the beacon publisher is a subscription that
/// can match a beacon (`B...` or the empty one), as a tower's XSUB sends
/// when it can hear the node. A tower that relays every subscription (the
/// C reference's) also relays each node's kind announcement, which is none.
fn asks_for_beacons(msg: &[u8]) -> bool {
    Subscription::decode(msg).is_ok_and(|s| {
        s.subscribe && matches!(s.prefix, Prefix::Everything | Prefix::Beacons { .. })
    })
}

/// See [`Discovery::on_readable`].
const SUBSCRIBED_BEACON_GAP: Duration = Duration::from_millis(20);

/// Beacons (and subscription notices) read per socket per loop turn: a
/// quarter of the SUB's default high-water mark (1,000).
const BEACON_BATCH: usize = 256;

/// Beacon sockets and timers of one node.
pub struct Discovery {
    /// The beacon publisher: an XPUB (a PUB on the wire) so that it sees a
    /// tower's subscription arrive. A beacon sent before that is dropped by
    /// ZeroMQ, so the one at start-up and the one on the welcome were often
    /// lost and a new node was heard only a `beacon_interval` later.
    publ: Option<zmq::Socket>,
    sub: Option<zmq::Socket>,
    uuid: Vec<u8>,
    host: Vec<u8>,
    port: u16,
    interval: Duration,
    next_beacon: Instant,
    /// When a beacon was last sent because a tower subscribed.
    last_on_subscribe: Option<Instant>,
    pub table: PeerTable,
    /// Malformed beacon messages dropped.
    pub malformed: u64,
    /// Secure mode: our keys (the beacon carries our public key) and the
    /// trusted ones (a beacon of another key is ignored, as one without a
    /// key: no downgrade).
    secure: Option<std::sync::Arc<crate::security::Secure>>,
    /// Our public key in Z85, for our beacons.
    key: Option<Vec<u8>>,
    /// Secure mode: beacons ignored (no key, or a key not trusted).
    pub untrusted: u64,
    said: crate::security::said::Said,
    /// The towers as configured, named when none is heard.
    towers: Vec<String>,
    /// When a tower was last heard (anything on the beacon sockets: a
    /// relayed beacon, ours too, a welcome or a tower's subscription), or
    /// when discovery started.
    heard: Instant,
    /// Silence after which [`Discovery::on_timer`] warns that no tower is
    /// heard ([`SILENT_AFTER`], or `beacon_timeout` if longer).
    silent_after: Duration,
    /// Whether the current silence was warned of.
    silent: bool,
    /// Whether a tower was ever heard.
    ever_heard: bool,
    /// Times the node warned that it heard no tower.
    pub silences: u64,
}

/// A node that has heard no tower for this long (or its `beacon_timeout`,
/// if longer) warns, naming the towers it tries: without one it finds no
/// peer, and a consumer would otherwise wait in silence.
pub const SILENT_AFTER: Duration = Duration::from_secs(3);

impl Discovery {
    /// Connects to every tower (asynchronously: an absent tower is fine, the
    /// node joins when it appears). `host` empty = tower uses the peer address.
    /// The beacon SUB also announces the node's kind (`node`) to the towers
    /// ([`Announcement`]: a subscription that matches nothing).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: &zmq::Context,
        towers: &[String],
        node: NodeType,
        uuid: &[u8],
        host: &str,
        port: u16,
        interval: Duration,
        timeout: Duration,
        now: Instant,
        secure: Option<std::sync::Arc<crate::security::Secure>>,
    ) -> Result<Self> {
        let (mut publ, mut sub) = (None, None);
        if !towers.is_empty() {
            let p = ctx.socket(zmq::XPUB)?;
            let s = ctx.socket(zmq::SUB)?;
            p.set_linger(0)?;
            // Every tower's subscription, not only the first.
            p.set_xpub_verbose(true)?;
            s.set_linger(0)?;
            s.set_subscribe(BEACON)?;
            s.set_subscribe(WELCOME)?;
            s.set_subscribe(
                &Announcement {
                    kind: node,
                    address: uuid,
                }
                .topic(),
            )?;
            for t in towers {
                let a = TowerAddr::parse(t)?;
                if let (Some(id), Some(key)) = (&secure, &a.key) {
                    id.client(&p, key)?;
                    id.client(&s, key)?;
                }
                p.connect(&a.beacon_in).map_err(|source| Error::Socket {
                    op: "connect",
                    endpoint: a.beacon_in.clone(),
                    source,
                })?;
                s.connect(&a.beacon_out).map_err(|source| Error::Socket {
                    op: "connect",
                    endpoint: a.beacon_out.clone(),
                    source,
                })?;
            }
            publ = Some(p);
            sub = Some(s);
        }
        Ok(Self {
            publ,
            sub,
            uuid: uuid.to_vec(),
            host: host.as_bytes().to_vec(),
            port,
            interval,
            next_beacon: now,
            last_on_subscribe: None,
            table: {
                let mut t = PeerTable::new(uuid, timeout);
                if secure.is_some() {
                    t.bind_keys();
                }
                t
            },
            said: crate::security::said::Said::default(),
            malformed: 0,
            key: secure
                .as_ref()
                .map(|id| crate::security::cert::key_z85(id.public()).into_bytes()),
            secure,
            untrusted: 0,
            towers: towers.to_vec(),
            heard: now,
            silent_after: timeout.max(SILENT_AFTER),
            silent: false,
            ever_heard: false,
            silences: 0,
        })
    }

    /// A tower was heard at `now`: says so if it had been silent.
    fn heard_tower(&mut self, now: Instant) {
        self.heard = now;
        self.ever_heard = true;
        if std::mem::take(&mut self.silent) {
            tracing::info!("a tower is heard again ({})", self.towers.join(", "));
        }
    }

    /// Warns once per silence when no tower has been heard for
    /// `silent_after`; returns whether it did.
    fn check_silence(&mut self, now: Instant) -> bool {
        if self.publ.is_none()
            || self.silent
            || now.saturating_duration_since(self.heard) < self.silent_after
        {
            return false;
        }
        self.silent = true;
        self.silences += 1;
        tracing::warn!(
            "no tower heard for {:.0}s (trying {}): this node finds no peer until one \
             answers; is a tower running there and reachable? (towers=, --tower)",
            now.saturating_duration_since(self.heard).as_secs_f64(),
            self.towers.join(", ")
        );
        true
    }

    /// Whether no tower has been heard for `silent_after` (what a read
    /// client that timed out says).
    pub fn towers_silent(&self, now: Instant) -> Option<&[String]> {
        let silent = self.publ.is_some()
            && now.saturating_duration_since(self.heard) >= self.silent_after.min(SILENT_AFTER);
        silent.then_some(self.towers.as_slice())
    }

    /// Whether a tower was heard since discovery started (the cluster view).
    pub fn tower_heard(&self) -> bool {
        self.ever_heard
    }

    /// The towers as configured.
    pub fn towers(&self) -> &[String] {
        &self.towers
    }

    /// The beacon sockets' poll items (none without towers).
    pub fn poll_items(&self) -> Vec<zmq::PollItem<'_>> {
        [&self.sub, &self.publ]
            .into_iter()
            .flatten()
            .map(|s| s.as_poll_item(zmq::POLLIN))
            .collect()
    }

    fn send_beacon(&mut self, now: Instant) -> Result<()> {
        if let Some(p) = &self.publ {
            let b = Beacon::Node {
                uuid: &self.uuid,
                host: &self.host,
                port: self.port,
                key: self.key.as_deref(),
            };
            let frames = b.to_frames();
            p.send_multipart(frames, zmq::DONTWAIT)?;
        }
        self.next_beacon = now + self.interval;
        Ok(())
    }

    /// Reads what waits on the beacon sockets, at most `BEACON_BATCH` of each
    /// per turn (the poll reports the rest next turn), so that a flood of
    /// beacons cannot hold a node's loop away from its records.
    pub fn on_readable(&mut self, now: Instant) -> Result<Vec<PeerEvent>> {
        let mut out = Vec::new();
        let mut subscribed = false;
        for _ in 0..BEACON_BATCH {
            let Some(p) = &self.publ else { break };
            match p.recv_bytes(zmq::DONTWAIT) {
                // A tower can hear us now (its XSUB subscribed): announce.
                Ok(m) => {
                    subscribed |= asks_for_beacons(&m);
                    self.heard_tower(now);
                }
                Err(zmq::Error::EAGAIN) => break,
                Err(e) => return Err(e.into()),
            }
        }
        if subscribed {
            // A tower that relays every node's subscription upstream (ours
            // relays each once) would make every node beacon at each join:
            // at most one such beacon per SUBSCRIBED_BEACON_GAP, the next
            // one deferred, never dropped.
            match self.last_on_subscribe {
                Some(last) if now < last + SUBSCRIBED_BEACON_GAP => {
                    self.next_beacon = self.next_beacon.min(last + SUBSCRIBED_BEACON_GAP);
                }
                _ => {
                    self.last_on_subscribe = Some(now);
                    self.send_beacon(now)?;
                }
            }
        }
        for _ in 0..BEACON_BATCH {
            let Some(sub) = &self.sub else { break };
            let frames = match sub.recv_multipart(zmq::DONTWAIT) {
                Ok(f) => f,
                Err(zmq::Error::EAGAIN) => break,
                Err(e) => return Err(e.into()),
            };
            self.heard_tower(now);
            match decode_beacon(&frames) {
                Ok(Beacon::Tower { uuid, endpoint }) => match std::str::from_utf8(endpoint) {
                    Ok(ep) if connectable(ep) => {
                        if self.acceptable(ep) {
                            let refused = self.table.identity_refused;
                            out.extend(self.table.on_beacon(uuid, ep, now));
                            if self.table.identity_refused > refused {
                                let uuid = String::from_utf8_lossy(uuid);
                                let key = ep.split_once(";curve=").map_or("", |(_, k)| k);
                                self.said.say(
                                    key,
                                    &format!(
                                        "a beacon for node {uuid} at {ep}, which is not this \
                                         key's node, refused"
                                    ),
                                );
                            }
                        } else {
                            self.untrusted += 1;
                        }
                    }
                    _ => self.malformed += 1,
                },
                // The tower (re)accepted our subscription: announce ourselves now.
                Ok(Beacon::Welcome) => self.send_beacon(now)?,
                // Node beacons are for towers.
                Ok(Beacon::Node { .. }) => {}
                Err(_) => self.malformed += 1,
            }
        }
        Ok(out)
    }

    /// Whether a peer's endpoint may be connected to: in secure mode one
    /// with a trusted key, else one without a key.
    fn acceptable(&self, endpoint: &str) -> bool {
        let key = match crate::security::split_keyed(endpoint) {
            Ok((_, key)) => key,
            Err(_) => return false,
        };
        match (&self.secure, key) {
            (Some(id), Some(k)) => id.trust.snapshot().contains(&k),
            (None, None) => true,
            _ => false,
        }
    }

    /// Sends the beacon when due and expires silent peers.
    pub fn on_timer(&mut self, now: Instant) -> Result<Vec<PeerEvent>> {
        if now >= self.next_beacon {
            self.send_beacon(now)?;
        }
        self.check_silence(now);
        Ok(self.table.expire(now))
    }

    /// The earliest of: next beacon (if towers), next peer expiry.
    pub fn next_deadline(&self) -> Option<Instant> {
        let beacon = self.publ.as_ref().map(|_| self.next_beacon);
        match (beacon, self.table.next_expiry()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests;
