"""``dafka cluster``, ``dafka topics`` and ``dafka describe TOPIC`` (each with
``--json``): the cluster view of :mod:`dafka.view` (docs/operations.md, "Cluster
view")."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dafka._cli_nodes import _add_node_args, _discovery, _node_kwargs, _seconds
from dafka.view import cluster, describe_topic, describe_topics


def _kw(args: argparse.Namespace) -> dict[str, Any]:
    towers, peers = _discovery(args)
    kw: dict[str, Any] = {"towers": towers, "peers": peers, "timeout": args.timeout}
    kw["listen"] = args.listen
    kw.update(_node_kwargs(args))
    return kw


def _cell(v: object) -> str:
    return "-" if v is None else str(v)


def _cmd_cluster(args: argparse.Namespace) -> int:
    v = cluster(**_kw(args))
    if args.json:
        print(json.dumps(v, indent=2))
        return 0
    counts = ", ".join(f"{n} {k}" for k, n in v["counts"].items() if n)
    print(f"towers {', '.join(v['towers']) or '-'}: {counts or 'no node heard'}")
    print(f"{'KIND':<9} {'ADDRESS':<34} {'ENDPOINT':<28} {'LAST HEARD':>10}")
    for n in v["nodes"]:
        heard = "-" if n["last_heard"] is None else f"{n['last_heard']:.1f}s"
        print(f"{_cell(n['kind']):<9} {n['address']:<34} {_cell(n['endpoint']):<28} {heard:>10}")
    return 0


def _print_topic(t: dict[str, Any]) -> None:
    n = len(t["partitions"])
    print(f"topic {t['topic']!r}: {n} partition(s), {t['records']} records, {t['bytes']} bytes")
    print(f"  {'PARTITION':<34} {'FIRST':>10} {'NEXT':>10} {'BYTES':>12} {'LIVE':>5} STORES")
    for p in t["partitions"]:
        live = "yes" if p["live"] else "no"
        print(
            f"  {p['partition']:<34} {p['first']:>10} {p['next']:>10} {p['bytes']:>12} "
            f"{live:>5} {len(p['stores'])}"
        )


def _cmd_topics(args: argparse.Namespace) -> int:
    topics = describe_topics(**_kw(args))
    if args.json:
        print(json.dumps(topics, indent=2))
        return 0
    if not topics:
        print("no store holds a partition of any topic")
    for t in topics:
        _print_topic(t)
    return 0


def _cmd_describe(args: argparse.Namespace) -> int:
    t = describe_topic(args.topic, groups=not args.no_groups, **_kw(args))
    if args.json:
        print(json.dumps(t, indent=2))
        return 0
    _print_topic(t)
    for g in t["groups"]:
        print(f"group {g['group']!r}: {len(g['members'])} live member(s), lag {g['lag']}")
        for r in g["partitions"]:
            print(
                f"  {r['partition']:<34} owner {_cell(r['owner'])} committed "
                f"{_cell(r['committed'])} head {_cell(r['head'])} lag {_cell(r['lag'])}"
            )
    return 0


def _common(p: argparse.ArgumentParser, topic: bool = False) -> None:
    _add_node_args(p, "consumer", topic=topic)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        help="seconds to wait for a tower or store (default 10)",
    )
    p.add_argument(
        "--listen",
        type=_seconds,
        default=None,
        help="seconds to hear the nodes' beacons (default one and a half beacon intervals)",
    )


def _add_view_parsers(sub: Any) -> None:
    """``cluster``, ``topics`` and ``describe TOPIC`` on the command line's subparsers."""
    c = sub.add_parser("cluster", help="the nodes the towers relay, by kind")
    _common(c)
    c.set_defaults(func=_cmd_cluster)
    t = sub.add_parser(
        "topics", help="every topic: partitions, first/next offsets per store, bytes, live"
    )
    _common(t)
    t.set_defaults(func=_cmd_topics)
    d = sub.add_parser(
        "describe", help="one topic as 'topics' shows it, and the groups that read it"
    )
    _common(d, topic=True)
    d.add_argument("--no-groups", action="store_true", help="skip the consumer groups")
    d.set_defaults(func=_cmd_describe)
