"""dafka: Dafka (ZeroMQ RFC 46), decentralized streaming with no broker.

A Rust core (codec, segment store, node event loops) exposed to Python.
"""

from __future__ import annotations

from dafka import wire
from dafka._native import __version__
from dafka.exceptions import (
    CorruptionError,
    DafkaError,
    LogError,
    LogIOError,
    LogValueError,
    OffsetError,
    UnknownPartitionError,
    WireError,
)
from dafka.log import Log, PartitionInfo
from dafka.record import Record

__all__ = [
    "CorruptionError",
    "DafkaError",
    "Log",
    "LogError",
    "LogIOError",
    "LogValueError",
    "OffsetError",
    "PartitionInfo",
    "Record",
    "UnknownPartitionError",
    "WireError",
    "__version__",
    "wire",
]
