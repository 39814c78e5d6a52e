"""The cluster view: :func:`cluster`, :func:`describe_topics` and
:func:`describe_topic` (``dafka cluster``, ``dafka topics``, ``dafka describe``).

Built on the network protocol, never on a store's files: the nodes are the beacons
the towers relay, the partitions what each store answers to a PARTITIONS-QUERY
(PROTOCOL.md, "Extensions"), the groups what :func:`dafka.list_groups` and
:func:`dafka.describe_group` find. Every function returns plain dicts, lists, strings,
numbers, booleans and None, which ``json.dumps`` takes as they are. Each takes the
options every read client takes (``towers``, ``peers``, ``cert``, ``trust``, ...);
in a secure cluster a consumer-role certificate sees the topics it may read only.
"""

from __future__ import annotations

from typing import Any

from dafka._native import cluster_view, describe_group, list_groups

__all__ = ["cluster", "describe_topic", "describe_topics"]

#: The kinds :func:`cluster` counts, in the order it lists nodes (None: not shown yet).
KINDS = ("store", "producer", "consumer", None)


def _by_kind(node: dict[str, Any]) -> tuple[int, str]:
    return (KINDS.index(node["kind"]), node["address"])


def cluster(
    *, timeout: float = 10.0, listen: float | None = None, **options: Any
) -> dict[str, Any]:
    """The towers' view of the cluster.

    Returns ``{"towers": [str], "nodes": [node], "counts": {kind: int}}``, each node
    ``{"address": str, "kind": "store" | "producer" | "consumer" | None, "endpoint":
    str | None, "key": str | None, "last_heard": float | None}`` (nodes sorted by kind,
    then address; ``kind`` None: its subscriptions did not show it within ``listen``;
    ``last_heard``: seconds since the towers last relayed its beacon; ``key``: its
    CURVE key in a secure cluster), ``counts`` per kind (``"unknown"`` for None).
    Listens ``listen`` seconds (None: one and a half ``beacon_interval``, enough to hear
    every live node's beacon). Raises ``FetchTimeoutError`` when no tower is heard
    within ``timeout``.
    """
    v = cluster_view(None, timeout=timeout, listen=listen, **options)
    nodes = sorted(v["nodes"], key=_by_kind)
    counts = {k or "unknown": sum(1 for n in nodes if n["kind"] == k) for k in KINDS}
    return {"towers": v["towers"], "nodes": nodes, "counts": counts}


def _topics(view: dict[str, Any]) -> list[dict[str, Any]]:
    """The partitions of a ``cluster_view`` by topic."""
    live = {n["address"] for n in view["nodes"] if n["last_heard"] is not None}
    parts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in view["partitions"]:
        parts.setdefault((p["topic"], p["partition"]), []).append(p)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), held in sorted(parts.items()):
        first = min(h["first"] for h in held)
        nxt = max(h["next"] for h in held)
        topics.setdefault(topic, []).append(
            {
                "partition": partition,
                "first": first,
                "next": nxt,
                "records": nxt - first,
                "bytes": max(h["bytes"] for h in held),
                "live": partition in live,
                "stores": [
                    {k: h[k] for k in ("store", "first", "next", "bytes")}
                    for h in sorted(held, key=lambda h: h["store"])
                ],
            }
        )
    return [
        {
            "topic": topic,
            "partitions": ps,
            "records": sum(p["records"] for p in ps),
            "bytes": sum(p["bytes"] for p in ps),
        }
        for topic, ps in topics.items()
    ]


def describe_topics(
    *, timeout: float = 10.0, listen: float | None = None, **options: Any
) -> list[dict[str, Any]]:
    """Every topic the stores hold, sorted by name: ``[{"topic": str, "partitions":
    [partition], "records": int, "bytes": int}]``, each partition ``{"partition": str,
    "first": int, "next": int, "records": int, "bytes": int, "live": bool, "stores":
    [{"store": str, "first": int, "next": int, "bytes": int}]}``.

    ``first`` is the lowest first offset any store still holds, ``next`` the highest
    next offset (last + 1), ``records`` their difference; ``bytes`` the largest copy's
    bytes on a store's disk (each store holds a whole copy; records still in a store's
    write buffer are not counted), a topic's the sum over its partitions; ``live``
    whether the partition's producer (its name is the producer's address) beaconed
    within ``beacon_timeout``; ``stores`` what each store holds. Asks every store
    (PARTITIONS-QUERY) and listens ``listen`` seconds for the producers' beacons (None:
    one and a half ``beacon_interval``). Raises ``FetchTimeoutError`` when no store
    answers within ``timeout``. A consumer-role certificate sees the topics it may read
    only.
    """
    return _topics(cluster_view("", timeout=timeout, listen=listen, **options))


def describe_topic(
    topic: str,
    *,
    timeout: float = 10.0,
    listen: float | None = None,
    groups: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """One topic as :func:`describe_topics` shows it (``partitions`` empty, ``records``
    and ``bytes`` 0, when no store holds it), plus ``"groups"``: the consumer groups
    that committed on it, each ``{"group": str, "members": [{"address": str,
    "partitions": [str]}], "partitions": [{"partition", "owner", "committed", "head",
    "lag"}], "lag": int}`` restricted to this topic (as :func:`dafka.describe_group`
    gives them; ``groups=False`` skips them, and the second or two they take). Raises
    ``FetchTimeoutError`` when no store answers within ``timeout``, and ``ConfigError``
    at once when a secure client's certificate does not allow ``topic``.
    """
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"topic must be a non-empty str, got {topic!r}")
    found = _topics(cluster_view(topic, timeout=timeout, listen=listen, **options))
    out: dict[str, Any] = next(
        (t for t in found if t["topic"] == topic),
        {"topic": topic, "partitions": [], "records": 0, "bytes": 0},
    )
    out["groups"] = _groups_of(topic, timeout, options) if groups else []
    return out


def _groups_of(topic: str, timeout: float, options: dict[str, Any]) -> list[dict[str, Any]]:
    """The groups that committed on ``topic``, described for it alone."""
    out = []
    for g in list_groups(timeout=timeout, **options):
        if topic not in g["topics"]:
            continue
        d = describe_group(g["group"], timeout=timeout, **options)
        rows = [
            {k: r[k] for k in ("partition", "owner", "committed", "head", "lag")}
            for r in d["partitions"]
            if r["topic"] == topic
        ]
        members = [
            {
                "address": m["address"],
                "partitions": [p for t, p in m["partitions"] if t == topic],
            }
            for m in d["members"]
            if topic in m["topics"]
        ]
        lag = sum(r["lag"] or 0 for r in rows)
        out.append({"group": g["group"], "members": members, "partitions": rows, "lag": lag})
    return out
