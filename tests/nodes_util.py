"""Waiting helpers shared by the node tests (bounded, never a timed assertion)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dafka import Consumer, Producer, Record, Store, Tower


def wait_for(cond: Callable[[], bool], what: str, within: float = 30.0) -> None:
    """Polls ``cond`` until it holds; fails naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def drain(c: Consumer, n: int, within: float = 90.0) -> list[Record]:
    """Polls ``c`` until ``n`` records arrived or ``within`` seconds passed."""
    got: list[Record] = []
    deadline = time.monotonic() + within
    while len(got) < n and time.monotonic() < deadline:
        got.extend(c.poll_many(timeout=0.2))
    return got


@contextmanager
def store_and_producer(tmp_path: Path, topic: str, **opts: Any) -> Iterator[tuple[str, Producer]]:
    """A tower on ephemeral ports, a store in ``tmp_path/s`` and a producer of
    ``topic`` that a store acknowledges, each with ``opts``; yields the tower's
    endpoint and the producer."""
    with (
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as t,
        Store(tmp_path / "s", towers=[t.endpoint], **opts),
        Producer(topic, towers=[t.endpoint], **opts) as p,
    ):
        p.wait_for_stores(1, timeout=30)
        yield t.endpoint, p
