"""Records as Kafka's Spark connector has them, through the ``dafka`` data source:
keys, headers and timestamps from a Spark write to a Spark read in both dialects;
positioning by time (``startingTimestamp``, ``startingOffsetsByTimestamp``,
``endingTimestamp``) over records written at three distinct times; Kafka's JSON
shape of ``startingOffsets``; ``minPartitions``; ``minOffsetsPerTrigger`` with
``maxTriggerDelay``. Against a tower and a store on 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodes_util import wait_for

import dafka
import dafka.spark
from dafka import Producer, Store, Tower

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}
UTC = dt.UTC
#: Three distinct record times (ms), an hour apart.
T1, T2, T3 = 1_780_000_000_000, 1_780_003_600_000, 1_780_007_200_000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Tower, Store]]:
    with (
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        Store(tmp_path / "store", towers=[tower.endpoint], **FAST) as store,
    ):
        yield tower, store


def read(spark: Any, tower: Tower, topic: str, stream: bool = False, **options: str) -> Any:
    r = spark.readStream if stream else spark.read
    r = (
        r.format("dafka")
        .option("subscribe", topic)
        .option("towers", tower.endpoint)
        .option("beaconInterval", "0.2")
        .option("fetchTimeout", "20")
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def by_partition(df: Any) -> dict[str, list[int]]:
    """The offsets read, by partition, in order (each once)."""
    out: dict[str, list[int]] = {}
    for r in df.select("partition", "offset").collect():
        out.setdefault(r.partition, []).append(r.offset)
    for p, offs in out.items():
        assert len(offs) == len(set(offs)), f"offsets read twice in {p}"
        offs.sort()
    return out


HEADERS: list[list[tuple[str, bytes]]] = [
    [],
    [("trace", b"t-1")],
    [("dup", b"1"), ("dup", b"2"), ("dup", b"")],  # repeated names, kept in order
    [("clé", "värde".encode()), ("键", b"\x00\xff")],  # non-ASCII names, binary values
    [("", b"empty name")],
]


@pytest.mark.parametrize("wire", ["rfc", "zproto"])
def test_keys_headers_and_timestamps_survive_a_spark_write_and_read(
    spark: Any, tmp_path: Path, wire: str
) -> None:
    """Written by the sink (key, headers, timestamp columns), read by the source with
    includeHeaders, every node of the cluster in the dialect ``wire`` (the data
    source's ``wire`` option on both sides)."""
    with (
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        Store(tmp_path / "store", towers=[tower.endpoint], wire=wire, **FAST),
    ):
        write_and_read_records(spark, tower, wire)


def write_and_read_records(spark: Any, tower: Tower, wire: str) -> None:
    rows = []
    for i in range(200):
        key = None if i % 7 == 0 else b"k-%d" % (i % 13)  # some rows keyless
        ts = None if i % 11 == 0 else dt.datetime.fromtimestamp((T1 + i) / 1000, UTC)
        rows.append((b"v-%d" % i, key, [{"key": k, "value": v} for k, v in HEADERS[i % 5]], ts))
    schema = (
        "value binary, key binary, headers array<struct<key: string, value: binary>>, "
        "timestamp timestamp"
    )
    df = spark.createDataFrame(rows, schema).repartition(2)
    before = int(time.time() * 1000)
    (
        df.write.format("dafka")
        .option("topic", "meta")
        .option("towers", tower.endpoint)
        .option("wire", wire)
        .option("beaconInterval", "0.2")
        .option("flushTimeout", "60")
        .mode("append")
        .save()
    )
    after = int(time.time() * 1000)
    got = read(spark, tower, "meta", wire=wire, includeHeaders="true").selectExpr(
        "value", "key", "headers", "unix_millis(timestamp) AS ms", "timestampType"
    )
    assert got.columns == ["value", "key", "headers", "ms", "timestampType"]
    seen = {}
    for r in got.collect():
        i = int(bytes(r.value)[2:])
        assert i not in seen, f"row {i} read twice"
        seen[i] = r
    assert sorted(seen) == list(range(200))
    for i, r in seen.items():
        _value, key, _headers, ts = rows[i]
        assert (None if r.key is None else bytes(r.key)) == key, i
        assert [(h.key, bytes(h.value)) for h in r.headers] == HEADERS[i % 5], i
        assert r.timestampType == dafka.TIMESTAMP_CREATE, i
        if ts is None:  # the producer's clock at send
            assert before <= r.ms <= after, (i, r.ms)
        else:
            assert r.ms == T1 + i, i


def test_keys_and_times_from_arrow_buffers(spark: Any, cluster: tuple[Tower, Store]) -> None:
    """Without a headers column the sink sends keys and times straight from Spark's
    Arrow buffers (``Producer.send_buffers``), as ``produce_arrow(key=, timestamp=)``
    does: the same records come back. Null keys are no key; a null time is the time
    of sending; a long column is taken as ms."""
    tower, _ = cluster
    df = spark.range(0, 3000, 1, 2).selectExpr(
        "cast(id AS string) AS value",
        "IF(id % 5 = 0, NULL, cast(concat('k', id % 7) AS binary)) AS key",
        f"IF(id % 9 = 0, NULL, timestamp_millis({T1} + id)) AS timestamp",
        f"{T2} + id AS ms",
    )
    before = int(time.time() * 1000)
    (
        df.drop("ms")
        .write.format("dafka")
        .option("topic", "fast")
        .option("towers", tower.endpoint)
        .option("beaconInterval", "0.2")
        .mode("append")
        .save()
    )
    settings = dafka.spark.ProducerSettings(
        "fast2", towers=[tower.endpoint], beacon_interval=0.2, beacon_timeout=3.0
    )
    rows = dafka.spark.produce_arrow(df, settings, key="key", timestamp="ms").collect()
    assert sum(r["count"] for r in rows) == 3000
    after = int(time.time() * 1000)
    for topic, times in [
        ("fast", lambda i: None if i % 9 == 0 else T1 + i),
        ("fast2", lambda i: T2 + i),
    ]:
        got = read(spark, tower, topic).selectExpr("value", "key", "unix_millis(timestamp) AS ms")
        seen = {int(r.value): r for r in got.collect()}
        assert sorted(seen) == list(range(3000))
        for i, r in seen.items():
            assert (None if r.key is None else bytes(r.key)) == (
                None if i % 5 == 0 else b"k%d" % (i % 7)
            ), (topic, i)
            want = times(i)
            assert (before <= r.ms <= after) if want is None else r.ms == want, (topic, i)


def produce_at_times(tower: Tower, topic: str) -> dict[str, list[int]]:
    """Three partitions written across three times: A 10 records at each of T1, T2,
    T3; B 5 at T1 and 7 at T3; C 8 at T1. Returns each partition's record times."""
    plan = {"A": [T1] * 10 + [T2] * 10 + [T3] * 10, "B": [T1] * 5 + [T3] * 7, "C": [T1] * 8}
    out = {}
    for name, times in plan.items():
        with Producer(topic, towers=[tower.endpoint], **FAST) as p:
            p.send_many(
                [b"%s-%d" % (name.encode(), i) for i in range(len(times))], timestamps=times
            )
            assert p.flush(60.0) == 0
            out[name] = p.address
    return {out[n]: times for n, times in plan.items()}


def first_at(times: list[int], t: int) -> int:
    """Where a read from time ``t`` begins: the first offset at or after it."""
    return next((i for i, x in enumerate(times) if x >= t), len(times))


def test_positioning_by_time_in_every_partition(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    tower, _ = cluster
    parts = produce_at_times(tower, "tm")
    a, b, c = parts
    every = {p: list(range(len(t))) for p, t in parts.items()}
    assert by_partition(read(spark, tower, "tm")) == every
    for t in (T1, T2, T3, T2 - 1, T3 + 1):
        want = {p: list(range(first_at(times, t), len(times))) for p, times in parts.items()}
        want = {p: offs for p, offs in want.items() if offs}
        got = by_partition(read(spark, tower, "tm", startingTimestamp=str(t)))
        assert got == want, t
    # Kafka's strategy "error": a partition with no record that late fails the read.
    with pytest.raises(Exception, match="no record at or after the starting time"):
        read(
            spark,
            tower,
            "tm",
            startingTimestamp=str(T2),
            startingOffsetsByTimestampStrategy="error",
        ).collect()
    # Times by partition, in Kafka's shape; the partitions it does not name start
    # as startingOffsets says.
    by_ts = json.dumps({"tm": {a: T3, b: T2}})
    got = by_partition(read(spark, tower, "tm", startingOffsetsByTimestamp=by_ts))
    assert got == {a: list(range(20, 30)), b: list(range(5, 12)), c: list(range(8))}
    # A batch read ends before a time (exclusive), in every partition.
    got = by_partition(read(spark, tower, "tm", endingTimestamp=str(T3)))
    assert got == {a: list(range(20)), b: list(range(5)), c: list(range(8))}
    got = by_partition(read(spark, tower, "tm", startingTimestamp=str(T2), endingTimestamp=str(T3)))
    assert got == {a: list(range(10, 20))}
    # Ending times by partition; the others end as endingOffsets says.
    by_ts = json.dumps({"tm": {a: T2}})
    ends = json.dumps({b: 3})
    got = by_partition(read(spark, tower, "tm", endingOffsetsByTimestamp=by_ts, endingOffsets=ends))
    assert got == {a: list(range(10)), b: [0, 1, 2], c: list(range(8))}
    # A streaming query starts where the time says too, then reads what comes.
    q = dafka.spark.run_query(
        lambda: (
            read(spark, tower, "tm", stream=True, startingTimestamp=str(T3))
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        ),
        timeout=240,
    )
    assert q.exception() is None
    got = by_partition(spark.read.parquet(str(tmp_path / "out")))
    assert got == {a: list(range(20, 30)), b: list(range(5, 12))}


def test_starting_offsets_in_kafka_json_shape(spark: Any, cluster: tuple[Tower, Store]) -> None:
    tower, _ = cluster
    parts = produce_at_times(tower, "ko")
    a, b, c = parts
    start = json.dumps({"ko": {a: 25, b: -2}})  # c: not named, the default (earliest)
    end = json.dumps({"ko": {a: -1, b: 3, c: 6}})
    got = by_partition(read(spark, tower, "ko", startingOffsets=start, endingOffsets=end))
    assert got == {a: [25, 26, 27, 28, 29], b: [0, 1, 2], c: list(range(6))}
    with pytest.raises(Exception, match="names topic 'other'"):
        read(spark, tower, "ko", startingOffsets=json.dumps({"other": {a: 1}}))


def test_subscribe_pattern_reads_the_topics_it_matches(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    """subscribePattern: every topic the stores hold whose whole name matches (Kafka's
    Java regex and Python's agree on such patterns), found when the read is planned;
    a Kafka-shaped JSON must name a topic it matches."""
    tower, _ = cluster

    def produce(topic: str, n: int) -> str:
        with Producer(topic, towers=[tower.endpoint], **FAST) as p:
            p.send_many([topic.encode()] * n)
            assert p.flush(60.0) == 0
            return p.address

    for topic, n in [("pat.x", 3), ("pat.y", 4), ("pat.y2", 2), ("other", 5)]:
        produce(topic, n)

    def topics_read(df: Any) -> Counter[str]:
        return Counter(r.topic for r in df.select("topic").collect())

    pattern = {"subscribePattern": r"pat\.[a-z]"}
    assert topics_read(read_pattern(spark, tower, **pattern)) == {"pat.x": 3, "pat.y": 4}
    with pytest.raises(Exception, match="names topic 'other'"):
        read_pattern(spark, tower, startingOffsets=json.dumps({"other": {"A" * 32: 0}}), **pattern)

    def stream() -> Any:
        return dafka.spark.run_query(
            lambda: (
                read_pattern(spark, tower, stream=True, startingOffsets="earliest", **pattern)
                .writeStream.format("parquet")
                .option("path", str(tmp_path / "out"))
                .option("checkpointLocation", str(tmp_path / "ckpt"))
                .trigger(availableNow=True)
                .start()
            ),
            timeout=240,
        )

    stream()
    assert topics_read(spark.read.parquet(str(tmp_path / "out"))) == {"pat.x": 3, "pat.y": 4}
    # A topic that appears later is read too (a new partition: from its start).
    produce("pat.z", 6)
    stream()
    got = topics_read(spark.read.parquet(str(tmp_path / "out")))
    assert got == {"pat.x": 3, "pat.y": 4, "pat.z": 6}


def read_pattern(spark: Any, tower: Tower, stream: bool = False, **options: str) -> Any:
    r = spark.readStream if stream else spark.read
    r = r.format("dafka").option("towers", tower.endpoint).option("beaconInterval", "0.2")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_min_partitions_splits_reads_over_that_many_tasks(
    spark: Any, cluster: tuple[Tower, Store]
) -> None:
    tower, _ = cluster
    with Producer("mp", towers=[tower.endpoint], **FAST) as p:
        p.send_many([b"%d" % i for i in range(1000)])
        assert p.flush(60.0) == 0
        part = p.address
    assert read(spark, tower, "mp").rdd.getNumPartitions() == 1
    df = read(spark, tower, "mp", minPartitions="4")
    assert df.rdd.getNumPartitions() == 4
    assert by_partition(df) == {part: list(range(1000))}


def test_min_offsets_per_trigger_and_max_trigger_delay(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    """A stream holds back batches below minOffsetsPerTrigger (the first batch goes as
    soon as there are records), and lets a small one through once maxTriggerDelay
    passed since the last batch."""
    tower, _ = cluster
    p = Producer("mt", towers=[tower.endpoint], **FAST)

    def send(n: int) -> None:
        p.send_many([b"x"] * n)
        assert p.flush(60.0) == 0

    def sizes(q: Any) -> list[int]:
        return [int(x["numInputRows"]) for x in q.recentProgress if x["numInputRows"]]

    def start(name: str, delay: str) -> Any:
        return (
            read(
                spark,
                tower,
                "mt",
                stream=True,
                startingOffsets="earliest",
                minOffsetsPerTrigger="100",
                maxTriggerDelay=delay,
            )
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    try:
        send(50)
        q = start("held", "1h")
        try:
            wait_for(lambda: sum(sizes(q)) == 50, "the first batch", within=120)
            send(30)  # fewer than 100 new: held back (the delay is an hour)...
            send(80)  # ...until these come
            wait_for(lambda: sum(sizes(q)) == 160, "the second batch", within=120)
            assert sizes(q) == [50, 110]
        finally:
            q.stop()
        q = start("delayed", "1s")
        try:
            wait_for(lambda: sum(sizes(q)) == 160, "the backlog", within=120)
            send(10)  # fewer than 100, let through once a second passed
            wait_for(lambda: sum(sizes(q)) == 170, "the delayed batch", within=120)
            assert sizes(q)[-1] == 10
        finally:
            q.stop()
    finally:
        p.close()
