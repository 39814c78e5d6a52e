"""Producer behaviours found broken by a review, each fixed: empty records
released and flushed, and the offsets `send_buffers` returns. Nodes on
127.0.0.1, ephemeral ports, static peers (no tower)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from nodes_util import drain, wait_for

from dafka import Consumer, Producer, Store

pytestmark = pytest.mark.timeout(60)

LOCAL = "tcp://127.0.0.1:0"


def test_flush_returns_zero_once_a_store_acked_trailing_empty_records(tmp_path: Path) -> None:
    """An empty value is a record like any other. Once the store ACKed it,
    `acked_offset` must reach it and `flush()` return 0. What went wrong: the
    store ACKs the empty record in a later ACK than the one before it; that
    ACK frees 0 bytes, and the node thread only publishes a release when it
    freed bytes, so `acked_offset` stays behind and `flush` times out with 1
    record "outstanding" (forever, until a later non-empty record is ACKed).
    Now a release is published whenever the released offset moves."""
    with (
        Producer("t", bind=LOCAL, min_acks=1) as p,
        Store(tmp_path, bind=LOCAL, peers=[p.endpoint]) as s,
    ):
        p.connect(s.endpoint)
        assert p.wait_for_stores(1, timeout=20.0) == 1
        assert p.send(b"x") == 0
        assert p.flush(timeout=20.0) == 0
        assert p.acked_offset == 0
        assert p.send(b"") == 1
        left = p.flush(timeout=5.0)
        assert (left, p.acked_offset) == (0, 1)


def test_send_buffers_returns_the_offsets_its_own_records_got() -> None:
    """`send_buffers` returns `(first_offset, last_offset)` of its values. A
    batch larger than `max_unacked_bytes` goes in pieces, so another thread's
    `send` can take offsets between two pieces: the range then holds the
    batch's records and those others. It used to compute `first = last + 1 -
    n`, a range that started among the other thread's offsets (two callers
    told they own the same offset) and missed its own first records."""
    values = [bytes([i]) * 50 for i in range(40)]
    data = b"".join(values)
    offsets = b"".join((50 * i).to_bytes(4, "little") for i in range(41))
    with Producer("t", bind=LOCAL, min_acks=0, max_unacked_bytes=100) as p:
        stop = threading.Event()
        others: list[int] = []

        def other() -> None:
            while not stop.is_set():
                others.append(p.send(b"y" * 50, timeout=10.0))

        t = threading.Thread(target=other)
        t.start()
        ranges = []
        try:
            for _ in range(20):
                got = p.send_buffers(data, offsets, timeout=10.0)
                assert got is not None
                ranges.append(got)
        finally:
            stop.set()
            t.join(timeout=20)
        # Checked once the other thread is done: an offset its `send` returned
        # may not be in `others` yet while `send_buffers` returns.
        seen = set(others)
        for first, last in ranges:
            assert first not in seen and last not in seen, (first, last)
            between = set(range(first, last + 1)) - seen
            assert len(between) == len(values), (first, last, len(between))
        wait_for(lambda: p.flush(timeout=0.1) == 0, "everything sent")


def test_send_many_takes_len_as_a_hint_only() -> None:
    """An iterable may claim any length: `send_many` used to reserve room for
    `len()` values up front, so one claiming 10**12 aborted the process (an
    allocation failure). Run in a child: that abort would end pytest."""
    code = (
        "import dafka\n"
        "class Liar:\n"
        "    def __len__(self): return 10**12\n"
        "    def __iter__(self): return iter([b'a', b'b'])\n"
        "with dafka.Producer('t', bind='tcp://127.0.0.1:0', min_acks=0) as p:\n"
        "    print(p.send_many(Liar()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr[-2000:]


def test_records_nobody_listens_to_are_published_without_a_wake() -> None:
    """While nobody listens live, the node thread naps instead of taking each
    batch as it begins, and `send` wakes nothing (issue 37: each wake cost the
    caller a syscall and a context switch every few records). The records are
    published all the same: counted, released (`min_acks=0`), and what is sent
    once a consumer listens reaches it live, as before."""
    n = 20_000  # several 64 KiB batches
    with Producer("t", bind=LOCAL, min_acks=0) as p:
        for i in range(n):
            p.send(i.to_bytes(4, "big") * 25)
        wait_for(lambda: p.stats()["records_sent"] == n, "every record to be published")
        assert p.flush(timeout=20.0) == 0
        assert p.acked_offset == n - 1
        with Consumer(["t"], bind=LOCAL, peers=[p.endpoint], offset_reset="latest") as c:
            p.connect(c.endpoint)
            got: list[bytes] = []

            def heard() -> bool:
                # Until the consumer's subscription is in: records before it
                # are the napping producer's, after it the listened one's.
                p.send(b"live")
                got.extend(r.value for r in c.poll_many(timeout=0.05))
                return bool(got)

            wait_for(heard, "a record to arrive live")
            assert set(got) == {b"live"}
        wait_for(lambda: p.flush(timeout=0.1) == 0, "everything sent to be released")


def test_records_sent_while_napping_keep_their_offsets() -> None:
    """The napping thread takes waiting records without a command, but never
    before a batch handed over ahead of them (a full batch goes as a command):
    records published out of order would take each other's offsets. Nobody
    listens while they are sent (`min_acks=1`, no store: the producer holds them
    all); a consumer that comes later fetches them, each at the offset `send`
    returned, holding what was sent there."""
    n = 20_000  # several 64 KiB batches handed over while the thread naps
    with Producer("t", bind=LOCAL, min_acks=1, close_timeout=0) as p:
        offsets = [p.send(i.to_bytes(4, "big") * 25) for i in range(n)]
        assert offsets == list(range(n))
        wait_for(lambda: p.stats()["records_sent"] == n, "every record to be published")
        with Consumer(["t"], bind=LOCAL, peers=[p.endpoint], offset_reset="earliest") as c:
            p.connect(c.endpoint)
            got = drain(c, n)
        assert [r.offset for r in got] == list(range(n))
        assert all(r.value == r.offset.to_bytes(4, "big") * 25 for r in got)
