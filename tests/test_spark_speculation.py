"""The ``dafka`` sink under speculative execution: a slow task's speculative copy
writes the same partition at the same offsets as the original, which had stored part
of its rows already; the topic holds every row once (a batch write and a streaming
query).

Speculation needs a SparkSession of its own, so this test does not use the shared
one: Spark never speculates in local mode (``TaskSchedulerImpl`` starts its
speculation checks only when not local), and launches a copy only on a host where
the task has not run (``TaskSetManager.hasAttemptOnHost``), so ``local-cluster`` (one
host name for every executor) never does either. This file, run as a script, starts a
standalone master and two workers registered under two host names of 127.0.0.1
(``127.0.0.1`` and ``localhost``, with IPv4 preferred), one executor each, and a driver
with ``spark.speculation`` on; the test runs it in a subprocess against a tower and a
store of its own, then checks what the store holds."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}
IPV4 = "-Djava.net.preferIPv4Stack=true"
ROWS = 40_000  # a batch write's rows, over two Spark partitions
PER_BATCH = 20_000  # a micro-batch's rows, over two Spark partitions


def test_speculative_copies_write_every_row_once(tmp_path: Path) -> None:
    from test_spark_exactly_once import held

    from dafka import Store, Tower

    with (
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        Store(tmp_path / "store", towers=[tower.endpoint], **FAST) as store,  # type: ignore[arg-type]
    ):
        out = subprocess.run(
            [sys.executable, __file__, tower.endpoint, str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=540,
        )
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        # The slow originals were copied, on the other executor, and the copies
        # rewrote what the originals had stored.
        assert result["batch_copies"] and result["stream_copies"], result
        got = held(store, tower, "spec-batch")
        assert len(got) == 2
        assert Counter(int(v) for vs in got.values() for v in vs) == Counter(range(ROWS))
        got = held(store, tower, "spec-stream")
        assert len(got) == 2
        counts = Counter(int(v) for vs in got.values() for v in vs)
        assert max(counts.values()) == 1
        assert all(counts[i] == 1 for i in range(result["stream_committed"]))
        assert store.stats()["store_duplicates"] >= 2 * 2000, store.stats()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def slow_original(
    tower: str, topic: str, seed_of: Any, run: str, batch: str | None, rows: int
) -> Any:
    """A UDF under which partition 0's first attempt (of micro-batch ``batch``, for a
    stream) stalls at its 8,000th row, once 2,000 of its records are stored, until a
    copy of it has seen all its ``rows`` rows (so that Spark copies it, and the copy
    rewrites what the original stored before either ends); the copy leaves a mark
    then. Each row becomes 100 bytes: a UDF's results reach the rest of the task in
    large pieces, and the rows before the stall must reach the sink."""
    from pyspark.sql.functions import udf

    count = [0]

    @udf("string")
    def slow(v):  # type: ignore[no-untyped-def]  # no hints: a plain UDF
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        mine = ctx.partitionId() == 0 and (
            batch is None or ctx.getLocalProperty("streaming.sql.batchId") == batch
        )
        if not mine:
            return f"{v:0100d}"
        import dafka

        count[0] += 1
        me = seed_of(ctx)
        if ctx.attemptNumber() > 0:
            if count[0] == rows:
                Path(run, f"copy-{topic}").touch()
            return f"{v:0100d}"
        if count[0] == 1:
            count.append(dafka.heads(topic, towers=[tower], beacon_interval=0.2).get(me, 0))
        if count[0] == 8000:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                heads = dafka.heads(topic, towers=[tower], beacon_interval=0.2, settle=0.1)
                if heads.get(me, 0) >= count[1] + 2000:
                    break
            while time.monotonic() < deadline and not Path(run, f"copy-{topic}").exists():
                time.sleep(0.1)
        return f"{v:0100d}"

    return slow


def main(tower: str, run: str) -> None:
    """The script: a standalone cluster, a batch write and a streaming query with a
    slow original each; prints a JSON summary last."""
    import pyspark

    from dafka.spark._sink import seeded_address

    Path(run).mkdir(parents=True)
    home = os.path.dirname(pyspark.__file__)
    env = dict(
        os.environ,
        SPARK_HOME=home,
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_NO_DAEMONIZE="1",
        SPARK_DAEMON_JAVA_OPTS=IPV4,
        SPARK_DAEMON_MEMORY="256m",
    )
    spark_class = os.path.join(home, "bin", "spark-class")
    port = free_port()
    logs = Path(run)
    procs = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", str(port)),
                *("--webui-port", str(free_port())),
            ],
            env=env,
            stdout=open(logs / "master.log", "w"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )
    ]
    for host in ("127.0.0.1", "localhost"):
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    f"spark://127.0.0.1:{port}",
                    *("--host", host, "--cores", "1", "--memory", "1g"),
                    *("--webui-port", str(free_port())),
                    *("--work-dir", str(logs / f"work-{host}")),
                ],
                env=env,
                stdout=open(logs / f"worker-{host}.log", "w"),  # noqa: SIM115
                stderr=subprocess.STDOUT,
            )
        )
    spark = None
    try:
        os.environ.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        from pyspark.sql import SparkSession

        import dafka.spark

        b = SparkSession.builder
        if os.environ.get("PYTHONPATH"):
            # Standalone executors do not inherit the driver's environment, and run
            # in directories of their own.
            paths = [os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep)]
            b = b.config("spark.executorEnv.PYTHONPATH", os.pathsep.join(paths))
        spark = (
            b.master(f"spark://127.0.0.1:{port}")
            .appName("dafka-speculation")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.extraJavaOptions", IPV4)
            .config("spark.executor.extraJavaOptions", IPV4)
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", "512m")
            .config("spark.speculation", "true")
            .config("spark.speculation.interval", "100ms")
            .config("spark.speculation.quantile", "0.5")
            .config("spark.speculation.multiplier", "1.5")
            .config("spark.speculation.minTaskRuntime", "500ms")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        dafka.spark.register(spark)
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
        deadline = time.monotonic() + 240
        while status().size() < 3:  # the driver and two executors
            if time.monotonic() > deadline:
                raise SystemExit("the two executors did not register within 240 s")
            time.sleep(0.2)

        def sink(w: Any, topic: str) -> Any:
            return (
                w.format("dafka")
                .option("topic", topic)
                .option("towers", tower)
                .option("beaconInterval", "0.2")
                .option("flushTimeout", "60")
            )

        from pyspark.sql import functions as F

        def batch_seed(ctx: Any) -> str:
            return seeded_address("dafka-spark-batch:spec:0:spec-batch")

        slow = slow_original(tower, "spec-batch", batch_seed, run, None, ROWS // 2)
        df = spark.range(0, ROWS, 1, 2).select(slow(F.col("id")).alias("value"))
        sink(df.write, "spec-batch").option("writeId", "spec").mode("append").save()

        def stream_seed(ctx: Any) -> str:
            query = ctx.getLocalProperty("sql.streaming.queryId")
            return seeded_address(f"dafka-spark-stream:{query}:0:spec-stream")

        slow = slow_original(tower, "spec-stream", stream_seed, run, "1", PER_BATCH // 2)
        stream = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", PER_BATCH)
            .option("numPartitions", 2)
            .load()
        )
        q = (
            sink(stream.select(slow("value").alias("value")).writeStream, "spec-stream")
            .option("checkpointLocation", str(Path(run) / "ckpt"))
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 240
            while q.lastProgress is None or q.lastProgress["batchId"] < 3:
                if time.monotonic() > deadline or q.exception() is not None:
                    raise SystemExit(f"the streaming query stalled: {q.exception()}")
                time.sleep(0.2)
        finally:
            q.stop()
        print(
            json.dumps(
                {
                    "batch_copies": Path(run, "copy-spec-batch").exists(),
                    "stream_copies": Path(run, "copy-spec-stream").exists(),
                    "stream_committed": PER_BATCH * (q.lastProgress["batchId"] + 1),
                }
            )
        )
    finally:
        if spark is not None:
            spark.stop()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
