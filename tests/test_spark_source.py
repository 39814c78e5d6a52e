"""The ``dafka`` data source read side: a bounded batch read and the streaming
source (availableNow, checkpoint restart, maxOffsetsPerTrigger, startingOffsets,
failOnDataLoss), each against a tower and a store on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodes_util import wait_for

import dafka
import dafka.spark
from dafka import Log, Producer, Store, Tower

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.tower = Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0")
        self.store_path = tmp / "store"
        self.store: Store | None = Store(self.store_path, towers=[self.tower.endpoint], **FAST)

    def produce(self, topic: str, values: list[bytes], producer: Producer | None = None) -> str:
        """Sends ``values`` through ``producer`` (or a new one, closed after) and
        waits until the store ACKed them; returns the partition."""
        p = producer or Producer(topic, towers=[self.tower.endpoint], **FAST)
        try:
            p.send_many(values)
            assert p.flush(60.0) == 0
            return p.address
        finally:
            if producer is None:
                p.close()

    def held(self, topic: str) -> set[tuple[str, str, int, bytes]]:
        """Every record the store holds for ``topic``."""
        assert self.store is not None
        out = set()
        with Log(self.store_path / "log", read_only=True, retain_hours=None) as log:
            for info in self.store.partitions(topic):
                at = info.first_offset
                while at < info.next_offset:
                    recs = log.read(topic, info.partition, at, max_records=10_000)
                    out.update((topic, r.partition, r.offset, r.value) for r in recs)
                    at = recs[-1].offset + 1
        return out

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        self.tower.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def reader(spark: Any, c: Cluster, topic: str, stream: bool, **options: str) -> Any:
    r = spark.readStream if stream else spark.read
    r = (
        r.format("dafka")
        .option("subscribe", topic)
        .option("towers", c.tower.endpoint)
        .option("beaconInterval", "0.2")
        .option("fetchTimeout", "20")
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def rows(df: Any) -> set[tuple[str, str, int, bytes]]:
    got = [(r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect()]
    assert len(got) == len(set(got)), "duplicate records"
    return set(got)


def vals(prefix: str, n: int) -> list[bytes]:
    return [b"%s-%05d" % (prefix.encode(), i) for i in range(n)]


def run_available_now(spark: Any, c: Cluster, topic: str, out: Path, ckpt: Path, **opt: str) -> Any:
    q = dafka.spark.run_query(
        lambda: (
            reader(spark, c, topic, True, **opt)
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        ),
        timeout=240,
    )
    assert not q.isActive, "the query did not end within 240 s"
    assert q.exception() is None, q.exception()
    return q


def test_batch_read_bounded_range(spark: Any, cluster: Cluster) -> None:
    a = cluster.produce("b", vals("a", 3000))
    b = cluster.produce("b", vals("b", 2000))
    held = cluster.held("b")
    assert len(held) == 5000
    assert rows(reader(spark, cluster, "b", False)) == held
    # A bounded range: partition a from 1000, partition b up to 500.
    got = rows(
        reader(
            spark,
            cluster,
            "b",
            False,
            startingOffsets=json.dumps({a: 1000}),
            endingOffsets=json.dumps({a: -1, b: 500}),
        )
    )
    assert got == {r for r in held if (r[1] == a and r[2] >= 1000) or (r[1] == b and r[2] < 500)}
    # Ranges split over several tasks read the same records (the two tails,
    # 200 and 600 records, shorter than a task's 700, share one).
    df = reader(spark, cluster, "b", False, maxRecordsPerTask="700")
    assert df.rdd.getNumPartitions() == 4 + 2 + 1
    assert rows(df) == held


def test_batch_read_packs_small_partitions_into_few_tasks(spark: Any, cluster: Cluster) -> None:
    """A topic written by many Spark tasks has many small partitions: they share
    tasks (one read client each) instead of costing a Spark task apiece."""
    for k in range(24):
        cluster.produce("m", vals(f"p{k}", 20 + k))
    held = cluster.held("m")
    assert len(held) == sum(20 + k for k in range(24))
    df = reader(spark, cluster, "m", False)
    assert df.rdd.getNumPartitions() == 1
    assert rows(df) == held
    # At least 100 records a task (20-43 records a partition, 756 in all): 3-5
    # partitions a task, so 6-8 tasks, depending on the partitions' order.
    df = reader(spark, cluster, "m", False, minRecordsPerTask="100")
    assert 6 <= df.rdd.getNumPartitions() <= 8
    assert rows(df) == held


def test_stream_available_now_restart_from_checkpoint(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    with Producer("s", towers=[cluster.tower.endpoint], **FAST) as p1:
        cluster.produce("s", vals("x", 2500), p1)
        cluster.produce("s", vals("y", 1500))
        run_available_now(spark, cluster, "s", out, ckpt, startingOffsets="earliest")
        first = rows(spark.read.parquet(str(out)))
        assert first == cluster.held("s")
        # More records, one more partition; the restarted query reads only those.
        cluster.produce("s", vals("x2", 700), p1)
        cluster.produce("s", vals("z", 300))
    run_available_now(spark, cluster, "s", out, ckpt, startingOffsets="earliest")
    everything = rows(spark.read.parquet(str(out)))  # asserts no repeats
    assert everything == cluster.held("s")
    assert len(everything) == 2500 + 1500 + 700 + 300


def test_stream_max_offsets_per_trigger(spark: Any, cluster: Cluster, tmp_path: Path) -> None:
    cluster.produce("m", vals("a", 1500))
    cluster.produce("m", vals("b", 900))
    q = run_available_now(
        spark,
        cluster,
        "m",
        tmp_path / "out",
        tmp_path / "ckpt",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="500",
    )
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 2400
    assert max(sizes) <= 500
    assert len(sizes) >= 5
    assert rows(spark.read.parquet(str(tmp_path / "out"))) == cluster.held("m")


def test_stream_starting_offsets_latest_and_json(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    with Producer("l", towers=[cluster.tower.endpoint], **FAST) as p:
        part = cluster.produce("l", vals("old", 400), p)
        # latest: the first run starts at the heads and reads nothing...
        run_available_now(spark, cluster, "l", tmp_path / "o1", tmp_path / "c1")
        cluster.produce("l", vals("new", 100), p)
    # ...the restart reads only what came after.
    run_available_now(spark, cluster, "l", tmp_path / "o1", tmp_path / "c1")
    got = rows(spark.read.parquet(str(tmp_path / "o1")))
    assert sorted(r[2] for r in got) == list(range(400, 500))
    # JSON: from offset 450 of that partition.
    run_available_now(
        spark,
        cluster,
        "l",
        tmp_path / "o2",
        tmp_path / "c2",
        startingOffsets=json.dumps({part: 450}),
    )
    got = rows(spark.read.parquet(str(tmp_path / "o2")))
    assert sorted(r[2] for r in got) == list(range(450, 500))


def retention_deleted_the_start(cluster: Cluster, tmp_path: Path) -> tuple[str, int]:
    """Replaces the cluster's store by one with tiny segments that holds 3,000
    records of topic ``r`` in one partition, the oldest deleted by retention
    while it was down; returns the partition and its first offset held."""
    assert cluster.store is not None
    cluster.store.close()
    cluster.store_path = tmp_path / "small"

    def small_store() -> Store:
        return Store(
            cluster.store_path, towers=[cluster.tower.endpoint], segment_bytes=16384, **FAST
        )

    cluster.store = small_store()
    part = cluster.produce("r", [b"%0100d" % i for i in range(3000)])
    cluster.store.close()
    cluster.store = None
    with Log(cluster.store_path / "log", segment_bytes=16384, retain_bytes=100_000) as log:
        assert log.enforce_retention() > 0
    cluster.store = small_store()
    (info,) = cluster.store.partitions("r")
    assert 0 < info.first_offset < 3000
    return part, info.first_offset


def test_stream_reader_begins_a_partition_new_to_it_at_its_first_record_held(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The streaming source between triggers (no availableNow target): a
    partition not in the last batch's offsets is planned from where it now
    begins, within the maxOffsetsPerTrigger budget too."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from dafka.spark.datasource import DafkaStreamReader, RangePartition

    part, first = retention_deleted_the_start(cluster, tmp_path)
    r = DafkaStreamReader(
        {"subscribe": "r", "towers": cluster.tower.endpoint, "beaconInterval": "0.2"}
    )
    end = r.latestOffset({}, ReadAllAvailable())
    assert end == {part: 3000}
    assert r.partitions({}, end) == [RangePartition("r", part, first, 3000)]
    # A fresh reader (as after a restart) with a budget of 100 records.
    r = DafkaStreamReader(
        {"subscribe": "r", "towers": cluster.tower.endpoint, "beaconInterval": "0.2"}
    )
    end = r.latestOffset({}, ReadMaxRows(100))
    assert end == {part: first + 100}
    assert r.partitions({}, end) == [RangePartition("r", part, first, first + 100)]
    # Known to the query already: read from where its offsets say.
    assert r.latestOffset({part: 5}, ReadMaxRows(100)) == {part: 105}


def test_stream_offsets_forget_partitions_no_store_announced_for_a_while() -> None:
    """A partition no store announced for ``forgetPartitionsAfter`` seconds leaves
    the offsets (a topic that Spark jobs write gets a partition per task; the JSON
    goes into every micro-batch's offset log). Announced again within the time, it
    stays; after, it is new to the query (read from its first record held)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from dafka.spark.datasource import DafkaStreamReader

    a, b = "A" * 32, "B" * 32

    class Stores:
        """What the stores announce: heads, and first offsets held."""

        forget_absent_after = 60.0
        max_records_per_task, min_records_per_task, fail_on_data_loss = 1000, 1, True
        min_partitions = None
        topics, pattern = ("t",), None

        def watch(self, topic: str) -> Any:
            return object()  # a planning client: these answers need none

        def __init__(self) -> None:
            self.heads: dict[str, int] = {}

        def offsets(
            self, only: Any, exclude: Any = (), watches: Any = None, topics: Any = None
        ) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
            hs = {p: ("t", h) for p, h in self.heads.items()}
            return hs, {p: 3 for p in hs if only is None and p not in exclude}

    r = DafkaStreamReader({"subscribe": "t", "towers": "tcp://127.0.0.1:9"})
    stores = Stores()
    r.settings = stores  # type: ignore[assignment]
    r._watch_clients = {}
    now = [0.0]
    r._clock = lambda: now[0]  # type: ignore[method-assign]
    stores.heads = {a: 10, b: 5}
    start = {a: 10, b: 5}
    assert r.latestOffset(start, ReadAllAvailable()) == start
    stores.heads = {a: 12}  # B's stores are away, or its records were all deleted
    now[0] = 59.0
    assert r.latestOffset(start, ReadAllAvailable()) == {a: 12, b: 5}
    stores.heads = {a: 12, b: 5}  # back in time: the count starts again
    now[0] = 100.0
    assert r.latestOffset(start, ReadAllAvailable()) == {a: 12, b: 5}
    stores.heads = {a: 12}
    now[0] = 101.0
    assert r.latestOffset(start, ReadMaxRows(1)) == {a: 11, b: 5}
    now[0] = 161.0
    assert r.latestOffset(start, ReadMaxRows(1)) == {a: 11}
    assert r.absent_since == {} and b not in r.topics
    assert r.latestOffset({a: 11}, ReadAllAvailable()) == {a: 12}
    # Announced again after that: a partition new to the query.
    stores.heads = {a: 12, b: 8}
    end = r.latestOffset({a: 12}, ReadAllAvailable())
    assert end == {a: 12, b: 8}
    assert [(x.partition, x.start, x.end) for x in r.partitions({a: 12}, end)] == [(b, 3, 8)]
    with pytest.raises(ValueError, match="forgetPartitionsAfter"):
        DafkaStreamReader({"subscribe": "t", "towers": "tcp://h:1", "forgetPartitionsAfter": "0"})


def test_earliest_starts_where_retention_left_off_and_fail_on_data_loss(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    """As with Kafka: ``earliest``, and partitions a running query discovers,
    begin at the first record stores still hold, so records retention deleted
    before are not a loss; records a query asked for by offset are."""
    q = cluster.produce("r", vals("q", 10))
    early = {"startingOffsets": "earliest"}
    run_available_now(spark, cluster, "r", tmp_path / "o1", tmp_path / "c1", **early)
    part, first = retention_deleted_the_start(cluster, tmp_path)
    held = {("r", part, i, b"%0100d" % i) for i in range(first, 3000)}
    assert dafka.offsets("r", towers=[cluster.tower.endpoint], **FAST) == {part: (first, 3000)}

    # The first query's checkpoint knows only q: the new partition begins at `first`.
    run_available_now(spark, cluster, "r", tmp_path / "o1", tmp_path / "c1", **early)
    got = rows(spark.read.parquet(str(tmp_path / "o1")))
    assert got == held | {("r", q, i, v) for i, v in enumerate(vals("q", 10))}
    # A new query and a batch read from earliest, failOnDataLoss on (the default).
    run_available_now(spark, cluster, "r", tmp_path / "o2", tmp_path / "c2", **early)
    assert rows(spark.read.parquet(str(tmp_path / "o2"))) == held
    assert rows(reader(spark, cluster, "r", False)) == held
    assert rows(reader(spark, cluster, "r", False, startingOffsets=json.dumps({part: -2}))) == held

    # Records asked for by offset that retention deleted are lost.
    start = json.dumps({part: 5})
    with pytest.raises(Exception, match="gone from every store") as e:
        run_available_now(
            spark, cluster, "r", tmp_path / "o3", tmp_path / "c3", startingOffsets=start
        )
    # The Spark layer names its option, not fetch_ranges' keyword.
    assert "option failOnDataLoss off" in str(e.value) and "fail_on_loss" not in str(e.value)
    run_available_now(
        spark,
        cluster,
        "r",
        tmp_path / "o4",
        tmp_path / "c4",
        startingOffsets=start,
        failOnDataLoss="false",
    )
    assert rows(spark.read.parquet(str(tmp_path / "o4"))) == held


def test_read_options_are_checked(spark: Any, cluster: Cluster) -> None:
    with pytest.raises(Exception, match="subscribe"):
        spark.read.format("dafka").option("towers", cluster.tower.endpoint).load().collect()
    with pytest.raises(Exception, match="startingOffsets"):
        reader(spark, cluster, "b", False, startingOffsets="{oops").collect()
    with pytest.raises(dafka.FetchTimeoutError, match="towers"):
        dafka.heads("b", towers=["tcp://127.0.0.1:1,2"], timeout=0.5)


def test_data_source_is_auto_discovered(tmp_path: Path) -> None:
    """A fresh SparkSession finds format("dafka") without register() (through the
    top-level ``pyspark_dafka`` module PySpark scans for)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        from pyspark.sql import SparkSession
        s = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
        s = s.getOrCreate()
        try:
            s.read.format("dafka").option("subscribe", "x").load().collect()
        except Exception as e:
            print("ERROR:", e)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, cwd=tmp_path
    )
    # The dafka reader itself answered: it wants towers.
    assert 'option("towers"' in out.stdout, out.stdout + out.stderr[-2000:]


def test_read_options_in_seconds_are_checked_and_reach_the_heads_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``headsSettle`` reaches ``heads``/``offsets``; a bad number of seconds names
    its option (it used to be a bare float() error)."""
    from dafka.spark import _read_settings, datasource

    base = {"subscribe": "t", "towers": "tcp://127.0.0.1:1,2"}
    s = datasource.ReadSettings.from_options({**base, "headsSettle": "0.1"})
    assert (s.heads_settle, s.heads_timeout, s.fetch_timeout) == (0.1, 10.0, 60.0)
    seen: list[dict[str, Any]] = []

    def fake(topic: str, **kw: Any) -> dict[str, Any]:
        seen.append(kw)
        return {}

    monkeypatch.setattr(_read_settings, "offsets", fake)
    s.heads()
    s.offsets(None)
    assert [kw["settle"] for kw in seen] == [0.1, 0.1]
    assert seen[0]["partitions"] == [], "heads alone probes no first offset"
    for key, bad in [("headsSettle", "soon"), ("fetchTimeout", "-1"), ("headsTimeout", "nan")]:
        with pytest.raises(ValueError, match=key):
            datasource.ReadSettings.from_options({**base, key: bad})
    # maxOffsetsPerTrigger names itself too (it was a bare int() error).
    for bad in ["many", "0", "2.5"]:
        with pytest.raises(ValueError, match="option maxOffsetsPerTrigger must be"):
            datasource.DafkaStreamReader({**base, "maxOffsetsPerTrigger": bad})
    reader = datasource.DafkaStreamReader({**base, "maxOffsetsPerTrigger": "500"})
    assert reader.max_per_trigger == 500
    assert datasource.DafkaStreamReader(base).max_per_trigger is None


def test_stream_reader_plans_through_one_client_kept_across_batches(cluster: Cluster) -> None:
    """The stream reader's planning rounds go through one :class:`dafka.HeadsWatch`
    per topic, kept across micro-batches: after the first, a round ends shortly
    once the stores answered again instead of waiting ``headsSettle`` (``quick_rounds``).
    A partition that appears later is still found; the reader still pickles (Spark
    ships readers to executors) without its client; ``stop()`` closes the client."""
    import pickle

    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from dafka.spark.datasource import DafkaStreamReader

    first = cluster.produce("w", vals("a", 10))
    r = DafkaStreamReader(
        {
            "subscribe": "w",
            "towers": cluster.tower.endpoint,
            "beaconInterval": "0.2",
            "startingOffsets": "earliest",
        }
    )
    start = r.initialOffset()
    assert start == {first: 0}
    assert r.latestOffset(start, ReadAllAvailable()) == {first: 10}
    assert r._watch_clients is not None
    watch = r._watch_clients["w"]
    assert watch.stats()["quick_rounds"] >= 1, watch.stats()
    second = cluster.produce("w", vals("b", 5))
    wait_for(
        lambda: r.latestOffset(start, ReadAllAvailable()) == {first: 10, second: 5},
        "the new partition in the reader's heads",
    )
    assert r.partitions(start, {first: 10, second: 5})
    assert watch.stats()["rounds"] >= 3
    # Probes of partitions that begin at 0 (this one, the first) end at once.
    assert watch.stats()["quick_probes"] >= 1, watch.stats()
    copy = pickle.loads(pickle.dumps(r))
    assert copy._watch_clients is None and copy.topics == r.topics
    r.stop()
    with pytest.raises(dafka.ClosedError):
        watch.offsets()


def test_stream_of_a_topic_nobody_wrote_yet_waits_for_its_records(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    """Micro-batches planned while no store holds a record of the topic find
    nothing (stores holding nothing of a topic do not answer, and a planning round
    must not wait for them until ``headsTimeout``), and the query reads the records
    once they come."""
    got: list[int] = []

    def start() -> Any:
        return (
            reader(spark, cluster, "later", True, headsTimeout="3")
            .writeStream.foreachBatch(lambda df, _id: got.append(df.count()))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    q, restarts = start(), 0

    def healthy() -> bool:
        """Fails on the query's error, but first restarts a query whose Python worker
        did not connect back in time (Spark's fixed 10 s, missed on a loaded machine,
        at the first trigger or later: `dafka.spark.died_starting`); it read nothing."""
        nonlocal q, restarts
        if dafka.spark.died_starting(q) and restarts < 3:
            q, restarts = start(), restarts + 1
        assert q.exception() is None, q.exception()
        return True

    try:
        # Several planning rounds of an empty topic: each makes no batch.
        wait_for(lambda: healthy() and len(q.recentProgress) >= 1, "a trigger")
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            healthy()
            time.sleep(0.2)
        cluster.produce("later", vals("l", 10))
        wait_for(lambda: healthy() and sum(got) == 10, "the records", 120)
    finally:
        q.stop()
