"""Exceptions raised by dafka. Every one derives from :class:`DafkaError`."""

from __future__ import annotations

__all__ = [
    "BufferFullError",
    "ClosedError",
    "ConfigError",
    "DafkaError",
    "NodeError",
    "WireError",
]


class DafkaError(Exception):
    """Root of every error dafka raises on purpose."""


class WireError(DafkaError, ValueError):
    """Frames that are not a well-formed Dafka message (or a message that cannot be
    encoded, such as a string field over 255 bytes). The message says what and where."""


class ConfigError(DafkaError, ValueError):
    """An option is out of range or malformed (an endpoint, a timeout, a dialect...);
    the message says what to use instead."""


class NodeError(DafkaError):
    """A node could not start (e.g. its endpoint is in use) or its thread stopped with
    an error; the message carries the cause."""


class ClosedError(NodeError):
    """The node was closed; create a new one."""


class BufferFullError(DafkaError):
    """A producer's unacknowledged buffer (``max_unacked_bytes``) stayed full for the
    whole send timeout: start a store, lower ``min_acks`` or raise the bound."""
