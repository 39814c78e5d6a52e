//! Config parsing and merging for the binaries: defaults, the C reference's
//! key names, flags over file, and the errors bad input gets.

use std::time::Duration;

use clap::Parser;

use super::*;

fn store_args(argv: &[&str]) -> StoreArgs {
    StoreArgs::try_parse_from(std::iter::once("dafka-store").chain(argv.iter().copied())).unwrap()
}

fn tower_args(argv: &[&str]) -> TowerArgs {
    TowerArgs::try_parse_from(std::iter::once("dafka-tower").chain(argv.iter().copied())).unwrap()
}

fn file(text: &str) -> FileConfig {
    FileConfig::parse(text, "test.toml").unwrap()
}

fn err_text(r: Result<impl std::fmt::Debug>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn store_defaults_work_with_no_config() {
    let s = store_settings(&store_args(&[]), &FileConfig::default()).unwrap();
    assert_eq!(s.dir, PathBuf::from(DEFAULT_STORE_DIR));
    assert_eq!(s.config.node.towers, vec![DEFAULT_TOWER.to_string()]);
    assert!(s.config.node.peers.is_empty());
    assert_eq!(s.config.node.bind, "tcp://127.0.0.1:*");
    assert_eq!(s.config.node.beacon_interval, Duration::from_millis(1000));
    assert_eq!(s.config.node.beacon_timeout, Duration::from_millis(4000));
    assert_eq!(s.config.log.fsync, FsyncPolicy::Interval);
    assert_eq!(s.config.log.flush_interval_ms, 1);
    assert_eq!(s.config.log.retain_hours, Some(168));
    assert_eq!(s.log_level, None);
    // A peer alone means no default tower.
    let s = store_settings(&store_args(&["--peer", "tcp://127.0.0.1:7000"]), &file("")).unwrap();
    assert!(s.config.node.towers.is_empty());
}

#[test]
fn c_reference_keys_are_understood() {
    let f = file(
        r#"
        [beacon]
        interval = 250
        timeout = 3000
        sub_address = "tcp://10.0.0.5:6000"
        pub_address = "tcp://10.0.0.5:6100"
        verbose = 1

        [store]
        db = "/var/lib/dafka"

        [tower]
        sub_address = "tcp://*:6000"
        pub_address = "tcp://*:6100"
        "#,
    );
    let s = store_settings(&store_args(&[]), &f).unwrap();
    assert_eq!(s.dir, PathBuf::from("/var/lib/dafka"));
    assert_eq!(s.config.node.beacon_interval, Duration::from_millis(250));
    assert_eq!(s.config.node.beacon_timeout, Duration::from_millis(3000));
    assert_eq!(s.config.node.towers, vec!["tcp://10.0.0.5:6000,6100"]);
    assert_eq!(s.log_level.as_deref(), Some("debug"));
    let t = tower_settings(&tower_args(&[]), &f).unwrap();
    assert_eq!(t.config.beacon_in, "tcp://*:6000");
    assert_eq!(t.config.beacon_out, "tcp://*:6100");
    // tower/verbose is the tower's own switch; beacon/verbose is not.
    assert_eq!(t.log_level, None);
    // sub_address alone means OUT = IN + 1, like a tower given as tcp://HOST:IN.
    let f = file("[beacon]\nsub_address = \"tcp://h:5556\"\n[store]\ndir = \"d\"");
    let s = store_settings(&store_args(&[]), &f).unwrap();
    assert_eq!(s.config.node.towers, vec!["tcp://h:5556"]);
    assert_eq!(s.dir, PathBuf::from("d"));
}

#[test]
fn flags_override_the_file() {
    let f = file(
        r#"
        log_level = "warn"
        [node]
        towers = ["tcp://127.0.0.1:4000,4001"]
        peers = ["tcp://127.0.0.1:4100"]
        wire = "zproto"
        bind = "tcp://127.0.0.1:4200"
        sndhwm = 10
        [beacon]
        interval = 100
        [store]
        db = "from-file"
        fsync = "never"
        flush_interval_ms = 50
        retain_hours = 0
        retain_bytes = 1000000
        forget_parked_hours = 0
        max_open_files = 300
        max_record_bytes = 1000
        fetch_retry_ms = 20
        recovery = "absolute_consistency"
        "#,
    );
    let s = store_settings(&store_args(&[]), &f).unwrap();
    assert_eq!(s.dir, PathBuf::from("from-file"));
    assert_eq!(s.config.node.towers, vec!["tcp://127.0.0.1:4000,4001"]);
    assert_eq!(s.config.node.peers, vec!["tcp://127.0.0.1:4100"]);
    assert_eq!(s.config.node.wire, Dialect::Zproto);
    assert_eq!(s.config.node.sndhwm, 10);
    assert_eq!(s.config.log.fsync, FsyncPolicy::Never);
    assert_eq!(s.config.log.retain_hours, None);
    assert_eq!(s.config.log.retain_bytes, Some(1_000_000));
    assert_eq!(s.config.log.forget_parked_hours, None, "0: for good");
    assert_eq!(s.config.log.max_open_files, Some(300));
    assert_eq!(s.config.log.recovery, RecoveryPolicy::AbsoluteConsistency);
    assert_eq!(s.config.state.max_record_bytes, 1000);
    assert_eq!(s.config.state.fetch_retry, Duration::from_millis(20));
    assert_eq!(s.log_level.as_deref(), Some("warn"));

    let a = store_args(&[
        "flag-dir",
        "--tower",
        "tcp://127.0.0.1:5000,5001",
        "--wire",
        "rfc",
        "--fsync",
        "always",
        "--beacon-interval",
        "300",
        "--flush-interval-ms",
        "7",
        "--retain-hours",
        "5",
        "--forget-parked-hours",
        "48",
        "--max-open-files",
        "0",
        "--log-level",
        "debug",
    ]);
    let s = store_settings(&a, &f).unwrap();
    assert_eq!(s.dir, PathBuf::from("flag-dir"));
    assert_eq!(s.config.node.towers, vec!["tcp://127.0.0.1:5000,5001"]);
    // Not given as a flag: still the file's.
    assert_eq!(s.config.node.peers, vec!["tcp://127.0.0.1:4100"]);
    assert_eq!(s.config.node.wire, Dialect::Rfc);
    assert_eq!(s.config.log.fsync, FsyncPolicy::Always);
    assert_eq!(s.config.node.beacon_interval, Duration::from_millis(300));
    assert_eq!(s.config.log.flush_interval_ms, 7);
    assert_eq!(s.config.log.retain_hours, Some(5));
    assert_eq!(s.config.log.forget_parked_hours, Some(48));
    assert_eq!(
        s.config.log.max_open_files, None,
        "0: half the open-files limit"
    );
    assert_eq!(s.log_level.as_deref(), Some("debug"));

    let f = file("[tower]\nbeacon_in = \"tcp://127.0.0.1:0\"\nbeacon_out = \"tcp://127.0.0.1:0\"");
    let t = tower_settings(&tower_args(&["--beacon-out", "tcp://127.0.0.1:9000"]), &f).unwrap();
    assert_eq!(t.config.beacon_in, "tcp://127.0.0.1:0");
    assert_eq!(t.config.beacon_out, "tcp://127.0.0.1:9000");
    let t = tower_settings(&tower_args(&["--sub-address", "tcp://*:1"]), &file("")).unwrap();
    assert_eq!(t.config.beacon_in, "tcp://*:1");
    assert_eq!(t.config.beacon_out, DEFAULT_TOWER_OUT);
}

#[test]
fn bad_files_say_what_is_wrong() {
    let e = err_text(FileConfig::parse("[store]\nfsynk = \"always\"", "my.toml"));
    assert!(e.contains("my.toml") && e.contains("fsynk"), "{e}");
    let e = err_text(FileConfig::parse(
        "[beacon]\ninterval = \"fast\"",
        "my.toml",
    ));
    assert!(e.contains("interval"), "{e}");
    let e = err_text(FileConfig::parse(
        "[producer]\nhead_interval = 1",
        "my.toml",
    ));
    assert!(e.contains("producer"), "{e}");
    let e = err_text(FileConfig::parse("not toml", "my.toml"));
    assert!(e.contains("my.toml"), "{e}");
    let e = err_text(FileConfig::load(Path::new("/nonexistent/dafka.toml")));
    assert!(e.contains("/nonexistent/dafka.toml"), "{e}");

    let none = store_args(&[]);
    for (text, needle) in [
        ("[store]\nfsync = \"sometimes\"", "fsync"),
        ("[store]\nrecovery = \"pray\"", "recovery"),
        ("[node]\nwire = \"json\"", "wire"),
        ("[node]\ntowers = [\"localhost:5556\"]", "tower endpoint"),
        ("[node]\nbind = \"127.0.0.1:1\"", "bind"),
        ("[beacon]\ninterval = 0", "interval"),
        (
            "[beacon]\ninterval = 5000\ntimeout = 4000",
            "beacon_timeout",
        ),
        ("[beacon]\npub_address = \"tcp://h:1\"", "sub_address"),
        (
            "[beacon]\nsub_address = \"tcp://a:1\"\npub_address = \"tcp://b:2\"",
            "same host",
        ),
        ("[store]\nsegment_bytes = 1", "segment_bytes"),
        ("[store]\nmax_record_bytes = 0", "max_record_bytes"),
        ("[store]\nfetch_retry_ms = 0", "fetch_retry_ms"),
        // Past any clock: `Instant + Duration` would panic in the node.
        (
            "[store]\nfetch_retry_ms = 9223372036854775807",
            "about 95 years",
        ),
        (
            "[store]\nflush_interval_ms = 9223372036854775807",
            "about 95 years",
        ),
        (
            "[beacon]\ninterval = 4000000000000\ntimeout = 5000000000000",
            "about 95 years",
        ),
        (
            "[node]\npeers = [\"tcp://127.0.0.1:*\"]",
            "the port the peer is bound to",
        ),
    ] {
        let e = err_text(store_settings(&none, &file(text)));
        assert!(e.contains(needle), "{text}: {e}");
    }
    let e = err_text(tower_settings(
        &tower_args(&[]),
        &file("[tower]\nsub_address = \"x\""),
    ));
    assert!(e.contains("beacon_in"), "{e}");
}

#[test]
fn bad_flags_are_usage_errors() {
    let parse = |argv: &[&str]| {
        StoreArgs::try_parse_from(std::iter::once("dafka-store").chain(argv.iter().copied()))
    };
    assert!(parse(&["--fsync", "sometimes"]).is_err());
    assert!(parse(&["--wire", "json"]).is_err());
    assert!(parse(&["--beacon-interval", "-1"]).is_err());
    assert!(parse(&["--no-such-flag"]).is_err());
    assert!(parse(&["a", "b"]).is_err());
    let mut never = || false;
    assert_eq!(
        store_main("dafka-store", vec!["--bogus".into()], &mut never),
        EXIT_USAGE
    );
    assert_eq!(
        tower_main(
            "dafka-tower",
            vec!["--beacon-in".into(), "x".into()],
            &mut never
        ),
        EXIT_USAGE
    );
    assert_eq!(
        store_main(
            "dafka-store",
            vec!["--config".into(), "/nonexistent/dafka.toml".into()],
            &mut never
        ),
        EXIT_USAGE
    );
}

#[test]
fn the_sample_config_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/store.toml");
    let f = FileConfig::load(&path).unwrap();
    let s = store_settings(&store_args(&[]), &f).unwrap();
    assert_eq!(s.config.log.fsync, FsyncPolicy::Interval);
    assert_eq!(s.config.log.max_open_files, None);
    assert_eq!(s.config.log.forget_parked_hours, Some(720));
    // Its values are the defaults, as it says.
    let d = store_settings(&store_args(&[]), &FileConfig::default()).unwrap();
    assert_eq!(format!("{:?}", s.config.log), format!("{:?}", d.config.log));
    tower_settings(&tower_args(&[]), &f).unwrap();
}

#[test]
fn store_runs_until_stopped_and_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let a = store_args(&[
        dir.path().to_str().unwrap(),
        "--peer",
        "tcp://127.0.0.1:1",
        "--bind",
        "tcp://127.0.0.1:0",
    ]);
    let s = store_settings(&a, &FileConfig::default()).unwrap();
    let mut polls = 0;
    run_store(&s, &mut || {
        polls += 1;
        polls > 3
    })
    .unwrap();
    assert!(polls > 3);
    let id = std::fs::read_to_string(dir.path().join(crate::node::store::IDENTITY_FILE)).unwrap();
    assert_eq!(id.trim().len(), 32);
    assert!(dir.path().join(crate::node::store::LOG_DIR).is_dir());

    let t = tower_args(&[
        "--beacon-in",
        "tcp://127.0.0.1:0",
        "--beacon-out",
        "tcp://127.0.0.1:0",
    ]);
    let t = tower_settings(&t, &FileConfig::default()).unwrap();
    let mut polls = 0;
    run_tower(&t, &mut || {
        polls += 1;
        polls > 2
    })
    .unwrap();
    assert!(polls > 2);
}

/// The C reference's `[beacon] sub_address` and `pub_address` each name one
/// port: 65535 is as good as any for either when both are given (no
/// OUT = IN + 1 is implied), and the tower is `tcp://HOST:IN,OUT`.
#[test]
fn beacon_addresses_on_the_last_port_are_accepted() {
    for (sub, publ, want) in [
        (
            "tcp://127.0.0.1:65535",
            "tcp://127.0.0.1:65534",
            "tcp://127.0.0.1:65535,65534",
        ),
        (
            "tcp://127.0.0.1:65534",
            "tcp://127.0.0.1:65535",
            "tcp://127.0.0.1:65534,65535",
        ),
    ] {
        let f = file(&format!(
            "[beacon]\nsub_address = \"{sub}\"\npub_address = \"{publ}\""
        ));
        let s = store_settings(&store_args(&[]), &f);
        assert!(s.is_ok(), "{sub} / {publ}: {}", err_text(s));
        assert_eq!(s.unwrap().config.node.towers, vec![want.to_string()]);
    }
}

/// `--cert`/`--trust` and `[security]` (issue 30): flag over file over none,
/// both or neither, relative file paths taken from the file's directory.
#[test]
fn security_flags_and_table_parse() {
    // None by default: plaintext.
    let s = store_settings(&store_args(&[]), &FileConfig::default()).unwrap();
    assert_eq!(s.config.node.security, None);
    let t = tower_settings(&tower_args(&[]), &FileConfig::default()).unwrap();
    assert_eq!(t.config.security, None);

    // Flags: a secure store needs a keyed tower (its default one has no key).
    let key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    let keyed = format!("tcp://127.0.0.1:5556,5557;curve={key}");
    let a = store_args(&[
        "--cert",
        "/keys/store-1.key_secret",
        "--trust",
        "/keys/trusted",
        "--tower",
        &keyed,
    ]);
    let s = store_settings(&a, &FileConfig::default()).unwrap();
    assert_eq!(
        s.config.node.security,
        Some(SecurityConfig {
            cert: PathBuf::from("/keys/store-1.key_secret"),
            trust: PathBuf::from("/keys/trusted"),
        })
    );
    let a = tower_args(&["--cert", "t.key_secret", "--trust", "trusted"]);
    let t = tower_settings(&a, &FileConfig::default()).unwrap();
    assert_eq!(
        t.config.security,
        Some(SecurityConfig {
            cert: PathBuf::from("t.key_secret"),
            trust: PathBuf::from("trusted"),
        })
    );

    // The file's table; a flag overrides its key, the other key stays.
    let f = file(&format!(
        "[node]\ntowers = [\"{keyed}\"]\n[security]\ncert = \"/etc/dafka/s.key_secret\"\n\
         trust = \"/etc/dafka/trusted\"\n"
    ));
    let s = store_settings(&store_args(&[]), &f).unwrap();
    let sec = s.config.node.security.unwrap();
    assert_eq!(sec.cert, PathBuf::from("/etc/dafka/s.key_secret"));
    assert_eq!(sec.trust, PathBuf::from("/etc/dafka/trusted"));
    let s = store_settings(&store_args(&["--cert", "/other.key_secret"]), &f).unwrap();
    let sec = s.config.node.security.unwrap();
    assert_eq!(sec.cert, PathBuf::from("/other.key_secret"));
    assert_eq!(sec.trust, PathBuf::from("/etc/dafka/trusted"));
    let t = tower_settings(&tower_args(&[]), &f).unwrap();
    assert_eq!(
        t.config.security.unwrap().trust,
        PathBuf::from("/etc/dafka/trusted")
    );

    // Unknown keys in [security] are errors, as elsewhere.
    let e = err_text(FileConfig::parse("[security]\nkey = \"x\"", "my.toml"));
    assert!(e.contains("my.toml") && e.contains("key"), "{e}");
}

#[test]
fn security_needs_both_and_matching_endpoints() {
    let keyed = "tcp://127.0.0.1:5556,5557;curve=rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    for (argv, text, needle) in [
        (vec!["--cert", "c.key_secret"], "", "without a trust"),
        (vec!["--trust", "dir"], "", "without a cert"),
        (
            vec![],
            "[security]\ncert = \"c.key_secret\"",
            "without a trust",
        ),
        (
            vec!["--cert", "c"],
            "[security]\ncert = \"c\"",
            "without a trust",
        ),
    ] {
        let e = err_text(store_settings(&store_args(&argv), &file(text)));
        assert!(e.contains(needle) && e.contains("--trust"), "{argv:?}: {e}");
        let e = err_text(tower_settings(&tower_args(&argv), &file(text)));
        assert!(e.contains(needle), "{argv:?}: {e}");
    }
    // A secure store with the default (keyless) tower, and a plaintext one
    // given a secure tower: both refused, saying why.
    let a = store_args(&["--cert", "c.key_secret", "--trust", "dir"]);
    let e = err_text(store_settings(&a, &FileConfig::default()));
    assert!(e.contains("has no key"), "{e}");
    let e = err_text(store_settings(
        &store_args(&["--tower", keyed]),
        &FileConfig::default(),
    ));
    assert!(e.contains("carries a CURVE key"), "{e}");
    // Flags parse as paths; --cert takes a value.
    assert!(StoreArgs::try_parse_from(["dafka-store", "--cert"]).is_err());
    assert!(TowerArgs::try_parse_from(["dafka-tower", "--trust"]).is_err());
}

#[test]
fn security_paths_in_a_file_are_relative_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    let path = conf.join("store.toml");
    std::fs::write(
        &path,
        "[security]\ncert = \"keys/store-1.key_secret\"\ntrust = \"/abs/trusted\"\n",
    )
    .unwrap();
    let f = FileConfig::load(&path).unwrap();
    assert_eq!(
        f.security.cert,
        Some(conf.join("keys/store-1.key_secret")),
        "relative: from the file's directory"
    );
    assert_eq!(
        f.security.trust,
        Some(PathBuf::from("/abs/trusted")),
        "absolute: as written"
    );
    // A flag's relative path stays relative to the working directory.
    let t = tower_settings(&tower_args(&["--cert", "mine.key_secret"]), &f).unwrap();
    let sec = t.config.security.unwrap();
    assert_eq!(sec.cert, PathBuf::from("mine.key_secret"));
    assert_eq!(sec.trust, PathBuf::from("/abs/trusted"));
}

/// A secure store or tower whose certificate cannot be read exits 1 (it
/// could not start), naming the path; a certificate of another role names
/// both roles.
#[test]
fn a_bad_certificate_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.key_secret");
    let trust = dir.path().join("trusted");
    std::fs::create_dir(&trust).unwrap();
    let t = tower_args(&[
        "--beacon-in",
        "tcp://127.0.0.1:0",
        "--beacon-out",
        "tcp://127.0.0.1:0",
        "--cert",
        missing.to_str().unwrap(),
        "--trust",
        trust.to_str().unwrap(),
    ]);
    let s = tower_settings(&t, &FileConfig::default()).unwrap();
    let e = err_text(run_tower(&s, &mut || true));
    assert!(e.contains(missing.to_str().unwrap()), "{e}");

    let (_, secret) =
        crate::security::keygen(dir.path(), "reader", crate::security::Role::Consumer, None)
            .unwrap();
    let t = tower_args(&[
        "--beacon-in",
        "tcp://127.0.0.1:0",
        "--beacon-out",
        "tcp://127.0.0.1:0",
        "--cert",
        secret.to_str().unwrap(),
        "--trust",
        trust.to_str().unwrap(),
    ]);
    let s = tower_settings(&t, &FileConfig::default()).unwrap();
    let e = err_text(run_tower(&s, &mut || true));
    assert!(e.contains("consumer") && e.contains("tower"), "{e}");
}

#[test]
fn metrics_listen_comes_from_the_flag_over_the_file() {
    let none = store_settings(&store_args(&[]), &FileConfig::default()).unwrap();
    assert_eq!(none.metrics, None);
    let f = file("[metrics]\nlisten = \"127.0.0.1:9100\"");
    let s = store_settings(&store_args(&[]), &f).unwrap();
    assert_eq!(s.metrics.as_deref(), Some("127.0.0.1:9100"));
    let s = store_settings(&store_args(&["--metrics", "127.0.0.1:0"]), &f).unwrap();
    assert_eq!(s.metrics.as_deref(), Some("127.0.0.1:0"));
    let t = tower_settings(&tower_args(&[]), &f).unwrap();
    assert_eq!(t.metrics.as_deref(), Some("127.0.0.1:9100"));
    let e = err_text(tower_settings(&tower_args(&["--metrics", "9100"]), &f));
    assert!(
        e.contains("--metrics \"9100\"") && e.contains("HOST:PORT"),
        "{e}"
    );
    let bad = file("[metrics]\nlisten = \"tcp://127.0.0.1:1\"");
    let e = err_text(store_settings(&store_args(&[]), &bad));
    assert!(e.contains("[metrics] listen"), "{e}");
    let e = err_text(FileConfig::parse("[metrics]\nport = 1", "my.toml"));
    assert!(e.contains("port"), "{e}");
}
