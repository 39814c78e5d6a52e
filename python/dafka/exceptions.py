"""Exceptions raised by dafka. Every one derives from :class:`DafkaError`."""

from __future__ import annotations

__all__ = ["DafkaError", "WireError"]


class DafkaError(Exception):
    """Root of every error dafka raises on purpose."""


class WireError(DafkaError, ValueError):
    """Frames that are not a well-formed Dafka message (or a message that cannot be
    encoded, such as a string field over 255 bytes). The message says what and where."""
