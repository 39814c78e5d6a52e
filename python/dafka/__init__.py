"""dafka: Dafka (ZeroMQ RFC 46), decentralized streaming with no broker.

A Rust core (codec, segment store, node event loops) exposed to Python.
"""

from __future__ import annotations

from dafka import wire
from dafka._native import __version__
from dafka.exceptions import DafkaError, WireError

__all__ = ["DafkaError", "WireError", "__version__", "wire"]
