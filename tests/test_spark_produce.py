"""Bulk ingest from PySpark: the foreachPartition writer and the mapInArrow
(Arrow buffers to Rust) path, against a tower and a store on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dafka
from dafka import Consumer, Store, Tower
from dafka.spark import ProducerSettings, encode_value, foreach_partition_writer, produce_arrow

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}
N = 100_000
TOWERS = {"topic": "t", "towers": "tcp://127.0.0.1:1,2"}  # never contacted


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
    # One RECORD per record here (the Arrow path below sends RECORD-BATCHes).
    df.foreachPartition(
        foreach_partition_writer(dataclasses.replace(settings(tower, "fp"), record_batches=False))
    )
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
    # Every task waited for the store before its first record (connect_wait), so
    # its RECORD-BATCHes reached the store live: the store fetched nothing.
    assert store.stats()["store_fetches_sent"] == 0, store.stats()


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


# Edges of the write side found by a correctness review (session 21): each test
# failed before its fix, for the reason in its docstring.

# --- encoders (no Spark needed) -------------------------------------------------


def test_json_encoder_binary_field_is_not_a_python_repr() -> None:
    """encoder="json" on a Row with a binary field (Spark hands those over as
    bytearray) writes ``"bytearray(b'xy')"``: ``default=str`` turns the value into
    its Python repr, which no reader can decode back to the bytes (Spark's own
    ``to_json``/``json_value`` writes base64)."""
    from pyspark.sql import Row

    out = json.loads(encode_value(Row(id=1, payload=bytearray(b"xy")), "json"))
    assert "bytearray" not in out["payload"], out


def test_json_encoder_writes_valid_json_for_nan() -> None:
    """encoder="json" on a Row holding a float NaN/Infinity writes the bare tokens
    ``NaN``/``Infinity`` (json.dumps' allow_nan default), which are not JSON: a
    strict parser rejects the record."""
    from pyspark.sql import Row

    def strict(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    raw = encode_value(Row(x=float("nan"), y=float("inf")), "json")
    json.loads(raw, parse_constant=strict)


def test_arrow_encoder_null_field_keeps_its_type() -> None:
    """encoder="arrow" infers each record's schema from that one row: a string
    field that is null in one row becomes Arrow type ``null`` there and ``string``
    in the next, so two records of one DataFrame carry different schemas (they
    cannot be concatenated, and a reader loses the column's type)."""
    import pyarrow as pa
    from pyspark.sql import Row
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    schema = StructType([StructField("id", IntegerType()), StructField("name", StringType())])
    a = pa.ipc.open_stream(encode_value(Row(id=1, name=None), "arrow", schema=schema)).read_all()
    b = pa.ipc.open_stream(encode_value(Row(id=2, name="x"), "arrow", schema=schema)).read_all()
    assert a.schema == b.schema, (a.schema, b.schema)
    assert a.schema.field("id").type == pa.int32()


# --- data-source writer options (no Spark session needed) -----------------------


def test_batch_writer_rejects_overwrite_mode() -> None:
    """``df.write.format("dafka").mode("overwrite").save()`` is accepted and
    appends: ``writer(schema, overwrite=True)`` ignores ``overwrite``, so records
    already in the topic stay, silently (Kafka's sink refuses Overwrite)."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from dafka.spark.datasource import DafkaDataSource

    schema = StructType([StructField("value", BinaryType())])
    with pytest.raises(ValueError, match="append-only"):
        DafkaDataSource(dict(TOWERS)).writer(schema, True)


def test_writer_rejects_a_non_binary_value_column_on_the_driver() -> None:
    """A ``value`` column of another type (here long) passes the driver's schema
    check; every task then fails (and is retried) with "use encoder='str' or
    'json'", advice the data source has no option for."""
    from pyspark.sql.types import LongType, StructField, StructType

    from dafka.spark.datasource import DafkaDataSource

    schema = StructType([StructField("value", LongType())])
    with pytest.raises(TypeError, match="binary or string"):
        DafkaDataSource(dict(TOWERS)).writer(schema, False)


def test_wire_option_is_checked_on_the_driver() -> None:
    """option("wire", "bogus") is accepted by ProducerSettings.from_options; only
    each executor task's Producer(...) rejects it (every task fails and is
    retried), while other bad options are reported once, on the driver."""
    with pytest.raises(ValueError, match="wire"):
        ProducerSettings.from_options({**TOWERS, "wire": "bogus"})


# --- with Spark -------------------------------------------------------------------


def test_produce_udf_sends_each_value_once_when_its_result_is_filtered(
    spark: Any, cluster: tuple[Tower, Store]
) -> None:
    """produce_udf is a side-effecting UDF registered as deterministic: Spark
    pushes a filter on its result below the projection and evaluates the UDF twice
    (two ArrowEvalPython nodes), so every value is produced twice."""
    from dafka.spark import produce_udf

    tower, store = cluster
    df = spark.range(0, 100, 1, 1).selectExpr("cast(id AS string) AS value")
    out = df.select(produce_udf(settings(tower, "udf2"))("value").alias("o")).where("o >= 0")
    assert len(out.collect()) == 100
    deadline = time.monotonic() + 10
    held = 0
    while time.monotonic() < deadline:  # every offset returned was acknowledged already
        held = sum(i.next_offset - i.first_offset for i in store.partitions("udf2"))
        if held > 100:
            break
        time.sleep(0.2)
    assert held == 100, f"{held} records held for 100 values"


def test_arrow_ipc_udf_keeps_the_spark_type_of_null_fields(spark: Any) -> None:
    """arrow_ipc_udf builds each record's schema from pandas: a binary field whose
    values in a batch are all null is encoded with Arrow type ``null`` instead of
    ``binary`` (the struct's Spark type is not used)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from dafka.spark import arrow_ipc_udf

    df = spark.createDataFrame([(1, None)], "id int, payload binary").coalesce(1)
    [row] = df.select(arrow_ipc_udf()(F.struct("id", "payload")).alias("ipc")).collect()
    schema = pa.ipc.open_stream(row.ipc).read_all().schema
    assert schema.field("payload").type == pa.binary(), schema


def test_produce_arrow_takes_a_column_name_with_a_dot(
    spark: Any, cluster: tuple[Tower, Store]
) -> None:
    """produce_arrow checks ``column in df.columns`` but then ``df.select(column)``
    parses the name, so a real column called ``v.x`` is "cannot be resolved"."""
    from dafka.spark import produce_arrow

    tower, _ = cluster
    df = spark.range(0, 10, 1, 1).selectExpr("cast(id AS string) AS `v.x`")
    rows = produce_arrow(df, settings(tower, "dot"), column="v.x").collect()
    assert sum(r["count"] for r in rows) == 10
