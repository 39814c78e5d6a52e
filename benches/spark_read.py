"""Spark batch read of a topic of many small partitions (what a topic written by
many Spark tasks looks like): N partitions of R records of 100 B, read with
``spark.read.format("dafka")`` into ``count()``:

- ``packed``: the default plan, short ranges sharing a task (``minRecordsPerTask``
  50,000), each task reading its ranges through one client (``fetch_ranges``);
- ``one-per-task``: ``minRecordsPerTask=1``, a Spark task (and a read client) per
  partition, as before packing.

Baseline in the same run: the same records read straight from the store's log
directory with ``dafka.Log`` in this process (raw disk, no Spark, no sockets).

    python benches/spark_read.py                    # 200 partitions x 100 records
    python benches/spark_read.py --partitions 1000 --records 20

Run after ``maturin develop --release``. Not part of scripts/test.sh. Results:
benches/RESULTS.md, "Spark", "Reading many small partitions".
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dafka import Log, Producer
from dafka.spark import local_cluster, local_session


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--records", type=int, default=100)
    args = ap.parse_args()
    n, r = args.partitions, args.records
    spark = local_session("dafka-bench-read", master="local[2]")
    with tempfile.TemporaryDirectory() as tmp, local_cluster(str(Path(tmp) / "store")) as (tw, st):
        towers = [tw.endpoint]
        value = b"x" * 100
        for _ in range(n):
            with Producer("m", towers=towers, beacon_interval=0.2, beacon_timeout=3.0) as p:
                p.send_many([value] * r)
                if p.flush(60.0) != 0:
                    raise SystemExit("the store did not ACK")
        t0 = time.perf_counter()
        with Log(Path(tmp) / "store" / "log", read_only=True, retain_hours=None) as log:
            raw = sum(
                len(log.read("m", info.partition, 0, max_records=r)) for info in st.partitions("m")
            )
        raw_s = time.perf_counter() - t0
        assert raw == n * r, raw
        results = {}
        for name, opts in [("packed", {}), ("one-per-task", {"minRecordsPerTask": "1"})] * 2:
            df = (
                spark.read.format("dafka")
                .option("subscribe", "m")
                .option("towers", tw.endpoint)
                .option("beaconInterval", "0.2")
            )
            for k, v in opts.items():
                df = df.option(k, v)
            t0 = time.perf_counter()
            df = df.load()
            tasks = df.rdd.getNumPartitions()
            got = df.count()
            took = time.perf_counter() - t0
            if got != n * r:
                raise SystemExit(f"{name}: read {got} of {n * r} records")
            results.setdefault(name, []).append((took, tasks))
    spark.stop()
    print(f"{n} partitions x {r} records of 100 B, local[2]")
    for name, runs in results.items():
        times = ", ".join(f"{t:.2f} s" for t, _ in runs)
        print(f"{name}: {runs[0][1]} Spark tasks; {times} (plan + read + count)")
    print(f"baseline, dafka.Log read of the store's directory: {raw_s:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
