"""Type stubs for the Rust extension ``dafka._native`` (checked with mypy.stubtest)."""

from collections.abc import Callable, Iterable, Sequence
from typing import Self, final

from dafka.record import Record

__all__ = ["Consumer", "Producer", "Tower", "__version__", "wire_decode", "wire_encode"]

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
    def __exit__(self, *_exc: object) -> bool: ...

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
    ) -> Producer: ...
    def send(self, value: bytes, *, timeout: float | None = None) -> int: ...
    def send_many(self, values: Iterable[bytes], *, timeout: float | None = None) -> int | None: ...
    def flush(self, timeout: float | None = None) -> int: ...
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
    def __exit__(self, *_exc: object) -> bool: ...

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
        bind: str = ...,
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        sndhwm: int = 1000000,
        rcvhwm: int = 1000000,
    ) -> Consumer: ...
    def poll(self, timeout: float | None = None) -> Record | None: ...
    def poll_many(self, max_records: int = 10000, timeout: float | None = None) -> list[Record]: ...
    def seek(self, partition: str, offset: int) -> None: ...
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
    def __exit__(self, *_exc: object) -> bool: ...
