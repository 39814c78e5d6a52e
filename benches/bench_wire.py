"""Python-side codec benchmark: ns per RECORD encode/decode through ``dafka.wire``
and through the raw native functions, against a pure-Python ``struct`` codec of the
same rfc layout measured in the same run (the baseline).

Run: .venv/bin/python benches/bench_wire.py [--n 200000]
"""

from __future__ import annotations

import argparse
import struct
import time
from collections.abc import Callable

from dafka import _native, wire

ADDR = b"85E3C6EBDC7B4156AD9C43611EBC09CE"


def _per_call_ns(fn: Callable[[], object], n: int) -> float:
    for _ in range(min(n, 10_000)):
        fn()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def _struct_encode(content: bytes) -> list[bytes]:
    body = b"\xaa\xa5M\x01" + bytes([len(ADDR)]) + ADDR + b"\x07weather" + struct.pack(">Q", 123456)
    return [b"Mweather", body, content]


def _struct_decode(frames: list[bytes]) -> tuple[bytes, bytes, int, bytes]:
    body = frames[1]
    if body[:2] != b"\xaa\xa5" or body[3] != 1:
        raise ValueError("bad")
    n = body[4]
    address = body[5 : 5 + n]
    p = 5 + n
    m = body[p]
    subject = body[p + 1 : p + 1 + m]
    (seq,) = struct.unpack_from(">Q", body, p + 1 + m)
    return address, subject, seq, frames[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=200_000)
    n = ap.parse_args().n
    print(f"{'case':<34}{'ns/msg':>10}{'vs struct':>12}")
    for size in (100, 1024):
        content = b"\x5a" * size
        msg = wire.Record(
            topic=b"weather", address=ADDR, subject=b"weather", sequence=123456, content=content
        )
        frames = wire.encode(msg)
        base_enc = _per_call_ns(lambda c=content: _struct_encode(c), n)
        base_dec = _per_call_ns(lambda f=frames: _struct_decode(f), n)
        rows = [
            (f"struct encode {size}B (baseline)", base_enc, base_enc),
            (f"struct decode {size}B (baseline)", base_dec, base_dec),
            (
                f"native wire_encode {size}B rfc",
                _per_call_ns(
                    lambda c=content: _native.wire_encode(
                        "RECORD", "rfc", b"weather", ADDR, b"weather", 123456, 0, c, []
                    ),
                    n,
                ),
                base_enc,
            ),
            (
                f"native wire_decode {size}B rfc",
                _per_call_ns(lambda f=frames: _native.wire_decode(f), n),
                base_dec,
            ),
        ]
        for dialect in wire.DIALECTS:
            fr = wire.encode(msg, dialect)
            rows.append(
                (
                    f"wire.encode {size}B {dialect}",
                    _per_call_ns(lambda d=dialect, m=msg: wire.encode(m, d), n // 4),
                    base_enc,
                )
            )
            rows.append(
                (
                    f"wire.decode {size}B {dialect}",
                    _per_call_ns(lambda f=fr: wire.decode(f), n // 4),
                    base_dec,
                )
            )
        for name, ns, base in rows:
            print(f"{name:<34}{ns:>10.0f}{ns / base:>11.2f}x")


if __name__ == "__main__":
    main()
