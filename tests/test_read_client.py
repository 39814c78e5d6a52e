"""The bounded read client (``fetch_range``) against stores played by hand with
pyzmq: a real tower for discovery, fake stores whose answers and connection
times the test controls (all on 127.0.0.1)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zmq

import dafka
from dafka import Tower, wire

TOPIC = b"t"
PART = b"P" * 32


class FakeStores:
    """Stores played by hand: one XPUB (the read client lists it in ``peers``)
    to answer through, and SUB sockets that connect to the client's XPUB (found
    through the tower's beacons) and subscribe ``F`` (a store's catch-all FETCH
    subscription) when the test says so."""

    def __init__(self, ctx: zmq.Context[Any], tower: Tower) -> None:
        self.ctx = ctx
        self.xpub = ctx.socket(zmq.XPUB)
        self.xpub.bind("tcp://127.0.0.1:*")
        self.endpoint = self.xpub.getsockopt_string(zmq.LAST_ENDPOINT)
        out_port = tower.endpoint.rsplit(",", 1)[1]
        self.beacons = ctx.socket(zmq.SUB)
        self.beacons.setsockopt(zmq.SUBSCRIBE, b"B")
        self.beacons.connect(f"tcp://127.0.0.1:{out_port}")
        self.client: bytes | None = None
        self.client_ep: str | None = None
        self.stores: list[tuple[zmq.Socket[Any], Callable[[wire.Fetch], list[wire.Message]]]] = []
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def wait_client(self, within: float = 20.0) -> None:
        deadline = time.monotonic() + within
        while self.client is None or self.client_ep is None:
            assert time.monotonic() < deadline, "the read client never showed up"
            time.sleep(0.005)

    def connect(self, answer: Callable[[wire.Fetch], list[wire.Message]]) -> None:
        """A store connects to the client now and answers its FETCHes with ``answer``."""
        assert self.client_ep is not None
        s = self.ctx.socket(zmq.SUB)
        s.setsockopt(zmq.SUBSCRIBE, b"F")
        s.connect(self.client_ep)
        with self.lock:
            self.stores.append((s, answer))

    def run(self) -> None:
        while not self.stop:
            with self.lock:
                socks = [self.xpub, self.beacons] + [s for s, _ in self.stores]
                answers = dict(self.stores)
            poller = zmq.Poller()
            for s in socks:
                poller.register(s, zmq.POLLIN)
            for s, _ in poller.poll(10):
                frames = s.recv_multipart()
                if s is self.xpub:
                    # The client's subscriptions: D + its address.
                    if frames[0][:2] == b"\x01D" and len(frames[0]) == 34:
                        self.client = frames[0][2:]
                elif s is self.beacons:
                    if len(frames) == 3 and self.client is not None and frames[1] == self.client:
                        self.client_ep = frames[2].decode()
                else:
                    m = wire.decode(frames)
                    if isinstance(m, wire.Fetch):
                        for a in answers[s](m):
                            self.xpub.send_multipart(wire.encode(a))

    def close(self) -> None:
        self.stop = True
        self.thread.join(5)
        for s, _ in self.stores:
            s.close(0)
        self.xpub.close(0)
        self.beacons.close(0)


def records(client: bytes, seqs: range) -> list[wire.Message]:
    return [
        wire.DirectRecord(topic=client, address=PART, subject=TOPIC, sequence=s, content=b"v%d" % s)
        for s in seqs
    ]


@pytest.fixture
def fakes() -> Iterator[tuple[Tower, FakeStores]]:
    ctx: zmq.Context[Any] = zmq.Context()
    tower = Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0")
    f = FakeStores(ctx, tower)
    try:
        yield tower, f
    finally:
        f.close()
        tower.close()
        ctx.term()


def read_in_thread(tower: Tower, f: FakeStores, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def go() -> None:
        try:
            out["got"] = dafka.fetch_range(
                TOPIC.decode(),
                PART.decode(),
                start,
                end,
                towers=[tower.endpoint],
                peers=[f.endpoint],
                timeout=15,
                fail_on_loss=True,
                beacon_interval=0.2,
            )
        except Exception as e:
            out["error"] = e

    t = threading.Thread(target=go, daemon=True)
    t.start()
    out["thread"] = t
    return out


def test_fetch_range_reads_from_a_store_that_connects_after_others_answered_past_the_range(
    fakes: tuple[Tower, FakeStores],
) -> None:
    """Store B lost [0, 50) to retention and answers from 50; stores C and D
    connect and have not answered yet; store A, which holds [0, 10), connects
    180 ms after B (long before three retry rounds). The read must return A's
    records. It used to raise DataLossError: each peer that connected forced a
    retry round at once, and B's answer counted as "answered past" in every
    round after it, so three connects reached LOSS_ROUNDS before A was asked.
    Now a connecting peer is asked at once without ending a round, and an
    answer from past the range counts for its own round only."""
    tower, f = fakes
    r = read_in_thread(tower, f, 0, 10)
    f.wait_client()
    assert f.client is not None
    client = f.client
    f.connect(lambda m: records(client, range(50, 60)))  # B: from past the range
    time.sleep(0.06)
    f.connect(lambda m: [])  # C
    time.sleep(0.06)
    f.connect(lambda m: [])  # D
    time.sleep(0.06)
    f.connect(lambda m: records(client, range(m.sequence, m.sequence + m.count)))  # A
    r["thread"].join(20)
    assert "error" not in r, repr(r.get("error"))
    got, lost = r["got"]
    assert [(o, v) for o, v in got] == [(s, b"v%d" % s) for s in range(10)]
    assert lost == []
