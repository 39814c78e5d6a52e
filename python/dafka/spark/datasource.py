"""The ``dafka`` Python data source (``spark.dataSource.register``).

Writing (batch ``df.write`` and streaming ``writeStream``, exactly-once: see
:mod:`dafka.spark._sink`) and reading (batch ``spark.read`` of a bounded range,
streaming ``readStream``). Every option, its default and meaning, in one table:
``docs/spark.md``, "Options"; which option applies where, and how each is checked:
:mod:`dafka.spark._options`. The driver asks stores for heads (GET-HEADS); every
executor task reads its ``[start, end)`` range straight from stores (FETCH), not
through the driver. Schema, as Kafka's: ``key binary, value binary, topic string,
partition string, offset long, timestamp timestamp, timestampType int`` and, with
``includeHeaders``, ``headers array<struct<key: string, value: binary>>``; offsets
are JSON ``{partition: next_offset}``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from dafka._defaults import BEACON_INTERVAL, BIND, WIRE
from dafka._native import HeadsWatch, check_node, fetch_ranges, offsets
from dafka.exceptions import DataLossError
from dafka.spark._options import (
    BATCH_READ,
    BATCH_WRITE,
    READ,
    STREAM_READ,
    STREAM_WRITE,
    check_options,
    duration_ms,
    timestamp_ms,
)
from dafka.spark._produce import Options, flag, integer, seconds, split_endpoints
from dafka.spark._sink import (
    DafkaBatchWriter,
    DafkaCommit,
    DafkaStreamWriter,
    SinkSettings,
    check_write_schema,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadLimit
    from pyspark.sql.types import StructType

__all__ = ["DafkaCommit", "DafkaDataSource"]

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
        if pattern is not None and options.get("cert"):
            raise ValueError(
                "option subscribePattern is not available in secure mode: only a store may "
                "ask stores for every topic they hold (dafka.topics); name the topics with "
                "option('subscribe', ...)"
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
        # What every task's read client would refuse, said once by the driver.
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


def resolve(
    spec: OffsetSpec,
    hs: dict[str, tuple[str, int]],
    default: int,
    firsts: dict[str, int] | None = None,
) -> dict[str, int]:
    """Concrete offsets for every known partition. ``default`` (EARLIEST or
    LATEST) applies to partitions a JSON spec does not name. ``earliest`` is a
    partition's first offset still held (``firsts``; 0 when unknown), as
    Kafka's is the log's start."""
    out: dict[str, int] = {}
    firsts = firsts or {}
    for p, (_t, head) in hs.items():
        if spec.word == "earliest":
            v = EARLIEST
        elif spec.word == "latest":
            v = head
        else:
            v = spec.offsets.get(p, default)
            v = head if v == LATEST else v
        if v == EARLIEST:
            v = firsts.get(p, 0)
        out[p] = min(v, head)
    # Partitions named but not (yet) seen keep their offset.
    for p, v in spec.offsets.items():
        if p not in out and v >= 0:
            out[p] = v
    return out


def needs_firsts(spec: OffsetSpec, default: int) -> bool:
    """Whether resolving ``spec`` for some partition means ``earliest`` (so the
    partitions' first offsets still held are needed)."""
    if spec.word is None:
        return default == EARLIEST or EARLIEST in spec.offsets.values()
    return spec.word == "earliest"


def _part_count(size: int, total: int, least: int) -> int:
    """Kafka's ``KafkaOffsetRangeCalculator.getPartCount``."""
    return max(math.floor(size / total * least + 0.5), 1)  # Scala's round: half up


def _split_for(ranges: list[RangePartition], least: int) -> list[RangePartition]:
    """Kafka's ``minPartitions`` split: ranges cut in pieces in proportion to their
    size, so there are about ``least`` of them (small ranges stay whole and do not
    count towards the proportion)."""
    total = sum(r.end - r.start for r in ranges)
    unsplit = [r for r in ranges if _part_count(r.end - r.start, total, least) == 1]
    split_total = total - sum(r.end - r.start for r in unsplit)
    split_least = max(least - len(unsplit), 1)
    out: list[RangePartition] = []
    for r in ranges:
        size = r.end - r.start
        parts = 1 if split_total == 0 else _part_count(size, split_total, split_least)
        remaining, lo = size, r.start
        for k in range(parts):
            this = remaining // (parts - k)
            remaining -= this
            hi = min(lo + this, r.end)
            if hi > lo:
                out.append(RangePartition(r.topic, r.partition, lo, hi))
            lo = hi
    return out


def _balance(ranges: list[RangePartition], groups: int) -> list[InputPartition]:
    """``ranges`` in ``groups`` tasks of about equal record counts (each range to
    the task holding fewest so far, largest first); a task's ranges stay in
    partition and offset order."""
    packs: list[list[RangePartition]] = [[] for _ in range(groups)]
    held = [0] * groups
    for r in sorted(ranges, key=lambda r: r.end - r.start, reverse=True):
        k = held.index(min(held))
        packs[k].append(r)
        held[k] += r.end - r.start
    out: list[InputPartition] = []
    for pack in packs:
        pack.sort(key=lambda r: (r.partition, r.start))
        if pack:
            out.append(pack[0] if len(pack) == 1 else PackedRanges(tuple(pack)))
    return out


def plan(
    settings: ReadSettings, start: dict[str, int], end: dict[str, int], topics: dict[str, str]
) -> list[InputPartition]:
    """One Spark input partition per ``settings.max_records_per_task`` offsets of
    each dafka partition (a task holds its range in memory while it reads); ranges
    shorter than ``settings.min_records_per_task`` (at most that) are packed
    together until a pack holds at least that many records. With
    ``settings.min_partitions`` (Kafka's ``minPartitions``) a read that would make
    fewer tasks makes about that many: packs are spread over that many tasks, or,
    when there are fewer ranges than that, ranges are cut in pieces in proportion
    to their size, as Kafka does."""
    ranges: list[RangePartition] = []
    step = settings.max_records_per_task
    least = min(settings.min_records_per_task, step)
    for p, e in sorted(end.items()):
        s = start.get(p, 0)
        if p not in topics:
            if e > s and settings.fail_on_data_loss:
                raise DataLossError(
                    f"partition {p} (offsets [{s}, {e})) is no longer held by any store; "
                    "set failOnDataLoss=false to skip it"
                )
            continue
        for lo in range(s, e, step):
            ranges.append(RangePartition(topics[p], p, lo, min(lo + step, e)))
    parts: list[InputPartition] = []
    short: list[RangePartition] = []
    for r in ranges:
        (short if r.end - r.start < least else parts).append(r)
    pack: list[RangePartition] = []
    held = 0
    for r in short:
        pack.append(r)
        held += r.end - r.start
        if held >= least or r is short[-1]:
            parts.append(pack[0] if len(pack) == 1 else PackedRanges(tuple(pack)))
            pack, held = [], 0
    want = settings.min_partitions
    if want is None or len(parts) >= want:
        return parts
    if len(ranges) >= want:
        return _balance(ranges, want)
    return list(_split_for(ranges, want))


def _strategy(options: Options) -> str:
    return str(options.get("startingOffsetsByTimestampStrategy", "latest")).lower()


class _Reads:
    """What batch and streaming reads share: the settings, the starting position
    (offsets or times) and its resolution."""

    def __init__(self, options: Mapping[str, str], kind: str) -> None:
        self.settings = ReadSettings.from_options(options, kind)
        opts = Options(options)
        default = "earliest" if kind == BATCH_READ else "latest"
        self.starting = parse_offsets(
            opts.get("startingOffsets", default), "startingOffsets", self.settings.subscribed, kind
        )
        self.start_times = parse_times(
            opts, "starting", self.settings.subscribed, ["startingOffsets"]
        )
        self.strategy = _strategy(opts)
        if opts.get("startingOffsetsByTimestampStrategy") is not None and not self.start_times:
            raise ValueError(
                "option startingOffsetsByTimestampStrategy applies with startingTimestamp or "
                "startingOffsetsByTimestamp only"
            )
        # Batch reads end (READ: not known yet, so checked as if batch).
        self.ending = OffsetSpec(word="latest")
        self.end_times = TimeSpec()
        if kind != STREAM_READ:
            self.ending = parse_offsets(
                opts.get("endingOffsets", "latest"),
                "endingOffsets",
                self.settings.subscribed,
                BATCH_READ,
            )
            self.end_times = parse_times(
                opts, "ending", self.settings.subscribed, ["endingOffsets"]
            )

    def start_at(
        self,
        hs: dict[str, tuple[str, int]],
        firsts: dict[str, int],
    ) -> dict[str, int]:
        """Where a read starts in every known partition: ``startingTimestamp`` (every
        partition), else ``startingOffsetsByTimestamp`` (the partitions it names)
        over ``startingOffsets``. A partition holding no record at or after its time
        starts at its end (``startingOffsetsByTimestampStrategy`` latest, the
        default) or fails the read (``error``)."""
        unknown = sorted(p for p in self.starting.offsets if p not in hs)
        if unknown:
            raise ValueError(
                f"option startingOffsets names partition(s) {', '.join(unknown)}, which no "
                "store holds of the topics read: name partitions the stores hold (`dafka "
                "offsets TOPIC` lists them), or start them all at earliest or latest"
            )
        start = resolve(self.starting, hs, EARLIEST, firsts)
        if not self.start_times:
            return start
        found = times_to_offsets(self.settings, self.start_times, hs)
        missing = []
        for p, off in found.items():
            head = hs[p][1] if p in hs else off
            if off >= head and self.strategy == "error":
                missing.append(p)
            start[p] = min(off, head)
        if missing:
            raise ValueError(
                f"no record at or after the starting time in partition(s) "
                f"{', '.join(sorted(missing))} (startingOffsetsByTimestampStrategy=error; "
                "latest starts them at their end)"
            )
        return start


def times_to_offsets(
    settings: ReadSettings, spec: TimeSpec, hs: dict[str, tuple[str, int]]
) -> dict[str, int]:
    """The offsets ``spec``'s times give: every known partition for one time,
    the named ones for times by partition (at its end when its stores did not
    answer: no record of it is at or after the time that anyone holds)."""
    wanted: dict[tuple[str, int], list[str]] = {}
    if spec.every is not None:
        for p, (t, _h) in hs.items():
            wanted.setdefault((t, spec.every), []).append(p)
    else:
        for p, ts in spec.by_partition.items():
            topic = spec.topics.get(p) or (hs[p][0] if p in hs else None)
            if topic is None:
                continue  # neither seen nor placed in a topic: nothing to read there
            wanted.setdefault((topic, ts), []).append(p)
    out: dict[str, int] = {}
    for (t, ts), parts in sorted(wanted.items()):
        got = settings.times(t, ts)
        for p in parts:
            out[p] = got.get(p, hs[p][1] if p in hs else 0)
    return out


class DafkaBatchReader(DataSourceReader):
    """A bounded read: from ``startingOffsets`` (default earliest), or the times
    ``startingTimestamp`` / ``startingOffsetsByTimestamp`` give, to
    ``endingOffsets`` (default latest, as the stores report when the query is
    planned) or the times ``endingTimestamp`` / ``endingOffsetsByTimestamp``
    give (exclusive: records before that time)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.reads = _Reads(options, BATCH_READ)
        self.settings = self.reads.settings
        self.ending = self.reads.ending
        self.end_times = self.reads.end_times

    def partitions(self) -> list[InputPartition]:
        probe = needs_firsts(self.reads.starting, EARLIEST)
        hs, firsts = self.settings.offsets(None if probe else ())
        start = self.reads.start_at(hs, firsts)
        end = resolve(self.ending, hs, LATEST)
        if self.end_times:
            for p, off in times_to_offsets(self.settings, self.end_times, hs).items():
                end[p] = min(off, hs[p][1]) if p in hs else off
        topics = {p: t for p, (t, _) in hs.items()}
        return plan(self.settings, start, end, topics)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.settings.read(partition)


class DafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source: each micro-batch reads, per partition, from the last
    batch's end to the heads stores report (capped by ``maxOffsetsPerTrigger``;
    held back while fewer than ``minOffsetsPerTrigger`` records are new, for up
    to ``maxTriggerDelay``). With ``trigger(availableNow=True)`` the heads at
    query start are the target."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.reads = _Reads(options, STREAM_READ)
        self.settings = self.reads.settings
        self.starting = self.reads.starting
        opts = Options(options)
        self.max_per_trigger = (
            None
            if opts.get("maxOffsetsPerTrigger") is None
            else integer(options, "maxOffsetsPerTrigger", 1)
        )
        self.min_per_trigger = (
            None
            if opts.get("minOffsetsPerTrigger") is None
            else integer(options, "minOffsetsPerTrigger", 1)
        )
        delay = opts.get("maxTriggerDelay")
        if delay is not None and self.min_per_trigger is None:
            raise ValueError("option maxTriggerDelay applies with minOffsetsPerTrigger only")
        #: Seconds (Kafka's default: 15 minutes).
        self.max_trigger_delay = (
            900.0 if delay is None else duration_ms("maxTriggerDelay", delay) / 1000
        )
        if (
            self.min_per_trigger is not None
            and self.max_per_trigger is not None
            and self.min_per_trigger > self.max_per_trigger
        ):
            raise ValueError(
                f"option minOffsetsPerTrigger ({self.min_per_trigger}) must be at most "
                f"maxOffsetsPerTrigger ({self.max_per_trigger})"
            )
        #: When the last batch was let through (Kafka's ``lastTriggerMillis``: the
        #: first one is, as soon as there are records).
        self.last_trigger = -math.inf
        self.topics: dict[str, str] = {}
        self.target: dict[str, tuple[str, int]] | None = None
        # First offsets still held of partitions that appeared after the query
        # started (read from there, like Kafka's new partitions from earliest).
        self.firsts: dict[str, int] = {}
        # Read clients kept across micro-batches, one per topic; made on first
        # use (Spark also builds readers that only plan reads on executors).
        self._watch_clients: dict[str, HeadsWatch] | None = None
        # Partitions in the offsets that no store announced, since when
        # (``forgetPartitionsAfter``; a restarted query starts counting again).
        self.absent_since: dict[str, float] = {}
        # Topics the last planning round found no partition of (see _watches).
        self._empty: set[str] = set()
        # The topics read (a pattern's: refreshed every TOPICS_REFRESH seconds).
        self._names: tuple[str, ...] = self.settings.topics
        self._names_at = -math.inf

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_watch_clients"] = None
        state["absent_since"] = {}
        return state

    def _clock(self) -> float:
        return time.monotonic()

    def _gone(self, start: dict[str, int], hs: Collection[str]) -> set[str]:
        """Partitions of ``start`` no store has announced for
        ``forgetPartitionsAfter`` (they leave the offsets)."""
        now = self._clock()
        self.absent_since = {p: t for p, t in self.absent_since.items() if p in start}
        gone = set()
        for p in start:
            if p in hs:
                self.absent_since.pop(p, None)
            elif now - self.absent_since.setdefault(p, now) >= self.settings.forget_absent_after:
                gone.add(p)
        for p in gone:
            del self.absent_since[p]
            self.topics.pop(p, None)
        return gone

    def _topic_names(self) -> tuple[str, ...]:
        """The topics read: those named, or with ``subscribePattern`` those the
        stores held that it matches when last asked (at most TOPICS_REFRESH ago)."""
        if self.settings.pattern is not None:
            now = self._clock()
            if now - self._names_at >= TOPICS_REFRESH:
                self._names, self._names_at = self.settings.topic_names(), now
        return self._names

    def _watches(self) -> dict[str, HeadsWatch]:
        """The read clients the next round goes through: one per topic, but none
        for a topic whose last round found no partition (a :class:`HeadsWatch`
        round after one no store answered waits for answers that do not come, as
        stores holding nothing of a topic say nothing: a one-off round, which
        ``headsSettle`` ends, asks instead until a partition appears)."""
        if self._watch_clients is None:
            self._watch_clients = {}
        names = self._topic_names()
        for t in names:
            if t not in self._watch_clients:
                self._watch_clients[t] = self.settings.watch(t)
        return {t: self._watch_clients[t] for t in names if t not in self._empty}

    def _round(
        self, only: Collection[str] | None, exclude: Collection[str] = ()
    ) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
        """A planning round (``ReadSettings.offsets``) over the topics read, through
        the kept clients; notes which topics it found no partition of."""
        watches = self._watches()
        hs, firsts = self.settings.offsets(
            only, exclude=exclude, watches=watches, topics=self._topic_names()
        )
        self._empty = set(self._topic_names()) - {t for t, _ in hs.values()}
        return hs, firsts

    def prepareForTriggerAvailableNow(self) -> None:
        # A full round by a new client: the target must be everything stores
        # hold now, not what answered within a short round.
        self.target = self.settings.heads()

    def _heads(self) -> dict[str, tuple[str, int]]:
        hs = self.target if self.target is not None else self._round(())[0]
        self.topics.update({p: t for p, (t, _) in hs.items()})
        return hs

    def initialOffset(self) -> dict[str, int]:
        if not needs_firsts(self.starting, EARLIEST):
            return self.reads.start_at(self._heads(), {})
        hs, firsts = self._round(None)
        if self.target is not None:
            hs = self.target
        self.topics.update({p: t for p, (t, _) in hs.items()})
        return self.reads.start_at(hs, firsts)

    def _begin(self, start: dict[str, int], parts: Collection[str]) -> dict[str, int]:
        """Where each of ``parts`` begins in a batch after ``start``: its offset
        there, else (a partition new to the query) its first offset held."""
        self.firsts = {p: v for p, v in self.firsts.items() if p not in start}
        new = [p for p in parts if p not in start and p not in self.firsts]
        if new:
            self.firsts.update(self._round(new)[1])
        return {p: start[p] if p in start else self.firsts.get(p, 0) for p in parts}

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

        if self.max_per_trigger is not None:
            return ReadMaxRows(self.max_per_trigger)
        if self.min_per_trigger is not None:
            return ReadMinRows(self.min_per_trigger)
        return ReadAllAvailable()

    def _hold_back(self, new: int, limit: ReadLimit) -> bool:
        """Kafka's ``delayBatch``: whether a batch of ``new`` records waits for
        ``minOffsetsPerTrigger`` (not once ``maxTriggerDelay`` passed since the last
        batch, nor under ``availableNow``, which must reach its target)."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        if self.min_per_trigger is None or self.target is not None:
            return False
        if isinstance(limit, ReadAllAvailable):
            return False
        now = self._clock()
        if now - self.last_trigger >= self.max_trigger_delay:
            self.last_trigger = now
            return False
        if new < self.min_per_trigger:
            return True
        self.last_trigger = now
        return False

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        from pyspark.sql.streaming.datasource import ReadMaxRows

        if self.target is None:
            # The heads, and in the same round where partitions new to the
            # query begin: they are read from their first record held.
            hs, firsts = self._round(None, exclude=start.keys())
            self.topics.update({p: t for p, (t, _) in hs.items()})
            self.firsts.update(firsts)
        else:
            hs = self._heads()
        begin = self._begin(start, hs)
        latest = {p: max(head, begin[p]) for p, (_t, head) in hs.items()}
        new = sum(latest[p] - begin[p] for p in latest)
        if new and self._hold_back(new, limit):
            return dict(start)
        gone = self._gone(start, hs)
        kept = {p: v for p, v in start.items() if p not in gone}
        for p, v in kept.items():
            latest.setdefault(p, v)
            begin.setdefault(p, v)
        if not isinstance(limit, ReadMaxRows):
            return latest
        budget = limit.max_rows
        out = dict(kept)
        # Fair share: repeatedly give every partition with data an equal slice.
        backlog = {p: latest[p] - begin[p] for p in latest if latest[p] > begin[p]}
        for p in latest:
            out.setdefault(p, begin[p])
        while budget > 0 and backlog:
            share = max(1, budget // len(backlog))
            for p in sorted(backlog):
                take = min(share, backlog[p], budget)
                out[p] += take
                backlog[p] -= take
                budget -= take
                if budget == 0:
                    break
            backlog = {p: n for p, n in backlog.items() if n > 0}
        return out

    def reportLatestOffset(self) -> dict[str, int] | None:
        return None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        if any(p not in self.topics for p in end):
            self._heads()
        return plan(self.settings, self._begin(start, end), end, self.topics)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.settings.read(partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: stores keep records by their own retention."""

    def stop(self) -> None:
        """Closes the planning clients (each task's reads close their own)."""
        for w in (self._watch_clients or {}).values():
            w.close()
        self._watch_clients = None


class DafkaDataSource(DataSource):
    """``format("dafka")``: see the module documentation for options."""

    @classmethod
    def name(cls) -> str:
        return "dafka"

    def schema(self) -> StructType:
        # Spark asks for the schema at load(), before it knows whether the read
        # is batch or streaming: the options are checked for any read here, and
        # for the kind of read once it is planned.
        reads = _Reads(self.options, READ)
        return source_schema(reads.settings.include_headers)

    def _check_schema(self, schema: StructType) -> None:
        want = source_schema(flag(Options(self.options), "includeHeaders", False))
        if schema != want:
            raise ValueError(
                f"the dafka source has a fixed schema, {want.simpleString()}, not "
                f"{schema.simpleString()} (as Kafka's, it cannot be given: set includeHeaders "
                "for the headers column)"
            )

    def reader(self, schema: StructType) -> DafkaBatchReader:
        self._check_schema(schema)
        return DafkaBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DafkaStreamReader:
        self._check_schema(schema)
        return DafkaStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DafkaBatchWriter:
        if overwrite:
            # A topic is append-only: nothing already in it can be replaced.
            raise ValueError(
                "dafka topics are append-only: write with mode('append'), not overwrite"
            )
        options = check_options(self.options, BATCH_WRITE)
        columns = check_write_schema(schema, options)
        return DafkaBatchWriter(SinkSettings.from_options(options, columns, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DafkaStreamWriter:
        options = check_options(self.options, STREAM_WRITE)
        columns = check_write_schema(schema, options)
        return DafkaStreamWriter(SinkSettings.from_options(options, columns, streaming=True))
