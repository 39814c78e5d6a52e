"""Processes for the multi-process tests: ``python tests/live_procs.py ROLE ...``.

- ``producer TOWER TOPIC N WIRE``: publishes N records (value = the offset as 8 digits),
  prints ``SENT``, then keeps serving FETCHes until stdin closes.
- ``consumer TOWER TOPIC N WIRE``: consumes (earliest) until N records arrived, checks
  offsets 0..N-1 in order with matching values, prints ``OK N`` and exits 0 (1 if not).
"""

from __future__ import annotations

import sys
import time

import dafka


def producer(tower: str, topic: str, n: int, wire: str) -> int:
    with dafka.Producer(
        topic,
        towers=[tower],
        wire=wire,
        head_interval=0.2,
        beacon_interval=0.2,
        beacon_timeout=3.0,
        close_timeout=0,  # no store: nothing to wait for
    ) as p:
        print(f"READY {p.address}", flush=True)
        for i in range(0, n, 1000):
            p.send_many([b"%08d" % j for j in range(i, min(n, i + 1000))])
        print("SENT", flush=True)
        sys.stdin.read()  # serve FETCHes until the test closes our stdin
    return 0


def consumer(tower: str, topic: str, n: int, wire: str) -> int:
    with dafka.Consumer(
        [topic],
        towers=[tower],
        wire=wire,
        offset_reset="earliest",
        beacon_interval=0.2,
        beacon_timeout=3.0,
    ) as c:
        print(f"READY {c.address}", flush=True)
        expected = 0
        deadline = time.monotonic() + 90
        while expected < n and time.monotonic() < deadline:
            for r in c.poll_many(timeout=0.5):
                if r.offset != expected or r.value != b"%08d" % expected or r.topic != topic:
                    print(f"BAD record {r.offset} (expected {expected})", flush=True)
                    return 1
                expected += 1
        print(f"OK {expected}" if expected == n else f"SHORT {expected}", flush=True)
        return 0 if expected == n else 1


if __name__ == "__main__":
    role, tower, topic, count, wire = sys.argv[1:6]
    sys.exit({"producer": producer, "consumer": consumer}[role](tower, topic, int(count), wire))
