//! The command lines of `dafka-store` and `dafka-tower`, shared by the
//! standalone binaries (`rust/src/bin/`) and the Python package's
//! `dafka store` / `dafka tower` (`rust/src/python/cli.rs`): the clap flags,
//! the TOML config file (with the C reference's key names as aliases), the
//! merge defaults < file < flags into [`StoreConfig`] / [`TowerConfig`], the
//! logging set-up, and the loops that run a node until asked to stop.
//!
//! Exit codes: 0 after a clean stop (and for `--help`/`--version`), 1 when the
//! node cannot start or fails while running, 2 for bad flags or a bad config
//! file.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::error::{Error, Result};
use crate::log::{FsyncPolicy, RecoveryPolicy};
use crate::metrics::Sources;
use crate::node::config::{SecurityConfig, TowerConfig, DEFAULT_TOWER_IN, DEFAULT_TOWER_OUT};
use crate::node::store::{Store, StoreConfig};
use crate::node::Tower;
use crate::wire::Dialect;

mod file;
pub use file::{
    BeaconSection, FileConfig, MetricsSection, NodeSection, SecuritySection, StoreSection,
    TowerSection,
};

/// The store directory when neither `DIR` nor `store.db` is given (the C
/// reference's `store/db` default).
pub const DEFAULT_STORE_DIR: &str = "storedb";
/// The tower a store uses when neither towers nor peers are configured: the
/// default tower on this machine.
pub const DEFAULT_TOWER: &str = "tcp://127.0.0.1:5556,5557";
/// Log filter when neither `--log-level`, the file's `log_level`, `verbose`
/// nor `RUST_LOG` says otherwise.
pub const DEFAULT_LOG_LEVEL: &str = "info";

/// How often the run loops look at the stop condition and the node's health.
const TICK: Duration = Duration::from_millis(50);
/// How often a running store logs its counters (at `debug`).
const STATS_EVERY: Duration = Duration::from_secs(10);

/// Exit code after a clean stop.
pub const EXIT_OK: i32 = 0;
/// Exit code when the node cannot start or fails.
pub const EXIT_FAILED: i32 = 1;
/// Exit code for bad flags or a bad config file.
pub const EXIT_USAGE: i32 = 2;

/// Secure mode from `--cert`/`--trust` over the file's `[security]`: both or
/// neither, else a config error saying so.
fn security_settings(
    cert: &Option<PathBuf>,
    trust: &Option<PathBuf>,
    file: &SecuritySection,
) -> Result<Option<SecurityConfig>> {
    let cert = cert.clone().or_else(|| file.cert.clone());
    let trust = trust.clone().or_else(|| file.trust.clone());
    match (cert, trust) {
        (None, None) => Ok(None),
        (Some(cert), Some(trust)) => Ok(Some(SecurityConfig { cert, trust })),
        (cert, _) => {
            let (has, lacks) = if cert.is_some() {
                ("cert", "trust")
            } else {
                ("trust", "cert")
            };
            Err(Error::Config(format!(
                "a {has} (--{has} or [security] {has}) without a {lacks}: secure mode needs \
                 both --cert (the node's NAME.key_secret) and --trust (the directory of \
                 trusted public certificates), or neither for plaintext"
            )))
        }
    }
}

/// `--metrics` over the file's `[metrics] listen`, checked.
fn metrics_listen(flag: &Option<String>, file: &FileConfig) -> Result<Option<String>> {
    let (what, listen) = match (flag, &file.metrics.listen) {
        (Some(l), _) => ("--metrics", l),
        (None, Some(l)) => ("[metrics] listen", l),
        (None, None) => return Ok(None),
    };
    crate::metrics::check_listen(what, listen)?;
    Ok(Some(listen.clone()))
}

/// Starts the metrics server of a binary's one node, if asked: the
/// server, and ` metrics=HOST:PORT` for the start-up line ("" if not).
fn serve_metrics(
    listen: &Option<String>,
    node: crate::metrics::Source,
) -> Result<(Option<crate::metrics::MetricsServer>, String)> {
    let Some(listen) = listen else {
        return Ok((None, String::new()));
    };
    let server = crate::metrics::MetricsServer::start(listen, Sources::Fixed(vec![node]))?;
    // Said in the start-up line, which comes first (no log line before it).
    let said = format!(" metrics={}", server.local_addr());
    Ok((Some(server), said))
}

fn load_file(path: Option<&Path>) -> Result<FileConfig> {
    path.map_or_else(|| Ok(FileConfig::default()), FileConfig::load)
}

/// `Some("debug")` when any `verbose` the binary reads is non-zero.
fn verbose_level(flags: &[Option<u8>]) -> Option<String> {
    flags
        .iter()
        .any(|v| v.unwrap_or(0) != 0)
        .then(|| "debug".to_string())
}

fn parse_named<T: std::str::FromStr<Err = String>>(key: &str, v: &str) -> Result<T> {
    v.parse()
        .map_err(|e: String| Error::Config(format!("{key}: {e}")))
}

fn ms(key: &str, v: u64) -> Result<Duration> {
    let d = Duration::from_millis(v);
    if v == 0 || d > crate::node::config::LONGEST {
        return Err(Error::Config(format!(
            "{key} must be at least 1 ms and at most {} ms (about 95 years)",
            crate::node::config::LONGEST.as_millis()
        )));
    }
    Ok(d)
}

// ---------------------------------------------------------------------------
// dafka-store
// ---------------------------------------------------------------------------

/// Flags of `dafka-store`. Each overrides the config file's key.
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "dafka-store",
    version,
    about = "A Dafka store: persists every partition it hears, ACKs what is durable, \
             answers FETCHes from late consumers and other stores. Runs until SIGINT or \
             SIGTERM, then syncs its log and exits 0.",
    after_help = "Prints one line to stdout once running: \
                  `dafka-store address=ADDRESS endpoint=ENDPOINT`; logs go to stderr."
)]
pub struct StoreArgs {
    /// The store's directory: its address in store.id, its log in log/
    /// [file: store.db; default: storedb]
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// A TOML config file; flags override its keys
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A tower to find peers through, tcp://HOST:IN[,OUT]; repeatable
    /// [default: tcp://127.0.0.1:5556,5557 unless a peer is given]
    #[arg(long = "tower", value_name = "ENDPOINT")]
    pub towers: Vec<String>,
    /// A static peer's XPUB endpoint; repeatable
    #[arg(long = "peer", value_name = "ENDPOINT")]
    pub peers: Vec<String>,
    /// Where the store's XPUB binds (port 0 or * = ephemeral) [default: tcp://127.0.0.1:*]
    #[arg(long, value_name = "ENDPOINT")]
    pub bind: Option<String>,
    /// Host announced in beacons; "" lets the tower use the TCP peer address [default: the bound host, or "" when bound to a wildcard]
    #[arg(long, value_name = "HOST")]
    pub advertise_host: Option<String>,
    /// The dialect the store sends in (it receives both) [default: rfc]
    #[arg(long, value_name = "rfc|zproto")]
    pub wire: Option<Dialect>,
    /// Beacon interval in ms [default: 1000]
    #[arg(long, value_name = "MS")]
    pub beacon_interval: Option<u64>,
    /// Forget a peer silent this long, ms [default: 4000]
    #[arg(long, value_name = "MS")]
    pub beacon_timeout: Option<u64>,
    /// When the store fdatasyncs: interval (group commit), always (whatever is unsynced, at every turn of its loop) or never (at shutdown only) [default: interval]
    #[arg(long, value_name = "POLICY")]
    pub fsync: Option<FsyncPolicy>,
    /// With fsync=interval: sync at most this often, ms [default: 1]
    #[arg(long, value_name = "MS")]
    pub flush_interval_ms: Option<u64>,
    /// With fsync=interval: sync once this many records are unsynced [default: 100000]
    #[arg(long, value_name = "N")]
    pub flush_messages: Option<u64>,
    /// Roll to a new segment at this size [default: 536870912]
    #[arg(long, value_name = "BYTES")]
    pub segment_bytes: Option<u64>,
    /// Delete segments whose newest record is older than this (the active one too: a finished producer's partition empties and is parked); 0 keeps them forever [default: 168]
    #[arg(long, value_name = "HOURS")]
    pub retain_hours: Option<u64>,
    /// Keep at most this many bytes per partition; 0 = no limit [default: 0]
    #[arg(long, value_name = "BYTES")]
    pub retain_bytes: Option<u64>,
    /// Forget a partition retention emptied (kept as its next offset in
    /// `.parked`) this long after; 0 keeps them for good [default: 720]
    #[arg(long, value_name = "HOURS")]
    pub forget_parked_hours: Option<u64>,
    /// Keep at most about this many partitions' segment files open, closing the
    /// least recently written; 0 = half the open-files limit [default: 0]
    #[arg(long, value_name = "N")]
    pub max_open_files: Option<usize>,
    /// Damage found at open: tolerate_tail_corruption or absolute_consistency
    /// [default: tolerate_tail_corruption]
    #[arg(long, value_name = "POLICY")]
    pub recovery: Option<RecoveryPolicy>,
    /// Records longer than this are dropped and counted [default: 67108864]
    #[arg(long, value_name = "BYTES")]
    pub max_record_bytes: Option<usize>,
    /// Repeat an unanswered FETCH after this long, ms [default: 500]
    #[arg(long, value_name = "MS")]
    pub fetch_retry_ms: Option<u64>,
    /// Secure mode: the store's secret certificate, NAME.key_secret from
    /// `dafka keygen --role store`; needs --trust [file: security.cert, relative to the
    /// file; default: none, plaintext]
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// Secure mode: the directory of trusted public certificates (NAME.key); needs
    /// --cert [file: security.trust]
    #[arg(long, value_name = "DIR")]
    pub trust: Option<PathBuf>,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics (port 0: any free one;
    /// the start-up line then says metrics=HOST:PORT) [file: metrics.listen; default: none]
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics: Option<String>,
    /// A tracing filter such as info, debug or dafka=trace [default: $RUST_LOG, else info]
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
}

/// What `dafka-store` runs with, after merging defaults, file and flags.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    pub dir: PathBuf,
    pub config: StoreConfig,
    /// `None`: `RUST_LOG`, else [`DEFAULT_LOG_LEVEL`].
    pub log_level: Option<String>,
    /// Where to serve metrics (`HOST:PORT`), if anywhere.
    pub metrics: Option<String>,
}

/// Merges defaults < `file` < `args` and validates the node settings.
pub fn store_settings(args: &StoreArgs, file: &FileConfig) -> Result<StoreSettings> {
    let mut cfg = StoreConfig::default();
    let (n, b, s) = (&file.node, &file.beacon, &file.store);

    let node = &mut cfg.node;
    if let Some(v) = args.bind.as_ref().or(n.bind.as_ref()) {
        node.bind = v.clone();
    }
    let file_towers = file.towers()?;
    node.towers = if args.towers.is_empty() {
        file_towers.unwrap_or_default()
    } else {
        args.towers.clone()
    };
    node.peers = if args.peers.is_empty() {
        n.peers.clone().unwrap_or_default()
    } else {
        args.peers.clone()
    };
    if node.towers.is_empty() && node.peers.is_empty() {
        node.towers.push(DEFAULT_TOWER.to_string());
    }
    node.wire = match (args.wire, &n.wire) {
        (Some(w), _) => w,
        (None, Some(w)) => parse_named("[node] wire", w)?,
        (None, None) => node.wire,
    };
    if let Some(h) = args.advertise_host.as_ref().or(n.advertise_host.as_ref()) {
        node.advertise_host = Some(h.clone());
    }
    if let Some(v) = n.sndhwm {
        node.sndhwm = v;
    }
    if let Some(v) = n.rcvhwm {
        node.rcvhwm = v;
    }
    if let Some(v) = args.beacon_interval.or(b.interval) {
        node.beacon_interval = ms("beacon interval", v)?;
    }
    if let Some(v) = args.beacon_timeout.or(b.timeout) {
        node.beacon_timeout = ms("beacon timeout", v)?;
    }
    node.security = security_settings(&args.cert, &args.trust, &file.security)?;
    node.validate()?;

    let log = &mut cfg.log;
    log.fsync = match (args.fsync, &s.fsync) {
        (Some(f), _) => f,
        (None, Some(f)) => parse_named("[store] fsync", f)?,
        (None, None) => log.fsync,
    };
    log.recovery = match (args.recovery, &s.recovery) {
        (Some(r), _) => r,
        (None, Some(r)) => parse_named("[store] recovery", r)?,
        (None, None) => log.recovery,
    };
    if let Some(v) = args.flush_interval_ms.or(s.flush_interval_ms) {
        log.flush_interval_ms = v;
    }
    if let Some(v) = args.flush_messages.or(s.flush_messages) {
        log.flush_messages = v;
    }
    if let Some(v) = args.segment_bytes.or(s.segment_bytes) {
        log.segment_bytes = v;
    }
    if let Some(v) = args.retain_hours.or(s.retain_hours) {
        log.retain_hours = (v != 0).then_some(v);
    }
    if let Some(v) = args.retain_bytes.or(s.retain_bytes) {
        log.retain_bytes = (v != 0).then_some(v);
    }
    if let Some(v) = args.forget_parked_hours.or(s.forget_parked_hours) {
        log.forget_parked_hours = (v != 0).then_some(v);
    }
    if let Some(v) = args.max_open_files.or(s.max_open_files) {
        log.max_open_files = (v != 0).then_some(v);
    }
    log.validate()?;

    if let Some(v) = args.max_record_bytes.or(s.max_record_bytes) {
        if v == 0 {
            return Err(Error::Config("max_record_bytes must be > 0".into()));
        }
        cfg.state.max_record_bytes = v;
    }
    if let Some(v) = args.fetch_retry_ms.or(s.fetch_retry_ms) {
        cfg.state.fetch_retry = ms("fetch_retry_ms", v)?;
    }

    let dir = args
        .dir
        .clone()
        .or_else(|| s.db.clone())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STORE_DIR));
    let log_level = args
        .log_level
        .clone()
        .or_else(|| file.log_level.clone())
        .or_else(|| verbose_level(&[b.verbose, s.verbose]));
    Ok(StoreSettings {
        dir,
        config: cfg,
        log_level,
        metrics: metrics_listen(&args.metrics, file)?,
    })
}

// ---------------------------------------------------------------------------
// dafka-tower
// ---------------------------------------------------------------------------

/// Flags of `dafka-tower`. Each overrides the config file's key.
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "dafka-tower",
    version,
    about = "A Dafka tower: relays beacons so producers, consumers and stores find each \
             other. Runs until SIGINT or SIGTERM, then exits 0.",
    after_help = "Prints one line to stdout once running: `dafka-tower endpoint=TOWER \
                  beacon_in=ENDPOINT beacon_out=ENDPOINT`, where TOWER is what nodes pass \
                  as a tower; logs go to stderr."
)]
pub struct TowerArgs {
    /// A TOML config file; flags override its keys
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// XSUB for node beacons (port 0 or * = ephemeral) [file: tower.sub_address;
    /// default: tcp://*:5556]
    #[arg(long, visible_alias = "sub-address", value_name = "ENDPOINT")]
    pub beacon_in: Option<String>,
    /// XPUB towards nodes [file: tower.pub_address; default: tcp://*:5557]
    #[arg(long, visible_alias = "pub-address", value_name = "ENDPOINT")]
    pub beacon_out: Option<String>,
    /// Secure mode: the tower's secret certificate, NAME.key_secret from
    /// `dafka keygen --role tower`; needs --trust [file: security.cert, relative to the
    /// file; default: none, plaintext]
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// Secure mode: the directory of trusted public certificates (NAME.key); needs
    /// --cert [file: security.trust]
    #[arg(long, value_name = "DIR")]
    pub trust: Option<PathBuf>,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics (port 0: any free one;
    /// the start-up line then says metrics=HOST:PORT) [file: metrics.listen; default: none]
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics: Option<String>,
    /// A tracing filter such as info, debug or dafka=trace [default: $RUST_LOG, else info]
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
}

/// What `dafka-tower` runs with.
#[derive(Debug, Clone)]
pub struct TowerSettings {
    pub config: TowerConfig,
    pub log_level: Option<String>,
    /// Where to serve metrics (`HOST:PORT`), if anywhere.
    pub metrics: Option<String>,
}

/// Merges defaults < `file` < `args` and checks both endpoints.
pub fn tower_settings(args: &TowerArgs, file: &FileConfig) -> Result<TowerSettings> {
    let t = &file.tower;
    let pick = |flag: &Option<String>, key: &Option<String>, default: &str| {
        flag.clone()
            .or_else(|| key.clone())
            .unwrap_or_else(|| default.to_string())
    };
    let config = TowerConfig {
        beacon_in: pick(&args.beacon_in, &t.beacon_in, DEFAULT_TOWER_IN),
        beacon_out: pick(&args.beacon_out, &t.beacon_out, DEFAULT_TOWER_OUT),
        security: security_settings(&args.cert, &args.trust, &file.security)?,
    };
    crate::node::config::check_endpoint("beacon_in", &config.beacon_in)?;
    crate::node::config::check_endpoint("beacon_out", &config.beacon_out)?;
    let log_level = args
        .log_level
        .clone()
        .or_else(|| file.log_level.clone())
        .or_else(|| verbose_level(&[t.verbose]));
    let metrics = metrics_listen(&args.metrics, file)?;
    Ok(TowerSettings {
        config,
        log_level,
        metrics,
    })
}

// ---------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------

/// Parses `args` (without the program name) for `bin_name`. `Err` carries the
/// exit code after clap printed help, the version or the usage error.
fn parse_args<P: Parser>(bin_name: &str, args: Vec<OsString>) -> std::result::Result<P, i32> {
    let argv = std::iter::once(OsString::from(bin_name)).chain(args);
    P::try_parse_from(argv).map_err(|e| {
        let _ = e.print();
        if e.use_stderr() {
            EXIT_USAGE
        } else {
            EXIT_OK
        }
    })
}

/// Sets up `tracing` to stderr: `level` if given, else `RUST_LOG`, else
/// [`DEFAULT_LOG_LEVEL`]. A process that already has a subscriber (a second
/// run inside one Python process) keeps it.
pub fn init_logging(level: Option<&str>) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter =
        match level {
            Some(l) => EnvFilter::try_new(l)
                .map_err(|e| Error::Config(format!("bad log level {l:?}: {e}")))?,
            None => EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_LEVEL)),
        };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
    Ok(())
}

/// Prints the machine-readable start-up line and flushes it.
fn announce(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn fail(bin_name: &str, code: i32, e: &dyn std::fmt::Display) -> i32 {
    eprintln!("{bin_name}: {e}");
    code
}

/// Runs `dafka-store` with `args` (without the program name) until `stop`
/// returns true, which it is asked every few tens of ms; returns the exit code.
pub fn store_main(bin_name: &str, args: Vec<OsString>, stop: &mut dyn FnMut() -> bool) -> i32 {
    let args: StoreArgs = match parse_args(bin_name, args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let settings = match load_file(args.config.as_deref()).and_then(|f| store_settings(&args, &f)) {
        Ok(s) => s,
        Err(e) => return fail(bin_name, EXIT_USAGE, &e),
    };
    if let Err(e) = init_logging(settings.log_level.as_deref()) {
        return fail(bin_name, EXIT_USAGE, &e);
    }
    match run_store(&settings, stop) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            tracing::error!("{e}");
            fail(bin_name, EXIT_FAILED, &e)
        }
    }
}

/// Opens the store, announces it, waits for `stop` (or the node failing),
/// then closes it: the log is synced before this returns `Ok`.
pub fn run_store(settings: &StoreSettings, stop: &mut dyn FnMut() -> bool) -> Result<()> {
    let dir = &settings.dir;
    let store = Store::open(dir, settings.config.clone())?;
    let (metrics, said) = match serve_metrics(&settings.metrics, store.metrics_source()) {
        Ok(m) => m,
        Err(e) => {
            let _ = store.close();
            return Err(e);
        }
    };
    announce(&format!(
        "dafka-store address={} endpoint={}{said}",
        store.address(),
        store.endpoint()
    ));
    let node = &settings.config.node;
    tracing::info!(
        "store {} in {} at {}, towers {:?}, peers {:?}, wire {}, fsync {:?} every {} ms",
        store.address(),
        dir.display(),
        store.endpoint(),
        node.towers,
        node.peers,
        node.wire.name(),
        settings.config.log.fsync,
        settings.config.log.flush_interval_ms,
    );
    tracing::debug!("settings: {:?}", settings.config);
    let shared = store.shared();
    let mut last_error: Option<String> = None;
    let mut next_stats = Instant::now() + STATS_EVERY;
    let outcome = loop {
        if stop() {
            break Ok(());
        }
        if let Err(e) = store.check() {
            break Err(e);
        }
        let err = shared
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if err != last_error {
            match &err {
                Some(e) => tracing::error!("storage error, not ACKing until it clears: {e}"),
                None => tracing::info!("storage error cleared, ACKing again"),
            }
            last_error = err;
        }
        if Instant::now() >= next_stats {
            tracing::debug!("{:?}", shared.counters.snapshot());
            next_stats += STATS_EVERY;
        }
        std::thread::sleep(TICK);
    };
    tracing::info!("stopping: syncing the log");
    drop(metrics);
    let closed = store.close();
    let c = shared.counters.snapshot();
    tracing::info!(
        "store stopped: {} records appended, {} duplicates, {} FETCHes answered, {} ACKs sent",
        c.appended,
        c.duplicates,
        c.fetches_answered,
        c.acks_sent
    );
    outcome.and(closed)
}

/// Runs `dafka-tower` with `args` (without the program name) until `stop`
/// returns true; returns the exit code.
pub fn tower_main(bin_name: &str, args: Vec<OsString>, stop: &mut dyn FnMut() -> bool) -> i32 {
    let args: TowerArgs = match parse_args(bin_name, args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let settings = match load_file(args.config.as_deref()).and_then(|f| tower_settings(&args, &f)) {
        Ok(s) => s,
        Err(e) => return fail(bin_name, EXIT_USAGE, &e),
    };
    if let Err(e) = init_logging(settings.log_level.as_deref()) {
        return fail(bin_name, EXIT_USAGE, &e);
    }
    match run_tower(&settings, stop) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            tracing::error!("{e}");
            fail(bin_name, EXIT_FAILED, &e)
        }
    }
}

/// Starts the tower, announces it, waits for `stop` (or the tower failing),
/// then closes it.
pub fn run_tower(settings: &TowerSettings, stop: &mut dyn FnMut() -> bool) -> Result<()> {
    let tower = Tower::new(settings.config.clone())?;
    let (metrics, said) = match serve_metrics(&settings.metrics, tower.metrics_source()) {
        Ok(m) => m,
        Err(e) => {
            let _ = tower.close();
            return Err(e);
        }
    };
    announce(&format!(
        "dafka-tower endpoint={} beacon_in={} beacon_out={}{said}",
        tower.endpoint(),
        tower.beacon_in(),
        tower.beacon_out()
    ));
    tracing::info!(
        "tower relaying beacons: in {} (at {}), out {} (at {})",
        settings.config.beacon_in,
        tower.beacon_in(),
        settings.config.beacon_out,
        tower.beacon_out()
    );
    let outcome = loop {
        if stop() {
            break Ok(());
        }
        if let Err(e) = tower.check() {
            break Err(e);
        }
        std::thread::sleep(TICK);
    };
    drop(metrics);
    let closed = tower.close();
    let s = tower.stats();
    tracing::info!(
        "tower stopped: {} beacons relayed, {} malformed dropped",
        s.beacons.load(Relaxed),
        s.malformed.load(Relaxed)
    );
    outcome.and(closed)
}

/// For the standalone binaries: a flag set by the first SIGINT or SIGTERM; a
/// second one exits at once with status 1.
pub fn signal_flag() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::flag;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        let io = |e: std::io::Error| Error::Config(format!("cannot handle signal {sig}: {e}"));
        flag::register_conditional_shutdown(sig, EXIT_FAILED, stop.clone()).map_err(io)?;
        flag::register(sig, stop.clone()).map_err(io)?;
    }
    Ok(stop)
}

/// The standalone binaries' `main`: runs `entry` (one of [`store_main`],
/// [`tower_main`]) with the process's arguments until SIGINT or SIGTERM.
pub fn binary_main(
    bin_name: &str,
    entry: fn(&str, Vec<OsString>, &mut dyn FnMut() -> bool) -> i32,
) -> i32 {
    let stop = match signal_flag() {
        Ok(s) => s,
        Err(e) => return fail(bin_name, EXIT_FAILED, &e),
    };
    let args = std::env::args_os().skip(1).collect();
    entry(bin_name, args, &mut || stop.load(Relaxed))
}

#[cfg(test)]
mod tests;
