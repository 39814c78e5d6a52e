"""What a Prometheus scrape costs a store: run after ``maturin develop --release``.

A tower, a store and a producer in this process, with ``dafka.serve_metrics``
running throughout. Each round sends N records of 100 B (``send_many`` of 1,000)
and waits until the store ACKed them all (durable); its rate is N over that time.
Rounds alternate between no scraper and a scraper that GETs ``/metrics`` every
100 ms from a process of its own (as Prometheus would, from outside the node's
process); the scraper also reports its scrapes and their longest answer time.

``python benches/metrics_py.py [N] [ROUNDS]`` (defaults 300,000 and 4 of each).
Results: benches/RESULTS.md, "Metrics".
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dafka

SCRAPER = r"""
import sys, time, urllib.request
url = sys.argv[1]
n, longest = 0, 0.0
print("ready", flush=True)
try:
    while True:
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as r:
            r.read()
        took = time.perf_counter() - t0
        n, longest = n + 1, max(longest, took)
        time.sleep(max(0.0, 0.1 - took))
except KeyboardInterrupt:
    print(n, longest, flush=True)
"""


def one_round(p: dafka.Producer, n: int, value: bytes) -> float:
    batch = [value] * 1000
    t0 = time.perf_counter()
    for _ in range(n // 1000):
        p.send_many(batch, timeout=60)
    left = p.flush(timeout=120)
    assert left == 0, f"{left} records not ACKed"
    return n / (time.perf_counter() - t0)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    value = b"x" * 100
    rates: dict[str, list[float]] = {"none": [], "scraped": []}
    scrapes: list[str] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        dafka.Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        dafka.Store(Path(tmp) / "s", towers=[tower.endpoint]) as store,
        dafka.Producer("bench", towers=[tower.endpoint], max_unacked_bytes=64 << 20) as p,
        dafka.serve_metrics() as server,
    ):
        p.wait_for_stores(1, timeout=60)
        one_round(p, min(n, 50_000), value)  # warm-up
        for i in range(2 * rounds):
            side = "scraped" if i % 2 else "none"
            scraper = None
            if side == "scraped":
                scraper = subprocess.Popen(
                    [sys.executable, "-c", SCRAPER, server.url],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert scraper.stdout is not None
                assert scraper.stdout.readline().strip() == "ready"
            rate = one_round(p, n, value)
            rates[side].append(rate)
            if scraper is not None:
                scraper.send_signal(2)  # SIGINT: it prints its count and stops
                out, _ = scraper.communicate(timeout=60)
                count, longest = out.split()
                scrapes.append(f"{count} scrapes, longest {float(longest) * 1e3:.1f} ms")
            print(f"round {i + 1} {side}: {rate:,.0f} rec/s", flush=True)
        appended = store.stats()["appended"]
    none, scraped = statistics.median(rates["none"]), statistics.median(rates["scraped"])
    print(f"records appended: {appended:,}")
    print(f"no scraper: {', '.join(f'{r:,.0f}' for r in rates['none'])} (median {none:,.0f})")
    print(
        f"scraped every 100 ms: {', '.join(f'{r:,.0f}' for r in rates['scraped'])} "
        f"(median {scraped:,.0f}); {'; '.join(scrapes)}"
    )
    print(f"ratio (medians): {scraped / none:.1%}")


if __name__ == "__main__":
    main()
