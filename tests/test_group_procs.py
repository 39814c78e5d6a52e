"""Consumer groups across processes (issue 38's required tests): members are
``tests/group_procs.py`` processes, the tower, store and 12 producers run here.

- Three members, stable: every record reaches exactly one member; the union is what
  was sent. Then a fourth joins and one leaves cleanly: nothing lost, none twice.
- A member SIGKILLed mid-stream: its partitions continue at the others from its last
  commit; nothing is lost, and a record delivered twice is only one at or after the
  killed member's last confirmed commit of its partition.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from nodes_util import wait_for

from dafka import Producer, Store, Tower

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).parent
LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.2, "beacon_timeout": 2.0}


class Member:
    """A member process; its output lines are collected by a thread."""

    def __init__(self, tower: str, group: str = "g") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "group_procs.py"), tower, "orders", group, "0.3"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            # A SIGKILL may cut the last line: only whole lines count.
            if line.endswith("\n"):
                self.lines.append(line[:-1])

    def records(self) -> list[tuple[str, int, str]]:
        out = []
        for line in list(self.lines):
            if line.startswith("R "):
                _, p, o, v = line.split(" ", 3)
                out.append((p, int(o), v))
        return out

    def members(self) -> int:
        counts = [int(x[2:]) for x in list(self.lines) if x.startswith("M ")]
        return counts[-1] if counts else 0

    def commits(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for line in list(self.lines):
            if line.startswith("C "):
                _, p, o = line.split(" ")
                last[p] = max(last.get(p, 0), int(o))
        return last

    def close(self) -> None:
        """Closes stdin: the member commits and leaves cleanly."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.thread.join(timeout=10)
        assert self.lines[-1:] == ["CLOSED"], self.lines[-5:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def produce(producers: list[Producer], start: int, n: int) -> list[str]:
    sent = []
    for i, p in enumerate(producers):
        batch = [f"{i}-{j}" for j in range(start, start + n)]
        p.send_many([v.encode() for v in batch])
        sent.extend(batch)
    for p in producers:
        assert p.flush(60) == 0
    return sorted(sent)


def delivered(members: list[Member]) -> Counter[str]:
    return Counter(v for m in members for _, _, v in m.records())


def start(tower: str, members: list[Member], n: int) -> tuple[list[Producer], list[str]]:
    """Three member processes (into ``members``) counting each other, then 12
    producers sending ``n`` records each; returns the producers and what they sent,
    once every record reached a member."""
    members.extend(Member(tower) for _ in range(3))
    wait_for(lambda: all(m.members() == 3 for m in members), "three members", 60)
    producers = [Producer("orders", towers=[tower], **FAST) for _ in range(12)]
    for p in producers:
        p.wait_for_stores(1, timeout=30)
    sent = produce(producers, 0, n)
    wait_for(lambda: sum(delivered(members).values()) >= len(sent), "every record", 90)
    return producers, sent


@contextmanager
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[Member]]]:
    """A tower and a store; the member processes started into the list are killed
    on the way out if still running."""
    members: list[Member] = []
    with (
        Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t,
        Store(tmp_path / "s", towers=[t.endpoint], **FAST),
    ):
        try:
            yield t.endpoint, members
        finally:
            for m in members:
                m.stop()


def test_members_in_processes_share_join_and_leave(tmp_path: Path) -> None:
    with cluster(tmp_path) as (tower, members):
        producers, sent = start(tower, members, 50)
        got = delivered(members)
        assert sorted(got) == sent, "the union is what was sent"
        assert max(got.values()) == 1, "each record at exactly one member"
        # Each partition at one member only.
        owners: dict[str, set[int]] = {}
        for i, m in enumerate(members):
            for p, _, _ in m.records():
                owners.setdefault(p, set()).add(i)
        assert all(len(o) == 1 for o in owners.values()), owners

        # A fourth joins, then the first leaves cleanly: nothing lost, none twice.
        members.append(Member(tower))
        wait_for(lambda: all(m.members() == 4 for m in members), "four members", 60)
        more = produce(producers, 50, 30)
        members[0].close()
        wait_for(lambda: all(m.members() == 3 for m in members[1:]), "three again", 60)
        rest = produce(producers, 80, 30)
        whole = sorted(sent + more + rest)
        wait_for(lambda: sum(delivered(members).values()) >= len(whole), "all of it", 90)
        got = delivered(members)
        assert sorted(got) == whole, "nothing lost"
        assert max(got.values()) == 1, "no duplicates on a join and a clean leave"
        for m in members[1:]:
            m.close()
        for p in producers:
            p.close()


def test_a_killed_members_partitions_continue_from_its_last_commit(tmp_path: Path) -> None:
    with cluster(tmp_path) as (tower, members):
        producers, sent = start(tower, members, 40)
        # The victim holds partitions and committed some of them.
        victim = max(members, key=lambda m: len({p for p, _, _ in m.records()}))
        wait_for(lambda: bool(victim.commits()), "a commit by the victim")
        # Mid-stream: records on their way as it dies.
        more = [f"{i}-{j}" for i in range(12) for j in range(40, 80)]
        feeding = threading.Thread(
            target=lambda: [
                p.send_many([f"{i}-{j}".encode() for j in range(40, 80)])
                for i, p in enumerate(producers)
            ]
        )
        feeding.start()
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(timeout=30)
        victim.thread.join(timeout=10)
        feeding.join()
        for p in producers:
            assert p.flush(60) == 0
        whole = sorted(sent + more)
        survivors = [m for m in members if m is not victim]
        wait_for(
            lambda: set(delivered(members)) >= set(whole),
            "every record, the victim's partitions at the survivors",
            120,
        )
        got = delivered(members)
        assert sorted(got) == whole, "nothing lost"
        # Twice only: records of the victim's partitions at or after its last
        # confirmed commit of them (it may have committed a little further).
        last = victim.commits()
        theirs = {v: (p, o) for m in survivors for p, o, v in m.records()}
        mine = {p for p, _, _ in victim.records()}
        for v, n in got.items():
            if n > 1:
                assert n == 2, v
                p, o = theirs[v]
                assert p in mine and o >= last.get(p, 0), (v, p, o, last.get(p))
        for m in survivors:
            assert max(Counter(v for _, _, v in m.records()).values()) == 1
            m.close()
        for p in producers:
            p.close()
