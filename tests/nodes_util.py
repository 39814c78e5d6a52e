"""Waiting helpers shared by the node tests (bounded, never a timed assertion)."""

from __future__ import annotations

import time
from collections.abc import Callable

from dafka import Consumer, Record


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
