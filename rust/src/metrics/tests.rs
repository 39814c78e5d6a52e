use std::io::Cursor;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::http::{read_head, Asked, MAX_HEAD};
use super::*;
use crate::node::stats::Stats;

fn asked(req: &[u8]) -> Option<Asked> {
    read_head(
        &mut Cursor::new(req.to_vec()),
        Instant::now() + Duration::from_secs(5),
    )
}

#[test]
fn heads_are_routed_and_bad_ones_refused() {
    let get = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(asked(get), Some(Asked::Metrics { body: true }));
    let query = b"GET /metrics?x=1 HTTP/1.0\r\n\r\n";
    assert_eq!(asked(query), Some(Asked::Metrics { body: true }));
    let head = b"HEAD /metrics HTTP/1.1\r\n\r\n";
    assert_eq!(asked(head), Some(Asked::Metrics { body: false }));
    assert_eq!(asked(b"GET / HTTP/1.1\r\n\r\n"), Some(Asked::Status(404)));
    assert_eq!(
        asked(b"GET /metricsx HTTP/1.1\r\n\r\n"),
        Some(Asked::Status(404))
    );
    assert_eq!(
        asked(b"POST /metrics HTTP/1.1\r\n\r\n"),
        Some(Asked::Status(405))
    );
    assert_eq!(asked(b"\x00\x01garbage\r\n\r\n"), Some(Asked::Status(400)));
    // A head that never ends within MAX_HEAD bytes, and too many headers.
    let mut long = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    long.resize(MAX_HEAD + 10, b'a');
    assert_eq!(asked(&long), Some(Asked::Status(431)));
    let mut many = b"GET /metrics HTTP/1.1\r\n".to_vec();
    for i in 0..100 {
        many.extend_from_slice(format!("X{i}: y\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(asked(&many), Some(Asked::Status(431)));
    // A client that closes before a whole head: nothing to answer.
    assert_eq!(asked(b"GET /metr"), None);
}

#[test]
fn families_carry_each_node_with_its_labels() {
    let stats = Arc::new(Stats::default());
    Stats::add(&stats.records_sent, 7);
    Stats::set(&stats.peers, 2);
    let a = Source::new(Kind::Producer, "AB12", Some("t\"1"), stats);
    let b = Source::new(
        Kind::Tower,
        "tcp://127.0.0.1:1,2",
        None,
        Arc::new(Stats::default()),
    );
    let text = encode(&[a, b]);
    assert!(text.ends_with("# EOF\n"), "{text}");
    let sent = "dafka_records_sent_total{kind=\"producer\",node=\"AB12\",topic=\"t\\\"1\"} 7";
    assert!(text.contains(sent), "{text}");
    assert!(text.contains("# TYPE dafka_peers gauge"), "{text}");
    // Each family once, both nodes in it.
    assert_eq!(text.matches("# TYPE dafka_records_sent counter").count(), 1);
    assert!(
        text.contains("dafka_records_sent_total{kind=\"tower\",node=\"tcp://127.0.0.1:1,2\"} 0")
    );
}

/// A tower's nodes by kind: one gauge family, labelled `node_kind` beside
/// the tower's own `kind` and `node`.
#[test]
fn a_tower_s_nodes_are_a_gauge_by_kind() {
    use crate::node::tower::{Known, NodeCounts, Sender};
    let mut known = Known::default();
    let store: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
    let beacon = |uuid: &[u8]| vec![b"B".to_vec(), uuid.to_vec(), b"tcp://h:1".to_vec()];
    known.heard(&beacon(store), Instant::now(), None);
    known.heard(&beacon(&[b'0'; 32]), Instant::now(), None);
    let announce = [b"\x01Vs".as_slice(), store].concat();
    known.on_subscription(&announce, Sender::Anyone);
    let nodes = Arc::new(NodeCounts::default());
    nodes.publish(&known);
    let mut tower = Source::new(Kind::Tower, "tcp://t:1,2", None, Arc::new(Stats::default()));
    tower.tower = Some(nodes);
    let text = encode(&[tower]);
    assert_eq!(
        text.matches("# TYPE dafka_tower_nodes gauge").count(),
        1,
        "{text}"
    );
    let line = |kind: &str, n: u64| {
        format!("dafka_tower_nodes{{kind=\"tower\",node=\"tcp://t:1,2\",node_kind=\"{kind}\"}} {n}")
    };
    for (kind, n) in [
        ("producer", 0),
        ("consumer", 0),
        ("store", 1),
        ("unknown", 1),
    ] {
        assert!(text.contains(&line(kind, n)), "{kind}: {text}");
    }
    assert!(text.contains("# TYPE dafka_tower_announcements_refused counter"));
}

#[test]
fn registrations_end_when_closed_or_dropped() {
    let mine = |n: &str| live().iter().filter(|s| s.node == n).count();
    let r = register(Source::new(
        Kind::Consumer,
        "REG1",
        None,
        Arc::new(Stats::default()),
    ));
    assert_eq!(mine("REG1"), 1);
    r.end();
    r.end();
    assert_eq!(mine("REG1"), 0);
    {
        let _r = register(Source::new(
            Kind::Consumer,
            "REG2",
            None,
            Arc::new(Stats::default()),
        ));
        assert_eq!(mine("REG2"), 1);
    }
    assert_eq!(mine("REG2"), 0);
}

#[test]
fn listen_addresses_are_checked() {
    assert!(check_listen("--metrics", "127.0.0.1:0").is_ok());
    assert!(check_listen("--metrics", "localhost:9100").is_ok());
    for bad in [
        "",
        "9100",
        ":9100",
        "127.0.0.1",
        "127.0.0.1:99999",
        "tcp://127.0.0.1:1",
    ] {
        let e = check_listen("--metrics", bad).unwrap_err().to_string();
        assert!(e.contains("HOST:PORT"), "{bad}: {e}");
    }
}

fn try_get(addr: std::net::SocketAddr, request: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(request.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

fn get(addr: std::net::SocketAddr, request: &str) -> String {
    try_get(addr, request).unwrap()
}

#[test]
fn a_server_answers_scrapes_until_closed() {
    let stats = Arc::new(Stats::default());
    Stats::add(&stats.records_received, 42);
    let src = Source::new(Kind::Consumer, "C0", None, stats);
    let mut server = MetricsServer::start("127.0.0.1:0", Sources::Fixed(vec![src])).unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);
    let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(ok.contains("application/openmetrics-text"), "{ok}");
    assert!(ok.contains("dafka_records_received_total{kind=\"consumer\",node=\"C0\"} 42"));
    let head = get(addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(
        head.starts_with("HTTP/1.1 200") && !head.contains("dafka_"),
        "{head}"
    );
    assert!(get(addr, "GET /x HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    server.close();
    assert!(std::net::TcpStream::connect(addr).is_err());
    let e = MetricsServer::start("127.0.0.1", Sources::Process)
        .err()
        .unwrap();
    assert!(e.to_string().contains("HOST:PORT"), "{e}");
}

/// Clients over the cap are answered 503 at once, without a thread or a
/// read; a slot freed (a client gone) serves scrapes again.
#[test]
fn clients_over_the_cap_get_503_until_one_leaves() {
    use super::http::Limits;
    let stats = Arc::new(Stats::default());
    Stats::add(&stats.records_received, 7);
    let src = Source::new(Kind::Consumer, "C0", None, stats);
    // A head deadline no stall of this machine reaches: the idle clients
    // stay served until the test closes them.
    let limits = Limits {
        head_within: Duration::from_secs(120),
        max_clients: 2,
    };
    let server =
        MetricsServer::start_with("127.0.0.1:0", Sources::Fixed(vec![src]), limits).unwrap();
    let addr = server.local_addr();
    let idle: Vec<_> = (0..2)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    // Accepted in order: the third connection is over the cap; it is answered
    // before it sends anything.
    let mut third = std::net::TcpStream::connect(addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut refused = String::new();
    std::io::Read::read_to_string(&mut third, &mut refused).unwrap();
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(!refused.contains("dafka_"), "{refused}");
    drop(idle);
    let bound = Instant::now() + Duration::from_secs(60);
    loop {
        // A request sent while still over the cap may be reset unread.
        if let Ok(a) = try_get(addr, "GET /metrics HTTP/1.1\r\n\r\n").as_deref() {
            if a.starts_with("HTTP/1.1 200") {
                assert!(a.contains("dafka_records_received_total{kind=\"consumer\",node=\"C0\"} 7"));
                break;
            }
            assert!(a.starts_with("HTTP/1.1 503"), "{a}");
        }
        assert!(Instant::now() < bound, "no slot freed in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}
