"""Read a topic, transform each record, write another topic (streaming).

    python spark_jobs/enrich.py --towers tcp://HOST:5556,5557 --source raw --sink enriched \\
        --checkpoint out/enrich-ckpt

The transform wraps each value in JSON with its source partition, offset and
length: ``{"partition": ..., "offset": ..., "length": ..., "value": "..."}``; each
enriched record keeps its source record's key and time (its timestamp), as a
Kafka Streams map would. The sink is exactly-once: a retried micro-batch rewrites
the same offsets. Without ``--towers`` a local tower + store is started, ``--demo``
records (keyed by sensor) go into the source topic first, and the enriched records
are read back and counted.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

from dafka import Consumer, Producer
from dafka.spark import (
    add_cluster_args,
    local_cluster,
    local_session,
    node_options,
    run_query,
    trigger_arg,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_cluster_args(ap)
    ap.add_argument("--source", default="raw")
    ap.add_argument("--sink", default="enriched")
    ap.add_argument("--checkpoint", default="out/enrich-checkpoint")
    ap.add_argument("--starting-offsets", default="earliest")
    ap.add_argument(
        "--trigger",
        type=trigger_arg,
        default=None,
        help="'available-now' (the default) or seconds between batches",
    )
    ap.add_argument("--demo", type=int, default=5_000, help="records produced in local mode")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    spark = local_session("dafka-enrich", args.master)
    with contextlib.ExitStack() as stack:
        towers = args.towers
        if not towers:
            tower, _store = stack.enter_context(local_cluster())
            towers = [tower.endpoint]
            with Producer(args.source, towers=towers, beacon_interval=0.2) as p:
                p.send_many(
                    [b"reading %d" % i for i in range(args.demo)],
                    keys=[b"sensor-%d" % (i % 10) for i in range(args.demo)],
                )
                left = p.flush(60.0)
            if left:
                raise SystemExit(f"enrich: {left} demo records were not stored within 60 s")
            print(
                f"local tower + store at {towers[0]}, {args.demo} demo records in {args.source!r}"
            )
        src = (
            spark.readStream.format("dafka")
            .option("subscribe", args.source)
            .option("towers", ";".join(towers))
            .option("startingOffsets", args.starting_offsets)
            .option("beaconInterval", "0.2" if not args.towers else "1.0")
            .options(**node_options(args))
            .load()
        )
        out = src.select(
            "key",
            "timestamp",
            F.to_json(
                F.struct(
                    "partition",
                    "offset",
                    F.length("value").alias("length"),
                    F.col("value").cast("string").alias("value"),
                )
            ).alias("value"),
        )
        w = (
            out.writeStream.format("dafka")
            .option("topic", args.sink)
            .option("towers", ";".join(towers))
            .option("checkpointLocation", args.checkpoint)
            .options(**node_options(args))
        )
        w = (
            w.trigger(availableNow=True)
            if args.trigger is None
            else w.trigger(processingTime=f"{args.trigger} seconds")
        )
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
        n = sum(p["numInputRows"] for p in q.recentProgress)
        print(f"enriched {n} records from {args.source!r} into {args.sink!r}")
        if not args.towers:
            got = []
            with Consumer(
                [args.sink], towers=towers, offset_reset="earliest", beacon_interval=0.2
            ) as c:
                deadline = time.monotonic() + 60
                while len(got) < n and time.monotonic() < deadline:
                    got.extend(c.poll_many(timeout=0.5))
            keys = {r.key for r in got}
            print(
                f"read back {len(got)} enriched records from {args.sink!r}, "
                f"{len(keys)} distinct keys"
            )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
