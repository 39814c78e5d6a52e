//! Typed node configuration with documented defaults, and the parsing of the
//! endpoint strings users pass (`towers=[...]`, `peers=[...]`, bind endpoints).

use std::time::Duration;

use crate::error::{Error, Result};
pub use crate::security::SecurityConfig;
use crate::wire::Dialect;

/// Default bind endpoint of a node's XPUB: an ephemeral port on loopback.
pub const DEFAULT_BIND: &str = "tcp://127.0.0.1:*";
/// Default tower beacon-in (XSUB) endpoint, as in the C reference.
pub const DEFAULT_TOWER_IN: &str = "tcp://*:5556";
/// Default tower beacon-out (XPUB) endpoint, as in the C reference.
pub const DEFAULT_TOWER_OUT: &str = "tcp://*:5557";

/// Settings every node (producer, consumer, store) shares.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Where the node's XPUB binds. Default [`DEFAULT_BIND`]; `:0` means ephemeral.
    pub bind: String,
    /// Towers to discover peers through, each a [`TowerAddr`] string.
    pub towers: Vec<String>,
    /// Static peers: XPUB endpoints the node's SUB connects to, no tower needed.
    pub peers: Vec<String>,
    /// The dialect the node sends in (it receives both). Default `rfc`.
    pub wire: Dialect,
    /// Beacon interval. Default 1000 ms (the C reference's `beacon.interval`).
    pub beacon_interval: Duration,
    /// A peer silent this long is forgotten. Default 4000 ms (`beacon.timeout`).
    pub beacon_timeout: Duration,
    /// Host announced in beacons; empty lets the tower use the TCP peer address.
    /// Default: the XPUB's bound host, or empty when bound to a wildcard.
    pub advertise_host: Option<String>,
    /// Send high-water mark of the XPUB (per subscriber). Default 1,000,000.
    pub sndhwm: i32,
    /// Receive high-water mark of the SUB (per peer). Default 1,000,000.
    pub rcvhwm: i32,
    /// Secure mode (CURVE + ZAP, docs/security.md): the node's secret
    /// certificate and the cluster's trust directory. Default none: plaintext,
    /// anyone who reaches the node's ports joins (byte-compatible with the C
    /// reference).
    pub security: Option<SecurityConfig>,
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            bind: DEFAULT_BIND.into(),
            towers: Vec::new(),
            peers: Vec::new(),
            wire: Dialect::Rfc,
            beacon_interval: Duration::from_millis(1000),
            beacon_timeout: Duration::from_millis(4000),
            advertise_host: None,
            sndhwm: 1_000_000,
            rcvhwm: 1_000_000,
            security: None,
        }
    }
}

impl NodeConfig {
    /// A fresh address for a node of this config: random, or in secure mode
    /// the first 8 bytes of its public key and 8 random ones
    /// ([`crate::security::address_for_key`]), so peers can check it.
    pub fn new_address(&self) -> Result<String> {
        match &self.security {
            None => Ok(crate::node::socket::new_address()),
            Some(s) => Ok(crate::security::address_for_key(&s.public_key()?)),
        }
    }

    /// The address a node of this config gets from `seed`: always the same
    /// for the same seed (and, in secure mode, the same key, whose first 8
    /// bytes it starts with).
    pub fn seeded_address(&self, seed: &[u8]) -> Result<String> {
        let id = uuid::Uuid::new_v5(&ADDRESS_SEED_NAMESPACE, seed);
        let raw = *id.as_bytes();
        match &self.security {
            None => Ok(raw.iter().map(|b| format!("{b:02X}")).collect()),
            Some(s) => Ok(crate::security::address_for_key_with(
                &s.public_key()?,
                &raw,
            )),
        }
    }

    /// Whether `address` may be this node's: any, or in secure mode one
    /// that starts with its key.
    pub fn owns_address(&self, address: &str) -> Result<bool> {
        match &self.security {
            None => Ok(true),
            Some(s) => Ok(crate::security::address_matches_key(
                address.as_bytes(),
                &s.public_key()?,
            )),
        }
    }

    /// Checks ranges and endpoint syntax; returns a message saying what to fix.
    pub fn validate(&self) -> Result<()> {
        check_endpoint("bind", &self.bind)?;
        let secure = self.security.is_some();
        for t in &self.towers {
            check_keyed("tower", t, TowerAddr::parse(t)?.key.is_some(), secure)?;
        }
        if !self.towers.is_empty() && !self.bind.starts_with("tcp://") {
            return Err(Error::Config(format!(
                "bind {:?} with towers: a node found through towers must bind \
                 tcp://HOST:PORT (its beacon tells peers a TCP port); bind tcp://, or \
                 leave towers empty and connect nodes with peers=[...]",
                self.bind
            )));
        }
        for p in &self.peers {
            check_peer(p)?;
            let key = crate::security::split_keyed(p)?.1;
            check_keyed("peer", p, key.is_some(), secure)?;
        }
        if let Some(h) = &self.advertise_host {
            check_host("advertise_host", h)?;
        }
        if self.beacon_interval.is_zero() {
            return Err(Error::Config("beacon_interval must be > 0".into()));
        }
        if self.beacon_timeout > LONGEST {
            return Err(Error::Config(format!(
                "beacon_timeout must be at most {} s (about 95 years)",
                LONGEST.as_secs()
            )));
        }
        if self.beacon_timeout <= self.beacon_interval {
            return Err(Error::Config(
                "beacon_timeout must be longer than beacon_interval".into(),
            ));
        }
        if self.sndhwm < 0 || self.rcvhwm < 0 {
            return Err(Error::Config(
                "sndhwm and rcvhwm must be >= 0 (0 = unlimited)".into(),
            ));
        }
        Ok(())
    }
}

/// Producer settings.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub node: NodeConfig,
    /// HEAD period once something was published. Default 1 s.
    pub head_interval: Duration,
    /// Distinct stores that must ACK a record before it leaves the buffer.
    /// Default 1; 0 releases records as soon as they are sent.
    pub min_acks: usize,
    /// Bound on the bytes of unacknowledged records. Default 256 MiB.
    pub max_unacked_bytes: usize,
    /// A larger value is refused ([`Error::TooLarge`]): stores drop records
    /// over their own `max_record_bytes` (the same default,
    /// [`DEFAULT_MAX_RECORD_BYTES`]), and a partition cannot go on past a
    /// record no store keeps.
    pub max_record_bytes: usize,
    /// This project's stores and consumers always get META-RECORD-BATCHes
    /// (records with their keys, headers and timestamps, up to
    /// [`WIRE_BATCH_BYTES`] each). For a subscriber that does not take them
    /// (the C reference): false (the default) sends one RECORD per record,
    /// true none, and such a node gets the records by FETCHing them.
    pub record_batches: bool,
    /// The partition's address comes from this seed (the same seed, the
    /// same address: for a writer that may run again, e.g. a Spark task),
    /// instead of being new. None: new.
    pub address_seed: Option<Vec<u8>>,
    /// The offset of the first record sent (default 0): a writer that goes
    /// on with a partition an earlier producer of the same address began
    /// (where it ends: [`crate::node::producer::partition_next`]).
    pub first_offset: u64,
    /// How long closing waits for the stores' ACKs of what was sent
    /// ([`crate::node::producer::Producer::close_after`]; Python's `close()`
    /// and `with` blocks). Default 10 s; 0 closes at once.
    pub close_timeout: Duration,
}

/// The UUID v5 namespace of [`NodeConfig::seeded_address`] (fixed: the
/// same seed must give the same address in every version).
const ADDRESS_SEED_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6461_666b_6120_7061_7274_6974_696f_6e73);

/// The most value bytes a producer puts in one RECORD-BATCH (a larger value
/// goes alone, as a RECORD).
pub const WIRE_BATCH_BYTES: usize = 64 << 10;

/// A batching producer's XPUB holds this many times fewer messages per
/// subscriber than `sndhwm` (at least [`MIN_BATCH_HWM`]): each is up to
/// [`WIRE_BATCH_BYTES`], and the mark counts messages, not bytes.
pub const BATCH_HWM_DIVISOR: i32 = 64;
/// The least send high-water mark of a batching producer, when `sndhwm` is
/// not 0 (unlimited).
pub const MIN_BATCH_HWM: i32 = 1000;

/// The longest timeout or interval a node takes: about 95 years, "forever"
/// to anyone, and far from what `Instant + Duration` can hold (a larger one
/// would panic there).
pub const LONGEST: Duration = Duration::from_secs(3_000_000_000);

/// The default `max_record_bytes` of producers and stores: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 << 20;

/// The default [`ConsumerConfig::idle_after`]: a partition caught up and not
/// heard of for this long keeps only its position (in
/// `ConsumerState::starts`), not its `Part`. A topic that Spark jobs feed
/// gets a partition per task, and a long-lived consumer would otherwise keep
/// every one.
pub const IDLE_AFTER: Duration = Duration::from_secs(60);

/// The default [`ConsumerConfig::forget_after`]: eight days, past the stores'
/// default retention (seven days), as Kafka expires an idle group's offsets
/// after seven.
pub const FORGET_AFTER: Duration = Duration::from_secs(8 * 24 * 3600);

/// The most store addresses whose ACKs a producer tracks at once (each ACK
/// sorts them all); a flood of ACKs from made-up addresses stops here.
pub const MAX_ACKERS: usize = 1024;

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            node: NodeConfig::default(),
            head_interval: Duration::from_secs(1),
            min_acks: 1,
            max_unacked_bytes: 256 << 20,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            record_batches: false,
            address_seed: None,
            first_offset: 0,
            close_timeout: Duration::from_secs(10),
        }
    }
}

impl ProducerConfig {
    /// The node settings the producer's sockets get: the XPUB holds
    /// `sndhwm / 64` messages per subscriber (at least 1,000): this
    /// project's nodes get batches of up to 64 KiB, so that a subscriber who
    /// falls behind queues about as many bytes as with one RECORD per record.
    pub fn socket_config(&self) -> NodeConfig {
        let mut node = self.node.clone();
        if node.sndhwm > 0 {
            node.sndhwm = (node.sndhwm / BATCH_HWM_DIVISOR).max(MIN_BATCH_HWM.min(node.sndhwm));
        }
        node
    }

    pub fn validate(&self) -> Result<()> {
        self.node.validate()?;
        if self.head_interval.is_zero() || self.head_interval > LONGEST {
            return Err(Error::Config(format!(
                "head_interval must be > 0 and at most {} s",
                LONGEST.as_secs()
            )));
        }
        if self.max_unacked_bytes == 0 {
            return Err(Error::Config("max_unacked_bytes must be > 0".into()));
        }
        if self.max_record_bytes == 0 {
            return Err(Error::Config("max_record_bytes must be > 0".into()));
        }
        if self.min_acks > MAX_ACKERS {
            return Err(Error::Config(format!(
                "min_acks = {}: a producer tracks ACKs from at most {} stores",
                self.min_acks, MAX_ACKERS
            )));
        }
        Ok(())
    }
}

/// Where a new consumer starts in a partition it has not seen before.
///
/// The default is `Earliest`, unlike Kafka's `latest`: every producer run
/// is a new partition, and a consumer hears of one only once discovery
/// connected it to the producer or a store, so `Latest` skips the first
/// records of partitions born while it runs, not only of those born while
/// it was away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// From offset 0: fetch everything the producer and stores still hold.
    #[default]
    Earliest,
    /// From the first record seen (or after the first HEAD seen).
    Latest,
}

impl std::str::FromStr for OffsetReset {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "earliest" => Ok(Self::Earliest),
            "latest" => Ok(Self::Latest),
            other => Err(Error::Config(format!(
                "unknown offset_reset {other:?}: use \"earliest\" or \"latest\""
            ))),
        }
    }
}

/// Consumer settings.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub node: NodeConfig,
    /// Default `earliest` ([`OffsetReset`] says why). A consumer given
    /// `start_offsets` starts every partition they do not name at its first
    /// record, whatever this says: those were born while it was away.
    pub offset_reset: OffsetReset,
    /// An unanswered FETCH is repeated after this long. Default 500 ms.
    pub fetch_retry: Duration,
    /// Most records one FETCH asks for. Default 10,000.
    pub max_fetch: u32,
    /// Out-of-order records held per partition while a gap is fetched; beyond
    /// it they are re-fetched later. Default 100,000.
    pub max_pending: usize,
    /// Delivered records waiting for the application; while full the node stops
    /// reading (the publishers then drop, and the gap is fetched). Default 100,000.
    pub max_buffered: usize,
    /// The same bound in bytes of values (one record is taken however large,
    /// a turn's batch may pass it). Default 64 MiB, as librdkafka's
    /// `queued.max.messages.kbytes`.
    pub max_buffered_bytes: usize,
    /// FETCH retries without progress before a gap is skipped, if a node
    /// answered the FETCH from past it: the records are deleted (retention)
    /// everywhere it asked, so the partition goes on from the first record
    /// held, counted in `records_lost`. Default 6 (3 s at `fetch_retry`).
    pub give_up_fetches: u32,
    /// Where partitions start (partition name, the next offset to deliver),
    /// overriding `offset_reset` for them: positions saved from an earlier
    /// consumer ([`crate::node::Consumer::positions`]). Given, the
    /// partitions they do not name start at their first record (as
    /// `Earliest`). Default none.
    pub start_offsets: Vec<(String, u64)>,
    /// A partition caught up and not heard of for this long keeps only its
    /// position, not its protocol state (a topic that Spark jobs feed gets
    /// a partition per task). Default 60 s.
    pub idle_after: Duration,
    /// The position of a partition not heard of for this long is forgotten
    /// (unless the application seeked it): heard of again, it starts as a
    /// new one, by `offset_reset`. Keep it above the stores' retention
    /// (stores announce a partition while they hold records of it). `None`
    /// keeps every position for good. Default 8 days.
    pub forget_after: Option<Duration>,
    /// The consumer group it joins (docs/groups.md): consumers of one group
    /// share the topics' partitions, each read by one live member, and
    /// commit their positions to the stores. `None` (the default): it reads
    /// every partition, as without groups.
    pub group: Option<String>,
    /// In a group, commit what `poll` returned this often. `None`: only
    /// when a partition moves to another member. Default 5 s (Kafka's
    /// `auto.commit.interval.ms`).
    pub auto_commit_interval: Option<Duration>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            node: NodeConfig::default(),
            offset_reset: OffsetReset::Earliest,
            fetch_retry: Duration::from_millis(500),
            max_fetch: 10_000,
            max_pending: 100_000,
            max_buffered: 100_000,
            max_buffered_bytes: 64 << 20,
            give_up_fetches: 6,
            start_offsets: Vec::new(),
            idle_after: IDLE_AFTER,
            forget_after: Some(FORGET_AFTER),
            group: None,
            auto_commit_interval: Some(Duration::from_secs(5)),
        }
    }
}

impl ConsumerConfig {
    pub fn validate(&self) -> Result<()> {
        self.node.validate()?;
        if self.fetch_retry.is_zero() || self.idle_after.is_zero() {
            return Err(Error::Config(
                "fetch_retry and idle_after must be > 0".into(),
            ));
        }
        if self.forget_after.is_some_and(|f| f.is_zero()) {
            return Err(Error::Config(
                "forget_after must be > 0 (or None to keep every position)".into(),
            ));
        }
        if let Some(g) = &self.group {
            check_name(&format!("group {g:?}"), g)?;
            if g.contains('\0') {
                return Err(Error::Config(format!(
                    "group {g:?} has a NUL byte: the zproto dialect cannot carry it"
                )));
            }
        }
        if self.auto_commit_interval.is_some_and(|d| d.is_zero()) {
            return Err(Error::Config(
                "auto_commit_interval must be > 0 (or None to commit only on hand-over)".into(),
            ));
        }
        // Added to `Instant::now()` by the node thread: a larger one (e.g.
        // Duration::MAX for "never") would overflow there and stop it.
        let longest = [
            Some(self.fetch_retry),
            Some(self.idle_after),
            self.forget_after,
            self.auto_commit_interval,
        ];
        if longest.into_iter().flatten().any(|d| d > LONGEST) {
            return Err(Error::Config(format!(
                "fetch_retry, idle_after, forget_after and auto_commit_interval must be at most \
                 {} s (about 95 years; forget_after=None keeps every position)",
                LONGEST.as_secs()
            )));
        }
        if self.max_fetch == 0
            || self.max_pending == 0
            || self.max_buffered == 0
            || self.max_buffered_bytes == 0
            || self.give_up_fetches == 0
        {
            return Err(Error::Config(
                "max_fetch, max_pending, max_buffered, max_buffered_bytes and give_up_fetches \
                 must be > 0"
                    .into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (p, _) in &self.start_offsets {
            if p.is_empty() || p.len() > 255 {
                return Err(Error::Config(format!(
                    "start offset for partition {p:?}: a partition name (its producer's \
                     address) is 1 to 255 bytes"
                )));
            }
            if !seen.insert(p) {
                return Err(Error::Config(format!(
                    "partition {p:?} is given two start offsets: give one"
                )));
            }
        }
        Ok(())
    }
}

/// Tower settings.
#[derive(Debug, Clone)]
pub struct TowerConfig {
    /// XSUB for node beacons. Default [`DEFAULT_TOWER_IN`].
    pub beacon_in: String,
    /// XPUB towards nodes. Default [`DEFAULT_TOWER_OUT`].
    pub beacon_out: String,
    /// Secure mode: the tower's secret certificate and the trust directory.
    pub security: Option<SecurityConfig>,
}

impl Default for TowerConfig {
    fn default() -> Self {
        Self {
            beacon_in: DEFAULT_TOWER_IN.into(),
            beacon_out: DEFAULT_TOWER_OUT.into(),
            security: None,
        }
    }
}

impl TowerConfig {
    /// Nodes name a tower by one host (`tcp://HOST:IN,OUT`, what
    /// `Tower::endpoint` prints from `beacon_in`), so `beacon_out` must be
    /// reachable there: bound to the same host, or to every interface.
    pub fn validate(&self) -> Result<()> {
        let host = |e: &str| split_tcp(e).map(|(h, _)| h.to_string());
        if let (Some(hin), Some(hout)) = (host(&self.beacon_in), host(&self.beacon_out)) {
            if hin != hout && !matches!(hout.as_str(), "*" | "0.0.0.0" | "[::]") {
                return Err(Error::Config(format!(
                    "beacon_out {:?} binds another host than beacon_in {:?}: nodes name a \
                     tower by one host (tcp://HOST:IN_PORT,OUT_PORT), so bind both on the same \
                     host (spelt the same), or beacon_out on every interface (tcp://*:PORT)",
                    self.beacon_out, self.beacon_in
                )));
            }
        }
        Ok(())
    }
}

/// A tower as a node names it: `tcp://HOST:IN,OUT` (both ports explicit, what
/// `Tower.endpoint` prints) or `tcp://HOST:IN` (OUT = IN + 1, so the C
/// reference's `tcp://host:5556` means 5556/5557).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TowerAddr {
    /// Where the node's beacon PUB connects (the tower's XSUB).
    pub beacon_in: String,
    /// Where the node's beacon SUB connects (the tower's XPUB).
    pub beacon_out: String,
    /// A secure tower's CURVE public key (`;curve=<Z85>` after the ports).
    pub key: Option<[u8; 32]>,
}

impl TowerAddr {
    pub fn parse(s: &str) -> Result<Self> {
        let full = s;
        let (s, key) = crate::security::split_keyed(s)?;
        let bad = || {
            Error::Config(format!(
                "bad tower endpoint {full:?}: use \"tcp://HOST:IN_PORT,OUT_PORT\" or \
                 \"tcp://HOST:IN_PORT\" (a secure tower's with \";curve=KEY\" after it)"
            ))
        };
        let rest = s.strip_prefix("tcp://").ok_or_else(bad)?;
        let (host, ports) = rest.rsplit_once(':').ok_or_else(bad)?;
        if host.is_empty() || host == "*" || host.contains('\0') {
            return Err(bad());
        }
        let port = |p: &str| p.parse::<u16>().ok().filter(|&p| p != 0);
        let (pin, pout) = match ports.split_once(',') {
            Some((a, b)) => (port(a).ok_or_else(bad)?, port(b).ok_or_else(bad)?),
            None => {
                let a = port(ports).ok_or_else(bad)?;
                (a, a.checked_add(1).ok_or_else(bad)?)
            }
        };
        Ok(Self {
            beacon_in: format!("tcp://{host}:{pin}"),
            beacon_out: format!("tcp://{host}:{pout}"),
            key,
        })
    }
}

/// A secure node names its towers and static peers with their keys, and an
/// insecure one without: a secure node never talks to an insecure one.
fn check_keyed(what: &str, endpoint: &str, keyed: bool, secure: bool) -> Result<()> {
    match (keyed, secure) {
        (false, true) => Err(Error::Config(format!(
            "{what} {endpoint:?} has no key, and this node is secure (cert and trust \
             given): name it as tcp://HOST:PORT;curve=KEY (a secure tower's endpoint \
             carries it)"
        ))),
        (true, false) => Err(Error::Config(format!(
            "{what} {endpoint:?} is a secure node's (it carries a CURVE key), and this node \
             is not: give it cert and trust"
        ))),
        _ => Ok(()),
    }
}

/// Checks a `tcp://HOST:PORT` (or other transport) endpoint to bind enough
/// to give a clear error before ZeroMQ's terse one (or the zmq crate's
/// panic, for a NUL byte). Port 0 or `*` picks a free port.
pub fn check_endpoint(what: &str, e: &str) -> Result<()> {
    check_any(what, e, true)
}

/// A topic or partition name as the wire carries it: 1 to 255 bytes (no
/// node could answer for another, and a reader would wait out its timeout).
pub fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(Error::Config(format!(
            "{what} must be 1 to 255 bytes, got {} bytes",
            name.len()
        )));
    }
    Ok(())
}

/// A host for beacons (`advertise_host`): what peers connect to as
/// `tcp://HOST:PORT`. A name or IPv4 address (an ASCII letter or digit, then
/// letters, digits, '.', '-' or '_'), an IPv6 address in brackets (`[::1]`,
/// `[fe80::1%eth0]`), or empty to let the tower put in the TCP peer address.
/// At most 255 bytes. A wildcard (`*`, `0.0.0.0`, `[::]`) names no host a
/// peer could reach.
pub fn check_host(what: &str, h: &str) -> Result<()> {
    let name_char = |c: char| c.is_ascii_alphanumeric() || ".-_".contains(c);
    let name = h.starts_with(|c: char| c.is_ascii_alphanumeric()) && h.chars().all(name_char);
    let ipv6 = h
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .is_some_and(|inner| {
            let (addr, zone) = match inner.split_once('%') {
                Some((a, z)) => (a, Some(z)),
                None => (inner, None),
            };
            addr.parse::<std::net::Ipv6Addr>()
                .is_ok_and(|a| !a.is_unspecified())
                && zone.is_none_or(|z| !z.is_empty() && z.chars().all(name_char))
        });
    let wildcard = h == "0.0.0.0";
    if h.len() > 255 || wildcard || !(h.is_empty() || name || ipv6) {
        return Err(Error::Config(format!(
            "{what} must be a host name or address peers can reach (e.g. \"10.0.0.5\", \
             \"node1.example\", \"[::1]\"; no scheme or port, at most 255 bytes; \"\" lets \
             the tower use the TCP peer address), got {h:?}"
        )));
    }
    Ok(())
}

/// [`check_endpoint`] for an endpoint to connect to: it needs the port.
pub fn check_peer(e: &str) -> Result<()> {
    let (ep, _) = crate::security::split_keyed(e)?;
    check_any("peer", ep, false)
}

fn check_any(what: &str, e: &str, bind: bool) -> Result<()> {
    let ok = !e.contains('\0')
        && match e.split_once("://") {
            Some(("tcp", rest)) => rest.rsplit_once(':').is_some_and(|(h, p)| {
                !h.is_empty()
                    && match p {
                        "*" => bind,
                        _ => p.parse::<u16>().is_ok_and(|p| bind || p != 0),
                    }
            }),
            Some(("ipc" | "inproc", rest)) => !rest.is_empty(),
            _ => false,
        };
    if ok {
        Ok(())
    } else if bind {
        Err(Error::Config(format!(
            "bad {what} endpoint {e:?}: use \"tcp://HOST:PORT\" (port 0 or * = ephemeral)"
        )))
    } else {
        Err(Error::Config(format!(
            "bad {what} endpoint {e:?}: use \"tcp://HOST:PORT\", the port the peer is bound \
             to (1-65535)"
        )))
    }
}

/// `tcp://h:0` → `tcp://h:*` (ZeroMQ's spelling of "pick a free port").
pub fn bind_spelling(e: &str) -> String {
    match e.strip_suffix(":0") {
        Some(head) if e.starts_with("tcp://") => format!("{head}:*"),
        _ => e.to_string(),
    }
}

/// Host and port of a bound `tcp://host:port` endpoint.
pub fn split_tcp(e: &str) -> Option<(&str, u16)> {
    let rest = e.strip_prefix("tcp://")?;
    let (h, p) = rest.rsplit_once(':')?;
    Some((h, p.parse().ok()?))
}

#[cfg(test)]
mod tests;
