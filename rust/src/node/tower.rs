//! The tower: an XSUB (node beacons in, default `tcp://*:5556`) and an XPUB
//! (towards nodes, default `tcp://*:5557`) with the welcome message `W`.
//! Subscriptions from nodes that can match a beacon are relayed upstream to
//! the XSUB (each once, at most 1,024 distinct: `Relayed`); node beacons
//! (4 frames) are rewritten into tower beacons (3 frames `B`, UUID,
//! `tcp://host:port`), an empty host replaced by the TCP peer address.
//!
//! A node that joins would otherwise learn the others only from their next
//! beacons (up to `beacon_interval` later: a second by default, which every
//! short-lived client such as a Spark read task would pay). So the tower keeps
//! the last beacon of each node it heard and, when a new node subscribes to
//! beacons, sends those of the live ones again ([`Known`]). Everyone gets the
//! repeat (an XPUB cannot address one subscriber); a beacon of a known peer
//! only refreshes it, and repeats are coalesced to one per
//! [`REPLAY_EVERY`] when many nodes join at once.
//!
//! A node that closes is forgotten at once, not repeated for the seconds its
//! last beacon stays fresh: the tower watches its XSUB for disconnects and
//! knows which connection (file descriptor) each node's beacons came by.
//! Every short-lived client (a Spark read task) is a node; without this,
//! each one joining would be told, and would keep reconnecting to, the ones
//! that just left.
//!
//! The nodes known are also counted by kind, as this project's nodes
//! announce it by a subscription on the XPUB ([`kinds`]).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::node::actor::{Actor, Inbox, Ready};
use crate::node::beacon::MAX_PEERS;
use crate::node::config::{bind_spelling, split_tcp, TowerConfig};
use crate::node::monitor::Monitor;
use crate::node::socket::{Frames, MAX_CONTROL_FRAME};
use crate::node::stats::Stats;
use crate::security::cert::parse_key_z85;
use crate::security::conns::{fd_of, Conns};
use crate::security::said::Said;
use crate::wire::{decode_beacon, Beacon, BEACON, WELCOME};

mod kinds;

pub use kinds::{Announced, Kinds, NodeCounts, Sender, KIND_NAMES};

/// Why [`rewrite`] relays nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not a node beacon, or not one this tower takes (a key in an insecure
    /// cluster, none or another in a secure one, no host to fill in).
    Malformed,
    /// A secure node beaconed a UUID that does not belong to its key: an
    /// insider taking over another node's identity in discovery.
    Identity,
}

/// The pure rewrite: a node beacon and the peer address it came from →
/// the tower beacon's frames. A secure tower (`user`: the key, Z85, that
/// authenticated the beacon's connection) takes only beacons that carry
/// that same key and a UUID (the node's address) made from it
/// ([`crate::security::address_matches_key`]), and relays the key in the
/// endpoint (`tcp://HOST:PORT;curve=KEY`); an insecure one only beacons
/// without a key.
pub fn rewrite(
    frames: &[&[u8]],
    peer_address: Option<&str>,
    user: Option<&str>,
    secure: bool,
) -> std::result::Result<Vec<Vec<u8>>, Refused> {
    let Ok(Beacon::Node {
        uuid,
        host,
        port,
        key,
    }) = decode_beacon(frames)
    else {
        return Err(Refused::Malformed);
    };
    let host = if host.is_empty() {
        peer_address.ok_or(Refused::Malformed)?.as_bytes()
    } else {
        host
    };
    let host = std::str::from_utf8(host).map_err(|_| Refused::Malformed)?;
    let mut endpoint = format!("tcp://{host}:{port}");
    match (secure, key) {
        (false, None) => {}
        (true, Some(k)) if user.is_some_and(|u| u.as_bytes() == k) => {
            let k = std::str::from_utf8(k).map_err(|_| Refused::Malformed)?;
            let public = crate::security::cert::parse_key_z85(k).ok_or(Refused::Malformed)?;
            if !crate::security::address_matches_key(uuid, &public) {
                return Err(Refused::Identity);
            }
            endpoint.push_str(";curve=");
            endpoint.push_str(k);
        }
        _ => return Err(Refused::Malformed),
    }
    Ok(Beacon::Tower {
        uuid,
        endpoint: endpoint.as_bytes(),
    }
    .to_frames())
}

/// The least time between two repeats of the known beacons.
pub const REPLAY_EVERY: Duration = Duration::from_millis(50);
/// A node is repeated while its last beacon is at most this old, or three of
/// its own beacon intervals if longer (the tower does not know the nodes'
/// settings; with the defaults a node forgets a silent peer after 4 s).
pub const REPLAY_MAX_AGE: Duration = Duration::from_secs(5);
/// Nodes silent for this long are forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// Messages read from each side per loop turn: a flood on one side waits its
/// turn (the poll reports the rest) instead of holding the other side.
const TOWER_BATCH: usize = 4096;

/// A node's last tower beacon.
#[derive(Debug)]
struct Heard {
    frames: Vec<Vec<u8>>,
    at: Instant,
    /// Since the beacon before (the node's interval), once two were heard.
    interval: Option<Duration>,
    /// The connection (file descriptor) the last beacon came by.
    fd: Option<i32>,
}

/// The last tower beacon of every node heard, for new subscribers: at most
/// [`MAX_PEERS`] nodes. A beacon of a new node past that is still relayed,
/// only not remembered (counted in `refused`): a node beaconing made-up
/// UUIDs cannot grow the tower without bound.
#[derive(Debug, Default)]
pub struct Known {
    /// By node UUID.
    nodes: FxHashMap<Vec<u8>, Heard>,
    /// Beacons of new nodes not remembered because `MAX_PEERS` were known.
    pub refused: u64,
    /// The kinds nodes announced, and the nodes known by kind.
    kinds: Kinds,
    /// A repeat is due then (a node subscribed), and when the last one went.
    due: Option<Instant>,
    last: Option<Instant>,
}

impl Known {
    /// A tower beacon (its frames) was relayed at `now`; it came by the
    /// connection `fd` if known.
    pub fn heard(&mut self, frames: &[Vec<u8>], now: Instant, fd: Option<i32>) {
        let Some(uuid) = frames.get(1) else {
            return;
        };
        let full = self.nodes.len() >= MAX_PEERS;
        match self.nodes.get_mut(uuid.as_slice()) {
            Some(h) => {
                h.interval = Some(now.duration_since(h.at));
                h.at = now;
                h.fd = fd;
                if h.frames.as_slice() != frames {
                    h.frames = frames.to_vec();
                }
            }
            None if full => {
                self.refused += 1;
                if self.refused.is_power_of_two() {
                    tracing::warn!(
                        "{MAX_PEERS} nodes known: relaying beacons of new ones without \
                         remembering them ({} so far)",
                        self.refused
                    );
                }
            }
            None => {
                let h = Heard {
                    frames: frames.to_vec(),
                    at: now,
                    interval: None,
                    fd,
                };
                self.nodes.insert(uuid.clone(), h);
                self.kinds.joined(uuid);
            }
        }
    }

    /// The connection `fd` closed: the nodes whose last beacon came by it
    /// left (a live one that only reconnected is back at its next beacon).
    pub fn disconnected(&mut self, fd: i32) {
        self.forget(|h| h.fd == Some(fd));
    }

    /// Forgets the nodes `gone` says are.
    fn forget(&mut self, gone: impl Fn(&Heard) -> bool) {
        let kinds = &mut self.kinds;
        self.nodes.retain(|uuid, h| {
            let keep = !gone(h);
            if !keep {
                kinds.left(uuid);
            }
            keep
        });
    }

    /// Nodes known: heard within the last ten minutes and not disconnected.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A node subscribed to beacons at `now`: schedule a repeat.
    pub fn joined(&mut self, now: Instant) {
        if self.due.is_none() {
            let earliest = self.last.map_or(now, |l| l + REPLAY_EVERY);
            self.due = Some(earliest.max(now));
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.due
    }

    /// The beacons to send again if a repeat is due at `now` (the live
    /// nodes'), forgetting nodes silent for long.
    pub fn replay(&mut self, now: Instant) -> Vec<Vec<Vec<u8>>> {
        if self.due.is_none_or(|d| d > now) {
            return Vec::new();
        }
        self.due = None;
        self.last = Some(now);
        self.forget(|h| now.duration_since(h.at) >= FORGET_AFTER);
        self.nodes
            .values()
            .filter(|h| {
                let age = h
                    .interval
                    .map_or(REPLAY_MAX_AGE, |i| (3 * i).max(REPLAY_MAX_AGE));
                now.duration_since(h.at) <= age
            })
            .map(|h| h.frames.clone())
            .collect()
    }
}

/// Distinct subscriptions relayed upstream at once, past `B` and the empty
/// one (nodes subscribe to `B` and `W` only).
const RELAYED_MAX: usize = 1024;

/// The longest subscription relayed upstream. The tower's XSUB keeps each one
/// in libzmq's subscription trie, which recurses once per byte: one of 60,000
/// bytes, relayed, killed the tower's process with a segfault when its
/// subscriber left (tried). Nodes subscribe to `B`.
const RELAYED_TOPIC_MAX: usize = 256;

/// Which subscription messages from the tower's XPUB go upstream to the
/// nodes' beacon sockets.
#[derive(Debug, Default)]
struct Relayed(std::collections::HashSet<Vec<u8>>);

impl Relayed {
    /// Whether to send `msg` (`1` or `0` + topic) upstream.
    ///
    /// - Each subscription once, as a non-verbose XPUB would: the XPUB is
    ///   verbose to see every join, but a duplicate sent upstream would reach
    ///   every node's beacon socket and make them all beacon.
    /// - Only one that can match a beacon (empty, or starting with `B`): the
    ///   nodes upstream publish nothing else; and of at most
    ///   [`RELAYED_TOPIC_MAX`] bytes.
    /// - At most [`RELAYED_MAX`] distinct ones (`B` and the empty one always):
    ///   a subscriber cannot grow the tower, and every node, without bound.
    /// - An unsubscription (the last subscriber of the topic left) only of
    ///   one relayed.
    fn forward(&mut self, msg: &[u8]) -> bool {
        match msg.split_first() {
            Some((1, topic)) => {
                let beacons = BEACON.starts_with(topic)
                    || (topic.starts_with(BEACON) && topic.len() <= RELAYED_TOPIC_MAX);
                let room = self.0.len() < RELAYED_MAX || topic.len() <= 1;
                beacons && room && self.0.insert(topic.to_vec())
            }
            Some((0, topic)) => self.0.remove(topic),
            _ => false,
        }
    }
}

enum Cmd {}

/// `zmq.h`'s message property: the file descriptor a frame came by (the
/// `zmq-sys` crate does not re-export it).
const ZMQ_SRCFD: i32 = 2;

/// One frame as libzmq's own message: the `zmq` crate does not expose its
/// integer properties, and the tower needs the connection's file descriptor
/// (`ZMQ_SRCFD`) to match beacons with disconnects.
struct RawMsg(zmq_sys::zmq_msg_t);

impl RawMsg {
    fn new() -> Self {
        let mut m = std::mem::MaybeUninit::<zmq_sys::zmq_msg_t>::uninit();
        // SAFETY: zmq_msg_init initialises the whole message (an empty one)
        // and cannot fail; an empty message may be moved.
        unsafe {
            zmq_sys::zmq_msg_init(m.as_mut_ptr());
            Self(m.assume_init())
        }
    }

    /// Receives the next frame into this message (`Ok(false)`: none yet).
    fn recv(&mut self, sock: &mut zmq::Socket, flags: i32) -> Result<bool> {
        // SAFETY: an initialised message (its old content is released) and a
        // live socket used from its own thread.
        let rc = unsafe { zmq_sys::zmq_msg_recv(&mut self.0, sock.as_mut_ptr(), flags) };
        if rc >= 0 {
            return Ok(true);
        }
        // SAFETY: reads the calling thread's errno as libzmq left it.
        match zmq::Error::from_raw(unsafe { zmq_sys::zmq_errno() }) {
            zmq::Error::EAGAIN => Ok(false),
            e => Err(e.into()),
        }
    }

    fn data(&mut self) -> &[u8] {
        // SAFETY: an initialised message; `size` bytes at `data` stay valid
        // and unchanged while it is borrowed (the next recv needs `&mut`).
        unsafe {
            let size = zmq_sys::zmq_msg_size(&self.0);
            if size == 0 {
                return &[];
            }
            std::slice::from_raw_parts(zmq_sys::zmq_msg_data(&mut self.0).cast::<u8>(), size)
        }
    }

    fn more(&self) -> bool {
        // SAFETY: an initialised message.
        unsafe { zmq_sys::zmq_msg_more(&self.0) != 0 }
    }

    /// The file descriptor of the connection the frame came by.
    fn src_fd(&self) -> Option<i32> {
        // SAFETY: an initialised message; ZMQ_SRCFD is an int property.
        let fd = unsafe { zmq_sys::zmq_msg_get(&self.0, ZMQ_SRCFD) };
        (fd >= 0).then_some(fd)
    }

    /// The `User-Id` the ZAP handler gave the frame's connection (a secure
    /// tower's: the client's key, Z85).
    fn user_id(&self) -> Option<String> {
        self.property(c"User-Id")
    }

    /// The TCP peer address the frame came from.
    fn peer_address(&self) -> Option<String> {
        self.property(c"Peer-Address")
    }

    fn property(&self, name: &std::ffi::CStr) -> Option<String> {
        // SAFETY: an initialised message and a NUL-terminated property name;
        // the returned string (if any) lives as long as the message.
        unsafe {
            let v = zmq_sys::zmq_msg_gets(&self.0, name.as_ptr());
            if v.is_null() {
                return None;
            }
            std::ffi::CStr::from_ptr(v)
                .to_str()
                .ok()
                .map(str::to_string)
        }
    }
}

impl Drop for RawMsg {
    fn drop(&mut self) {
        // SAFETY: an initialised message, closed once.
        unsafe {
            zmq_sys::zmq_msg_close(&mut self.0);
        }
    }
}

/// A message received on the tower's XSUB (a node beacon, normally).
struct Incoming {
    /// Its first five frames.
    frames: Vec<Vec<u8>>,
    /// More than five frames came (never a beacon).
    too_long: bool,
    peer: Option<String>,
    user: Option<String>,
    fd: Option<i32>,
}

fn recv_incoming(sock: &mut zmq::Socket) -> Result<Option<Incoming>> {
    let mut m = RawMsg::new();
    if !m.recv(sock, zmq::DONTWAIT)? {
        return Ok(None);
    }
    let (peer, fd, user) = (m.peer_address(), m.src_fd(), m.user_id());
    let mut frames = vec![m.data().to_vec()];
    let mut too_long = false;
    while m.more() {
        m.recv(sock, 0)?;
        if frames.len() < 5 {
            frames.push(m.data().to_vec());
        } else {
            too_long = true;
        }
    }
    Ok(Some(Incoming {
        frames,
        too_long,
        peer,
        user,
        fd,
    }))
}

/// A socket whose monitor is stopped before it closes: libzmq sends monitor
/// events with a blocking send, so one sent after the reading end closed
/// would block its I/O thread (hence also: declare the reading end, a
/// [`Monitor`], before this, so it closes after).
struct Monitored(zmq::Socket);

impl Drop for Monitored {
    fn drop(&mut self) {
        Monitor::stop(&mut self.0);
    }
}

/// A running tower.
pub struct Tower {
    actor: Actor<Cmd>,
    stats: Arc<Stats>,
    /// The nodes known, by kind.
    nodes: Arc<NodeCounts>,
    beacon_in: String,
    beacon_out: String,
    /// A secure tower's public key.
    key: Option<[u8; 32]>,
}

fn bind(sock: &zmq::Socket, e: &str) -> Result<String> {
    sock.bind(&bind_spelling(e))
        .map_err(|source| Error::Socket {
            op: "bind",
            endpoint: e.to_string(),
            source,
        })?;
    let bound = sock
        .get_last_endpoint()?
        .map_err(|_| Error::Config("bound endpoint is not UTF-8".into()))?;
    Ok(match split_tcp(&bound) {
        Some(("0.0.0.0" | "*" | "[::]", port)) => format!("tcp://127.0.0.1:{port}"),
        _ => bound,
    })
}

impl Tower {
    /// Binds both sockets (port 0 = ephemeral) and starts the relay.
    pub fn new(cfg: TowerConfig) -> Result<Self> {
        cfg.validate()?;
        let key = match &cfg.security {
            Some(sc) => Some(sc.public_key()?),
            None => None,
        };
        let ctx = zmq::Context::new();
        let stats = Arc::new(Stats::default());
        let nodes = Arc::new(NodeCounts::default());
        let (st, nc) = (stats.clone(), nodes.clone());
        let (actor, (beacon_in, beacon_out)) =
            Actor::spawn("dafka-tower", &ctx.clone(), move |inbox, ready| {
                run(inbox, ready, &ctx, &cfg, &st, &nc)
            })?;
        Ok(Self {
            actor,
            stats,
            nodes,
            beacon_in,
            beacon_out,
            key,
        })
    }

    /// What nodes pass in `towers=[...]`: `tcp://HOST:IN,OUT`, with
    /// `;curve=KEY` after it for a secure tower.
    pub fn endpoint(&self) -> String {
        let out_port = split_tcp(&self.beacon_out).map(|(_, p)| p).unwrap_or(0);
        let ep = format!("{},{out_port}", self.beacon_in);
        match &self.key {
            Some(k) => crate::security::keyed(&ep, k),
            None => ep,
        }
    }
    pub fn beacon_in(&self) -> &str {
        &self.beacon_in
    }
    pub fn beacon_out(&self) -> &str {
        &self.beacon_out
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The nodes it knows, by kind.
    pub fn nodes(&self) -> &NodeCounts {
        &self.nodes
    }
    /// What a metrics scrape reads of this tower (named by its endpoint).
    pub fn metrics_source(&self) -> crate::metrics::Source {
        let kind = crate::metrics::Kind::Tower;
        let mut s = crate::metrics::Source::new(kind, &self.endpoint(), None, self.stats.clone());
        s.tower = Some(self.nodes.clone());
        s
    }
    pub fn check(&self) -> Result<()> {
        self.actor.check()
    }
    pub fn close(&self) -> Result<()> {
        self.actor.close()
    }
}

fn run(
    inbox: &mut Inbox<Cmd>,
    ready: &mut Ready<(String, String)>,
    ctx: &zmq::Context,
    cfg: &TowerConfig,
    stats: &Stats,
    nodes: &NodeCounts,
) -> Result<()> {
    // Secure: the ZAP handler before the CURVE servers (it closes last).
    let id = match &cfg.security {
        Some(sc) => Some(sc.load(crate::security::Role::Tower)?),
        None => None,
    };
    let zap = match &id {
        Some(id) => Some(crate::security::zap::ZapHandler::start(
            ctx,
            id.trust.clone(),
        )?),
        None => None,
    };
    // The monitors' reading ends first: they must close after the sockets.
    let xsub = ctx.socket(zmq::XSUB)?;
    let xpub = ctx.socket(zmq::XPUB)?;
    let mut mon_in = Monitor::watch(ctx, &xsub)?;
    let mut mon_out = Monitor::watch(ctx, &xpub)?;
    let mut xsub = Monitored(xsub);
    let xpub = Monitored(xpub);
    xsub.0.set_linger(0)?;
    xsub.0.set_maxmsgsize(MAX_CONTROL_FRAME)?;
    xpub.0.set_linger(0)?;
    xpub.0.set_maxmsgsize(MAX_CONTROL_FRAME)?;
    // A joiner is told every known node in one burst (up to MAX_PEERS
    // beacons): with the default queue of 1,000 messages the rest were
    // dropped, the same ones at every join. Room for a few bursts at once
    // (about 100 bytes each, a few MiB per node at the most).
    xpub.0
        .set_sndhwm(i32::try_from(4 * MAX_PEERS).unwrap_or(i32::MAX))?;
    xpub.0
        .set_xpub_welcome_msg(Some(std::str::from_utf8(WELCOME).unwrap_or("W")))?;
    // Every node's subscription, not only the first: each one joining is told
    // the nodes already known.
    xpub.0.set_xpub_verbose(true)?;
    if let Some(id) = &id {
        id.serve(&xsub.0)?;
        id.serve(&xpub.0)?;
    }
    let bin = bind(&xsub.0, &cfg.beacon_in)?;
    let bout = bind(&xpub.0, &cfg.beacon_out)?;
    ready.send((bin, bout));
    let mut frames = Frames::default();
    let mut known = Known::default();
    let mut relayed = Relayed::default();
    // Secure: the connections of each key, to cut a revoked one's; refusals.
    let mut conns = Conns::default();
    let mut said = Said::default();
    let mut generation = id.as_ref().map(|id| id.trust.generation());
    let mut handshakes_refused = 0u64;
    loop {
        if inbox.terminated() {
            return Ok(());
        }
        let now = Instant::now();
        for beacon in known.replay(now) {
            xpub.0.send_multipart(beacon, zmq::DONTWAIT)?;
        }
        let mut wait = known.deadline().map_or(-1, |d| {
            let us = d.saturating_duration_since(now).as_micros();
            i64::try_from(us.div_ceil(1000)).unwrap_or(i64::MAX)
        });
        if id.is_some() {
            // The trust directory is looked at every second.
            wait = if wait < 0 { 1000 } else { wait.min(1000) };
        }
        let (sub_in, pub_in) = {
            let mut items = [
                inbox.poll_item(),
                xsub.0.as_poll_item(zmq::POLLIN),
                xpub.0.as_poll_item(zmq::POLLIN),
                mon_in.poll_item(),
                mon_out.poll_item(),
            ];
            let t = inbox.before_poll(wait);
            crate::node::socket::poll(&mut items, t)?;
            (items[1].is_readable(), items[2].is_readable())
        };
        inbox.after_poll();
        if pub_in {
            // Subscriptions from nodes go upstream, so node PUBs send beacons.
            for _ in 0..TOWER_BATCH {
                if !frames.recv(&xpub.0)? {
                    break;
                }
                let mut user = None;
                if id.is_some() {
                    let first = frames.first_mut();
                    user = first.gets("User-Id").map(str::to_string);
                    let key = user.as_deref().and_then(parse_key_z85);
                    if let (Some(fd), Some(key)) = (fd_of(first), key) {
                        conns.seen(fd, &key);
                    }
                }
                let (s, n) = frames.slices();
                if n == 1 && !frames.too_long() {
                    let m = s[0];
                    if let Some((1, topic)) = m.split_first() {
                        if topic.starts_with(BEACON) {
                            known.joined(Instant::now());
                        }
                    }
                    if relayed.forward(m) {
                        xsub.0.send(m, zmq::DONTWAIT)?;
                    }
                    let sender = if id.is_some() {
                        Sender::Secure(user.as_deref())
                    } else {
                        Sender::Anyone
                    };
                    match known.on_subscription(m, sender) {
                        Announced::No | Announced::Taken => {}
                        Announced::Malformed => Stats::add(&stats.malformed, 1),
                        Announced::Full => Stats::add(&nodes.announcements_refused, 1),
                        Announced::Identity => {
                            Stats::add(&stats.identity_refused, 1);
                            let topic = String::from_utf8_lossy(&m[1..]);
                            said.say(
                                user.as_deref().unwrap_or_default(),
                                &format!(
                                    "a kind announcement {topic:?}, not this key's node's, refused"
                                ),
                            );
                        }
                    }
                }
            }
        }
        if sub_in {
            for _ in 0..TOWER_BATCH {
                let Some(msg) = recv_incoming(&mut xsub.0)? else {
                    break;
                };
                if let (Some(fd), Some(key)) = (msg.fd, msg.user.as_deref().and_then(parse_key_z85))
                {
                    conns.seen(fd, &key);
                }
                if msg.too_long {
                    Stats::add(&stats.malformed, 1);
                    continue;
                }
                let s: Vec<&[u8]> = msg.frames.iter().map(Vec::as_slice).collect();
                match rewrite(&s, msg.peer.as_deref(), msg.user.as_deref(), id.is_some()) {
                    Ok(out) => {
                        let refused = known.refused;
                        known.heard(&out, Instant::now(), msg.fd);
                        Stats::add(&stats.beacons_refused, known.refused - refused);
                        xpub.0.send_multipart(out, zmq::DONTWAIT)?;
                        Stats::add(&stats.beacons, 1);
                    }
                    Err(Refused::Identity) => {
                        Stats::add(&stats.identity_refused, 1);
                        let who = msg.user.as_deref().unwrap_or_default();
                        let uuid = String::from_utf8_lossy(s[1]);
                        said.say(
                            who,
                            &format!("a beacon for node {uuid}, which is not this key's, refused"),
                        );
                    }
                    Err(Refused::Malformed) => Stats::add(&stats.malformed, 1),
                }
            }
        }
        let (ev_in, ev_out) = (mon_in.drain()?, mon_out.drain()?);
        for &fd in &ev_in.disconnected {
            known.disconnected(fd);
            conns.closed(fd);
        }
        for &fd in &ev_out.disconnected {
            conns.closed(fd);
        }
        conns.settle();
        handshakes_refused += ev_in.refused + ev_out.refused;
        if let Some(id) = &id {
            // A key revoked: its connections, and only they, are cut.
            let g = id.trust.generation();
            if generation != Some(g) {
                generation = Some(g);
                let snap = id.trust.snapshot();
                for c in conns.cut(|k| snap.contains(k)) {
                    let who = crate::security::cert::key_z85(&c.key);
                    said.say(
                        &who,
                        &format!("key revoked: connection from {} closed", c.peer()),
                    );
                }
            }
        }
        stats.peers.store(known.len() as u64, Relaxed);
        nodes.publish(&known);
        if let Some(z) = &zap {
            stats
                .auth_refused
                .store(z.stats.refused.load(Relaxed) + handshakes_refused, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;
