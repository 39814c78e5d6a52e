"""Producing from Spark tasks with the helpers (``foreach_partition_writer``,
``produce_arrow``, ``produce_udf``): one :class:`dafka.Producer` per task, or one per
Python worker. The ``dafka`` data source's sink is exactly-once and works otherwise:
see :mod:`dafka.spark._sink`.

By default every helper task (a ``foreachPartition`` call, a ``mapInArrow`` call)
opens its own producer, so each task writes its own dafka partition (the producer's
address). It sends, then flushes until ``min_acks`` stores have acknowledged every
record, and raises if they do not within ``flush_timeout``, so Spark retries the task.

With ``ProducerSettings(reuse=True)`` (``produce_udf`` always) a task borrows the
producer an earlier task of the same Python worker process left behind, already
connected to its stores, and gives it back once its records are acknowledged. A
task's records are then the offsets ``first..last`` of a partition its worker shares
with its other tasks.

Retries and duplicates: a failed task's producer is closed, never reused; the
retried task (or a speculative copy) writes through another producer, hence into
another partition, and sends all of its rows again, while the records the failed
attempt got acknowledged stay where they are. Delivery through the helpers is
therefore at-least-once. To deduplicate downstream, put a stable key in each record
(a row id, or ``(spark_partition_id, row_index)``) and drop repeated keys when
reading, or read only the ranges whose task committed (the ``(partition,
first_offset, last_offset)`` rows the Arrow path returns name them); or write with
the data source, which is exactly-once.
"""

from __future__ import annotations

import atexit
import base64
import datetime
import decimal
import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dafka._defaults import BEACON_INTERVAL, BEACON_TIMEOUT, BIND, MAX_UNACKED_BYTES, WIRE
from dafka._native import Producer, check_node
from dafka.exceptions import DeliveryError
from dafka.spark._errors import as_options

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "DeliveryError",
    "ProducerSettings",
    "TaskResult",
    "encode_value",
    "produce_arrow_batches",
    "produce_rows",
    "task_producer",
]

#: How a row becomes record bytes: ``"bytes"``, ``"str"`` (UTF-8), ``"json"`` (the
#: whole row as a JSON object), ``"arrow"`` (the row as a one-row Arrow IPC stream)
#: or a function of the row returning bytes.
Encoder = str | Callable[[Any], bytes]


class Options(dict[str, str]):
    """Data-source options; Spark hands them over with lower-cased keys, so
    lookups ignore case (``startingOffsets`` finds ``startingoffsets``)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__((k.lower(), v) for k, v in options.items())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


def split_endpoints(spec: str) -> list[str]:
    """Endpoints from an option: separated by commas, semicolons or spaces. A
    tower's ``tcp://HOST:IN,OUT`` keeps its comma (a piece without ``://`` continues
    the endpoint before it), and a secure endpoint its key (``...;curve=KEY``: Z85
    has no comma, semicolon or space)."""
    out: list[str] = []
    for piece in spec.replace(";", " ").replace(",", " , ").split():
        if piece == ",":
            continue
        if piece.startswith("curve=") and out and ";curve=" not in out[-1]:
            out[-1] += ";" + piece
        elif "://" not in piece and out and out[-1].count(",") == 0 and piece.isdigit():
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


def seconds(options: Mapping[str, str], key: str, default: float) -> float:
    """An option in seconds: a positive, finite number."""
    v = Options(options).get(key)
    try:
        x = default if v is None else float(v)
    except ValueError:
        raise ValueError(f"option {key} must be a number of seconds, got {v!r}") from None
    if not 0 < x < float("inf"):
        raise ValueError(f"option {key} must be a positive number of seconds, got {v!r}")
    return x


def integer(options: Mapping[str, str], key: str, default: int, least: int = 1) -> int:
    """An integer option of at least ``least``."""
    v = Options(options).get(key)
    try:
        n = default if v is None else int(v)
    except ValueError:
        raise ValueError(f"option {key} must be an integer, got {v!r}") from None
    if n < least:
        raise ValueError(f"option {key} must be >= {least}, got {n}")
    return n


def flag(options: Mapping[str, str], key: str, default: bool) -> bool:
    """A boolean option: true/false, 1/0 or yes/no."""
    v = Options(options).get(key)
    if v is None:
        return default
    if v.lower() in ("true", "1", "yes"):
        return True
    if v.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"option {key} must be true or false, got {v!r}")


@dataclass(frozen=True)
class ProducerSettings:
    """Everything an executor needs to open a producer (picklable)."""

    topic: str
    towers: list[str] = field(default_factory=list)
    peers: list[str] = field(default_factory=list)
    min_acks: int = 1
    flush_timeout: float = 120.0
    wire: str = WIRE
    max_unacked_bytes: int = MAX_UNACKED_BYTES
    beacon_interval: float = BEACON_INTERVAL
    beacon_timeout: float = BEACON_TIMEOUT
    #: The producer's XPUB bind; on a cluster use ``tcp://*:0`` so stores on other
    #: hosts can reach executors.
    bind: str = BIND
    #: The host put in the producer's beacons (None: the bound host; "" lets the
    #: tower use the TCP peer address), for executors behind NAT or in containers.
    advertise_host: str | None = None
    #: Before its first record, a new producer waits up to this many seconds for
    #: ``min_acks`` stores to connect (:meth:`dafka.Producer.wait_for_stores`).
    #: Records sent before a store connects are not lost, but the store fetches
    #: them from the producer's buffer one by one, behind a task that keeps sending
    #: at full speed. 0: no wait.
    connect_wait: float = 5.0
    #: Tasks of one Python worker share a producer (one partition per worker, kept
    #: across tasks and micro-batches) instead of each opening its own.
    reuse: bool = False
    #: Publish in RECORD-BATCH messages (this project's wire extension, up to 64 KiB
    #: of values each) instead of one RECORD per row: what lets bulk ingest run at
    #: disk speed. This project's stores and consumers receive them; a consumer that
    #: does not know the extension (the C reference) gets the records only by
    #: fetching them. Option ``recordBatches``.
    record_batches: bool = True
    #: Secure mode (docs/security.md): the path of the producers' secret certificate
    #: (``NAME.key_secret`` of role ``producer``), the same on every executor (and on
    #: the driver, which reads it to check it). Needs ``trust``. Option ``cert``.
    cert: str | None = None
    #: Secure mode: the directory of trusted public certificates, at the same path on
    #: every executor and the driver. Needs ``cert``. Option ``trust``.
    trust: str | None = None

    def __post_init__(self) -> None:
        if not self.topic:
            raise ValueError("topic must be a non-empty string")
        if self.min_acks < 0:
            raise ValueError(f"min_acks must be >= 0, got {self.min_acks}")
        if self.flush_timeout <= 0:
            raise ValueError(f"flush_timeout must be > 0 seconds, got {self.flush_timeout}")
        if not self.connect_wait >= 0:
            raise ValueError(f"connect_wait must be >= 0 seconds, got {self.connect_wait}")
        if self.wire not in ("rfc", "zproto"):
            # Checked here too, so that the driver says it, not every task.
            raise ValueError(f"wire must be 'rfc' or 'zproto', got {self.wire!r}")
        if self.beacon_timeout <= self.beacon_interval:
            # Checked here too, so that the driver says it, not every task.
            raise ValueError(
                f"beacon_timeout ({self.beacon_timeout} s) must be longer than "
                f"beacon_interval ({self.beacon_interval} s)"
            )
        # The rest of what a task's Producer would refuse (endpoints, bind,
        # advertise_host, cert and trust), said once by the driver.
        check_node(
            towers=list(self.towers) or None,
            peers=list(self.peers) or None,
            wire=self.wire,
            bind=self.bind,
            beacon_interval=self.beacon_interval,
            beacon_timeout=self.beacon_timeout,
            advertise_host=self.advertise_host,
            cert=self.cert,
            trust=self.trust,
            role="producer",
        )

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, reuse: bool = False) -> ProducerSettings:
        """From data-source options: ``topic``, ``towers`` / ``peers`` (comma
        separated), ``minAcks``, ``flushTimeout``, ``wire``, ``beaconInterval``,
        ``beaconTimeout``, ``bind``, ``advertiseHost``, ``recordBatches`` (default
        true), ``cert`` and ``trust``."""
        options = Options(options)
        topic = options.get("topic")
        if not topic:
            raise ValueError('the dafka sink needs option("topic", NAME)')

        towers = split_endpoints(options.get("towers", ""))
        peers = split_endpoints(options.get("peers", ""))
        if not towers and not peers:
            raise ValueError('the dafka sink needs option("towers", ...) or option("peers", ...)')
        # ProducerSettings checks its fields by their Python names: said here
        # by the options' (wrapped, not raised apart: it is a Python API too).
        with as_options():
            return cls(
                topic=topic,
                towers=towers,
                peers=peers,
                min_acks=integer(options, "minAcks", 1, least=0),
                flush_timeout=seconds(options, "flushTimeout", 120.0),
                wire=options.get("wire", WIRE),
                beacon_interval=seconds(options, "beaconInterval", BEACON_INTERVAL),
                beacon_timeout=seconds(options, "beaconTimeout", BEACON_TIMEOUT),
                bind=options.get("bind", BIND),
                advertise_host=options.get("advertiseHost"),
                reuse=reuse,
                record_batches=flag(options, "recordBatches", True),
                cert=options.get("cert") or None,
                trust=options.get("trust") or None,
            )

    def open(self, *, address_seed: str | None = None, first_offset: int = 0) -> Producer:
        """A producer with these settings; ``address_seed`` and ``first_offset`` as
        :class:`dafka.Producer`'s (a partition address derived from the seed, offsets
        from ``first_offset``: what makes the data source's writes exactly-once)."""
        placed: dict[str, Any] = {}
        if address_seed is not None:
            placed = {"address_seed": address_seed, "first_offset": first_offset}
        p = Producer(
            self.topic,
            towers=self.towers or None,
            peers=self.peers or None,
            wire=self.wire,
            min_acks=self.min_acks,
            max_unacked_bytes=self.max_unacked_bytes,
            send_timeout=self.flush_timeout,
            beacon_interval=self.beacon_interval,
            beacon_timeout=self.beacon_timeout,
            bind=self.bind,
            advertise_host=self.advertise_host,
            record_batches=self.record_batches,
            cert=self.cert,
            trust=self.trust,
            close_timeout=self.flush_timeout,
            **placed,
        )
        if self.connect_wait > 0 and self.min_acks > 0:
            try:
                p.wait_for_stores(self.min_acks, self.connect_wait)
            except BaseException:
                p.close(timeout=0)
                raise
        return p


_IDLE: dict[str, list[Producer]] = {}
_IDLE_LOCK = threading.Lock()


def _close_idle() -> None:
    """At interpreter exit: every idle producer's records are acknowledged already."""
    with _IDLE_LOCK:
        idle = [p for ps in _IDLE.values() for p in ps]
        _IDLE.clear()
    for p in idle:
        with suppress(Exception):  # exiting: nothing left to tell
            p.close(timeout=0)


atexit.register(_close_idle)


def _borrow(settings: ProducerSettings) -> Producer:
    """An idle producer of this process opened with ``settings`` and still running,
    else a new one."""
    key = repr(settings)  # the settings hold lists: not hashable
    while True:
        with _IDLE_LOCK:
            ps = _IDLE.get(key)
            p = ps.pop() if ps else None
        if p is None:
            return settings.open()
        with suppress(Exception):  # raises if its node thread has stopped
            if p.flush(0.0) == 0:
                return p
        with suppress(Exception):  # a broken producer: drop it, open another
            p.close(timeout=0)


def _give_back(settings: ProducerSettings, p: Producer) -> None:
    with _IDLE_LOCK:
        _IDLE.setdefault(repr(settings), []).append(p)


@contextmanager
def task_producer(settings: ProducerSettings) -> Iterator[Producer]:
    """The producer one task sends through: a new one closed at the end, or with
    ``settings.reuse`` one borrowed from this worker process and given back if the
    task succeeds. A task that raises closes it: its unacknowledged records are
    the retried task's to send, and a later task must not inherit them."""
    if not settings.reuse:
        with settings.open() as p:
            yield p
        return
    p = _borrow(settings)
    try:
        yield p
    except BaseException:
        with suppress(Exception):  # the task's own error is the one to report
            p.close(timeout=0)
        raise
    _give_back(settings, p)


@dataclass(frozen=True)
class TaskResult:
    """What one task produced: its partition and the offsets it sent (``first`` and
    ``last`` are None when it sent nothing)."""

    partition: str
    first: int | None
    last: int | None
    count: int


def finish(p: Producer, s: ProducerSettings, first: int | None, count: int) -> TaskResult:
    """Flushes until every record is acknowledged; raises DeliveryError if not."""
    left = p.flush(s.flush_timeout) if count else 0
    if left:
        raise DeliveryError(
            f"{left} of {count} records of partition {p.address} (topic {s.topic!r}) were not "
            f"acknowledged by {s.min_acks} store(s) within {s.flush_timeout}s: is a store "
            "running and reachable through the towers? Spark will retry the task"
        )
    last = None if not count else p.next_offset - 1
    return TaskResult(p.address, first, last, count)


def _row_dict(row: Any) -> dict[str, Any]:
    if hasattr(row, "asDict"):
        return row.asDict(recursive=True)  # type: ignore[no-any-return]
    if isinstance(row, dict):
        return row
    raise TypeError(f"the json/arrow encoders take Spark Rows or dicts, got {type(row).__name__}")


def _jsonable(v: Any) -> Any:
    """``v`` as JSON can hold it, as Spark's ``to_json`` writes it: binary as
    base64, dates and times in ISO 8601, NaN and infinities as the strings
    "NaN", "Infinity" and "-Infinity" (bare tokens are not JSON), decimals as
    strings (exact)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, datetime.date | datetime.time):  # datetime is a date
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


ENCODERS = ("bytes", "str", "json", "arrow")


def check_encoder(encoder: Encoder) -> None:
    """Raises ValueError for an encoder that is neither a function nor a known name."""
    if not callable(encoder) and encoder not in ENCODERS:
        raise ValueError(
            f"encoder must be 'bytes', 'str', 'json', 'arrow' or a function, got {encoder!r}"
        )


def _arrow_schema(schema: Any) -> pa.Schema | None:
    """A pyarrow Schema from one, or from a Spark StructType (None: None)."""
    if schema is None:
        return None
    import pyarrow as pa

    if isinstance(schema, pa.Schema):
        return schema
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def encode_value(value: Any, encoder: Encoder, *, schema: Any = None) -> bytes:
    """Turns one value (a column value, or a Row for ``json``/``arrow``) into bytes.

    ``schema`` (a Spark StructType such as ``df.schema``, or a pyarrow Schema) gives
    the ``arrow`` encoder the types of the Row's fields; without it each record's
    types are inferred from its own row (a null field gets type null, a Spark int
    int64)."""
    if callable(encoder):
        out = encoder(value)
        if not isinstance(out, bytes | bytearray | memoryview):
            raise TypeError(f"the encoder must return bytes, got {type(out).__name__}")
        return bytes(out)
    if encoder == "bytes":
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise TypeError(
            f"column value is {type(value).__name__}, not bytes: use encoder='str' or 'json'"
        )
    if encoder == "str":
        if isinstance(value, str):
            return value.encode()
        raise TypeError(f"column value is {type(value).__name__}, not str")
    if encoder == "json":
        return json.dumps(
            _jsonable(_row_dict(value)), separators=(",", ":"), allow_nan=False, default=str
        ).encode()
    if encoder == "arrow":
        import pyarrow as pa

        table = pa.Table.from_pylist([_row_dict(value)], schema=_arrow_schema(schema))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return bytes(sink.getvalue().to_pybytes())
    raise ValueError(
        f"encoder must be 'bytes', 'str', 'json', 'arrow' or a function, got {encoder!r}"
    )


def _row_key(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    raise TypeError(f"a record key must be bytes or str, got {type(v).__name__}")


def _row_time(v: Any) -> int | None:
    """A record time from a row: a datetime (naive: local time, as Spark gives
    timestamps to Python) or an int of ms since the epoch."""
    if v is None:
        return None
    if isinstance(v, datetime.datetime):
        return round(v.timestamp() * 1000)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise TypeError(f"a record time must be a datetime or int ms, got {type(v).__name__}")


def produce_rows(
    rows: Iterable[Any],
    settings: ProducerSettings,
    *,
    column: str | None = "value",
    encoder: Encoder = "bytes",
    batch: int = 10000,
    schema: Any = None,
    key: str | None = None,
    timestamp: str | None = None,
) -> TaskResult:
    """Sends every row of one task through its producer (:func:`task_producer`) and
    flushes. ``column`` picks a field of each Row (None: the whole row goes to the
    encoder); ``schema`` is what the ``arrow`` encoder gets (see :func:`encode_value`).
    ``key`` names a field of record keys (bytes or str; None: no key), ``timestamp``
    one of record create times (a datetime or int ms; None: when sent)."""
    if batch < 1:
        raise ValueError("batch must be >= 1")
    check_encoder(encoder)
    schema = _arrow_schema(schema) if encoder == "arrow" else None
    with task_producer(settings) as p:
        first: int | None = None
        count = 0
        buf: list[bytes] = []
        keys: list[bytes | None] = []
        times: list[int | None] = []

        def send() -> None:
            nonlocal first, count, buf, keys, times
            extra: dict[str, Any] = {}
            if key is not None:
                extra["keys"] = keys
            if timestamp is not None:
                extra["timestamps"] = times
            last = p.send_many(buf, **extra)
            if first is None and last is not None:
                first = last - len(buf) + 1
            count += len(buf)
            buf, keys, times = [], [], []

        for row in rows:
            v = row if column is None else row[column]
            if v is None:
                raise ValueError(f"column {column!r} is null in a row: filter nulls first")
            buf.append(encode_value(v, encoder, schema=schema))
            if key is not None:
                keys.append(_row_key(row[key]))
            if timestamp is not None:
                times.append(_row_time(row[timestamp]))
            if len(buf) >= batch:
                send()
        if buf:
            send()
        return finish(p, settings, first, count)


def _value_array(batch: pa.RecordBatch, column: str) -> pa.Array:
    import pyarrow as pa

    try:
        arr = batch.column(column)
    except KeyError:
        raise KeyError(
            f"no column {column!r} in {batch.schema.names}: select or alias the value column"
        ) from None
    if arr.null_count:
        raise ValueError(f"column {column!r} has {arr.null_count} nulls: filter them first")
    t = arr.type
    if not (
        pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
    ):
        raise TypeError(
            f"column {column!r} is {t}, not binary or string: cast it or use an encoder UDF"
        )
    return arr


def _binary_buffers(arr: pa.Array) -> tuple[Any, Any, bool]:
    """``(data, offsets, large)`` of a binary/string array: its value buffer and
    the ``n + 1`` offsets of its slice, as ``Producer.send_buffers`` takes them."""
    import pyarrow as pa

    _validity, offsets, data = arr.buffers()
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    width = 8 if large else 4
    offs = offsets.slice(arr.offset * width, (len(arr) + 1) * width)
    return (b"" if data is None else data), offs, large  # data None: every value empty


def timestamps_ms(col: pa.Array) -> pa.Array:
    """A column of record times as int64 ms since the epoch: a timestamp column (any
    unit and zone: instants), or integers taken as ms. Nulls stay null; a time
    before 1970 raises."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(col.type):
        micros = pc.cast(col.cast(pa.timestamp("us", col.type.tz)), pa.int64())
        least = pc.min(micros).as_py()
        ms = pc.divide(micros, 1000)  # integers: truncated, the same as floor from 0 on
        if least is not None and least < 0:
            ms = pc.subtract(ms, 1)  # reported below as before 1970
    elif pa.types.is_integer(col.type):
        ms = pc.cast(col, pa.int64())
    else:
        raise TypeError(f"record times must be a timestamp or integer (ms) column, not {col.type}")
    least = pc.min(ms).as_py()
    if least is not None and least < 0:
        raise ValueError("a record time is before 1970 (dafka times are ms since the epoch, >= 0)")
    return ms


def _key_array(batch: pa.RecordBatch, column: str) -> pa.Array:
    import pyarrow as pa

    arr = batch.column(column)
    t = arr.type
    if not (
        pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
    ):
        raise TypeError(f"key column {column!r} is {t}, not binary or string: cast it")
    return arr


def send_arrow(
    p: Producer, arr: pa.Array, *, keys: pa.Array | None = None, times: pa.Array | None = None
) -> tuple[int, int] | None:
    """Sends an Arrow binary/string array from its buffers (no per-row Python), with
    ``keys`` (a binary/string array of the same length, nulls: no key) and ``times``
    (int64 ms, nulls: now) when given."""
    n = len(arr)
    if n == 0:
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    data, offs, large = _binary_buffers(arr)
    extra: dict[str, Any] = {}
    if keys is not None:
        kdata, koffs, klarge = _binary_buffers(keys)
        extra.update(key_data=kdata, key_offsets=koffs, key_large=klarge)
        if keys.null_count:
            extra.update(key_validity=keys.buffers()[0], key_bit_offset=keys.offset)
    if times is not None:
        if times.null_count:
            import time

            times = pc.fill_null(times, int(time.time() * 1000))
        times = times.cast(pa.int64())
        extra["timestamps"] = times.buffers()[1].slice(times.offset * 8, n * 8)
    return p.send_buffers(data, offs, large=large, **extra)


def produce_arrow_batches(
    batches: Iterator[pa.RecordBatch],
    settings: ProducerSettings,
    *,
    column: str = "value",
    key: str | None = None,
    timestamp: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function body: one producer for the task, every batch's
    ``column`` sent from its buffers (with the ``key`` column's keys and the
    ``timestamp`` column's times when given), then a flush; yields one row
    ``(partition, first_offset, last_offset, count)``."""
    import pyarrow as pa

    with task_producer(settings) as p:
        first: int | None = None
        count = 0
        for b in batches:
            keys = None if key is None else _key_array(b, key)
            times = None if timestamp is None else timestamps_ms(b.column(timestamp))
            got = send_arrow(p, _value_array(b, column), keys=keys, times=times)
            if got is not None:
                if first is None:
                    first = got[0]
                count += got[1] - got[0] + 1
        r = finish(p, settings, first, count)
    yield pa.RecordBatch.from_pydict(
        {
            "partition": [r.partition],
            "first_offset": [r.first],
            "last_offset": [r.last],
            "count": [r.count],
        },
        schema=OFFSETS_ARROW_SCHEMA(),
    )


def OFFSETS_ARROW_SCHEMA() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("partition", pa.string()),
            ("first_offset", pa.int64()),
            ("last_offset", pa.int64()),
            ("count", pa.int64()),
        ]
    )


#: The Spark schema of the per-task offsets rows.
OFFSETS_SCHEMA = "partition string, first_offset long, last_offset long, count long"
