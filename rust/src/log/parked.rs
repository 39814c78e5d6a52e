//! Parked partitions: those with no record left, kept as their next offset in
//! one registry file instead of a directory with an empty segment each.
//!
//! Every Spark task and every producer run is a new partition, and retention
//! empties each once its producer is gone. The partition keeps its next
//! offset (a store that forgot it would FETCH it back from a peer that still
//! holds it, or, when none does, start it at the first record it gets), but it needs
//! nothing else: no segment, no index, no directory, no descriptor, no
//! [`super::partition::Partition`]. A store that has seen a million
//! partitions would otherwise hold three million files and directories, and
//! open them all at start.
//!
//! A parked partition is forgotten `forget_parked_hours` after it was parked
//! ([`super::LogConfig::forget_parked_hours`]), so that the registry does not
//! grow with every task ever run.
//!
//! `ROOT/.parked` is append-only, one line per parking:
//!
//! ```text
//! <escaped topic> <partition> <next offset> <parked at, ms since the epoch> <crc32c of what precedes, 8 hex digits>\n
//! ```
//!
//! A line without the time (written before the log forgot parked
//! partitions) counts as parked when it is read.
//!
//! In memory ([`Parked`]) a parked partition named by a producer's UUID
//! takes about 50 bytes: topics are kept once, addresses as two numbers.
//!
//! A partition directory that exists wins over its lines (the partition was
//! appended to again after it was parked); of several lines, the last one
//! wins (offsets only grow while the log remembers a partition, but one
//! forgotten and made again may start lower). A line that does not parse or
//! check (a torn append) is left out. The file is rewritten without stale
//! lines at open, and when stale lines outnumber the parked partitions.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::config::{IoOp, LogConfig};
use super::error::{LogError, Result};
use super::format::{check_partition_name, escape_name, unescape_name};
use super::io;

/// Name of the registry in the log's root (not a valid escaped topic name).
pub const PARKED_FILE: &str = ".parked";

/// A Dafka address (a producer's UUID, 32 hex digits) as two numbers.
type Bits = (u64, u64);

/// `name` as an address of one case (`true`: lower case), if it is one: 32
/// hex digits whose letters are all upper case, or all lower case.
fn pack(name: &str) -> Option<(bool, Bits)> {
    let b = name.as_bytes();
    if b.len() != 32 || !b.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let upper = b.iter().any(|c| matches!(c, b'A'..=b'F'));
    let lower = b.iter().any(|c| matches!(c, b'a'..=b'f'));
    if upper && lower {
        return None;
    }
    let n = u128::from_str_radix(name, 16).ok()?;
    // The two halves of the number (truncation intended).
    Some((lower, ((n >> 64) as u64, n as u64)))
}

/// The name [`pack`] made `bits` of.
fn unpack(lower: bool, (hi, lo): Bits) -> String {
    if lower {
        format!("{hi:016x}{lo:016x}")
    } else {
        format!("{hi:016X}{lo:016X}")
    }
}

/// A parked partition: its next offset, and when it was parked (ms since the
/// epoch, by the log's clock).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Spot {
    pub next: u64,
    pub at: u64,
}

/// One topic's parked partitions. Addresses take 32 bytes a partition (key
/// and [`Spot`], no allocation): every Spark task and producer run leaves one
/// parked partition behind.
#[derive(Debug, Default, Clone)]
struct TopicParked {
    name: Vec<u8>,
    upper: FxHashMap<Bits, Spot>,
    lower: FxHashMap<Bits, Spot>,
    /// Names that are not addresses (tests, hand-made producers).
    others: FxHashMap<Box<str>, Spot>,
}

impl TopicParked {
    fn len(&self) -> usize {
        self.upper.len() + self.lower.len() + self.others.len()
    }

    fn get(&self, partition: &str) -> Option<Spot> {
        match pack(partition) {
            Some((false, bits)) => self.upper.get(&bits).copied(),
            Some((true, bits)) => self.lower.get(&bits).copied(),
            None => self.others.get(partition).copied(),
        }
    }

    /// Sets the partition's spot; true if it was not parked before.
    fn set(&mut self, partition: &str, spot: Spot) -> bool {
        match pack(partition) {
            Some((false, bits)) => self.upper.insert(bits, spot).is_none(),
            Some((true, bits)) => self.lower.insert(bits, spot).is_none(),
            None => self.others.insert(partition.into(), spot).is_none(),
        }
    }

    fn remove(&mut self, partition: &str) -> Option<Spot> {
        match pack(partition) {
            Some((false, bits)) => self.upper.remove(&bits),
            Some((true, bits)) => self.lower.remove(&bits),
            None => self.others.remove(partition),
        }
    }

    /// Keeps the partitions whose spot `keep` accepts; returns how many went.
    fn retain(&mut self, mut keep: impl FnMut(&Spot) -> bool) -> usize {
        let before = self.len();
        self.upper.retain(|_, s| keep(s));
        self.lower.retain(|_, s| keep(s));
        self.others.retain(|_, s| keep(s));
        before - self.len()
    }

    /// (partition, spot), in no order.
    fn iter(&self) -> impl Iterator<Item = (String, Spot)> + '_ {
        let upper = self.upper.iter().map(|(b, s)| (unpack(false, *b), *s));
        let lower = self.lower.iter().map(|(b, s)| (unpack(true, *b), *s));
        let others = self.others.iter().map(|(p, s)| (p.to_string(), *s));
        upper.chain(lower).chain(others)
    }
}

/// (topic, partition name) → [`Spot`], for every parked partition. A store
/// keeps them until `forget_parked_hours` passed (see the module's note), so
/// they are kept small: topics once each, addresses as numbers.
#[derive(Debug, Clone)]
pub(crate) struct Parked {
    topics: Vec<TopicParked>,
    /// Topic name → index in `topics` (never removed: topics are few).
    ids: FxHashMap<Vec<u8>, usize>,
    len: usize,
    /// No spot was parked before this (a bound: removals leave it lower),
    /// so that [`Parked::forget`] does not walk every entry at every check.
    oldest: u64,
}

impl Default for Parked {
    fn default() -> Self {
        Parked {
            topics: Vec::new(),
            ids: FxHashMap::default(),
            len: 0,
            oldest: u64::MAX,
        }
    }
}

impl Parked {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn topic(&self, topic: &[u8]) -> Option<&TopicParked> {
        self.ids.get(topic).map(|&i| &self.topics[i])
    }

    /// The partition's next offset, if it is parked.
    pub fn get(&self, topic: &[u8], partition: &str) -> Option<u64> {
        self.spot(topic, partition).map(|s| s.next)
    }

    pub fn spot(&self, topic: &[u8], partition: &str) -> Option<Spot> {
        self.topic(topic)?.get(partition)
    }

    pub fn contains(&self, topic: &[u8], partition: &str) -> bool {
        self.spot(topic, partition).is_some()
    }

    /// The partition stands at `spot` from now on.
    pub fn insert(&mut self, topic: &[u8], partition: &str, spot: Spot) {
        let i = match self.ids.get(topic) {
            Some(&i) => i,
            None => {
                self.topics.push(TopicParked {
                    name: topic.to_vec(),
                    ..TopicParked::default()
                });
                self.ids.insert(topic.to_vec(), self.topics.len() - 1);
                self.topics.len() - 1
            }
        };
        self.len += usize::from(self.topics[i].set(partition, spot));
        self.oldest = self.oldest.min(spot.at);
    }

    pub fn remove(&mut self, topic: &[u8], partition: &str) -> Option<u64> {
        let i = *self.ids.get(topic)?;
        let s = self.topics[i].remove(partition);
        self.len -= usize::from(s.is_some());
        s.map(|s| s.next)
    }

    /// Forgets every partition parked at or before `before` (ms since the
    /// epoch); returns how many. Walks the entries only when one may be due.
    pub fn forget(&mut self, before: u64) -> usize {
        if self.oldest > before {
            return 0;
        }
        let mut n = 0;
        let mut oldest = u64::MAX;
        for t in &mut self.topics {
            n += t.retain(|s| {
                let keep = s.at > before;
                if keep {
                    oldest = oldest.min(s.at);
                }
                keep
            });
        }
        self.len -= n;
        self.oldest = oldest;
        n
    }

    /// The topics with a partition parked, in no order.
    pub fn topics(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.topics
            .iter()
            .filter(|t| t.len() > 0)
            .map(|t| t.name.as_slice())
    }

    /// (topic, partition, spot) of every parked partition, or of one
    /// topic's, in no order.
    pub fn iter<'a>(
        &'a self,
        topic: Option<&[u8]>,
    ) -> impl Iterator<Item = (&'a [u8], String, Spot)> + 'a {
        let only = topic.map(|t| self.ids.get(t).copied());
        self.topics
            .iter()
            .enumerate()
            .filter(move |(i, _)| only.is_none_or(|o| o == Some(*i)))
            .flat_map(|(_, t)| t.iter().map(|(p, s)| (t.name.as_slice(), p, s)))
    }

    /// Every entry, sorted (for tests and comparisons).
    pub fn sorted(&self) -> Vec<(Vec<u8>, String, Spot)> {
        let mut v: Vec<_> = self
            .iter(None)
            .map(|(t, p, s)| (t.to_vec(), p, s))
            .collect();
        v.sort_unstable();
        v
    }
}

impl PartialEq for Parked {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.sorted() == other.sorted()
    }
}

/// What [`load`] found in the registry.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub parked: Parked,
    /// Lines in the file, good or not.
    pub lines: usize,
    /// Lines that did not parse or check, or a last line without its newline.
    pub bad: usize,
    /// Good lines without their parking time (the older form).
    pub untimed: usize,
}

pub(crate) fn path(root: &Path) -> PathBuf {
    root.join(PARKED_FILE)
}

fn line_crc(body: &str) -> u32 {
    crc32c::crc32c(body.as_bytes())
}

/// One registry line, newline included.
pub(crate) fn encode(topic: &[u8], partition: &str, spot: Spot) -> Result<String> {
    let t = escape_name(topic).map_err(LogError::Invalid)?;
    let body = format!("{t} {partition} {} {}", spot.next, spot.at);
    Ok(format!("{body} {:08x}\n", line_crc(&body)))
}

/// The entry of one line (without its newline), if it is whole and checks:
/// topic, partition, next offset and, unless the line is of the form
/// without it, when it was parked.
pub(crate) fn decode(line: &str) -> Option<(Vec<u8>, &str, u64, Option<u64>)> {
    let (body, crc) = line.rsplit_once(' ')?;
    if crc.len() != 8 || u32::from_str_radix(crc, 16).ok()? != line_crc(body) {
        return None;
    }
    let mut it = body.split(' ');
    let (t, p, n) = (it.next()?, it.next()?, it.next()?);
    let at = match it.next() {
        Some(at) => Some(at.parse().ok()?),
        None => None,
    };
    if it.next().is_some() || check_partition_name(p).is_err() {
        return None;
    }
    Some((unescape_name(t)?, p, n.parse().ok()?, at))
}

/// Reads the registry of the log at `root` (empty when there is none); a
/// line without its parking time counts as parked at `now`.
pub(crate) fn load(root: &Path, now: u64) -> Result<Loaded> {
    let path = path(root);
    let text = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(e) => return Err(LogError::io("read", &path, e)),
    };
    let mut out = Loaded::default();
    let whole = text.ends_with(b"\n");
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let n = lines.len();
    for (i, raw) in lines.into_iter().enumerate() {
        out.lines += 1;
        let entry = std::str::from_utf8(raw).ok().and_then(decode);
        match entry {
            Some((t, p, next, at)) if whole || i + 1 < n => {
                out.untimed += usize::from(at.is_none());
                let at = at.unwrap_or(now);
                out.parked.insert(&t, p, Spot { next, at });
            }
            _ => out.bad += 1,
        }
    }
    if out.bad > 0 {
        tracing::warn!(
            "{}: {} line(s) torn or damaged were left out",
            path.display(),
            out.bad
        );
    }
    Ok(out)
}

/// Appends `lines` (from [`encode`]) to the registry and fdatasyncs it (and
/// the root, when it created the file).
pub(crate) fn append(cfg: &LogConfig, root: &Path, lines: &str) -> Result<()> {
    let path = path(root);
    let created = !path.exists();
    cfg.fail(IoOp::Write, &path)
        .map_err(|e| LogError::io("write", &path, e))?;
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| LogError::io("open", &path, e))?;
    f.write_all(lines.as_bytes())
        .map_err(|e| LogError::io("write", &path, e))?;
    io::sync_data(cfg, &f, &path)?;
    if created {
        io::sync_dir(cfg, root)?;
    }
    Ok(())
}

/// Replaces the registry by one line per entry of `parked`, then one per
/// entry of `extra` (partition, next offset: parked at `at`; later lines win),
/// atomically: a new file, synced, renamed over the old one. None at all: no
/// file. Returns the lines written.
pub(crate) fn rewrite(
    cfg: &LogConfig,
    root: &Path,
    parked: &Parked,
    extra: &[((Vec<u8>, String), u64)],
    at: u64,
) -> Result<usize> {
    let path = path(root);
    if parked.is_empty() && extra.is_empty() {
        io::remove(cfg, &path)?;
        io::sync_dir(cfg, root)?;
        return Ok(0);
    }
    let mut text = String::new();
    for (t, p, spot) in parked.iter(None) {
        text.push_str(&encode(t, &p, spot)?);
    }
    for ((t, p), next) in extra {
        text.push_str(&encode(t, p, Spot { next: *next, at })?);
    }
    let tmp = root.join(format!("{PARKED_FILE}.new"));
    let f = io::create(cfg, &tmp)?;
    io::write_at(cfg, &f, &tmp, text.as_bytes(), 0)?;
    io::sync_data(cfg, &f, &tmp)?;
    fs::rename(&tmp, &path).map_err(|e| LogError::io("rename", &tmp, e))?;
    io::sync_dir(cfg, root)?;
    Ok(parked.len() + extra.len())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    const AT: u64 = 1_700_000_000_000;

    fn spot(next: u64) -> Spot {
        Spot { next, at: AT }
    }

    #[test]
    fn a_line_round_trips_and_a_damaged_one_is_refused() {
        let line = encode(b"wea ther", "A1", Spot { next: 42, at: 7 }).unwrap();
        assert!(line.starts_with("wea%20ther A1 42 7 ") && line.ends_with('\n'));
        let body = line.trim_end_matches('\n');
        assert_eq!(
            decode(body),
            Some((b"wea ther".to_vec(), "A1", 42, Some(7)))
        );
        assert_eq!(decode(&body.replace("42", "43")), None, "CRC");
        assert_eq!(decode(&body[..body.len() - 1]), None, "torn");
        assert_eq!(decode(""), None);
        let bad_name = format!("t a/b 1 2 {:08x}", line_crc("t a/b 1 2"));
        assert_eq!(decode(&bad_name), None, "not a partition name");
        let five = format!("t A 1 2 3 {:08x}", line_crc("t A 1 2 3"));
        assert_eq!(decode(&five), None, "a field too many");
        let bad_time = format!("t A 1 x {:08x}", line_crc("t A 1 x"));
        assert_eq!(decode(&bad_time), None, "not a time");
        // The form without the time, as written before parked partitions
        // were forgotten.
        let old = format!("t A 1 {:08x}", line_crc("t A 1"));
        assert_eq!(decode(&old), Some((b"t".to_vec(), "A", 1, None)));
    }

    #[test]
    fn load_keeps_the_last_line_and_leaves_out_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LogConfig::default();
        let mut text = encode(b"t", "A", spot(5)).unwrap();
        text += &encode(b"t", "A", spot(9)).unwrap();
        text += &encode(b"t", "A", spot(7)).unwrap();
        // Without a time: parked when read.
        text += &format!("u B 3 {:08x}\n", line_crc("u B 3"));
        append(&cfg, dir.path(), &text).unwrap();
        let torn = encode(b"u", "C", spot(1)).unwrap();
        append(&cfg, dir.path(), torn.trim_end_matches('\n')).unwrap();
        let got = load(dir.path(), AT + 5).unwrap();
        assert_eq!(got.lines, 5);
        assert_eq!(got.bad, 1, "the last line has no newline");
        let mut want = parked(&[("t", "A", 7)]);
        want.insert(
            b"u",
            "B",
            Spot {
                next: 3,
                at: AT + 5,
            },
        );
        assert_eq!(got.parked, want);
        assert_eq!(rewrite(&cfg, dir.path(), &want, &[], 0).unwrap(), 2);
        let again = load(dir.path(), AT + 9).unwrap();
        assert_eq!((again.parked, again.lines, again.bad), (want.clone(), 2, 0));
        // Extra entries go after the parked ones and win over them.
        let extra = [
            ((b"u".to_vec(), "B".to_owned()), 8),
            ((b"v".to_vec(), "C".to_owned()), 1),
        ];
        assert_eq!(rewrite(&cfg, dir.path(), &want, &extra, AT).unwrap(), 4);
        let with_extra = load(dir.path(), 0).unwrap();
        let want_extra = parked(&[("t", "A", 7), ("u", "B", 8), ("v", "C", 1)]);
        assert_eq!((with_extra.parked, with_extra.lines), (want_extra, 4));
        assert_eq!(
            rewrite(&cfg, dir.path(), &Parked::default(), &[], 0).unwrap(),
            0
        );
        assert!(!path(dir.path()).exists());
    }

    #[test]
    fn forget_drops_what_was_parked_by_then_and_walks_only_when_due() {
        let mut p = Parked::default();
        assert_eq!(p.forget(u64::MAX), 0, "empty");
        p.insert(
            b"t",
            "ABCDEF0123456789ABCDEF0123456789",
            Spot { next: 5, at: 10 },
        );
        p.insert(
            b"t",
            "abcdef0123456789abcdef0123456789",
            Spot { next: 6, at: 20 },
        );
        p.insert(b"u", "name", Spot { next: 7, at: 30 });
        p.insert(b"u", "late", Spot { next: 8, at: 40 });
        assert_eq!(p.forget(9), 0);
        assert_eq!(p.forget(20), 2, "at or before");
        assert_eq!(p.len(), 2);
        assert_eq!(p.get(b"t", "ABCDEF0123456789ABCDEF0123456789"), None);
        assert_eq!(p.get(b"u", "name"), Some(7));
        assert_eq!(p.oldest, 30, "the oldest left");
        // Parked again later: it stays.
        p.insert(b"u", "name", Spot { next: 9, at: 50 });
        assert_eq!(p.forget(45), 1);
        assert_eq!(
            p.sorted(),
            [(b"u".to_vec(), "name".to_owned(), Spot { next: 9, at: 50 })]
        );
        assert_eq!(p.topics().collect::<Vec<_>>(), [b"u".as_slice()]);
        assert_eq!(p.forget(50), 1);
        assert!(p.is_empty());
        assert_eq!(p.oldest, u64::MAX);
    }

    fn parked(entries: &[(&str, &str, u64)]) -> Parked {
        let mut p = Parked::default();
        for (t, n, next) in entries {
            p.insert(t.as_bytes(), n, spot(*next));
        }
        p
    }

    #[test]
    fn addresses_of_one_case_pack_and_anything_else_stays_a_name() {
        let upper = "0123456789ABCDEF0123456789ABCDEF";
        let lower = "0123456789abcdef0123456789abcdef";
        let digits = "01234567890123456789012345678901";
        for (name, case) in [
            (upper, Some(false)),
            (lower, Some(true)),
            (digits, Some(false)),
        ] {
            let (l, bits) = pack(name).expect(name);
            assert_eq!(Some(l), case, "{name}");
            assert_eq!(unpack(l, bits), name);
        }
        for name in [
            "0123456789ABCDEF0123456789abcdef", // both cases
            "0123456789ABCDEF0123456789ABCDE",  // 31 digits
            "0123456789ABCDEF0123456789ABCDEF0",
            "+123456789ABCDEF0123456789ABCDEF",
            "0123456789ABCDEF0123456789ABCDEG",
            "A",
            "",
        ] {
            assert_eq!(pack(name), None, "{name}");
        }
    }

    #[test]
    fn one_address_in_two_cases_is_two_partitions() {
        let mut p = Parked::default();
        p.insert(b"t", "ABCDEF0123456789ABCDEF0123456789", spot(5));
        p.insert(b"t", "abcdef0123456789abcdef0123456789", spot(7));
        p.insert(b"u", "ABCDEF0123456789ABCDEF0123456789", spot(9));
        assert_eq!(p.len(), 3);
        assert_eq!(p.get(b"t", "ABCDEF0123456789ABCDEF0123456789"), Some(5));
        assert_eq!(p.get(b"t", "abcdef0123456789abcdef0123456789"), Some(7));
        assert_eq!(p.get(b"u", "ABCDEF0123456789ABCDEF0123456789"), Some(9));
        assert_eq!(p.get(b"t", "AbCdEf0123456789ABCDEF0123456789"), None);
        assert_eq!(p.get(b"v", "ABCDEF0123456789ABCDEF0123456789"), None);
        assert_eq!(p.remove(b"t", "abcdef0123456789abcdef0123456789"), Some(7));
        assert_eq!(p.remove(b"t", "abcdef0123456789abcdef0123456789"), None);
        assert_eq!(p.len(), 2);
        assert_eq!(p.remove(b"t", "ABCDEF0123456789ABCDEF0123456789"), Some(5));
        let topics: Vec<&[u8]> = p.topics().collect();
        assert_eq!(
            topics,
            [b"u".as_slice()],
            "a topic with nothing parked is not listed"
        );
    }

    /// A name the property test draws: an address of either case, a mixed
    /// one, or a short name, from a small pool so that keys repeat.
    fn any_name() -> impl Strategy<Value = String> {
        (0u8..4, 0u128..6).prop_map(|(kind, n)| {
            let hex = format!(
                "{:032X}",
                n.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
            );
            match kind {
                0 => hex,
                1 => hex.to_lowercase(),
                2 => format!("{}{}", &hex[..16], hex[16..].to_lowercase()),
                _ => format!("p{n}"),
            }
        })
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, String, Spot),
        Remove(u8, String),
        Forget(u64),
    }

    fn any_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..3, any_name(), 0u64..1000, 0u64..100)
                .prop_map(|(t, n, next, at)| Op::Insert(t, n, Spot { next, at })),
            2 => (0u8..3, any_name()).prop_map(|(t, n)| Op::Remove(t, n)),
            1 => (0u64..100).prop_map(Op::Forget),
        ]
    }

    proptest! {
        /// The compact map answers as a plain ordered map of the same
        /// operations does, names and spots back exactly as given.
        #[test]
        fn parked_behaves_as_a_plain_map(ops in proptest::collection::vec(any_op(), 0..200)) {
            let mut model: BTreeMap<(Vec<u8>, String), Spot> = BTreeMap::new();
            let mut p = Parked::default();
            for op in ops {
                match op {
                    Op::Insert(t, n, x) => {
                        p.insert(&[t], &n, x);
                        model.insert((vec![t], n), x);
                    }
                    Op::Remove(t, n) => {
                        let got = p.remove(&[t], &n);
                        prop_assert_eq!(got, model.remove(&(vec![t], n)).map(|s| s.next));
                    }
                    Op::Forget(before) => {
                        let n = model.len();
                        model.retain(|_, s| s.at > before);
                        prop_assert_eq!(p.forget(before), n - model.len());
                    }
                }
                prop_assert_eq!(p.len(), model.len());
            }
            let want: Vec<(Vec<u8>, String, Spot)> =
                model.iter().map(|((t, n), x)| (t.clone(), n.clone(), *x)).collect();
            prop_assert_eq!(p.sorted(), want);
            for ((t, n), x) in &model {
                prop_assert_eq!(p.spot(t, n), Some(*x));
            }
            let mut topics: Vec<Vec<u8>> = p.topics().map(<[u8]>::to_vec).collect();
            topics.sort();
            let mut want_topics: Vec<Vec<u8>> = model.keys().map(|(t, _)| t.clone()).collect();
            want_topics.dedup();
            prop_assert_eq!(topics, want_topics);
            let one: Vec<_> = p.iter(Some(&[1])).map(|(t, _, _)| t.to_vec()).collect();
            prop_assert!(one.iter().all(|t| t == &[1]));
            prop_assert_eq!(one.len(), model.keys().filter(|(t, _)| t == &[1]).count());
        }
    }
}
