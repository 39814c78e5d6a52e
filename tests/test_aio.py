"""``dafka.aio``: nodes used from coroutines, with the event loop never blocked."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import dafka
from dafka import Consumer, Producer, Store, aio

pytestmark = pytest.mark.timeout(120)


def pair(**producer: object) -> tuple[Producer, Consumer]:
    p = Producer("aio", min_acks=0, **producer)  # type: ignore[arg-type]
    c = Consumer(["aio"], peers=[p.endpoint], offset_reset="earliest")
    p.connect(c.endpoint)
    return p, c


def test_send_and_records_leave_the_loop_free() -> None:
    async def main() -> tuple[list[int], int]:
        p, c = pair()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(ticker())
        try:
            # Nothing to read yet: the wait happens off the loop.
            assert await aio.poll_many(c, timeout=0.3) == []
            waited = ticks
            for i in range(100):
                await aio.send(p, b"v%d" % i)
            got: list[int] = []
            async with asyncio.timeout(60):
                async for r in aio.records(c):
                    assert r.value == b"v%d" % r.offset
                    got.append(r.offset)
                    if len(got) == 100:
                        break
            return got, waited
        finally:
            t.cancel()
            c.close()
            p.close()

    got, waited = asyncio.run(main())
    assert got == list(range(100))
    assert waited >= 3, "the loop was blocked while poll_many waited"


def test_a_cancelled_wait_stops_within_a_slice() -> None:
    async def main() -> None:
        with Consumer(["nothing"]) as c:
            task = asyncio.create_task(aio.poll_many(c))  # no timeout: forever
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=10)

    asyncio.run(main())


def test_send_waits_for_room_then_raises_buffer_full_and_flush_counts() -> None:
    async def main() -> None:
        with Producer(
            "aio-full", max_unacked_bytes=100, close_timeout=0
        ) as p:  # no store: nothing ACKs
            await aio.send(p, b"x" * 60)
            with pytest.raises(dafka.BufferFullError):
                await aio.send(p, b"y" * 60, timeout=0.3)
            assert await aio.flush(p, timeout=0.2) == 1
            with pytest.raises(ValueError, match="timeout"):
                await aio.flush(p, timeout=-1)

    asyncio.run(main())


def test_flush_returns_once_a_store_acked(tmp_path: Path) -> None:
    async def main() -> int:
        with Store(tmp_path) as s, Producer("aio", peers=[s.endpoint]) as p:
            s.connect(p.endpoint)
            p.wait_for_stores(1)
            for i in range(1000):
                await aio.send(p, b"%d" % i)
            return await aio.flush(p, timeout=60)

    assert asyncio.run(main()) == 0
