//! The sockets every Dafka node (producer, consumer, store) has in common:
//! [`Core`] holds its XPUB (verbose) and SUB, its [`Discovery`], its
//! address and the dialect it sends in, and sends the [`Out`]s and
//! [`Reply`]s its pure state returns; [`Frames`] are its receive buffers,
//! [`poll`] waits. What arrives goes through the one receive path
//! ([`receive`](crate::node::receive)). The unsafe FFI for socket options
//! the `zmq` crate lacks ([`set_int_option`]) lives here too, with its
//! SAFETY notes.

use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::node::actor::Inbox;
use crate::node::answers::{Dest, Form, Reply};
use crate::node::beacon::{Discovery, PeerEvent};
use crate::node::config::{bind_spelling, split_tcp, NodeConfig, WIRE_BATCH_BYTES};
use crate::node::out::Out;
use crate::node::secure::SecureCore;
use crate::node::stats::Stats;
use crate::security::Role;
use crate::wire::group::GroupMessage;
use crate::wire::{subscriptions, Dialect, FrameBuf, Message, NodeType, Record, RecordBatch};

/// Sets an int socket option that the `zmq` crate has no setter for
/// (`ZMQ_XPUB_NODROP`, `ZMQ_XPUB_VERBOSER`).
pub fn set_int_option(sock: &mut zmq::Socket, option: u32, value: i32) -> Result<()> {
    // SAFETY: a valid socket pointer, an option that takes an int, and a
    // pointer/length pair describing `value`, which outlives the call.
    let rc = unsafe {
        zmq_sys::zmq_setsockopt(
            sock.as_mut_ptr(),
            option as i32,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        // SAFETY: reads the calling thread's errno as libzmq left it.
        Err(Error::Zmq(zmq::Error::from_raw(unsafe {
            zmq_sys::zmq_errno()
        })))
    }
}

/// A fresh node address: a UUID v4 as 32 upper-case hex characters.
pub fn new_address() -> String {
    uuid::Uuid::new_v4().simple().to_string().to_uppercase()
}

/// Reusable receive buffers for one multi-frame message (up to 4 frames: Dafka
/// messages have 1-3, node beacons 4; longer messages are drained and reported).
pub struct Frames {
    msgs: [zmq::Message; 4],
    n: usize,
    too_long: bool,
}

impl Default for Frames {
    fn default() -> Self {
        Self {
            msgs: [
                zmq::Message::new(),
                zmq::Message::new(),
                zmq::Message::new(),
                zmq::Message::new(),
            ],
            n: 0,
            too_long: false,
        }
    }
}

impl Frames {
    /// Receives one whole message without blocking; `Ok(false)` when none.
    pub fn recv(&mut self, sock: &zmq::Socket) -> Result<bool> {
        self.n = 0;
        self.too_long = false;
        match sock.recv(&mut self.msgs[0], zmq::DONTWAIT) {
            Ok(()) => {}
            Err(zmq::Error::EAGAIN) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        self.n = 1;
        let mut spare = zmq::Message::new();
        while self.msgs[self.n - 1].get_more() || (self.too_long && spare.get_more()) {
            if self.n < 4 && !self.too_long {
                sock.recv(&mut self.msgs[self.n], 0)?;
                self.n += 1;
            } else {
                self.too_long = true;
                sock.recv(&mut spare, 0)?;
                if !spare.get_more() {
                    break;
                }
            }
        }
        Ok(true)
    }

    /// More than 4 frames arrived (never a Dafka message or beacon).
    pub fn too_long(&self) -> bool {
        self.too_long
    }

    /// The frames, as slices (valid until the next `recv`).
    pub fn slices(&self) -> ([&[u8]; 4], usize) {
        let mut s: [&[u8]; 4] = [&[], &[], &[], &[]];
        for (i, m) in self.msgs.iter().take(self.n).enumerate() {
            s[i] = m;
        }
        (s, self.n)
    }

    /// The first frame, mutable (for message properties such as Peer-Address).
    pub fn first_mut(&mut self) -> &mut zmq::Message {
        &mut self.msgs[0]
    }
}

/// The largest frame taken in by a socket that binds and receives only
/// control traffic: a node's XPUB (subscriptions: an ID and a topic key, at
/// most 256 bytes) and a tower's XSUB and XPUB (beacons and beacon
/// subscriptions, a few dozen bytes). A peer sending a larger frame is
/// disconnected by ZeroMQ (`ZMQ_MAXMSGSIZE`) before the frame is read into
/// memory; the socket binds, so the peer's reconnects by itself. It bounds
/// each frame, not a message: libzmq queues a message of any number of
/// frames whole before it is read. Never set on a socket that connects (a
/// node's SUB and beacon sockets): libzmq ends a connecting socket's session
/// for good on that error, so a peer's large record, or a tower's frame,
/// would cut the node off from it.
pub(crate) const MAX_CONTROL_FRAME: i64 = 64 * 1024;

/// Sockets and identity of one node. Lives on the node thread.
pub struct Core {
    pub xpub: zmq::Socket,
    pub sub: zmq::Socket,
    pub disc: Discovery,
    pub address: Vec<u8>,
    pub dialect: Dialect,
    /// The XPUB endpoint peers connect to (wildcard host shown as 127.0.0.1).
    pub endpoint: String,
    buf: FrameBuf,
    /// A batch's values frame, reused.
    values: Vec<u8>,
    /// Messages that could not be encoded in our dialect (a peer's address
    /// with a NUL byte cannot be a `zproto` topic key): dropped, and added to
    /// `malformed` by [`Core::count_unsendable`] (each turn of a node's loop).
    unsendable: u64,
    ctx: zmq::Context,
    /// Secure mode (last: its ZAP handler closes after the sockets above).
    pub(super) secure: Option<SecureCore>,
}

impl Drop for Core {
    fn drop(&mut self) {
        // Before the XPUB closes: libzmq would block on a monitor event sent
        // after its reading end closed.
        if self.secure.is_some() {
            crate::node::monitor::Monitor::stop(&mut self.xpub);
        }
    }
}

/// A secure node's certificate must allow what it does: a producer's or
/// consumer's its topics, a store's every topic (it subscribes to every
/// record; a store for some topics only is not a thing yet).
fn check_topics(
    id: &crate::security::Secure,
    node: NodeType,
    topics: &[&[u8]],
    cert: &std::path::Path,
) -> Result<()> {
    let allowed = id.cert.topics()?;
    let refused = match node {
        NodeType::Store if !allowed.is_all() => Some("every topic (a store's)".to_string()),
        _ => topics
            .iter()
            .find(|t| !allowed.allows(t))
            .map(|t| format!("topic {:?}", String::from_utf8_lossy(t))),
    };
    match refused {
        Some(what) => Err(Error::Config(format!(
            "the certificate {} allows topics {allowed}, not {what}: make one that does \
             (dafka keygen ... --topics)",
            cert.display()
        ))),
        None => Ok(()),
    }
}

/// The role a node of type `node` needs in its certificate.
fn role_of(node: NodeType) -> Role {
    match node {
        NodeType::Producer => Role::Producer,
        NodeType::Consumer => Role::Consumer,
        NodeType::Store => Role::Store,
    }
}

/// A node's XPUB, bound to `bind`: verbose, with its queue bound, and in
/// secure mode a CURVE server that applies subscriptions itself.
fn open_xpub(
    ctx: &zmq::Context,
    bind: &str,
    sndhwm: i32,
    secure: Option<&crate::security::Secure>,
) -> Result<zmq::Socket> {
    let mut xpub = ctx.socket(zmq::XPUB)?;
    xpub.set_xpub_verbose(true)?;
    xpub.set_sndhwm(sndhwm)?;
    xpub.set_linger(500)?;
    xpub.set_maxmsgsize(MAX_CONTROL_FRAME)?;
    if let Some(id) = secure {
        id.serve(&xpub)?;
        set_int_option(&mut xpub, zmq_sys::ZMQ_XPUB_MANUAL, 1)?;
    }
    xpub.bind(&bind_spelling(bind))
        .map_err(|source| Error::Socket {
            op: "bind",
            endpoint: bind.to_string(),
            source,
        })?;
    Ok(xpub)
}

impl Core {
    /// Binds the XPUB, connects the SUB to static peers, subscribes as `node`
    /// for `topics`, and starts discovery through the configured towers.
    pub fn open(
        ctx: &zmq::Context,
        cfg: &NodeConfig,
        node: NodeType,
        address: &str,
        topics: &[&[u8]],
    ) -> Result<Self> {
        cfg.validate()?;
        let id = match &cfg.security {
            Some(sc) => {
                let id = sc.load(role_of(node))?;
                check_topics(&id, node, topics, &sc.cert)?;
                Some(Arc::new(id))
            }
            None => None,
        };
        // The ZAP handler before any CURVE server socket: without one, a
        // CURVE server lets every key in.
        let zap = match &id {
            Some(id) => Some(crate::security::zap::ZapHandler::start(
                ctx,
                id.trust.clone(),
            )?),
            None => None,
        };
        let xpub = open_xpub(ctx, &cfg.bind, cfg.sndhwm, id.as_deref())?;
        let bound = xpub
            .get_last_endpoint()?
            .map_err(|_| Error::Config("bound endpoint is not UTF-8".into()))?;
        let (host, port) = split_tcp(&bound)
            .map(|(h, p)| (h.to_string(), p))
            .unwrap_or_default();
        let wildcard = host == "0.0.0.0" || host == "*" || host.is_empty();
        let endpoint = if wildcard && port != 0 {
            format!("tcp://127.0.0.1:{port}")
        } else {
            bound.clone()
        };
        let advertised = match &cfg.advertise_host {
            Some(h) => h.clone(),
            None if wildcard => String::new(),
            None => host,
        };
        // An XSUB, not a SUB: the peers' XPUBs already send only what matches
        // these subscriptions, and a SUB would match every message against
        // them a second time (about a tenth of a consumer thread's CPU at
        // replay speed). An XSUB sends its subscriptions to every peer it
        // connects to, later ones too, as a SUB does.
        let sub = ctx.socket(zmq::XSUB)?;
        sub.set_rcvhwm(cfg.rcvhwm)?;
        sub.set_linger(0)?;
        let subscribe: Vec<Vec<u8>> = subscriptions(node, address.as_bytes(), topics)
            .into_iter()
            .map(|prefix| [&[1u8][..], &prefix].concat())
            .collect();
        let mut secure = match (id, zap) {
            (Some(id), Some(zap)) => {
                let monitor = crate::node::monitor::Monitor::watch(ctx, &xpub)?;
                let mut sc = SecureCore::new(id, zap, monitor, subscribe, cfg.rcvhwm);
                sc.topics = topics.iter().map(|t| t.to_vec()).collect();
                Some(sc)
            }
            _ => {
                for msg in &subscribe {
                    sub.send(msg.as_slice(), 0)?;
                }
                None
            }
        };
        let mut disc = Discovery::new(
            ctx,
            &cfg.towers,
            node,
            address.as_bytes(),
            &advertised,
            port,
            cfg.beacon_interval,
            cfg.beacon_timeout,
            Instant::now(),
            secure.as_ref().map(|s| s.id.clone()),
        )?;
        for p in &cfg.peers {
            if disc.table.add_static(p).is_empty() {
                continue; // named twice in `peers`
            }
            match &mut secure {
                Some(sc) => sc.connect(ctx, p)?,
                None => sub.connect(p).map_err(|source| Error::Socket {
                    op: "connect",
                    endpoint: p.clone(),
                    source,
                })?,
            }
        }
        let endpoint = match &secure {
            Some(sc) => crate::security::keyed(&endpoint, sc.id.public()),
            None => endpoint,
        };
        Ok(Self {
            xpub,
            sub,
            disc,
            address: address.as_bytes().to_vec(),
            dialect: cfg.wire,
            endpoint,
            buf: FrameBuf::new(),
            values: Vec::new(),
            unsendable: 0,
            ctx: ctx.clone(),
            secure,
        })
    }

    /// Secure mode: the distinct store keys subscribed to every
    /// RECORD-BATCH on our XPUB ([`SecureCore::store_keys`]); None in
    /// insecure mode, where stores are counted by their subscriptions.
    pub fn store_keys(&mut self) -> Option<usize> {
        self.secure.as_mut().map(SecureCore::store_keys)
    }

    /// The peers of this node whose key is trusted no more lose their
    /// connections, and only they: ours to them close, and theirs to our
    /// XPUB are shut down (`Conns::cut`). Adding a key reconnects no one.
    fn watch_trust(&mut self) -> Result<()> {
        if let Some(sc) = &mut self.secure {
            sc.trust_changed(&self.ctx)?;
        }
        Ok(())
    }

    /// Sets an int option of the XPUB (`ZMQ_XPUB_NODROP`, ...).
    pub fn set_xpub_option(&mut self, option: u32, value: i32) -> Result<()> {
        set_int_option(&mut self.xpub, option, value)
    }

    /// Applies discovery events to the SUB.
    pub fn apply(&mut self, events: Vec<PeerEvent>, stats: &Stats) -> Result<()> {
        for e in events {
            match e {
                PeerEvent::Connect(ep) => {
                    let r = match &mut self.secure {
                        Some(sc) => sc.connect(&self.ctx, &ep),
                        None => self.sub.connect(&ep).map_err(Error::from),
                    };
                    if let Err(err) = r {
                        tracing::warn!("cannot connect to peer {ep}: {err}");
                    }
                }
                PeerEvent::Disconnect(ep) => match &mut self.secure {
                    Some(sc) => sc.disconnect(&ep),
                    None => {
                        let _ = self.sub.disconnect(&ep);
                    }
                },
            }
        }
        stats.peers.store(
            self.disc.table.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    /// Connects the SUB to one more static peer (an XPUB endpoint).
    /// Connected once, however many static or discovered peers name it.
    pub fn connect(&mut self, endpoint: &str) {
        if self.disc.table.add_static(endpoint).is_empty() {
            return;
        }
        let r = match &mut self.secure {
            Some(sc) => sc.connect(&self.ctx, endpoint),
            None => self.sub.connect(endpoint).map_err(Error::from),
        };
        if let Err(e) = r {
            tracing::warn!("cannot connect to peer {endpoint}: {e}");
        }
    }

    /// Beacon SUB readable.
    pub fn on_beacons(&mut self, stats: &Stats) -> Result<()> {
        let (malformed, refused) = (self.disc.malformed, self.disc.table.refused);
        let identity = self.disc.table.identity_refused;
        let ev = self.disc.on_readable(Instant::now())?;
        Stats::add(&stats.malformed, self.disc.malformed - malformed);
        Stats::add(&stats.beacons_refused, self.disc.table.refused - refused);
        Stats::add(
            &stats.identity_refused,
            self.disc.table.identity_refused - identity,
        );
        self.apply(ev, stats)
    }

    /// Beacon and expiry timers.
    pub fn on_timer(&mut self, now: Instant, stats: &Stats) -> Result<()> {
        let silences = self.disc.silences;
        let ev = self.disc.on_timer(now)?;
        Stats::add(&stats.towers_silent, self.disc.silences - silences);
        self.apply(ev, stats)
    }

    /// Adds the messages dropped as unencodable since the last call to
    /// `malformed` (they answered input that our dialect cannot carry).
    pub fn count_unsendable(&mut self, stats: &Stats) {
        if self.unsendable > 0 {
            Stats::add(&stats.malformed, std::mem::take(&mut self.unsendable));
        }
        if let Some(sc) = &mut self.secure {
            match sc.monitor.drain() {
                Ok(ev) => {
                    sc.handshakes_refused += ev.refused;
                    for fd in ev.disconnected {
                        sc.conns.closed(fd);
                    }
                    sc.conns.settle();
                }
                Err(e) => tracing::warn!("reading the XPUB's monitor: {e}"),
            }
            let refused = sc
                .zap
                .stats
                .refused
                .load(std::sync::atomic::Ordering::Relaxed);
            stats.auth_refused.store(
                refused + sc.handshakes_refused,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }

    /// Encodes and sends one message (DONTWAIT: a full queue is EAGAIN). One
    /// that cannot be encoded (a field from a peer that our dialect cannot
    /// carry) is dropped and counted, never an error of the node.
    pub fn send_message(&mut self, msg: &Message<'_>) -> Result<()> {
        if let Err(e) = msg.encode_into(self.dialect, &mut self.buf) {
            self.unsendable += 1;
            if self.unsendable.is_power_of_two() {
                tracing::warn!(
                    "dropped a {} that cannot be encoded: {e}",
                    msg.kind().name()
                );
            }
            return Ok(());
        }
        let content = msg.content();
        let mut headers = self.buf.header_frames().peekable();
        while let Some(h) = headers.next() {
            let more = headers.peek().is_some() || content.is_some();
            let flags = if more {
                zmq::SNDMORE | zmq::DONTWAIT
            } else {
                zmq::DONTWAIT
            };
            self.xpub.send(h, flags)?;
        }
        if let Some(c) = content {
            self.xpub.send(c, zmq::DONTWAIT)?;
        }
        Ok(())
    }

    /// Encodes and sends one message of the consumer-group extension
    /// (DONTWAIT), as [`Core::send_message`]: one that cannot be encoded is
    /// dropped and counted.
    pub fn send_group(&mut self, msg: &GroupMessage<'_>) -> Result<()> {
        let frames = match msg.encode(self.dialect) {
            Ok(f) => f,
            Err(e) => {
                self.unsendable += 1;
                if self.unsendable.is_power_of_two() {
                    tracing::warn!(
                        "dropped a {} that cannot be encoded: {e}",
                        msg.kind().name()
                    );
                }
                return Ok(());
            }
        };
        let last = frames.len() - 1;
        for (i, f) in frames.iter().enumerate() {
            let flags = if i < last {
                zmq::SNDMORE | zmq::DONTWAIT
            } else {
                zmq::DONTWAIT
            };
            self.xpub.send(f.as_slice(), flags)?;
        }
        Ok(())
    }

    /// Subscribes to one more prefix (the consumer-group extension's,
    /// [`crate::wire::group::subscriptions`]): on the SUB, or in secure
    /// mode on every peer's socket, now and later.
    pub fn subscribe(&mut self, prefix: &[u8]) -> Result<()> {
        let frame = [&[1u8][..], prefix].concat();
        match &mut self.secure {
            Some(sc) => {
                // A member's own group (it subscribes to its announcements
                // before it reads any subscription to its XPUB).
                if let crate::wire::Prefix::Group {
                    kind: crate::wire::group::GroupKind::Member,
                    key,
                } = crate::wire::Prefix::parse(prefix)
                {
                    if !key.is_empty() {
                        sc.group = Some(key.to_vec());
                    }
                }
                sc.subscribe(frame)
            }
            None => {
                self.sub.send(frame.as_slice(), 0)?;
                Ok(())
            }
        }
    }

    /// Sends records `first, first + 1, ...` to `dest`, given their bodies
    /// (metadata + value, [`crate::meta`]), in `form`: [`Form::Bodies`] as
    /// META-RECORD-BATCHes (or DIRECT-...) of up to [`WIRE_BATCH_BYTES`] of
    /// bodies (a larger one alone); [`Form::Batches`] the values alone in
    /// RECORD-BATCHes (DIRECT-...; a run of one record and a larger value
    /// still go as a RECORD); [`Form::Records`] one RECORD (DIRECT-RECORD)
    /// each. Returns how many records went out before the receiver's queue
    /// was full (EAGAIN, on a no-drop XPUB): whole batches only. Live records
    /// go out at the hot path's pace.
    pub fn send_records<'v>(
        &mut self,
        dest: Dest<'_>,
        first: u64,
        bodies: impl Iterator<Item = &'v [u8]>,
        form: Form,
    ) -> Result<usize> {
        let own = std::mem::take(&mut self.address);
        let mut buf = std::mem::take(&mut self.values);
        let (key, partition, topic, direct) = match dest {
            Dest::Live { topic } => (topic, own.as_slice(), topic, false),
            Dest::Direct {
                to,
                partition,
                topic,
            } => (to, partition, topic, true),
        };
        let keep = form == Form::Bodies;
        let fits = |buf: &Vec<u8>, v: &[u8]| buf.len() + 4 + v.len() <= WIRE_BATCH_BYTES;
        let mut values = bodies
            .map(|b| if keep { b } else { value_of(b) })
            .peekable();
        let mut sent = 0usize;
        let r = (|| {
            while let Some(v) = values.next() {
                let sequence = first + sent as u64;
                buf.clear();
                let mut count = 1u32;
                if form != Form::Records && fits(&buf, v) {
                    put_value(&mut buf, v);
                    while let Some(next) = values.next_if(|n| fits(&buf, n)) {
                        put_value(&mut buf, next);
                        count += 1;
                    }
                } else if keep {
                    // A body larger than a batch: alone, but still a batch.
                    buf.extend_from_slice(&(v.len() as u32).to_be_bytes());
                    buf.extend_from_slice(v);
                }
                let msg = if count == 1 && !keep {
                    let r = Record {
                        topic: key,
                        address: partition,
                        subject: topic,
                        sequence,
                        content: v,
                    };
                    if direct {
                        Message::DirectRecord(r)
                    } else {
                        Message::Record(r)
                    }
                } else {
                    let b = RecordBatch {
                        topic: key,
                        address: partition,
                        subject: topic,
                        sequence,
                        count,
                        values: &buf,
                    };
                    match (keep, direct) {
                        (false, false) => Message::RecordBatch(b),
                        (false, true) => Message::DirectRecordBatch(b),
                        (true, false) => Message::MetaRecordBatch(b),
                        (true, true) => Message::DirectMetaRecordBatch(b),
                    }
                };
                match self.send_message(&msg) {
                    Ok(()) => sent += count as usize,
                    Err(Error::Zmq(zmq::Error::EAGAIN)) => return Ok(sent),
                    Err(e) => return Err(e),
                }
            }
            Ok(sent)
        })();
        self.values = buf;
        self.address = own;
        r
    }

    /// Sends one [`Out`], filling in our address where the message carries it.
    pub fn emit(&mut self, out: &Out) -> Result<()> {
        let own = std::mem::take(&mut self.address);
        let r = self.send_message(&out.as_message(&own));
        self.address = own;
        r
    }

    /// Sends a FETCH answer ([`Core::send_records`] of it).
    pub fn send_reply<'v>(
        &mut self,
        reply: Reply<'_, impl Iterator<Item = &'v [u8]>>,
    ) -> Result<usize> {
        self.send_records(reply.dest, reply.first, reply.bodies, reply.form)
    }

    /// Sends every [`Out`] in order.
    pub fn emit_all(&mut self, outs: &[Out]) -> Result<()> {
        for o in outs {
            self.emit(o)?;
        }
        Ok(())
    }
}

/// The value of a body this node made or checked (an unparsable one, which
/// cannot be, sends nothing rather than its metadata as a value).
pub fn value_of(body: &[u8]) -> &[u8] {
    match crate::meta::value_of(body) {
        Ok(v) => v,
        Err(e) => {
            debug_assert!(false, "a body that was checked does not parse: {e}");
            &[]
        }
    }
}

/// A value appended to a RECORD-BATCH's values frame as a `longstr`; one
/// that fits in [`WIRE_BATCH_BYTES`], so its length fits in 4 octets.
fn put_value(out: &mut Vec<u8>, v: &[u8]) {
    out.extend_from_slice(&(v.len() as u32).to_be_bytes());
    out.extend_from_slice(v);
}

/// Which of a node's sockets [`Core::poll`] found readable.
#[derive(Debug, Clone, Copy, Default)]
pub struct Readable {
    pub xpub: bool,
    pub sub: bool,
    pub beacon: bool,
}

/// `zmq::poll` for every node loop: a signal that interrupted the wait (EINTR;
/// Linux never restarts `poll`, SA_RESTART or not) is a wait that found
/// nothing, and the loop goes round again. Any signal the process handles
/// (Python's SIGINT, the binaries' SIGTERM) can be delivered to a node's
/// thread, which blocks none; before, it stopped the node for good.
pub fn poll(items: &mut [zmq::PollItem<'_>], timeout_ms: i64) -> Result<()> {
    match zmq::poll(items, timeout_ms) {
        Ok(_) | Err(zmq::Error::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

impl Core {
    /// One wait of a node's loop, up to `timeout_ms`: the command pipe, the XPUB
    /// (subscriptions), the SUB (unless `read_sub` is false, e.g. while the
    /// application is behind) and the beacon socket.
    pub fn poll<C>(
        &mut self,
        inbox: &Inbox<C>,
        timeout_ms: i64,
        read_sub: bool,
    ) -> Result<Readable> {
        self.watch_trust()?;
        let mut items = vec![inbox.poll_item()];
        let timeout_ms = self.poll_items(&mut items, read_sub, timeout_ms);
        let t = inbox.before_poll(timeout_ms);
        let polled = poll(&mut items, t);
        inbox.after_poll();
        polled?;
        Ok(self.readable(&items[1..]))
    }

    /// [`Core::poll`] for a loop without a command pipe (the read clients).
    pub fn poll_sockets(&mut self, timeout_ms: i64) -> Result<Readable> {
        self.watch_trust()?;
        let mut items = Vec::new();
        let timeout_ms = self.poll_items(&mut items, true, timeout_ms);
        poll(&mut items, timeout_ms)?;
        Ok(self.readable(&items))
    }

    /// Adds the XPUB, the beacon sockets and the SUB(s) to `items`, in that
    /// order; returns the timeout to use (a secure node looks at its trust
    /// directory at least every second).
    fn poll_items<'a>(
        &'a self,
        items: &mut Vec<zmq::PollItem<'a>>,
        read_sub: bool,
        timeout_ms: i64,
    ) -> i64 {
        let sub_events = if read_sub {
            zmq::POLLIN
        } else {
            zmq::PollEvents::empty()
        };
        items.push(self.xpub.as_poll_item(zmq::POLLIN));
        items.extend(self.disc.poll_items());
        items.push(self.sub.as_poll_item(sub_events));
        match &self.secure {
            Some(sc) => {
                items.extend(sc.peers.iter().map(|p| p.sock.as_poll_item(sub_events)));
                if timeout_ms < 0 {
                    1000
                } else {
                    timeout_ms.min(1000)
                }
            }
            None => timeout_ms,
        }
    }

    /// What [`Core::poll_items`]' items say after the poll.
    fn readable(&self, items: &[zmq::PollItem<'_>]) -> Readable {
        // The XPUB, then the beacon sockets, then the SUB and the peers'.
        let subs = 1 + self.secure.as_ref().map_or(0, |sc| sc.peers.len());
        let beacons = items.len() - 1 - subs;
        Readable {
            xpub: items[0].is_readable(),
            beacon: items[1..1 + beacons].iter().any(|i| i.is_readable()),
            sub: items[1 + beacons..].iter().any(|i| i.is_readable()),
        }
    }
}
