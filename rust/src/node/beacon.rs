//! The node side of discovery (PROTOCOL.md, "Discovery"): a beacon PUB to each
//! tower's XSUB and a beacon SUB (subscribed to `B` and the welcome `W`) to each
//! tower's XPUB; a node beacon at once, on every welcome, whenever a tower's
//! subscription reaches the beacon socket, and every `beacon_interval`; a
//! [`PeerTable`] that turns tower beacons into SUB
//! connects and, after `beacon_timeout` of silence, disconnects. Static peers
//! (`peers=[...]`) are connected once and never expire.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::node::config::{split_tcp, TowerAddr};
use crate::wire::{decode_beacon, Beacon};

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
        }
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

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
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
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: &zmq::Context,
        towers: &[String],
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
            s.set_subscribe(b"B")?;
            s.set_subscribe(b"W")?;
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
            table: PeerTable::new(uuid, timeout),
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
            silences: 0,
        })
    }

    /// A tower was heard at `now`: says so if it had been silent.
    fn heard_tower(&mut self, now: Instant) {
        self.heard = now;
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
                    subscribed |= m.first() == Some(&1);
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
                            out.extend(self.table.on_beacon(uuid, ep, now));
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
mod tests {
    use super::*;

    /// A hand-made tower (XSUB and XPUB with the welcome) and a node's
    /// Discovery (beacon every 60 s) pointed at it.
    fn hand_made_tower(ctx: &zmq::Context) -> (zmq::Socket, zmq::Socket, Discovery) {
        let xsub = ctx.socket(zmq::XSUB).unwrap();
        let xpub = ctx.socket(zmq::XPUB).unwrap();
        for s in [&xsub, &xpub] {
            s.set_linger(0).unwrap();
            s.set_rcvtimeo(100).unwrap();
        }
        xpub.set_xpub_welcome_msg(Some("W")).unwrap();
        xpub.set_sndhwm(0).unwrap(); // a flood is queued, never dropped
        xsub.bind("tcp://127.0.0.1:*").unwrap();
        xpub.bind("tcp://127.0.0.1:*").unwrap();
        let port = |s: &zmq::Socket| {
            let e = s.get_last_endpoint().unwrap().unwrap();
            e.rsplit(':').next().unwrap().to_string()
        };
        let towers = [format!("tcp://127.0.0.1:{},{}", port(&xsub), port(&xpub))];
        let (interval, timeout) = (Duration::from_secs(60), Duration::from_secs(180));
        let d = Discovery::new(
            ctx,
            &towers,
            UUID,
            "127.0.0.1",
            4242,
            interval,
            timeout,
            Instant::now(),
            None,
        )
        .unwrap();
        (xsub, xpub, d)
    }

    const UUID: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

    /// One turn of a node's loop over its beacon sockets and timers.
    fn step(d: &mut Discovery, wait_ms: i64) {
        let mut items = d.poll_items();
        zmq::poll(&mut items, wait_ms).unwrap();
        let readable = items.iter().any(|i| i.is_readable());
        drop(items);
        if readable {
            d.on_readable(Instant::now()).unwrap();
        }
        d.on_timer(Instant::now()).unwrap();
    }

    /// Steps `d` until the hand-made tower's XPUB sees it subscribe to beacons.
    fn subscribed(xpub: &zmq::Socket, d: &mut Discovery, end: Instant) {
        while !xpub.recv_bytes(zmq::DONTWAIT).is_ok_and(|m| m == b"\x01B") {
            assert!(Instant::now() < end, "the node did not subscribe");
            step(d, 5);
        }
    }

    /// A node is heard by a tower as soon as the tower can hear it, not a
    /// `beacon_interval` later (60 s here): a beacon sent before the tower's
    /// subscription reached the node is dropped by ZeroMQ. A hand-made tower
    /// holds its subscription back until well after its welcome, so the
    /// beacons at start-up and on the welcome are both lost.
    /// A node that hears no tower warns once per silence, after
    /// `SILENT_AFTER` (or `beacon_timeout` if longer), and a read client can
    /// tell its towers are silent; anything heard ends the silence.
    #[test]
    fn a_node_that_hears_no_tower_warns_once_per_silence() {
        let ctx = zmq::Context::new();
        let t0 = Instant::now();
        let timeout = Duration::from_secs(4);
        let node = |towers: &[String]| {
            let interval = Duration::from_secs(1);
            Discovery::new(
                &ctx,
                towers,
                b"ME",
                "127.0.0.1",
                9,
                interval,
                timeout,
                t0,
                None,
            )
            .unwrap()
        };
        let mut d = node(&["tcp://127.0.0.1:1,2".to_string()]);
        d.on_timer(t0 + Duration::from_secs(3)).unwrap();
        assert_eq!(d.silences, 0, "not before beacon_timeout");
        assert!(d.towers_silent(t0 + Duration::from_secs(3)).is_some());
        d.on_timer(t0 + timeout).unwrap();
        d.on_timer(t0 + 3 * timeout).unwrap();
        assert_eq!(d.silences, 1, "once per silence");
        d.heard_tower(t0 + 3 * timeout);
        assert!(d.towers_silent(t0 + 3 * timeout).is_none());
        d.on_timer(t0 + 5 * timeout).unwrap();
        assert_eq!(d.silences, 2, "a new silence");
        // No tower, no silence to tell.
        let mut none = node(&[]);
        none.on_timer(t0 + 10 * timeout).unwrap();
        assert_eq!(none.silences, 0);
        assert!(none.towers_silent(t0 + 10 * timeout).is_none());
    }

    #[test]
    fn a_node_beacons_when_the_tower_can_hear_it() {
        let ctx = zmq::Context::new();
        let (xsub, xpub, mut d) = hand_made_tower(&ctx);
        let step = |d: &mut Discovery| step(d, 20);
        // The node subscribes to beacons: it has been sent the welcome.
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < end, "the node did not subscribe");
            step(&mut d);
            if xpub.recv_bytes(zmq::DONTWAIT).is_ok_and(|m| m == b"\x01B") {
                break;
            }
        }
        let welcomed = Instant::now();
        while welcomed.elapsed() < Duration::from_millis(300) {
            step(&mut d);
        }
        // Only now can the tower hear the node.
        xsub.send(&b"\x01B"[..], 0).unwrap();
        let got = loop {
            assert!(Instant::now() < end, "the node was not heard within 10 s");
            step(&mut d);
            if let Ok(m) = xsub.recv_multipart(zmq::DONTWAIT) {
                break m;
            }
        };
        assert_eq!(
            got,
            vec![
                b"B".to_vec(),
                UUID.to_vec(),
                b"127.0.0.1".to_vec(),
                b"4242".to_vec()
            ]
        );
    }

    /// A tower that relays every join's subscription (not ours) makes a node
    /// beacon at most once per SUBSCRIBED_BEACON_GAP.
    #[test]
    fn beacons_on_subscriptions_are_spaced() {
        let ctx = zmq::Context::new();
        let (xsub, xpub, mut d) = hand_made_tower(&ctx);
        let end = Instant::now() + Duration::from_secs(10);
        // Joined: the node subscribed and beacons once the tower subscribes.
        subscribed(&xpub, &mut d, end);
        xsub.send(&b"\x01B"[..], 0).unwrap();
        while xsub.recv_multipart(zmq::DONTWAIT).is_err() {
            assert!(Instant::now() < end, "the node was not heard");
            step(&mut d, 5);
        }
        // 50 more joins relayed 2 ms apart, over about 100 ms.
        let t0 = Instant::now();
        for _ in 0..50 {
            xsub.send(&b"\x01B"[..], 0).unwrap();
            let until = Instant::now() + Duration::from_millis(2);
            while Instant::now() < until {
                step(&mut d, 1);
            }
        }
        while t0.elapsed() < Duration::from_millis(300) {
            step(&mut d, 5);
        }
        let mut beacons = 0;
        while xsub.recv_multipart(zmq::DONTWAIT).is_ok() {
            beacons += 1;
        }
        let bound = t0.elapsed().as_millis() / SUBSCRIBED_BEACON_GAP.as_millis() + 2;
        assert!(
            (1..=bound as usize).contains(&beacons),
            "{beacons} beacons for 50 joins (at most {bound})"
        );
    }

    /// A flood of beacons is read a bounded number per turn, and none is lost
    /// to the bound: the poll reports the rest on the next turn.
    #[test]
    fn a_flood_of_beacons_is_read_a_batch_per_turn() {
        let ctx = zmq::Context::new();
        let (_xsub, xpub, mut d) = hand_made_tower(&ctx);
        let end = Instant::now() + Duration::from_secs(20);
        subscribed(&xpub, &mut d, end);
        let sent = 3000;
        for i in 0..sent {
            xpub.send(format!("B-not-a-beacon-{i}").as_bytes(), 0)
                .unwrap();
        }
        let (mut most, mut turns) = (0, 0);
        while d.malformed < sent {
            assert!(Instant::now() < end, "{} of {sent} read", d.malformed);
            std::thread::sleep(Duration::from_millis(50));
            let before = d.malformed;
            d.on_readable(Instant::now()).unwrap();
            most = most.max(d.malformed - before);
            turns += 1;
        }
        assert_eq!(d.malformed, sent, "every beacon read once");
        assert_eq!(most, BEACON_BATCH as u64, "at most a batch per turn");
        assert!(turns >= sent as usize / BEACON_BATCH);
    }

    /// A tower beacon whose endpoint no peer can be connected to (another
    /// transport, no port, port 0) is malformed: dropped and counted, not
    /// taken for a peer (counted in `peers`, connected to, and occupying a
    /// place in the table until it expires).
    #[test]
    fn a_tower_beacon_with_an_unusable_endpoint_is_dropped_and_counted() {
        let ctx = zmq::Context::new();
        let (_xsub, xpub, mut d) = hand_made_tower(&ctx);
        let end = Instant::now() + Duration::from_secs(20);
        subscribed(&xpub, &mut d, end);
        let bad: [&[u8]; 3] = [
            b"udp://127.0.0.1:5",
            b"tcp://127.0.0.1",
            b"tcp://127.0.0.1:0",
        ];
        for (i, ep) in bad.iter().enumerate() {
            let uuid = format!("{i:032X}");
            let frames: [&[u8]; 3] = [b"B", uuid.as_bytes(), ep];
            xpub.send_multipart(frames, 0).unwrap();
        }
        let mut events = Vec::new();
        // The three beacons are in once nothing came for 300 ms.
        let mut quiet = Instant::now();
        while quiet.elapsed() < Duration::from_millis(300) {
            assert!(Instant::now() < end, "beacons not read");
            let mut items = d.poll_items();
            zmq::poll(&mut items, 20).unwrap();
            drop(items);
            let got = d.on_readable(Instant::now()).unwrap();
            if !got.is_empty() {
                quiet = Instant::now();
            }
            events.extend(got);
        }
        assert_eq!(
            (d.malformed, d.table.len()),
            (3, 0),
            "taken for peers: {events:?}"
        );
    }

    /// A node that ended and a new one given its port: one connection, kept
    /// while either is known, dropped when neither is.
    #[test]
    fn an_endpoint_two_peers_name_is_connected_once_and_kept_for_the_live_one() {
        let t0 = Instant::now();
        let mut t = PeerTable::new(b"ME", Duration::from_secs(4));
        let ep = "tcp://127.0.0.1:5000";
        assert_eq!(
            t.on_beacon(b"OLD", ep, t0),
            vec![PeerEvent::Connect(ep.into())]
        );
        let t1 = t0 + Duration::from_secs(3);
        assert!(t.on_beacon(b"NEW", ep, t1).is_empty(), "connected already");
        // OLD expires; NEW, still beaconing, keeps the connection.
        let t5 = t0 + Duration::from_secs(5);
        assert!(t.on_beacon(b"NEW", ep, t5).is_empty());
        assert!(t.expire(t5).is_empty(), "NEW still uses the endpoint");
        assert_eq!(t.len(), 1);
        // NEW moves away: now the endpoint goes.
        assert_eq!(
            t.on_beacon(b"NEW", "tcp://127.0.0.1:5001", t5),
            vec![
                PeerEvent::Disconnect(ep.into()),
                PeerEvent::Connect("tcp://127.0.0.1:5001".into())
            ]
        );
        assert_eq!(
            t.expire(t5 + Duration::from_secs(4)),
            vec![PeerEvent::Disconnect("tcp://127.0.0.1:5001".into())]
        );
        assert!(t.is_empty());
    }

    #[test]
    fn a_static_peer_also_discovered_is_connected_once_and_never_dropped() {
        let t0 = Instant::now();
        let mut t = PeerTable::new(b"ME", Duration::from_secs(4));
        let ep = "tcp://127.0.0.1:5000";
        assert_eq!(t.add_static(ep), vec![PeerEvent::Connect(ep.into())]);
        assert!(t.on_beacon(b"P1", ep, t0).is_empty(), "connected already");
        // The discovered entry expires; the static peer keeps the connection.
        assert!(t.expire(t0 + Duration::from_secs(5)).is_empty());
        assert!(t.is_empty());
        // Discovered first, then named as a static peer: still one connect.
        let other = "tcp://127.0.0.1:5001";
        assert_eq!(
            t.on_beacon(b"P2", other, t0),
            vec![PeerEvent::Connect(other.into())]
        );
        assert!(t.add_static(other).is_empty());
        assert!(t.expire(t0 + Duration::from_secs(5)).is_empty());
    }

    /// A tower relaying made-up UUIDs cannot make a node keep (and connect
    /// to) every one: past the bound a new peer is ignored and counted,
    /// known ones are still refreshed, and room comes back as peers expire.
    #[test]
    fn discovered_peers_are_bounded() {
        let t0 = Instant::now();
        let mut t = PeerTable::with_cap(b"ME", Duration::from_secs(4), 3);
        let ep = |i: u16| format!("tcp://127.0.0.1:{}", 5000 + i);
        for i in 0..3u16 {
            let at = t0 + Duration::from_secs(u64::from(i));
            assert_eq!(
                t.on_beacon(format!("P{i}").as_bytes(), &ep(i), at),
                vec![PeerEvent::Connect(ep(i))]
            );
        }
        assert!(t.on_beacon(b"P3", &ep(3), t0).is_empty(), "full");
        assert!(t.on_beacon(b"P4", &ep(4), t0).is_empty(), "full");
        assert_eq!((t.len(), t.refused), (3, 2));
        // A known peer moving is no new peer.
        assert_eq!(
            t.on_beacon(b"P1", &ep(9), t0 + Duration::from_secs(3)),
            vec![PeerEvent::Disconnect(ep(1)), PeerEvent::Connect(ep(9))]
        );
        assert_eq!(t.refused, 2);
        // P0 expires at 4 s: room for P3.
        assert_eq!(
            t.expire(t0 + Duration::from_secs(4)),
            vec![PeerEvent::Disconnect(ep(0))]
        );
        assert_eq!(
            t.on_beacon(b"P3", &ep(3), t0 + Duration::from_secs(4)),
            vec![PeerEvent::Connect(ep(3))]
        );
        assert_eq!((t.len(), t.refused), (3, 2));
        // Static peers do not count against the bound.
        assert_eq!(t.add_static(&ep(7)), vec![PeerEvent::Connect(ep(7))]);
        assert_eq!(t.len(), 3);
    }

    /// Expiry walks the peers only when one may be due: the bound it keeps
    /// is never later than a real expiry, and is exact after a walk.
    #[test]
    fn expiry_is_never_late_and_exact_after_a_walk() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut t = PeerTable::new(b"ME", s(4));
        assert_eq!(t.next_expiry(), None);
        t.on_beacon(b"P1", "tcp://127.0.0.1:1", t0);
        t.on_beacon(b"P2", "tcp://127.0.0.1:2", t0 + s(2));
        assert_eq!(t.next_expiry(), Some(t0 + s(4)));
        // P1 beacons again: the bound may stay early, never late.
        t.on_beacon(b"P1", "tcp://127.0.0.1:1", t0 + s(3));
        assert!(t.expire(t0 + s(3)).is_empty(), "not due yet");
        assert_eq!(t.next_expiry(), Some(t0 + s(4)));
        // Woken at the bound: nobody expires, and the bound is exact again.
        assert!(t.expire(t0 + s(4)).is_empty());
        assert_eq!(t.next_expiry(), Some(t0 + s(6)));
        assert_eq!(
            t.expire(t0 + s(6)),
            vec![PeerEvent::Disconnect("tcp://127.0.0.1:2".into())]
        );
        assert_eq!(t.next_expiry(), Some(t0 + s(7)));
        assert_eq!(t.expire(t0 + s(7)).len(), 1);
        assert_eq!(t.next_expiry(), None);
        assert!(t.is_empty());
    }

    #[test]
    fn peers_connect_once_move_and_expire() {
        let t0 = Instant::now();
        let mut t = PeerTable::new(b"ME", Duration::from_secs(4));
        assert!(t.on_beacon(b"ME", "tcp://1.2.3.4:5", t0).is_empty());
        assert_eq!(
            t.on_beacon(b"P1", "tcp://1.2.3.4:5", t0),
            vec![PeerEvent::Connect("tcp://1.2.3.4:5".into())]
        );
        assert!(t.on_beacon(b"P1", "tcp://1.2.3.4:5", t0).is_empty());
        assert_eq!(
            t.on_beacon(b"P1", "tcp://1.2.3.4:6", t0 + Duration::from_secs(1)),
            vec![
                PeerEvent::Disconnect("tcp://1.2.3.4:5".into()),
                PeerEvent::Connect("tcp://1.2.3.4:6".into())
            ]
        );
        assert!(t.expire(t0 + Duration::from_secs(4)).is_empty());
        assert_eq!(t.next_expiry(), Some(t0 + Duration::from_secs(5)));
        assert_eq!(
            t.expire(t0 + Duration::from_secs(5)),
            vec![PeerEvent::Disconnect("tcp://1.2.3.4:6".into())]
        );
        assert!(t.is_empty());
        assert!(t.on_beacon(b"P2", "garbage", t0).is_empty());
    }
}
