"""The Rust defaults (``dafka._native.DEFAULTS``), typed, for the Python layers that
pass a node's or the log's default on: the CLI, the Spark helpers and
:class:`dafka.Log`. Nothing here restates a value."""

from __future__ import annotations

from typing import TypeVar

from dafka._native import DEFAULTS

T = TypeVar("T")


def default(entry: str, name: str, kind: type[T]) -> T:
    """``DEFAULTS[entry][name]``, checked to be a ``kind``."""
    value = DEFAULTS[entry][name]
    if not isinstance(value, kind):
        raise TypeError(f"DEFAULTS[{entry!r}][{name!r}] is {value!r}, not a {kind.__name__}")
    return value


def optional(entry: str, name: str, kind: type[T]) -> T | None:
    """``DEFAULTS[entry][name]``, checked to be a ``kind`` or None."""
    value = DEFAULTS[entry][name]
    return None if value is None else default(entry, name, kind)


#: The discovery keywords' defaults every node shares.
WIRE = default("Producer", "wire", str)
BIND = default("Producer", "bind", str)
BEACON_INTERVAL = default("Producer", "beacon_interval", float)
BEACON_TIMEOUT = default("Producer", "beacon_timeout", float)
#: A producer's bound on the bytes of records not yet acknowledged.
MAX_UNACKED_BYTES = default("Producer", "max_unacked_bytes", int)
