"""asyncio helpers: use dafka nodes from coroutines without blocking the event loop.

Every node runs on its own thread; what may wait (a poll for records, a full send
buffer, a flush until stores ACK) waits here on a worker thread
(``asyncio.to_thread``) in slices of :data:`SLICE` seconds. The loop stays free,
and a cancelled task stops within one slice::

    import asyncio, dafka
    from dafka import aio

    async def main() -> None:
        p = dafka.Producer("weather", towers=towers)
        await aio.send(p, b"21.5")
        await aio.close(p)           # waits for the stores' ACKs, then closes
        with dafka.Consumer(["weather"], towers=towers) as c:
            async for record in aio.records(c):
                print(record.offset, record.value)

Leaving ``with Producer(...)`` waits for the stores' ACKs (``close_timeout``) on the
loop's thread: in a coroutine, ``await aio.close(p)`` first.

A record sent by :func:`send` whose task is cancelled while the buffer was full
may still go out (at-least-once, as a retried send).

A consumer group member's ``poll`` through :func:`poll_many` and :func:`records` calls
its ``on_assign`` and ``on_revoke`` on the loop's thread; :func:`commit` and
:func:`committed` wait for the stores on a worker thread (up to the consumer's
``commit_timeout``: a cancelled task returns at once, the worker finishes that wait).
"""

from __future__ import annotations

import asyncio
import math
import numbers
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING

from dafka.exceptions import BufferFullError, ClosedError

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from dafka._native import Consumer, Producer
    from dafka.record import Record

__all__ = ["SLICE", "close", "commit", "committed", "flush", "poll_many", "records", "send"]

#: Longest a worker thread waits in one call: the most a cancellation waits.
SLICE = 0.1


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if not isinstance(timeout, numbers.Real):
        raise TypeError(
            f"timeout must be a number of seconds (int or float) or None, "
            f"got {type(timeout).__name__} {timeout!r}"
        )
    if not (math.isfinite(timeout) and timeout >= 0):
        raise ValueError(
            f"timeout must be a finite number of seconds >= 0 or None, got {timeout!r}"
        )
    return asyncio.get_running_loop().time() + float(timeout)


def _slice(deadline: float | None) -> float:
    if deadline is None:
        return SLICE
    return max(0.0, min(SLICE, deadline - asyncio.get_running_loop().time()))


def _expired(deadline: float | None) -> bool:
    return deadline is not None and asyncio.get_running_loop().time() >= deadline


async def poll_many(
    consumer: Consumer, max_records: int = 10000, timeout: float | None = None
) -> list[Record]:
    """Up to ``max_records`` records, waiting up to ``timeout`` seconds (None = until
    at least one arrives) for the first; ``[]`` on timeout.

    Records are taken on the loop's thread, never on the worker that waits for them:
    a cancelled call (``asyncio.wait_for``, ``asyncio.timeout``) loses none."""
    deadline = _deadline(timeout)
    while True:
        got = consumer._take(max_records)
        if got or _expired(deadline):
            return got
        await asyncio.to_thread(consumer._ready, _slice(deadline))


async def records(consumer: Consumer) -> AsyncIterator[Record]:
    """Every record, as it arrives (``async for``). Ends when the consumer is closed,
    as ``for record in consumer`` does. Taken one at a time, as that loop does: leaving
    the ``async for`` early leaves the records after the last one it saw with the
    consumer, for the next poll."""
    while True:
        try:
            got = await poll_many(consumer, 1)
        except ClosedError:
            return
        if got:
            yield got[0]


def _buffer_full(e: BufferFullError, started: float) -> BufferFullError:
    """``e`` saying how long :func:`send` waited in all (each native call it made
    reports only its own slice)."""
    waited = f"after waiting {asyncio.get_running_loop().time() - started:.1f}s"
    message, n = re.subn(r"after waiting [0-9.]+s", waited, str(e), count=1)
    return BufferFullError(message if n else f"{e} ({waited} in all)")


async def send(producer: Producer, value: Buffer, *, timeout: float | None = None) -> int:
    """Publishes one record; returns its offset. While the producer's buffer is full
    it waits up to ``timeout`` seconds (None = forever), then raises
    :class:`~dafka.BufferFullError`. With room in the buffer this is an enqueue, done
    on the loop's thread."""
    deadline = _deadline(timeout)
    started = asyncio.get_running_loop().time()
    try:
        return producer.send(value, timeout=0.0)
    except BufferFullError as e:
        if _expired(deadline):
            raise _buffer_full(e, started) from None
    while True:
        try:
            return await asyncio.to_thread(producer.send, value, timeout=_slice(deadline))
        except BufferFullError as e:
            if _expired(deadline):
                raise _buffer_full(e, started) from None


async def flush(producer: Producer, timeout: float | None = None) -> int:
    """Waits until stores ACKed every record sent (``min_acks`` of them) or ``timeout``
    seconds passed (None = no limit); returns the records still unacknowledged."""
    deadline = _deadline(timeout)
    while True:
        left = await asyncio.to_thread(producer.flush, _slice(deadline))
        if left == 0 or _expired(deadline):
            return left


async def close(producer: Producer, timeout: float | None = None) -> int:
    """Closes ``producer`` as :meth:`dafka.Producer.close` does, without blocking the
    loop: waits up to ``timeout`` seconds (None: the producer's ``close_timeout``) for
    the stores' ACKs of what was sent, then closes. Returns how many records are still
    not acknowledged (logged, and reported to ``on_delivery`` with a
    :class:`~dafka.DeliveryError`). A cancelled call closes at once."""
    wait = producer.close_timeout if timeout is None else timeout
    try:
        await flush(producer, wait)
    except ClosedError:
        pass  # closed already: close() says what it left
    except BaseException:
        producer.close(timeout=0)
        raise
    return producer.close(timeout=0)


async def commit(consumer: Consumer, offsets: Mapping[str, int] | None = None) -> None:
    """A group member's synchronous commit (``consumer.commit(offsets,
    asynchronous=False)``) without blocking the loop: returns once the stores confirmed
    it, raises :class:`~dafka.CommitTimeoutError` after ``commit_timeout``."""
    await asyncio.to_thread(consumer.commit, offsets, asynchronous=False)


async def committed(
    consumer: Consumer, partitions: Sequence[str] | None = None
) -> dict[str, int | None]:
    """``consumer.committed(partitions)`` (the group's last commits, as the stores
    answer) without blocking the loop."""
    return await asyncio.to_thread(consumer.committed, partitions)
