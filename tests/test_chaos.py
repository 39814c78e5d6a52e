"""Stores SIGKILLed and restarted at random while producers stream and a consumer
that joined late reads: nothing a producer saw ACKed is lost, and consumers get
every partition whole, in order, with nothing skipped.

The schedule is random but seeded (``DAFKA_CHAOS_SEED`` picks another one; the
seed is in the assertion messages), so a failure can be replayed."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_store import FAST, StoreProc, flush_all, value

from dafka import Consumer, Producer, Tower

pytestmark = pytest.mark.timeout(240)

LOCAL = "tcp://127.0.0.1:0"
PRODUCERS = 3
PER_PRODUCER = 20_000


@pytest.fixture
def tower() -> Iterator[Tower]:
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t:
        yield t


class Reader:
    """A consumer on its own thread, keeping what it got per partition."""

    def __init__(self, tower: str) -> None:
        self.got: dict[str, list[tuple[int, bytes]]] = {}
        self.stats: dict[str, int] = {}
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.c = Consumer(["chaos"], towers=[tower], offset_reset="earliest", **FAST)  # type: ignore[arg-type]
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for r in self.c.poll_many(timeout=0.1):
                    self.got.setdefault(r.partition, []).append((r.offset, r.value))
            self.stats = self.c.stats()
        except BaseException as e:  # reported by close()
            self.error = e
        finally:
            self.c.close()

    def count(self) -> int:
        return sum(len(v) for v in list(self.got.values()))

    def close(self) -> None:
        self.stop.set()
        self.t.join(timeout=30)
        assert self.error is None, self.error


def test_stores_killed_at_random_lose_nothing_acked(
    tmp_path: Path, tower: Tower, request: pytest.FixtureRequest
) -> None:
    seed = int(os.environ.get("DAFKA_CHAOS_SEED", "46"))
    rnd = random.Random(seed)
    dirs = [tmp_path / "a", tmp_path / "b"]
    stores = [StoreProc(d, tower.endpoint) for d in dirs]
    started = list(stores)

    def cleanup() -> None:
        for s in started:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait(timeout=30)

    request.addfinalizer(cleanup)
    towers = [tower.endpoint]
    producers = [
        Producer("chaos", towers=towers, head_interval=0.2, **FAST)  # type: ignore[arg-type]
        for _ in range(PRODUCERS)
    ]
    reader: Reader | None = None
    errors: list[BaseException] = []

    def stream(p: Producer) -> None:
        try:
            for i in range(0, PER_PRODUCER, 250):
                p.send_many([value(j) for j in range(i, i + 250)])
                time.sleep(0.1)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=stream, args=(p,)) for p in producers]
    for t in threads:
        t.start()
    kills: list[str] = []
    try:
        # While they stream (about 4 s per 10k records each): kill a store, or
        # now and then both, and bring them back on the same directory.
        while any(t.is_alive() for t in threads):
            time.sleep(rnd.uniform(0.3, 1.0))
            # The second time both go, for longer than a consumer takes to give
            # a gap up (give_up_fetches x fetch_retry = 3 s), and a consumer
            # starts meanwhile: the history is only in the stores.
            late = reader is None and len(kills) == 1
            victims = [0, 1] if late or rnd.random() < 0.25 else [rnd.randrange(2)]
            for i in victims:
                stores[i].kill()
            kills.append("+".join("ab"[i] for i in victims))
            if late:
                reader = Reader(tower.endpoint)
            time.sleep(4.0 if late else rnd.uniform(0.1, 1.2))
            for i in victims:
                stores[i] = StoreProc(dirs[i], tower.endpoint)
                started.append(stores[i])
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        where = f"seed {seed}, kills {kills}"
        for p in producers:
            assert flush_all(p, 120) == 0, (where, p.stats())
            assert p.acked_offset == PER_PRODUCER - 1, where
        # The consumer: every partition whole and in order.
        if reader is None:
            reader = Reader(tower.endpoint)
        deadline = time.monotonic() + 120
        while reader.count() < PRODUCERS * PER_PRODUCER and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)  # anything beyond would be a duplicate
        reader.close()
        assert reader.stats.get("records_lost") == 0, (where, reader.stats)
        for p in producers:
            got = reader.got.get(p.address, [])
            assert [o for o, _ in got] == list(range(PER_PRODUCER)), (
                where,
                len(got),
                reader.stats,
            )
            assert all(v == value(o) for o, v in got), where
        partitions = {p.address for p in producers}
    finally:
        if reader is not None:
            reader.stop.set()
        for p in producers:
            p.close()
    # The producers are gone: a late consumer gets everything from the stores.
    with Consumer(["chaos"], towers=towers, offset_reset="earliest", **FAST) as c:  # type: ignore[arg-type]
        late: dict[str, list[int]] = {}
        deadline = time.monotonic() + 120
        while sum(map(len, late.values())) < PRODUCERS * PER_PRODUCER:
            assert time.monotonic() < deadline, (where, {k: len(v) for k, v in late.items()})
            for r in c.poll_many(timeout=0.2):
                late.setdefault(r.partition, []).append(r.offset)
        assert set(late) == partitions, where
        assert all(v == list(range(PER_PRODUCER)) for v in late.values()), where
        assert c.stats()["records_lost"] == 0, where
    for s in stores:
        s.stop()
