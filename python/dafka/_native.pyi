"""Type stubs for the Rust extension ``dafka._native`` (checked with mypy.stubtest)."""

__all__ = ["__version__", "wire_decode", "wire_encode"]

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
