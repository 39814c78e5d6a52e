"""Processes for the store tests: ``python tests/store_procs.py ROLE ...``.

- ``store DIR TOWER``: runs a store in DIR, prints ``READY address endpoint``, runs
  until stdin closes (then closes cleanly and prints ``CLOSED``) or it is killed.
- ``producer TOWER TOPIC N``: publishes N records (value = the offset as 8 digits,
  padded to 100 bytes), waits until a store ACKed all of them, prints ``ACKED N``
  and exits.
"""

from __future__ import annotations

import sys
import time

import dafka


def value(i: int) -> bytes:
    return (b"%08d" % i).ljust(100, b".")


def store(path: str, tower: str) -> int:
    with dafka.Store(path, towers=[tower], beacon_interval=0.2, beacon_timeout=3.0) as s:
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


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "store":
        sys.exit(store(args[0], args[1]))
    sys.exit(producer(args[0], args[1], int(args[2])))
