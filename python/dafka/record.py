"""The record type shared by the log, the consumer and the tools."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Record"]


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a partition.

    ``topic`` is the topic name (bytes that are not UTF-8 are kept as surrogate
    escapes, so ``topic.encode("utf-8", "surrogateescape")`` gives them back),
    ``partition`` the partition's name (the producer's address), ``offset`` its
    position in the partition, ``value`` its content, and ``timestamp`` the time
    a store appended it, in ms since the epoch, when known.
    """

    topic: str
    partition: str
    offset: int
    value: bytes
    timestamp: int | None = field(default=None, kw_only=True)
