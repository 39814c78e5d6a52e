"""Running a streaming query to its end, restarted when Spark could not start it.

Spark starts a Python process on the driver to plan a Python data source's
batches and to commit its writes, and waits a fixed 10 s for it to connect back
(``PythonWorkerFactory``; no setting changes it). On a loaded machine that start
can take longer: the query dies while INITIALIZING with "Python worker failed to
connect back", before it read or wrote anything. Restarting it from its
checkpoint is then safe, and is what :func:`run_query` does, a bounded number of
times. A query that made progress, or failed for any other reason, is not
restarted: its error is raised as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: What Spark's error says when a Python worker did not connect back in time.
WORKER_START_TIMEOUT = "Python worker failed to connect back"


def died_starting(query: Any, error: object | None = None) -> bool:
    """Whether ``query`` ended because Spark could not start its Python worker
    in time, before any progress (``error``: what it raised, by default
    ``query.exception()``)."""
    error = query.exception() if error is None else error
    return error is not None and WORKER_START_TIMEOUT in str(error) and not query.recentProgress


def run_query(start: Callable[[], Any], *, restarts: int = 2, timeout: float | None = None) -> Any:
    """Calls ``start()`` (which starts a streaming query and returns it) and waits
    for the query to end, starting it again, at most ``restarts`` times, if it
    died before any progress because Spark could not start its Python worker in
    time (see the module's doc). Returns the query.

    ``timeout`` (seconds, or ``None`` to wait as long as it runs) bounds the
    whole wait: a query still running then is returned running (check
    ``query.isActive``). A query's own error is raised (a pyspark
    ``StreamingQueryException``), as ``awaitTermination`` does.
    """
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise ValueError(f"restarts must be an int >= 0 (got {restarts!r})")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds or None (got {timeout!r})")
    deadline = None if timeout is None else time.monotonic() + timeout
    for attempt in range(restarts + 1):
        query = start()
        try:
            if deadline is None:
                query.awaitTermination()
            else:
                left = max(0.001, deadline - time.monotonic())
                query.awaitTermination(left)
        except Exception as e:
            if attempt < restarts and died_starting(query, e):
                continue
            raise
        return query
    raise AssertionError("unreachable: the last attempt returns or raises")
