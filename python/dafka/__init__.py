"""dafka: Dafka (ZeroMQ RFC 46), decentralized streaming with no broker.

A Rust core (codec, segment store, node event loops) exposed to Python:
:class:`Tower`, :class:`Producer`, :class:`Consumer` and the :class:`Record` a
consumer delivers.
"""

from __future__ import annotations

from dafka import wire
from dafka._native import Consumer, Producer, Tower, __version__
from dafka.exceptions import (
    BufferFullError,
    ClosedError,
    ConfigError,
    DafkaError,
    NodeError,
    WireError,
)
from dafka.record import Record

__all__ = [
    "BufferFullError",
    "ClosedError",
    "ConfigError",
    "Consumer",
    "DafkaError",
    "NodeError",
    "Producer",
    "Record",
    "Tower",
    "WireError",
    "__version__",
    "wire",
]
