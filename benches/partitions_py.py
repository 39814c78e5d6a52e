"""Many partitions in one store (every Spark task, every producer run is a new
partition): run after ``maturin develop --release``.

N partitions of 3 small records each reach one store from a raw ZeroMQ socket
(the way N producers' first records would), then:

- ingest: until the store holds all 3N records (durable: it ACKs only what it
  synced). Baseline, the same disk work by hand: per partition a directory, two
  files, the records written; then, by path, an fdatasync of every file and an
  fsync of every directory.
- catch-up: a consumer started with ``earliest`` after that gets all 3N records
  from the store alone (one DIRECT-HEAD per partition, then a FETCH each); also
  its FETCHes per partition. Baseline: reading each partition's file back (open,
  read, close), as the store must when its open-files budget is smaller than N.
- reopen: closing the store and opening it again on the same directory.
- live: with those N partitions known, the consumer's thread CPU while one
  producer streams 60,000 records at 20,000/s (in sends of 20), against the
  same stream to a consumer that knows one partition (the baseline: what a
  record costs the consumer's thread when nothing else is known).
- replication: a second, empty store in the same process, with the first as its
  peer, until it holds all 3N records too (GET-HEADS, then a FETCH per partition;
  the two logs share the process's open-files budget). Also its FETCHes per
  partition.

``python benches/partitions_py.py [N]`` (default 20,000). Results:
benches/RESULTS.md, "Many partitions".
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import zmq

import dafka
from dafka import wire

TOPIC = b"t"


def name(i: int) -> str:
    return f"{i:032X}"


def raw_ingest(root: Path, n: int) -> float:
    t0 = time.perf_counter()
    paths: list[Path] = []
    for i in range(n):
        d = root / name(i)
        d.mkdir(parents=True)
        log, idx = d / "00000000000000000000.log", d / "00000000000000000000.index"
        log.write_bytes(b"x" * (3 * 30))
        idx.write_bytes(b"")
        paths += [log, idx, d]
    # Synced by path, one at a time (as the store does past its open-files budget).
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd) if path.is_dir() else os.fdatasync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - t0


def raw_read(root: Path, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        with open(root / name(i) / "00000000000000000000.log", "rb") as f:
            f.read()
    return time.perf_counter() - t0


def ingest(store: dafka.Store, n: int) -> float:
    pub = zmq.Context.instance().socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 0)
    pub.setsockopt(zmq.RCVTIMEO, 10_000)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    store.connect(f"tcp://127.0.0.1:{port}")
    while pub.recv() != b"\x01M":  # the store subscribed to every RECORD
        pass
    time.sleep(0.2)
    msgs = [
        wire.encode(
            wire.Record(
                topic=TOPIC,
                address=name(i).encode(),
                subject=TOPIC,
                sequence=seq,
                content=b"record-%d" % seq,
            )
        )
        for i in range(n)
        for seq in range(3)
    ]
    t0 = time.perf_counter()
    for m in msgs:
        pub.send_multipart(m)
    deadline = time.monotonic() + 600
    while sum(p.next_offset for p in store.partitions("t")) < 3 * n:
        if time.monotonic() > deadline:
            raise SystemExit(f"the store did not get every record: {store.stats()}")
        time.sleep(0.05)
    # Held is not enough: durable (every record synced) is what an ACK means.
    while any(p.durable_next < p.next_offset for p in store.partitions("t")):
        time.sleep(0.05)
    took = time.perf_counter() - t0
    pub.close()
    return took


def catch_up(store: dafka.Store, n: int) -> tuple[float, int, float]:
    """Catch-up time and FETCHes, then the consumer's CPU for a live stream."""
    t0 = time.perf_counter()
    with dafka.Consumer(["t"], peers=[store.endpoint], offset_reset="earliest") as c:
        store.connect(c.endpoint)
        got = 0
        deadline = time.monotonic() + 600
        while got < 3 * n:
            if time.monotonic() > deadline:
                raise SystemExit(f"the consumer got {got} of {3 * n}: {c.stats()}")
            got += len(c.poll_many(timeout=0.5))
        took, fetches = time.perf_counter() - t0, c.stats()["fetches_sent"]
        return took, fetches, live(store, c, "t")


def consumer_cpu() -> float:
    """CPU seconds of this process's consumer threads so far."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            if Path(f"/proc/self/task/{tid}/comm").read_text().strip() != "dafka-consumer":
                continue
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


LIVE_RECORDS, LIVE_RATE = 60_000, 20_000


def live(store: dafka.Store, consumer: dafka.Consumer, topic: str) -> float:
    """The consumer thread's CPU seconds for a paced live stream of one producer."""
    with dafka.Producer(topic, peers=[store.endpoint], min_acks=0) as p:
        consumer.connect(p.endpoint)
        deadline = time.monotonic() + 30
        while not consumer.poll_many(timeout=0.1):  # joined: a record went through
            if time.monotonic() > deadline:
                raise SystemExit(f"no live record reached the consumer: {consumer.stats()}")
            p.send(b"hello")
        batch = [b"x" * 100] * 20
        cpu0, t0 = consumer_cpu(), time.perf_counter()
        for sent in range(0, LIVE_RECORDS, len(batch)):
            wait = t0 + sent / LIVE_RATE - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            p.send_many(batch)
            consumer.poll_many(timeout=0)
        got = 0
        while got < LIVE_RECORDS:  # what the loop above took counts too
            got = consumer.stats()["delivered"] - 1
            if time.monotonic() > deadline + 60:
                raise SystemExit(f"the consumer got {got} of {LIVE_RECORDS}: {consumer.stats()}")
            consumer.poll_many(timeout=0.1)
        return consumer_cpu() - cpu0


def replicate(a: dafka.Store, path: Path, n: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    with dafka.Store(path, peers=[a.endpoint]) as b:
        a.connect(b.endpoint)
        deadline = time.monotonic() + 600
        while sum(p.next_offset for p in b.partitions("t")) < 3 * n:
            if time.monotonic() > deadline:
                raise SystemExit(f"the second store did not catch up: {b.stats()}")
            time.sleep(0.05)
        return time.perf_counter() - t0, int(b.stats()["store_fetches_sent"] or 0)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent.parent / "target") as tmp:
        root = Path(tmp)
        raw_w = raw_ingest(root / "raw", n)
        raw_r = raw_read(root / "raw", n)
        shutil.rmtree(root / "raw")
        with dafka.Store(root / "store") as s:
            took = ingest(s, n)
            with dafka.Consumer(["u"], peers=[s.endpoint]) as c:
                live_one = live(s, c, "u")
            catch, fetches, live_n = catch_up(s, n)
            files = s.stats()["open_files"]
        t0 = time.perf_counter()
        with dafka.Store(root / "store") as s:
            reopen = time.perf_counter() - t0
            held = len(s.partitions("t"))
            repl, repl_fetches = replicate(s, root / "replica", n)
    print(f"{n} partitions x 3 records (store kept {files} files open; reopened with {held})")
    print(
        f"ingest, durable: store {took:.2f} s | raw disk {raw_w:.2f} s | ratio {raw_w / took:.0%}"
    )
    print(
        f"late consumer catch-up: {catch:.2f} s, {fetches / n:.1f} FETCHes per partition"
        f" | raw read of every file {raw_r:.2f} s"
    )
    print(
        f"live, consumer thread CPU for {LIVE_RECORDS} records at {LIVE_RATE}/s:"
        f" {n} partitions known {live_n:.2f} s | one known {live_one:.2f} s"
    )
    print(f"store reopen: {reopen:.2f} s")
    print(f"replication to a new store: {repl:.2f} s, {repl_fetches / n:.1f} FETCHes per partition")


if __name__ == "__main__":
    main()
