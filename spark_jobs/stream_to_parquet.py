"""A dafka topic to Parquet, with checkpointing (restarts resume where they left off).

    python spark_jobs/stream_to_parquet.py --towers tcp://HOST:5556,5557 --topic events \\
        --output out/events --checkpoint out/ckpt --trigger available-now \\
        --starting-time 2026-11-27T09:00:00+00:00

The Parquet files hold the source's columns: key, value, topic, partition, offset,
timestamp, timestampType (and headers with ``--headers``), partitioned by the day
of each record's timestamp. ``--starting-time`` (ms since the epoch or ISO 8601)
starts a new query at the first record of each partition at or after that time.
Without ``--towers`` a local tower + store is started and ``--demo`` records (keyed
by sensor) are produced into the topic first, so the job has something to write.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
from typing import Any

from dafka import Producer
from dafka.spark import (
    add_cluster_args,
    local_cluster,
    local_session,
    node_options,
    run_query,
    trigger_arg,
)


def time_arg(text: str) -> int:
    """An argparse ``type=`` for a time: ms since the epoch, or ISO 8601 with a zone."""
    if text.strip().isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"must be ms since the epoch or an ISO 8601 time with a zone, got {text!r}"
        )
    return round(when.timestamp() * 1000)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--topic", default="events")
    add_cluster_args(ap)
    ap.add_argument("--output", default="out/parquet", help="Parquet directory")
    ap.add_argument("--checkpoint", default="out/checkpoint", help="checkpoint directory")
    ap.add_argument("--starting-offsets", default="earliest", help="earliest|latest|JSON")
    ap.add_argument(
        "--starting-time",
        type=time_arg,
        help="start at this time instead (ms since the epoch, or ISO 8601 with a zone)",
    )
    ap.add_argument("--headers", action="store_true", help="add the headers column")
    ap.add_argument("--max-offsets-per-trigger", type=int)
    ap.add_argument(
        "--trigger",
        type=trigger_arg,
        default=None,
        help="'available-now' (the default) or seconds between batches",
    )
    ap.add_argument("--demo", type=int, default=10_000, help="records produced in local mode")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args(argv)

    spark = local_session("dafka-stream-to-parquet", args.master)
    with contextlib.ExitStack() as stack:
        towers = args.towers
        if not towers:
            tower, _store = stack.enter_context(local_cluster())
            towers = [tower.endpoint]
            with Producer(args.topic, towers=towers, beacon_interval=0.2) as p:
                p.send_many(
                    [b"demo record %d" % i for i in range(args.demo)],
                    keys=[b"sensor-%d" % (i % 10) for i in range(args.demo)],
                )
                left = p.flush(60.0)
            if left:
                raise SystemExit(
                    f"stream_to_parquet: {left} demo records were not stored within 60 s"
                )
            print(f"local tower + store at {towers[0]}, {args.demo} demo records in {args.topic!r}")
        r = (
            spark.readStream.format("dafka")
            .option("subscribe", args.topic)
            .option("towers", ";".join(towers))
            .option("includeHeaders", str(args.headers).lower())
            .options(**node_options(args))
        )
        if args.starting_time is not None:
            r = r.option("startingTimestamp", str(args.starting_time))
        else:
            r = r.option("startingOffsets", args.starting_offsets)
        if not args.towers:
            r = r.option("beaconInterval", "0.2")
        if args.max_offsets_per_trigger:
            r = r.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        from pyspark.sql import functions as F

        w = (
            r.load()
            .withColumn("day", F.to_date("timestamp"))
            .writeStream.format("parquet")
            .partitionBy("day")
            .option("path", args.output)
            .option("checkpointLocation", args.checkpoint)
        )
        if args.trigger is None:
            w = w.trigger(availableNow=True)
        else:
            w = w.trigger(processingTime=f"{args.trigger} seconds")
        # Started again from the checkpoint if Spark could not start its Python
        # worker in time (a fixed 10 s, see dafka.spark.run_query).
        started: list[Any] = []

        def start() -> Any:
            started.append(w.start())
            return started[-1]

        try:
            run_query(start)
        except KeyboardInterrupt:
            if not started:
                raise
            started[-1].stop()
        q = started[-1]
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        print(f"wrote {rows} records to {args.output} in {len(q.recentProgress)} batch(es)")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
