"""The record a consumer delivers."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

__all__ = ["Record"]


@dataclass(frozen=True)
class Record:
    """One record of a partition: ``topic``, ``partition`` (the producer's address),
    ``offset`` in the partition, ``value``, and an optional ``timestamp``."""

    topic: str
    partition: str
    offset: int
    value: bytes
    _: KW_ONLY
    timestamp: int | None = None
