"""Local conveniences for the runnable jobs and benchmarks: a SparkSession set up
for PySpark-from-a-venv, and a throwaway tower + store on 127.0.0.1."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dafka._defaults import BIND
from dafka._native import Store, Tower

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_session(app: str, master: str = "local[*]", **conf: str) -> SparkSession:
    """A SparkSession whose Python workers use this interpreter, bound to
    127.0.0.1 unless ``SPARK_LOCAL_IP`` says otherwise, with the ``dafka`` data
    source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from dafka.spark._udf import register

    b = SparkSession.builder.master(master).appName(app).config("spark.ui.enabled", "false")
    b = b.config("spark.ui.showConsoleProgress", "false")
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


@contextmanager
def local_cluster(
    path: str | None = None, *, beacon_interval: float = 0.2, fsync: str = "interval"
) -> Iterator[tuple[Tower, Store]]:
    """A tower and a store on 127.0.0.1 ephemeral ports, the store's log in
    ``path`` (a temporary directory, removed afterwards, when None)."""
    tmp = None
    if path is None:
        tmp = tempfile.mkdtemp(prefix="dafka-local-")
        path = os.path.join(tmp, "store")
    fast = {"beacon_interval": beacon_interval, "beacon_timeout": max(3.0, 10 * beacon_interval)}
    try:
        with (
            Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
            Store(path, towers=[tower.endpoint], fsync=fsync, **fast) as store,  # type: ignore[arg-type]
        ):
            time.sleep(2 * beacon_interval)
            yield tower, store
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def add_cluster_args(ap: argparse.ArgumentParser) -> None:
    """The runnable jobs' cluster options: ``--towers`` (none: a local tower + store
    is started), ``--bind`` and ``--advertise-host`` (for stores on other hosts to
    reach the job's producers and read clients)."""
    ap.add_argument(
        "--towers",
        type=_tower_list,
        help="tower endpoints (tcp://HOST:IN,OUT; ';' between); without, a local "
        "tower + store is started",
    )
    ap.add_argument(
        "--bind",
        default=BIND,
        help="the job's nodes' endpoint (default reachable from this host only: use "
        "tcp://*:0 when stores run on other hosts)",
    )
    ap.add_argument(
        "--advertise-host",
        help="host put in the job's beacons (behind NAT or in a container; '' lets the "
        "tower use the TCP peer address)",
    )


def _tower_list(text: str) -> list[str]:
    # A secure tower's endpoint carries its key after ";curve=".
    towers = [t.strip() for t in text.replace(";curve=", "\0").split(";") if t.strip()]
    towers = [t.replace("\0", ";curve=") for t in towers]
    if not towers:
        raise argparse.ArgumentTypeError(f"no tower endpoint in {text!r}")
    return towers


def trigger_arg(text: str) -> float | None:
    """An argparse ``type=`` for ``--trigger``: ``available-now`` (None) or the seconds
    between micro-batches, checked before anything starts."""
    if text == "available-now":
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(
            f"must be 'available-now' or a number of seconds > 0, got {text!r}"
        )
    return seconds


def node_options(args: argparse.Namespace) -> dict[str, str]:
    """``--bind`` and ``--advertise-host`` as the ``dafka`` data source's options."""
    out = {"bind": args.bind}
    if args.advertise_host is not None:
        out["advertiseHost"] = args.advertise_host
    return out
