"""``dafka.spark.run_query``: which failed streaming queries it starts again.

Spark's failure to start a Python worker in its fixed 10 s cannot be caused on
purpose here, so the queries are stand-ins with the methods run_query uses."""

from __future__ import annotations

from typing import Any

import pytest

from dafka.spark import died_starting, run_query

START_TIMEOUT = (
    "[STREAM_FAILED] Query [id = 1] terminated with exception: Python worker failed to "
    "connect back. SQLSTATE: XXKST"
)


class StreamingQueryException(Exception):
    pass


class FakeQuery:
    """Ends with ``error`` (or cleanly) after ``progress`` batches; ``ends``
    False: still running when the wait is over."""

    def __init__(self, error: str | None = None, progress: int = 0, ends: bool = True) -> None:
        self.error = None if error is None else StreamingQueryException(error)
        self.recentProgress = [{"numInputRows": 1}] * progress
        self.ends = ends
        self.waits: list[float | None] = []

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        self.waits.append(timeout)
        if self.error is not None:
            raise self.error
        return self.ends if timeout is not None else None

    def exception(self) -> Exception | None:
        return self.error


class Starter:
    def __init__(self, *queries: FakeQuery) -> None:
        self.queries = list(queries)
        self.started: list[FakeQuery] = []

    def __call__(self) -> FakeQuery:
        self.started.append(self.queries.pop(0))
        return self.started[-1]


def test_a_query_that_could_not_start_its_worker_is_started_again() -> None:
    ok = FakeQuery()
    start = Starter(FakeQuery(START_TIMEOUT), FakeQuery(START_TIMEOUT), ok)
    assert run_query(start) is ok
    assert len(start.started) == 3
    assert ok.waits == [None]


def test_it_gives_up_after_restarts() -> None:
    start = Starter(*(FakeQuery(START_TIMEOUT) for _ in range(3)))
    with pytest.raises(StreamingQueryException, match="failed to connect back"):
        run_query(start, restarts=1)
    assert len(start.started) == 2
    start = Starter(FakeQuery(START_TIMEOUT))
    with pytest.raises(StreamingQueryException):
        run_query(start, restarts=0)


def test_a_query_that_made_progress_or_failed_otherwise_is_not_started_again() -> None:
    # Records may have been written: starting again is the caller's choice.
    start = Starter(FakeQuery(START_TIMEOUT, progress=2), FakeQuery())
    with pytest.raises(StreamingQueryException):
        run_query(start)
    assert len(start.started) == 1
    start = Starter(FakeQuery("DataLossError: records [5, 9) are gone"), FakeQuery())
    with pytest.raises(StreamingQueryException, match="DataLossError"):
        run_query(start)
    assert len(start.started) == 1


def test_the_timeout_bounds_the_wait_and_a_running_query_is_returned() -> None:
    running = FakeQuery(ends=False)
    assert run_query(Starter(running), timeout=2.5) is running
    [wait] = running.waits
    assert wait is not None and 0 < wait <= 2.5


def test_died_starting() -> None:
    assert died_starting(FakeQuery(START_TIMEOUT))
    assert not died_starting(FakeQuery(START_TIMEOUT, progress=1))
    assert not died_starting(FakeQuery("other"))
    assert not died_starting(FakeQuery())
    assert died_starting(FakeQuery(), StreamingQueryException(START_TIMEOUT))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"restarts": -1}, "restarts"),
        ({"restarts": 1.5}, "restarts"),
        ({"restarts": True}, "restarts"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
    ],
)
def test_bad_arguments(kwargs: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        run_query(Starter(FakeQuery()), **kwargs)
