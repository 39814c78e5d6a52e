"""The ``dafka`` Python data source (``spark.dataSource.register``).

Writing (batch ``df.write`` and streaming ``writeStream``) and reading (batch
``spark.read`` of a bounded range, streaming ``readStream``). Every option, its
default and meaning, in one table: ``docs/spark.md``, "Options". The driver asks
stores for heads (GET-HEADS); every executor task reads its ``[start, end)`` range
straight from stores (FETCH), not through the driver. Schema: ``topic string,
partition string, offset long, value binary``; offsets are JSON
``{partition: next_offset}``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from dafka._defaults import BEACON_INTERVAL, BIND
from dafka._native import HeadsWatch, check_node, fetch_ranges, offsets
from dafka.exceptions import DataLossError
from dafka.spark._produce import (
    Options,
    ProducerSettings,
    encode_value,
    flag,
    integer,
    produce_rows,
    seconds,
    split_endpoints,
)

if TYPE_CHECKING:
    from pyspark.sql.streaming.datasource import ReadLimit
    from pyspark.sql.types import StructType

__all__ = ["DafkaDataSource"]

SCHEMA = "topic string, partition string, offset long, value binary"
EARLIEST, LATEST = -2, -1


@dataclass
class DafkaCommit(WriterCommitMessage):
    """What a writer task delivered (acknowledged by ``minAcks`` stores)."""

    partition: str
    first: int | None
    last: int | None
    count: int


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

    @classmethod
    def from_options(cls, options: dict[str, str]) -> ReadSettings:
        topics = tuple(t.strip() for t in options.get("subscribe", "").split(",") if t.strip())
        if not topics:
            raise ValueError('reading dafka needs option("subscribe", "topic1,topic2")')
        towers = tuple(split_endpoints(options.get("towers", "")))
        peers = tuple(split_endpoints(options.get("peers", "")))
        if not towers:
            raise ValueError(
                'reading dafka needs option("towers", ...): stores find the read clients '
                "through discovery"
            )
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
        )
        # What every task's read client would refuse, said once by the driver.
        check_node(
            towers=list(s.towers),
            peers=list(s.peers) or None,
            bind=s.bind,
            beacon_interval=s.beacon_interval,
            advertise_host=s.advertise_host,
            cert=s.cert,
            trust=s.trust,
            role="consumer",
        )
        return s

    def heads(self, watches: dict[str, HeadsWatch] | None = None) -> dict[str, tuple[str, int]]:
        """``{partition: (topic, next_offset)}`` over every subscribed topic."""
        return self.offsets((), watches=watches)[0]

    def watch(self, topic: str) -> HeadsWatch:
        """A read client kept across heads rounds of ``topic`` (see
        :class:`dafka.HeadsWatch`): a round after the first costs a round trip,
        not ``headsSettle``."""
        return HeadsWatch(
            topic,
            towers=list(self.towers),
            peers=list(self.peers) or None,
            bind=self.bind,
            advertise_host=self.advertise_host,
            beacon_interval=self.beacon_interval,
            forget_after=self.forget_absent_after,
            cert=self.cert,
            trust=self.trust,
        )

    def offsets(
        self,
        only: Collection[str] | None,
        exclude: Collection[str] = (),
        watches: dict[str, HeadsWatch] | None = None,
    ) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
        """:meth:`heads`, and the first offset still held (where ``earliest``
        begins) of the partitions in ``only`` (every one for None; none for an
        empty collection) that are not in ``exclude``, asked in the same round;
        through ``watches[topic]`` when given, else by a one-off client."""
        out: dict[str, tuple[str, int]] = {}
        firsts: dict[str, int] = {}
        wanted = None if only is None else set(only)
        round_args: dict[str, Any] = {
            "partitions": None if only is None else list(only),
            "exclude": list(exclude) or None,
            "timeout": self.heads_timeout,
            "settle": self.heads_settle,
        }
        for t in self.topics:
            if watches is not None:
                got = watches[t].offsets(**round_args)
            else:
                got = offsets(
                    t,
                    towers=list(self.towers),
                    peers=list(self.peers) or None,
                    beacon_interval=self.beacon_interval,
                    bind=self.bind,
                    advertise_host=self.advertise_host,
                    cert=self.cert,
                    trust=self.trust,
                    **round_args,
                )
            for p, (first, n) in got.items():
                out[p] = (t, n)
                if (wanted is None or p in wanted) and p not in exclude:
                    firsts[p] = first
        return out, firsts

    def read(self, p: InputPartition) -> Iterator[tuple[str, str, int, bytes]]:
        """The records of a task's range, or of its packed ranges in turn."""
        if isinstance(p, PackedRanges):
            ranges = p.ranges
        else:
            assert isinstance(p, RangePartition), p
            ranges = (p,)
        got = fetch_ranges(
            [(r.topic, r.partition, r.start, r.end) for r in ranges],
            towers=list(self.towers),
            peers=list(self.peers) or None,
            timeout=self.fetch_timeout,
            fail_on_loss=self.fail_on_data_loss,
            beacon_interval=self.beacon_interval,
            bind=self.bind,
            advertise_host=self.advertise_host,
            cert=self.cert,
            trust=self.trust,
        )
        for r, (records, _lost) in zip(ranges, got, strict=True):
            for off, value in records:
                yield (r.topic, r.partition, off, value)


def parse_offsets(spec: str, option: str) -> str | dict[str, int]:
    """``earliest`` / ``latest`` or a JSON object ``{partition: offset}``."""
    s = spec.strip()
    if s in ("earliest", "latest"):
        return s
    try:
        d = json.loads(s)
    except json.JSONDecodeError as e:
        raise ValueError(
            f'{option} must be "earliest", "latest" or JSON {{"partition": offset}}: {e}'
        ) from None
    if not isinstance(d, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= -2 for k, v in d.items()
    ):
        raise ValueError(f"{option} JSON must map partition names to offsets >= -2, got {s!r}")
    return d


def needs_firsts(spec: str | dict[str, int], default: int) -> bool:
    """Whether resolving ``spec`` for some partition means ``earliest`` (so the
    partitions' first offsets still held are needed)."""
    if isinstance(spec, dict):
        return default == EARLIEST or EARLIEST in spec.values()
    return spec == "earliest"


def resolve(
    spec: str | dict[str, int],
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
        if spec == "earliest":
            v = EARLIEST
        elif spec == "latest":
            v = head
        else:
            assert isinstance(spec, dict)
            v = spec.get(p, default)
            v = head if v == LATEST else v
        if v == EARLIEST:
            v = firsts.get(p, 0)
        out[p] = min(v, head)
    if isinstance(spec, dict):
        # Partitions named but not (yet) seen keep their offset.
        for p, v in spec.items():
            if p not in out and v >= 0:
                out[p] = v
    return out


def plan(
    settings: ReadSettings, start: dict[str, int], end: dict[str, int], topics: dict[str, str]
) -> list[InputPartition]:
    """One Spark input partition per ``settings.max_records_per_task`` offsets of
    each dafka partition (a task holds its range in memory while it reads); ranges
    shorter than ``settings.min_records_per_task`` (at most that) are packed
    together until a pack holds at least that many records."""
    parts: list[InputPartition] = []
    short: list[RangePartition] = []
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
            r = RangePartition(topics[p], p, lo, min(lo + step, e))
            (short if r.end - r.start < least else parts).append(r)
    pack: list[RangePartition] = []
    held = 0
    for r in short:
        pack.append(r)
        held += r.end - r.start
        if held >= least or r is short[-1]:
            parts.append(pack[0] if len(pack) == 1 else PackedRanges(tuple(pack)))
            pack, held = [], 0
    return parts


class DafkaBatchReader(DataSourceReader):
    """A bounded read: ``startingOffsets`` (default earliest) to ``endingOffsets``
    (default latest, as the stores report when the query is planned)."""

    def __init__(self, options: Options) -> None:
        self.settings = ReadSettings.from_options(options)
        self.starting = parse_offsets(options.get("startingOffsets", "earliest"), "startingOffsets")
        self.ending = parse_offsets(options.get("endingOffsets", "latest"), "endingOffsets")

    def partitions(self) -> list[InputPartition]:
        probe = needs_firsts(self.starting, EARLIEST)
        hs, firsts = self.settings.offsets(None if probe else ())
        start = resolve(self.starting, hs, EARLIEST, firsts)
        end = resolve(self.ending, hs, LATEST)
        return plan(self.settings, start, end, {p: t for p, (t, _) in hs.items()})

    def read(self, partition: InputPartition) -> Iterator[tuple[str, str, int, bytes]]:
        return self.settings.read(partition)


class DafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source: each micro-batch reads, per partition, from the last
    batch's end to the heads stores report (capped by ``maxOffsetsPerTrigger``).
    With ``trigger(availableNow=True)`` the heads at query start are the target."""

    def __init__(self, options: Options) -> None:
        self.settings = ReadSettings.from_options(options)
        self.starting = parse_offsets(options.get("startingOffsets", "latest"), "startingOffsets")
        self.max_per_trigger = (
            None
            if Options(options).get("maxOffsetsPerTrigger") is None
            else integer(options, "maxOffsetsPerTrigger", 1)
        )
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

    def _watches(self) -> dict[str, HeadsWatch]:
        if self._watch_clients is None:
            self._watch_clients = {t: self.settings.watch(t) for t in self.settings.topics}
        return self._watch_clients

    def prepareForTriggerAvailableNow(self) -> None:
        # A full round by a new client: the target must be everything stores
        # hold now, not what answered within a short round.
        self.target = self.settings.heads()

    def _heads(self) -> dict[str, tuple[str, int]]:
        hs = self.target if self.target is not None else self.settings.heads(self._watches())
        self.topics.update({p: t for p, (t, _) in hs.items()})
        return hs

    def initialOffset(self) -> dict[str, int]:
        if not needs_firsts(self.starting, EARLIEST):
            return resolve(self.starting, self._heads(), EARLIEST)
        hs, firsts = self.settings.offsets(None, watches=self._watches())
        if self.target is not None:
            hs = self.target
        self.topics.update({p: t for p, (t, _) in hs.items()})
        return resolve(self.starting, hs, EARLIEST, firsts)

    def _begin(self, start: dict[str, int], parts: Collection[str]) -> dict[str, int]:
        """Where each of ``parts`` begins in a batch after ``start``: its offset
        there, else (a partition new to the query) its first offset held."""
        self.firsts = {p: v for p, v in self.firsts.items() if p not in start}
        new = [p for p in parts if p not in start and p not in self.firsts]
        if new:
            self.firsts.update(self.settings.offsets(new, watches=self._watches())[1])
        return {p: start[p] if p in start else self.firsts.get(p, 0) for p in parts}

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        if self.max_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_per_trigger)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        from pyspark.sql.streaming.datasource import ReadMaxRows

        if self.target is None:
            # The heads, and in the same round where partitions new to the
            # query begin: they are read from their first record held.
            hs, firsts = self.settings.offsets(None, exclude=start.keys(), watches=self._watches())
            self.topics.update({p: t for p, (t, _) in hs.items()})
            self.firsts.update(firsts)
        else:
            hs = self._heads()
        begin = self._begin(start, hs)
        latest = {p: max(head, begin[p]) for p, (_t, head) in hs.items()}
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

    def read(self, partition: InputPartition) -> Iterator[tuple[str, str, int, bytes]]:
        return self.settings.read(partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: stores keep records by their own retention."""

    def stop(self) -> None:
        """Closes the planning clients (each task's reads close their own)."""
        for w in (self._watch_clients or {}).values():
            w.close()
        self._watch_clients = None


def _value_bytes(v: Any) -> bytes:
    """The sink's ``value`` column: binary as is, strings as UTF-8."""
    return v.encode() if isinstance(v, str) else encode_value(v, "bytes")


def _write_task(settings: ProducerSettings, rows: Iterator[Any]) -> DafkaCommit:
    r = produce_rows(rows, settings, column="value", encoder=_value_bytes)
    return DafkaCommit(r.partition, r.first, r.last, r.count)


def _check_write_schema(schema: StructType) -> None:
    from pyspark.sql.types import BinaryType, StringType

    names = [f.name for f in schema.fields]
    if "value" not in names:
        raise ValueError(
            f"the dafka sink needs a 'value' column (binary or string); got columns {names}"
        )
    t = schema["value"].dataType
    if not isinstance(t, BinaryType | StringType):
        raise TypeError(
            f"the dafka sink's 'value' column must be binary or string, not "
            f"{t.simpleString()}: cast it (e.g. col('value').cast('string')) or encode it "
            "(dafka.spark.json_value(...))"
        )


class DafkaBatchWriter(DataSourceWriter):
    """Batch writes: every task flushes until acknowledged before committing."""

    def __init__(self, settings: ProducerSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[Any]) -> DafkaCommit:
        return _write_task(self.settings, iterator)


class DafkaStreamWriter(DataSourceStreamWriter):
    """Streaming sink: every micro-batch task flushes until acknowledged before it
    commits; a failed batch is re-run into other partitions (at-least-once). With
    ``reuseProducer`` (the default here) a task sends through its Python worker's
    producer, kept from the worker's earlier tasks."""

    def __init__(self, settings: ProducerSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[Any]) -> DafkaCommit:
        return _write_task(self.settings, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are durable once each task returned; nothing else to publish."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Acknowledged records cannot be withdrawn; the retried batch re-sends."""


class DafkaDataSource(DataSource):
    """``format("dafka")``: see the module documentation for options."""

    @classmethod
    def name(cls) -> str:
        return "dafka"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DafkaBatchReader:
        return DafkaBatchReader(Options(self.options))

    def streamReader(self, schema: StructType) -> DafkaStreamReader:
        return DafkaStreamReader(Options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DafkaBatchWriter:
        if overwrite:
            # A topic is append-only: nothing already in it can be replaced.
            raise ValueError(
                "dafka topics are append-only: write with mode('append'), not overwrite"
            )
        _check_write_schema(schema)
        return DafkaBatchWriter(ProducerSettings.from_options(Options(self.options)))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DafkaStreamWriter:
        _check_write_schema(schema)
        settings = ProducerSettings.from_options(Options(self.options), reuse=True)
        return DafkaStreamWriter(settings)
