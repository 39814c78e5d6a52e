"""Exceptions raised by dafka. Every one derives from :class:`DafkaError`."""

from __future__ import annotations

__all__ = [
    "BufferFullError",
    "ClosedError",
    "CommitTimeoutError",
    "ConfigError",
    "CorruptionError",
    "DafkaError",
    "DataLossError",
    "DeliveryError",
    "FetchTimeoutError",
    "LogError",
    "LogFileNotFoundError",
    "LogIOError",
    "LogPermissionError",
    "LogValueError",
    "NodeError",
    "OffsetError",
    "RecordTooLargeError",
    "SecurityError",
    "UnknownPartitionError",
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


class BufferFullError(DafkaError, BufferError):
    """A producer's unacknowledged buffer (``max_unacked_bytes``) stayed full for the
    whole send timeout: start a store, lower ``min_acks`` or raise the bound. Also a
    :class:`BufferError`, what confluent-kafka raises on a full queue."""


class DeliveryError(DafkaError):
    """Records a producer sent were not acknowledged by ``min_acks`` stores in time, so
    stores may not hold them: raised on leaving a ``with Producer(...)`` block once
    ``close_timeout`` passed, passed as ``err`` to ``on_delivery(err, record)`` for each
    record a producer closed without, and raised by a Spark task whose flush timed out
    (Spark retries it). Check that a store runs and reaches the producer's towers, or
    lower ``min_acks``."""


class RecordTooLargeError(DafkaError, ValueError):
    """A value over the producer's ``max_record_bytes`` (64 MiB by default, as stores'):
    stores drop larger records, so it is refused before it is sent. Split the value, or
    raise ``max_record_bytes`` on the producer and on every store."""


class LogError(DafkaError):
    """An error of the durable log (also raised as is for a closed log, a read-only
    log asked to write, or a partition left unusable by an earlier I/O error: reopen
    the log to recover it)."""


class LogIOError(LogError, OSError):
    """An operating-system I/O error (disk full, permission, ...); the message names
    the path and ``errno`` is the OS's. The log stays consistent and a reopen
    recovers. A missing file or directory is the subclass
    :class:`LogFileNotFoundError` (also a :class:`FileNotFoundError`), a refused
    permission :class:`LogPermissionError` (also a :class:`PermissionError`)."""


class LogFileNotFoundError(LogIOError, FileNotFoundError):
    """A :class:`LogIOError` for a file or directory that does not exist."""


class LogPermissionError(LogIOError, PermissionError):
    """A :class:`LogIOError` for an operation the OS did not permit (a directory the
    process may not write, a file it may not read)."""


class CorruptionError(LogError):
    """Damaged data that recovery will not silently drop; the message names the file,
    byte position and offset."""


class OffsetError(LogError, ValueError):
    """An append whose offset is not the partition's next one (a gap or a duplicate),
    or a read outside the offsets the partition holds."""


class UnknownPartitionError(LogError, LookupError):
    """A topic or partition the log does not hold."""


class LogValueError(LogError, ValueError):
    """An invalid option, topic name, partition name or record size."""


class SecurityError(DafkaError):
    """A certificate that cannot be used (not one, a bad key, no secret key where one
    is needed) or a build without CURVE; the message names the file and what is wrong."""


class DataLossError(DafkaError):
    """A bounded read (``fetch_range``, the Spark source with ``failOnDataLoss``)
    needed records that retention already removed from every store; the message
    names the range. Read from a later offset, or allow skipping them."""


class FetchTimeoutError(DafkaError, TimeoutError):
    """A bounded read or heads query got no (complete) answer in time: no store
    reachable through the towers holds the partition, or it holds fewer records."""


class CommitTimeoutError(DafkaError, TimeoutError):
    """A consumer group member's synchronous ``commit(asynchronous=False)`` or its
    ``committed()`` got no answer from the stores within ``commit_timeout``: start a
    store, check that the member reaches one, or raise ``commit_timeout``."""
