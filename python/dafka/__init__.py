"""dafka: Dafka (ZeroMQ RFC 46), decentralized streaming with no broker.

A Rust core (codec, segment store, node event loops) exposed to Python:
:class:`Tower`, :class:`Producer`, :class:`Consumer`, :class:`Store`, the
:class:`Record` a consumer delivers, and :class:`Log` for local tooling; the
bounded read clients :func:`heads`, :func:`offsets`, :func:`offsets_for_times`,
:func:`fetch_range`, :func:`fetch_ranges` and :class:`HeadsWatch`; consumer groups'
:func:`list_groups` and :func:`describe_group`; the cluster view's :func:`cluster`,
:func:`describe_topics` and :func:`describe_topic`; Prometheus metrics of the
process's nodes, :func:`serve_metrics`; the codec in :mod:`dafka.wire`;
the exceptions of :mod:`dafka.exceptions` (every one a :class:`DafkaError`).
Also :mod:`dafka.aio` (asyncio helpers) and :mod:`dafka.spark` (PySpark).
"""

from __future__ import annotations

from dafka import wire
from dafka._native import (
    TIMESTAMP_CREATE,
    TIMESTAMP_LOG_APPEND,
    Consumer,
    HeadsWatch,
    MetricsServer,
    Producer,
    Store,
    Tower,
    __version__,
    describe_group,
    fetch_range,
    fetch_ranges,
    heads,
    list_groups,
    offsets,
    offsets_for_times,
    serve_metrics,
    topics,
)
from dafka.exceptions import (
    BufferFullError,
    ClosedError,
    CommitTimeoutError,
    ConfigError,
    CorruptionError,
    DafkaError,
    DataLossError,
    DeliveryError,
    FetchTimeoutError,
    LogError,
    LogFileNotFoundError,
    LogIOError,
    LogPermissionError,
    LogValueError,
    NodeError,
    OffsetError,
    RecordTooLargeError,
    SecurityError,
    UnknownPartitionError,
    WireError,
)
from dafka.log import Log, PartitionInfo
from dafka.record import Record
from dafka.security import has_curve, keygen, read_certificate
from dafka.view import cluster, describe_topic, describe_topics

__all__ = [
    "TIMESTAMP_CREATE",
    "TIMESTAMP_LOG_APPEND",
    "BufferFullError",
    "ClosedError",
    "CommitTimeoutError",
    "ConfigError",
    "Consumer",
    "CorruptionError",
    "DafkaError",
    "DataLossError",
    "DeliveryError",
    "FetchTimeoutError",
    "HeadsWatch",
    "Log",
    "LogError",
    "LogFileNotFoundError",
    "LogIOError",
    "LogPermissionError",
    "LogValueError",
    "MetricsServer",
    "NodeError",
    "OffsetError",
    "PartitionInfo",
    "Producer",
    "Record",
    "RecordTooLargeError",
    "SecurityError",
    "Store",
    "Tower",
    "UnknownPartitionError",
    "WireError",
    "__version__",
    "cluster",
    "describe_group",
    "describe_topic",
    "describe_topics",
    "fetch_range",
    "fetch_ranges",
    "has_curve",
    "heads",
    "keygen",
    "list_groups",
    "offsets",
    "offsets_for_times",
    "read_certificate",
    "serve_metrics",
    "topics",
    "wire",
]
