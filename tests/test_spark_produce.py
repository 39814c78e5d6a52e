"""Bulk ingest from PySpark: the foreachPartition writer and the mapInArrow
(Arrow buffers to Rust) path, against a tower and a store on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dafka
from dafka import Consumer, Store, Tower
from dafka.spark import ProducerSettings, foreach_partition_writer, produce_arrow

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}
N = 100_000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Tower, Store]]:
    with (
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        Store(tmp_path / "store", towers=[tower.endpoint], **FAST) as store,
    ):
        yield tower, store


def settings(tower: Tower, topic: str) -> ProducerSettings:
    return ProducerSettings(
        topic, towers=[tower.endpoint], flush_timeout=60.0, beacon_interval=0.2, beacon_timeout=3.0
    )


def values_df(spark: Any, n: int, parts: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, n, 1, parts).select(
        F.format_string("row-%08d", "id").cast("binary").alias("value")
    )


def expected(n: int) -> Counter[bytes]:
    return Counter(b"row-%08d" % i for i in range(n))


def consume(tower: Tower, topic: str, n: int, within: float = 120.0) -> list[dafka.Record]:
    got: list[dafka.Record] = []
    with Consumer([topic], towers=[tower.endpoint], offset_reset="earliest", **FAST) as c:
        deadline = time.monotonic() + within
        while len(got) < n and time.monotonic() < deadline:
            got.extend(c.poll_many(timeout=0.2))
        # Anything beyond n would be a duplicate: give it a moment to show up.
        got.extend(c.poll_many(timeout=1.0))
    return got


def test_foreach_partition_100k_rows_4_partitions(spark: Any, cluster: tuple[Tower, Store]) -> None:
    tower, store = cluster
    df = values_df(spark, N, 4)
    df.foreachPartition(foreach_partition_writer(settings(tower, "fp")))
    got = consume(tower, "fp", N)
    assert Counter(r.value for r in got) == expected(N)
    per_part = Counter(r.partition for r in got)
    assert len(per_part) == 4, per_part  # one producer partition per Spark task
    assert sorted(per_part.values()) == [N // 4] * 4
    infos = store.partitions("fp")
    assert sorted(i.next_offset for i in infos) == [N // 4] * 4


def test_foreach_partition_encoders(spark: Any, cluster: tuple[Tower, Store]) -> None:
    import json

    import pyarrow as pa

    tower, _ = cluster
    df = spark.range(0, 50, 1, 2).selectExpr("id", "concat('n', id) AS name")
    df.foreachPartition(
        foreach_partition_writer(settings(tower, "js"), column=None, encoder="json")
    )
    df.foreachPartition(
        foreach_partition_writer(settings(tower, "ipc"), column=None, encoder="arrow")
    )
    js = consume(tower, "js", 50)
    assert sorted(json.loads(r.value)["id"] for r in js) == list(range(50))
    ipc = consume(tower, "ipc", 50)
    rows = [pa.ipc.open_stream(r.value).read_all().to_pylist()[0] for r in ipc]
    assert sorted((r["id"], r["name"]) for r in rows) == [(i, f"n{i}") for i in range(50)]


def test_arrow_path_100k_rows_offsets_match_store(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    tower, store = cluster
    df = values_df(spark, N, 4)
    rows = produce_arrow(df, settings(tower, "arrow")).collect()
    assert len(rows) == 4
    assert sum(r["count"] for r in rows) == N
    got = consume(tower, "arrow", N)
    assert Counter(r.value for r in got) == expected(N)
    held = {i.partition: i for i in store.partitions("arrow")}
    assert set(held) == {r["partition"] for r in rows}
    for r in rows:
        info = held[r["partition"]]
        assert (r["first_offset"], r["last_offset"]) == (0, r["count"] - 1)
        assert info.first_offset == r["first_offset"]
        assert info.next_offset == r["last_offset"] + 1
    by_part = Counter(r.partition for r in got)
    assert by_part == Counter({r["partition"]: r["count"] for r in rows})


def test_arrow_path_rejects_nulls_and_wrong_types(spark: Any, cluster: tuple[Tower, Store]) -> None:
    tower, _ = cluster
    df = spark.range(0, 10, 1, 1).selectExpr("id AS value")
    with pytest.raises(Exception, match="not binary or string"):
        produce_arrow(df, settings(tower, "bad")).collect()
    with pytest.raises(KeyError, match="no column 'nope'"):
        produce_arrow(df, settings(tower, "bad"), column="nope")


def test_udf_helpers(spark: Any, cluster: tuple[Tower, Store]) -> None:
    import json

    import pyarrow as pa
    from pyspark.sql import functions as F

    from dafka.spark import arrow_ipc_udf, json_value, produce_udf

    tower, store = cluster
    df = spark.range(0, 1000, 1, 2).selectExpr("id", "concat('n', id) AS name")
    encoded = df.select(
        json_value("id", "name").alias("js"),
        arrow_ipc_udf()(F.struct("id", "name")).alias("ipc"),
    ).collect()
    assert sorted(json.loads(r.js)["id"] for r in encoded) == list(range(1000))
    decoded = [pa.ipc.open_stream(r.ipc).read_all().to_pylist()[0] for r in encoded]
    assert sorted(d["id"] for d in decoded) == list(range(1000))
    # produce_udf: one offset per value, each acknowledged before it is returned.
    out = df.select(json_value("id").alias("value")).select(
        produce_udf(settings(tower, "udf"))("value").alias("offset")
    )
    offsets = [r.offset for r in out.collect()]
    assert len(offsets) == 1000
    held = sum(i.next_offset for i in store.partitions("udf"))
    assert held >= 1000
    got = consume(tower, "udf", 1000)
    assert sorted(json.loads(r.value)["id"] for r in got) == list(range(1000))


def test_reused_producers_keep_a_partition_and_are_dropped_when_broken(
    cluster: tuple[Tower, Store],
) -> None:
    """``reuse=True`` (the streaming sink's default): consecutive tasks of one worker
    process write one partition, in order; a task that fails, or leaves its producer
    closed, does not pass it on. No Spark needed: the tasks run here."""
    from dafka.spark import produce_rows, task_producer

    tower, store = cluster
    shared = dataclasses.replace(settings(tower, "reuse"), reuse=True)
    a = produce_rows([{"value": b"a%d" % i} for i in range(100)], shared)
    b = produce_rows([{"value": b"b%d" % i} for i in range(50)], shared)
    assert b.partition == a.partition
    assert (a.first, a.last, b.first, b.last) == (0, 99, 100, 149)

    def failing() -> Iterator[dict[str, bytes]]:
        yield {"value": b"c0"}
        raise RuntimeError("injected")

    with pytest.raises(RuntimeError, match="injected"):
        produce_rows(failing(), shared)
    c = produce_rows([{"value": b"c%d" % i} for i in range(10)], shared)
    assert c.partition != a.partition and (c.first, c.last) == (0, 9)

    with task_producer(shared) as p:
        p.close()  # a producer that stopped is not lent out again
    d = produce_rows([{"value": b"d0"}], shared)
    assert d.partition not in (a.partition, c.partition) and d.first == 0

    # Without reuse every task is a partition of its own.
    own = settings(tower, "reuse")
    e = produce_rows([{"value": b"e0"}], own)
    f = produce_rows([{"value": b"f0"}], own)
    assert len({e.partition, f.partition, a.partition}) == 3
    held = {i.partition: i.next_offset for i in store.partitions("reuse")}
    assert held[a.partition] == 150
