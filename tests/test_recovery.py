"""Recovery on the live path: gaps repaired by FETCH under a flood with tiny HWMs,
late joiners served from the producer's buffer, and FETCH after a partial ACK (a fake
store played with raw pyzmq) answered byte-identically."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Iterator

import pytest
import zmq
from nodes_util import drain, wait_for

from dafka import Consumer, Producer, Record, Tower, wire

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def ctx() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    c: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield c
    c.destroy(linger=0)


@pytest.mark.parametrize(
    "bound",
    [{"max_buffered": 12}, {"max_buffered_bytes": 500 * 1024}],
    ids=["records", "bytes"],
)
def test_tiny_hwm_flood_is_repaired_by_fetch(bound: dict[str, int]) -> None:
    """The application reads nothing during a flood: the consumer stops reading at
    max_buffered records or max_buffered_bytes (40 KiB records: either is ~12), and
    fetches what the publisher dropped meanwhile once it reads again.

    Records of 40 KiB travel one per message whatever the producer's batching, so
    the flood overflows for certain: 3,000 messages against the producer's queue for
    the consumer (1,000 messages), the loopback TCP buffers (here up to 32 MiB
    received and 4 MiB sent, about 900 messages) and the consumer's bound and
    receive mark. With 1 KiB records (20,000 of them) a loaded machine made fuller
    batches of up to 63 records, everything fitted, and no record was dropped."""
    n = 3_000
    values = [b"%08d" % i + bytes(40 * 1024) for i in range(n)]
    with (
        # A small producer HWM too, so the flood overflows into drops rather than
        # queueing in the producer (1000, not less: a FETCH answer must fit).
        Producer("flood", sndhwm=1000, close_timeout=0) as p,
        Consumer(
            ["flood"],
            peers=[p.endpoint],
            offset_reset="earliest",
            rcvhwm=10,
            fetch_retry=0.05,
            **bound,  # type: ignore[arg-type]
        ) as c,
    ):
        p.connect(c.endpoint)
        p.send(values[0])
        first = c.poll(timeout=20)
        assert first is not None and first.offset == 0
        # Flood without reading: the consumer stops at its bound, the HWMs overflow
        # and the producer's PUB drops records.
        for i in range(1, n, 1000):
            p.send_many(values[i : i + 1000])
        wait_for(lambda: p.stats()["records_sent"] == n, "the producer to publish")
        wait_for(lambda: c.stats()["pauses"] > 0, "the consumer to stop reading")
        got = drain(c, n - 1)
        assert [r.offset for r in got] == list(range(1, n))
        assert all(r.value == values[r.offset] for r in got)
        stats = c.stats()
        assert stats["gaps"] > 0 and stats["fetches_sent"] > 0, stats
        assert p.stats()["direct_records_sent"] > 0


def test_late_consumers_get_the_unacked_history_or_only_new_records() -> None:
    fast = {"beacon_interval": 0.1, "beacon_timeout": 2.0}
    with Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as t:
        towers = [t.endpoint]
        with Producer("hist", towers=towers, head_interval=0.1, close_timeout=0, **fast) as p:  # type: ignore[arg-type]
            p.send_many([b"old %d" % i for i in range(1000)])
            with (
                Consumer(["hist"], towers=towers, offset_reset="earliest", **fast) as early,  # type: ignore[arg-type]
                Consumer(["hist"], towers=towers, offset_reset="latest", **fast) as latest,  # type: ignore[arg-type]
            ):
                got = drain(early, 1000)
                assert [r.value for r in got] == [b"old %d" % i for i in range(1000)]
                # `latest` starts after the HEAD it saw: only new records.
                wait_for(lambda: latest.stats()["peers"] > 0, "latest to discover the producer")
                wait_for(lambda: latest.poll(timeout=0.05) is None, "latest to be idle")
                deadline = time.monotonic() + 30
                new: list[Record] = []
                while not new and time.monotonic() < deadline:
                    p.send(b"new")
                    new = latest.poll_many(timeout=0.2)
                assert new and all(r.value == b"new" and r.offset >= 1000 for r in new)


@pytest.mark.parametrize("dialect", ["rfc", "zproto"])
def test_fetch_after_partial_ack_is_byte_identical(
    ctx: zmq.Context[zmq.Socket[bytes]], dialect: wire.Dialect
) -> None:
    store = uuid.uuid4().hex.upper().encode()
    xpub = ctx.socket(zmq.XPUB)
    xpub.bind("tcp://127.0.0.1:*")
    store_ep = xpub.getsockopt_string(zmq.LAST_ENDPOINT)
    rng = random.Random(7)
    values = [os.urandom(rng.randrange(1, 3000)) for _ in range(100)]
    with Producer("acks", peers=[store_ep], close_timeout=0) as p:
        part = p.address.encode()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"D" + store)
        sub.connect(p.endpoint)
        xpub.setsockopt(zmq.RCVTIMEO, 20_000)
        while xpub.recv() != b"\x01K" + part:  # the producer subscribed to our ACKs
            pass
        p.send_many(values)
        wait_for(lambda: p.stats()["records_sent"] == 100, "the producer to publish")
        ack = wire.Ack(topic=part, address=store, subject=b"acks", sequence=39)
        xpub.send_multipart(wire.encode(ack, dialect))
        wait_for(lambda: p.acked_offset == 39, "the ACK to release 0..39")
        # Each record held is its body: 9 bytes of metadata (flags, create time) + value.
        assert p.unacked_bytes == sum(9 + len(v) for v in values[40:])

        # FETCH 30..69: 30..39 are released, so exactly 40..69 come back, in order.
        fetch = wire.encode(
            wire.Fetch(topic=part, address=store, subject=b"acks", sequence=30, count=40), dialect
        )
        got: list[wire.Message] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            xpub.send_multipart(fetch)
            while sub.poll(500):
                got.append(wire.decode(sub.recv_multipart()))
        assert all(isinstance(m, wire.DirectRecord) for m in got)
        assert [(m.sequence, m.content, m.address) for m in got] == [  # type: ignore[attr-defined]
            (i, values[i], part) for i in range(40, 70)
        ]
        assert all(m.dialect == "rfc" for m in got)  # the producer sends in its own dialect
