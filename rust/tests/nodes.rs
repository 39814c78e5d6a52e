//! Socket-level tests of the nodes on 127.0.0.1 ephemeral ports, through the
//! public API: static peers, discovery through a tower, late joiners fetching
//! history, signals delivered to node threads, the consumer handle polled
//! from several threads.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::SeqCst};
use std::time::{Duration, Instant};

use _native::error::Error;
use _native::node::*;

mod common;
use common::{consume, tower, wait_for};

/// A node that finds its peers through `t`, beaconing every 100 ms.
fn via_tower(t: &Tower, peers: Vec<String>, beacon_timeout_ms: u64) -> NodeConfig {
    NodeConfig {
        towers: vec![t.endpoint()],
        peers,
        beacon_interval: Duration::from_millis(100),
        beacon_timeout: Duration::from_millis(beacon_timeout_ms),
        ..Default::default()
    }
}

/// A consumer of topic `t` with `p` as its static peer, and `p` connected
/// to it (FETCH travels consumer → producer).
fn consumer_of(p: &Producer, mut cfg: ConsumerConfig) -> Consumer {
    cfg.node.peers = vec![p.endpoint().to_string()];
    let c = Consumer::new(&["t".to_string()], cfg).unwrap();
    p.connect(c.endpoint()).unwrap();
    c
}

/// A resumed consumer: these partitions start at these offsets, every other
/// one at its first record.
fn starting(start_offsets: Vec<(String, u64)>) -> ConsumerConfig {
    ConsumerConfig {
        start_offsets,
        ..Default::default()
    }
}

/// A producer whose HEADs (news of its partition) come only every ten
/// minutes: a consumer hears of it only through its records.
fn quiet_producer() -> Producer {
    Producer::new(
        "t",
        ProducerConfig {
            head_interval: Duration::from_secs(600),
            ..Default::default()
        },
    )
    .unwrap()
}

/// [`consumer_of`] from offset 0.
fn earliest_consumer_of(p: &Producer) -> Consumer {
    consumer_of(
        p,
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            ..Default::default()
        },
    )
}

#[test]
fn a_value_over_max_record_bytes_is_refused_and_nothing_of_its_batch_is_sent() {
    let p = Producer::new(
        "t",
        ProducerConfig {
            max_record_bytes: 10,
            min_acks: 0,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.send([1u8; 10], None).unwrap(), 0, "at the limit");
    let e = p.send([1u8; 11], None).unwrap_err();
    assert!(matches!(e, Error::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("max_record_bytes=10"), "{e}");
    assert!(matches!(
        p.try_send(&[1u8; 11]),
        Err(Error::TooLarge { .. })
    ));
    let batch = vec![vec![1u8; 3], vec![1u8; 11], vec![1u8; 3]];
    assert!(matches!(
        p.send_many(batch, None),
        Err(Error::TooLarge { .. })
    ));
    assert_eq!(p.next_offset(), 1, "nothing of the batch was sent");
    assert_eq!(p.send_many(vec![vec![2u8; 10]; 3], None).unwrap(), Some(3));
    p.check().unwrap();
    let bad = ProducerConfig {
        max_record_bytes: 0,
        ..Default::default()
    };
    assert!(matches!(Producer::new("t", bad), Err(Error::Config(_))));
}

#[test]
fn static_peers_late_earliest_consumer_gets_history() {
    let p = Producer::new("t", ProducerConfig::default()).unwrap();
    for i in 0..1000u32 {
        p.send(i.to_be_bytes(), None).unwrap();
    }
    // Joins after everything was published: HEAD/GET-HEADS → FETCH from 0.
    let c = earliest_consumer_of(&p);
    let got = consume(&c, 1000, Duration::from_secs(20));
    let offsets: Vec<u64> = got.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (0..1000).collect::<Vec<_>>());
    assert_eq!(got[999].value(), 999u32.to_be_bytes());
    c.close().unwrap();
    p.close().unwrap();
}

/// Nobody listens at first, so the producer's thread naps and sweeps up the
/// records sent meanwhile, which no command announces (`producer/run.rs`:
/// `orphans`); a consumer joins mid-stream, which ends the naps while a
/// batch begun during one is still filling. Records come one at a time, far
/// fewer than fill a batch, so only the sweeps can publish them: every one
/// is published and reaches the consumer, the last ones too.
#[test]
fn records_sent_while_a_producer_napped_are_published_once_a_consumer_listens() {
    let p = Producer::new("t", ProducerConfig::default()).unwrap();
    let n = 400u32;
    let c = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            for i in 0..n {
                p.send(i.to_be_bytes(), None).unwrap();
                std::thread::sleep(Duration::from_micros(250));
            }
        });
        wait_for("records sent unheard", Duration::from_secs(60), || {
            stat(p.stats().snapshot(), "records_sent") >= 100
        });
        let c = earliest_consumer_of(&p);
        sender.join().unwrap();
        c
    });
    wait_for("every record published", Duration::from_secs(60), || {
        stat(p.stats().snapshot(), "records_sent") == u64::from(n)
    });
    let got = consume(&c, n as usize, Duration::from_secs(60));
    let offsets: Vec<u64> = got.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (0..u64::from(n)).collect::<Vec<_>>());
    c.close().unwrap();
    p.close().unwrap();
}

/// `send` gathers records in a pending batch that the node thread takes;
/// `send_many` hands that batch over before its own. From two threads at
/// once, with values large enough to fill a pending batch: every record
/// arrives at the offset its send returned.
#[test]
fn records_sent_one_at_a_time_and_in_batches_from_two_threads_keep_their_offsets() {
    let p = Producer::new("t", ProducerConfig::default()).unwrap();
    let c = earliest_consumer_of(&p);
    let value = |who: u8, i: u32| {
        let mut v = vec![
            who;
            if i % 97 == 0 {
                70_000
            } else {
                4 + i as usize % 300
            }
        ];
        v[..4].copy_from_slice(&i.to_be_bytes());
        v
    };
    let sent: Vec<(u64, Vec<u8>)> = std::thread::scope(|s| {
        let one = s.spawn(|| {
            (0..3000u32)
                .map(|i| (p.send(value(1, i), None).unwrap(), value(1, i)))
                .collect::<Vec<_>>()
        });
        let mut mixed = Vec::new();
        for i in 0..300u32 {
            if i % 3 == 0 {
                let vs: Vec<Vec<u8>> = (0..10).map(|k| value(2, i * 10 + k)).collect();
                let last = p.send_many(vs.clone(), None).unwrap().unwrap();
                mixed.extend((last + 1 - 10..=last).zip(vs));
            } else {
                mixed.push((p.send(value(2, i * 10), None).unwrap(), value(2, i * 10)));
            }
        }
        let mut all = one.join().unwrap();
        all.extend(mixed);
        all
    });
    let n = sent.len();
    let mut want: Vec<Option<Vec<u8>>> = vec![None; n];
    for (off, v) in sent {
        assert!(
            want[off as usize].replace(v).is_none(),
            "offset {off} given twice"
        );
    }
    let got = consume(&c, n, Duration::from_secs(60));
    assert_eq!(got.len(), n, "stats: {:?}", c.stats().snapshot());
    for d in &got {
        assert_eq!(
            Some(d.value()),
            want[d.offset as usize].as_deref(),
            "offset {}",
            d.offset
        );
    }
    assert_eq!(p.next_offset(), n as u64);
    c.close().unwrap();
    p.close().unwrap();
}

/// Records published before a consumer's subscriptions reached the producer
/// never reach it, and with HEADs ten minutes apart nothing else would tell
/// it of them before the producer connects back (GET-HEADS): the producer
/// tells a consumer its head as the consumer connects.
#[test]
fn a_consumer_connecting_to_a_producer_hears_of_records_published_before() {
    let p = quiet_producer();
    p.send_many((0..10u8).map(|i| vec![i]).collect(), None)
        .unwrap();
    let c = Consumer::new(
        &["t".to_string()],
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            ..Default::default()
        },
    )
    .unwrap();
    c.connect(p.endpoint()).unwrap();
    // The producer is not connected to the consumer: no GET-HEADS reaches it
    // (nor a FETCH); only what it sends as the consumer subscribes counts.
    let deadline = Instant::now() + Duration::from_secs(20);
    while stat(c.stats().snapshot(), "gaps") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(stat(c.stats().snapshot(), "gaps"), 1, "the head unheard of");
    p.connect(c.endpoint()).unwrap();
    let got = consume(&c, 10, Duration::from_secs(20));
    let offsets: Vec<u64> = got.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());
    c.close().unwrap();
    p.close().unwrap();
}

/// A partition caught up and unheard of for `idle_after` keeps only its
/// position (the `partitions_active` gauge drops); when its producer sends
/// again, the consumer goes on from there: nothing twice, nothing skipped.
#[test]
fn a_consumer_forgets_an_idle_partition_but_not_its_position() {
    let p = quiet_producer();
    let c = consumer_of(
        &p,
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            idle_after: Duration::from_secs(1),
            ..Default::default()
        },
    );
    let active = || stat(c.stats().snapshot(), "partitions_active");
    let idled = || stat(c.stats().snapshot(), "partitions_idled");
    p.send_many((0..10u8).map(|i| vec![i]).collect(), None)
        .unwrap();
    let got = consume(&c, 10, Duration::from_secs(20));
    assert_eq!(got.len(), 10);
    // Kept whole while heard of, then reduced to its position once: the
    // count of such reductions says both (whether it is still whole right
    // now depends on how long this thread took since the last record).
    let deadline = Instant::now() + Duration::from_secs(20);
    while idled() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(idled(), 1, "the idle partition is still kept whole");
    assert_eq!(active(), 0);
    p.send_many((10..20u8).map(|i| vec![i]).collect(), None)
        .unwrap();
    let got = consume(&c, 10, Duration::from_secs(20));
    let offsets: Vec<u64> = got.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (10..20).collect::<Vec<_>>());
    assert!(got.iter().all(|d| d.value() == [d.offset as u8]));
    // (Whether it is kept whole again now depends on the time since its
    // last record: not asserted.)
    assert!(c
        .poll_many(100, Duration::from_millis(300))
        .unwrap()
        .is_empty());
    assert_eq!(stat(c.stats().snapshot(), "duplicates"), 0);
    c.close().unwrap();
    p.close().unwrap();
}

/// After `forget_after` without news of a partition, the consumer forgets
/// its position too (given start offsets alike), but not one the
/// application seeked; a partition heard of again starts as a new one.
#[test]
fn a_consumer_forgets_positions_unheard_of_for_forget_after() {
    let p = quiet_producer();
    let (given, seeked) = ("6".repeat(32), "5".repeat(32));
    let c = consumer_of(
        &p,
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            idle_after: Duration::from_millis(200),
            forget_after: Some(Duration::from_millis(500)),
            start_offsets: vec![(given.clone(), 3)],
            ..Default::default()
        },
    );
    c.seek(&seeked, 7).unwrap();
    p.send_many((0..10u8).map(|i| vec![i]).collect(), None)
        .unwrap();
    assert_eq!(consume(&c, 10, Duration::from_secs(20)).len(), 10);
    let forgotten = || stat(c.stats().snapshot(), "partitions_forgotten");
    let deadline = Instant::now() + Duration::from_secs(20);
    while forgotten() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(forgotten(), 2, "{:?}", c.stats().snapshot());
    assert_eq!(c.positions(), vec![(seeked.clone(), 7)]);
    // Heard of again: a new partition, read from where `earliest` starts.
    p.send_many((10..15u8).map(|i| vec![i]).collect(), None)
        .unwrap();
    let got = consume(&c, 15, Duration::from_secs(20));
    assert_eq!(
        got.iter().map(|d| d.offset).collect::<Vec<_>>(),
        (0..15).collect::<Vec<_>>()
    );
    let mut want = vec![(p.address().to_string(), 15), (seeked, 7)];
    want.sort();
    assert_eq!(c.positions(), want);
    c.close().unwrap();
    p.close().unwrap();
}

/// `close` right after `send`: what was sent still goes out (a producer
/// with `min_acks = 0` has nothing else to wait for).
#[test]
fn records_sent_before_close_are_published() {
    let p = Producer::new(
        "t",
        ProducerConfig {
            min_acks: 0,
            ..Default::default()
        },
    )
    .unwrap();
    // From the first record it hears: with `min_acks = 0` those before are
    // released, and nothing would answer their FETCH.
    let latest = ConsumerConfig {
        offset_reset: OffsetReset::Latest,
        ..Default::default()
    };
    let c = consumer_of(&p, latest);
    // Until the consumer's subscription reached the producer.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut synced = Vec::new();
    while synced.is_empty() && Instant::now() < deadline {
        p.send(b"sync", None).unwrap();
        synced = c.poll_many(1, Duration::from_millis(50)).unwrap();
    }
    assert!(!synced.is_empty(), "the consumer never heard the producer");
    let mut last = 0;
    for i in 0..20_000u32 {
        last = p.send(i.to_be_bytes(), None).unwrap();
    }
    p.close().unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.last().is_none_or(|d: &Delivery| d.offset < last) && Instant::now() < deadline {
        got.extend(c.poll_many(10_000, Duration::from_millis(100)).unwrap());
    }
    assert_eq!(got.last().map(|d| d.offset), Some(last));
    assert_eq!(got.last().unwrap().value(), 19_999u32.to_be_bytes());
    c.close().unwrap();
}

/// `close` while another thread keeps sending: the sender is refused from
/// then on (`Error::Closed`), `close` returns, and every record whose `send`
/// returned an offset was published. Before, the closing thread drained each
/// batch the sender went on starting, and `close` did not return while it
/// sent.
#[test]
fn close_while_another_thread_sends_refuses_new_records_and_returns() {
    let p = std::sync::Arc::new(
        Producer::new(
            "t",
            ProducerConfig {
                min_acks: 0,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let sender = {
        let p = p.clone();
        std::thread::spawn(move || {
            let mut ok = 0u64;
            loop {
                match p.send(b"0123456789", None) {
                    Ok(off) => {
                        assert_eq!(off, ok);
                        ok += 1;
                    }
                    Err(e) => return (ok, e),
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.next_offset() < 10_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(p.next_offset() >= 10_000, "the sender did not start");
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let p = p.clone();
        std::thread::spawn(move || {
            let _ = tx.send(p.close().map_err(|e| e.to_string()));
        });
    }
    let closed = rx.recv_timeout(Duration::from_secs(60));
    assert_eq!(
        closed,
        Ok(Ok(())),
        "close did not return within 60 s while another thread sent"
    );
    let (ok, err) = sender.join().unwrap();
    assert!(matches!(err, Error::Closed), "{err}");
    assert_eq!(stat(p.stats().snapshot(), "records_sent"), ok);
}

#[test]
fn tower_discovery_end_to_end() {
    let t = tower();
    let node = |peers: Vec<String>| via_tower(&t, peers, 1000);
    let c = Consumer::new(
        &["weather".to_string()],
        ConsumerConfig {
            node: node(vec![]),
            offset_reset: OffsetReset::Earliest,
            ..Default::default()
        },
    )
    .unwrap();
    let p = Producer::new(
        "weather",
        ProducerConfig {
            node: node(vec![]),
            head_interval: Duration::from_millis(100),
            ..Default::default()
        },
    )
    .unwrap();
    let last = p
        .send_many(
            (0..5000u32).map(|i| i.to_be_bytes().to_vec()).collect(),
            None,
        )
        .unwrap();
    assert_eq!(last, Some(4999));
    let got = consume(&c, 5000, Duration::from_secs(30));
    assert_eq!(got.len(), 5000, "stats: {:?}", c.stats().snapshot());
    assert!(got.iter().enumerate().all(|(i, d)| d.offset == i as u64));
    assert_eq!(&*got[0].partition, p.address());
    assert!(t
        .stats()
        .snapshot()
        .iter()
        .any(|(k, v)| *k == "beacons" && *v > 0));
    p.close().unwrap();
    c.close().unwrap();
    t.close().unwrap();
}

fn stat(snapshot: Vec<(&'static str, u64)>, key: &str) -> u64 {
    snapshot
        .into_iter()
        .find(|(k, _)| *k == key)
        .map_or(0, |(_, v)| v)
}

#[test]
fn a_static_peer_stays_connected_when_its_discovered_twin_expires() {
    let t = tower();
    let node = |peers: Vec<String>| via_tower(&t, peers, 500);
    let p = Producer::new(
        "t",
        ProducerConfig {
            node: node(vec![]),
            ..Default::default()
        },
    )
    .unwrap();
    let c = Consumer::new(
        &["t".to_string()],
        ConsumerConfig {
            node: node(vec![p.endpoint().to_string()]),
            offset_reset: OffsetReset::Earliest,
            ..Default::default()
        },
    )
    .unwrap();
    let wait_peers = |want: u64| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while stat(c.stats().snapshot(), "peers") != want {
            assert!(Instant::now() < deadline, "peers never became {want}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The producer is both a static peer and discovered through the tower.
    wait_peers(1);
    // The tower goes: the discovered entry expires, the static peer stays.
    t.close().unwrap();
    wait_peers(0);
    for i in 0..100u32 {
        p.send(i.to_be_bytes(), None).unwrap();
    }
    let got = consume(&c, 100, Duration::from_secs(10));
    assert_eq!(got.len(), 100, "stats: {:?}", c.stats().snapshot());
    c.close().unwrap();
    p.close().unwrap();
}

#[test]
fn bind_error_is_reported_by_the_constructor() {
    let p = Producer::new("t", ProducerConfig::default()).unwrap();
    let taken = p.endpoint().to_string();
    let err = Producer::new(
        "t",
        ProducerConfig {
            node: NodeConfig {
                bind: taken.clone(),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .err()
    .expect("second bind must fail");
    assert!(err.to_string().contains(&taken), "{err}");
}

#[test]
fn a_seek_before_the_partition_is_known_starts_it_there() {
    let p = Producer::new("t", ProducerConfig::default()).unwrap();
    for i in 0..100u32 {
        p.send(i.to_be_bytes(), None).unwrap();
    }
    let c = consumer_of(&p, ConsumerConfig::default());
    // Nothing of the partition has reached the consumer yet (its first HEAD
    // comes after head_interval): the seek must wait for it, not be lost.
    c.seek(p.address(), 40).unwrap();
    c.seek(p.address(), 60).unwrap();
    let got = consume(&c, 40, Duration::from_secs(20));
    let offsets: Vec<u64> = got.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (60..100).collect::<Vec<_>>());
    assert_eq!(c.positions(), vec![(p.address().to_string(), 100)]);
    c.close().unwrap();
    p.close().unwrap();
}

#[test]
fn a_consumer_resumes_from_saved_positions() {
    let p = Producer::new("t", ProducerConfig::default()).unwrap();
    for i in 0..50u32 {
        p.send(i.to_be_bytes(), None).unwrap();
    }
    let c = consumer_of(&p, starting(vec![(p.address().to_string(), 20)]));
    assert_eq!(c.positions(), vec![(p.address().to_string(), 20)]);
    let got = consume(&c, 30, Duration::from_secs(20));
    assert_eq!(got.first().map(|d| d.offset), Some(20));
    assert_eq!(got.len(), 30);
    let saved = c.positions();
    assert_eq!(saved, vec![(p.address().to_string(), 50)]);
    c.close().unwrap();
    for i in 50..80u32 {
        p.send(i.to_be_bytes(), None).unwrap();
    }
    // A new consumer from the saved positions: exactly what came after.
    let c = consumer_of(&p, starting(saved));
    let got = consume(&c, 30, Duration::from_secs(20));
    let offsets: Vec<u64> = got.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (50..80).collect::<Vec<_>>());
    c.close().unwrap();
    p.close().unwrap();
}

/// The OS threads of this process named `name` (their TIDs).
pub(crate) fn threads_named(name: &str) -> Vec<i32> {
    let mut tids = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            tids.extend(e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()));
        }
    }
    tids
}

/// Starts a node with `start` and finds its thread (named `name`): the
/// one thread of that name that was not there before (retried while other
/// tests start nodes of the same kind at the same moment).
fn start_and_find_thread<T>(name: &str, start: impl Fn() -> T) -> (T, i32) {
    for _ in 0..50 {
        let before = threads_named(name);
        let node = start();
        let new: Vec<i32> = threads_named(name)
            .into_iter()
            .filter(|t| !before.contains(t))
            .collect();
        if let [tid] = new[..] {
            return (node, tid);
        }
        drop(node);
    }
    panic!("could not tell the node's thread apart");
}

/// Sends `SIGUSR2` (with a do-nothing handler) to the thread `tid` of
/// this process, `n` times: what any signal the process handles (Python's
/// SIGINT, the binaries' SIGTERM) does when the kernel hands it to a node
/// thread, which blocks no signal.
fn signal_thread(tid: i32, n: usize) {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: installs a handler that does nothing (async-signal-safe),
    // then sends the signal to one thread of this process.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        for _ in 0..n {
            libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A signal that the kernel delivers to a node's thread interrupts its poll
/// (EINTR, even with SA_RESTART): the node must poll again, not die. Any
/// signal the process handles can land there (a process-directed signal
/// goes to any thread that does not block it).
#[test]
fn a_signal_delivered_to_a_node_thread_does_not_kill_it() {
    let (p, tid) = start_and_find_thread("dafka-producer", || {
        Producer::new(
            "t",
            ProducerConfig {
                min_acks: 0,
                ..Default::default()
            },
        )
        .unwrap()
    });
    signal_thread(tid, 10);
    std::thread::sleep(Duration::from_millis(200));
    let alive = p.check();
    assert!(alive.is_ok(), "the producer died: {alive:?}");
    p.send(*b"after", None).unwrap();
    p.close().unwrap();
}

/// A node bound to `ipc://` (accepted by `validate`) with a tower: its
/// beacons carry port 0, which every tower drops as malformed, so no peer
/// ever finds it. It must be refused where it is configured, or be found.
#[test]
fn a_node_bound_to_ipc_with_a_tower_is_refused_or_discovered() {
    let t = tower();
    let dir = tempfile::tempdir().unwrap();
    let bind = format!("ipc://{}/p.sock", dir.path().display());
    let cfg = ProducerConfig {
        node: NodeConfig {
            bind,
            ..via_tower(&t, vec![], 1000)
        },
        min_acks: 0,
        ..Default::default()
    };
    let p = match Producer::new("t", cfg) {
        Err(Error::Config(_)) => return t.close().unwrap(),
        other => other.unwrap(),
    };
    // Wait until the tower has heard the node's beacon (relayed or dropped).
    let heard = || stat(t.stats().snapshot(), "beacons") + stat(t.stats().snapshot(), "malformed");
    let deadline = Instant::now() + Duration::from_secs(20);
    while heard() == 0 {
        assert!(Instant::now() < deadline, "the tower heard nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        stat(t.stats().snapshot(), "malformed"),
        0,
        "the tower dropped the node's beacons: {:?}",
        t.stats().snapshot()
    );
    p.close().unwrap();
    t.close().unwrap();
}

/// Everything a raw SUB subscribed to `prefixes` on `p` receives within
/// `within`, each message's frames.
fn watch(sub: &zmq::Socket, within: Duration) -> Vec<Vec<Vec<u8>>> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while Instant::now() < deadline {
        if sub.poll(zmq::POLLIN, 50).unwrap() > 0 {
            got.push(sub.recv_multipart(0).unwrap());
        }
    }
    got
}

/// A raw SUB on `p` with these prefixes, once they reached it: records sent
/// one at a time (plain RECORDs) until one arrives.
fn raw_sub(ctx: &zmq::Context, p: &Producer, prefixes: &[&[u8]]) -> zmq::Socket {
    let sub = ctx.socket(zmq::SUB).unwrap();
    for x in prefixes {
        sub.set_subscribe(x).unwrap();
    }
    sub.connect(p.endpoint()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        p.send(b"probe", None).unwrap();
        if sub.poll(zmq::POLLIN, 100).unwrap() > 0 {
            while sub.poll(zmq::POLLIN, 100).unwrap() > 0 {
                sub.recv_multipart(0).unwrap();
            }
            return sub;
        }
        assert!(Instant::now() < deadline, "the SUB never connected");
    }
}

/// A producer publishes to this project's nodes (who subscribe `X` + topic
/// beside `M` + topic) META-RECORD-BATCHes of bodies (keys, headers and
/// create times with the values), of at most 64 KiB (a larger body alone),
/// offsets in order. A node that subscribes `M` + topic alone (the C
/// reference) gets each record's value as a RECORD, byte for byte, without
/// record batches, and none with them (it FETCHes); then this project's
/// nodes get those RECORDs too, as duplicates they drop.
#[test]
fn a_producer_sends_bodies_to_ours_and_plain_values_to_others() {
    use _native::node::producer::Extra;
    use _native::wire::Message as W;
    for record_batches in [false, true] {
        let ctx = zmq::Context::new();
        let p = Producer::new(
            "t",
            ProducerConfig {
                record_batches,
                min_acks: 0,
                head_interval: Duration::from_millis(100),
                ..Default::default()
            },
        )
        .unwrap();
        let ours = raw_sub(&ctx, &p, &[b"Xt", b"Mt"]);
        let plain = raw_sub(&ctx, &p, &[b"Mt", b"Ht"]);
        // Drain what the second SUB's probes sent to the first.
        watch(&ours, Duration::from_millis(200));
        watch(&plain, Duration::from_millis(200));
        let first = p.next_offset();
        let mut values: Vec<Vec<u8>> = (0..2000u32).map(|i| i.to_be_bytes().repeat(25)).collect();
        values.insert(700, vec![7u8; 70_000]);
        p.send_many(values.clone(), None).unwrap();
        let headers = [("h", &b"1"[..]), ("h", &b""[..]), ("名", &b"\xff"[..])];
        let extra = Extra {
            key: Some(b"k"),
            headers: &headers,
            timestamp: Some(1_700_000_000_123),
        };
        p.send_record_with(b"keyed", &extra, None, || Ok::<(), Error>(()))
            .unwrap();
        values.push(b"keyed".to_vec());
        let mut got: Vec<(u64, Vec<u8>)> = Vec::new();
        let (mut batches, mut dups) = (0, 0);
        let mut keyed = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < values.len() && Instant::now() < deadline {
            for frames in watch(&ours, Duration::from_millis(100)) {
                match _native::wire::decode(&frames).unwrap().0 {
                    W::MetaRecordBatch(b) => {
                        assert!(b.values.len() <= config::WIRE_BATCH_BYTES || b.count == 1);
                        batches += 1;
                        for (off, body) in (b.sequence..).zip(b.values()) {
                            let (m, v) = _native::meta::split(body).unwrap();
                            if v == b"keyed" {
                                keyed = Some(m.to_owned());
                            }
                            got.push((off, v.to_vec()));
                        }
                    }
                    W::Record(_) => dups += 1,
                    m => panic!("unexpected {m:?}"),
                }
            }
        }
        let want: Vec<(u64, Vec<u8>)> = (first..).zip(values.clone()).collect();
        assert_eq!(got, want);
        assert!((4..=8).contains(&batches), "{batches} batches");
        let keyed = keyed.unwrap();
        assert_eq!(keyed.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(keyed.create_time, 1_700_000_000_123);
        assert_eq!(
            keyed.headers,
            vec![
                ("h".to_string(), b"1".to_vec()),
                ("h".to_string(), b"".to_vec()),
                ("名".to_string(), b"\xff".to_vec())
            ]
        );
        // The plain subscriber: every value as a RECORD, or none.
        let plain_got: Vec<(u64, Vec<u8>)> = watch(&plain, Duration::from_millis(500))
            .iter()
            .filter_map(|f| match _native::wire::decode(f).unwrap().0 {
                W::Record(r) => Some((r.sequence, r.content.to_vec())),
                W::Head(_) => None,
                m => panic!("unexpected {m:?}"),
            })
            .collect();
        if record_batches {
            assert!(plain_got.is_empty(), "{} RECORDs", plain_got.len());
            assert_eq!(dups, 0);
        } else {
            assert_eq!(plain_got, want);
            assert_eq!(dups, values.len());
        }
        p.close().unwrap();
    }
}

fn fetches_sent(c: &Consumer) -> u64 {
    let stats = c.stats().snapshot();
    stats.iter().find(|(k, _)| *k == "fetches_sent").unwrap().1
}

/// A consumer receives a batching producer's RECORD-BATCHes live, in
/// order, with no FETCH.
#[test]
fn a_consumer_takes_record_batches_live() {
    let p = Producer::new(
        "t",
        ProducerConfig {
            record_batches: true,
            head_interval: Duration::from_secs(600),
            ..Default::default()
        },
    )
    .unwrap();
    let c = earliest_consumer_of(&p);
    // Connected both ways once a probe arrives.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut probes = Vec::new();
    while probes.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the consumer never connected: {:?}",
            c.stats().snapshot()
        );
        p.send(b"probe", None).unwrap();
        probes = c.poll_many(100, Duration::from_millis(100)).unwrap();
    }
    let before = fetches_sent(&c);
    let values: Vec<Vec<u8>> = (0..50_000u32).map(|i| i.to_be_bytes().to_vec()).collect();
    p.send_many(values.clone(), None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut got = Vec::new();
    while got.len() < values.len() && Instant::now() < deadline {
        let more = c.poll_many(10_000, Duration::from_millis(100)).unwrap();
        got.extend(more.into_iter().filter(|d| d.value() != b"probe"));
    }
    assert_eq!(got.len(), values.len());
    let first = got[0].offset;
    for (i, d) in got.iter().enumerate() {
        assert_eq!(
            (d.offset, d.value()),
            (first + i as u64, values[i].as_slice())
        );
    }
    assert_eq!(fetches_sent(&c), before, "nothing fetched");
    c.close().unwrap();
    p.close().unwrap();
}

/// A signal that the kernel delivers to the tower's thread interrupts its
/// poll (EINTR, even with SA_RESTART): the tower must poll again, not
/// stop relaying beacons for good.
#[test]
fn a_signal_delivered_to_the_tower_thread_does_not_stop_it() {
    let (tower, tid) = start_and_find_thread("dafka-tower", tower);
    signal_thread(tid, 10);
    std::thread::sleep(Duration::from_millis(200));
    let alive = tower.check();
    assert!(alive.is_ok(), "the tower stopped: {alive:?}");
    tower.close().unwrap();
}

// ------------------- review tests of the consumer handle across threads

static IN_HANDLER: AtomicBool = AtomicBool::new(false);
static RELEASE: AtomicBool = AtomicBool::new(false);

/// Holds the thread it lands on until `RELEASE` (async-signal-safe:
/// atomics and nanosleep only).
extern "C" fn hold(_: libc::c_int) {
    IN_HANDLER.store(true, SeqCst);
    while !RELEASE.load(SeqCst) {
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        // SAFETY: nanosleep is async-signal-safe.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }
}

/// Sets `RELEASE` however the test ends, so no thread stays held.
struct Release;
impl Drop for Release {
    fn drop(&mut self) {
        RELEASE.store(true, SeqCst);
    }
}

/// Two threads poll one consumer (Python releases the GIL in `poll`).
/// Thread A takes offset 0, thread B then offset 1; A was preempted
/// between taking its record from the channel and noting its position
/// (here: a signal handler holds it there). The application was given
/// offsets 0 and 1, so `positions()` must say 2; it said 1, and a
/// consumer resumed from it got offset 1 twice.
#[test]
fn positions_never_go_back_when_two_threads_poll() {
    let _release = Release;
    let p = Producer::new("t", ProducerConfig::default()).unwrap();
    for i in 0..10u32 {
        p.send(i.to_be_bytes(), None).unwrap();
    }
    let c = Consumer::new(
        &["t".to_string()],
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            node: _native::node::NodeConfig {
                peers: vec![p.endpoint().to_string()],
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    p.connect(c.endpoint()).unwrap();
    let buffered = || c.buffered();
    wait_for("10 records delivered", Duration::from_secs(30), || {
        buffered() == 10
    });
    // SAFETY: installs a handler for SIGUSR1 (used by no other test).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = hold as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    let tid_a = AtomicI32::new(0);
    let (a_got, b_got, positions) = std::thread::scope(|s| {
        let held = c.hold_positions();
        let a = s.spawn(|| {
            // SAFETY: gettid has no preconditions.
            tid_a.store(unsafe { libc::syscall(libc::SYS_gettid) } as i32, SeqCst);
            let mut v = Vec::new();
            c.poll_slice(1, Duration::from_secs(10), &mut v).unwrap();
            v
        });
        wait_for("A took a record", Duration::from_secs(10), || {
            buffered() == 9
        });
        let b = s.spawn(|| {
            let mut v = Vec::new();
            c.poll_slice(1, Duration::from_secs(10), &mut v).unwrap();
            v
        });
        // Before the fix B took its record while A waited to note its
        // position; now B waits for A (the channel's lock is held until
        // the positions are noted), and nothing more happens here.
        let deadline = Instant::now() + Duration::from_secs(2);
        while buffered() != 8 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if buffered() == 8 {
            // A is preempted where it waits to note its position.
            // SAFETY: signals one thread of this process.
            unsafe {
                libc::syscall(
                    libc::SYS_tgkill,
                    libc::getpid(),
                    tid_a.load(SeqCst),
                    libc::SIGUSR1,
                );
            }
            wait_for("A preempted", Duration::from_secs(10), || {
                IN_HANDLER.load(SeqCst)
            });
        }
        drop(held);
        let b_got = b.join().unwrap();
        RELEASE.store(true, SeqCst);
        let a_got = a.join().unwrap();
        (a_got, b_got, c.positions())
    });
    let offsets = |v: &[Delivery]| v.iter().map(|d| d.offset).collect::<Vec<_>>();
    assert_eq!((offsets(&a_got), offsets(&b_got)), (vec![0], vec![1]));
    assert_eq!(
        positions,
        vec![(p.address().to_string(), 2)],
        "offsets 0 and 1 were given to the application"
    );
    c.close().unwrap();
    p.close().unwrap();
}

/// `validate` took any `idle_after` (> 0), and `Duration::MAX` reads as
/// "never idle" (as `forget_after: None` is "never forget"). The node
/// thread adds it to `Instant::now()` when it first hears of a
/// partition, and died of the overflow: a config the constructor
/// accepted killed the consumer at its first record. Such a config is
/// refused now, and the longest one taken (about 95 years) works.
#[test]
fn a_consumer_that_never_goes_idle_survives_its_first_record() {
    let p = Producer::new("t", ProducerConfig::default()).unwrap();
    let cfg = |idle_after: Duration| ConsumerConfig {
        offset_reset: OffsetReset::Earliest,
        idle_after,
        forget_after: None,
        node: _native::node::NodeConfig {
            peers: vec![p.endpoint().to_string()],
            ..Default::default()
        },
        ..Default::default()
    };
    let refused = Consumer::new(&["t".to_string()], cfg(Duration::MAX));
    assert!(matches!(refused, Err(Error::Config(_))));
    let retry_forever = ConsumerConfig {
        fetch_retry: Duration::MAX,
        ..cfg(Duration::from_secs(60))
    };
    let refused = Consumer::new(&["t".to_string()], retry_forever);
    assert!(matches!(refused, Err(Error::Config(_))));
    let cfg = cfg(_native::node::config::LONGEST);
    let c = Consumer::new(&["t".to_string()], cfg).unwrap();
    p.connect(c.endpoint()).unwrap();
    for i in 0..5u32 {
        p.send(i.to_be_bytes(), None).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut got = Vec::new();
    while got.len() < 5 && Instant::now() < deadline {
        match c.poll_many(100, Duration::from_millis(100)) {
            Ok(v) => got.extend(v),
            Err(e) => panic!("the consumer died: {e}"),
        }
    }
    assert_eq!(got.len(), 5);
    c.close().unwrap();
    p.close().unwrap();
}

/// Empty values are records too: released by an ACK (or at once with
/// `min_acks = 0`), they must show in `acked_offset` and let `flush`
/// return 0. The node thread used to publish a release only when it
/// freed bytes, so a release of empty records only never reached
/// `acked_offset`, and `flush` waited for them until it timed out.
#[test]
fn empty_records_released_are_reported_and_flushed() {
    let p = Producer::new(
        "t",
        ProducerConfig {
            min_acks: 0,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.send(b"", None).unwrap(), 0);
    assert_eq!(
        p.flush(Duration::from_secs(2)).unwrap(),
        0,
        "nothing outstanding"
    );
    assert_eq!(p.acked_offset(), Some(0));
    p.close().unwrap();
}
