"""Memory of a long-lived consumer on a topic whose partitions come and go (one per
Spark task): waves of new partitions, one record each, with and without
`forget_after`.

    python benches/consumer_forget.py [--waves 3] [--partitions 100000]

Prints the consumer process's RSS after each wave (and the idle sweep and the
forgetting that follow it). Each setting runs in its own process (an allocator keeps
what it freed); baseline in the same process: its RSS before the consumer starts.
The records come from a raw pyzmq XPUB (no producer nodes), so what grows is the
consumer's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid

import zmq

import dafka
from dafka import wire


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def run(waves: int, n: int, forget_after: float | None) -> list[float]:
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)
    pub.setsockopt(zmq.SNDHWM, 0)
    pub.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    out = []
    with dafka.Consumer(
        ["t"], peers=[f"tcp://127.0.0.1:{port}"], idle_after=0.5, forget_after=forget_after
    ) as c:
        while not pub.recv().startswith(b"\x01M"):  # its RECORD subscription
            pass
        for _ in range(waves):
            parts = [uuid.uuid4().hex.upper().encode() for _ in range(n)]
            for p in parts:
                rec = wire.Record(topic=b"t", address=p, subject=b"t", sequence=0, content=b"x")
                pub.send_multipart(wire.encode(rec))
            got, deadline = 0, time.monotonic() + 120
            while got < n and time.monotonic() < deadline:
                got += len(c.poll_many(max_records=10_000, timeout=0.5))
            assert got == n, f"{got} of {n} records"
            # Idle sweep (0.5 s) and, with forget_after, the forgetting.
            wait = 1.5 + (forget_after or 0)
            deadline = time.monotonic() + 60
            while c.stats()["partitions_active"] and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(wait)
            c.positions()  # the handle drops forgotten positions here too
            out.append(rss_mib())
        st = c.stats()
        print(
            f"  forget_after={forget_after}: positions {len(c.positions())}, "
            f"forgotten {st['partitions_forgotten']}, active {st['partitions_active']}"
        )
    pub.close()
    ctx.term()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--waves", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--one", help="run one setting here: a forget_after in seconds, or none")
    args = ap.parse_args()
    if args.one is None:
        for fa in ("none", "3"):
            cmd = [sys.executable, __file__, "--one", fa, "--waves", str(args.waves)]
            subprocess.run([*cmd, "--partitions", str(args.partitions)], check=True)
        return
    fa = None if args.one == "none" else float(args.one)
    base = rss_mib()
    rss = run(args.waves, args.partitions, fa)
    grow = ", ".join(f"{r - base:+.1f}" for r in rss)
    print(
        f"forget_after={fa}: RSS over the process's baseline ({base:.1f} MiB) after each "
        f"wave of {args.partitions:,} partitions (MiB): {grow}"
    )


if __name__ == "__main__":
    main()
