"""Type stubs for the Rust extension ``dafka._native`` (checked with mypy.stubtest)."""

import os
from typing import final

__all__ = ["NativeLog", "__version__", "wire_decode", "wire_encode"]

__version__: str

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
    def topics(self) -> list[bytes]: ...
    def offset_for_time(self, topic: bytes, partition: str, timestamp: int) -> int | None: ...
    def next_offset(self, topic: bytes, partition: str) -> int | None: ...
    def first_offset(self, topic: bytes, partition: str) -> int | None: ...
    def durable_next(self, topic: bytes, partition: str) -> int | None: ...
    def flush(self) -> None: ...
    def tick(self) -> None: ...
    def enforce_retention(self) -> int: ...
    def close(self) -> None: ...
    def closed(self) -> bool: ...
