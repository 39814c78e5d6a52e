"""Edges of the Python-facing layer found by a correctness review (session 21): each
test failed before its fix, for the reason its docstring gives. Nodes bind 127.0.0.1
ephemeral ports."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import threading
import weakref
from array import array
from pathlib import Path
from typing import Any

import pytest
from nodes_util import drain, wait_for

import dafka
from dafka import Consumer, Producer, Store, aio, wire

A32 = b"A" * 32


def _connected_pair(topic: str) -> tuple[Producer, Consumer]:
    """A producer (min_acks=1, no store: it keeps every record, so a consumer can
    fetch any of them) and an "earliest" consumer, peered both ways, with one
    warm-up record (offset 0) already polled."""
    p = Producer(topic)
    c = Consumer([topic], peers=[p.endpoint], offset_reset="earliest")
    p.connect(c.endpoint)
    p.send(b"warm")
    got = drain(c, 1, within=30)
    assert [r.offset for r in got] == [0]
    return p, c


# --- Producer.send / send_buffers: bytes-like objects -------------------------------


def test_send_takes_a_memoryview_of_any_format() -> None:
    """``Producer.send`` rejects a memoryview (or array) whose format is not 'B'/'b',
    with a TypeError saying it "takes ... memoryview, got memoryview"; ``Log.append``
    takes the same object (``memoryview(value).tobytes()``)."""
    view = memoryview(array("i", [1, 2]))
    with Producer("bl", min_acks=0) as p:
        assert p.send(view) == 0
        assert p.send_many([view]) == 1


def test_send_buffers_takes_int32_offsets_from_an_array() -> None:
    """``send_buffers`` documents ``offsets`` as the raw native-endian int32 offsets,
    "any object with the buffer protocol"; an ``array('i')`` (or a numpy int32 array)
    holding exactly those is refused as "not a bytes-like buffer"."""
    with Producer("sb", min_acks=0) as p:
        assert p.send_buffers(b"abcdef", array("i", [0, 3, 6])) == (0, 1)


# --- Producer.poll / on_delivery ------------------------------------------------------


def test_producer_poll_reports_progress_made_before_the_call_at_once(tmp_path: Path) -> None:
    """``poll(timeout)`` compares against the acked offset *at the call*, not against
    what ``on_delivery`` was last told: progress made before the call (but not yet
    reported) is only reported after the whole timeout, when records are still
    outstanding. Here a 60 s poll would sit 60 s on an already-acked offset."""
    seen: list[int] = []
    reported = threading.Event()

    def on_delivery(offset: int) -> None:
        seen.append(offset)
        reported.set()

    store = Store(tmp_path / "s", fsync="never")
    p = Producer("pp", peers=[store.endpoint], on_delivery=on_delivery)
    try:
        store.connect(p.endpoint)
        assert p.wait_for_stores(1, 30.0) == 1
        p.send(b"a")
        wait_for(lambda: p.acked_offset == 0, "the store's ACK of offset 0")
        store.close()
        p.send(b"b")  # never ACKed: the store is gone
        result: list[object] = []

        def poll() -> None:
            try:
                result.append(p.poll(60.0))
            except dafka.ClosedError:
                result.append("closed")

        t = threading.Thread(target=poll, daemon=True)
        t.start()
        # Offset 0 was ACKed before poll() started: it should be reported at once.
        assert reported.wait(10.0), "poll() did not report an offset already ACKed"
        t.join(10.0)
        assert seen == [0] and result == [1]
    finally:
        p.close()  # ends a poll still waiting (ClosedError in its thread)
        store.close()


def test_on_delivery_bound_method_cycle_is_collected() -> None:
    """``Producer`` keeps ``on_delivery`` without a GC ``__traverse__``: the common
    ``self.p = Producer(..., on_delivery=self.cb)`` cycle can never be collected, so
    the producer's node thread and bound socket live until the process ends."""

    class App:
        def __init__(self) -> None:
            self.p = Producer("cy", min_acks=0, on_delivery=self.on_delivery)

        def on_delivery(self, offset: int) -> None:
            pass

    app = App()
    ref = weakref.ref(app)
    del app
    gc.collect()
    leaked = ref()
    if leaked is not None:
        leaked.p.close()
    assert leaked is None, "App <-> Producer cycle through on_delivery was not collected"


# --- dafka.aio --------------------------------------------------------------------------


def test_aio_poll_many_cancelled_loses_no_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancelled ``aio.poll_many`` leaves its ``to_thread`` worker polling the
    consumer: records arriving during that slice are taken by the orphaned worker and
    dropped (``positions()`` moves past them, so they are not even fetched again).
    ``asyncio.wait_for(aio.poll_many(c), t)`` / ``asyncio.timeout`` cancel this way.
    (SLICE is widened so the window is not a race; at 0.1 s it is the same bug.)"""
    monkeypatch.setattr(aio, "SLICE", 3.0)
    p, c = _connected_pair("ac")
    try:

        async def main() -> None:
            task = asyncio.create_task(aio.poll_many(c))
            await asyncio.sleep(0.3)  # the worker is now waiting in poll_many
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            p.send(b"after the cancel")  # offset 1

        asyncio.run(main())
        got = drain(c, 1, within=20)
        assert [r.offset for r in got] == [1], (
            f"record 1 lost to the cancelled poll; positions()={c.positions()}"
        )
    finally:
        c.close()
        p.close()


def test_aio_records_break_keeps_the_rest_of_the_batch() -> None:
    """``aio.records`` takes up to ``max_records`` (10,000) per native call and
    yields them one by one: leaving the ``async for`` early silently drops the rest
    of that batch, and ``positions()`` already counts them as consumed (a resume from
    saved positions skips them too). ``for record in consumer`` takes one at a time."""
    p, c = _connected_pair("ab")
    try:
        p.send_many([b"%d" % i for i in range(1, 10)])  # offsets 1..9
        wait_for(lambda: c.stats()["delivered"] >= 10, "10 records buffered")

        async def first() -> int:
            async for r in aio.records(c):
                return r.offset
            raise AssertionError("no record")

        assert asyncio.run(first()) == 1
        rest = drain(c, 8, within=10)
        assert [r.offset for r in rest] == list(range(2, 10)), (
            f"records 2..9 lost after leaving async for; positions()={c.positions()}"
        )
    finally:
        c.close()
        p.close()


# --- dafka.wire -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: wire.Record(topic=b"t", address=A32, subject=b"t", sequence=2**64),
        lambda: wire.Fetch(topic=A32, address=A32, subject=b"t", sequence=0, count=2**32),
    ],
    ids=["sequence", "count"],
)
def test_wire_out_of_range_field_is_a_value_error(build: Any) -> None:
    """A message whose ``sequence`` (uint64) or ``count`` (uint32) cannot travel was
    built without complaint, then ``encode`` raised a bare OverflowError ("int too big
    to convert") that named no field: not a ValueError as documented."""
    with pytest.raises(ValueError, match=r"sequence|count"):
        wire.encode(build())


# --- read clients -------------------------------------------------------------------------


def test_fetch_range_refuses_a_partition_name_no_store_can_hold() -> None:
    """Stores hold only partitions named with ASCII letters, digits, '-' and '_'
    (``Log.append`` raises LogValueError for others), yet ``fetch_range`` accepts any
    name and waits the whole timeout (60 s by default), then blames discovery with a
    FetchTimeoutError instead of saying the name is invalid."""
    with pytest.raises(dafka.ConfigError):
        dafka.fetch_range("t", "not a partition", 0, 1, timeout=1.0)


# --- CLI ------------------------------------------------------------------------------------


def test_cli_log_dump_into_a_closed_pipe_exits_without_a_traceback(tmp_path: Path) -> None:
    """``dafka log dump PATH T P | head -1`` (and ``dafka consume ... | head``) dies
    with a BrokenPipeError traceback on stderr once the reader goes away: the CLI
    does not handle EPIPE (exit quietly, as other Unix tools do)."""
    partition = "P" * 32
    with dafka.Log(tmp_path / "log") as log:
        log.append_many("t", partition, 0, [b"x" * 100] * 20_000)  # well past a pipe buffer
    err = tmp_path / "stderr"
    with err.open("wb") as errf:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dafka.cli",
                "log",
                "dump",
                str(tmp_path / "log"),
                "t",
                partition,
            ],
            stdout=subprocess.PIPE,
            stderr=errf,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # what `head -1` does after its line
        try:
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert first.startswith(b"0\t")
    stderr = err.read_text()
    assert "Traceback" not in stderr, stderr[-400:]


def test_producer_poll_after_close_raises_closed() -> None:
    """``poll(0)`` after ``close()`` returned 0, as if nothing were wrong, while
    ``poll(0.1)`` raised ClosedError: closed is now said at once, whatever the
    timeout."""
    p = Producer("pc", min_acks=0)
    p.close()
    for timeout in (0.0, 0.1):
        with pytest.raises(dafka.ClosedError):
            p.poll(timeout)


def test_cli_nodes_take_bind_and_advertise_host() -> None:
    """``dafka produce|consume|offsets`` bound 127.0.0.1 with no way to change it, so
    stores on other hosts (found through ``--tower``) could not reach them. They take
    ``--bind`` and ``--advertise-host`` now, checked as a node checks them."""
    base = [sys.executable, "-m", "dafka.cli", "offsets", "t", "--peer", "tcp://127.0.0.1:1"]
    for extra, word in (
        (["--bind", "udp://127.0.0.1:0"], "bind"),
        (["--advertise-host", "*"], "advertise_host"),
    ):
        r = subprocess.run(
            [*base, "--timeout", "1", *extra], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 1, (extra, r.stdout, r.stderr)
        assert word in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_spark_options_are_checked_as_a_node_would_on_the_driver() -> None:
    """A bad ``bind``, ``advertiseHost`` or endpoint in the dafka data source's
    options passed the driver; every task then failed (and was retried) on it. The
    driver says it once now (``dafka._native.check_node``); ``advertiseHost`` is an
    option of both sides."""
    pytest.importorskip("pyspark")
    from dafka.spark import ProducerSettings
    from dafka.spark.datasource import ReadSettings

    # A read's options and a write's (a read refuses a write's ``topic``).
    write = {"topic": "t", "towers": "tcp://127.0.0.1:1,2"}
    read = {"subscribe": "t", "towers": "tcp://127.0.0.1:1,2"}
    for key, value in (("bind", "udp://127.0.0.1:0"), ("advertiseHost", "*")):
        with pytest.raises(dafka.ConfigError):
            ProducerSettings.from_options({**write, key: value})
        with pytest.raises(dafka.ConfigError):
            ReadSettings.from_options({**read, key: value})
    assert ProducerSettings.from_options({**write, "advertiseHost": "h1"}).advertise_host == "h1"
    assert ReadSettings.from_options({**read, "advertiseHost": ""}).advertise_host == ""
