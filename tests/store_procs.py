"""Processes for the store tests: ``python tests/store_procs.py ROLE ...``.

- ``store DIR TOWER [WIRE [CERT TRUST]]``: runs a store in DIR (sending in dialect
  WIRE, default ``rfc``; secure with CERT and TRUST), prints ``READY address endpoint``, runs
  until stdin closes (then closes cleanly and prints ``CLOSED``) or it is killed.
- ``producer TOWER TOPIC N``: publishes N records (value = the offset as 8 digits,
  padded to 100 bytes), waits until a store ACKed all of them, prints ``ACKED N``
  and exits.
- ``partitions DIR N SOFT [HARD]``: lowers this process's soft open-files limit to
  SOFT (and the hard one to HARD if given), runs a store in DIR, publishes one
  record for each of N partitions to it from a raw ZeroMQ socket, waits until the
  store holds them all, prints ``HELD n LIMIT soft ERROR error OPEN files`` and
  exits.
- ``two_stores DIR N LIMIT``: sets the open-files limits (soft and hard) to LIMIT,
  runs two stores in this one process (DIR/a, DIR/b), publishes N partitions to
  each, waits until both hold them, prints ``HELD a b ERROR error error OPEN
  files`` (segment files open in the process) and exits.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import dafka


def value(i: int) -> bytes:
    return (b"%08d" % i).ljust(100, b".")


def store(
    path: str, tower: str, wire: str = "rfc", cert: str | None = None, trust: str | None = None
) -> int:
    with dafka.Store(
        path,
        towers=[tower],
        wire=wire,
        beacon_interval=0.2,
        beacon_timeout=3.0,
        cert=cert,
        trust=trust,
    ) as s:
        print(f"READY {s.address} {s.endpoint}", flush=True)
        sys.stdin.read()
    print("CLOSED", flush=True)
    return 0


def producer(tower: str, topic: str, n: int) -> int:
    with dafka.Producer(
        topic, towers=[tower], head_interval=0.2, beacon_interval=0.2, beacon_timeout=3.0
    ) as p:
        print(f"READY {p.address}", flush=True)
        for i in range(0, n, 1000):
            p.send_many([value(j) for j in range(i, min(n, i + 1000))])
        deadline = time.monotonic() + 120
        while p.flush(1.0) and time.monotonic() < deadline:
            pass
        left = p.flush(0)
        print(f"ACKED {n - left}", flush=True)
        return 0 if left == 0 else 1


def partitions(path: str, n: int, soft: int, hard: int | None) -> int:
    import resource

    if hard is None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    with dafka.Store(path, beacon_interval=0.2) as s:
        pub = publish_partitions(s, n)
        deadline = time.monotonic() + 60
        while len(s.partitions("t")) < n and s.stats()["error"] is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        held, stats = len(s.partitions("t")), s.stats()
        pub.close()
    now = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    print(f"HELD {held} LIMIT {now} ERROR {stats['error']} OPEN {stats['open_files']}", flush=True)
    return 0


def publish_partitions(s: dafka.Store, n: int) -> Any:
    """N one-record partitions of topic ``t`` to ``s``, from a raw ZeroMQ socket;
    returns the socket, to close once the store holds them (LINGER is 0)."""
    import zmq

    from dafka import wire

    pub = zmq.Context.instance().socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.RCVTIMEO, 10_000)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    s.connect(f"tcp://127.0.0.1:{port}")
    while pub.recv() != b"\x01M":  # the store subscribed to every RECORD
        pass
    time.sleep(0.2)
    for i in range(n):
        rec = wire.Record(topic=b"t", address=b"%032X" % i, subject=b"t", sequence=0, content=b"x")
        pub.send_multipart(wire.encode(rec))
    return pub


def two_stores(path: str, n: int, limit: int) -> int:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    with (
        dafka.Store(f"{path}/a", beacon_interval=0.2) as a,
        dafka.Store(f"{path}/b", beacon_interval=0.2) as b,
    ):
        pubs = [publish_partitions(a, n), publish_partitions(b, n)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            len(s.partitions("t")) < n and s.stats()["error"] is None for s in (a, b)
        ):
            time.sleep(0.1)
        held = [len(s.partitions("t")) for s in (a, b)]
        errors = [s.stats()["error"] for s in (a, b)]
        files = sum(int(s.stats()["open_files"] or 0) for s in (a, b))
        for pub in pubs:
            pub.close()
    print(f"HELD {held[0]} {held[1]} ERROR {errors[0]} {errors[1]} OPEN {files}", flush=True)
    return 0


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "store":
        sys.exit(store(*args))
    if role == "two_stores":
        sys.exit(two_stores(args[0], int(args[1]), int(args[2])))
    if role == "partitions":
        hard = int(args[3]) if len(args) > 3 else None
        sys.exit(partitions(args[0], int(args[1]), int(args[2]), hard))
    sys.exit(producer(args[0], args[1], int(args[2])))
