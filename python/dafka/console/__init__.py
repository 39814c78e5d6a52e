"""``dafka console``: a read-only live web page of the cluster (docs/console.md).

:class:`Console` runs it in-process: a :class:`~dafka.console.poller.Poller`
(background threads polling a :class:`~dafka.console.source.Source`, by default a
:class:`~dafka.console.source.ClusterSource` on the read clients) and a
:class:`~dafka.console.server.ConsoleServer` serving ``/`` (one static page) and
``/api/cluster`` (the last snapshot, as JSON).
"""

from __future__ import annotations

import threading
from typing import Any, Literal, Self

from dafka.console.poller import Poller
from dafka.console.server import ConsoleServer, page, parse_listen
from dafka.console.source import (
    ClusterSource,
    GroupView,
    NodeView,
    PartitionView,
    Source,
    TopicView,
)

__all__ = [
    "ClusterSource",
    "Console",
    "ConsoleServer",
    "GroupView",
    "NodeView",
    "PartitionView",
    "Poller",
    "Source",
    "TopicView",
    "page",
    "parse_listen",
]


class Console:
    """The console, serving on ``listen`` (``HOST:PORT``; port 0 picks a free one,
    :attr:`url` tells which) until :meth:`close`.

    The figures come from ``source`` if given, else from a
    :class:`~dafka.console.source.ClusterSource` of ``topics`` (None: every topic the
    stores hold) made with ``timeout`` and the read clients' keywords in ``node``
    (``towers``, ``peers``, ``wire``, ``bind``, ``advertise_host``, ``cert``,
    ``trust``...). Topics are polled every ``interval`` seconds, groups and nodes
    every ``slow_interval``; the chart keeps ``window`` seconds. ``max_connections``,
    ``request_timeout`` and ``request_deadline`` bound the HTTP clients
    (:class:`~dafka.console.server.ConsoleServer`). Raises ``ValueError`` for a
    malformed ``listen`` or interval, ``OSError`` when the address cannot be bound."""

    def __init__(
        self,
        *,
        listen: str = "127.0.0.1:8080",
        topics: list[str] | None = None,
        interval: float = 1.0,
        slow_interval: float = 5.0,
        window: float = 300.0,
        timeout: float = 5.0,
        source: Source | None = None,
        max_connections: int = 64,
        request_timeout: float = 10.0,
        request_deadline: float = 30.0,
        **node: Any,
    ) -> None:
        address = parse_listen(listen)
        for name, value in (
            ("interval", interval),
            ("slow_interval", slow_interval),
            ("window", window),
            ("timeout", timeout),
            ("request_timeout", request_timeout),
            ("request_deadline", request_deadline),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections!r}")
        if source is None:
            source = ClusterSource(topics, timeout=timeout, **node)
        self.poller = Poller(source, interval=interval, slow_interval=slow_interval, window=window)
        try:
            self.server = ConsoleServer(
                address,
                self.poller,
                max_connections=max_connections,
                timeout=request_timeout,
                deadline=request_deadline,
            )
        except BaseException:
            source.close()
            raise
        self.poller.start()
        self._thread = threading.Thread(
            target=self.server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="dafka-console-http",
            daemon=True,
        )
        self._thread.start()
        self._closed = False

    @property
    def url(self) -> str:
        """The page's URL, ``http://HOST:PORT/`` (the port bound)."""
        return self.server.url

    def snapshot(self) -> dict[str, Any]:
        """What ``/api/cluster`` answers now (:meth:`Poller.snapshot`)."""
        return self.poller.snapshot()

    def close(self) -> None:
        """Stops serving and polling (idempotent). A poll in progress is waited for
        up to 30 s (it is bounded by ``timeout``), then left to end on its own."""
        if self._closed:
            return
        self._closed = True
        self.server.shutdown()
        self.server.server_close()
        self.poller.close(timeout=30.0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> Literal[False]:
        self.close()
        return False
