"""Live-path benchmark through the Python API (run after ``maturin develop --release``):

- ``send`` per record and ``send_many`` (1000-record lists): the producer-side call
  rate (each is an enqueue onto the node thread), with a consumer attached;
- end to end: ``send_many`` → ``poll_many`` records/s, producer and consumer in this
  process (static peers, ``min_acks=0``);
- ``poll_many`` alone: draining records already delivered to the consumer's buffer
  into ``dafka.Record`` objects;
- memory: how much the process grows while a producer holds 1M records of 100 B
  that no store has ACKed (``min_acks=1``, no store), sent with ``send`` and with
  ``send_many``.

``python benches/live_py.py [N]``. Results: benches/RESULTS.md, "Live path".
"""

from __future__ import annotations

import subprocess
import sys
import time

from dafka import Consumer, Producer


def pair() -> tuple[Producer, Consumer]:
    p = Producer("bench", min_acks=0, sndhwm=0, rcvhwm=0)
    c = Consumer(
        ["bench"],
        peers=[p.endpoint],
        offset_reset="latest",
        max_buffered=1 << 30,
        sndhwm=0,
        rcvhwm=0,
    )
    p.connect(c.endpoint)
    while True:  # slow joiner: until the consumer sees a record
        p.send(b"sync")
        if c.poll_many(timeout=0.05):
            break
    while c.poll_many(timeout=0.1):
        pass
    return p, c


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def held_memory(n: int, batched: bool) -> float:
    """MiB the process grows by while a producer holds ``n`` unACKed 100 B records."""
    p = Producer("bench-held", min_acks=1, max_unacked_bytes=1 << 30)
    value = b"\x5a" * 100
    before = rss_mib()
    if batched:
        for _ in range(n // 1000):
            p.send_many([value] * 1000)
    else:
        for _ in range(n):
            p.send(value)
    # Held, not sent: with nobody subscribed the producer publishes nothing (it
    # answers FETCHes), so wait until its thread holds every record's bytes.
    while p.unacked_bytes < n * len(value):
        time.sleep(0.01)
    grown = rss_mib() - before
    p.close(timeout=0)  # no store: nothing to wait for
    return grown


def drain(c: Consumer, n: int) -> None:
    got = 0
    while got < n:
        got += len(c.poll_many(max_records=65536, timeout=5.0))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    print("| case | size | records | rec/s |")
    print("|---|---|---|---|")
    for size in (100, 1024):
        m = n if size == 100 else n // 2
        value = b"\x5a" * size
        batch = [value] * 1000

        p, c = pair()
        send = p.send
        t = time.perf_counter()
        for _ in range(m):
            send(value)
        r = m / (time.perf_counter() - t)
        print(f"| Python send (call rate) | {size} B | {m} | {r:.0f} |")
        drain(c, m)
        p.close()
        c.close()

        p, c = pair()
        t = time.perf_counter()
        for _ in range(m // 1000):
            p.send_many(batch)
        r = m / (time.perf_counter() - t)
        print(f"| Python send_many(1000) (call rate) | {size} B | {m} | {r:.0f} |")
        drain(c, m)
        r = m / (time.perf_counter() - t)
        print(f"| Python send_many → poll_many, end to end | {size} B | {m} | {r:.0f} |")
        p.close()
        c.close()

        p, c = pair()
        for _ in range(m // 1000):
            p.send_many(batch)
        deadline = time.monotonic() + 60
        while c.stats()["delivered"] < m + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        if c.stats()["delivered"] < m + 1:
            # 1 KiB values (2026-11-29, also on 39d4d1f): the consumer pauses
            # (`pauses` 1) at about 263,000 records, about 4 KiB of its
            # `max_buffered` (1 GiB) per 1 KiB record, so nothing more arrives
            # until something is polled. To look into: what a buffered record counts.
            print(f"| Python poll_many | {size} B | {m} | n/a: {c.stats()} |")
            p.close(timeout=0)
            c.close()
            continue
        t = time.perf_counter()
        drain(c, m)
        r = m / (time.perf_counter() - t)
        print(f"| Python poll_many (drain to Record objects) | {size} B | {m} | {r:.0f} |")
        p.close()
        c.close()
    print()
    print("| records held unACKed (100 B) | sent with | RSS growth (a fresh process each) |")
    print("|---|---|---|")
    for how in ("send", "send_many"):
        out = subprocess.run(
            [sys.executable, __file__, "--held", how, str(n)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        label = "send_many(1000)" if how == "send_many" else how
        print(f"| {n} | {label} | {float(out):.0f} MiB |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--held"]:
        print(held_memory(int(sys.argv[3]), sys.argv[2] == "send_many"))
    else:
        main()
