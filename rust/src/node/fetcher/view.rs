//! The cluster view (docs/operations.md, "Cluster view"): [`cluster_view`]
//! listens to what the towers relay, and asks the stores what they hold.
//!
//! - Nodes: the beacons the towers relay (each node's address, endpoint and
//!   when its beacon was last relayed), heard for `listen` (a node beacons
//!   every `beacon_interval`). A node's kind is what it subscribes to on
//!   this client's XPUB once it heard our beacon: a store subscribes to the
//!   CONSUMER-HELLOs addressed to it (`W` + its address), a producer to its
//!   partition's ACKs and FETCHes (`A`, `K`, `F` + its address), a consumer
//!   to the STORE-HELLOs addressed to it (`L` + its address). Beacons carry
//!   no kind, and the C reference's nodes subscribe the same way, so this
//!   needs no change to discovery.
//! - Partitions: a PARTITIONS-QUERY (PROTOCOL.md, "Extensions") to every
//!   store once one connected (its subscription to every PARTITIONS-QUERY
//!   shows it), again at every store that connects and every [`ASK_AGAIN`];
//!   each store answers its partitions' first and next offsets and bytes.
//!   The round ends `listen` after a tower was first heard, once every
//!   store that connected answered and [`SETTLE`] passed with no new
//!   partition or store.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::error::{Error, Unanswered};
use crate::node::config::{check_name, NodeConfig};
use crate::wire::group::{
    subscriptions, GroupKind, GroupMessage, PartitionsQuery, Subscriber, PARTITIONS_LAST,
};
use crate::wire::{Kind, Prefix};

use super::client::Client;

/// Asked again this often while the round lasts.
const ASK_AGAIN: Duration = Duration::from_secs(1);
/// The round ends this long after the last new partition or store.
const SETTLE: Duration = Duration::from_millis(300);

/// What a node is, as its subscriptions tell (ordered: the first one that
/// shows wins, a store's read client subscribing as a consumer too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeKind {
    Store,
    Producer,
    Consumer,
}

impl NodeKind {
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Store => "store",
            NodeKind::Producer => "producer",
            NodeKind::Consumer => "consumer",
        }
    }
}

/// The address and kind a peer's subscription to our XPUB shows, if any.
fn kind_of<'a>(p: &Prefix<'a>) -> Option<(&'a [u8], NodeKind)> {
    let (kind, key) = match *p {
        Prefix::Messages { kind, key } if !key.is_empty() => (kind, key),
        _ => return None,
    };
    let k = match kind {
        Kind::ConsumerHello => NodeKind::Store,
        Kind::AddressedAck | Kind::Ack | Kind::Fetch => NodeKind::Producer,
        Kind::StoreHello => NodeKind::Consumer,
        _ => return None,
    };
    Some((key, k))
}

/// One node the view found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub address: String,
    /// None: its subscriptions did not show it (yet), or a tower relayed it
    /// and it never connected to us.
    pub kind: Option<NodeKind>,
    /// Where its XPUB is, as the towers relay it (None: a node that
    /// connected to us but whose beacon we did not hear).
    pub endpoint: Option<String>,
    /// Its CURVE public key in Z85 (secure clusters).
    pub key: Option<String>,
    /// How long ago the towers last relayed its beacon.
    pub last_heard: Option<Duration>,
}

/// One partition as one store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorePartition {
    pub store: String,
    pub topic: String,
    pub partition: String,
    /// The first offset it still holds.
    pub first: u64,
    /// Its next offset (last + 1).
    pub next: u64,
    /// Bytes of its records on the store's disk.
    pub bytes: u64,
}

/// What [`cluster_view`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// The towers asked, as configured.
    pub towers: Vec<String>,
    pub nodes: Vec<Node>,
    /// The stores that answered, by address.
    pub stores: Vec<String>,
    /// Every partition each store holds (of the topic asked).
    pub partitions: Vec<StorePartition>,
}

/// What the stores answered: (store, topic, partition) -> (first, next, bytes).
type Held = BTreeMap<(Vec<u8>, Vec<u8>, Vec<u8>), (u64, u64, u64)>;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The cluster as the towers relay it, heard for `listen`; with `topic`
/// (the empty one: every topic) also the partitions every store holds of
/// it. Fails with [`Error::Timeout`] when no tower was heard, or (asking
/// for partitions) no store answered, within `timeout`. A secure client
/// asking of a topic its certificate does not allow fails at once with
/// [`Error::Config`] (the stores would refuse the question).
pub fn cluster_view<E: From<Error>>(
    cfg: &NodeConfig,
    topic: Option<&str>,
    timeout: Duration,
    listen: Duration,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<ClusterView, E> {
    let named = topic.filter(|t| !t.is_empty());
    if let Some(t) = named {
        check_name(&format!("topic {t:?}"), t)?;
    }
    let mut c = Client::open(cfg)?;
    if let (Some(t), Some(sc)) = (named, &c.core.secure) {
        let allowed = sc.id.cert.topics().map_err(Error::from)?;
        if !allowed.allows(t.as_bytes()) {
            return Err(Error::Config(format!(
                "this certificate allows topics {allowed}, not {t:?}: the stores refuse \
                 its questions of that topic (use a certificate that allows it)"
            ))
            .into());
        }
    }
    let own = c.core.address.clone();
    for prefix in subscriptions(Subscriber::Viewer, &own, &[]) {
        c.core.subscribe(&prefix)?;
    }
    let sequence = uuid::Uuid::new_v4().as_u64_pair().0;
    let every_query = Prefix::Group {
        kind: GroupKind::PartitionsQuery,
        key: b"",
    };
    let start = Instant::now();
    let mut kinds: BTreeMap<Vec<u8>, NodeKind> = BTreeMap::new();
    let mut parts = Held::new();
    let mut answered: BTreeSet<Vec<u8>> = BTreeSet::new();
    let (mut joins, mut changed, mut next_ask) = (0usize, start, None::<Instant>);
    let mut last_join = start;
    let towers = !cfg.towers.is_empty();
    // When a tower was first heard (`listen` counts from there).
    let mut heard_at = (!towers).then_some(start);
    loop {
        let now = Instant::now();
        if heard_at.is_none() && c.core.disc.tower_heard() {
            heard_at = Some(now);
        }
        let heard = heard_at.is_some();
        // Every store that connected answered (or, a store that connected
        // twice counting twice, the last one connected a few asks ago).
        let all_answered = answered.len() >= joins || now >= last_join + 3 * ASK_AGAIN;
        let stores_done =
            topic.is_none() || (!answered.is_empty() && all_answered && now >= changed + SETTLE);
        if heard_at.is_some_and(|h| now >= h + listen) && stores_done {
            break;
        }
        if now >= start + timeout {
            // What was heard is shown; a store that connected and never
            // answered is left out.
            if heard && (topic.is_none() || !answered.is_empty()) {
                break;
            }
            return Err(Error::Timeout {
                topic: topic.unwrap_or_default().to_string(),
                unanswered: Unanswered::View { stores: heard },
                waited: timeout,
                towers_unheard: if heard {
                    Vec::new()
                } else {
                    cfg.towers.clone()
                },
            }
            .into());
        }
        if let (Some(t), Some(at)) = (topic, next_ask) {
            if now >= at {
                c.core
                    .send_group(&GroupMessage::PartitionsQuery(PartitionsQuery {
                        topic: t.as_bytes(),
                        address: &own,
                        sequence,
                    }))?;
                next_ask = Some(now + ASK_AGAIN);
            }
        }
        let (mut joined, mut news) = (0usize, false);
        c.step_any(
            start + timeout,
            &mut |p| {
                joined += usize::from(p == every_query);
                if let Some((address, k)) = kind_of(&p) {
                    let e = kinds.entry(address.to_vec()).or_insert(k);
                    *e = (*e).min(k);
                }
            },
            &mut |_| {},
            &mut |g| {
                let GroupMessage::Partitions(p) = g else {
                    return;
                };
                if p.to != own.as_slice() || p.sequence != sequence {
                    return;
                }
                for i in &p.parts {
                    let key = (p.address.to_vec(), i.topic.to_vec(), i.partition.to_vec());
                    // A new partition is news; a head that rose (a live
                    // producer) would keep the round from settling.
                    news |= parts.insert(key, (i.first, i.next, i.bytes)).is_none();
                }
                if p.flags & PARTITIONS_LAST != 0 {
                    news |= answered.insert(p.address.to_vec());
                }
            },
        )?;
        let now = Instant::now();
        if joined > 0 {
            joins += joined;
            last_join = now;
            next_ask = Some(now);
            changed = now;
        } else if news {
            changed = now;
        }
        check()?;
    }
    Ok(assemble(&c, cfg, kinds, parts, answered))
}

/// The view from what the round heard.
fn assemble(
    c: &Client,
    cfg: &NodeConfig,
    kinds: BTreeMap<Vec<u8>, NodeKind>,
    parts: Held,
    answered: BTreeSet<Vec<u8>>,
) -> ClusterView {
    let now = Instant::now();
    let mut nodes: BTreeMap<Vec<u8>, Node> = BTreeMap::new();
    for (uuid, ep, seen) in c.core.disc.table.peers() {
        let (endpoint, key) = match crate::security::split_keyed(ep) {
            Ok((plain, key)) => (
                plain.to_string(),
                key.map(|k| crate::security::cert::key_z85(&k)),
            ),
            Err(_) => (ep.to_string(), None),
        };
        nodes.insert(
            uuid.to_vec(),
            Node {
                address: text(uuid),
                kind: kinds.get(uuid).copied(),
                endpoint: Some(endpoint),
                key,
                last_heard: Some(now.saturating_duration_since(seen)),
            },
        );
    }
    for (address, kind) in kinds {
        nodes.entry(address.clone()).or_insert_with(|| Node {
            address: text(&address),
            kind: Some(kind),
            endpoint: None,
            key: None,
            last_heard: None,
        });
    }
    ClusterView {
        towers: cfg.towers.clone(),
        nodes: nodes.into_values().collect(),
        stores: answered.iter().map(|s| text(s)).collect(),
        partitions: parts
            .into_iter()
            .map(
                |((store, topic, partition), (first, next, bytes))| StorePartition {
                    store: text(&store),
                    topic: text(&topic),
                    partition: text(&partition),
                    first,
                    next,
                    bytes,
                },
            )
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::subscriptions as node_subscriptions;
    use crate::wire::NodeType;

    /// Each node type's own subscriptions, as they reach the client's XPUB,
    /// tell its kind and address (and nothing else does).
    #[test]
    fn a_node_s_subscriptions_tell_its_kind() {
        let a = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
        for (node, kind) in [
            (NodeType::Store, NodeKind::Store),
            (NodeType::Producer, NodeKind::Producer),
            (NodeType::Consumer, NodeKind::Consumer),
        ] {
            let found: BTreeSet<(Vec<u8>, NodeKind)> = node_subscriptions(node, a, &[b"t"])
                .iter()
                .filter_map(|s| kind_of(&Prefix::parse(s)))
                .map(|(address, k)| (address.to_vec(), k))
                .collect();
            // A store also subscribes as a fetcher (`D` + address): the
            // strongest kind wins, as in `cluster_view`.
            let best = found.iter().map(|(_, k)| *k).min();
            assert_eq!(best, Some(kind), "{node:?}");
            assert!(found.iter().all(|(address, _)| address == a), "{node:?}");
        }
        assert_eq!(kind_of(&Prefix::parse(b"R")), None);
        assert_eq!(kind_of(&Prefix::parse(b"F")), None);
    }
}
