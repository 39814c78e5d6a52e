//! Helpers shared by the integration tests: nodes on 127.0.0.1 ephemeral
//! ports, started through the public API.

#![allow(dead_code)] // each test binary uses its own share of them

pub mod stores;

use std::time::{Duration, Instant};

use _native::node::{Consumer, Delivery, Tower, TowerConfig};

/// Polls `c` until it has `n` records or `within` passed.
pub fn consume(c: &Consumer, n: usize, within: Duration) -> Vec<Delivery> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        got.extend(c.poll_many(10_000, Duration::from_millis(100)).unwrap());
    }
    got
}

/// A tower on ephemeral ports.
pub fn tower() -> Tower {
    Tower::new(TowerConfig {
        beacon_in: "tcp://127.0.0.1:0".into(),
        beacon_out: "tcp://127.0.0.1:0".into(),
        security: None,
    })
    .unwrap()
}

/// Waits until `cond` holds, failing the test after `within`.
pub fn wait_for(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
