//! The metric families of a scrape: every [`Stats`] counter of every node
//! (`dafka_NAME`, labelled `kind` and `node`, and `topic` for a producer),
//! and a store's own figures (`dafka_store_*`). Read from atomics, then
//! encoded by `prometheus-client` (a collector over the figures read).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::Source;
use crate::node::stats::{Stats, SyncTimes};
use crate::node::store::StoreShared;
use crate::node::tower::NodeCounts;

/// The [`Stats`] counters that are levels (gauges), not counts.
const STATS_GAUGES: [&str; 3] = ["peers", "stalled_partitions", "partitions_active"];

/// One sample's value.
#[derive(Debug)]
enum Value {
    Count(u64),
    Level(u64),
    /// Seconds: the sum, the count, and per bucket (upper bound, count not
    /// cumulated; the last bound `f64::MAX`, +Inf).
    Histogram(f64, u64, Vec<(f64, u64)>),
}

type Labels = Vec<(&'static str, String)>;

#[derive(Debug)]
struct Family {
    name: String,
    help: String,
    samples: Vec<(Labels, Value)>,
}

/// The families of one scrape, in the order first met.
#[derive(Debug, Default)]
struct Families(Vec<Family>);

impl Families {
    fn add(&mut self, name: &str, help: &str, labels: &Labels, value: Value) {
        let i = match self.0.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.0.push(Family {
                    name: name.to_string(),
                    help: help.to_string(),
                    samples: Vec::new(),
                });
                self.0.len() - 1
            }
        };
        self.0[i].samples.push((labels.clone(), value));
    }
}

/// A label value as OpenMetrics quotes it (the encoder writes values as
/// given): backslash, double quote and newline escaped.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// The help text of a [`Stats`] counter (no quote or backslash: OpenMetrics
/// would need them escaped, and the encoder writes help as given).
fn stats_help(name: &str) -> String {
    format!("The {name} figure of the node's stats() (docs/metrics.md).")
}

fn add_stats(f: &mut Families, labels: &Labels, stats: &Stats) {
    for (name, v) in stats.snapshot() {
        let value = if STATS_GAUGES.contains(&name) {
            Value::Level(v)
        } else {
            Value::Count(v)
        };
        f.add(&format!("dafka_{name}"), &stats_help(name), labels, value);
    }
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Relaxed)
}

fn add_store(f: &mut Families, labels: &Labels, s: &StoreShared) {
    for (name, help, v) in s.counters.snapshot().named() {
        f.add(
            &format!("dafka_store_{name}"),
            help,
            labels,
            Value::Count(v),
        );
    }
    let counts = [
        (
            "storage_errors",
            "Storage errors seen (appends or syncs that failed).",
            &s.storage_errors,
        ),
        (
            "commits_taken",
            "Consumer-group COMMITs that moved a committed offset.",
            &s.commits_taken,
        ),
        (
            "commits_refused",
            "Consumer-group COMMITs refused (no live member, or a partition not claimed).",
            &s.commits_refused,
        ),
        (
            "commits_replicated",
            "Committed offsets moved by another store's commits.",
            &s.commits_replicated,
        ),
    ];
    for (name, help, a) in counts {
        f.add(
            &format!("dafka_store_{name}"),
            help,
            labels,
            Value::Count(load(a)),
        );
    }
    let failing = u64::from(s.failing.load(Relaxed));
    let levels = [
        ("open_files", "Segment files the log holds open.", load(&s.open_files)),
        ("partitions_active", "Partitions with protocol state beside the log's (work left, or a producer heard lately).", load(&s.active_partitions)),
        ("partitions_parked", "Partitions the log parked (no record left).", load(&s.parked_partitions)),
        ("partitions_damaged", "Partitions set aside because they could not be opened.", load(&s.damaged_partitions)),
        ("storage_error", "1 while a storage error stops the store ACKing, else 0.", failing),
        ("commit_rows", "Rows of the consumer groups' commit table.", load(&s.commit_rows)),
    ];
    for (name, help, v) in levels {
        f.add(
            &format!("dafka_store_{name}"),
            help,
            labels,
            Value::Level(v),
        );
    }
    if let Some(t) = &s.sync_times {
        let t = t.snapshot();
        let mut buckets: Vec<(f64, u64)> = SyncTimes::BOUNDS_MS
            .iter()
            .zip(t.buckets)
            .map(|(ms, n)| (ms / 1e3, n))
            .collect();
        buckets.push((f64::MAX, t.buckets[SyncTimes::BOUNDS_MS.len()]));
        let sum = t.micros as f64 / 1e6;
        let help = "How long the store's group commits (fdatasyncs) took, in seconds.";
        // The count is the buckets' (read one by one, apart from `t.count`,
        // which a sync between the reads would set apart from them).
        let count = t.buckets.iter().sum();
        let value = Value::Histogram(sum, count, buckets);
        f.add("dafka_store_sync_seconds", help, labels, value);
    }
}

/// A tower's nodes by kind: `dafka_tower_nodes`, labelled `node_kind`
/// (`kind` is the tower's own), and its refused announcements.
fn add_tower(f: &mut Families, labels: &Labels, t: &NodeCounts) {
    for (kind, n) in t.snapshot() {
        let mut l = labels.clone();
        l.push(("node_kind", kind.to_string()));
        let help = "Nodes the tower knows, by the kind they announced (unknown: none).";
        f.add("dafka_tower_nodes", help, &l, Value::Level(n));
    }
    f.add(
        "dafka_tower_announcements_refused",
        "Kind announcements of new nodes not kept: 16384 kinds were held.",
        labels,
        Value::Count(load(&t.announcements_refused)),
    );
}

fn collect(sources: &[Source]) -> Families {
    let mut f = Families::default();
    for s in sources {
        let mut labels: Labels = vec![("kind", s.kind.name().into()), ("node", escape(&s.node))];
        if let Some(t) = &s.topic {
            labels.push(("topic", escape(t)));
        }
        add_stats(&mut f, &labels, s.stats.stats());
        if let Some(store) = &s.store {
            add_store(&mut f, &labels, store);
        }
        if let Some(tower) = &s.tower {
            add_tower(&mut f, &labels, tower);
        }
    }
    f
}

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for fam in &self.0 {
            let ty = match fam.samples.first().map(|(_, v)| v) {
                Some(Value::Count(_)) => MetricType::Counter,
                Some(Value::Level(_)) => MetricType::Gauge,
                Some(Value::Histogram(..)) => MetricType::Histogram,
                None => continue,
            };
            let mut m = encoder.encode_descriptor(&fam.name, &fam.help, None, ty)?;
            for (labels, value) in &fam.samples {
                let mut e = m.encode_family(labels)?;
                match value {
                    Value::Count(v) => e.encode_counter::<NoLabelSet, _, u64>(v, None)?,
                    Value::Level(v) => e.encode_gauge(v)?,
                    Value::Histogram(sum, count, buckets) => {
                        e.encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)?
                    }
                }
            }
        }
        Ok(())
    }
}

/// The OpenMetrics text of `sources`.
pub(super) fn encode(sources: &[Source]) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collect(sources)));
    let mut text = String::new();
    // Writing to a String cannot fail, nor can the collector.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}
