"""Read options as the source applies them (:class:`ReadSettings`), the
starting and ending positions they name (``startingOffsets``, ``endingOffsets``,
the timestamp options), and what a read task does with them: the client calls
(heads, offsets, times) and the Arrow batches of the source's schema."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from dafka._defaults import BEACON_INTERVAL, BIND, WIRE
from dafka._native import HeadsWatch, check_node, fetch_ranges, offsets
from dafka.spark._errors import as_options, as_read
from dafka.spark._options import BATCH_READ, READ, STREAM_READ, check_options, timestamp_ms
from dafka.spark._produce import Options, flag, integer, seconds, split_endpoints

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType


EARLIEST, LATEST = -2, -1
#: Rows per Arrow batch a read task hands to Spark.
ARROW_ROWS = 10_000
#: Seconds a streaming read by ``subscribePattern`` keeps its list of topics before
#: it asks the stores again (Kafka's consumers refresh their metadata likewise).
TOPICS_REFRESH = 30.0


def source_schema(include_headers: bool) -> StructType:
    """The source's schema, Kafka's: ``key binary, value binary, topic string,
    partition string, offset long, timestamp timestamp, timestampType int`` and
    ``headers array<struct<key: string, value: binary>>`` with ``includeHeaders``.
    ``partition`` is a string: a dafka partition is its producer's address."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", StringType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


@dataclass
class RangePartition(InputPartition):
    """``[start, end)`` of one dafka partition, read by one Spark task."""

    topic: str
    partition: str
    start: int
    end: int


@dataclass
class PackedRanges(InputPartition):
    """Short ranges of several dafka partitions, read by one Spark task in turn
    through one client."""

    ranges: tuple[RangePartition, ...]


@dataclass(frozen=True)
class OffsetSpec:
    """A parsed ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest``,
    or offsets by partition (``-2`` earliest, ``-1`` latest) from JSON in either
    shape, ``{partition: offset}`` or Kafka's ``{topic: {partition: offset}}``
    (which also says each partition's topic)."""

    word: str | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)


#: The topics a read subscribes to: their names, or a test of a name (a pattern's).
Subscribed = Collection[str] | Callable[[str], bool]


#: What a partition's name is: its producer's address.
_ADDRESS = re.compile(r"[0-9A-Fa-f]{32}")


def parse_partition_json(
    spec: str, option: str, what: str, subscribed: Subscribed
) -> tuple[dict[str, int], dict[str, str]]:
    """JSON ``{partition: N}`` or Kafka's ``{topic: {partition: N}}`` (``what``
    names N in errors): the values by partition, and the topics the Kafka shape
    names (each must be subscribed)."""
    takes = subscribed if callable(subscribed) else subscribed.__contains__
    try:
        d = json.loads(spec)
    except json.JSONDecodeError as e:
        raise ValueError(
            f'option {option} must be JSON {{"partition": {what}}} or, as Kafka\'s, '
            f'{{"topic": {{"partition": {what}}}}}: {e}'
        ) from None
    if not isinstance(d, dict):
        raise ValueError(f"option {option} must be a JSON object, got {spec!r}")
    out: dict[str, int] = {}
    topics: dict[str, str] = {}

    def number(k: str, v: Any) -> int:
        if not _ADDRESS.fullmatch(k):
            raise ValueError(
                f"option {option} names partition {k!r}, which cannot be one: a dafka "
                "partition is named by its producer's address, 32 hex characters (the "
                "partition column of a read, or `dafka offsets TOPIC`); there are no "
                "numbered partitions"
            )
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"option {option}: partition {k!r} maps to {v!r}, not an integer")
        return v

    if all(isinstance(v, dict) for v in d.values()) and d:
        for topic, parts in d.items():
            if not takes(topic):
                shown = "its pattern" if callable(subscribed) else ", ".join(sorted(subscribed))
                raise ValueError(
                    f"option {option} names topic {topic!r}, which the read does not "
                    f"subscribe to ({shown})"
                )
            for p, v in parts.items():
                if p in out:
                    raise ValueError(f"option {option} names partition {p!r} twice")
                out[p] = number(p, v)
                topics[p] = topic
    elif any(isinstance(v, dict) for v in d.values()):
        raise ValueError(
            f"option {option} mixes the two JSON shapes: use {{partition: {what}}} or "
            f"{{topic: {{partition: {what}}}}}"
        )
    else:
        out = {p: number(p, v) for p, v in d.items()}
    return out, topics


def parse_offsets(
    spec: str, option: str, subscribed: Subscribed = (), kind: str = STREAM_READ
) -> OffsetSpec:
    """``startingOffsets`` / ``endingOffsets`` (``option``) of a ``kind`` read.
    As Kafka's: a batch read may not start at ``latest`` (-1) nor end at
    ``earliest`` (-2); a stream has no end."""
    s = spec.strip()
    ending = option == "endingOffsets"
    if s in ("earliest", "latest"):
        out = OffsetSpec(word=s)
    elif s.startswith("{"):
        offs, topics = parse_partition_json(s, option, "offset", subscribed)
        for p, v in offs.items():
            if v < -2:
                raise ValueError(
                    f"option {option}: partition {p!r} maps to {v}; offsets are >= 0, or "
                    "-2 (earliest) or -1 (latest)"
                )
        out = OffsetSpec(offsets=offs, topics=topics)
    else:
        raise ValueError(
            f'option {option} must be "earliest", "latest" or JSON {{"partition": offset}} '
            f'(or Kafka\'s {{"topic": {{"partition": offset}}}}), got {spec!r}'
        )
    if kind == BATCH_READ or ending:
        bad = EARLIEST if ending else LATEST
        if out.word == ("earliest" if ending else "latest") or bad in out.offsets.values():
            raise ValueError(
                f"option {option} of a batch read cannot be "
                f"{'earliest (-2)' if ending else 'latest (-1)'}, as with Kafka"
            )
    return out


@dataclass(frozen=True)
class TimeSpec:
    """``startingTimestamp`` / ``startingOffsetsByTimestamp`` (or the ending
    ones): one time for every partition, or times by partition."""

    every: int | None = None
    by_partition: dict[str, int] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.every is not None or bool(self.by_partition)


def parse_times(
    options: Options, prefix: str, subscribed: Subscribed, others: Collection[str]
) -> TimeSpec:
    """``{prefix}Timestamp`` (one time in ms) or ``{prefix}OffsetsByTimestamp``
    (JSON times by partition). ``{prefix}Timestamp`` takes precedence over both
    ``{prefix}OffsetsByTimestamp`` and ``others`` as with Kafka, so it cannot be
    given with either (one of them would be ignored)."""
    one, by = f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp"
    every = options.get(one)
    by_spec = options.get(by)
    if every is not None:
        clash = [o for o in (by, *others) if options.get(o) is not None]
        if clash:
            raise ValueError(
                f"option {one} applies to every partition and takes precedence over "
                f"{', '.join(clash)} (as with Kafka): give only one of them"
            )
        return TimeSpec(every=timestamp_ms(one, every))
    if by_spec is None:
        return TimeSpec()
    times, topics = parse_partition_json(by_spec, by, "time in ms", subscribed)
    for p, t in times.items():
        if t < 0:
            raise ValueError(f"option {by}: partition {p!r} maps to {t}, not a time >= 0 ms")
    return TimeSpec(by_partition=times, topics=topics)


@dataclass(frozen=True)
class ReadSettings:
    """Read options, parsed once on the driver (picklable)."""

    topics: tuple[str, ...]
    towers: tuple[str, ...]
    peers: tuple[str, ...]
    fail_on_data_loss: bool
    fetch_timeout: float
    heads_timeout: float
    heads_settle: float
    beacon_interval: float
    bind: str
    advertise_host: str | None
    max_records_per_task: int
    min_records_per_task: int
    forget_absent_after: float
    #: Secure mode: the read clients' secret certificate (role ``consumer``) and the
    #: trust directory, at the same paths on the driver and every executor.
    cert: str | None = None
    trust: str | None = None
    wire: str = WIRE
    include_headers: bool = False
    #: At least about this many Spark tasks per read (Kafka's ``minPartitions``).
    min_partitions: int | None = None
    #: ``subscribePattern``: the topics are those stores hold whose whole name it
    #: matches (``topics`` is empty then).
    pattern: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str], kind: str = READ) -> ReadSettings:
        options = check_options(options, kind)
        topics = tuple(t.strip() for t in options.get("subscribe", "").split(",") if t.strip())
        pattern = options.get("subscribePattern")
        if pattern is not None and options.get("subscribe") is not None:
            raise ValueError(
                "give one of options subscribe and subscribePattern, not both (as with Kafka)"
            )
        if not topics and pattern is None:
            raise ValueError(
                'reading dafka needs option("subscribe", "topic1,topic2") or '
                'option("subscribePattern", "regex")'
            )
        towers = tuple(split_endpoints(options.get("towers", "")))
        peers = tuple(split_endpoints(options.get("peers", "")))
        if not towers:
            raise ValueError(
                'reading dafka needs option("towers", ...): stores find the read clients '
                "through discovery"
            )
        min_partitions = options.get("minPartitions")
        s = cls(
            topics=topics,
            towers=towers,
            peers=peers,
            fail_on_data_loss=flag(options, "failOnDataLoss", True),
            fetch_timeout=seconds(options, "fetchTimeout", 60.0),
            heads_timeout=seconds(options, "headsTimeout", 10.0),
            heads_settle=seconds(options, "headsSettle", 0.5),
            beacon_interval=seconds(options, "beaconInterval", BEACON_INTERVAL),
            bind=options.get("bind", BIND),
            advertise_host=options.get("advertiseHost"),
            max_records_per_task=integer(options, "maxRecordsPerTask", 500_000),
            min_records_per_task=integer(options, "minRecordsPerTask", 50_000),
            forget_absent_after=seconds(options, "forgetPartitionsAfter", 3600.0),
            cert=options.get("cert") or None,
            trust=options.get("trust") or None,
            wire=options.get("wire", WIRE).lower(),
            include_headers=flag(options, "includeHeaders", False),
            min_partitions=None if min_partitions is None else integer(options, "minPartitions", 1),
            pattern=pattern,
        )
        # What every task's read client would refuse, said once by the driver,
        # in terms of the options.
        with as_options():
            check_node(
                towers=list(s.towers),
                peers=list(s.peers) or None,
                wire=s.wire,
                bind=s.bind,
                beacon_interval=s.beacon_interval,
                advertise_host=s.advertise_host,
                cert=s.cert,
                trust=s.trust,
                role="consumer",
            )
        return s

    def client_args(self) -> dict[str, Any]:
        """The discovery keywords every read client of the job takes."""
        return {
            "towers": list(self.towers),
            "peers": list(self.peers) or None,
            "wire": self.wire,
            "bind": self.bind,
            "advertise_host": self.advertise_host,
            "beacon_interval": self.beacon_interval,
            "cert": self.cert,
            "trust": self.trust,
        }

    def subscribes(self, topic: str) -> bool:
        """Whether the read takes ``topic``: it names it, or its pattern matches
        the whole name (as Kafka's ``subscribePattern``)."""
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics

    @property
    def subscribed(self) -> Subscribed:
        return self.subscribes if self.pattern is not None else self.topics

    def topic_names(self) -> tuple[str, ...]:
        """The topics read now: those named, or those stores hold that the pattern
        matches (asked of the stores, ``dafka.topics``)."""
        if self.pattern is None:
            return self.topics
        from dafka._native import topics

        held = topics(**self.client_args(), timeout=self.heads_timeout, settle=self.heads_settle)
        return tuple(t for t in held if self.subscribes(t))

    def heads(
        self,
        watches: dict[str, HeadsWatch] | None = None,
        topics: Collection[str] | None = None,
    ) -> dict[str, tuple[str, int]]:
        """``{partition: (topic, next_offset)}`` over every subscribed topic (or
        ``topics``)."""
        return self.offsets((), watches=watches, topics=topics)[0]

    def watch(self, topic: str) -> HeadsWatch:
        """A read client kept across heads rounds of ``topic`` (see
        :class:`dafka.HeadsWatch`): a round after the first costs a round trip,
        not ``headsSettle``."""
        return HeadsWatch(topic, forget_after=self.forget_absent_after, **self.client_args())

    def offsets(
        self,
        only: Collection[str] | None,
        exclude: Collection[str] = (),
        watches: dict[str, HeadsWatch] | None = None,
        topics: Collection[str] | None = None,
    ) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
        """:meth:`heads`, and the first offset still held (where ``earliest``
        begins) of the partitions in ``only`` (every one for None; none for an
        empty collection) that are not in ``exclude``, asked in the same round;
        through ``watches[topic]`` when there is one, else by a one-off client.
        Over ``topics`` when given, else :meth:`topic_names`."""
        out: dict[str, tuple[str, int]] = {}
        firsts: dict[str, int] = {}
        wanted = None if only is None else set(only)
        round_args: dict[str, Any] = {
            "partitions": None if only is None else list(only),
            "exclude": list(exclude) or None,
            "timeout": self.heads_timeout,
            "settle": self.heads_settle,
        }
        for t in self.topic_names() if topics is None else topics:
            if watches is not None and t in watches:
                got = watches[t].offsets(**round_args)
            else:
                got = offsets(t, **self.client_args(), **round_args)
            for p, (first, n) in got.items():
                out[p] = (t, n)
                if (wanted is None or p in wanted) and p not in exclude:
                    firsts[p] = first
        return out, firsts

    def times(self, topic: str, ts: int) -> dict[str, int]:
        """``{partition: offset}`` of ``topic``: the first offset whose time is at or
        after ``ts`` (ms), or the partition's next offset when none is."""
        from dafka._native import offsets_for_times

        got: dict[str, int] = offsets_for_times(
            topic, ts, **self.client_args(), timeout=self.heads_timeout, settle=self.heads_settle
        )
        return got

    def read(self, p: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of a task's range, or of its packed ranges in turn, as Arrow
        batches of the source's schema."""
        from pyspark.sql.pandas.types import to_arrow_schema

        if isinstance(p, PackedRanges):
            ranges = p.ranges
        elif isinstance(p, RangePartition):
            ranges = (p,)
        else:
            # Spark reads one InputPartition(None) when a read plans none: nothing
            # to read (every range empty).
            assert p.value is None, p
            return
        schema = to_arrow_schema(source_schema(self.include_headers), timezone="UTC")
        with as_read():
            got = fetch_ranges(
                [(r.topic, r.partition, r.start, r.end) for r in ranges],
                timeout=self.fetch_timeout,
                fail_on_loss=self.fail_on_data_loss,
                with_meta=True,
                **self.client_args(),
            )
        for r, (records, _lost) in zip(ranges, got, strict=True):
            for at in range(0, len(records), ARROW_ROWS):
                yield arrow_batch(r.topic, r.partition, records[at : at + ARROW_ROWS], schema)


def arrow_batch(
    topic: str, partition: str, records: list[Any], schema: pa.Schema
) -> pa.RecordBatch:
    """Records of one partition (:class:`dafka.Record`) as an Arrow batch of ``schema``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(records)
    ts = pa.array([r.timestamp for r in records], pa.int64())
    cols = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.string()),
        pa.array([r.offset for r in records], pa.int64()),
        pc.multiply(ts, 1000).cast(pa.timestamp("us", tz="UTC")),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    if len(schema) > len(cols):
        cols.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in r.headers] for r in records],
                schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(cols, schema=schema)
