"""The ``dafka`` data source's options: unknown ones and bad values raise where the
read is loaded or the write saved or started, naming the option and listing the
valid ones; and the parts of the new options that need no cluster (planning with
``minPartitions``, ``startingOffsets`` in Kafka's JSON shape, the
``minOffsetsPerTrigger`` / ``maxTriggerDelay`` hold-back)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from secure_util import Keys

import dafka.spark
from dafka.spark import _options
from dafka.spark.datasource import (
    BATCH_READ,
    STREAM_READ,
    DafkaStreamReader,
    PackedRanges,
    RangePartition,
    ReadSettings,
    _Reads,
    parse_offsets,
    plan,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TOWER = "tcp://127.0.0.1:1,2"  # never contacted
READ = {"subscribe": "t", "towers": TOWER}
WRITE = {"topic": "t", "towers": TOWER}


def test_unknown_and_misplaced_options_raise_naming_them_and_the_valid_ones(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="unknown option 'startingoffset'") as e:
        _options.check_options({**READ, "startingOffset": "earliest"}, STREAM_READ)
    # The valid ones are listed, as documented (any case).
    assert "startingOffsets" in str(e.value) and "maxOffsetsPerTrigger" in str(e.value)
    assert "endingOffsets" not in str(e.value), "a stream has no end"
    with pytest.raises(ValueError, match="option endingOffsets applies to batch reads"):
        _options.check_options({**READ, "endingOffsets": "latest"}, STREAM_READ)
    with pytest.raises(ValueError, match="option maxOffsetsPerTrigger applies to streaming reads"):
        _options.check_options({**READ, "maxOffsetsPerTrigger": "10"}, BATCH_READ)
    with pytest.raises(ValueError, match="option subscribe applies to reads"):
        _options.check_options({**WRITE, "subscribe": "x"}, _options.BATCH_WRITE)
    with pytest.raises(ValueError, match="option writeId applies to batch writes"):
        _options.check_options({**WRITE, "writeId": "x"}, _options.STREAM_WRITE)
    with pytest.raises(ValueError, match="option reuseProducer is not a dafka option") as e:
        _options.check_options({**WRITE, "reuseProducer": "true"}, _options.STREAM_WRITE)
    assert "exactly-once" in str(e.value)
    with pytest.raises(ValueError, match="option subscribePattern must be a regular expression"):
        _options.check_options({**READ, "subscribePattern": "t(.*"}, STREAM_READ)
    with pytest.raises(ValueError, match="one of options subscribe and subscribePattern"):
        ReadSettings.from_options({**READ, "subscribePattern": "t.*"})
    # In secure mode too (issue 39): the stores list the topics the certificate allows.
    keys = Keys(tmp_path / "keys", {"reader": "consumer"})
    tower_key = keys.z85("reader")[0].decode()  # a well-formed key: never contacted
    secure = ReadSettings.from_options(
        {"subscribePattern": "t.*", "towers": f"{TOWER};curve={tower_key}", **keys.of("reader")}
    )
    assert secure.subscribes("t1")
    s = ReadSettings.from_options({"subscribePattern": r"ev\.[a-z]+", "towers": TOWER})
    assert s.subscribes("ev.click") and not s.subscribes("ev.click2")  # the whole name
    assert not s.subscribes("xev.click")
    with pytest.raises(ValueError, match="option path is not a dafka option"):
        _options.check_options({**WRITE, "path": "/tmp/x"}, _options.BATCH_WRITE)
    # Spark's own, given to writeStream: accepted there, and nowhere else.
    _options.check_options(
        {**WRITE, "checkpointLocation": "/c", "queryName": "q"}, _options.STREAM_WRITE
    )
    with pytest.raises(ValueError, match="checkpointLocation applies to streaming writes"):
        _options.check_options({**WRITE, "checkpointLocation": "/c"}, _options.BATCH_WRITE)


@pytest.mark.parametrize(
    ("kind", "key", "bad", "says"),
    [
        (STREAM_READ, "includeHeaders", "maybe", "must be true or false"),
        (STREAM_READ, "minPartitions", "0", "must be >= 1"),
        (STREAM_READ, "minOffsetsPerTrigger", "lots", "must be an integer"),
        (STREAM_READ, "maxTriggerDelay", "soon", "must be a duration"),
        (STREAM_READ, "maxTriggerDelay", "0s", "longer than 0"),
        (STREAM_READ, "startingTimestamp", "09:00", "milliseconds since the epoch"),
        (STREAM_READ, "startingTimestamp", "-5", ">= 0 ms"),
        (STREAM_READ, "startingOffsetsByTimestamp", "[1]", "a JSON object"),
        (STREAM_READ, "startingOffsetsByTimestampStrategy", "skip", "one of latest, error"),
        (BATCH_READ, "endingTimestamp", "x", "milliseconds since the epoch"),
        (STREAM_READ, "wire", "http", "one of rfc, zproto"),
        (STREAM_READ, "subscribe", " ", "must not be empty"),
        (_options.BATCH_WRITE, "wire", "http", "one of rfc, zproto"),
        (_options.BATCH_WRITE, "writeId", "", "must not be empty"),
        (_options.BATCH_WRITE, "minAcks", "-1", "must be >= 0"),
    ],
)
def test_bad_values_name_their_option(kind: str, key: str, bad: str, says: str) -> None:
    base = READ if "read" in kind else WRITE
    with pytest.raises(ValueError, match=rf"option {key} .*{re.escape(says)}"):
        _options.check_options({**base, key: bad}, kind)


def test_starting_offsets_name_partitions_that_can_be_and_are_held() -> None:
    """Kafka's ``{"orders": {"0": 5}}`` names a partition that cannot be (a dafka
    partition is a producer's address): refused, as one no store holds is when the
    read starts; it used to read everything."""
    with pytest.raises(ValueError, match="there are no numbered partitions"):
        parse_offsets(json.dumps({"t": {"0": 5}}), "startingOffsets", ["t"])
    with pytest.raises(ValueError, match="there are no numbered partitions"):
        parse_offsets(json.dumps({"0": 5}), "endingOffsets", ["t"], BATCH_READ)
    held, gone = "B" * 32, "A" * 32
    reads = _Reads({**READ, "startingOffsets": json.dumps({gone: 5})}, STREAM_READ)
    with pytest.raises(ValueError, match=f"names partition\\(s\\) {gone}, which no store"):
        reads.start_at({held: ("t", 10)}, {})
    reads = _Reads({**READ, "startingOffsets": json.dumps({held: 5})}, STREAM_READ)
    assert reads.start_at({held: ("t", 10)}, {}) == {held: 5}


def test_durations_as_spark_writes_them() -> None:
    assert _options.duration_ms("d", "15m") == 900_000
    assert _options.duration_ms("d", "30s") == 30_000
    assert _options.duration_ms("d", "250") == 250  # a bare number: ms, as Spark's
    assert _options.duration_ms("d", "1.5h") == 5_400_000


def test_starting_offsets_in_both_json_shapes() -> None:
    a, b = "A" * 32, "B" * 32
    spec = parse_offsets(json.dumps({"t": {a: 5, b: -2}}), "startingOffsets", ["t", "u"])
    assert spec.offsets == {a: 5, b: -2} and spec.topics == {a: "t", b: "t"}
    spec = parse_offsets(json.dumps({a: 5}), "startingOffsets", ["t"])
    assert spec.offsets == {a: 5} and spec.topics == {}
    with pytest.raises(ValueError, match="names topic 'x', which the read does not subscribe"):
        parse_offsets(json.dumps({"x": {a: 1}}), "startingOffsets", ["t"])
    with pytest.raises(ValueError, match="mixes the two JSON shapes"):
        parse_offsets(json.dumps({"t": {a: 1}, b: 2}), "startingOffsets", ["t"])
    with pytest.raises(ValueError, match="not an integer"):
        parse_offsets(json.dumps({a: "5"}), "startingOffsets", ["t"])
    # As with Kafka: a batch read does not start at latest nor end at earliest.
    for spec_text, option in [
        ("latest", "startingOffsets"),
        (json.dumps({"t": {a: -1}}), "startingOffsets"),
        ("earliest", "endingOffsets"),
        (json.dumps({a: -2}), "endingOffsets"),
    ]:
        with pytest.raises(ValueError, match=f"option {option} of a batch read cannot be"):
            parse_offsets(spec_text, option, ["t"], BATCH_READ)
    assert parse_offsets("latest", "startingOffsets", ["t"], STREAM_READ).word == "latest"


def test_starting_timestamp_excludes_what_it_takes_precedence_over() -> None:
    """Kafka's precedence, startingTimestamp over startingOffsetsByTimestamp over
    startingOffsets: given together, one would be ignored, so they raise."""
    a = "A" * 32
    for other in [{"startingOffsets": "earliest"}, {"startingOffsetsByTimestamp": "{}"}]:
        with pytest.raises(ValueError, match=r"option startingTimestamp .* give only one"):
            DafkaStreamReader({**READ, "startingTimestamp": "1000", **other})
    # Times by partition leave the other partitions to startingOffsets: both apply.
    r = DafkaStreamReader(
        {
            **READ,
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": json.dumps({"t": {a: 1000}}),
        }
    )
    assert r.reads.start_times.by_partition == {a: 1000}
    with pytest.raises(ValueError, match="startingOffsetsByTimestampStrategy applies with"):
        DafkaStreamReader({**READ, "startingOffsetsByTimestampStrategy": "error"})
    with pytest.raises(ValueError, match="maxTriggerDelay applies with minOffsetsPerTrigger"):
        DafkaStreamReader({**READ, "maxTriggerDelay": "1m"})
    with pytest.raises(ValueError, match=r"minOffsetsPerTrigger .* at most maxOffsetsPerTrigger"):
        DafkaStreamReader({**READ, "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"})


def settings(**kw: Any) -> ReadSettings:
    return ReadSettings.from_options({**READ, **{k: str(v) for k, v in kw.items()}})


def ranges(parts: list[Any]) -> list[tuple[str, int, int]]:
    out = []
    for p in parts:
        for r in p.ranges if isinstance(p, PackedRanges) else (p,):
            out.append((r.partition, r.start, r.end))
    return sorted(out)


def test_min_partitions_splits_large_ranges_as_kafka_does() -> None:
    """Fewer ranges than minPartitions: cut in proportion to their size (Kafka's
    KafkaOffsetRangeCalculator); a small range stays whole."""
    a, b, c = "A" * 32, "B" * 32, "C" * 32
    topics = {a: "t", b: "t", c: "t"}
    start, end = {a: 0, b: 0, c: 0}, {a: 1000, b: 3000, c: 10}
    assert len(plan(settings(), start, end, topics)) == 1  # packed: 4,010 < 50,000
    got = plan(settings(minPartitions=8), start, end, topics)
    # Kafka's split: c stays whole; a and b share 7 parts in proportion (2 and 5).
    assert all(isinstance(p, RangePartition) for p in got)
    assert ranges(got) == [
        (a, 0, 500),
        (a, 500, 1000),
        (b, 0, 600),
        (b, 600, 1200),
        (b, 1200, 1800),
        (b, 1800, 2400),
        (b, 2400, 3000),
        (c, 0, 10),
    ]
    # Enough tasks already: minPartitions changes nothing.
    s = settings(minPartitions=2, maxRecordsPerTask=1000, minRecordsPerTask=1)
    assert len(plan(s, start, end, topics)) == 5


def test_min_partitions_spreads_many_small_partitions_over_that_many_tasks() -> None:
    """Many small partitions (a topic Spark tasks wrote): at least minPartitions
    tasks, each a balanced pack of whole ranges, instead of one pack."""
    parts = {f"{k:032X}": 20 + k for k in range(24)}
    topics = dict.fromkeys(parts, "t")
    got = plan(settings(minPartitions=4), dict.fromkeys(parts, 0), parts, topics)
    assert len(got) == 4
    sizes = [
        sum(r.end - r.start for r in (p.ranges if isinstance(p, PackedRanges) else (p,)))
        for p in got
    ]
    assert sum(sizes) == sum(parts.values())
    assert max(sizes) - min(sizes) <= 43  # at most one range apart
    assert ranges(got) == sorted((p, 0, n) for p, n in parts.items())


class FakeStores:
    """Heads and first offsets as stores would answer (see test_spark_source)."""

    forget_absent_after = 3600.0
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
        return {p: ("t", h) for p, h in self.heads.items()}, {}


def test_min_offsets_per_trigger_holds_batches_back_until_max_trigger_delay() -> None:
    """Kafka's minOffsetsPerTrigger: fewer new records than that make no batch
    (the start offsets come back) until maxTriggerDelay passed since the last
    batch; the first batch goes as soon as there are records."""
    from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows

    a = "A" * 32
    r = DafkaStreamReader({**READ, "minOffsetsPerTrigger": "100", "maxTriggerDelay": "30s"})
    assert r.getDefaultReadLimit() == ReadMinRows(100)
    stores = FakeStores()
    r.settings = stores  # type: ignore[assignment]
    r._watch_clients = {}
    now = [1000.0]
    r._clock = lambda: now[0]  # type: ignore[method-assign]
    limit = r.getDefaultReadLimit()
    stores.heads = {a: 10}
    assert r.latestOffset({a: 0}, limit) == {a: 10}  # the first batch
    stores.heads = {a: 60}
    now[0] += 10
    assert r.latestOffset({a: 10}, limit) == {a: 10}  # 50 < 100: held back
    stores.heads = {a: 110}
    now[0] += 5
    assert r.latestOffset({a: 10}, limit) == {a: 110}  # 100 new: a batch
    stores.heads = {a: 120}
    now[0] += 29
    assert r.latestOffset({a: 110}, limit) == {a: 110}  # 29 s since the last one
    now[0] += 1
    assert r.latestOffset({a: 110}, limit) == {a: 120}  # 30 s: it goes anyway
    # With maxOffsetsPerTrigger as well: held back below the minimum, capped above.
    r = DafkaStreamReader({**READ, "minOffsetsPerTrigger": "100", "maxOffsetsPerTrigger": "150"})
    r.settings = stores  # type: ignore[assignment]
    r._watch_clients = {}
    r._clock = lambda: now[0]  # type: ignore[method-assign]
    assert r.getDefaultReadLimit() == ReadMaxRows(150)
    assert r.max_trigger_delay == 900.0  # Kafka's default, 15 minutes
    stores.heads = {a: 1000}
    assert r.latestOffset({a: 0}, ReadMaxRows(150)) == {a: 150}
    stores.heads = {a: 240}
    assert r.latestOffset({a: 150}, ReadMaxRows(150)) == {a: 150}
    # availableNow must reach its target: never held back.
    r.target = {a: ("t", 240)}
    assert r.latestOffset({a: 150}, ReadMaxRows(150)) == {a: 240}


def test_load_raises_for_an_unknown_option(spark: Any) -> None:
    """At load(), before any query runs: Spark asks the source's schema there."""
    for stream in (False, True):

        def load(key: str, value: str, stream: bool = stream) -> Any:
            r = spark.readStream if stream else spark.read
            r = r.format("dafka").option("subscribe", "t").option("towers", TOWER)
            return r.option(key, value).load()

        with pytest.raises(Exception, match="unknown option 'startingoffset'"):
            load("startingOffset", "earliest")
        with pytest.raises(Exception, match="option minPartitions must be >= 1"):
            load("minPartitions", "0")
    # Batch-only options on a stream: when its query starts (Spark asks for the
    # schema at load(), without saying whether the read is batch or streaming).
    df = load("endingOffsets", "latest")
    with pytest.raises(Exception, match="option endingOffsets applies to batch reads"):
        dafka.spark.run_query(lambda: df.writeStream.format("noop").start(), timeout=120)


def test_save_and_start_raise_for_an_unknown_option(spark: Any, tmp_path: Path) -> None:
    df = spark.range(3).selectExpr("cast(id AS string) AS value")

    def w() -> Any:  # a new writer each time: option() changes the one it is called on
        return df.write.format("dafka").option("topic", "t").option("towers", TOWER)

    with pytest.raises(Exception, match="unknown option 'mintacks'"):
        w().option("minTAcks", "1").mode("append").save()
    with pytest.raises(Exception, match="option reuseProducer is not a dafka option"):
        w().option("reuseProducer", "true").mode("append").save()
    with pytest.raises(Exception, match="option path is not a dafka option"):
        w().mode("append").save(str(tmp_path / "somewhere"))
    # A streaming write's options are checked as its query starts (start() itself
    # returns before Spark asks the sink anything): it fails at once.
    stream = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1).load()
    started: list[Any] = []

    def start() -> Any:
        started.append(
            stream.selectExpr("cast(value AS string) AS value")
            .writeStream.format("dafka")
            .option("topic", "t")
            .option("towers", TOWER)
            .option("startingOffsets", "earliest")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start()
        )
        return started[-1]

    with pytest.raises(Exception, match="option startingOffsets applies to reads"):
        dafka.spark.run_query(start, timeout=120)
    assert not started[-1].isActive


def test_errors_through_the_spark_layer_name_options_not_python_keywords() -> None:
    """The core and ProducerSettings name Python keywords (``advertise_host``,
    ``cert=``); what a Spark user reads names the options they wrote, as the same
    exception type. ProducerSettings built in Python keeps its keywords."""
    import dafka
    from dafka.spark import ProducerSettings
    from dafka.spark._errors import spark_wording

    read = {"subscribe": "t", "towers": "tcp://127.0.0.1:1,2"}
    write = {"topic": "t", "towers": "tcp://127.0.0.1:1,2"}
    cases: list[tuple[Any, dict[str, str], type[Exception], str, str]] = [
        (ReadSettings.from_options, {**read, "advertiseHost": "a b"}, dafka.ConfigError,
         "option advertiseHost must be a host name", "advertise_host"),
        (ReadSettings.from_options, {**read, "cert": "/x.key_secret"}, dafka.ConfigError,
         "option cert given without option trust", "cert="),
        (ProducerSettings.from_options, {**write, "trust": "/keys"}, dafka.ConfigError,
         "option trust given without option cert", "trust="),
        (ProducerSettings.from_options, {**write, "advertiseHost": "a b"}, dafka.ConfigError,
         "option advertiseHost must be", "advertise_host"),
        (ProducerSettings.from_options, {**write, "beaconTimeout": "1", "beaconInterval": "2"},
         ValueError, "option beaconTimeout .* longer than option beaconInterval", "beacon_"),
    ]  # fmt: skip
    for make, options, kind, says, not_says in cases:
        with pytest.raises(kind, match=says) as e:
            make(options)
        assert not_says not in str(e.value), e.value
        assert e.value.__cause__ is not None, "chained to the core's error"
    with pytest.raises(ValueError, match=r"beacon_timeout .* longer than beacon_interval"):
        ProducerSettings(
            "t", towers=["tcp://127.0.0.1:1,2"], beacon_interval=2.0, beacon_timeout=1.0
        )
    assert spark_wording("cert= given without trust=", {"cert": "readCert"}) == (
        "option readCert given without option trust"
    )
    assert spark_wording("got 'my_host' for min_acks") == "got 'my_host' for option minAcks"
