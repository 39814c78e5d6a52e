//! Tests of the segment store, one file per concern, beside the shared
//! helpers here: a small-segment config on a settable clock, values, and
//! the paths and records of the test partition.

mod damage;
mod format2;
mod io_errors;
mod model;
mod read_append;
mod recovery;
mod retention;
mod sync;

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::format::{FILE_HEADER_LEN, RECORD_HEADER_LEN};
use super::*;

const T: &[u8] = b"weather";
/// Bytes a plain value's body adds to it (format 2 stores bodies).
const W: usize = crate::meta::PLAIN_LEN;
const P: &str = "85E3C6EBDC7B4156AD9C43611EBC09CE";

struct Clock(Arc<AtomicU64>);

impl Clock {
    fn new(start: u64) -> Clock {
        Clock(Arc::new(AtomicU64::new(start)))
    }
    fn get(&self) -> crate::log::Clock {
        let c = self.0.clone();
        Arc::new(move || c.load(Ordering::SeqCst))
    }
    fn set(&self, v: u64) {
        self.0.store(v, Ordering::SeqCst);
    }
}

fn small(clock: &Clock) -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 64,
        clock: clock.get(),
        ..LogConfig::default()
    }
}

/// [`small`], opened read-only.
fn read_only(clock: &Clock) -> LogConfig {
    LogConfig {
        read_only: true,
        ..small(clock)
    }
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 13) as usize)).into_bytes()
}

fn seg_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn pdir(root: &Path) -> PathBuf {
    root.join("weather").join(P)
}

fn read_all(log: &Log) -> Vec<(u64, Vec<u8>)> {
    let first = log.first_offset(T, P).unwrap();
    log.read(T, P, first, usize::MAX, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|r| (r.offset, r.value))
        .collect()
}

/// Writes `n` records into one segment (big segments), closes, returns the
/// segment path and the byte position where the last record starts.
fn build(dir: &Path, n: u64) -> (PathBuf, u64, Vec<(u64, Vec<u8>)>) {
    let clock = Clock::new(5);
    let mut log = Log::open(
        dir,
        LogConfig {
            index_interval_bytes: 64,
            ..small(&clock)
        }
        .with_segment(1 << 20),
    )
    .unwrap();
    for i in 0..n {
        log.append(T, P, i, &value(i)).unwrap();
    }
    let all = read_all(&log);
    log.close().unwrap();
    let seg = seg_files(&pdir(dir), "log").pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    let last = len - (RECORD_HEADER_LEN + W + value(n - 1).len()) as u64;
    (seg, last, all)
}

impl LogConfig {
    fn with_segment(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }
}

fn read_all_from(root: &Path) -> Vec<(u64, Vec<u8>)> {
    let clock = Clock::new(5);
    let log = Log::open(root, read_only(&clock)).unwrap();
    read_all(&log)
}

/// The base offset of a segment file, from its name.
fn seg_base(p: &Path) -> u64 {
    p.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

/// Copies a directory tree.
fn copy_dir(from: &Path, to: &Path) {
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            fs::create_dir_all(&dst).unwrap();
            copy_dir(&e.path(), &dst);
        } else {
            fs::copy(e.path(), dst).unwrap();
        }
    }
}
