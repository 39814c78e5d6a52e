use super::*;

#[test]
fn a_tower_binds_beacon_out_where_nodes_look_for_it() {
    let tower = |i: &str, o: &str| TowerConfig {
        beacon_in: i.into(),
        beacon_out: o.into(),
        security: None,
    };
    for (i, o) in [
        ("tcp://*:5556", "tcp://*:5557"),
        ("tcp://10.0.0.1:0", "tcp://10.0.0.1:0"),
        ("tcp://10.0.0.1:0", "tcp://*:0"),
        ("tcp://10.0.0.1:0", "tcp://0.0.0.0:0"),
    ] {
        assert!(tower(i, o).validate().is_ok(), "{i} {o}");
    }
    // `endpoint` would say tcp://10.0.0.1:IN,OUT (or 127.0.0.1 for `*`):
    // nodes would look for the beacons where nothing sends them.
    for (i, o) in [
        ("tcp://10.0.0.1:0", "tcp://10.0.0.2:0"),
        ("tcp://*:5556", "tcp://10.0.0.2:5557"),
    ] {
        let e = tower(i, o).validate().unwrap_err().to_string();
        assert!(e.contains("same host"), "{e}");
    }
}

#[test]
fn tower_addr_forms() {
    let a = TowerAddr::parse("tcp://127.0.0.1:5556").unwrap();
    assert_eq!(a.beacon_out, "tcp://127.0.0.1:5557");
    let b = TowerAddr::parse("tcp://10.0.0.1:4000,4100").unwrap();
    assert_eq!(b.beacon_in, "tcp://10.0.0.1:4000");
    assert_eq!(b.beacon_out, "tcp://10.0.0.1:4100");
    for bad in [
        "127.0.0.1:5556",
        "tcp://*:5556",
        "tcp://h:0",
        "tcp://h:x,1",
        "tcp://h:65535",
        "tcp://h\0:5556",
    ] {
        assert!(TowerAddr::parse(bad).is_err(), "{bad}");
    }
}

/// The host a node puts in its beacons becomes `tcp://HOST:PORT` at
/// every peer: what cannot be one is refused where it is configured.
#[test]
fn advertise_hosts() {
    let with = |h: &str| NodeConfig {
        advertise_host: Some(h.into()),
        ..NodeConfig::default()
    };
    for good in [
        "10.0.0.5",
        "node-1.example",
        "Node_2",
        "[::1]",
        "[fe80::1%eth0]",
        "[2001:db8::5]",
        "",
    ] {
        assert!(with(good).validate().is_ok(), "{good:?}");
    }
    for bad in [
        "tcp://10.0.0.5",
        "10.0.0.5:5556",
        "::1",
        "a b",
        "h\0",
        "h\n",
        "[]",
        "[node1]",
        "a]",
        "-node",
        ".x",
        "_x",
        "*",
        "0.0.0.0",
        "[::]",
        "node!",
        "a,b",
        "a;b",
        "a%b",
        "nöde",
        "[:]",
        "[zz::yy]",
        "[::1%]",
        "[::1%a b]",
        &"h".repeat(256),
    ] {
        let e = with(bad).validate().unwrap_err().to_string();
        assert!(e.contains("advertise_host must be a host"), "{bad:?}: {e}");
    }
}

#[test]
fn endpoints() {
    assert!(check_endpoint("bind", "tcp://127.0.0.1:*").is_ok());
    assert!(check_endpoint("bind", "tcp://*:0").is_ok());
    assert!(check_endpoint("bind", "127.0.0.1:5").is_err());
    // The zmq crate panics on a NUL byte in an endpoint.
    assert!(check_endpoint("bind", "tcp://127.0.0.1\0:0").is_err());
    assert!(check_peer("tcp://127.0.0.1\0:5").is_err());
    assert!(check_peer("ipc:///tmp/x\0").is_err());
    // A peer is connected to: its port must be known.
    assert!(check_peer("tcp://127.0.0.1:5").is_ok());
    for bad in [
        "tcp://127.0.0.1:*",
        "tcp://127.0.0.1:0",
        "tcp://h:65536",
        "tcp://:5",
    ] {
        let e = check_peer(bad).unwrap_err().to_string();
        assert!(e.contains("the port the peer is bound to"), "{bad}: {e}");
    }
    assert!(check_peer("ipc:///tmp/x").is_ok());
    // Durations past any clock (`Instant + Duration` would panic).
    let far = NodeConfig {
        beacon_interval: LONGEST,
        beacon_timeout: LONGEST + Duration::from_secs(1),
        ..NodeConfig::default()
    };
    assert!(far
        .validate()
        .unwrap_err()
        .to_string()
        .contains("beacon_timeout"));
    let far = ProducerConfig {
        head_interval: Duration::MAX,
        ..ProducerConfig::default()
    };
    assert!(far
        .validate()
        .unwrap_err()
        .to_string()
        .contains("head_interval"));
    assert_eq!(bind_spelling("tcp://*:0"), "tcp://*:*");
    assert_eq!(split_tcp("tcp://0.0.0.0:41"), Some(("0.0.0.0", 41)));
    assert!("middle".parse::<OffsetReset>().is_err());
}

#[test]
fn a_producer_holds_fewer_batches_per_subscriber() {
    let with = |sndhwm, record_batches| {
        ProducerConfig {
            node: NodeConfig {
                sndhwm,
                ..Default::default()
            },
            record_batches,
            ..Default::default()
        }
        .socket_config()
        .sndhwm
    };
    assert_eq!(with(1_000_000, false), 15_625);
    assert_eq!(with(1_000_000, true), 15_625);
    assert_eq!(with(20_000, true), 1_000, "at least 1,000");
    assert_eq!(with(10, true), 10, "never more than asked");
    assert_eq!(with(0, true), 0, "unlimited stays unlimited");
}
