//! `dafka-tower`: a standalone tower, no Python needed.
//!
//! ```text
//! dafka-tower [--beacon-in tcp://*:5556] [--beacon-out tcp://*:5557]
//! ```
//!
//! Prints `tower tcp://HOST:IN,OUT` (what nodes pass in `towers=[...]`) and runs
//! until killed; exits 1 with the cause if the tower thread stops.

use std::time::Duration;

use _native::node::{Tower, TowerConfig};

const USAGE: &str = "usage: dafka-tower [--beacon-in ENDPOINT] [--beacon-out ENDPOINT]\n\
    defaults: --beacon-in tcp://*:5556 --beacon-out tcp://*:5557 (port 0 = any free port)";

fn main() {
    let mut cfg = TowerConfig::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let slot = match a.as_str() {
            "--beacon-in" => &mut cfg.beacon_in,
            "--beacon-out" => &mut cfg.beacon_out,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => {
                eprintln!("dafka-tower: unknown argument {other:?}\n{USAGE}");
                std::process::exit(2);
            }
        };
        match args.next() {
            Some(v) => *slot = v,
            None => {
                eprintln!("dafka-tower: {a} needs an endpoint\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    let tower = match Tower::new(cfg) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("dafka-tower: {e}");
            std::process::exit(1);
        }
    };
    println!("tower {}", tower.endpoint());
    loop {
        std::thread::sleep(Duration::from_millis(500));
        if let Err(e) = tower.check() {
            eprintln!("dafka-tower: {e}");
            std::process::exit(1);
        }
    }
}
