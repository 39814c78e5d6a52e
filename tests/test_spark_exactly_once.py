"""The ``dafka`` sink, exactly-once: a retried task rewrites its partition at the same
offsets, so the topic holds every row once (batch and streaming, a task failing after
half its rows were stored); a streaming query keeps one partition per Spark partition
across micro-batches and restarts; ``writeId`` makes a re-run idempotent; the
``topic`` column routes rows. Against a tower and a store on 127.0.0.1. Speculative
execution: tests/test_spark_speculation.py."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import dafka
import dafka.spark
from dafka import Producer, Store, Tower
from dafka.spark._sink import EPOCH_HEADER, seeded_address

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Tower, Store]]:
    with (
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        Store(tmp_path / "store", towers=[tower.endpoint], **FAST) as store,
    ):
        yield tower, store


@contextmanager
def sql_conf(spark: Any, **conf: str) -> Iterator[None]:
    """Session settings for one test, put back afterwards."""
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def held(store: Store, tower: Tower, topic: str) -> dict[str, list[bytes]]:
    """The values the store holds, by partition, in offset order (read back from it),
    checking that every partition holds offsets 0..n-1."""
    infos = store.partitions(topic)
    for info in infos:
        assert info.first_offset == 0, info
    got = dafka.fetch_ranges(
        [(topic, i.partition, 0, i.next_offset) for i in infos],
        towers=[tower.endpoint],
        beacon_interval=0.2,
        timeout=30,
    )
    out: dict[str, list[bytes]] = {}
    for info, (records, lost) in zip(infos, got, strict=True):
        assert not lost
        assert [o for o, _ in records] == list(range(info.next_offset))
        out[info.partition] = [v for _, v in records]
    return out


def sink(w: Any, tower: Tower, topic: str | None) -> Any:
    w = (
        w.format("dafka")
        .option("towers", tower.endpoint)
        .option("beaconInterval", "0.2")
        .option("flushTimeout", "60")
    )
    return w if topic is None else w.option("topic", topic)


def test_seeded_addresses_are_the_producers(tmp_path: Path) -> None:
    """A streaming task computes its partition's address before it opens the producer
    (to ask where the partition stands): the same as the producer gets, plain and
    secure."""
    with Producer("t", peers=["tcp://127.0.0.1:1"], address_seed="q:0:t", first_offset=0) as p:
        assert p.address == seeded_address("q:0:t")
    assert seeded_address("q:0:t") != seeded_address("q:1:t")
    public, secret = dafka.keygen(tmp_path, "w", role="producer")
    trust = tmp_path / "trust"
    trust.mkdir()
    public.rename(trust / public.name)
    secure = {"cert": str(secret), "trust": str(trust)}
    with Producer(
        "t",
        peers=["tcp://127.0.0.1:1;curve=" + "0" * 40],
        address_seed="q:0:t",
        first_offset=0,
        **secure,
    ) as p:
        assert p.address == seeded_address("q:0:t", str(secret))


def test_topic_column_routes_rows_and_the_option_overrides_it(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    tower, store = cluster
    df = spark.range(0, 3000, 1, 2).selectExpr(
        "cast(id AS string) AS value", "IF(id % 3 = 0, 'ra', 'rb') AS topic"
    )
    sink(df.write, tower, None).mode("append").save()
    ra, rb = held(store, tower, "ra"), held(store, tower, "rb")
    assert len(ra) == 2 and len(rb) == 2  # one partition per Spark partition and topic
    assert not set(ra) & set(rb)
    assert Counter(v for vs in ra.values() for v in vs) == Counter(
        str(i).encode() for i in range(0, 3000, 3)
    )
    assert sum(map(len, rb.values())) == 2000
    # The topic option overrides the column (as Kafka's sink).
    sink(df.write, tower, "rc").mode("append").save()
    rc = held(store, tower, "rc")
    assert sum(map(len, rc.values())) == 3000
    nulls = spark.range(3).selectExpr("cast(id AS string) AS value", "string(NULL) AS topic")
    with pytest.raises(Exception, match="'topic' column is null"):
        sink(nulls.write, tower, None).mode("append").save()
    with pytest.raises(Exception, match="needs option\\(\"topic\", NAME\\) or a 'topic' column"):
        sink(spark.range(3).selectExpr("cast(id AS string) AS value").write, tower, None).mode(
            "append"
        ).save()


def test_batch_task_failing_after_half_its_rows_is_rewritten_exactly_once(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    """The first attempt of one task dies once 10,000 of its records are stored (the
    store ACKed them); Spark retries it (local[2,4] allows retries), the retry writes
    the same partition from offset 0: the store drops what it holds as duplicates and
    the topic holds every row once, in exactly two partitions."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import udf

    tower, store = cluster
    endpoint = tower.endpoint
    marker = str(tmp_path / "failed-once")
    address = seeded_address("dafka-spark-batch:w-retry:0:xo")

    @udf("string")
    def fail_once(v):  # type: ignore[no-untyped-def]  # no hints: a plain UDF
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and v == "30000":
            import dafka as d

            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                heads = d.heads("xo", towers=[endpoint], beacon_interval=0.2, settle=0.1)
                if heads.get(address, 0) >= 10_000:
                    break
            Path(marker).touch()
            raise RuntimeError("injected failure")
        return v

    df = spark.range(0, 80_000, 1, 2).select(fail_once(F.col("id").cast("string")).alias("value"))
    sink(df.write, tower, "xo").option("writeId", "w-retry").mode("append").save()
    assert Path(marker).exists(), "the injected failure did not happen"
    got = held(store, tower, "xo")
    assert address in got and len(got) == 2
    assert Counter(v for vs in got.values() for v in vs) == Counter(
        str(i).encode() for i in range(80_000)
    )
    # The retry rewrote what the failed attempt had stored.
    assert store.stats()["store_duplicates"] >= 10_000, store.stats()


def test_write_id_makes_a_rerun_idempotent(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    tower, store = cluster
    df = spark.range(0, 5000, 1, 2).selectExpr("cast(id AS string) AS value")
    for _ in range(2):
        sink(df.write, tower, "wi").option("writeId", "job-42").mode("append").save()
    got = held(store, tower, "wi")
    assert len(got) == 2
    assert Counter(v for vs in got.values() for v in vs) == Counter(
        str(i).encode() for i in range(5000)
    )
    # Without one, every save() is a write of its own.
    for _ in range(2):
        sink(df.write, tower, "wn").mode("append").save()
    assert len(held(store, tower, "wn")) == 4


def rate_query(spark: Any, tower: Tower, topic: str, ckpt: Path, fail: Any) -> Any:
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 20_000)
        .option("numPartitions", 2)
        .load()
    )
    return (
        sink(stream.select(fail("value").alias("value")).writeStream, tower, topic)
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="0 seconds")
        .start()
    )


def run_batches(spark: Any, start: Any, last: int) -> Any:
    """Starts a streaming query (again if Spark could not start its Python worker in
    time, see dafka.spark.run_query) and stops it once batch ``last`` is done."""
    q, restarts = start(), 0
    try:
        deadline = time.monotonic() + 180
        while (q.lastProgress is None or q.lastProgress["batchId"] < last) and (
            time.monotonic() < deadline
        ):
            if dafka.spark.died_starting(q) and restarts < 2:
                q, restarts = start(), restarts + 1
                continue
            assert q.exception() is None, q.exception()
            time.sleep(0.2)
    finally:
        q.stop()
    assert q.lastProgress is not None and q.lastProgress["batchId"] >= last
    return q


def test_stream_task_failing_mid_batch_is_rewritten_and_partitions_stay_few(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    """A streaming write: micro-batch 2's first task fails at its 8,000th row (of
    10,000), once 2,000 of its records are stored; the retry finds the partition's
    last record is of batch 2 and rewrites from where batch 2 began. Two Spark
    partitions make two dafka partitions over every batch, and over a restart from
    the checkpoint (the batch stop() cut is run again and rewritten too). Every row
    of a committed batch is in the topic once."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import udf

    tower, store = cluster
    endpoint = tower.endpoint
    marker = str(tmp_path / "failed-once")
    seen = [0]

    @udf("string")
    def fail_once(v):  # type: ignore[no-untyped-def]  # no hints: a plain UDF
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        if (
            ctx.getLocalProperty("streaming.sql.batchId") == "2"
            and ctx.partitionId() == 0
            and ctx.attemptNumber() == 0
        ):
            import dafka as d
            from dafka.spark._sink import seeded_address as addr

            query = ctx.getLocalProperty("sql.streaming.queryId")
            me = addr(f"dafka-spark-stream:{query}:0:xs")
            if seen[0] == 0:
                seen.append(d.heads("xs", towers=[endpoint], beacon_interval=0.2).get(me, 0))
            seen[0] += 1
            if seen[0] == 8000:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    heads = d.heads("xs", towers=[endpoint], beacon_interval=0.2, settle=0.1)
                    if heads.get(me, 0) >= seen[1] + 2000:
                        break
                Path(marker).touch()
                raise RuntimeError("injected failure")
        # 100 bytes a row: a UDF's results reach the rest of the task in large
        # pieces, and the sink must have stored some before the failure.
        return f"{v:0100d}"

    ckpt = tmp_path / "ckpt"
    with sql_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "500"}):
        q = run_batches(spark, lambda: rate_query(spark, tower, "xs", ckpt, fail_once), 3)
    assert Path(marker).exists(), "the injected failure did not happen"
    committed = 20_000 * (q.lastProgress["batchId"] + 1)
    got = held(store, tower, "xs")
    assert len(got) == 2, "one dafka partition per Spark partition, over every batch"
    counts = Counter(int(v) for vs in got.values() for v in vs)
    assert max(counts.values()) == 1, "a row written twice"
    assert all(counts[i] == 1 for i in range(committed)), "rows of committed batches missing"
    assert store.stats()["store_duplicates"] >= 2000, store.stats()
    # Restarted from its checkpoint: the same query, the same two partitions.
    plain = F.udf(lambda v: f"{v:0100d}", "string")
    q = run_batches(spark, lambda: rate_query(spark, tower, "xs", ckpt, plain), 4)
    committed = 20_000 * (q.lastProgress["batchId"] + 1)
    got = held(store, tower, "xs")
    assert len(got) == 2
    counts = Counter(int(v) for vs in got.values() for v in vs)
    assert max(counts.values()) == 1
    assert all(counts[i] == 1 for i in range(committed))
    # Every record names its batch and the offset the batch began at here.
    df = (
        spark.read.format("dafka")
        .option("subscribe", "xs")
        .option("towers", tower.endpoint)
        .option("beaconInterval", "0.2")
        .option("includeHeaders", "true")
        .load()
    )
    starts: dict[tuple[str, int], int] = {}
    for r in df.select("partition", "offset", "headers").collect():
        ((name, mark),) = [(h.key, bytes(h.value)) for h in r.headers]
        assert name == EPOCH_HEADER
        batch, first = map(int, mark.decode().split(":"))
        starts.setdefault((r.partition, batch), first)
        assert starts[(r.partition, batch)] == first <= r.offset
    for (p, batch), first in starts.items():
        earlier = [f for (q2, b), f in starts.items() if q2 == p and b < batch]
        assert all(f < first for f in earlier), (p, batch)
