"""The console's snapshot: background threads poll a :class:`~.source.Source` and
keep the last answer, the throughput history of each topic, and its JSON, which
the HTTP handlers only read (a slow cluster never stalls a request)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from dafka._native import __version__
from dafka.console.source import PartitionView, Source, TopicView

log = logging.getLogger("dafka.console")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


class Poller:
    """Polls ``source``: its topics every ``interval`` seconds (one thread), its
    groups and nodes every ``slow_interval`` (another thread, as describing a group
    listens for its members), and keeps ``window`` seconds of throughput per topic.

    A topic's throughput is measured between two successive polls from its
    partitions' next offsets (records) and, where the source gives them, bytes held:
    each history point is ``{"t": ms since the epoch, "seconds": since the poll
    before, "records": records appended in between, "bytes": bytes or None}``. A
    partition counts from the second poll that saw it; a next offset that went down
    (a store that lost records) counts 0."""

    def __init__(
        self,
        source: Source,
        *,
        interval: float = 1.0,
        slow_interval: float = 5.0,
        window: float = 300.0,
    ) -> None:
        self._source = source
        self._interval = interval
        self._slow_interval = slow_interval
        self._window = window
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # The topics poll's results.
        self._topics: list[TopicView] = []
        self._reachable: bool | None = None  # None: not polled yet
        self._error: str | None = None
        self._updated: int | None = None
        self._checked: int | None = None
        self._polls = 0
        # Per topic: the last poll's {partition: (next, bytes)} and its monotonic time.
        self._last: dict[str, tuple[float, dict[str, tuple[int, int | None]]]] = {}
        self._history: dict[str, deque[dict[str, Any]]] = {}
        # The groups and nodes poll's.
        self._groups: dict[str, Any] = {"list": [], "error": None, "updated": None}
        self._nodes: dict[str, Any] = {"list": None, "error": None, "updated": None}
        self._json = b""
        self._render()
        self._threads = [
            threading.Thread(
                target=self._run,
                args=(self._poll_topics, interval),
                name="dafka-console-topics",
                daemon=True,
            ),
            threading.Thread(
                target=self._run,
                args=(self._poll_slow, slow_interval),
                name="dafka-console-groups",
                daemon=True,
            ),
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def close(self, timeout: float | None = None) -> None:
        """Stops the threads (waiting up to ``timeout`` for a poll in progress), then
        closes the source."""
        self._stop.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout)
        if not any(t.is_alive() for t in self._threads):
            self._source.close()

    def snapshot_json(self) -> bytes:
        """The last snapshot, as JSON bytes (see :meth:`snapshot`)."""
        with self._lock:
            return self._json

    def snapshot(self) -> dict[str, Any]:
        """The last snapshot: ``console`` (version, interval, window), ``cluster``
        (``reachable``: True, False, or None before the first poll ended; ``error``;
        ``updated``: ms of the last poll that read the cluster; ``checked``: of the
        last poll; ``polls``), ``topics`` (each ``topic``, ``partitions`` with
        ``partition``, ``first``, ``next``, ``records``; ``records``; ``history``),
        ``groups`` and ``nodes`` (each ``list``, ``error``, ``updated``; the nodes'
        list None when the source cannot tell)."""
        result: dict[str, Any] = json.loads(self.snapshot_json())
        return result

    def _run(self, poll: Callable[[], None], every: float) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                poll()
            except Exception:  # the polls catch what they expect; this thread goes on
                log.exception("dafka console: a poll failed")
            self._stop.wait(max(0.0, every - (time.monotonic() - start)))

    def _poll_topics(self) -> None:
        try:
            topics = self._source.topics()
        except Exception as e:
            with self._lock:
                self._reachable = False
                self._error = _error_text(e)
                self._checked = _now_ms()
                self._polls += 1
                self._render()
            return
        mono, now = time.monotonic(), _now_ms()
        with self._lock:
            for t in topics:
                self._measure(t, mono, now)
            names = {t["topic"] for t in topics}
            for gone in set(self._history) - names:
                del self._history[gone]
                self._last.pop(gone, None)
            self._topics = topics
            self._reachable, self._error = True, None
            self._updated = self._checked = now
            self._polls += 1
            self._render()

    def _measure(self, topic: TopicView, mono: float, now: int) -> None:
        name = topic["topic"]
        seen = {p["partition"]: (p["next"], p.get("bytes")) for p in topic["partitions"]}
        history = self._history.setdefault(name, deque())
        before = self._last.get(name)
        self._last[name] = (mono, seen)
        if before is not None:
            then, old = before
            records, nbytes, with_bytes = 0, 0, False
            for p, (nxt, size) in seen.items():
                if p not in old:
                    continue
                records += max(0, nxt - old[p][0])
                old_size = old[p][1]
                if size is not None and old_size is not None:
                    nbytes += max(0, size - old_size)
                    with_bytes = True
            history.append(
                {
                    "t": now,
                    "seconds": round(mono - then, 3),
                    "records": records,
                    "bytes": nbytes if with_bytes else None,
                }
            )
        while history and history[0]["t"] < now - self._window * 1000:
            history.popleft()

    def _poll_slow(self) -> None:
        for key, call in (("groups", self._source.groups), ("nodes", self._source.nodes)):
            if self._stop.is_set():
                return
            try:
                got: Any = call()
                error = None
            except Exception as e:
                got, error = None, _error_text(e)
            with self._lock:
                part = self._groups if key == "groups" else self._nodes
                if error is None:
                    part["list"] = got
                    part["updated"] = _now_ms()
                part["error"] = error
                self._render()

    def _render(self) -> None:
        """Builds the JSON of the state (the lock held)."""

        def records(p: PartitionView) -> int:
            return max(0, p["next"] - p["first"])

        topics = [
            {
                "topic": t["topic"],
                "partitions": [{**p, "records": records(p)} for p in t["partitions"]],
                "records": sum(records(p) for p in t["partitions"]),
                "history": list(self._history.get(t["topic"], ())),
            }
            for t in self._topics
        ]
        state = {
            "console": {
                "version": __version__,
                "interval": self._interval,
                "slow_interval": self._slow_interval,
                "window": self._window,
            },
            "cluster": {
                "reachable": self._reachable,
                "error": self._error,
                "updated": self._updated,
                "checked": self._checked,
                "polls": self._polls,
            },
            "topics": topics,
            "groups": self._groups,
            "nodes": self._nodes,
        }
        self._json = json.dumps(state, separators=(",", ":")).encode()
