"""A Spark streaming query's time per micro-batch: a producer writes 1,000
records of 100 B every 100 ms into a local store while a query reads the topic
(``readStream.format("dafka")``, default trigger: the next micro-batch as soon
as the last one ended) into the ``noop`` sink. Per micro-batch, from Spark's own
progress reports (``durationMs``): ``latestOffset`` (planning: the heads
round(s) at the stores) and ``triggerExecution`` (the whole batch).

Baseline in the same run: Spark's built-in ``rate`` source (1,000 rows every
100 ms) into ``noop`` with the same trigger: a batch with no planning to speak
of.

    python benches/spark_stream.py              # 20 micro-batches each
    python benches/spark_stream.py --batches 40

Run after ``maturin develop --release``. Not part of scripts/test.sh. Results:
benches/RESULTS.md, "Spark", "Streaming micro-batches".
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from dafka import Producer
from dafka.spark import local_cluster, local_session


def durations(q: Any, batches: int) -> tuple[list[float], list[float], int]:
    """Waits for ``batches`` micro-batches that read rows; returns their
    ``latestOffset`` and ``triggerExecution`` (ms) and the rows they read."""
    deadline = time.monotonic() + 600
    while True:
        done = [p for p in q.recentProgress if p["numInputRows"] > 0]
        if len(done) >= batches + 1:
            break
        if time.monotonic() > deadline or q.exception() is not None:
            raise SystemExit(f"the query stalled: {q.exception()}")
        time.sleep(0.2)
    q.stop()
    done = done[1 : batches + 1]  # the first batch reads the backlog
    latest = [float(p["durationMs"].get("latestOffset", 0)) for p in done]
    total = [float(p["durationMs"]["triggerExecution"]) for p in done]
    return latest, total, sum(int(p["numInputRows"]) for p in done)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=20)
    args = ap.parse_args()
    spark = local_session("dafka-bench-stream", master="local[2]")
    med = statistics.median
    with tempfile.TemporaryDirectory() as tmp, local_cluster(str(Path(tmp) / "store")) as (tw, _):
        stop = threading.Event()

        def produce() -> None:
            with Producer("s", towers=[tw.endpoint], beacon_interval=0.2) as p:
                while not stop.is_set():
                    p.send_many([b"x" * 100] * 1000)
                    p.flush(10.0)
                    time.sleep(0.1)

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        try:
            q = (
                spark.readStream.format("dafka")
                .option("subscribe", "s")
                .option("towers", tw.endpoint)
                .option("beaconInterval", "0.2")
                .option("startingOffsets", "earliest")
                .load()
                .writeStream.format("noop")
                .start()
            )
            latest, total, rows = durations(q, args.batches)
        finally:
            stop.set()
            writer.join(30)
    base = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 10_000)
        .load()
        .writeStream.format("noop")
        .start()
    )
    b_latest, b_total, b_rows = durations(base, args.batches)
    print(f"{args.batches} micro-batches each (median, max in ms)")
    print(
        f"dafka source: latestOffset {med(latest):.0f}, {max(latest):.0f}; "
        f"batch {med(total):.0f}, {max(total):.0f}; {rows / len(total):.0f} rows per batch"
    )
    print(
        f"baseline, rate source: latestOffset {med(b_latest):.0f}, {max(b_latest):.0f}; "
        f"batch {med(b_total):.0f}, {max(b_total):.0f}; {b_rows / len(b_total):.0f} rows per batch"
    )
    print(f"batch time / baseline: {med(total) / med(b_total):.1f}x")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
