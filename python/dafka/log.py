"""``dafka.Log``: the durable segment store, for local use and tooling.

A directory of topics, each a set of partitions, each an append-only sequence of
segment files. Offsets are contiguous: every append must carry the partition's
next offset (:class:`~dafka.exceptions.OffsetError` otherwise); a new partition
starts at whatever offset its first append carries. A record has a value and,
optionally, a key, headers and a create time; the log stamps each with its append
time (:class:`StoredRecord`).

>>> with dafka.Log("data/log", fsync="always") as log:  # doctest: +SKIP
...     log.append("weather", "85E3C6EBDC7B4156AD9C43611EBC09CE", 0, b"21.5")
...     log.append("weather", "85E3C6EBDC7B4156AD9C43611EBC09CE", 1, b"22.0",
...                key=b"paris", headers=[("unit", b"C")], timestamp=1_795_000_000_000)
...     log.read("weather", "85E3C6EBDC7B4156AD9C43611EBC09CE", 0)
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypeVar

from dafka._native import NativeLog
from dafka.exceptions import LogValueError

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["FsyncPolicy", "Log", "PartitionInfo", "RecoveryPolicy", "StoredRecord"]

FsyncPolicy = Literal["always", "interval", "never"]
RecoveryPolicy = Literal["tolerate_tail_corruption", "absolute_consistency"]

MiB = 1024 * 1024

_T = TypeVar("_T")


def _topic_bytes(topic: str | bytes) -> bytes:
    if isinstance(topic, bytes):
        return topic
    if isinstance(topic, str):
        return topic.encode("utf-8", "surrogateescape")
    raise TypeError(f"topic must be str or bytes, got {type(topic).__name__}")


def _value_bytes(value: Buffer, what: str) -> bytes:
    """A record value as bytes: ``bytes`` as is, any bytes-like object copied (as
    ``Producer.send`` takes them); a TypeError that says what to pass otherwise."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        raise TypeError(f"{what} takes bytes, got a str: encode it first, e.g. value.encode()")
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(
            f"{what} takes bytes or a bytes-like object (bytearray, memoryview), "
            f"got {type(value).__name__}"
        ) from None
    with view:
        return view.tobytes()


def _key_bytes(key: Buffer | None, what: str) -> bytes | None:
    return None if key is None else _value_bytes(key, f"{what} (key)")


def _headers(
    headers: Iterable[tuple[str, Buffer]] | None, what: str
) -> list[tuple[str, bytes]] | None:
    """Headers as the native log takes them: a list of ``(str, bytes)`` pairs."""
    if headers is None:
        return None
    if isinstance(headers, (str, bytes, bytearray, memoryview, dict)):
        raise TypeError(
            f'{what} takes headers as a list of (name, value) pairs, e.g. [("unit", b"C")], '
            f"got {type(headers).__name__}"
        )
    out = []
    try:
        pairs = list(headers)
    except TypeError:
        raise TypeError(
            f"{what} takes headers as a list of (name, value) pairs, got {type(headers).__name__}"
        ) from None
    for h in pairs:
        if not isinstance(h, (tuple, list)) or len(h) != 2:
            raise TypeError(f"{what}: each header is a (name, value) pair, got {h!r}")
        name, value = h
        if not isinstance(name, str):
            raise TypeError(f"{what}: a header name is a str, got {type(name).__name__}")
        out.append((name, _value_bytes(value, f"{what} (header {name!r})")))
    return out


def _per_value(v: Iterable[_T] | None, name: str) -> list[_T] | None:
    """``keys``/``headers``/``timestamps`` of append_many as a list (one entry per
    value; the native call checks the length)."""
    if v is None:
        return None
    if isinstance(v, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"append_many takes {name} as a list with one entry per value")
    return list(v)


def _topic_str(topic: bytes) -> str:
    return topic.decode("utf-8", "surrogateescape")


def _utf8(partition: str) -> bool:
    """Whether a partition name can reach the log at all: a lone surrogate (from
    ``os.fsdecode`` or ``surrogateescape``) cannot, and no stored name holds one."""
    if not isinstance(partition, str):
        return True  # the native call raises TypeError
    try:
        partition.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _writable(partition: str) -> str:
    """``partition`` for an append or a read: a name that is not UTF-8 is a
    LogValueError, as any other invalid name is."""
    if not _utf8(partition):
        raise LogValueError(
            f"partition name {partition!r} may hold only ASCII letters, digits, '-' and '_'"
        )
    return partition


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record read from a :class:`Log`: where it is, its value, its metadata
    and its times. Immutable; compared by all fields; hashed by all but ``headers``."""

    topic: str
    """The topic name (surrogate escapes for bytes that are not UTF-8)."""
    partition: str
    offset: int
    value: bytes
    timestamp: int
    """The append time: when the log appended the record, ms since the epoch (also
    :attr:`append_time`)."""
    key: bytes | None = None
    """The record's key (None without one; it may be empty)."""
    headers: list[tuple[str, bytes]] = field(default_factory=list, hash=False)
    """The record's headers, ``(name, value)`` pairs in order (repeats allowed)."""
    create_time: int | None = None
    """The producer's create time, ms since the epoch; None for a record without one
    (a plain value, or one a log of the first format holds)."""

    @property
    def append_time(self) -> int:
        """When the log appended the record, ms since the epoch."""
        return self.timestamp


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One line of the listing: where a partition stands."""

    topic: str
    partition: str
    first_offset: int
    """First available offset (retention moves it forward)."""
    next_offset: int
    """Offset the next append must carry: one past the last record."""
    durable_next: int
    """Every offset below this has reached fdatasync."""
    bytes: int
    """Bytes in segment files."""
    segments: int
    """Number of segment files, the active one included (0 for a partition with no
    record left, which is kept only as its next offset in the log's ``.parked``)."""


class Log:
    """A durable log directory (see the module docs).

    Its options (keyword-only) are declared in Rust with ``NativeLog``'s, and their
    "Parameters" below come from there: how large a segment grows
    (``segment_bytes``), what retention deletes (``retain_hours``, ``retain_bytes``,
    ``forget_parked_hours``, checked by :meth:`tick` and :meth:`enforce_retention`),
    when appends are synced (``fsync``, ``flush_messages``, ``flush_interval_ms``),
    what opening does with damage (``recovery``, ``isolate_damaged``; see
    :meth:`damaged`) and ``read_only``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        # <options>
        segment_bytes: int = 536870912,
        retain_hours: int | None = 168,
        retain_bytes: int | None = None,
        forget_parked_hours: int | None = 720,
        index_interval_bytes: int = 4096,
        flush_messages: int = 10000,
        flush_interval_ms: int = 1000,
        fsync: Literal["always", "interval", "never"] = "interval",
        recovery: Literal[
            "tolerate_tail_corruption", "absolute_consistency"
        ] = "tolerate_tail_corruption",
        read_only: bool = False,
        isolate_damaged: bool = False,
        # </options>
    ) -> None:
        self.path = os.fspath(path)
        self._log = NativeLog(
            self.path,
            # <options>
            segment_bytes=segment_bytes,
            retain_hours=retain_hours,
            retain_bytes=retain_bytes,
            forget_parked_hours=forget_parked_hours,
            index_interval_bytes=index_interval_bytes,
            flush_messages=flush_messages,
            flush_interval_ms=flush_interval_ms,
            fsync=fsync,
            recovery=recovery,
            read_only=read_only,
            isolate_damaged=isolate_damaged,
            # </options>
        )

    def append(
        self,
        topic: str | bytes,
        partition: str,
        offset: int,
        value: Buffer,
        *,
        key: Buffer | None = None,
        headers: Iterable[tuple[str, Buffer]] | None = None,
        timestamp: int | None = None,
    ) -> None:
        """Appends one record; ``offset`` must be the partition's next offset.
        ``value`` (and ``key``) is bytes or any bytes-like object (bytearray,
        memoryview...); ``headers`` a list of ``(name, value)`` pairs (str, bytes;
        repeats allowed); ``timestamp`` the record's create time in ms since the
        epoch (None: the record has none, its time is its append time)."""
        self._log.append(
            _topic_bytes(topic),
            _writable(partition),
            offset,
            _value_bytes(value, "append"),
            key=_key_bytes(key, "append"),
            headers=_headers(headers, "append"),
            timestamp=timestamp,
        )

    def append_many(
        self,
        topic: str | bytes,
        partition: str,
        first_offset: int,
        values: Iterable[Buffer],
        *,
        keys: Sequence[Buffer | None] | None = None,
        headers: Sequence[Iterable[tuple[str, Buffer]] | None] | None = None,
        timestamps: Sequence[int | None] | None = None,
    ) -> None:
        """Appends records at ``first_offset``, ``first_offset + 1``, ... in one call
        (one write, at most one fdatasync). ``keys``, ``headers`` and ``timestamps``,
        when given, hold one entry per value, None for a record without (as
        :meth:`append` takes them). On error a prefix may be stored:
        :meth:`next_offset` says where the partition stands."""
        topic = _topic_bytes(topic)
        if isinstance(values, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                'append_many takes an iterable of values, e.g. [b"a", b"b"]: '
                "for one value use append()"
            )
        try:
            it = iter(values)
        except TypeError:
            raise TypeError(
                'append_many takes an iterable of values, e.g. [b"a", b"b"], '
                f"got {type(values).__name__}"
            ) from None
        batch = [
            v if type(v) is bytes else _value_bytes(v, f"append_many (value {i})")
            for i, v in enumerate(it)
        ]
        key_list = _per_value(keys, "keys")
        header_list = _per_value(headers, "headers")
        self._log.append_many(
            topic,
            _writable(partition),
            first_offset,
            batch,
            keys=None
            if key_list is None
            else [_key_bytes(k, f"append_many (record {i})") for i, k in enumerate(key_list)],
            headers=None
            if header_list is None
            else [_headers(h, f"append_many (record {i})") for i, h in enumerate(header_list)],
            timestamps=_per_value(timestamps, "timestamps"),
        )

    def read(
        self,
        topic: str | bytes,
        partition: str,
        start: int,
        *,
        max_records: int = 1000,
        max_bytes: int = 1 * MiB,
    ) -> list[StoredRecord]:
        """Records from ``start`` on, at most ``max_records`` and ``max_bytes`` of
        records (each counts its value, key, headers and 9 bytes; one record is
        returned even if it alone is larger), with their metadata and times."""
        name = _topic_str(_topic_bytes(topic))
        rows = self._log.read(
            _topic_bytes(topic), _writable(partition), start, max_records, max_bytes
        )
        return [
            StoredRecord(name, partition, o, v, ts, key, headers, create)
            for o, ts, v, key, headers, create in rows
        ]

    def damaged(self) -> list[tuple[str, str, str]]:
        """Partitions set aside at open (``isolate_damaged``): (topic, partition, why).
        They refuse appends and reads; repair or move their directory and reopen."""
        return [(_topic_str(t), p, why) for t, p, why in self._log.damaged()]

    def partitions(self, topic: str | bytes | None = None) -> list[PartitionInfo]:
        """The listing of every partition, or of one topic's."""
        rows = self._log.partitions(None if topic is None else _topic_bytes(topic))
        return [
            PartitionInfo(_topic_str(t), p, first, nxt, durable, size, segments)
            for t, p, first, nxt, durable, size, segments in rows
        ]

    def topics(self) -> list[str]:
        """Every topic in the log."""
        return [_topic_str(t) for t in self._log.topics()]

    def offset_for_time(self, topic: str | bytes, partition: str, timestamp: int) -> int | None:
        """The first offset whose time is at or after ``timestamp`` (ms since the
        epoch): a record's time is its create time, else its append time. With create
        times out of order, the first whose newest time so far reaches it (Kafka's
        ``offsetsForTimes``). None if no record is that recent."""
        if not _utf8(partition):
            return None
        return self._log.offset_for_time(_topic_bytes(topic), partition, timestamp)

    def verify(self, topic: str | bytes, partition: str) -> int:
        """Reads every record of the partition, checking each one's CRC, offset and
        metadata, and returns how many it holds. Opening a log checks only each segment's tail;
        this finds damage in the middle of a segment (a :class:`CorruptionError`).
        ``dafka log inspect --verify`` runs it on every partition."""
        return self._log.verify(_topic_bytes(topic), _writable(partition))

    def next_offset(self, topic: str | bytes, partition: str) -> int | None:
        """The offset the next append must carry (``None`` for an unknown partition)."""
        if not _utf8(partition):
            return None
        return self._log.next_offset(_topic_bytes(topic), partition)

    def first_offset(self, topic: str | bytes, partition: str) -> int | None:
        """The first available offset (``None`` for an unknown partition)."""
        if not _utf8(partition):
            return None
        return self._log.first_offset(_topic_bytes(topic), partition)

    def durable_next(self, topic: str | bytes, partition: str) -> int | None:
        """Every offset below this has reached fdatasync."""
        if not _utf8(partition):
            return None
        return self._log.durable_next(_topic_bytes(topic), partition)

    def flush(self) -> None:
        """fdatasyncs everything appended so far (one sync per partition)."""
        self._log.flush()

    def tick(self) -> None:
        """Interval syncs that fell due, and retention when its check is due."""
        self._log.tick()

    def enforce_retention(self) -> int:
        """Deletes expired sealed segments now; returns how many."""
        return self._log.enforce_retention()

    @property
    def closed(self) -> bool:
        # A Log whose open failed has no native log (and is closed).
        log = getattr(self, "_log", None)
        return log is None or log.closed()

    def close(self) -> None:
        """Writes indexes out and syncs everything. Safe to call twice."""
        self._log.close()

    def __enter__(self) -> Log:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<dafka.Log {self.path!r} {state}>"


def _with_parameters(doc: str | None, native: str | None) -> str:
    """``doc`` followed by the "Parameters" section of ``native`` (``NativeLog``'s
    docstring, made from the options' declarations)."""
    head = "Parameters\n----------\n"
    at = (native or "").find(head)
    section = (native or "")[at:] if at >= 0 else ""
    return f"{inspect.cleandoc(doc or '')}\n\n{section}".rstrip() + "\n"


Log.__doc__ = _with_parameters(Log.__doc__, NativeLog.__doc__)
