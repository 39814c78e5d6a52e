"""Spark bulk ingest benchmark: N rows of B-byte values into a dafka topic (a store
running in this process, ACKs only for durable records: fsync interval, group
commit) vs the same DataFrame into Spark's ``noop`` sink, in the same run.

    python benches/spark_ingest.py                   # 10M rows of 100 B
    python benches/spark_ingest.py --rows 1000000 --partitions 8

Paths: ``noop`` (the DataFrame generated and discarded), ``arrow-discard``
(mapInArrow with a function that only counts rows: what moving the batches to
Python workers costs, without dafka), ``arrow`` (mapInArrow,
whole Arrow batches to Rust with Producer.send_buffers, published as RECORD-BATCHes
unless ``--record-batches off``), ``arrow-keyed`` (the same with a 16 B key per row
from a key column), ``foreach``
(foreachPartition, send_many of Python bytes). Each dafka path ends when every
task's records are acknowledged. ``arrow-nostore`` is the Arrow path with no
store (``min_acks=0``, nobody subscribed, so ZeroMQ drops each record at the
producer): the ceiling for the Arrow path on this machine, before any record
crosses a socket. Not part of scripts/test.sh.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from dafka import Store, Tower
from dafka.spark import (
    ProducerSettings,
    foreach_partition_writer,
    local_cluster,
    local_session,
    produce_arrow,
)


def frame(spark: Any, rows: int, size: int, parts: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, rows, 1, parts).select(
        F.rpad(F.format_string("%012d:", "id"), size, "x").cast("binary").alias("value"),
        # A 16 B key per row, for the keyed path.
        F.format_string("customer-%06d", F.col("id") % 100000).cast("binary").alias("key"),
    )


def count_rows(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    n = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict({"n": [n]})


@contextlib.contextmanager
def cluster(path: str, store_dir: str) -> Iterator[tuple[Tower, Store | None]]:
    """A tower and a store; for ``arrow-nostore`` the tower alone."""
    if path == "arrow-nostore":
        with Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower:
            yield tower, None
    else:
        with local_cluster(store_dir) as (tower, store):
            yield tower, store


def cpu_by_thread() -> dict[tuple[str, str], tuple[str, str, float]]:
    """CPU seconds used so far by every thread of this machine's processes, keyed by
    (pid, tid), with (process kind, thread name without its trailing number). Keyed by
    thread, not name: a kernel worker renames itself with the work it does, and a
    key by name would count its whole lifetime as used in the path. Linux only."""
    hz = os.sysconf("SC_CLK_TCK")
    me = os.getpid()
    out: dict[tuple[str, str], tuple[str, str, float]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            exe = os.path.basename(cmd[0].decode(errors="replace")) if cmd[0] else "?"
            if int(pid) == me:
                kind = "driver"
            elif any(b"pyspark" in c and b"daemon" in c for c in cmd):
                kind = "py-worker"
            else:
                kind = exe
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    st = f.read()
                name = st[st.index("(") + 1 : st.rindex(")")]
                name = re.sub(r"[0-9:/-]*$", "", name.split("-")[0] if kind == "?" else name)
                fields = st[st.rindex(")") + 2 :].split()
                out[(pid, tid)] = (kind, name, (int(fields[11]) + int(fields[12])) / hz)
        except (OSError, ValueError, IndexError):
            continue  # the process or thread ended while we read it
    return out


def machine_busy() -> float:
    """CPU seconds the whole machine spent not idle so far (/proc/stat), threads that
    ended included."""
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    idle = cpu[3] + cpu[4]  # idle, iowait
    return (sum(cpu[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def print_cpu(
    before: dict[tuple[str, str], tuple[str, str, float]],
    after: dict[tuple[str, str], tuple[str, str, float]],
    busy: float,
    took: float,
    rows: int,
    top: int = 12,
) -> None:
    used: dict[tuple[str, str], float] = {}
    for key, (kind, name, v) in after.items():
        d = v - (before[key][2] if key in before else 0.0)
        if d > 0:
            used[(kind, name)] = used.get((kind, name), 0.0) + d
    total = sum(used.values())
    cores = os.cpu_count() or 1
    print(
        f"    machine busy {busy:.1f} s = {busy * 1e6 / rows:.2f} cpu-µs/row, "
        f"{busy / (took * cores):.0%} of {cores} cores; threads still alive "
        f"{total * 1e6 / rows:.2f}:",
        end="",
    )
    for (kind, name), v in sorted(used.items(), key=lambda kv: -kv[1])[:top]:
        print(f" {kind}/{name} {v * 1e6 / rows:.2f}", end="")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--paths", default="noop,arrow-discard,arrow-nostore,arrow,foreach")
    ap.add_argument("--dir", help="store directory parent (default: a temp dir)")
    ap.add_argument(
        "--wire",
        default="rfc",
        choices=["rfc", "zproto"],
        help="the producers' dialect (zproto: two frames per RECORD, rfc: three)",
    )
    ap.add_argument(
        "--record-batches",
        choices=["on", "off"],
        default="on",
        help="the producers publish RECORD-BATCHes (the Spark helpers' default) or one "
        "RECORD per row",
    )
    ap.add_argument(
        "--warmup-rows",
        type=int,
        default=2_000_000,
        help="rows for an untimed noop and arrow-discard pass first, so the JVM's JIT has "
        "compiled the generator and the Arrow conversion before any path is timed (0: none)",
    )
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="also print each path's CPU time per row by process and thread (Linux /proc)",
    )
    ap.add_argument(
        "--arrow-batch",
        type=int,
        default=100_000,
        help="rows per Arrow batch handed to the Python workers "
        "(spark.sql.execution.arrow.maxRecordsPerBatch)",
    )
    args = ap.parse_args()

    spark = local_session(
        "dafka-bench",
        args.master,
        **{"spark.sql.execution.arrow.maxRecordsPerBatch": str(args.arrow_batch)},
    )
    full = frame(spark, args.rows, args.value_bytes, args.partitions)
    df = full.select("value")
    mb = args.rows * args.value_bytes / 1e6
    print(
        f"# {args.rows:,} rows x {args.value_bytes} B = {mb:,.0f} MB, "
        f"{args.partitions} Spark partitions, master {args.master}, "
        f"{os.cpu_count()} CPUs, {platform.python_version()}, wire {args.wire}, "
        f"record batches {args.record_batches}"
    )
    if args.warmup_rows:
        warm = frame(spark, args.warmup_rows, args.value_bytes, args.partitions)
        start = time.monotonic()
        warm.write.format("noop").mode("overwrite").save()
        warm.mapInArrow(count_rows, "n long").collect()
        print(
            f"# warm-up: {args.warmup_rows:,} rows, noop and arrow-discard, "
            f"{time.monotonic() - start:.1f} s untimed"
        )
    results: dict[str, float] = {}
    for path in args.paths.split(","):
        base = tempfile.mkdtemp(prefix="dafka-bench-", dir=args.dir)
        try:
            with cluster(path, os.path.join(base, "store")) as (tower, store):
                settings = ProducerSettings(
                    f"bench-{path}",
                    towers=[tower.endpoint],
                    beacon_interval=0.2,
                    flush_timeout=600.0,
                    wire=args.wire,
                    record_batches=args.record_batches == "on",
                )
                cpu0 = cpu_by_thread() if args.cpu else {}
                busy0 = machine_busy() if args.cpu else 0.0
                start = time.monotonic()
                if path == "noop":
                    df.write.format("noop").mode("overwrite").save()
                elif path == "arrow-discard":
                    got = df.mapInArrow(count_rows, "n long").collect()
                    assert sum(r["n"] for r in got) == args.rows
                elif path == "arrow":
                    got = produce_arrow(df, settings).collect()
                    assert sum(r["count"] for r in got) == args.rows, got
                elif path == "arrow-keyed":
                    got = produce_arrow(full, settings, key="key").collect()
                    assert sum(r["count"] for r in got) == args.rows, got
                elif path == "arrow-nostore":
                    got = produce_arrow(df, replace(settings, min_acks=0)).collect()
                    assert sum(r["count"] for r in got) == args.rows, got
                elif path == "foreach":
                    df.foreachPartition(foreach_partition_writer(settings))
                else:
                    raise SystemExit(
                        f"unknown path {path!r}: noop, arrow-discard, arrow-nostore, arrow, "
                        "arrow-keyed, foreach"
                    )
                took = time.monotonic() - start
                if args.cpu:  # before the store's threads end
                    busy = machine_busy() - busy0
                    print_after = cpu_by_thread()
                if store is not None and path in ("arrow", "arrow-keyed", "foreach"):
                    held = sum(i.next_offset for i in store.partitions(f"bench-{path}"))
                    assert held == args.rows, (held, args.rows)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        results[path] = took
        rate = args.rows / took
        rel = f", {took and results.get('noop', 0) / took:.0%} of noop" if "noop" in results else ""
        print(
            f"{path:13} {took:7.1f} s  {rate:>12,.0f} rows/s  {mb / took:8.1f} MB/s{rel}",
            flush=True,
        )
        if args.cpu:
            print_cpu(cpu0, print_after, busy, took, args.rows)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
