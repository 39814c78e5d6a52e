"""Clusters with C-reference nodes, played by hand with pyzmq: a C store's zproto ACK
names no store, so ``min_acks`` counts all such stores as one (and says when that
cannot reach ``min_acks``); a C producer gets only the plain ACKs it can decode,
never this project's ADDRESSED-ACK."""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from nodes_util import wait_for

from dafka import Producer, Store, Tower, wire

pytestmark = pytest.mark.timeout(120)

LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}


class CStore:
    """A store as the C reference is on the wire, minus the disk: its SUB subscribes
    every RECORD (``M``) and connects to the producer; its XPUB, which the producer
    connects to, carries one zproto ACK (no address) per RECORD received."""

    def __init__(self, producer: Producer) -> None:
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.xpub = self.ctx.socket(zmq.XPUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"M")
        self.xpub.bind("tcp://127.0.0.1:*")
        self.sub.connect(producer.endpoint)
        producer.connect(self.xpub.getsockopt(zmq.LAST_ENDPOINT).decode())
        self.received = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if self.xpub.poll(0):
                self.xpub.recv()  # the producer's subscriptions: a C store ignores them
            if not self.sub.poll(20):
                continue
            m = wire.decode(self.sub.recv_multipart())
            if isinstance(m, wire.Record):
                self.received += 1
                ack = wire.Ack(topic=m.address, subject=m.subject, sequence=m.sequence)
                self.xpub.send_multipart(wire.encode(ack, "zproto"))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.sub.close(0)
        self.xpub.close(0)
        self.ctx.term()


@pytest.fixture
def tower() -> Iterator[Tower]:
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t:
        yield t


def reach(p: Producer, stores: list[CStore]) -> None:
    """Sends probes until every C store received one (they connect in the background)."""
    deadline = time.monotonic() + 20
    while not all(s.received for s in stores):
        assert time.monotonic() < deadline, "a C store never got a record"
        p.send(b"probe")
        time.sleep(0.05)


def test_c_reference_stores_count_as_one_and_min_acks_two_is_reported_unreachable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with Producer("t", min_acks=2, wire="zproto", close_timeout=0) as p:
        stores = [CStore(p), CStore(p)]
        try:
            # Two stores subscribed, but their ACKs cannot be told apart: one counts.
            wait_for(lambda: p.stores_seen == 1, "the C stores to connect")
            assert p.wait_for_stores(2, timeout=0.5) == 1
            reach(p, stores)
            p.send_many([b"v%d" % i for i in range(100)])
            wait_for(lambda: p.stats()["min_acks_unreachable"] > 0, "the shortfall counted")
            with caplog.at_level(logging.WARNING, logger="dafka"):
                assert p.flush(0.5) == p.next_offset, "nothing released"
                assert p.flush(0.2) == p.next_offset
            assert p.acked_offset is None
            said = [r for r in caplog.records if "min_acks" in r.getMessage()]
            assert len(said) == 1, "warned once"
            assert "count as one store" in said[0].getMessage()
        finally:
            for s in stores:
                s.close()


def test_min_acks_one_works_with_c_reference_stores() -> None:
    with Producer("t", min_acks=1, wire="zproto") as p:
        stores = [CStore(p), CStore(p)]
        try:
            reach(p, stores)
            p.send_many([b"v%d" % i for i in range(100)])
            assert p.flush(20) == 0
            assert p.acked_offset == p.next_offset - 1
            assert p.stats()["min_acks_unreachable"] == 0
        finally:
            for s in stores:
                s.close()


def test_a_c_reference_store_and_one_of_ours_reach_min_acks_two(tmp_path: Path) -> None:
    """Ours names itself (ADDRESSED-ACK), the C store counts as one more: two."""
    with (
        Producer("t", min_acks=2, wire="zproto") as p,
        Store(tmp_path, peers=[p.endpoint], wire="zproto") as ours,
    ):
        p.connect(ours.endpoint)
        c = CStore(p)
        try:
            wait_for(lambda: p.stores_seen == 2, "both stores to connect")
            reach(p, [c])
            p.send_many([b"v%d" % i for i in range(1000)])
            assert p.flush(30) == 0
            assert p.stats()["min_acks_unreachable"] == 0
        finally:
            c.close()


def golden_ack(partition: bytes, subject: bytes, sequence: int) -> bytes:
    """The C reference's ACK, as the golden vectors have it: one frame, ``K`` +
    partition + NUL + version 1 + subject (``string``) + sequence, no address."""
    return (
        b"K"
        + partition
        + b"\x00\x01"
        + bytes([len(subject)])
        + subject
        + struct.pack(">Q", sequence)
    )


@pytest.mark.parametrize("dialect", ["rfc", "zproto"])
def test_a_c_reference_producer_gets_only_acks_it_can_decode(tmp_path: Path, dialect: str) -> None:
    """A producer that subscribes ``K`` + its address (and ``F``, as the C one) but not
    ``A``: our store ACKs it with plain ACKs, in the golden layout when in zproto."""
    me = b"85E3C6EBDC7B4156AD9C43611EBC09CE"
    ctx = zmq.Context()
    xpub = ctx.socket(zmq.XPUB)
    sub = ctx.socket(zmq.SUB)
    try:
        xpub.bind("tcp://127.0.0.1:*")
        with Store(
            tmp_path, peers=[xpub.getsockopt(zmq.LAST_ENDPOINT).decode()], wire=dialect
        ) as s:
            for prefix in (b"K" + me, b"F" + me):
                sub.setsockopt(zmq.SUBSCRIBE, prefix)
            sub.connect(s.endpoint)
            # The store's subscription to every RECORD reaching us: it is connected.
            deadline = time.monotonic() + 10
            while xpub.poll(100) == 0 or xpub.recv() != b"\x01M":
                assert time.monotonic() < deadline, "the store never subscribed"
            acks: list[list[bytes]] = []
            n = 0
            deadline = time.monotonic() + 20
            while not acks or wire.decode(acks[-1]).sequence < n - 1:  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, acks[-3:]
                rec = wire.Record(topic=b"t", address=me, subject=b"t", sequence=n, content=b"x")
                xpub.send_multipart(wire.encode(rec, "zproto"))
                n += 1
                if sub.poll(50):
                    acks.append(sub.recv_multipart())
                while sub.poll(0):
                    acks.append(sub.recv_multipart())
            for frames in acks:
                m = wire.decode(frames)
                assert type(m) is wire.Ack, m
                if dialect == "zproto":
                    assert frames == [golden_ack(me, b"t", m.sequence)]
                else:
                    assert m.address == s.address.encode()
    finally:
        xpub.close(0)
        sub.close(0)
        ctx.term()
