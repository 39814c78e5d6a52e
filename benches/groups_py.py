"""Consumer groups (issue 38), through the Python API (after ``maturin develop --release``):

- rate: 12 producers (this process) publish N records of 100 B through a store while
  consumers in their own processes read them live: one consumer without a group,
  then a group of 3 members; each reader's rate is its records over the time from its
  first to its last record, the group's the total over the span of all three;
- kill to first record: 3 members (default timings: ``beacon_timeout`` 4 s) read 12
  producers that keep publishing; a member is SIGKILLed, and the time until another
  member returns a record of a partition the victim was reading is taken, then a new
  member joins; ``--kills`` times, median and max;
- commit cost: synchronous commits per second of one member against one store
  (each is made durable), and one member's read rate of N stored records with
  auto-commit every 0.1 s against auto-commit off, in the same run.

``python benches/groups_py.py [--records N] [--kills K]``. Results: benches/RESULTS.md,
"Consumer groups".
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import dafka

LOCAL = "tcp://127.0.0.1:0"
VALUE = b"x" * 100


def reader(tower: str, group: str, quiet: float, kill_mode: bool) -> int:
    """A reader process: prints ``READY``, ``M n`` as its group grows, then in
    kill mode ``A p,p,...`` (its assignment) every half second and ``F partition time``
    when it returns a record of a partition it had none of for a second, else
    ``DONE count first last`` once no record came for ``quiet`` seconds."""
    opts = {"group": group} if group != "-" else {}
    with dafka.Consumer(["bench"], towers=[tower], offset_reset="latest", **opts) as c:  # type: ignore[arg-type]
        print("READY", flush=True)
        members, seen, told = 0, {}, 0.0
        count, first, last = 0, 0.0, 0.0
        while True:
            got = c.poll_many(timeout=0.1)
            now = time.time()
            if group != "-" and c.group_members() != members:
                members = c.group_members()
                print(f"M {members}", flush=True)
            if got:
                if not count:
                    first = now
                count, last = count + len(got), now
                if kill_mode:
                    for r in got:
                        if now - seen.get(r.partition, 0.0) > 1.0:
                            print(f"F {r.partition} {now}", flush=True)
                        seen[r.partition] = now
            if kill_mode and now - told > 0.5:
                told = now
                print("A " + ",".join(p for _, p in c.assignment()), flush=True)
            elif count and not kill_mode and now - last > quiet:
                print(f"DONE {count} {first} {last}", flush=True)
                return 0


class Proc:
    def __init__(self, tower: str, group: str, kill_mode: bool = False) -> None:
        args = [sys.executable, __file__, "reader", tower, group, "1" if kill_mode else "0"]
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            if line.endswith("\n"):
                self.lines.append(line[:-1])

    def wait_for(self, prefix: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = [x for x in list(self.lines) if x.startswith(prefix)]
            if hit:
                return hit[-1]
            time.sleep(0.02)
        raise TimeoutError(f"no {prefix!r} from a reader: {self.lines[-3:]}")

    def members(self) -> int:
        m = [int(x[2:]) for x in list(self.lines) if x.startswith("M ")]
        return m[-1] if m else 0

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def wait(cond: object, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def publish(producers: list[dafka.Producer], n: int) -> None:
    per = n // len(producers)
    for i in range(0, per, 1000):
        for p in producers:
            p.send_many([VALUE] * min(1000, per - i))
    for p in producers:
        p.flush(120)


def rate(tower: str, producers: list[dafka.Producer], n: int, group: str, k: int) -> float:
    procs = [Proc(tower, group) for _ in range(k)]
    try:
        for pr in procs:
            pr.wait_for("READY")
        if group != "-":
            wait(lambda: all(pr.members() == k for pr in procs), "the group")
        time.sleep(2.0)  # discovery settled: every reader connected to the producers
        publish(producers, n)
        done = [pr.wait_for("DONE").split() for pr in procs]
    finally:
        for pr in procs:
            pr.stop()
    total = sum(int(d[1]) for d in done)
    span = max(float(d[3]) for d in done) - min(float(d[2]) for d in done)
    return total / span


def held(pr: Proc) -> set[str]:
    """The partitions a kill-mode reader said it holds last."""
    a = [x[2:] for x in list(pr.lines) if x.startswith("A ")]
    return set(a[-1].split(",")) - {""} if a else set()


def one_kill(tower: str, group: str, procs: list[Proc]) -> tuple[float, list[Proc]]:
    """Once the three hold every partition, SIGKILLs the one holding most; returns
    the seconds until a survivor returned a record of one of its partitions, and the
    members with a new one joining."""
    wait(lambda: all(pr.members() == 3 for pr in procs), "three members")
    wait(lambda: len(set().union(*(held(pr) for pr in procs))) == 12, "assigned")
    time.sleep(1.5)
    victim = max(procs, key=lambda pr: len(held(pr)))
    mine = held(victim)
    survivors = [pr for pr in procs if pr is not victim]
    marks = [len(pr.lines) for pr in survivors]
    killed = time.time()
    os.kill(victim.p.pid, signal.SIGKILL)
    victim.p.wait()

    def taken() -> list[float]:
        return [
            float(x.split()[2])
            for pr, mark in zip(survivors, marks, strict=True)
            for x in pr.lines[mark:]
            if x.startswith("F ") and x.split()[1] in mine
        ]

    wait(lambda: bool(taken()), "a survivor reading the victim's partitions")
    return min(taken()) - killed, [*survivors, Proc(tower, group, kill_mode=True)]


def kills(tower: str, producers: list[dafka.Producer], times: int) -> list[float]:
    group = f"kill-{uuid.uuid4().hex[:8]}"
    procs = [Proc(tower, group, kill_mode=True) for _ in range(3)]
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            for p in producers:
                p.send(VALUE)
            time.sleep(0.01)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    out = []
    try:
        for _ in range(times):
            took, procs = one_kill(tower, group, procs)
            out.append(took)
    finally:
        stop.set()
        feeder.join()
        for pr in procs:
            pr.stop()
    return out


def commit_cost(tower: str, producers: list[dafka.Producer], n: int) -> dict[str, float]:
    publish(producers, n)  # stored: each reader below replays them
    out: dict[str, float] = {}
    for name, auto in (("auto-commit 0.1 s", True), ("auto-commit off", False)):
        with dafka.Consumer(
            ["bench"],
            towers=[tower],
            group=f"c-{uuid.uuid4().hex[:8]}",
            enable_auto_commit=auto,
            auto_commit_interval=0.1,
        ) as c:
            count, first, last = 0, 0.0, 0.0
            while count < n:
                got = c.poll_many(timeout=30)
                if not got:
                    break
                now = time.monotonic()
                first = first or now
                count, last = count + len(got), now
            out[name] = count / (last - first)
            if not auto:
                started, commits = time.monotonic(), 0
                while time.monotonic() - started < 3.0:
                    c.commit(asynchronous=False)
                    commits += 1
                out["synchronous commits/s"] = commits / (time.monotonic() - started)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=240_000)
    ap.add_argument("--kills", type=int, default=10)
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory() as d,
        dafka.Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t,
        dafka.Store(d, towers=[t.endpoint]),
    ):
        producers = [dafka.Producer("bench", towers=[t.endpoint]) for _ in range(12)]
        for p in producers:
            p.wait_for_stores(1, timeout=60)
        one = rate(t.endpoint, producers, args.records, "-", 1)
        three = rate(t.endpoint, producers, args.records, f"g-{uuid.uuid4().hex[:8]}", 3)
        print(f"rate: one consumer {one:,.0f}/s, group of 3 {three:,.0f}/s ({three / one:.0%})")
        got = kills(t.endpoint, producers, args.kills)
        print(
            f"kill to first record ({len(got)} kills): median {statistics.median(got):.2f} s, "
            f"max {max(got):.2f} s"
        )
        for name, value in commit_cost(t.endpoint, producers, args.records).items():
            print(f"{name}: {value:,.0f}")
        for p in producers:
            p.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["reader"]:
        tower, group, mode = sys.argv[2:5]
        sys.exit(reader(tower, group, 3.0, mode == "1"))
    main()
