"""Records as Kafka users know them: keys, headers and timestamps travel with every
record (live, in FETCH answers, in a store's replay after the producer is gone and
after a store restart), in both dialects; a node that knows no metadata (the C
reference, played by hand with pyzmq) still gets each value byte for byte; bad keys
and headers are refused at ``send`` and malformed ones dropped and counted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from nodes_util import drain, wait_for

import dafka
from dafka import Consumer, Producer, Record, Store, Tower, wire

pytestmark = pytest.mark.timeout(180)

LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}
T0 = 1_700_000_000_000

HEADERS = [("", b""), ("trace", b"1"), ("trace", b"2"), ("naïve-名前", b"\xff\x00")]


def sent(i: int) -> tuple[bytes, bytes | None, list[tuple[str, bytes]], int]:
    """The ``i``-th record of a test: value, key (every third none), headers (every
    other none), create time."""
    key = None if i % 3 == 0 else b"k%d" % (i % 5) if i % 3 == 1 else b""
    headers = HEADERS if i % 2 == 0 else []
    return b"v%d" % i, key, headers, T0 + i


def check(records: list[Record], n: int, first: int = 0) -> None:
    assert [r.offset for r in records] == list(range(first, first + n))
    for r in records:
        value, key, headers, ts = sent(r.offset)
        assert (r.value, r.key, r.headers) == (value, key, headers), r
        assert (r.timestamp, r.timestamp_type) == (ts, dafka.TIMESTAMP_CREATE), r


def send_all(p: Producer, n: int) -> None:
    for i in range(n):
        value, key, headers, ts = sent(i)
        if i % 4 == 3:
            # The batch form, one record at a time.
            p.send_many([value], keys=[key], headers=[headers], timestamps=[ts])
        elif i % 4 == 2:
            # The key by position.
            p.send(value, key, headers=headers, timestamp=ts)
        else:
            p.send(value, key=key, headers=headers, timestamp=ts)


@pytest.fixture
def tower() -> Iterator[Tower]:
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t:
        yield t


@pytest.mark.parametrize("dialect", ["rfc", "zproto"])
def test_keys_headers_and_timestamps_live_via_fetch_via_replay_and_restart(
    tower: Tower, tmp_path: Path, dialect: str
) -> None:
    towers = [tower.endpoint]
    n = 60
    with Store(tmp_path / "s", towers=towers, wire=dialect, **FAST):
        with (
            Producer("meta", towers=towers, wire=dialect, **FAST) as p,
            Consumer(["meta"], towers=towers, wire=dialect, offset_reset="earliest", **FAST) as c,
        ):
            p.wait_for_stores(1, timeout=30)
            send_all(p, n)
            assert p.flush(30) == 0
            # Live (or fetched from the producer): every field as sent.
            check(drain(c, n), n)
            # A consumer that joins late reads them by FETCH (producer and store).
            with Consumer(
                ["meta"], towers=towers, wire=dialect, offset_reset="earliest", **FAST
            ) as late:
                check(drain(late, n), n)
                assert late.stats()["fetches_sent"] > 0
        # The producer is gone: the store replays them.
        with Consumer(["meta"], towers=towers, wire=dialect, offset_reset="earliest", **FAST) as c:
            check(drain(c, n), n)
    # After a restart, from the log.
    with (
        Store(tmp_path / "s", towers=towers, wire=dialect, **FAST),
        Consumer(["meta"], towers=towers, wire=dialect, offset_reset="earliest", **FAST) as c,
    ):
        check(drain(c, n), n)
    with dafka.Log(tmp_path / "s" / "log") as log:
        [info] = log.partitions(b"meta")
        stored = log.read(b"meta", info.partition, 0, max_records=n)
        assert [(r.key, r.headers) for r in stored] == [sent(i)[1:3] for i in range(n)]


def test_read_clients_return_records_with_their_metadata(tower: Tower, tmp_path: Path) -> None:
    towers = [tower.endpoint]
    with Store(tmp_path / "s", towers=towers, **FAST):
        with Producer("meta", towers=towers, **FAST) as p:
            p.wait_for_stores(1, timeout=30)
            send_all(p, 10)
            assert p.flush(30) == 0
            part = p.address
        records, lost = dafka.fetch_range(
            "meta", part, 0, 10, towers=towers, with_meta=True, **FAST
        )
        assert lost == []
        check(records, 10)
        plain, _ = dafka.fetch_range("meta", part, 2, 4, towers=towers, **FAST)
        assert plain == [(2, b"v2"), (3, b"v3")]
        [(got, _)] = dafka.fetch_ranges([("meta", part, 5, 7)], towers=towers, with_meta=True)
        check(got, 2, first=5)


class CNode:
    """A node as the C reference is on the wire: its SUB subscribes ``M`` + topic (and
    ``D`` + its address, for FETCH answers) on the producer, its XPUB (which the producer
    connects to) sends FETCHes in zproto."""

    address = b"C" * 32

    def __init__(self, p: Producer, topic: bytes) -> None:
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.xpub = self.ctx.socket(zmq.XPUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"M" + topic)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"D" + self.address)
        self.xpub.bind("tcp://127.0.0.1:*")
        self.sub.connect(p.endpoint)
        p.connect(self.xpub.getsockopt(zmq.LAST_ENDPOINT).decode())

    def messages(self, within: float) -> list[wire.Message]:
        out = []
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.sub.poll(50):
                out.append(wire.decode(self.sub.recv_multipart()))
        return out

    def close(self) -> None:
        self.sub.close(0)
        self.xpub.close(0)
        self.ctx.term()


def test_a_c_reference_node_gets_plain_values_live_and_fetched() -> None:
    # min_acks=1 and no store: the producer holds every record to answer FETCHes.
    with Producer("meta", wire="zproto", head_interval=0.1, close_timeout=0) as p:
        c = CNode(p, b"meta")
        try:
            # Connected once a probe arrives as a plain RECORD.
            deadline = time.monotonic() + 20
            while not any(isinstance(m, wire.Record) for m in c.messages(0.1)):
                assert time.monotonic() < deadline, "the C node never connected"
                p.send(b"probe")
            c.messages(0.3)
            first = p.next_offset
            p.send(b"plain \x00 value", key=b"key", headers=HEADERS, timestamp=T0)
            p.send_many([b"a", b""], keys=[b"x", None], headers=[HEADERS, None])
            got = [m for m in c.messages(1.0) if type(m) is wire.Record]
            assert [(m.sequence, m.content, m.dialect) for m in got] == [
                (first, b"plain \x00 value", "zproto"),
                (first + 1, b"a", "zproto"),
                (first + 2, b"", "zproto"),
            ]
            # A FETCH as the C reference sends it: DIRECT-RECORDs of the plain values.
            fetch = wire.Fetch(
                topic=p.address.encode(),
                address=c.address,
                subject=b"meta",
                sequence=first,
                count=3,
            )
            wait_for(lambda: bool(c.xpub.poll(0)) and c.xpub.recv() is not None, "subscribed")
            deadline = time.monotonic() + 20
            answers: list[wire.Message] = []
            while len(answers) < 3:
                assert time.monotonic() < deadline, answers
                c.xpub.send_multipart(wire.encode(fetch, "zproto"))
                answers = [m for m in c.messages(0.3) if isinstance(m, wire.DirectRecord)][:3]
            assert [(m.sequence, m.content) for m in answers] == [
                (first, b"plain \x00 value"),
                (first + 1, b"a"),
                (first + 2, b""),
            ]
        finally:
            c.close()


def test_bad_keys_and_headers_are_refused_at_send_and_count_against_the_size() -> None:
    with Producer("meta", min_acks=0, max_record_bytes=20) as p:
        with pytest.raises(TypeError, match="pairs"):
            p.send(b"v", headers={"a": b"b"})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="str"):
            p.send(b"v", headers=[(b"name", b"v")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="bytes, not str"):
            p.send(b"v", headers=[("name", "v")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="pair"):
            p.send(b"v", headers=[("only-a-name",)])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="key"):
            p.send(b"v", key="str key")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timestamp"):
            p.send(b"v", timestamp=-1)
        with pytest.raises(ValueError, match="2 values but 1 keys"):
            p.send_many([b"a", b"b"], keys=[b"k"])
        # The value alone may be max_record_bytes; a key or headers count too.
        p.send(b"x" * 20)
        with pytest.raises(dafka.RecordTooLargeError):
            p.send(b"x" * 10, key=b"k" * 11)
        with pytest.raises(dafka.RecordTooLargeError):
            p.send(b"x" * 10, headers=[("h", b"y" * 10)])
        with pytest.raises(dafka.RecordTooLargeError):
            p.send_many([b"x", b"x" * 10], keys=[None, b"k" * 11])
        assert p.next_offset == 1, "nothing refused was sent"


def test_a_malformed_meta_batch_is_dropped_and_counted() -> None:
    """A hostile peer's META-RECORD-BATCH whose body does not parse, and one whose
    headers lie about their count, never reach the application."""
    ctx = zmq.Context()
    xpub = ctx.socket(zmq.XPUB)
    xpub.bind("tcp://127.0.0.1:*")
    ep = xpub.getsockopt(zmq.LAST_ENDPOINT).decode()
    try:
        with Consumer(["meta"], peers=[ep], offset_reset="earliest") as c:
            # Until its META-RECORD-BATCH subscription is in: what it would drop
            # before is not what this test is about.
            subs: list[bytes] = []
            wait_for(
                lambda: (
                    (xpub.poll(100) and subs.append(xpub.recv()) is None) and b"\x01Xmeta" in subs
                ),
                "the consumer subscribed X + topic",
            )
            good = wire.encode(
                wire.MetaRecordBatch(
                    topic=b"meta",
                    address=b"P" * 32,
                    subject=b"meta",
                    sequence=0,
                    values=(b"\x00" + T0.to_bytes(8, "big") + b"ok",),
                )
            )
            bad_flags = wire.encode(
                wire.RecordBatch(
                    topic=b"meta",
                    address=b"P" * 32,
                    subject=b"meta",
                    sequence=0,
                    values=(b"\x80" + bytes(8) + b"x",),
                )
            )
            bad_flags[0] = b"X" + bad_flags[0][1:]
            bad_flags[1] = bad_flags[1][:2] + b"X" + bad_flags[1][3:]
            # Headers flag, a count of 1000 (varint) and 8 bytes: a lie.
            lying = bytearray(b"\x02" + bytes(8) + b"\xe8\x07" + b"\x00" * 8)
            bad_headers = list(bad_flags)
            bad_headers[2] = len(lying).to_bytes(4, "big") + bytes(lying)
            for frames in (bad_flags, bad_headers):
                xpub.send_multipart(frames)
            deadline = time.monotonic() + 20
            got: list[Record] = []
            while not got:
                assert time.monotonic() < deadline
                xpub.send_multipart(good)
                got = c.poll_many(timeout=0.2)
            assert [(r.value, r.timestamp) for r in got] == [(b"ok", T0)]
            assert c.stats()["malformed"] >= 2
    finally:
        xpub.close(0)
        ctx.term()


def test_record_objects_compare_hash_pickle_and_check_their_arguments() -> None:
    import pickle

    r = Record("t", "p", 1, b"v", timestamp=5, key=b"k", headers=[("a", b"1"), ("a", b"2")])
    assert (r.key, r.headers, r.timestamp_type) == (b"k", [("a", b"1"), ("a", b"2")], 0)
    assert pickle.loads(pickle.dumps(r)) == r
    assert hash(r) == hash(pickle.loads(pickle.dumps(r)))
    assert r != Record("t", "p", 1, b"v", timestamp=5, key=b"k")
    assert r != Record("t", "p", 1, b"v", timestamp=5, key=b"k", headers=[("a", b"1")])
    plain = Record("t", "p", 1, b"v")
    assert (plain.key, plain.headers, plain.timestamp, plain.timestamp_type) == (
        None,
        [],
        None,
        None,
    )
    appended = Record("t", "p", 1, b"v", timestamp=5, timestamp_type=1)
    assert appended.timestamp_type == dafka.TIMESTAMP_LOG_APPEND
    assert "key=b'k'" in repr(r)
    with pytest.raises(ValueError, match="timestamp_type"):
        Record("t", "p", 1, b"v", timestamp=5, timestamp_type=2)
    with pytest.raises(ValueError, match="without a timestamp"):
        Record("t", "p", 1, b"v", timestamp_type=0)


def test_a_store_drops_and_counts_a_record_whose_key_and_headers_pass_its_bound(
    tmp_path: Path,
) -> None:
    """The value alone fits the store's ``max_record_bytes``, the key and headers with
    it do not: dropped and counted, never stored (and a producer with the same bound
    would have refused it at ``send``)."""
    with (
        Store(tmp_path / "s", max_record_bytes=64) as s,
        Producer("meta", peers=[s.endpoint], min_acks=0) as p,
    ):
        s.connect(p.endpoint)
        wait_for(lambda: p.stores_seen >= 1, "the store connected")
        p.send(b"v" * 60, key=b"k" * 100)
        p.send(b"v" * 60, headers=[("h", b"x" * 100)])
        wait_for(lambda: s.stats()["dropped_oversize"] >= 2, "both dropped")
        assert all(info.next_offset == 0 for info in s.partitions("meta"))
