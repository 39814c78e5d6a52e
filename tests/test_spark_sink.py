"""The ``dafka`` data source write side: batch writes and a streaming sink fed by a
file stream and by the rate source. Retries, speculation, routing by topic:
test_spark_exactly_once.py and test_spark_speculation.py."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dafka
import dafka.spark
from dafka import Consumer, Store, Tower

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Tower, Store]]:
    with (
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        Store(tmp_path / "store", towers=[tower.endpoint], **FAST) as store,
    ):
        yield tower, store


def consume(
    tower: Tower, topic: str, n: int, within: float = 60.0, *, every: bool = False
) -> list[dafka.Record]:
    """Reads ``topic`` until ``n`` records arrived or, with ``every``, until each of
    the values ``0..n-1`` did (records that may come twice or on top, from a failed
    attempt or a batch cut by ``stop()``, must not end the wait early)."""
    got: list[dafka.Record] = []
    seen: set[int] = set()
    with Consumer([topic], towers=[tower.endpoint], offset_reset="earliest", **FAST) as c:
        deadline = time.monotonic() + within
        while (len(seen) if every else len(got)) < n and time.monotonic() < deadline:
            batch = c.poll_many(timeout=0.2)
            got.extend(batch)
            if every:
                seen.update(v for v in (int(r.value) for r in batch) if v < n)
        got.extend(c.poll_many(timeout=1.0))
    return got


def sink(w: Any, tower: Tower, topic: str) -> Any:
    return (
        w.format("dafka")
        .option("topic", topic)
        .option("towers", tower.endpoint)
        .option("beaconInterval", "0.2")
        .option("flushTimeout", "60")
    )


def test_batch_write(spark: Any, cluster: tuple[Tower, Store]) -> None:
    tower, store = cluster
    df = spark.range(0, 20000, 1, 3).selectExpr("cast(id AS string) AS value")
    sink(df.write, tower, "bw").mode("append").save()
    got = consume(tower, "bw", 20000)
    assert Counter(r.value for r in got) == Counter(str(i).encode() for i in range(20000))
    assert len(store.partitions("bw")) == 3


def test_write_needs_value_column_and_topic(spark: Any, cluster: tuple[Tower, Store]) -> None:
    tower, _ = cluster
    df = spark.range(3).selectExpr("cast(id AS string) AS v")
    with pytest.raises(Exception, match="'value' column"):
        sink(df.write, tower, "x").mode("append").save()
    df = spark.range(3).selectExpr("cast(id AS string) AS value")
    with pytest.raises(Exception, match="topic"):
        df.write.format("dafka").option("towers", tower.endpoint).mode("append").save()


def test_write_options_are_checked_by_name() -> None:
    """A bad number names its option (they were bare int()/float() errors, and a
    flushTimeout of "nan" passed)."""
    base = {"topic": "t", "towers": "tcp://127.0.0.1:1,2"}
    for key, bad, words in [
        ("minAcks", "two", "an integer"),
        ("minAcks", "-1", ">= 0"),
        ("flushTimeout", "nan", "a positive number of seconds"),
        ("flushTimeout", "0", "a positive number of seconds"),
        ("beaconInterval", "soon", "a number of seconds"),
        ("beaconTimeout", "-4", "a positive number of seconds"),
    ]:
        with pytest.raises(ValueError, match=f"option {key} must be {words}"):
            dafka.spark.ProducerSettings.from_options({**base, key: bad})
    # Said by the options' names (the Spark layer words its own errors).
    with pytest.raises(
        ValueError, match=r"option beaconTimeout .* must be longer than option beaconInterval"
    ):
        dafka.spark.ProducerSettings.from_options({**base, "beaconInterval": "5"})
    s = dafka.spark.ProducerSettings.from_options({**base, "minAcks": "0", "flushTimeout": "5"})
    assert (s.min_acks, s.flush_timeout, s.beacon_interval) == (0, 5.0, 1.0)
    assert s.record_batches, "RECORD-BATCHes unless asked not to"
    s = dafka.spark.ProducerSettings.from_options({**base, "recordBatches": "false"})
    assert not s.record_batches
    with pytest.raises(ValueError, match="option recordBatches must be true or false"):
        dafka.spark.ProducerSettings.from_options({**base, "recordBatches": "often"})
    with pytest.raises(ValueError, match="connect_wait must be >= 0"):
        dafka.spark.ProducerSettings("t", peers=["tcp://127.0.0.1:1"], connect_wait=-1)


def test_stream_sink_from_files_arrives_completely(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    tower, _ = cluster
    src = tmp_path / "src"
    src.mkdir()
    for f in range(4):
        lines = [json.dumps({"value": f"f{f}-{i}"}) for i in range(2500)]
        (src / f"part-{f}.json").write_text("\n".join(lines) + "\n")
    stream = spark.readStream.schema("value string").option("maxFilesPerTrigger", 2).json(str(src))
    q = dafka.spark.run_query(
        lambda: (
            sink(stream.writeStream, tower, "ss")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        ),
        timeout=240,
    )
    assert not q.isActive, "the query did not end within 240 s"
    assert q.exception() is None
    got = consume(tower, "ss", 10000)
    want = Counter(f"f{f}-{i}".encode() for f in range(4) for i in range(2500))
    assert Counter(r.value for r in got) == want


def test_stream_sink_from_rate_source(
    spark: Any, cluster: tuple[Tower, Store], tmp_path: Path
) -> None:
    tower, store = cluster
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 500)
        .option("numPartitions", 2)
        .load()
        .selectExpr("cast(value AS string) AS value")
    )

    def start() -> Any:
        return (
            sink(stream.writeStream, tower, "rate")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="0 seconds")
            .start()
        )

    q, restarts = start(), 0
    try:
        deadline = time.monotonic() + 120
        while (q.lastProgress is None or q.lastProgress["batchId"] < 7) and (
            time.monotonic() < deadline
        ):
            if dafka.spark.died_starting(q) and restarts < 2:
                q, restarts = start(), restarts + 1  # see dafka.spark.run_query
                continue
            assert q.exception() is None
            time.sleep(0.2)
    finally:
        q.stop()
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    done = sum(p["numInputRows"] for p in batches)
    assert len(batches) >= 7 and done >= 3500
    got = consume(tower, "rate", done, every=True)
    values = Counter(int(r.value) for r in got)
    # Every committed batch arrived; a batch cut by stop() may have arrived too.
    assert all(values[i] >= 1 for i in range(done)), "records of committed batches are missing"
    assert max(values.values()) == 1
    # Two tasks per batch, each continuing the partition of its Spark partition id:
    # two partitions, not one per task and batch.
    assert len(store.partitions("rate")) == 2
