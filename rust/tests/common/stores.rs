//! Store helpers shared by the store test files: nodes with explicit peers,
//! topic `t`, values `record-N`.

#![allow(dead_code)] // each test binary uses its own share of them

use std::time::Duration;

use _native::node::store::{Store, StoreConfig};
use _native::node::*;

use super::tower;

pub fn peers(eps: &[&str]) -> NodeConfig {
    NodeConfig {
        peers: eps.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn store(dir: &std::path::Path, eps: &[&str]) -> Store {
    Store::open(
        dir,
        StoreConfig {
            node: peers(eps),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Checks that the store's one partition holds `value(0..n)`.
pub fn assert_holds_values(s: &Store, n: usize) {
    let recs = s
        .query(move |log| {
            let log = log.log().unwrap();
            log.read(b"t", &log.partitions(None)[0].partition, 0, n + 1, 1 << 30)
        })
        .unwrap()
        .unwrap();
    assert_eq!(recs.len(), n);
    assert!(recs
        .iter()
        .enumerate()
        .all(|(i, r)| r.value == value(i as u32)));
}

pub fn producer(min_acks: usize, eps: &[&str]) -> Producer {
    Producer::new(
        "t",
        ProducerConfig {
            node: peers(eps),
            min_acks,
            head_interval: Duration::from_millis(100),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A consumer of topic `t` from the earliest offset, with `s` as its only
/// peer (and connected to by it).
pub fn late_consumer(s: &Store) -> Consumer {
    let c = Consumer::new(
        &["t".to_string()],
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            node: peers(&[s.endpoint()]),
            ..Default::default()
        },
    )
    .unwrap();
    s.connect(c.endpoint()).unwrap();
    c
}

pub fn value(i: u32) -> Vec<u8> {
    format!("record-{i}").into_bytes()
}

/// A producer of topic `t` that finds stores through `node`'s towers.
pub fn discovering_producer(node: &NodeConfig) -> Producer {
    Producer::new(
        "t",
        ProducerConfig {
            node: node.clone(),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A store in `dir` that discovers through `node`'s towers.
pub fn discovering_store(dir: &std::path::Path, node: &NodeConfig) -> Store {
    Store::open(
        dir,
        StoreConfig {
            node: node.clone(),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A tower on ephemeral ports and a node config that discovers through it
/// (reads with the fetcher need discovery: stores connect to the client).
pub fn tower_and_node() -> (Tower, NodeConfig) {
    let t = tower();
    let node = NodeConfig {
        towers: vec![t.endpoint()],
        beacon_interval: Duration::from_millis(100),
        beacon_timeout: Duration::from_millis(2000),
        ..Default::default()
    };
    (t, node)
}

/// Retention of 8 KiB per partition applied to the log of the (closed) store
/// in `dir` with `cfg`: deletes the oldest segments of `part` of topic `t`;
/// returns its first offset held.
pub fn retain_8_kib(dir: &std::path::Path, cfg: &_native::log::LogConfig, part: &str) -> u64 {
    let mut log = _native::log::Log::open(
        dir.join("log"),
        _native::log::LogConfig {
            retain_bytes: Some(8192),
            ..cfg.clone()
        },
    )
    .unwrap();
    assert!(log.enforce_retention().unwrap() > 0);
    let first = log.first_offset(b"t", part).unwrap();
    log.close().unwrap();
    first
}
