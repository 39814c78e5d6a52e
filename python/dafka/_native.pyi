"""Type stubs for the Rust extension ``dafka._native`` (checked with mypy.stubtest)."""

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Self, final

from typing_extensions import Buffer

from dafka.log import PartitionInfo

__all__ = [
    "Consumer",
    "HeadsWatch",
    "NativeLog",
    "Producer",
    "Record",
    "Store",
    "Tower",
    "__version__",
    "check_node",
    "fetch_range",
    "fetch_ranges",
    "heads",
    "offsets",
    "run_store_cli",
    "run_tower_cli",
    "wire_decode",
    "wire_encode",
]

__version__: str

def run_store_cli(argv: list[str]) -> int:
    """Runs ``dafka-store`` with ``argv`` until Ctrl-C; returns the exit code."""

def run_tower_cli(argv: list[str]) -> int:
    """Runs ``dafka-tower`` with ``argv`` until Ctrl-C; returns the exit code."""

def wire_encode(
    kind: str,
    dialect: str,
    topic: bytes,
    address: bytes | None,
    subject: bytes,
    sequence: int,
    count: int,
    content: bytes,
    subjects: list[bytes],
) -> list[bytes]: ...
def wire_decode(
    frames: list[bytes],
) -> tuple[
    str,
    str,
    bytes,
    bytes | None,
    bytes | None,
    int | None,
    int | None,
    bytes | None,
    list[bytes] | None,
]: ...
def heads(
    topic: str,
    *,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    timeout: float = 10.0,
    settle: float = 0.5,
    bind: str = ...,
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
) -> dict[str, int]: ...
def offsets(
    topic: str,
    *,
    partitions: list[str] | None = None,
    exclude: list[str] | None = None,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    timeout: float = 10.0,
    settle: float = 0.5,
    bind: str = ...,
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
) -> dict[str, tuple[int, int]]: ...
def fetch_range(
    topic: str,
    partition: str,
    start: int,
    end: int,
    *,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    timeout: float = 60.0,
    fail_on_loss: bool = True,
    bind: str = ...,
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
) -> tuple[list[tuple[int, bytes]], list[tuple[int, int]]]: ...
def check_node(
    *,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = ...,
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
) -> None: ...
def fetch_ranges(
    ranges: list[tuple[str, str, int, int]],
    *,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    timeout: float = 60.0,
    fail_on_loss: bool = True,
    bind: str = ...,
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
) -> list[tuple[list[tuple[int, bytes]], list[tuple[int, int]]]]: ...

@final
class Record:
    """One record of a partition.

    ``topic`` is the topic name (bytes that are not UTF-8 are kept as surrogate
    escapes, so ``topic.encode("utf-8", "surrogateescape")`` gives them back),
    ``partition`` the partition's name (the producer's address), ``offset`` its
    position in the partition, ``value`` its content, and ``timestamp`` the time
    a store appended it, in ms since the epoch, when known.
    """

    __match_args__ = ("topic", "partition", "offset", "value")
    def __new__(
        cls,
        topic: str,
        partition: str,
        offset: int,
        value: bytes,
        *,
        timestamp: int | None = None,
    ) -> Record: ...
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def offset(self) -> int: ...
    @property
    def value(self) -> bytes: ...
    @property
    def timestamp(self) -> int | None: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class HeadsWatch:
    """A read client kept across heads rounds of one topic."""

    def __new__(
        cls,
        topic: str,
        *,
        towers: list[str] | None = None,
        peers: list[str] | None = None,
        wire: str = "rfc",
        bind: str = ...,
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        forget_after: float | None = None,
        advertise_host: str | None = None,
    ) -> HeadsWatch: ...
    def offsets(
        self,
        *,
        partitions: list[str] | None = None,
        exclude: list[str] | None = None,
        timeout: float = 10.0,
        settle: float = 0.5,
    ) -> dict[str, tuple[int, int]]: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *_exc: object) -> Literal[False]: ...

@final
class Tower:
    """A tower: relays beacons so nodes find each other."""

    def __new__(cls, *, beacon_in: str = ..., beacon_out: str = ...) -> Tower: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def beacon_in(self) -> str: ...
    @property
    def beacon_out(self) -> str: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *_exc: object) -> Literal[False]: ...

@final
class Producer:
    """A producer: one partition (its address) of one topic."""

    def __new__(
        cls,
        topic: str,
        *,
        towers: list[str] | None = None,
        peers: list[str] | None = None,
        wire: str = "rfc",
        min_acks: int = 1,
        head_interval: float = 1.0,
        max_unacked_bytes: int = 268435456,
        send_timeout: float | None = None,
        on_delivery: Callable[[int], object] | None = None,
        bind: str = ...,
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        sndhwm: int = 1000000,
        rcvhwm: int = 1000000,
        max_record_bytes: int = 67108864,
        advertise_host: str | None = None,
        record_batches: bool = False,
    ) -> Producer: ...
    def send(self, value: Buffer, *, timeout: float | None = None) -> int: ...
    def send_many(
        self, values: Iterable[Buffer], *, timeout: float | None = None
    ) -> int | None: ...
    def send_buffers(
        self, data: Buffer, offsets: Buffer, *, large: bool = False, timeout: float | None = None
    ) -> tuple[int, int] | None: ...
    def flush(self, timeout: float | None = None) -> int: ...
    def wait_for_stores(self, n: int = 1, timeout: float = 10.0) -> int: ...
    @property
    def stores_seen(self) -> int: ...
    def poll(self, timeout: float = 0.0) -> int: ...
    @property
    def acked_offset(self) -> int | None: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def unacked_bytes(self) -> int: ...
    @property
    def topic(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    def connect(self, endpoint: str) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *_exc: object) -> Literal[False]: ...

@final
class Consumer:
    """A consumer of one or more topics."""

    def __new__(
        cls,
        topics: Sequence[str],
        *,
        towers: list[str] | None = None,
        peers: list[str] | None = None,
        wire: str = "rfc",
        offset_reset: str = "latest",
        fetch_retry: float = 0.5,
        max_fetch: int = 10000,
        max_pending: int = 100000,
        max_buffered: int = 100000,
        max_buffered_bytes: int = 67108864,
        give_up_fetches: int = 6,
        start_offsets: dict[str, int] | None = None,
        idle_after: float = 60.0,
        forget_after: float | None = ...,
        bind: str = ...,
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        sndhwm: int = 1000000,
        rcvhwm: int = 1000000,
        advertise_host: str | None = None,
    ) -> Consumer: ...
    def poll(self, timeout: float | None = None) -> Record | None: ...
    def poll_many(self, max_records: int = 10000, timeout: float | None = None) -> list[Record]: ...
    def _take(self, max_records: int) -> list[Record]: ...
    def _ready(self, timeout: float) -> bool: ...
    def seek(self, partition: str, offset: int) -> None: ...
    def positions(self) -> dict[str, int]: ...
    def connect(self, endpoint: str) -> None: ...
    @property
    def topics(self) -> list[str]: ...
    @property
    def address(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    def __iter__(self) -> Self: ...
    def __next__(self) -> Record: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *_exc: object) -> Literal[False]: ...

@final
class NativeLog:
    def __new__(
        cls,
        path: str | os.PathLike[str],
        segment_bytes: int,
        index_interval_bytes: int,
        retain_hours: int | None,
        retain_bytes: int | None,
        flush_messages: int,
        flush_interval_ms: int,
        fsync: str,
        recovery: str,
        read_only: bool,
        isolate_damaged: bool = False,
        forget_parked_hours: int | None = ...,
    ) -> NativeLog: ...
    def append(self, topic: bytes, partition: str, offset: int, value: bytes) -> None: ...
    def append_many(
        self, topic: bytes, partition: str, first_offset: int, values: list[bytes]
    ) -> None: ...
    def read(
        self, topic: bytes, partition: str, start: int, max_records: int, max_bytes: int
    ) -> list[tuple[int, int, bytes]]: ...
    def partitions(
        self, topic: bytes | None = None
    ) -> list[tuple[bytes, str, int, int, int, int, int]]: ...
    def damaged(self) -> list[tuple[bytes, str, str]]: ...
    def topics(self) -> list[bytes]: ...
    def offset_for_time(self, topic: bytes, partition: str, timestamp: int) -> int | None: ...
    def verify(self, topic: bytes, partition: str) -> int: ...
    def next_offset(self, topic: bytes, partition: str) -> int | None: ...
    def first_offset(self, topic: bytes, partition: str) -> int | None: ...
    def durable_next(self, topic: bytes, partition: str) -> int | None: ...
    def flush(self) -> None: ...
    def tick(self) -> None: ...
    def enforce_retention(self) -> int: ...
    def close(self) -> None: ...
    def closed(self) -> bool: ...

@final
class Store:
    """A store node over the durable log in ``path``."""

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        towers: list[str] | None = None,
        peers: list[str] | None = None,
        wire: str = "rfc",
        bind: str = ...,
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        sndhwm: int = 1000000,
        rcvhwm: int = 1000000,
        fsync: str = "interval",
        flush_interval_ms: int = 1,
        flush_messages: int = 100000,
        segment_bytes: int = 536870912,
        retain_hours: int | None = ...,
        retain_bytes: int | None = None,
        recovery: str = "tolerate_tail_corruption",
        max_record_bytes: int = 67108864,
        fetch_retry: float = 0.5,
        max_open_files: int | None = None,
        forget_parked_hours: int | None = ...,
        advertise_host: str | None = None,
    ) -> Store: ...
    @property
    def address(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def path(self) -> str: ...
    def connect(self, endpoint: str) -> None: ...
    def partitions(self, topic: str | bytes | None = None) -> list[PartitionInfo]: ...
    def stats(self) -> dict[str, int | str | None]: ...
    def check(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *_exc: object) -> Literal[False]: ...
