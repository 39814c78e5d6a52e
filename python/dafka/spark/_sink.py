"""The ``dafka`` data source's sink: batch and streaming writes, exactly-once.

A dafka partition is its producer's address, and a store keeps one record per
(partition, offset): a record sent again at an offset a store holds is a
duplicate, dropped, and a consumer skips offsets it has passed. So a write is
exactly-once when a retried or speculative task writes the *same partition at
the same offsets* as the attempt it repeats. Every task therefore writes through
producers whose address is derived from the write's identity
(``Producer(address_seed=...)``) and whose offsets it chooses
(``first_offset``):

- Batch (``df.write``): one identity per ``save()``, made once on the driver (a
  random one, or the ``writeId`` option, which makes a whole re-run of the same
  job idempotent), and each task's partition per (identity, Spark partition id,
  topic), from offset 0. Every attempt of a task rewrites offsets ``0..n-1``.
- Streaming (``writeStream``): a partition per (query id, Spark partition id,
  topic), the query id being the one Spark keeps in the checkpoint (the same
  across restarts), and each micro-batch continues where the last one ended:
  partitions do not grow with every micro-batch. Every record carries the header
  ``dafka.spark.epoch`` = ``"<batch id>:<first offset of the batch>"``. A task
  of batch ``e`` asks the stores for its partition's head and its last record:
  a last record of batch ``e`` (an earlier attempt of this task) gives back the
  batch's first offset, which the task rewrites from; one of an earlier batch
  means the batch starts at the head. Spark's batch id reaches the task as the
  local property ``streaming.sql.batchId``, the query id as
  ``sql.streaming.queryId``.

What the input must satisfy (as for Spark's own exactly-once sinks): every
attempt of a task must see the same rows in the same order (a deterministic
query over a replayable source: a checkpointed streaming source, files, a
table; not ``rand()``, not a UDF with side effects, not a source that changes
between attempts), and, for streaming, the same rows per Spark partition id in
every attempt of a micro-batch. When it does not, offsets a failed attempt got
stored keep that attempt's records and the retry's records at those offsets
are dropped as duplicates: rows of the failed attempt may appear and rows of
the retry may be missing, up to the number of records the failed attempt got
stored; nothing is written twice at one offset, and the partition stays
readable (no gap).

Also documented in docs/spark.md, "Writing": what happens when every store
that held a partition's last records is unreachable when a streaming task asks.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from dafka._native import Producer, check_node
from dafka.exceptions import DeliveryError
from dafka.spark._errors import as_options
from dafka.spark._produce import ProducerSettings, send_arrow, timestamps_ms

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = [
    "EPOCH_HEADER",
    "DafkaBatchWriter",
    "DafkaCommit",
    "DafkaStreamWriter",
    "SinkColumns",
    "SinkSettings",
    "TopicWrite",
    "check_write_schema",
]

#: The header every record of a streaming write carries: ``"<batch id>:<first
#: offset of that batch in this partition>"`` (ASCII).
EPOCH_HEADER = "dafka.spark.epoch"
#: The producer settings' topic until a row names one (never opened as such).
_NO_TOPIC = "-"


@dataclass(frozen=True)
class SinkColumns:
    """Which optional columns the written DataFrame has (``value`` it must have)."""

    key: bool = False
    headers: bool = False
    timestamp: bool = False
    topic: bool = False


def check_write_schema(schema: StructType, options: Mapping[str, str]) -> SinkColumns:
    """Checks the columns the sink takes, as Kafka's sink does: ``value`` (binary or
    string, required), ``key`` (binary or string), ``headers`` (array of struct
    ``key`` string, ``value`` binary or string), ``timestamp`` (timestamp, or long
    milliseconds since the epoch) and ``topic`` (string; needed unless the
    ``topic`` option is given, which overrides it). Other columns are not written
    (a dafka source's ``partition`` and ``offset``, say: a partition is its
    producer)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructType,
        TimestampType,
    )

    names = [f.name for f in schema.fields]
    if "value" not in names:
        raise ValueError(
            f"the dafka sink needs a 'value' column (binary or string); got columns {names}"
        )

    def kind(col: str) -> Any:
        return schema[col].dataType

    def bytes_like(col: str, t: Any) -> None:
        if not isinstance(t, BinaryType | StringType):
            raise TypeError(
                f"the dafka sink's {col!r} column must be binary or string, not "
                f"{t.simpleString()}: cast it (e.g. col({col!r}).cast('string')) or encode it "
                "(dafka.spark.json_value(...))"
            )

    bytes_like("value", kind("value"))
    if "key" in names:
        bytes_like("key", kind("key"))
    if "headers" in names:
        t = kind("headers")
        ok = isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
        if ok:
            fields = {f.name: f.dataType for f in t.elementType.fields}
            ok = (
                set(fields) == {"key", "value"}
                and isinstance(fields["key"], StringType)
                and isinstance(fields["value"], BinaryType | StringType)
            )
        if not ok:
            raise TypeError(
                "the dafka sink's 'headers' column must be array<struct<key: string, value: "
                f"binary>>, as Kafka's, not {t.simpleString()}"
            )
    if "timestamp" in names and not isinstance(
        kind("timestamp"), TimestampType | LongType | IntegerType
    ):
        raise TypeError(
            "the dafka sink's 'timestamp' column must be a timestamp, or a long of "
            f"milliseconds since the epoch, not {kind('timestamp').simpleString()}"
        )
    if "topic" in names and not isinstance(kind("topic"), StringType):
        raise TypeError(
            f"the dafka sink's 'topic' column must be a string, not {kind('topic').simpleString()}"
        )
    if "topic" not in names and not options.get("topic"):
        raise ValueError(
            "the dafka sink needs option(\"topic\", NAME) or a 'topic' column naming each "
            "row's topic"
        )
    return SinkColumns(
        key="key" in names,
        headers="headers" in names,
        timestamp="timestamp" in names,
        topic="topic" in names,
    )


@dataclass(frozen=True)
class TopicWrite:
    """What one task wrote to one topic: its partition and offsets ``first..last``
    (``count`` records; ``first`` and ``last`` None when it wrote none)."""

    topic: str
    partition: str
    first: int | None
    last: int | None
    count: int


@dataclass
class DafkaCommit(WriterCommitMessage):
    """What a writer task delivered (acknowledged by ``minAcks`` stores), per topic."""

    writes: tuple[TopicWrite, ...]


@dataclass(frozen=True)
class SinkSettings:
    """The sink's options, parsed on the driver (picklable)."""

    producer: ProducerSettings
    #: The ``topic`` option: overrides the rows' ``topic`` column.
    topic: str | None
    columns: SinkColumns
    streaming: bool
    #: Batch: the write's identity (``writeId``, or one made for this ``save()``).
    write_id: str | None = None
    #: Secure mode, streaming: the consumer-role certificate a task reads its
    #: partition's head and last record with (``readCert``).
    read_cert: str | None = None
    #: Bounds of a streaming task's look-up of its partition's last record.
    lookup_timeout: float = 30.0
    lookup_settle: float = 0.5

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], columns: SinkColumns, *, streaming: bool
    ) -> SinkSettings:
        topic = options.get("topic") or None
        base = dict(options)
        base.setdefault("topic", _NO_TOPIC)
        producer = ProducerSettings.from_options(base)
        write_id = None
        if not streaming:
            write_id = options.get("writeId") or uuid.uuid4().hex
        read_cert = options.get("readCert") or None
        if streaming and not producer.towers:
            raise ValueError(
                'a streaming write needs option("towers", ...): each task reads where its '
                "partition stands (exactly-once), and stores find read clients through "
                "discovery"
            )
        if streaming and producer.cert is not None:
            if read_cert is None:
                raise ValueError(
                    "a streaming write to a secure cluster needs option('readCert', PATH): a "
                    "consumer-role secret certificate, with which each task reads where its "
                    "partition stands (exactly-once)"
                )
            # Checked as a consumer's cert: said as readCert.
            with as_options({"cert": "readCert"}):
                check_node(
                    towers=list(producer.towers) or None,
                    peers=list(producer.peers) or None,
                    cert=read_cert,
                    trust=producer.trust,
                    role="consumer",
                )
        elif read_cert is not None:
            raise ValueError(
                "option readCert applies to streaming writes to a secure cluster (with cert "
                "and trust) only"
            )
        return cls(
            producer=producer,
            topic=topic,
            columns=columns,
            streaming=streaming,
            write_id=write_id,
            read_cert=read_cert,
            lookup_timeout=min(producer.flush_timeout, 60.0),
        )

    def for_topic(self, topic: str) -> ProducerSettings:
        return dataclasses.replace(self.producer, topic=topic)

    def read_args(self) -> dict[str, Any]:
        """The keywords of the read clients a streaming task looks up with."""
        p = self.producer
        return {
            "towers": list(p.towers) or None,
            "peers": list(p.peers) or None,
            "wire": p.wire,
            "bind": p.bind,
            "advertise_host": p.advertise_host,
            "beacon_interval": p.beacon_interval,
            "cert": self.read_cert,
            "trust": p.trust if self.read_cert else None,
        }


#: The UUID v5 namespace the core derives seeded addresses in (``seeded_address``
#: in rust/src/node/config.rs; fixed in every version).
_SEED_NAMESPACE = uuid.UUID(int=0x6461_666B_6120_7061_7274_6974_696F_6E73)
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85_decode(text: str) -> bytes:
    out = bytearray()
    for i in range(0, len(text), 5):
        n = 0
        for c in text[i : i + 5]:
            n = n * 85 + _Z85.index(c)
        out += n.to_bytes(4, "big")
    return bytes(out)


def seeded_address(seed: str, cert: str | None = None) -> str:
    """The address ``Producer(address_seed=seed, cert=cert)`` gets: the UUID v5 of
    the seed, in secure mode after the first 8 bytes of the certificate's public
    key (as every secure node's address starts). A streaming task needs it before
    it opens its producer, to ask where its partition stands."""
    raw = uuid.uuid5(_SEED_NAMESPACE, seed).bytes
    if cert is not None:
        from dafka.security import read_certificate

        raw = _z85_decode(read_certificate(cert).public_key)[:8] + raw[:8]
    return raw.hex().upper()


def _task() -> Any:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("the dafka sink's write() runs in a Spark task")
    return ctx


def parse_epoch(record: Any) -> tuple[int, int] | None:
    """``(batch id, first offset)`` from a record's :data:`EPOCH_HEADER`."""
    for k, v in record.headers:
        if k == EPOCH_HEADER:
            epoch, start = bytes(v).decode("ascii").split(":")
            return int(epoch), int(start)
    return None


def epoch_start(s: SinkSettings, topic: str, partition: str, epoch: int) -> int:
    """Where micro-batch ``epoch`` begins in ``partition``: the first offset the
    partition's last record names when that record is of this batch (an earlier
    attempt of this task wrote it), else the partition's head (0 for a new one)."""
    from dafka._native import fetch_range, heads

    head = heads(topic, timeout=s.lookup_timeout, settle=s.lookup_settle, **s.read_args()).get(
        partition, 0
    )
    if head == 0:
        return 0
    got = None
    for _ in range(3):
        (records, _lost) = fetch_range(
            topic,
            partition,
            head - 1,
            head,
            timeout=s.lookup_timeout,
            with_meta=True,
            **s.read_args(),
        )
        last = records[-1] if records else None
        got = None if last is None else parse_epoch(last)
        # A record whose time is unknown came without its metadata (a store that
        # answered before it learnt this client takes metadata): ask again.
        if got is not None or (last is not None and last.timestamp is not None):
            break
    if got is None:
        raise RuntimeError(
            f"the last record of partition {partition} (topic {topic!r}, offset {head - 1}) "
            f"carries no {EPOCH_HEADER} header: the partition was not written by this sink"
        )
    e, start = got
    if e == epoch:
        return start
    if e < epoch:
        return head
    raise RuntimeError(
        f"partition {partition} (topic {topic!r}) holds micro-batch {e} already, and this is "
        f"batch {epoch}: was the query restarted from an older copy of its checkpoint? Start "
        "it from its latest checkpoint, or with a new one"
    )


class _TopicProducer:
    """One task's producer of one topic, and what it sent."""

    def __init__(self, settings: ProducerSettings, seed: str, first_offset: int) -> None:
        self.settings = settings
        self.producer: Producer = settings.open(address_seed=seed, first_offset=first_offset)
        #: Where this task's records begin (a streaming batch's first offset).
        self.start = first_offset
        self.first: int | None = None
        self.count = 0

    def sent(self, first: int, n: int) -> None:
        if self.first is None:
            self.first = first
        self.count += n

    def finish(self) -> TopicWrite:
        p, s = self.producer, self.settings
        left = p.flush(s.flush_timeout) if self.count else 0
        if left:
            raise DeliveryError(
                f"{left} of {self.count} records of partition {p.address} (topic {s.topic!r}) "
                f"were not acknowledged by {s.min_acks} store(s) within {s.flush_timeout}s: is a "
                "store running and reachable through the towers? Spark will retry the task"
            )
        last = None if not self.count else p.next_offset - 1
        return TopicWrite(s.topic, p.address, self.first, last, self.count)


def _bytes_list(col: pa.Array) -> list[bytes | None]:
    import pyarrow as pa

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())
    out: list[bytes | None] = col.to_pylist()
    return out


def _headers(col: pa.Array) -> list[list[tuple[str, bytes]]]:
    """The ``headers`` column as ``send_many`` takes them, a list of ``(key, value)``
    per row (a null list: none; a null value: empty), built from the column's
    flattened children rather than row by row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = col.offsets.to_pylist()
    base = offsets[0]
    # The children's range the offsets index (flatten() would skip null rows').
    flat = col.values.slice(base, offsets[-1] - base)
    keys, values = flat.field("key"), flat.field("value")
    if keys.null_count:
        raise ValueError("the dafka sink's 'headers' column holds a header with a null key")
    if not pa.types.is_binary(values.type):
        values = values.cast(pa.binary())
    if values.null_count:
        values = pc.fill_null(values, b"")
    pairs = list(zip(keys.to_pylist(), values.to_pylist(), strict=True))
    out = [pairs[a - base : b - base] for a, b in itertools.pairwise(offsets)]
    if col.null_count:
        for i, valid in enumerate(col.is_valid().to_pylist()):
            if not valid:
                out[i] = []
    return out


class _Task:
    """One writer task: its producers by topic, opened on a topic's first row."""

    def __init__(self, s: SinkSettings) -> None:
        self.s = s
        ctx = _task()
        self.pid = ctx.partitionId()
        self.epoch: int | None = None
        if s.streaming:
            query = ctx.getLocalProperty("sql.streaming.queryId")
            batch = ctx.getLocalProperty("streaming.sql.batchId")
            if query is None or batch is None:
                raise RuntimeError(
                    "a streaming write's task has no sql.streaming.queryId or "
                    "streaming.sql.batchId local property"
                )
            self.identity = f"dafka-spark-stream:{query}"
            self.epoch = int(batch)
        else:
            self.identity = f"dafka-spark-batch:{s.write_id}"
        self.producers: dict[str, _TopicProducer] = {}

    def producer(self, topic: str) -> _TopicProducer:
        tp = self.producers.get(topic)
        if tp is None:
            settings = self.s.for_topic(topic)
            seed = f"{self.identity}:{self.pid}:{topic}"
            start = 0
            if self.epoch is not None:
                address = seeded_address(seed, settings.cert)
                start = epoch_start(self.s, topic, address, self.epoch)
            tp = self.producers[topic] = _TopicProducer(settings, seed, start)
        return tp

    def by_topic(self, batch: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
        """The batch's rows by topic, each topic's in their order."""
        import pyarrow.compute as pc

        if self.s.topic is not None:
            yield self.s.topic, batch
            return
        col = batch.column("topic")
        if col.null_count:
            raise ValueError(
                "the dafka sink's 'topic' column is null in a row: give every row a topic, or "
                'set option("topic", NAME)'
            )
        topics = pc.unique(col).to_pylist()
        if len(topics) == 1:
            yield topics[0], batch
            return
        for t in topics:
            yield t, batch.filter(pc.equal(col, t))

    def send(self, topic: str, rows: pa.RecordBatch) -> None:
        n = rows.num_rows
        if n == 0:
            return
        values = rows.column("value")
        if values.null_count:
            raise ValueError(
                f"the dafka sink's 'value' column is null in {values.null_count} row(s): filter "
                "them first"
            )
        tp = self.producer(topic)
        p = tp.producer
        c = self.s.columns
        times = timestamps_ms(rows.column("timestamp")) if c.timestamp else None
        if not (c.headers or self.epoch is not None):
            # From the Arrow buffers: no Python per row.
            keys = rows.column("key") if c.key else None
            got = send_arrow(p, values, keys=keys, times=times)
            assert got is not None
            tp.sent(got[0], n)
            return
        extra: dict[str, Any] = {}
        if c.key:
            extra["keys"] = _bytes_list(rows.column("key"))
        headers = _headers(rows.column("headers")) if c.headers else None
        if self.epoch is not None:
            mark = (EPOCH_HEADER, f"{self.epoch}:{tp.start}".encode())
            headers = [[*h, mark] for h in headers] if headers else [[mark]] * n
        if headers is not None:
            extra["headers"] = headers
        if times is not None:
            extra["timestamps"] = times.to_pylist()
        last = p.send_many(_bytes_list(values), **extra)  # type: ignore[arg-type]  # no nulls
        assert last is not None
        tp.sent(last - n + 1, n)

    def run(self, batches: Iterator[pa.RecordBatch]) -> DafkaCommit:
        done = False
        try:
            for b in batches:
                for topic, rows in self.by_topic(b):
                    self.send(topic, rows)
            commit = DafkaCommit(tuple(tp.finish() for tp in self.producers.values()))
            done = True
            return commit
        finally:
            # Finished: every record is acknowledged, so closing waits for
            # nothing. Failed: close at once, the retry sends them again.
            for tp in self.producers.values():
                tp.producer.close(timeout=None if done else 0)


class DafkaBatchWriter(DataSourceArrowWriter):
    """Batch writes (``df.write``): every task writes, per topic, the partition its
    write identity and Spark partition id name, from offset 0, and flushes until
    acknowledged before it commits. A retried or speculative attempt rewrites the
    same offsets: exactly-once for a deterministic input."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DafkaCommit:
        return _Task(self.settings).run(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records are durable once each task returned; nothing else to publish."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Acknowledged records cannot be withdrawn: a job that failed left what
        its tasks wrote; running it again with the same ``writeId`` completes it
        without writing anything twice."""


class DafkaStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writes: every micro-batch task continues its partition (one per
    query, Spark partition id and topic) from where the last batch ended, or
    rewrites from where this batch began when it repeats a failed attempt; it
    flushes until acknowledged before it commits."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DafkaCommit:
        return _Task(self.settings).run(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are durable once each task returned; nothing else to publish."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Acknowledged records cannot be withdrawn; the retried batch rewrites
        them at the same offsets."""
