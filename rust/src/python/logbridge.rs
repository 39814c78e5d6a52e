//! What the Rust core logs (`tracing`: a node that hears no tower, a
//! partition whose gap nobody answers, a store dropping an oversized record)
//! reaches Python's `logging`, as records of the `dafka` logger.
//!
//! Node threads never take the GIL to log (a thread joining a node with the
//! GIL held would deadlock with it): [`install`] makes a `tracing`
//! subscriber that formats each event into a bounded queue, and [`drain`]
//! hands the queue to `logging` from a thread that holds the GIL. Every call
//! into dafka that may wait drains it at each of its 100 ms slices (the
//! signal check), and `poll`, `flush` and `close` drain it on return, so a
//! warning shows while an application waits on a node.
//!
//! The subscriber is installed when the first node or read client is made
//! from Python, unless the process already has one: `dafka store` and
//! `dafka tower` log to stderr themselves (`crate::cli::init_logging`).
//! `RUST_LOG` selects what is logged (default: warnings and errors), and
//! the `dafka` logger's level what is shown.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, Once};

use pyo3::prelude::*;
use tracing::Level;
use tracing_subscriber::fmt::MakeWriter;

/// Messages kept until Python takes them; past it the oldest are dropped
/// (and counted in the next one shown).
const MAX_QUEUED: usize = 1000;

static QUEUE: Mutex<VecDeque<(Level, String)>> = Mutex::new(VecDeque::new());
/// Set while the queue holds something: `drain` is one load when empty.
static PENDING: AtomicBool = AtomicBool::new(false);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static INSTALL: Once = Once::new();

fn queue() -> std::sync::MutexGuard<'static, VecDeque<(Level, String)>> {
    QUEUE.lock().unwrap_or_else(|p| p.into_inner())
}

/// One event's formatted text, queued when the formatter drops it.
struct Line {
    level: Level,
    text: Vec<u8>,
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.text).trim_end().to_string();
        if text.is_empty() {
            return;
        }
        let mut q = queue();
        if q.len() >= MAX_QUEUED {
            q.pop_front();
            DROPPED.fetch_add(1, SeqCst);
        }
        q.push_back((self.level, text));
        PENDING.store(true, SeqCst);
    }
}

struct ToQueue;

impl<'a> MakeWriter<'a> for ToQueue {
    type Writer = Line;
    fn make_writer(&'a self) -> Line {
        Line {
            level: Level::INFO,
            text: Vec::new(),
        }
    }
    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Line {
        Line {
            level: *meta.level(),
            text: Vec::new(),
        }
    }
}

/// Sends what the core logs to Python's `logging` from now on, unless this
/// process logs elsewhere already. Idempotent.
pub(crate) fn install() {
    INSTALL.call_once(|| {
        if tracing::dispatcher::has_been_set() {
            return;
        }
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(ToQueue)
            .without_time()
            .with_level(false)
            .with_target(false)
            .with_ansi(false)
            .finish();
        // Another thread may have set one meanwhile: it wins, harmlessly.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// `logging`'s number for a `tracing` level.
fn level_number(level: Level) -> u32 {
    match level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// Hands what the core logged since the last call to the `dafka` logger.
/// `logging` handles its handlers' errors itself; what else a call raises
/// (a `KeyboardInterrupt` that Ctrl-C or `SIGTERM` raised inside it) is
/// returned, never swallowed, and the lines not handed over yet stay queued.
pub(crate) fn drain(py: Python<'_>) -> PyResult<()> {
    if !PENDING.load(SeqCst) {
        return Ok(());
    }
    let lines: Vec<(Level, String)> = {
        let mut q = queue();
        PENDING.store(false, SeqCst);
        q.drain(..).collect()
    };
    let logger = py
        .import("logging")?
        .call_method1("getLogger", ("dafka",))?;
    let dropped = DROPPED.swap(0, SeqCst);
    if dropped > 0 {
        let msg = format!("{dropped} earlier log messages of dafka's core were dropped");
        logger.call_method1("log", (30, msg))?;
    }
    let mut lines = lines.into_iter();
    while let Some((level, text)) = lines.next() {
        if let Err(e) = logger.call_method1("log", (level_number(level), text)) {
            let mut q = queue();
            for (i, line) in lines.enumerate() {
                q.insert(i, line);
            }
            PENDING.store(!q.is_empty(), SeqCst);
            return Err(e);
        }
    }
    Ok(())
}
