"""A consumer group member in its own process, for the multi-process group tests:
``python tests/group_procs.py TOWER TOPIC GROUP COMMIT_EVERY``.

It prints ``READY address``; ``M n`` whenever the live members it counts change;
``R partition offset value`` for every record ``poll`` returns (flushed before it
commits them); every COMMIT_EVERY seconds it commits synchronously and prints
``C partition offset`` for each partition it reads, once the stores confirmed. When
stdin closes it closes cleanly (a final commit of what it printed, then leaving the
group) and prints ``CLOSED``.
"""

from __future__ import annotations

import sys
import threading
import time

import dafka


def member(tower: str, topic: str, group: str, commit_every: float) -> int:
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    with dafka.Consumer(
        [topic],
        towers=[tower],
        group=group,
        enable_auto_commit=False,
        offset_reset="earliest",
        beacon_interval=0.2,
        beacon_timeout=2.0,
    ) as c:
        print(f"READY {c.address}", flush=True)
        members = 0
        last = time.monotonic()
        while not stop.is_set():
            lines = [
                f"R {r.partition} {r.offset} {r.value.decode()}\n" for r in c.poll_many(timeout=0.1)
            ]
            if c.group_members() != members:
                members = c.group_members()
                lines.append(f"M {members}\n")
            sys.stdout.write("".join(lines))
            sys.stdout.flush()
            if time.monotonic() - last >= commit_every:
                c.commit(asynchronous=False)
                positions = c.positions()
                done = [f"C {p} {positions[p]}\n" for _, p in c.assignment() if p in positions]
                sys.stdout.write("".join(done))
                sys.stdout.flush()
                last = time.monotonic()
    print("CLOSED", flush=True)
    return 0


if __name__ == "__main__":
    tower, topic, group, every = sys.argv[1:5]
    sys.exit(member(tower, topic, group, float(every)))
