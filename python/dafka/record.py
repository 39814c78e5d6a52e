"""The record type shared by the consumer, the log and the tools."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

__all__ = ["Record"]


# No __slots__: the consumer fills instances' __dict__ directly (fast path).
@dataclass(frozen=True)
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
    _: KW_ONLY
    timestamp: int | None = None
