//! Consumer groups as the stores and the members tell them (docs/groups.md,
//! "Lag"): [`list_groups`] (every group the stores hold commits of, with
//! its topics) and [`describe_group`] (members, their partitions, commits,
//! heads and lag). Bounded reads like the others: a COMMIT-QUERY to every
//! store once one connected (its subscription to every COMMIT-QUERY shows
//! it), again at every store that connects and every [`ASK_AGAIN`]; for a
//! description also a GET-HEADS of every topic, and the group's
//! announcements heard for `listen` (members announce every heartbeat).
//! The round ends `listen` after the first store connected and [`SETTLE`]
//! after the last change; with no store within `timeout` it fails with
//! [`Error::CommitTimeout`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::group::commits::CommitTable;
use crate::group::registry::{entry_records, Description, Registry};
use crate::group::view::Part;
use crate::node::config::NodeConfig;
use crate::node::out::Out;
use crate::wire::group::{
    subscriptions, CommitQuery, GroupKind, GroupMessage, Subscriber, OFFSETS_LAST,
};
use crate::wire::{Message, Prefix};

use super::client::Client;

/// Asked again this often while the round lasts (an answer lost to a full
/// queue, a store that connected without our seeing it).
const ASK_AGAIN: Duration = Duration::from_secs(1);
/// The round ends this long after the last change.
const SETTLE: Duration = Duration::from_millis(300);

/// One group as [`list_groups`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    pub group: String,
    /// The topics it committed for.
    pub topics: Vec<String>,
    /// The partitions it committed.
    pub partitions: usize,
}

/// What a round heard.
struct Heard {
    registry: Registry,
    table: CommitTable,
    /// Next offset (head + 1) per partition.
    heads: BTreeMap<Part, u64>,
}

/// Every group the stores hold commits of, by name.
pub fn list_groups<E: From<Error>>(
    cfg: &NodeConfig,
    timeout: Duration,
    check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<Vec<GroupSummary>, E> {
    // A store holding no commit does not answer: listen past one more ask.
    let heard = ask(cfg, None, timeout, ASK_AGAIN + SETTLE, check)?;
    let mut out = Vec::new();
    for g in heard.table.groups() {
        let rows = heard.table.commits(g, &[]);
        let topics: BTreeSet<String> = rows
            .iter()
            .map(|r| String::from_utf8_lossy(&r.topic).into_owned())
            .collect();
        out.push(GroupSummary {
            group: String::from_utf8_lossy(g).into_owned(),
            topics: topics.into_iter().collect(),
            partitions: rows.len(),
        });
    }
    Ok(out)
}

/// `group` described: its live members (heard for `listen`, at least the
/// members' heartbeat and a half), the partitions each holds, and per
/// partition the group's commit, the head the stores hold and the lag.
pub fn describe_group<E: From<Error>>(
    cfg: &NodeConfig,
    group: &str,
    timeout: Duration,
    listen: Duration,
    check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<Description, E> {
    crate::node::config::check_name(&format!("group {group:?}"), group)?;
    let heard = ask(cfg, Some(group.as_bytes()), timeout, listen, check)?;
    Ok(heard
        .registry
        .describe(group.as_bytes(), &heard.table, &heard.heads))
}

/// The round: `group`'s commits, heads and members (None: every group's
/// commits only).
fn ask<E: From<Error>>(
    cfg: &NodeConfig,
    group: Option<&[u8]>,
    timeout: Duration,
    listen: Duration,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<Heard, E> {
    let mut c = Client::open(cfg)?;
    let own = c.core.address.clone();
    let groups: Vec<&[u8]> = group.into_iter().collect();
    for prefix in subscriptions(Subscriber::Member, &own, &groups) {
        c.core.subscribe(&prefix)?;
    }
    let sequence = uuid::Uuid::new_v4().as_u64_pair().0;
    let start = Instant::now();
    let mut heard = Heard {
        registry: Registry::new(),
        table: CommitTable::new(),
        heads: BTreeMap::new(),
    };
    let every_query = Prefix::Group {
        kind: GroupKind::CommitQuery,
        key: b"",
    };
    let (mut first, mut changed, mut next_ask) = (None::<Instant>, start, None::<Instant>);
    // A group's question is answered by every store (empty if it holds
    // none of its commits): the round waits for one.
    let mut answered = group.is_none();
    loop {
        let now = Instant::now();
        if first.is_some_and(|f| now >= f + listen) && now >= changed + SETTLE && answered {
            return Ok(heard);
        }
        if now >= start + timeout {
            let what = if group.is_some() {
                "describe_group"
            } else {
                "list_groups"
            };
            return Err(Error::CommitTimeout {
                what,
                waited: timeout,
            }
            .into());
        }
        if next_ask.is_some_and(|t| now >= t) {
            c.core.send_group(&GroupMessage::CommitQuery(CommitQuery {
                group: group.unwrap_or(b""),
                address: &own,
                sequence,
                topics: Vec::new(),
            }))?;
            if group.is_some() {
                c.core.emit(&Out::GetHeads { topic: Vec::new() })?;
            }
            next_ask = Some(now + ASK_AGAIN);
        }
        let until = match first {
            Some(f) => (f + listen).max(changed + SETTLE).min(now + ASK_AGAIN),
            None => start + timeout,
        };
        let (mut joined, mut new_head, mut news) = (false, false, false);
        let ms = |at: Instant| u64::try_from(at.duration_since(start).as_millis()).unwrap_or(0);
        let Heard {
            registry,
            table,
            heads,
        } = &mut heard;
        c.step_any(
            until,
            &mut |p| joined |= p == every_query,
            &mut |m| {
                if let Message::DirectHead(h) = m {
                    if h.topic == own.as_slice() && group.is_some() {
                        let part = (h.subject.to_vec(), h.address.to_vec());
                        let next = h.sequence.saturating_add(1);
                        let at = heads.entry(part).or_insert(0);
                        new_head |= next > *at;
                        *at = (*at).max(next);
                    }
                }
            },
            &mut |g| match g {
                GroupMessage::CommitOffsets(o)
                    if o.to == own.as_slice() && o.sequence == sequence =>
                {
                    answered |= o.flags & OFFSETS_LAST != 0;
                    for r in entry_records(o.group, &o.entries, 0) {
                        news |= table.merge_replica(&r);
                    }
                }
                GroupMessage::Member(m) if Some(m.group) == group => {
                    // Past the registry's caps: not shown.
                    let _ = registry.announcement(ms(Instant::now()), m);
                }
                _ => {}
            },
        )?;
        let now = Instant::now();
        if joined {
            first.get_or_insert(now);
            next_ask = Some(now);
            changed = now;
        } else if news || new_head {
            changed = now;
        }
        heard.registry.expire(ms(now));
        check()?;
    }
}
