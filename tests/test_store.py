"""Store nodes on 127.0.0.1 ephemeral ports: replay to late consumers, SIGKILL
crashes, two stores with ``min_acks=2``, a full disk, hostile input, and the
``zproto`` dialect on the wire."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from nodes_util import drain, wait_for

import dafka
from dafka import Consumer, Producer, Store, Tower, wire

pytestmark = pytest.mark.timeout(180)

HERE = Path(__file__).parent
LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}


def value(i: int) -> bytes:
    return (b"%08d" % i).ljust(100, b".")


def flush_all(p: Producer, within: float = 60.0) -> int:
    deadline = time.monotonic() + within
    left = p.flush(1.0)
    while left and time.monotonic() < deadline:
        left = p.flush(1.0)
    return left


class StoreProc:
    """A store in its own process; ``kill()`` is SIGKILL, ``stop()`` a clean close."""

    def __init__(self, path: Path, tower: str, wire: str = "rfc") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "store_procs.py"), "store", str(path), tower, wire],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        assert line and line[0] == "READY", line
        self.address, self.endpoint = line[1], line[2]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


@pytest.fixture
def tower() -> Iterator[Tower]:
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t:
        yield t


@pytest.fixture
def procs() -> Iterator[list[StoreProc]]:
    started: list[StoreProc] = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=30)


def read_log(path: Path, topic: str, partition: str) -> list[tuple[int, bytes]]:
    with dafka.Log(path / "log", read_only=True, retain_hours=None) as log:
        out: list[tuple[int, bytes]] = []
        start = 0
        while True:
            batch = log.read(topic.encode(), partition, start, max_records=10_000)
            if not batch:
                return out
            out.extend((r.offset, r.value) for r in batch)
            start = batch[-1].offset + 1


def test_store_api(tmp_path: Path) -> None:
    with Store(tmp_path, peers=None) as s:
        assert len(s.address) == 32
        assert s.endpoint.startswith("tcp://127.0.0.1:")
        assert s.partitions() == []
        assert s.stats()["error"] is None
        assert (tmp_path / "store.id").read_text().strip() == s.address
        with Producer("t", peers=[s.endpoint], **FAST) as p:  # type: ignore[arg-type]
            s.connect(p.endpoint)
            p.send_many([value(i) for i in range(100)])
            assert flush_all(p) == 0
        [info] = s.partitions("t")
        assert (info.topic, info.first_offset, info.next_offset) == ("t", 0, 100)
        assert info.durable_next == 100
        assert s.partitions("other") == []
        st = s.stats()
        assert st["syncs"] >= 1, st
        assert 0 < st["sync_micros_max"] <= st["sync_micros_total"], st
    with pytest.raises(ValueError, match="fsync"):
        Store(tmp_path / "x", fsync="sometimes")
    with pytest.raises(dafka.ConfigError):
        Store(tmp_path / "y", peers=["not an endpoint"])
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "store.id").write_text("garbage")
    with pytest.raises(dafka.ConfigError, match=r"store\.id"):
        Store(tmp_path / "z")


def test_late_consumer_gets_100k_from_the_store_alone(tmp_path: Path, tower: Tower) -> None:
    n = 100_000
    with Store(tmp_path, towers=[tower.endpoint], **FAST) as s:  # type: ignore[arg-type]
        out = subprocess.run(
            [sys.executable, str(HERE / "store_procs.py"), "producer", tower.endpoint, "t", str(n)],
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"ACKED {n}" in out.stdout
        [info] = s.partitions("t")
        assert info.next_offset == n
        # The producer is gone: everything comes from the store.
        with Consumer(["t"], towers=[tower.endpoint], offset_reset="earliest", **FAST) as c:  # type: ignore[arg-type]
            got = drain(c, n)
        assert len(got) == n, s.stats()
        assert [r.offset for r in got] == list(range(n))
        assert all(r.value == value(r.offset) for r in got)
        assert {r.partition for r in got} == {info.partition}


def test_a_consumer_resumes_from_saved_positions(tmp_path: Path, tower: Tower) -> None:
    """A consumer takes part of a topic and saves ``positions()``; a new one given
    them as ``start_offsets`` gets exactly the rest, from the store once the
    producer is gone (with ``latest``, which alone would skip all of it)."""
    towers = {"towers": [tower.endpoint], **FAST}
    with Store(tmp_path, **towers) as s:  # type: ignore[arg-type]
        with Producer("t", **towers) as p:  # type: ignore[arg-type]
            p.wait_for_stores(1)
            p.send_many([value(i) for i in range(1000)])
            assert flush_all(p) == 0
            part = p.address
            with Consumer(["t"], offset_reset="earliest", **towers) as c:  # type: ignore[arg-type]
                got: list[dafka.Record] = []
                deadline = time.monotonic() + 60
                while len(got) < 400 and time.monotonic() < deadline:
                    got.extend(c.poll_many(max_records=400 - len(got), timeout=0.2))
                assert [r.offset for r in got] == list(range(400))
                saved = c.positions()
            assert saved == {part: 400}
            p.send_many([value(i) for i in range(1000, 2000)])
            assert flush_all(p) == 0
        wait_for(lambda: s.partitions("t")[0].next_offset == 2000, "the store to hold 2000")
        with Consumer(["t"], start_offsets=saved, **towers) as c:  # type: ignore[arg-type]
            rest = drain(c, 1600)
            assert [r.offset for r in rest] == list(range(400, 2000))
            assert all(r.value == value(r.offset) for r in rest)
            assert c.positions() == {part: 2000}


def test_late_consumer_after_retention_starts_at_the_first_record_held(
    tmp_path: Path, tower: Tower
) -> None:
    n = 2000
    small = {"segment_bytes": 4096, **FAST}
    with (
        Store(tmp_path, towers=[tower.endpoint], **small),  # type: ignore[arg-type]
        Producer("t", towers=[tower.endpoint], min_acks=1, **FAST) as p,  # type: ignore[arg-type]
    ):
        assert p.wait_for_stores(1, 30) == 1
        p.send_many([value(i) for i in range(n)])
        assert flush_all(p) == 0
    # Retention deletes the oldest segments while the store is down.
    with dafka.Log(tmp_path / "log", segment_bytes=4096, retain_bytes=8192) as log:
        assert log.enforce_retention() > 0
        [info] = log.partitions("t")
    first = info.first_offset
    assert 0 < first < n
    with Store(tmp_path, towers=[tower.endpoint], **small) as s:  # type: ignore[arg-type]
        # `earliest` asks from 0 in windows of 100, all of the first one deleted;
        # the store answers from `first`. The consumer skips the deleted offsets
        # (counted) instead of waiting for them forever.
        assert first > 100
        with Consumer(
            ["t"],
            towers=[tower.endpoint],
            offset_reset="earliest",
            fetch_retry=0.1,
            max_fetch=100,
            **FAST,  # type: ignore[arg-type]
        ) as c:
            got = drain(c, n - first, within=60)
            stats = c.stats()
        assert [r.offset for r in got] == list(range(first, n)), (stats, s.stats())
        assert all(r.value == value(r.offset) for r in got)
        assert stats["records_lost"] == first, stats


def test_sigkilled_store_loses_nothing_acked(
    tmp_path: Path, tower: Tower, procs: list[StoreProc]
) -> None:
    store = StoreProc(tmp_path, tower.endpoint)
    procs.append(store)
    stop = threading.Event()
    sent = [0]
    with Producer("t", towers=[tower.endpoint], head_interval=0.2, **FAST) as p:  # type: ignore[arg-type]

        def stream() -> None:
            while not stop.is_set() and sent[0] < 200_000:
                p.send_many([value(i) for i in range(sent[0], sent[0] + 500)])
                sent[0] += 500
                time.sleep(0.002)

        t = threading.Thread(target=stream)
        t.start()
        try:
            wait_for(lambda: (p.acked_offset or 0) > 5_000, "the first ACKs")
            store.kill()
            acked_at_kill = p.acked_offset
            assert acked_at_kill is not None
            time.sleep(0.3)
            restarted = StoreProc(tmp_path, tower.endpoint)
            procs.append(restarted)
            assert restarted.address == store.address, "the store keeps its identity"
            time.sleep(0.5)
        finally:
            stop.set()
            t.join(timeout=30)
        total = sent[0]
        assert flush_all(p, 90) == 0, p.stats()
        assert p.acked_offset == total - 1
        partition = p.address
        with Consumer(["t"], towers=[tower.endpoint], offset_reset="earliest", **FAST) as c:  # type: ignore[arg-type]
            got = drain(c, total)
        assert [r.offset for r in got] == list(range(total)), "gap-free stream"
    restarted.stop()
    stored = read_log(tmp_path, "t", partition)
    assert [o for o, _ in stored] == list(range(total))
    assert all(v == value(o) for o, v in stored), "byte-identical"
    assert acked_at_kill < total


def test_store_with_one_open_file_keeps_interleaved_producers_whole(
    tmp_path: Path, tower: Tower
) -> None:
    """``max_open_files=1`` with two producers streaming at once: the log closes one
    partition's file whenever the other is written, so nearly every append reopens a
    file and every group commit syncs by path. Every record is ACKed and stored."""
    n = 20_000
    towers = [tower.endpoint]
    with (
        Store(tmp_path, bind=LOCAL, towers=towers, max_open_files=1, **FAST) as s,
        Producer("t", towers=towers, head_interval=0.2, **FAST) as a,  # type: ignore[arg-type]
        Producer("t", towers=towers, head_interval=0.2, **FAST) as b,  # type: ignore[arg-type]
    ):
        for i in range(0, n, 500):
            for p in (a, b):
                p.send_many([value(j) for j in range(i, i + 500)])
        assert flush_all(a, 90) == 0 and flush_all(b, 90) == 0, (a.stats(), b.stats())
        parts = [a.address, b.address]
        assert int(s.stats()["open_files"] or 0) <= 1, s.stats()
    for partition in parts:
        stored = read_log(tmp_path, "t", partition)
        assert [o for o, _ in stored] == list(range(n))
        assert all(v == value(o) for o, v in stored)


def test_producer_waits_for_stores_before_a_burst(tmp_path: Path, tower: Tower) -> None:
    towers = [tower.endpoint]
    with Producer("t", towers=towers, head_interval=0.2, **FAST) as p:  # type: ignore[arg-type]
        assert p.stores_seen == 0
        assert p.wait_for_stores(1, timeout=0.3) == 0
        with pytest.raises(ValueError, match="timeout"):
            p.wait_for_stores(1, timeout=-1)
        with Store(tmp_path, bind=LOCAL, towers=towers, **FAST) as s:
            assert p.wait_for_stores(1, timeout=30) == 1 and p.stores_seen == 1
            p.send_many([value(i) for i in range(5000)])
            assert flush_all(p) == 0
            # Connected before the burst: nothing had to be fetched back.
            assert s.stats()["store_fetches_sent"] == 0, s.stats()


@pytest.mark.parametrize("dialect", ["rfc", "zproto"])
def test_two_stores_min_acks_two(
    tmp_path: Path, tower: Tower, procs: list[StoreProc], dialect: str
) -> None:
    """In ``zproto`` a plain ACK names no store: ours send ADDRESSED-ACKs to our
    producers (PROTOCOL.md), so two of them count as two. Before, ``flush`` never
    returned 0 here in ``zproto``, silently."""
    a = StoreProc(tmp_path / "a", tower.endpoint, dialect)
    b = StoreProc(tmp_path / "b", tower.endpoint, dialect)
    procs.extend([a, b])
    opts = {"towers": [tower.endpoint], "wire": dialect, **FAST}
    with Producer("t", min_acks=2, head_interval=0.2, **opts) as p:  # type: ignore[arg-type]
        assert p.wait_for_stores(2, 30) == 2
        p.send_many([value(i) for i in range(5000)])
        assert flush_all(p) == 0
        assert p.acked_offset == 4999
        b.kill()
        p.send_many([value(i) for i in range(5000, 10_000)])
        time.sleep(1.5)
        assert p.acked_offset == 4999, "released with one store only"
        assert p.unacked_bytes > 0
        b2 = StoreProc(tmp_path / "b", tower.endpoint, dialect)
        procs.append(b2)
        assert flush_all(p, 90) == 0
        assert p.acked_offset == 9999
        assert p.stats()["min_acks_unreachable"] == 0
        partition = p.address
    b2.stop()
    a.stop()
    for d in ("a", "b"):
        stored = read_log(tmp_path / d, "t", partition)
        assert [o for o, _ in stored] == list(range(10_000)), d
        assert all(v == value(o) for o, v in stored)


def test_new_store_replicates_another_after_the_producer_exited(
    tmp_path: Path, tower: Tower, procs: list[StoreProc]
) -> None:
    """Stores find each other through the tower and compare heads: a store that
    joins after the producer is gone still gets the partition from the other."""
    a = StoreProc(tmp_path / "a", tower.endpoint)
    procs.append(a)
    with Producer("t", towers=[tower.endpoint], head_interval=0.2, **FAST) as p:  # type: ignore[arg-type]
        p.send_many([value(i) for i in range(5000)])
        assert flush_all(p) == 0
        partition = p.address
    with Store(tmp_path / "b", towers=[tower.endpoint], **FAST) as b:  # type: ignore[arg-type]
        deadline = time.monotonic() + 60
        while [i.next_offset for i in b.partitions("t")] != [5000]:
            assert time.monotonic() < deadline, (b.partitions(), b.stats())
            time.sleep(0.1)
    a.stop()
    stored = read_log(tmp_path / "b", "t", partition)
    assert stored == read_log(tmp_path / "a", "t", partition)
    assert [o for o, _ in stored] == list(range(5000))
    assert all(v == value(o) for o, v in stored)


def test_more_partitions_than_the_soft_open_files_limit(tmp_path: Path) -> None:
    """One descriptor per partition stays open: a store raises the soft limit to
    the hard one, so 600 partitions work in a process started with 256 (without it,
    the store stopped after ~240 partitions and could not even reopen its log)."""
    import resource

    n, soft = 600, 256
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < n + 512:
        pytest.skip("the hard open-files limit is too low to show anything")
    args = ["partitions", str(tmp_path), str(n), str(soft)]
    out = subprocess.run(
        [sys.executable, str(HERE / "store_procs.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    words = out.stdout.split()
    assert words[:2] == ["HELD", str(n)], out.stdout
    assert int(words[3]) > soft, out.stdout
    assert words[4:6] == ["ERROR", "None"], out.stdout


def test_more_partitions_than_the_hard_open_files_limit(tmp_path: Path) -> None:
    """Past its budget (half the open-files limit) the log closes the files of the
    partitions written least recently: 600 partitions work under a hard limit of
    256, and the store reopens them all after a restart (without it, the store
    failed once ~240 partitions were open)."""
    n, limit = 600, 256
    args = ["partitions", str(tmp_path), str(n), str(limit), str(limit)]
    for run in ("first", "after a restart"):
        out = subprocess.run(
            [sys.executable, str(HERE / "store_procs.py"), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, (run, out.stderr[-2000:])
        words = out.stdout.split()
        assert words[:6] == ["HELD", str(n), "LIMIT", str(limit), "ERROR", "None"], (
            run,
            out.stdout,
        )
        # The budget is half the limit.
        assert words[6] == "OPEN" and int(words[7]) <= limit // 2, (run, out.stdout)
    with dafka.Log(tmp_path / "log", read_only=True, retain_hours=None) as log:
        held = log.partitions("t")
    assert len(held) == n and all(p.next_offset == 1 for p in held)


def test_two_stores_in_one_process_share_the_open_files_budget(tmp_path: Path) -> None:
    """Every log of a process together keeps within half the open-files limit:
    two stores of 400 partitions each under a limit of 512 hold them all (each
    used to budget half the limit for itself, together all of it, and ran out of
    descriptors: appends failed, and replication between them went wrong)."""
    n, limit = 400, 512
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "store_procs.py"),
            "two_stores",
            str(tmp_path),
            str(n),
            str(limit),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    words = out.stdout.split()
    assert words[:6] == ["HELD", str(n), str(n), "ERROR", "None", "None"], out.stdout
    assert words[6] == "OPEN" and int(words[7]) <= limit // 2, out.stdout


def test_fetch_ranges_reads_several_partitions_through_one_client(
    tmp_path: Path, tower: Tower
) -> None:
    """``fetch_ranges`` returns each range's records in order, as ``fetch_range``
    would, with empty and partial ranges, from one client."""
    names = [c * 32 for c in "ABCD"]
    with dafka.Log(tmp_path / "log", retain_hours=None) as log:
        for k, n in enumerate(names):
            log.append_many("t", n, 0, [value(1000 * k + i) for i in range(50 + k)])
    towers = [tower.endpoint]
    with Store(tmp_path, bind=LOCAL, towers=towers, **FAST):
        ranges = [("t", names[0], 0, 50), ("t", names[1], 10, 20), ("t", names[2], 5, 5)]
        ranges.append(("t", names[3], 40, 53))
        got = dafka.fetch_ranges(ranges, towers=towers, timeout=30, **FAST)
        assert len(got) == 4
        for (_, _, start, end), (records, lost), k in zip(ranges, got, range(4), strict=True):
            assert records == [(i, value(1000 * k + i)) for i in range(start, end)]
            assert lost == []
        assert dafka.fetch_ranges([], towers=towers) == []
        with pytest.raises(ValueError, match="start"):
            dafka.fetch_ranges([("t", names[0], -1, 5)], towers=towers)


def full_rounds(w: dafka.HeadsWatch) -> int:
    """The rounds of ``w`` that waited ``settle`` (not ended on their count)."""
    st = w.stats()
    return st["rounds"] - st["quick_rounds"]


def test_heads_watch_rounds_after_the_first_end_after_the_answers(
    tmp_path: Path, tower: Tower
) -> None:
    """A :class:`dafka.HeadsWatch` round after the first asks the stores that
    answered before and ends once they answered again (``quick_rounds``), with
    the same result as a full round; heads rise as a producer writes; a peer that
    connects (the new producer) makes a full round; a closed watch raises.
    The first-offset probe ends at once when every partition it asks about
    answered offset 0 (``quick_probes``: nothing lower can come), and waits
    ``settle`` for a lower answer otherwise."""
    a, b = "A" * 32, "B" * 32
    with dafka.Log(tmp_path / "log", retain_hours=None) as log:
        log.append_many("t", a, 0, [value(i) for i in range(10)])
        # Begins at 5, as one whose first records retention deleted.
        log.append_many("t", b, 5, [value(i) for i in range(3)])
    towers = [tower.endpoint]
    with (
        Store(tmp_path, bind=LOCAL, towers=towers, **FAST),
        dafka.HeadsWatch("t", towers=towers, **FAST) as w,
    ):
        assert w.offsets(exclude=[a, b], timeout=30) == {a: (0, 10), b: (0, 8)}
        assert w.offsets(partitions=[a], timeout=30) == {a: (0, 10), b: (0, 8)}
        assert w.stats() == {"rounds": 2, "quick_rounds": 1, "probes": 1, "quick_probes": 1}
        assert w.offsets(timeout=30) == {a: (0, 10), b: (5, 8)}
        assert w.stats() == {"rounds": 3, "quick_rounds": 2, "probes": 2, "quick_probes": 1}
        with Producer("t", bind=LOCAL, towers=towers, **FAST) as p:
            p.send_many([value(i) for i in range(5)])
            assert flush_all(p) == 0
            wait_for(
                lambda: w.offsets(partitions=[]).get(p.address) == (0, 5),
                "the new partition's head",
            )

            wait_for(lambda: bool(w.offsets()) and full_rounds(w) >= 2, "a full round")
    with pytest.raises(dafka.ClosedError):
        w.offsets()
    with pytest.raises(ValueError, match="settle"):
        dafka.HeadsWatch("t", towers=towers).offsets(settle=-1)


def test_heads_watch_forgets_a_partition_no_node_announces_any_more(tower: Tower) -> None:
    """With ``forget_after``, a partition that no node announced for that long
    leaves a :class:`dafka.HeadsWatch`'s answers (the streaming source's offsets
    would otherwise keep every partition the topic ever had); without it, heads
    stay. Producers answer GET-HEADS too: two of them, no store (a store would keep
    and announce the records of the one that leaves)."""
    towers = [tower.endpoint]
    opts = {"bind": LOCAL, "towers": towers, "min_acks": 0, **FAST}
    with (
        Producer("t", **opts) as stays,  # type: ignore[arg-type]
        dafka.HeadsWatch("t", towers=towers, forget_after=1.0, **FAST) as w,
        dafka.HeadsWatch("t", towers=towers, **FAST) as keeps,
    ):
        stays.send_many([value(i) for i in range(3)])
        with Producer("t", **opts) as leaves:  # type: ignore[arg-type]
            leaves.send_many([value(i) for i in range(4)])
            both = {stays.address: (0, 3), leaves.address: (0, 4)}
            for x in (w, keeps):
                wait_for(
                    lambda x=x: x.offsets(partitions=[], timeout=30) == both, "both partitions"
                )
        # Gone from the answers about a second after its producer left.
        wait_for(
            lambda: w.offsets(partitions=[], timeout=30) == {stays.address: (0, 3)},
            "the partition of the producer that left forgotten",
        )
        assert keeps.offsets(partitions=[], timeout=30) == both
    with pytest.raises(ValueError, match="forget_after"):
        dafka.HeadsWatch("t", towers=towers, forget_after=-1.0)


def test_heads_watch_stays_known_to_the_stores_between_rounds(tmp_path: Path, tower: Tower) -> None:
    """A :class:`dafka.HeadsWatch` idle for longer than the stores' beacon timeout
    (a streaming query with a ``processingTime`` trigger of minutes) still plans
    its next round as a quick one: between rounds its own thread keeps beaconing.
    Before, the stores had dropped the idle client, and the next round waited for
    them to reconnect and for ``settle``, as the first round did."""
    a = "A" * 32
    with dafka.Log(tmp_path / "log", retain_hours=None) as log:
        log.append_many("t", a, 0, [value(i) for i in range(10)])
    towers = [tower.endpoint]
    timing = {"beacon_interval": 0.2, "beacon_timeout": 1.0}
    with (
        Store(tmp_path, bind=LOCAL, towers=towers, **timing),
        dafka.HeadsWatch("t", towers=towers, **timing) as w,
    ):
        assert w.offsets(partitions=[], timeout=30) == {a: (0, 10)}
        assert w.offsets(partitions=[], timeout=30) == {a: (0, 10)}
        assert full_rounds(w) == 1, w.stats()
        # Three times the store's beacon timeout with no round.
        time.sleep(3.0)
        assert w.offsets(partitions=[], timeout=30) == {a: (0, 10)}
        assert full_rounds(w) == 1, w.stats()
        assert w.stats()["quick_rounds"] == 2


def test_heads_watch_sees_a_store_that_connected_during_a_first_offset_probe(
    tmp_path: Path, tower: Tower
) -> None:
    """A store that connects while a round probes first offsets (a phase that
    reads the same socket) still makes the next heads round a full one: a quick
    round would expect the old count of answers and could end before the new
    store answered."""
    a = "A" * 32
    with dafka.Log(tmp_path / "a" / "log", retain_hours=None) as log:
        # Begins at 3, so the probe waits its `settle` for a lower answer.
        log.append_many("t", a, 3, [value(i) for i in range(10)])
    towers = [tower.endpoint]
    with (
        Store(tmp_path / "a", bind=LOCAL, towers=towers, **FAST),
        dafka.HeadsWatch("t", towers=towers, **FAST) as w,
    ):
        assert w.offsets(partitions=[], timeout=30) == {a: (0, 13)}
        assert w.offsets(partitions=[], timeout=30) == {a: (0, 13)}
        assert w.stats() == {"rounds": 2, "quick_rounds": 1, "probes": 0, "quick_probes": 0}

        before = full_rounds(w)
        got: dict[str, Any] = {}
        # A quick heads round, then a 2 s probe of the first offsets; the new
        # store starts (and connects) during the probe.
        probe = threading.Thread(target=lambda: got.update(o=w.offsets(timeout=30, settle=2.0)))
        probe.start()
        time.sleep(0.3)
        with Store(tmp_path / "b", bind=LOCAL, towers=towers, **FAST):
            # Waits for the round in progress with the GIL released (holding
            # it would deadlock: the round checks for signals under the GIL).
            assert w.stats()["rounds"] >= 2
            probe.join(30)
            assert got["o"] == {a: (3, 13)}
            assert w.offsets(partitions=[], timeout=30) == {a: (0, 13)}
            assert full_rounds(w) > before, w.stats()


def test_heads_settles_while_a_producer_keeps_writing(tmp_path: Path, tower: Tower) -> None:
    """A heads round ends ``settle`` after the last new peer or partition: a head
    that keeps rising (a live producer, re-asked every 200 ms) does not hold it
    open. Before, a round under steady writes ran to its timeout, so a streaming
    micro-batch over a live topic took ``headsTimeout`` (10 s) to plan."""
    towers = [tower.endpoint]
    with (
        Store(tmp_path, bind=LOCAL, towers=towers, **FAST),
        Producer("t", bind=LOCAL, towers=towers, **FAST) as p,
    ):
        stop = threading.Event()
        writes: list[int] = []

        def write() -> None:
            # Past the heads round's timeout (120 s): the writes stop before
            # the round ends only if the round ran to its timeout. (A bound of
            # 60 s made a slow round on a busy machine look like one that
            # waited for the writes to stop.)
            deadline = time.monotonic() + 180
            while not stop.is_set() and time.monotonic() < deadline:
                p.send_many([value(i) for i in range(10)])
                writes.append(10)
                time.sleep(0.02)

        th = threading.Thread(target=write)
        th.start()
        try:
            wait_for(lambda: len(writes) > 5, "the first writes")
            got = dafka.heads("t", towers=towers, timeout=120, settle=0.3, **FAST)
            still_writing = th.is_alive()
        finally:
            stop.set()
            th.join(30)
        assert got.get(p.address, 0) > 0, got
        assert still_writing, "heads returned only after the writes stopped (its timeout)"


def test_nodes_find_each_other_without_waiting_for_periodic_beacons(
    tmp_path: Path, tower: Tower
) -> None:
    """A store and a read client that beacon only every 30 s still find each
    other at once: each node's first beacon reaches the tower (it is sent when the
    tower's subscription arrives), and the tower tells a node that joins about the
    nodes it knows. Before, the client waited for the store's next beacon (and the
    store for the client's second one)."""
    with dafka.Log(tmp_path / "log", retain_hours=None) as log:
        log.append_many("t", "A" * 32, 0, [value(i) for i in range(10)])
    towers = [tower.endpoint]
    slow = {"beacon_interval": 30.0, "beacon_timeout": 90.0}
    with Store(tmp_path, bind=LOCAL, towers=towers, **slow):  # type: ignore[arg-type]
        got, lost = dafka.fetch_range("t", "A" * 32, 0, 10, towers=towers, timeout=10, **slow)
        assert [v for _, v in got] == [value(i) for i in range(10)] and not lost


def test_a_damaged_partition_does_not_keep_the_store_from_starting(
    tmp_path: Path, tower: Tower
) -> None:
    """Damage that recovery refuses (a bad record in a sealed segment, valid ones
    after it) sets that partition aside: the store starts and serves the others
    (it used to refuse to start at all), drops records for it without writing over
    the damage, and keeps ACKing other producers meanwhile."""
    names = [c * 32 for c in "ABC"]
    with dafka.Log(tmp_path / "log", segment_bytes=2000, retain_hours=None) as log:
        for n in names:
            log.append_many("t", n, 0, [value(i) for i in range(100)])
    bad = tmp_path / "log" / "t" / names[1]
    first = sorted(bad.glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[200:202] = b"\xff\xff"
    first.write_bytes(bytes(data))
    for idx in bad.glob("*.index"):
        idx.unlink()
    towers = [tower.endpoint]
    with Store(tmp_path, bind=LOCAL, towers=towers, **FAST) as s:
        wait_for(lambda: s.stats()["damaged_partitions"] == 1, "damaged_partitions in stats")
        assert sorted(p.partition for p in s.partitions("t")) == [names[0], names[2]]
        for n in (names[0], names[2]):
            got, lost = dafka.fetch_range("t", n, 0, 100, towers=towers, timeout=30, **FAST)
            assert [v for _, v in got] == [value(i) for i in range(100)] and not lost
        # Records for the damaged partition are dropped, not written over its files.
        pub = zmq.Context.instance().socket(zmq.XPUB)
        pub.setsockopt(zmq.LINGER, 0)
        pub.setsockopt(zmq.RCVTIMEO, 10_000)
        port = pub.bind_to_random_port("tcp://127.0.0.1")
        s.connect(f"tcp://127.0.0.1:{port}")
        while pub.recv() != b"\x01M":
            pass
        time.sleep(0.2)
        rec = wire.Record(
            topic=b"t", address=names[1].encode(), subject=b"t", sequence=0, content=b"x"
        )
        pub.send_multipart(wire.encode(rec))
        wait_for(lambda: s.stats()["dropped_set_aside"] == 1, "the record to be dropped")
        with Producer("t", towers=towers, head_interval=0.2, **FAST) as p:  # type: ignore[arg-type]
            for i in range(0, 2000, 500):
                p.send_many([value(j) for j in range(i, i + 500)])
                pub.send_multipart(wire.encode(rec))
            assert flush_all(p, 60) == 0, (p.stats(), s.stats())
        assert s.stats()["error"] is None and s.stats()["storage_errors"] == 0, s.stats()
        pub.close()
    assert first.read_bytes() == bytes(data)
    # Moved away while a store runs: forgotten within a second or so.
    with Store(tmp_path, bind=LOCAL, towers=towers, **FAST) as s:
        wait_for(lambda: s.stats()["damaged_partitions"] == 1, "damaged_partitions in stats")
        bad.rename(tmp_path / "set-aside")
        wait_for(lambda: s.stats()["damaged_partitions"] == 0, "the store to forget it")
        assert s.stats()["error"] is None


def _crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli), bit by bit: what ``.parked`` lines carry."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def test_a_parked_partition_keeps_its_offsets_through_the_python_api(
    tmp_path: Path, tower: Tower
) -> None:
    """A partition with no record left is parked: one line of the log's
    ``.parked`` file (the documented format, written here by hand), no directory.
    ``Log`` lists it at its next offset with no segment, a store counts it in
    ``stats()["parked_partitions"]``, and a producer of that partition writing
    on from its offset makes it a directory again, ACKed and readable."""
    a, b = "A" * 32, "B" * 32
    (tmp_path / "log").mkdir()
    body = f"t {a} 7"
    (tmp_path / "log" / ".parked").write_text(f"{body} {_crc32c(body.encode()):08x}\n")
    with dafka.Log(tmp_path / "log", retain_hours=None) as log:
        log.append_many("t", b, 0, [value(i) for i in range(3)])
        infos = {p.partition: p for p in log.partitions("t")}
        assert (infos[a].first_offset, infos[a].next_offset, infos[a].segments) == (7, 7, 0)
        assert infos[a].bytes == 0 and infos[b].segments == 1
        assert log.read("t", a, 7) == []
        with pytest.raises(dafka.LogError):
            log.append("t", a, 0, b"not where it stood")
        log.append_many("t", a, 7, [value(7), value(8)])
        assert [r.offset for r in log.read("t", a, 7)] == [7, 8]
        assert (tmp_path / "log" / "t" / a).is_dir()
    # Parked again by hand (the line wins only where no directory is left).
    shutil.rmtree(tmp_path / "log" / "t" / a)
    body = f"t {a} 9"
    with open(tmp_path / "log" / ".parked", "a") as f:
        f.write(f"{body} {_crc32c(body.encode()):08x}\n")
    towers = [tower.endpoint]
    with Store(tmp_path, bind=LOCAL, towers=towers, **FAST) as s:
        wait_for(lambda: s.stats()["parked_partitions"] == 1, "parked_partitions in stats")
        infos = {p.partition: p for p in s.partitions("t")}
        assert (infos[a].first_offset, infos[a].next_offset, infos[a].segments) == (9, 9, 0)


def test_a_parked_partition_is_forgotten_forget_parked_hours_after_it_was_parked(
    tmp_path: Path,
) -> None:
    """A ``.parked`` line carries when the partition was parked (ms since the
    epoch, before its CRC). ``Log`` and ``Store`` forget a partition parked
    ``forget_parked_hours`` ago (720 by default) when they open (and at the periodic
    check, tested in Rust with a clock moved by hand), and the file is rewritten
    without it; ``None`` keeps it."""
    a, b = "A" * 32, "B" * 32
    now_ms = int(time.time() * 1000)
    lines = [f"t {a} 7 {now_ms - 721 * 3_600_000}", f"t {b} 9 {now_ms - 3_600_000}"]
    text = "".join(f"{body} {_crc32c(body.encode()):08x}\n" for body in lines)
    (tmp_path / "log").mkdir()
    parked = tmp_path / "log" / ".parked"
    parked.write_text(text)
    with dafka.Log(tmp_path / "log", forget_parked_hours=None) as log:
        assert {p.partition: p.next_offset for p in log.partitions("t")} == {a: 7, b: 9}
    assert parked.read_text() == text, "kept, and nothing to rewrite"
    with dafka.Log(tmp_path / "log", read_only=True) as log:
        assert {p.partition: p.next_offset for p in log.partitions("t")} == {b: 9}
    assert parked.read_text() == text, "a read-only open rewrites nothing"
    with dafka.Log(tmp_path / "log", forget_parked_hours=1) as log:
        assert log.partitions("t") == []
    assert not parked.exists(), "nothing left to keep"
    parked.write_text(text)
    with Store(tmp_path, **FAST) as s:  # type: ignore[arg-type]
        wait_for(lambda: s.stats()["parked_partitions"] == 1, "parked_partitions in stats")
    assert parked.read_text().splitlines() == [text.splitlines()[1]]
    for bad in (-1, 0, 2**64, "720"):
        with pytest.raises((ValueError, TypeError), match="forget_parked_hours"):
            Store(tmp_path, forget_parked_hours=bad)  # type: ignore[arg-type]


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        timeout=30,
    )
    return r.returncode == 0


def test_disk_full_stops_acks_and_resumes(tmp_path: Path) -> None:
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "2m"):
        pytest.skip("cannot mount a small tmpfs here (the Rust failpoint test covers it)")
    try:
        s = Store(mnt, segment_bytes=1 << 20, **FAST)  # type: ignore[arg-type]
        with s, Producer("t", peers=[s.endpoint], head_interval=0.2, **FAST) as p:  # type: ignore[arg-type]
            s.connect(p.endpoint)
            big = [i.to_bytes(4, "big") * 256 for i in range(4000)]  # 4 MB in all
            for i in range(0, len(big), 100):
                p.send_many(big[i : i + 100])
            wait_for(lambda: s.stats()["error"] is not None, "the disk-full error")
            assert "No space left" in str(s.stats()["error"]) or "28" in str(s.stats()["error"])
            # Records written before the disk filled may still be synced and
            # ACKed; after that, ACKs stop until space returns.
            last = [p.acked_offset, time.monotonic()]

            def settled() -> bool:
                if p.acked_offset != last[0]:
                    last[:] = [p.acked_offset, time.monotonic()]
                return time.monotonic() - last[1] > 1.5

            wait_for(settled, "ACKs to stop while the disk is full")
            acked = p.acked_offset
            assert acked is None or acked < len(big) - 1, "no ACK while the disk is full"
            # Reported all the while the disk is full, though each recovery (every
            # second) frees the torn tail and an append fits there for a moment.
            wait_for(lambda: s.stats()["error"] is not None, "the error while the disk is full")
            samples = []
            until = time.monotonic() + 3.0
            while time.monotonic() < until:
                samples.append(s.stats()["error"] is None)
                time.sleep(0.002)
            assert not any(samples), f"cleared at {sum(samples)} of {len(samples)} samples"
            subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True, timeout=30)
            assert flush_all(p, 60) == 0, s.stats()
            wait_for(lambda: s.stats()["error"] is None, "the error to clear")
            partition = p.address
        stored = read_log(mnt, "t", partition)
        assert [o for o, _ in stored] == list(range(len(big)))
        bad = [(o, v[:8].hex(), len(v)) for o, v in stored if v != big[o]]
        assert not bad, (len(bad), bad[:5], bad[-3:])
    finally:
        subprocess.run(["umount", "-l", str(mnt)], timeout=30)


def test_hostile_input_is_dropped_and_counted(tmp_path: Path) -> None:
    ctx = zmq.Context.instance()
    bad = ctx.socket(zmq.XPUB)
    bad.setsockopt(zmq.LINGER, 0)
    port = bad.bind_to_random_port("tcp://127.0.0.1")
    try:
        with Store(tmp_path, max_record_bytes=1024, **FAST) as s:  # type: ignore[arg-type]
            s.connect(f"tcp://127.0.0.1:{port}")
            bad.setsockopt(zmq.RCVTIMEO, 5000)
            while bad.recv() != b"\x01M":  # the store subscribed to every RECORD
                pass
            time.sleep(0.2)
            P = "A" * 32
            frames: list[list[bytes]] = [
                [b"M"],
                [b"Mt", b"\xaa\xa0M\x01", b""],
                [b"Mt", b"\xaa\xa5M\x02", b""],
                [b"Mt", b"\xaa\xa5M\x01\x05", b""],
                [b"Ft", b"\xaa\xa5F\x01" + b"\xff" * 3],
                [b"X", b"Y", b"Z", b"W", b"V"],
                [b"G" + b"\x00" * 3],
            ]
            for f in frames:
                bad.send_multipart(f)
            # Well-formed but useless or hostile: unknown partition, absurd count,
            # an oversized record, a partition name that is a path.
            msgs: list[wire.Message] = [
                wire.Fetch(
                    topic=b"NOPE", address=b"C" * 32, subject=b"t", sequence=0, count=2**32 - 1
                ),
                wire.Record(topic=b"t", address=P, subject=b"t", sequence=0, content=b"x" * 5000),
                wire.Record(
                    topic=b"t", address=b"../../etc", subject=b"t", sequence=0, content=b"x"
                ),
                wire.Head(topic=b"t", address=b"../x", subject=b"t", sequence=2**64 - 1),
            ]
            for m in msgs:
                bad.send_multipart(wire.encode(m))

            def counted() -> bool:
                st = s.stats()
                return (
                    st["malformed"] >= len(frames) - 1
                    and st["fetches_unknown"] >= 1
                    and st["dropped_oversize"] >= 1
                    and st["dropped_invalid"] >= 2
                )

            wait_for(counted, "every hostile message to be counted")
            assert s.stats()["error"] is None
            assert not any(tmp_path.glob("log/*/..*")), "nothing escaped the log dir"
            # ... and the store still works.
            with Producer("t", peers=[s.endpoint], **FAST) as p:  # type: ignore[arg-type]
                s.connect(p.endpoint)
                p.send_many([value(i) for i in range(1000)])
                assert flush_all(p) == 0
            assert [i.next_offset for i in s.partitions("t")] == [1000]
    finally:
        bad.close()


def test_zproto_dialect_on_the_wire(tmp_path: Path) -> None:
    """The store's messages in ``zproto`` have the C reference's layout."""
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.XPUB)  # we play a producer and a consumer
    pub.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVTIMEO, 10_000)
    P, C = b"85E3C6EBDC7B4156AD9C43611EBC09CE", b"9E51FBAE55A649C1A50C0B360F3FF7AE"
    try:
        with Store(tmp_path, wire="zproto", **FAST) as s:  # type: ignore[arg-type]
            S = s.address.encode()
            s.connect(f"tcp://127.0.0.1:{port}")
            for prefix in (b"K" + P, b"L" + C, b"E" + C):
                sub.setsockopt(zmq.SUBSCRIBE, prefix)
            sub.connect(s.endpoint)
            pub.setsockopt(zmq.RCVTIMEO, 5000)
            while pub.recv() != b"\x01M":
                pass
            time.sleep(0.3)
            for i in range(5):
                rec = wire.Record(
                    topic=b"hello", address=P, subject=b"hello", sequence=i, content=b"v%d" % i
                )
                pub.send_multipart(wire.encode(rec, "zproto"))
            seen: list[list[bytes]] = []

            def first(pred: Callable[[list[bytes]], bool]) -> list[bytes]:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    for msg in seen:
                        if pred(msg):
                            return msg
                    seen.append(sub.recv_multipart())
                raise AssertionError(f"not received; saw {seen}")

            # ACK: one frame, K + partition + 00 01 + subject + sequence (no address).
            ack = first(lambda f: f[0][:1] == b"K" and f[0].endswith((4).to_bytes(8, "big")))
            assert ack == [b"K" + P + b"\x00\x01" + b"\x05hello" + (4).to_bytes(8, "big")]
            m = wire.decode(ack)
            assert isinstance(m, wire.Ack)
            assert m.dialect == "zproto" and m.address is None and m.sequence == 4
            # A consumer joins: our L+C subscription reached the store's XPUB, which
            # answered STORE-HELLO; CONSUMER-HELLO then gets a DIRECT-HEAD.
            hello = first(lambda f: f[0][:1] == b"L")
            assert hello == [b"L" + C + b"\x00\x01" + b"\x20" + S]
            pub.send_multipart(
                wire.encode(wire.ConsumerHello(topic=S, address=C, subjects=(b"hello",)), "zproto")
            )
            head = first(lambda f: f[0][:1] == b"E")
            assert head == [
                b"E" + C + b"\x00\x01" + b"\x20" + P + b"\x05hello" + (4).to_bytes(8, "big")
            ]
    finally:
        pub.close()
        sub.close()
