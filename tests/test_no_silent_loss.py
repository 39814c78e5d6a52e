"""Natural client code loses no data in silence (issue 36): leaving a ``with Producer``
block waits for the stores' ACKs, a restarted producer of a stable identity goes on
where its partition ends, a resumed consumer reads partitions born while it was away,
failures are loud (``dafka produce`` without a store exits 1, a node that hears no
tower says so, bad partitions and second timestamps are refused), and delivery
reports come per record in confluent-kafka's shape. Nodes on 127.0.0.1, ephemeral
ports; every wait is bounded, none is timed."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from nodes_util import drain, wait_for

import dafka
from dafka import Consumer, Producer, Store, Tower

pytestmark = pytest.mark.timeout(240)

LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Tower, Store]]:
    with (
        Tower(beacon_in=LOCAL, beacon_out=LOCAL) as tower,
        Store(tmp_path / "store", towers=[tower.endpoint], **FAST) as store,
    ):
        yield tower, store


def held(tower: Tower, topic: str, partition: str, n: int) -> list[bytes]:
    """The values of ``[0, n)`` of a partition, as the stores hold them."""
    records, _ = dafka.fetch_range(topic, partition, 0, n, towers=[tower.endpoint], **FAST)
    return [v for _, v in records]


def dead_endpoint() -> str:
    """A 127.0.0.1 port nobody listens on (taken and freed here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"tcp://127.0.0.1:{port},{port}"


# ---------------------------------------------------------------- close and with


def test_leaving_a_with_block_without_flush_stores_every_record(
    cluster: tuple[Tower, Store],
) -> None:
    """The issue's first finding: 1,000 records sent in a ``with`` block and no
    ``flush``; the stores used to hold none of them."""
    tower, _ = cluster
    with Producer("w", towers=[tower.endpoint], close_timeout=120, **FAST) as p:
        for i in range(1000):
            p.send(b"%d" % i)
    assert held(tower, "w", p.address, 1000) == [b"%d" % i for i in range(1000)]


def test_close_waits_and_returns_what_was_not_acknowledged(
    cluster: tuple[Tower, Store], caplog: pytest.LogCaptureFixture
) -> None:
    tower, _ = cluster
    p = Producer("c", towers=[tower.endpoint], **FAST)
    p.send_many([b"a", b"b", b"c"])
    assert p.close(timeout=120) == 0
    assert p.close() == 0, "idempotent"
    assert held(tower, "c", p.address, 3) == [b"a", b"b", b"c"]
    # No store: what is left is counted, logged and returned, never dropped in silence.
    lonely = Producer("c", peers=[dead_endpoint().split(",")[0]], **FAST)
    lonely.send_many([b"x"] * 5)
    with caplog.at_level(logging.WARNING, logger="dafka"):
        assert lonely.close(timeout=0.2) == 5
    assert "closed with 5 of the records sent (offsets 0 to 4) not acknowledged" in caplog.text
    assert lonely.close() == 5


def test_a_with_block_whose_records_no_store_acks_raises_delivery_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    peer = dead_endpoint().split(",")[0]
    with (
        caplog.at_level(logging.WARNING, logger="dafka"),
        pytest.raises(dafka.DeliveryError, match=r"3 record\(s\) sent by producer"),
        Producer("d", peers=[peer], close_timeout=0.2) as p,
    ):
        p.send_many([b"1", b"2", b"3"])
    assert "not acknowledged by min_acks=1 store(s)" in caplog.text
    # close_timeout=0 is the old behaviour: no wait, no raise (still logged).
    with Producer("d", peers=[peer], close_timeout=0) as p:
        p.send(b"1")
    # A close() in the block returned the count: leaving it does not raise again.
    with Producer("d", peers=[peer], close_timeout=0.2) as p:
        p.send(b"1")
        assert p.close(timeout=0.1) == 1


def test_an_exception_leaving_the_with_block_closes_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An exception is not held up by an hour of ``close_timeout`` (the test's own
    timeout would end it): the block closes with ``close(timeout=0)``, logs what it
    left, and the exception propagates."""
    peer = dead_endpoint().split(",")[0]
    with (
        caplog.at_level(logging.WARNING, logger="dafka"),
        pytest.raises(KeyError, match="boom"),
        Producer("e", peers=[peer], close_timeout=3600) as p,
    ):
        p.send_many([b"1", b"2"])
        raise KeyError("boom")
    assert "closed with 2 of the records sent" in caplog.text
    with pytest.raises(dafka.ClosedError):
        p.send(b"3")


def test_aio_close_waits_without_blocking_the_loop(cluster: tuple[Tower, Store]) -> None:
    import asyncio

    from dafka import aio

    tower, _ = cluster

    async def main() -> tuple[int, int]:
        p = Producer("aio", towers=[tower.endpoint], close_timeout=120, **FAST)
        for i in range(100):
            await aio.send(p, b"%d" % i)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        left = await aio.close(p)
        ticker.cancel()
        return left, ticks

    left, ticks = asyncio.run(main())
    assert left == 0 and ticks > 0, "the loop ran while close waited"


# ---------------------------------------------------------------- stable identity


def test_a_restarted_seeded_producer_goes_on_where_its_partition_ends(
    cluster: tuple[Tower, Store],
) -> None:
    """The issue's second finding: the same ``address_seed`` run twice, 500 records
    each. The second run's records used to be dropped as duplicates of the first's."""
    tower, _ = cluster
    towers = [tower.endpoint]
    with Producer("orders", towers=towers, address_seed="svc", **FAST) as first:
        assert first.next_offset == 0
        first.send_many([b"a%d" % i for i in range(500)])
    with Producer("orders", towers=towers, address_seed="svc", **FAST) as second:
        assert second.address == first.address
        assert second.next_offset == 500
        second.send_many([b"b%d" % i for i in range(500)])
    assert second.stats()["acks_ahead"] == 0
    want = [b"a%d" % i for i in range(500)] + [b"b%d" % i for i in range(500)]
    assert held(tower, "orders", first.address, 1000) == want


def test_a_producer_whose_offsets_the_stores_hold_is_told(
    cluster: tuple[Tower, Store], caplog: pytest.LogCaptureFixture
) -> None:
    """``first_offset`` given below where the partition ends (as a rewrite does): the
    stores drop its records as duplicates, and it is told (a counter, a warning)."""
    tower, _ = cluster
    towers = [tower.endpoint]
    with Producer("told", towers=towers, address_seed="s", first_offset=0, **FAST) as p:
        p.send_many([b"old"] * 100)
    with (
        caplog.at_level(logging.WARNING, logger="dafka"),
        Producer("told", towers=towers, address_seed="s", first_offset=0, **FAST) as again,
    ):
        again.send_many([b"new"] * 10)
        assert again.flush(120) == 0
        wait_for(lambda: again.stats()["acks_ahead"] > 0, "an ACK past what it sent", 120)
        again.poll()
    assert "past what this producer sent" in caplog.text
    assert held(tower, "told", p.address, 100) == [b"old"] * 100


def test_a_seeded_producer_without_a_store_says_what_to_do() -> None:
    peer = dead_endpoint().split(",")[0]
    with pytest.raises(dafka.FetchTimeoutError, match="pass first_offset="):
        Producer("t", towers=[dead_endpoint()], peers=[peer], address_seed="x")
    with Producer("t", peers=[peer], address_seed="x", first_offset=7) as p:
        assert p.next_offset == 7


def test_a_secure_seeded_producer_needs_first_offset(tmp_path: Path) -> None:
    _, secret = dafka.keygen(tmp_path, "w", role="producer")
    trust = tmp_path / "trust"
    trust.mkdir()
    peer = dead_endpoint().split(",")[0] + ";curve=" + "0" * 40
    with pytest.raises(dafka.ConfigError, match="needs first_offset"):
        Producer("t", peers=[peer], address_seed="x", cert=secret, trust=trust)


# ---------------------------------------------------------------- resuming


def test_resuming_reads_every_partition_born_while_away(cluster: tuple[Tower, Store]) -> None:
    """The issue's third finding: positions saved, the consumer stopped, a producer
    run (a new partition), the consumer resumed with ``start_offsets``: the new
    partition's 1,000 records used to be skipped (``offset_reset="latest"``)."""
    tower, _ = cluster
    towers = [tower.endpoint]
    with Producer("r", towers=towers, **FAST) as before:
        before.send_many([b"before"] * 10)
    with Consumer(["r"], towers=towers, **FAST) as c:
        assert [r.value for r in drain(c, 10)] == [b"before"] * 10
        saved = c.positions()
    assert saved == {before.address: 10}
    with Producer("r", towers=towers, **FAST) as born:
        born.send_many([b"%d" % i for i in range(1000)])
    with Consumer(["r"], towers=towers, start_offsets=saved, offset_reset="latest", **FAST) as c:
        got = drain(c, 1000)
    assert [(r.partition, r.value) for r in got] == [(born.address, b"%d" % i) for i in range(1000)]


def test_offset_reset_defaults_to_earliest() -> None:
    assert dafka._native.DEFAULTS["Consumer"]["offset_reset"] == "earliest"


# ---------------------------------------------------------------- loud failures


def test_dafka_produce_without_a_store_exits_non_zero() -> None:
    """The issue's fourth finding: ``echo hi | dafka produce`` with no store said "1
    of 1 records not acknowledged" and exited 0."""
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as tower:
        r = subprocess.run(
            [sys.executable, "-m", "dafka.cli", "produce", "t", "--tower", tower.endpoint],
            input=b"hi\n",
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert r.returncode == 1, r.stderr
    assert b"1 of 1 records not acknowledged" in r.stderr


def test_a_node_that_hears_no_tower_warns_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    """A consumer given a dead tower used to return None from ``poll`` forever without
    a word."""
    dead = dead_endpoint()
    with caplog.at_level(logging.WARNING, logger="dafka"), Consumer(["t"], towers=[dead]) as c:
        wait_for(lambda: c.stats()["towers_silent"] == 1, "the silence warning", 120)
        assert c.poll(timeout=0.1) is None
    assert "no tower heard for" in caplog.text and dead in caplog.text


def test_a_read_client_whose_tower_is_dead_says_so() -> None:
    dead = dead_endpoint()
    with pytest.raises(dafka.FetchTimeoutError, match=f"no tower was heard at {dead}"):
        dafka.heads("t", towers=[dead], timeout=5)


def test_dafka_consume_prints_that_no_tower_is_heard() -> None:
    dead = dead_endpoint()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dafka.cli", "consume", "t", "--tower", dead],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stderr is not None
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline().decode()
            lines.append(line)
            if "no tower heard" in line or not line:
                break
        assert any("no tower heard" in line and dead in line for line in lines), lines
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_partitions_that_cannot_be_are_refused() -> None:
    with Consumer(["t"], peers=[dead_endpoint().split(",")[0]]) as c:
        with pytest.raises(dafka.ConfigError, match="there are no numbered partitions"):
            c.seek("0", 0)
        c.seek("A" * 32, 3)
        assert c.positions() == {"A" * 32: 3}


def test_timestamps_in_seconds_or_floats_are_refused_saying_milliseconds() -> None:
    with Producer("t", peers=[dead_endpoint().split(",")[0]], min_acks=0) as p:
        with pytest.raises(ValueError, match="milliseconds"):
            p.send(b"x", timestamp=int(time.time()))
        with pytest.raises(TypeError, match="milliseconds"):
            p.send(b"x", timestamp=time.time())  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="milliseconds"):
            p.send_many([b"x"], timestamps=[int(time.time())])
        assert p.next_offset == 0, "nothing sent"
        at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
        p.send(b"x", timestamp=at)
        p.send(b"y", timestamp=1_796_029_200_000)


# ---------------------------------------------------------------- delivery reports


def test_delivery_reports_per_record_in_confluent_shape(cluster: tuple[Tower, Store]) -> None:
    """The issue's fifth finding: a confluent-style ``on_delivery(err, msg)`` was
    accepted, then ``flush()`` raised (it was called with one argument), and reports
    came per batch of offsets, not per record."""
    tower, _ = cluster
    reports: list[tuple[Any, dafka.Record]] = []
    with Producer(
        "dr",
        towers=[tower.endpoint],
        on_delivery=lambda err, msg: reports.append((err, msg)),
        **FAST,
    ) as p:
        p.wait_for_stores(1, timeout=60)
        for i in range(1000):
            p.send(b"%d" % i, key=b"k%d" % (i % 3))
        p.send_many([b"m%d" % i for i in range(1000)], timestamps=[1_796_029_200_000] * 1000)
        assert p.flush(120) == 0
    assert [err for err, _ in reports] == [None] * 2000
    assert [r.offset for _, r in reports] == list(range(2000))
    assert all(r.topic == "dr" and r.partition == p.address for _, r in reports)
    assert [r.value for _, r in reports[:3]] == [b"0", b"1", b"2"]
    assert [r.key for _, r in reports[:3]] == [b"k0", b"k1", b"k2"]
    assert reports[1000][1].value == b"m0" and reports[1000][1].timestamp == 1_796_029_200_000


def test_records_a_producer_closes_without_are_reported_with_delivery_error() -> None:
    errors: list[Any] = []
    p = Producer(
        "dr",
        peers=[dead_endpoint().split(",")[0]],
        on_delivery=lambda err, record: errors.append((type(err), record.value)),
    )
    p.send(b"a")
    p.send_many([b"b", b"c"])
    assert p.close(timeout=0.1) == 3
    assert errors == [(dafka.DeliveryError, v) for v in (b"a", b"b", b"c")]


def test_a_callback_of_the_wrong_shape_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match=r"on_delivery\(err, record\)"):
        Producer("t", on_delivery=lambda a, b, c: None)
    with pytest.raises(TypeError, match=r"on_delivery\(err, record\)"):
        Producer("t", on_delivery=lambda: None)
    with pytest.raises(TypeError, match="not callable"):
        Producer("t", on_delivery=42)  # type: ignore[arg-type]
    offsets: list[int] = []
    with Producer("t", on_delivery=offsets.append, min_acks=0) as p:
        p.send(b"x")
        assert p.flush(60) == 0
    assert offsets == [0], "one argument: the acknowledged offset, as before"


def test_buffer_full_error_is_a_buffer_error() -> None:
    assert issubclass(dafka.BufferFullError, BufferError)
    with Producer("t", peers=[dead_endpoint().split(",")[0]], max_unacked_bytes=10) as p:
        p.send(b"x" * 20)
        with pytest.raises(BufferError):
            p.send(b"y", timeout=0.1)
        p.close(timeout=0)
