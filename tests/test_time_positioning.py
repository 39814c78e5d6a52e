"""Positioning by time over the network: stores answer "the first offset at or after
time T" per partition (TIME-QUERY). Records written across three distinct times in
two partitions; ``offsets_for_times``, ``Consumer(start_time=)``, ``seek_to_time``,
``dafka consume --from-time`` and ``dafka offsets --at`` each start at the right
offset in every partition."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from nodes_util import drain

import dafka
from dafka import Consumer, Producer, Store, Tower

pytestmark = pytest.mark.timeout(180)

LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}
# Three distinct times, a minute apart.
T1, T2, T3 = 1_800_000_000_000, 1_800_000_060_000, 1_800_000_120_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tower, dict[str, int]]]:
    """A tower, a store and two partitions: A has 3 records at T1, 4 at T2, 2 at T3;
    B has 5 at T1 and 1 at T3 (none at T2). Yields the tower and each partition's
    offset of its first record at or after T2."""
    path = tmp_path_factory.mktemp("store")
    with (
        Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t,
        Store(path, towers=[t.endpoint], **FAST),
    ):
        want = {}
        for name, times in (("A", [T1] * 3 + [T2] * 4 + [T3] * 2), ("B", [T1] * 5 + [T3])):
            with Producer("timed", towers=[t.endpoint], **FAST) as p:
                p.wait_for_stores(1, timeout=30)
                for i, ts in enumerate(times):
                    p.send(b"%s%d" % (name.encode(), i), timestamp=ts)
                assert p.flush(30) == 0
                want[p.address] = next(i for i, ts in enumerate(times) if ts >= T2)
        yield t, want


def test_offsets_for_times_in_every_partition(cluster: tuple[Tower, dict[str, int]]) -> None:
    t, want = cluster
    towers = [t.endpoint]
    assert dafka.offsets_for_times("timed", T2, towers=towers, **FAST) == want
    # Before everything: 0; after everything: the next offsets.
    firsts = dafka.offsets_for_times("timed", T1 - 1, towers=towers, **FAST)
    assert firsts == dict.fromkeys(want, 0)
    ends = dafka.offsets_for_times("timed", T3 + 1, towers=towers, **FAST)
    assert sorted(ends.values()) == [6, 9]
    # A datetime and an ISO string name the same time.
    at = datetime.fromtimestamp(T2 / 1000, tz=UTC)
    assert dafka.offsets_for_times("timed", at, towers=towers, **FAST) == want
    assert dafka.offsets_for_times("timed", at.isoformat(), towers=towers, **FAST) == want
    assert dafka.offsets_for_times("timed", str(T2), towers=towers, **FAST) == want
    assert dafka.offsets_for_times("other", T2, towers=towers, **FAST) == {}


def test_bad_times_say_what_to_give() -> None:
    with pytest.raises(TypeError, match="int"):
        dafka.offsets_for_times("timed", 1.5, peers=[])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ISO 8601"):
        dafka.offsets_for_times("timed", "yesterday", peers=[])
    with pytest.raises(ValueError, match="0 or more"):
        dafka.offsets_for_times("timed", -5, peers=[])
    with pytest.raises(dafka.FetchTimeoutError):
        dafka.offsets_for_times("timed", 5, peers=[], timeout=0.3)


def test_consumer_start_time_and_seek_to_time(cluster: tuple[Tower, dict[str, int]]) -> None:
    t, want = cluster
    towers = [t.endpoint]
    total = sum(9 if off == 3 else 6 for off in want.values())
    with Consumer(["timed"], towers=towers, start_time=T2, **FAST) as c:
        got = drain(c, total - sum(want.values()))
        firsts = {p: min(r.offset for r in got if r.partition == p) for p in want}
        assert firsts == want
        assert all(r.timestamp is not None and r.timestamp >= T2 for r in got)
        # Back to the start of T1 in one partition, then in all.
        a = next(p for p, off in want.items() if off == 3)
        assert c.seek_to_time(a, T1) == {a: 0}
        again = drain(c, 9)
        assert [r.offset for r in again if r.partition == a] == list(range(9))
        assert c.seek_to_time(None, T3) == {p: (7 if p == a else 5) for p in want}
        assert sorted((r.partition, r.offset) for r in drain(c, 3)) == sorted(
            [(a, 7), (a, 8), (next(p for p in want if p != a), 5)]
        )
        with pytest.raises(dafka.UnknownPartitionError):
            c.seek_to_time("F" * 32, T1)


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dafka.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_cli_from_time_and_offsets_at(cluster: tuple[Tower, dict[str, int]]) -> None:
    t, want = cluster
    node = ["--tower", t.endpoint]
    iso = datetime.fromtimestamp(T2 / 1000, tz=UTC).isoformat()
    r = run_cli("offsets", "timed", "--at", iso, *node)
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: int(line.split()[1]) for line in r.stdout.splitlines()[1:]}
    assert rows == want
    n = sum(9 - off if off == 3 else 6 - off for off in want.values())
    r = run_cli(
        "consume",
        "timed",
        "--from-time",
        str(T2),
        "--offsets",
        "--count",
        str(n),
        "--timeout",
        "20",
        *node,
    )
    assert r.returncode == 0, r.stderr
    got: dict[str, list[int]] = {}
    for line in r.stdout.splitlines():
        part, off, _ = line.split(" ", 2)
        got.setdefault(part, []).append(int(off))
    assert {p: min(offs) for p, offs in got.items()} == want
    bad = run_cli("consume", "timed", "--from-time", "noon", *node, timeout=30)
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr


def test_a_store_restarted_answers_from_its_log(tmp_path: Path) -> None:
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t:
        towers = [t.endpoint]
        with (
            Store(tmp_path / "s", towers=towers, **FAST),
            Producer("again", towers=towers, **FAST) as p,
        ):
            p.wait_for_stores(1, timeout=30)
            for i, ts in enumerate([T1, T1, T2, T3]):
                p.send(b"%d" % i, timestamp=ts)
            assert p.flush(30) == 0
            part = p.address
        with Store(tmp_path / "s", towers=towers, **FAST):
            assert dafka.offsets_for_times("again", T2, towers=towers, **FAST) == {part: 2}
            assert dafka.offsets_for_times("again", T3 + 1, towers=towers, **FAST) == {part: 4}


def test_topics_lists_what_the_stores_hold(cluster: tuple[Tower, dict[str, int]]) -> None:
    t, _ = cluster
    assert "timed" in dafka.topics(towers=[t.endpoint], **FAST)
    with pytest.raises(dafka.FetchTimeoutError):
        dafka.topics(peers=[], timeout=0.3)
