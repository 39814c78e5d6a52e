"""Bulk ingest: a generated (or file-backed) DataFrame of N rows into a dafka topic,
each record with a key and its event time.

    python spark_jobs/bulk_ingest.py --rows 1000000 --topic events
    python spark_jobs/bulk_ingest.py --towers tcp://HOST:5556,5557 --input data.parquet \\
        --column payload --key-column device_id --time-column event_time --mode datasource

Generated rows are events of ``--keys`` devices (key ``device-NNNNN``), one a
millisecond from the job's start (the record's create time). Without ``--towers`` a
local tower + store is started for the run. ``--mode arrow`` (default) hands whole
Arrow batches to Rust (mapInArrow); ``--mode datasource`` writes with the ``dafka``
data source (exactly-once: a retried task rewrites the same offsets); ``--mode
foreach`` uses one producer per task through foreachPartition. Progress (tasks done)
is printed while the job runs; each task is its own dafka partition, and with
``arrow`` and ``foreach`` a retried task re-sends into a new partition
(at-least-once).
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from typing import Any

from dafka import fetch_range
from dafka.spark import (
    ProducerSettings,
    add_cluster_args,
    foreach_partition_writer,
    local_cluster,
    local_session,
    node_options,
    produce_arrow,
)


def source(spark: Any, args: argparse.Namespace) -> Any:
    """``value`` (binary), ``key`` (binary, or null) and ``timestamp`` columns."""
    from pyspark.sql import functions as F

    if args.input:
        df = spark.read.format(args.input_format or "parquet").load(args.input)
        key = F.col(args.key_column).cast("binary") if args.key_column else F.lit(None)
        when = F.col(args.time_column) if args.time_column else F.current_timestamp()
        return df.select(
            F.col(args.column).cast("binary").alias("value"),
            key.cast("binary").alias("key"),
            when.cast("timestamp").alias("timestamp"),
        )
    # Generated rows: a zero-padded id, padded to --value-bytes; an event of device
    # id % --keys, at the job's start plus id ms.
    start = int(time.time() * 1000)
    key = F.format_string("device-%05d", F.col("id") % args.keys) if args.keys else F.lit(None)
    value = F.rpad(F.format_string("%012d:", "id"), args.value_bytes, "x")
    return spark.range(0, args.rows, 1, args.partitions).select(
        value.cast("binary").alias("value"),
        key.cast("binary").alias("key"),
        F.timestamp_millis(F.col("id") + F.lit(start)).alias("timestamp"),
    )


def progress(spark: Any, stop: threading.Event, every: float) -> None:
    tracker = spark.sparkContext.statusTracker()
    while not stop.wait(every):
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                print(
                    f"  stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks done, "
                    f"{info.numActiveTasks} running",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--topic", default="bulk")
    add_cluster_args(ap)
    ap.add_argument("--rows", type=int, default=1_000_000, help="generated rows")
    ap.add_argument("--value-bytes", type=int, default=100, help="generated value size")
    ap.add_argument("--partitions", type=int, default=4, help="Spark partitions (= producers)")
    ap.add_argument("--input", help="read rows from this path instead of generating them")
    ap.add_argument("--input-format", help="format of --input (default parquet)")
    ap.add_argument("--column", default="value", help="column of --input to send")
    ap.add_argument("--key-column", help="column of --input holding each record's key")
    ap.add_argument(
        "--time-column", help="column of --input holding each record's time (default: now)"
    )
    ap.add_argument(
        "--keys", type=int, default=1000, help="distinct keys of generated rows (0: keyless)"
    )
    ap.add_argument("--mode", choices=["arrow", "datasource", "foreach"], default="arrow")
    ap.add_argument("--min-acks", type=int, default=1)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--progress-every", type=float, default=2.0, help="seconds")
    args = ap.parse_args(argv)

    spark = local_session("dafka-bulk-ingest", args.master)
    with contextlib.ExitStack() as stack:
        towers = args.towers
        store = None
        if not towers:
            tower, store = stack.enter_context(local_cluster())
            towers = [tower.endpoint]
            print(f"started a local tower + store: towers={tower.endpoint}")
        settings = ProducerSettings(
            args.topic,
            towers=towers,
            min_acks=args.min_acks,
            beacon_interval=0.2,
            bind=args.bind,
            advertise_host=args.advertise_host,
        )
        df = source(spark, args)
        stop = threading.Event()
        t = threading.Thread(target=progress, args=(spark, stop, args.progress_every), daemon=True)
        t.start()
        start = time.monotonic()
        try:
            if args.mode == "arrow":
                rows = produce_arrow(df, settings, key="key", timestamp="timestamp").collect()
                n = sum(r["count"] for r in rows)
                for r in rows:
                    first, last = r["first_offset"], r["last_offset"]
                    print(f"  partition {r['partition']}: offsets {first}..{last}")
            elif args.mode == "datasource":
                (
                    df.write.format("dafka")
                    .option("topic", args.topic)
                    .option("towers", ";".join(towers))
                    .option("minAcks", str(args.min_acks))
                    .option("beaconInterval", "0.2")
                    .options(**node_options(args))
                    .mode("append")
                    .save()
                )
                n = args.rows if not args.input else df.count()
            else:
                df.foreachPartition(
                    foreach_partition_writer(settings, key="key", timestamp="timestamp")
                )
                n = args.rows if not args.input else df.count()
        finally:
            stop.set()
        took = time.monotonic() - start
        print(
            f"sent {n} records to topic {args.topic!r} in {took:.1f}s ({n / took:,.0f} rec/s), "
            f"acknowledged by {args.min_acks} store(s)"
        )
        if store is not None:
            parts = store.partitions(args.topic)
            held = sum(i.next_offset - i.first_offset for i in parts)
            print(
                f"the local store holds {held} records of {args.topic!r} in {len(parts)} partitions"
            )
            (records, _lost) = fetch_range(
                args.topic, parts[0].partition, 0, 1, towers=towers, with_meta=True
            )
            r = records[0]
            print(f"  e.g. offset 0 of {r.partition}: key={r.key!r}, timestamp={r.timestamp} ms")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
