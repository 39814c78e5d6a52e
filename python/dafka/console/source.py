"""The console's data layer: where its figures come from.

A :class:`Source` answers three questions, each call bounded in time and run by a
background thread of the console (never by an HTTP request):

- :meth:`Source.topics`: every topic with its partitions' first and next offsets
  (and bytes held, where a source knows them); raises :class:`~dafka.DafkaError`
  when the cluster cannot be read (no store reachable), which the page shows;
- :meth:`Source.groups`: the consumer groups with their members and lag;
- :meth:`Source.nodes`: the nodes the towers know, or None where the source cannot
  tell (the page says so).

:class:`ClusterSource` is the one built on the read clients of today
(``dafka.topics``, ``dafka.HeadsWatch``, ``dafka.list_groups``,
``dafka.describe_group``). Another source (say, one built on a cluster-view API)
plugs in through ``Console(source=...)``.
"""

from __future__ import annotations

import os
import time
from typing import Any, NotRequired, Protocol, TypedDict

from dafka._native import HeadsWatch, check_node, describe_group, list_groups
from dafka._native import topics as list_topics
from dafka.view import cluster


class PartitionView(TypedDict):
    """One partition of a topic."""

    partition: str
    #: The lowest offset still held (0 when nobody answered the probe).
    first: int
    #: The next offset (last + 1).
    next: int
    #: Bytes the stores hold of it, where the source knows (the chart's bytes/s).
    bytes: NotRequired[int]


class TopicView(TypedDict):
    topic: str
    partitions: list[PartitionView]


class GroupView(TypedDict):
    """``dafka.describe_group``'s dict (members, partitions with owner, committed,
    head and lag, total lag), or where it failed, the group's name and topics with
    ``error`` set."""

    group: str
    topics: list[str]
    members: list[dict[str, Any]]
    partitions: list[dict[str, Any]]
    lag: int | None
    error: str | None


class NodeView(TypedDict):
    """A node a tower knows."""

    kind: str
    address: str
    endpoint: str
    #: Seconds since the tower last heard it (None: unknown).
    last_heard: float | None


class Source(Protocol):
    """What the console polls (see the module's doc). Calls come from the console's
    own threads: ``topics`` from one, ``groups`` and ``nodes`` from another, never two
    of the same at once; ``close`` after both threads stopped."""

    def topics(self) -> list[TopicView]: ...

    def groups(self) -> list[GroupView]: ...

    def nodes(self) -> list[NodeView] | None: ...

    def close(self) -> None: ...


class ClusterSource:
    """A :class:`Source` on the read clients: the topics from ``dafka.topics()``
    (or the fixed list ``topics``: secure clusters, where only a store may list every
    topic), each topic's offsets from a ``dafka.HeadsWatch`` kept across polls (a
    poll after the first asks once and ends when every store answered again), the
    groups from ``list_groups`` and ``describe_group``, the nodes the towers relay from
    ``dafka.cluster()``. In a secure cluster the stores list the topics the
    certificate allows (a consumer's).

    The settings are checked at once as a read client's (``dafka._native.check_node``:
    ``ConfigError``, ``OSError`` for an unreadable certificate).

    ``timeout`` bounds each read client's call (a poll of an unreachable cluster
    takes that long, then raises), ``settle`` is their settle time, ``listen`` how long
    ``describe_group`` hears a group's members. The stores are asked for their topics
    every ``list_every`` seconds (a new topic shows that much later). At most
    ``max_topics`` topics and ``max_groups`` groups are shown (the first by name).
    ``node`` holds the read clients' discovery and security keywords (``towers``,
    ``peers``, ``wire``, ``bind``, ``advertise_host``, ``cert``, ``trust``, ...)."""

    def __init__(
        self,
        topics: list[str] | None = None,
        *,
        timeout: float = 5.0,
        settle: float = 0.3,
        listen: float = 1.5,
        max_topics: int = 100,
        max_groups: int = 20,
        list_every: float = 5.0,
        **node: Any,
    ) -> None:
        self._fixed = None if topics is None else sorted(set(topics))
        self._timeout = timeout
        self._settle = settle
        self._listen = listen
        self._max_topics = max_topics
        self._max_groups = max_groups
        self._list_every = list_every
        self._listed: tuple[float, list[str]] | None = None
        self._node = {k: v for k, v in node.items() if v is not None}
        for key in ("cert", "trust"):
            if key in self._node:
                self._node[key] = os.fspath(self._node[key])
        # Wrong settings (a certificate of another role than a read client's, a
        # malformed endpoint) fail here, not at every poll.
        check_node(**self._node)
        self._watches: dict[str, HeadsWatch] = {}

    def topics(self) -> list[TopicView]:
        names = self._names()
        for gone in set(self._watches) - set(names):
            self._watches.pop(gone).close()
        out: list[TopicView] = []
        for name in names:
            watch = self._watches.get(name)
            if watch is None:
                watch = self._watches[name] = HeadsWatch(name, **self._node)
            got = watch.offsets(timeout=self._timeout, settle=self._settle)
            parts: list[PartitionView] = [
                {"partition": p, "first": first, "next": nxt}
                for p, (first, nxt) in sorted(got.items())
            ]
            out.append({"topic": name, "partitions": parts})
        return out

    def _names(self) -> list[str]:
        """The topics to show: the fixed ones, else those the stores hold, asked
        again once ``list_every`` seconds passed (each ask is a new client the stores
        connect to, where the heads rounds reuse their watches)."""
        if self._fixed is not None:
            return self._fixed[: self._max_topics]
        now = time.monotonic()
        if self._listed is None or now - self._listed[0] >= self._list_every:
            names = list_topics(timeout=self._timeout, settle=self._settle, **self._node)
            self._listed = (now, names[: self._max_topics])
        return self._listed[1]

    def groups(self) -> list[GroupView]:
        out: list[GroupView] = []
        for g in list_groups(timeout=self._timeout, **self._node)[: self._max_groups]:
            try:
                d = describe_group(
                    g["group"], timeout=self._timeout, listen=self._listen, **self._node
                )
            except Exception as e:  # a group's failure shows on its row, not on all
                out.append(
                    {
                        "group": g["group"],
                        "topics": list(g["topics"]),
                        "members": [],
                        "partitions": [],
                        "lag": None,
                        "error": str(e) or type(e).__name__,
                    }
                )
                continue
            topics_of = sorted({r["topic"] for r in d["partitions"]} | set(g["topics"]))
            out.append(
                {
                    "group": d["group"],
                    "topics": topics_of,
                    "members": d["members"],
                    "partitions": d["partitions"],
                    "lag": d["lag"],
                    "error": None,
                }
            )
        return out

    def nodes(self) -> list[NodeView] | None:
        view = cluster(timeout=self._timeout, **self._node)
        return [
            {
                "kind": n["kind"] or "unknown",
                "address": n["address"],
                "endpoint": n["endpoint"] or "",
                "last_heard": n["last_heard"],
            }
            for n in view["nodes"]
        ]

    def close(self) -> None:
        watches, self._watches = self._watches, {}
        for w in watches.values():
            w.close()
