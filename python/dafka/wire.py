"""The Dafka wire codec from Python: ``encode`` messages to frames, ``decode`` frames.

Both dialects of PROTOCOL.md are supported: ``"rfc"`` (the default, as RFC 46 is
written) and ``"zproto"`` (byte-compatible with the C reference). ``decode`` tells them
apart by frame count and reports which one it saw in ``message.dialect``.

>>> from dafka import wire
>>> frames = wire.encode(wire.Head(topic=b"t", address=b"P" * 32, subject=b"t", sequence=7))
>>> wire.decode(frames).sequence
7
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from dafka import _native

__all__ = [
    "Ack",
    "AddressedAck",
    "ConsumerHello",
    "DirectHead",
    "DirectMetaRecordBatch",
    "DirectRecord",
    "DirectRecordBatch",
    "Fetch",
    "GetHeads",
    "Head",
    "Message",
    "MetaRecordBatch",
    "Record",
    "RecordBatch",
    "StoreHello",
    "TimeOffset",
    "TimeQuery",
    "decode",
    "encode",
]

Dialect = Literal["rfc", "zproto"]
DIALECTS: tuple[Dialect, ...] = ("rfc", "zproto")


def _as_bytes(name: str, value: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{name} must be bytes or str, not {type(value).__name__}")


@dataclass(frozen=True, kw_only=True)
class Message:
    """Base of the nine Dafka messages and the two batches. ``topic`` is the key after
    the ID in frame 0."""

    kind: ClassVar[str] = ""
    topic: bytes
    dialect: Dialect = field(default="rfc", compare=False)

    def __post_init__(self) -> None:
        for name in ("topic", "address", "subject", "content"):
            value = getattr(self, name, None)
            if value is not None:
                object.__setattr__(self, name, _as_bytes(name, value))
        for name, bits in (("sequence", 64), ("count", 32)):
            value = getattr(self, name, None)
            if value is not None and (not isinstance(value, int) or not 0 <= value < 1 << bits):
                raise ValueError(
                    f"{name} must be an int from 0 to 2**{bits} - 1 (a uint{bits} on the "
                    f"wire), got {value!r}"
                )
        if self.dialect not in DIALECTS:
            raise ValueError(f"dialect must be 'rfc' or 'zproto', got {self.dialect!r}")


@dataclass(frozen=True, kw_only=True)
class Record(Message):
    """RECORD: producer → consumers and stores. ``topic`` is the topic name."""

    kind: ClassVar[str] = "RECORD"
    address: bytes
    subject: bytes
    sequence: int
    content: bytes = b""


@dataclass(frozen=True, kw_only=True)
class DirectRecord(Record):
    """DIRECT-RECORD: answer to a FETCH. ``topic`` is the requester's address."""

    kind: ClassVar[str] = "DIRECT-RECORD"


@dataclass(frozen=True, kw_only=True)
class Fetch(Message):
    """FETCH: ``topic`` is the partition, ``address`` the requester."""

    kind: ClassVar[str] = "FETCH"
    address: bytes
    subject: bytes
    sequence: int
    count: int


@dataclass(frozen=True, kw_only=True)
class Ack(Message):
    """ACK: ``topic`` is the partition; ``address`` (the store) travels only in ``rfc``."""

    kind: ClassVar[str] = "ACK"
    subject: bytes
    sequence: int
    address: bytes | None = None


@dataclass(frozen=True, kw_only=True)
class AddressedAck(Message):
    """ADDRESSED-ACK, this project's extension: an ACK that names its store
    (``address``) in both dialects. ``topic`` is the partition; a store sends it
    only to a producer whose ``A`` + partition subscription showed it takes them."""

    kind: ClassVar[str] = "ADDRESSED-ACK"
    address: bytes
    subject: bytes
    sequence: int


@dataclass(frozen=True, kw_only=True)
class Head(Message):
    """HEAD: ``topic`` is the topic name, ``sequence`` the partition's last offset."""

    kind: ClassVar[str] = "HEAD"
    address: bytes
    subject: bytes
    sequence: int


@dataclass(frozen=True, kw_only=True)
class DirectHead(Head):
    """DIRECT-HEAD: ``topic`` is the requester's address."""

    kind: ClassVar[str] = "DIRECT-HEAD"


@dataclass(frozen=True, kw_only=True)
class GetHeads(Message):
    """GET-HEADS: ``topic`` is the topic name, ``address`` the consumer."""

    kind: ClassVar[str] = "GET-HEADS"
    address: bytes


@dataclass(frozen=True, kw_only=True)
class ConsumerHello(Message):
    """CONSUMER-HELLO: ``topic`` is the store's address, ``subjects`` the topics."""

    kind: ClassVar[str] = "CONSUMER-HELLO"
    address: bytes
    subjects: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(
            self, "subjects", tuple(_as_bytes("subjects[]", s) for s in self.subjects)
        )


@dataclass(frozen=True, kw_only=True)
class StoreHello(Message):
    """STORE-HELLO: ``topic`` is the consumer's address, ``address`` the store's."""

    kind: ClassVar[str] = "STORE-HELLO"
    address: bytes


@dataclass(frozen=True, kw_only=True)
class RecordBatch(Message):
    """RECORD-BATCH, this project's extension of RFC 46: the RECORDs of one partition at
    offsets ``sequence`` to ``sequence + len(values) - 1``, in one message (at least one
    value). ``topic`` is the topic name. Its values frame holds each value as a
    ``longstr``; see the README, "Wire extensions"."""

    kind: ClassVar[str] = "RECORD-BATCH"
    address: bytes
    subject: bytes
    sequence: int
    values: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "values", tuple(_as_bytes("values[]", v) for v in self.values))


@dataclass(frozen=True, kw_only=True)
class DirectRecordBatch(RecordBatch):
    """DIRECT-RECORD-BATCH, this project's extension: FETCH answers (DIRECT-RECORDs) in
    one message. ``topic`` is the requester's address; sent only to a requester whose
    ``Q`` + address subscription showed it takes them."""

    kind: ClassVar[str] = "DIRECT-RECORD-BATCH"


@dataclass(frozen=True, kw_only=True)
class MetaRecordBatch(RecordBatch):
    """META-RECORD-BATCH, this project's extension: a RECORD-BATCH whose values are
    *bodies*, each record's key, headers and timestamp in front of its value (PROTOCOL.md,
    "Extensions"). ``topic`` is the topic name; sent only to nodes that subscribe ``X``."""

    kind: ClassVar[str] = "META-RECORD-BATCH"


@dataclass(frozen=True, kw_only=True)
class DirectMetaRecordBatch(RecordBatch):
    """DIRECT-META-RECORD-BATCH, this project's extension: FETCH answers as bodies, to a
    requester whose ``Y`` + address subscription showed it takes them."""

    kind: ClassVar[str] = "DIRECT-META-RECORD-BATCH"


@dataclass(frozen=True, kw_only=True)
class TimeQuery(Head):
    """TIME-QUERY, this project's extension: ``topic`` is the topic name, ``address`` the
    requester, ``sequence`` the time (ms since the epoch) whose offsets it asks the stores."""

    kind: ClassVar[str] = "TIME-QUERY"


@dataclass(frozen=True, kw_only=True)
class TimeOffset(Head):
    """TIME-OFFSET, a store's answer to a TIME-QUERY: ``topic`` is the requester's address,
    ``address`` the partition, ``sequence`` its first offset at or after the time asked (its
    next offset when no record is that late)."""

    kind: ClassVar[str] = "TIME-OFFSET"


_CLASSES: dict[str, type[Message]] = {
    c.kind: c
    for c in (
        Record,
        DirectRecord,
        Fetch,
        Ack,
        AddressedAck,
        Head,
        DirectHead,
        GetHeads,
        ConsumerHello,
        StoreHello,
        RecordBatch,
        DirectRecordBatch,
        MetaRecordBatch,
        DirectMetaRecordBatch,
        TimeQuery,
        TimeOffset,
    )
}


def encode(message: Message, dialect: Dialect = "rfc") -> list[bytes]:
    """Encodes ``message`` into its frames in ``dialect``.

    Raises :class:`dafka.WireError` if a field cannot travel (a ``string`` over 255
    bytes; a NUL in a ``zproto`` topic key) and ``ValueError`` for an unknown dialect.
    """
    if not isinstance(message, Message) or not message.kind:
        raise TypeError(f"encode takes a dafka.wire message, not {type(message).__name__}")
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be 'rfc' or 'zproto', got {dialect!r}")
    get = message.__dict__.get
    return _native.wire_encode(
        message.kind,
        dialect,
        message.topic,
        get("address"),
        get("subject", b""),
        get("sequence", 0),
        get("count", 0),
        get("content", b""),
        list(get("subjects", get("values", ()))),
    )


def decode(frames: Sequence[bytes] | Iterable[bytes]) -> Message:
    """Decodes one message from its frames (either dialect).

    Raises :class:`dafka.WireError` for anything malformed, naming what and where.
    """
    raw = [bytes(f) for f in frames]
    d = _native.wire_decode(raw)
    kind, address, subject, sequence = d.kind, d.address, d.subject, d.sequence
    count, content, subjects = d.count, d.content, d.subjects
    cls = _CLASSES[kind]
    # The native decoder validated every field: fill the frozen dataclass directly
    # instead of re-running the constructor's checks (decode is a hot path).
    message = object.__new__(cls)
    fields = message.__dict__
    fields["topic"] = d.topic
    fields["dialect"] = d.dialect
    if kind == "ACK" or address is not None:
        fields["address"] = address
    if subject is not None:
        fields["subject"] = subject
    if sequence is not None:
        fields["sequence"] = sequence
    if isinstance(message, RecordBatch):
        # Its count is how many values it holds.
        fields["values"] = subjects or ()
        return message
    if count is not None:
        fields["count"] = count
    if content is not None:
        fields["content"] = content
    if subjects is not None:
        fields["subjects"] = subjects
    return message
