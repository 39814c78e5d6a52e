"""Per-call rate of ``Producer.send`` (run after ``maturin develop --release``): 100 B
values, no key, no peers, ``min_acks=0`` (the producer-side cost of a call, nothing
listening), then the same with a 16 B key, as ``key=`` and by position. Each case is
the best of three passes of ``N`` calls (default 500,000) on one producer.

``python benches/send_call_py.py [N]``; runs against any build of dafka, so that
an A/B alternates interpreters of worktrees at different commits (a build without
``key=`` prints ``nan`` for the keyed case). Each rate is given twice: calls per
second of wall time, and calls per CPU second of the calling thread
(``time.thread_time``), which a busy machine disturbs far less (it leaves out the
time the thread waited for a core). Results: benches/RESULTS.md, "Live path".
"""

from __future__ import annotations

import sys
import time

import dafka


def rate(n: int, form: str) -> tuple[float, float]:
    """The best wall-clock and thread-CPU rates of three passes; ``form``:
    ``plain`` (``send(value)``), ``keyword`` (``send(value, key=key)``) or
    ``positional`` (``send(value, key)``)."""
    p = dafka.Producer("bench", min_acks=0, sndhwm=0, rcvhwm=0)
    value = b"\x5a" * 100
    key = b"k" * 16
    send = p.send
    best, best_cpu = 0.0, 0.0
    for _ in range(3):
        t, c = time.perf_counter(), time.thread_time()
        if form == "keyword":
            for _ in range(n):
                send(value, key=key)
        elif form == "positional":
            for _ in range(n):
                send(value, key)  # type: ignore[arg-type,unused-ignore]
        else:
            for _ in range(n):
                send(value)
        best = max(best, n / (time.perf_counter() - t))
        best_cpu = max(best_cpu, n / max(time.thread_time() - c, 1e-9))
    p.close()
    return best, best_cpu


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    rates = {}
    for form in ("plain", "keyword", "positional"):
        try:
            rates[form] = rate(n, form)
        except TypeError:  # a build whose send takes no key, or no key by position
            rates[form] = (float("nan"), float("nan"))
    where = dafka.__file__.rsplit("/python/dafka/", 1)[0]
    (u, uc), (k, kc), (pk, pc) = rates["plain"], rates["keyword"], rates["positional"]
    print(
        f"{where}: send {u / 1e6:.2f}M calls/s ({uc / 1e6:.2f}M per thread-CPU s), "
        f"keyed {k / 1e6:.2f}M ({kc / 1e6:.2f}M), key by position {pk / 1e6:.2f}M "
        f"({pc / 1e6:.2f}M)"
    )


if __name__ == "__main__":
    main()
