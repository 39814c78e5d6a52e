"""RECORD-BATCH, this project's wire extension (``Producer(record_batches=True)``):
stores and consumers take the batches live; a node that does not know them sees the
producer's HEADs and gets the records by FETCH, as DIRECT-RECORDs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq
from nodes_util import drain

import dafka
from dafka import Consumer, Producer, Store, Tower, wire

pytestmark = pytest.mark.timeout(120)

LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}


@pytest.fixture
def tower() -> Iterator[Tower]:
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t:
        yield t


@pytest.mark.parametrize("dialect", ["rfc", "zproto"])
def test_a_store_and_a_consumer_take_record_batches_live(
    tower: Tower, tmp_path: Path, dialect: str
) -> None:
    opts = {"towers": [tower.endpoint], "wire": dialect, **FAST}
    with (
        Store(tmp_path / "s", **opts) as store,  # type: ignore[arg-type]
        Consumer(["t"], offset_reset="earliest", **opts) as c,  # type: ignore[arg-type]
        Producer("t", record_batches=True, **opts) as p,  # type: ignore[arg-type]
    ):
        assert p.wait_for_stores(1, 10.0) == 1
        # The consumer is connected once a record sent alone reaches it live.
        deadline = time.monotonic() + 10
        probes = []
        while not probes:
            assert time.monotonic() < deadline, c.stats()
            p.send(b"probe")
            probes = c.poll_many(timeout=0.1)
        # Probes sent before it connected come by FETCH.
        probes += drain(c, p.next_offset - len(probes), within=10)
        assert len(probes) == p.next_offset
        # And the store holds them (ACKed): a probe it missed (sent before its
        # subscriptions were in) is fetched by now, not after the count below
        # is taken (what made this test see FETCHes on a busy machine).
        assert p.flush(30) == 0, store.stats()
        first = p.next_offset
        fetches = (c.stats()["fetches_sent"], store.stats()["store_fetches_sent"])
        values = [b"%06d" % i + b"x" * (i % 300) for i in range(100_000)]
        assert p.send_many(values) == first + len(values) - 1
        assert p.flush(30) == 0, "the store acknowledged every record"
        got = drain(c, len(values))
        assert [r.offset for r in got] == list(range(first, first + len(values)))
        assert [r.value for r in got] == values
        # Live, in batches: nothing was fetched, and the store holds all of it.
        assert (c.stats()["fetches_sent"], store.stats()["store_fetches_sent"]) == fetches
        (info,) = store.partitions("t")
        assert info.next_offset == first + len(values)
        assert store.stats()["appended"] == first + len(values)


def test_a_node_that_knows_no_batches_fetches_the_records_as_direct_records() -> None:
    """A subscriber of ``M`` + topic and ``H`` + topic alone (the C reference's
    consumer) receives no RECORD-BATCH, hears the producer's HEAD, and gets the
    records by FETCH as DIRECT-RECORDs, byte for byte."""
    me = b"C" * 32
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    xpub = ctx.socket(zmq.XPUB)
    try:
        with Producer("t", record_batches=True, head_interval=0.1, close_timeout=0) as p:
            for prefix in (b"Mt", b"Ht", b"D" + me):
                sub.setsockopt(zmq.SUBSCRIBE, prefix)
            sub.connect(p.endpoint)
            xpub.bind("tcp://127.0.0.1:*")
            p.connect(xpub.getsockopt(zmq.LAST_ENDPOINT).decode())
            # The producer's FETCH subscription reaching us: it is connected.
            want = b"\x01F" + p.address.encode()
            deadline = time.monotonic() + 10
            while xpub.poll(100) == 0 or xpub.recv() != want:
                assert time.monotonic() < deadline, "the producer never subscribed"
            # Our subscriptions reaching it: a HEAD arrives.
            assert p.send(b"first") == 0
            deadline = time.monotonic() + 10
            while not isinstance(wire.decode(sub.recv_multipart()), wire.Head):
                assert time.monotonic() < deadline
            values = [b"v%d" % i for i in range(1, 3000)]
            assert p.send_many(values) == 2999
            seen: list[wire.Message] = []
            head = 0
            deadline = time.monotonic() + 10
            while head < 2999:
                assert time.monotonic() < deadline, seen[-5:]
                if sub.poll(100):
                    m = wire.decode(sub.recv_multipart())
                    seen.append(m)
                    if isinstance(m, wire.Head):
                        head = m.sequence
            assert not any(isinstance(m, wire.Record | wire.RecordBatch) for m in seen)
            fetch = wire.Fetch(topic=p.address, address=me, subject=b"t", sequence=1, count=2999)
            xpub.send_multipart(wire.encode(fetch, "zproto"))
            got: dict[int, bytes] = {}
            deadline = time.monotonic() + 10
            while len(got) < 2999:
                assert time.monotonic() < deadline, len(got)
                if sub.poll(100):
                    m = wire.decode(sub.recv_multipart())
                    if isinstance(m, wire.DirectRecord):
                        got[m.sequence] = m.content
            assert [got[o] for o in range(1, 3000)] == values
    finally:
        sub.close(0)
        xpub.close(0)
        ctx.term()


def test_record_batches_is_a_bool_and_changes_nothing_else() -> None:
    with pytest.raises(TypeError):
        Producer("t", record_batches="yes")  # type: ignore[arg-type]
    with Producer("t", record_batches=True, min_acks=0) as p:
        assert p.send(b"x") == 0
        assert p.send_many([b"a", b"b"]) == 2
        assert p.flush(5) == 0
    assert isinstance(dafka.Producer.__doc__, str)
    assert "record_batches" in dafka.Producer.__doc__


class Requester:
    """A FETCHing node played by hand: a SUB for the answers (``D`` + its address,
    and ``Q`` + its address if it takes DIRECT-RECORD-BATCHes) and an XPUB the
    answering node connects to, for its FETCHes."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], me: bytes, batches: bool) -> None:
        self.me = me
        self.sub = ctx.socket(zmq.SUB)
        for prefix in [b"D" + me] + ([b"Q" + me] if batches else []):
            self.sub.setsockopt(zmq.SUBSCRIBE, prefix)
        self.xpub = ctx.socket(zmq.XPUB)
        self.xpub.bind("tcp://127.0.0.1:*")
        self.endpoint = self.xpub.getsockopt(zmq.LAST_ENDPOINT).decode()

    def join(self, node_endpoint: str, connect: Callable[[str], None], its_sub: bytes) -> None:
        """Connects both ways; returns once the node's ``its_sub`` subscription
        reached our XPUB, and ours (given a moment) its XPUB."""
        self.sub.connect(node_endpoint)
        connect(self.endpoint)
        deadline = time.monotonic() + 10
        while self.xpub.poll(100) == 0 or self.xpub.recv() != b"\x01" + its_sub:
            assert time.monotonic() < deadline, "the node never subscribed"
        time.sleep(0.3)  # our own subscriptions reach the node

    def fetch(self, partition: str, sequence: int, count: int) -> list[wire.Message]:
        """FETCHes ``count`` records; the answers as they came."""
        f = wire.Fetch(
            topic=partition, address=self.me, subject=b"t", sequence=sequence, count=count
        )
        self.xpub.send_multipart(wire.encode(f))
        got: list[wire.Message] = []
        n = 0
        deadline = time.monotonic() + 10
        while n < count:
            assert time.monotonic() < deadline, (n, count)
            if self.sub.poll(100):
                m = wire.decode(self.sub.recv_multipart())
                got.append(m)
                n += len(m.values) if isinstance(m, wire.RecordBatch) else 1
        return got

    def close(self) -> None:
        self.sub.close(0)
        self.xpub.close(0)


def records_of(answers: list[wire.Message]) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for m in answers:
        if isinstance(m, wire.DirectRecordBatch):
            out.extend(enumerate(m.values, start=m.sequence))
        else:
            assert isinstance(m, wire.DirectRecord), m
            out.append((m.sequence, m.content))
    return out


@pytest.mark.parametrize("answerer", ["producer", "store"])
def test_fetches_are_answered_in_batches_only_to_who_takes_them(
    tmp_path: Path, answerer: str
) -> None:
    """A requester that subscribes ``Q`` + its address (this project's consumers,
    stores and read clients) gets its FETCH answered in DIRECT-RECORD-BATCHes; one
    that does not (the C reference) in DIRECT-RECORDs; the same records either way."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    plain = Requester(ctx, b"A" * 32, batches=False)
    taker = Requester(ctx, b"B" * 32, batches=True)
    values = [b"%05d" % i + b"v" * (i % 200) for i in range(3000)]
    try:
        with Producer("t", min_acks=1 if answerer == "producer" else 0, close_timeout=0) as p:
            if answerer == "producer":
                assert p.send_many(values) == 2999  # held: no store ACKs them
                node: Producer | Store = p
                its_sub = b"F" + p.address.encode()
            else:
                store = Store(tmp_path / "s", peers=[p.endpoint])
                p.connect(store.endpoint)
                assert p.wait_for_stores(1, 10) == 1
                assert p.send_many(values) == 2999
                deadline = time.monotonic() + 10
                while [i.next_offset for i in store.partitions("t")] != [3000]:
                    assert time.monotonic() < deadline, store.stats()
                    time.sleep(0.05)
                node, its_sub = store, b"F"
            for r in (plain, taker):
                r.join(node.endpoint, node.connect, its_sub)
            as_records = plain.fetch(p.address, 0, 3000)
            as_batches = taker.fetch(p.address, 0, 3000)
            if answerer == "store":
                store.close()
        assert all(isinstance(m, wire.DirectRecord) for m in as_records)
        assert all(isinstance(m, wire.DirectRecordBatch) for m in as_batches), as_batches[:3]
        assert len(as_batches) < 20, f"{len(as_batches)} batches for 3,000 records"
        want = list(enumerate(values))
        assert records_of(as_records) == want
        assert records_of(as_batches) == want
    finally:
        plain.close()
        taker.close()
        ctx.term()
