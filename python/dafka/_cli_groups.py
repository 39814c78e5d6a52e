"""``dafka groups``: the consumer groups the stores hold commits of, and
``dafka groups describe GROUP [--json]``: a group's members, their partitions,
commits, heads and lag (docs/groups.md, "Lag")."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dafka._cli_nodes import _add_node_args, _discovery, _node_kwargs, _seconds
from dafka._native import describe_group, list_groups


def _cmd_groups(args: argparse.Namespace) -> int:
    towers, peers = _discovery(args)
    kw: dict[str, Any] = {"towers": towers, "peers": peers, "timeout": args.timeout}
    kw.update(_node_kwargs(args))
    if args.groups_command == "describe":
        d = describe_group(args.group, listen=args.listen, **kw)
        if args.json:
            print(json.dumps(d, indent=2))
        else:
            _print_description(d)
        return 0
    groups = list_groups(**kw)
    if args.json:
        print(json.dumps(groups, indent=2))
        return 0
    if not groups:
        print("no store holds a commit of any group")
        return 0
    print(f"{'GROUP':<24} {'PARTITIONS':>10}   TOPICS")
    for g in groups:
        print(f"{g['group']:<24} {g['partitions']:>10}   {','.join(g['topics'])}")
    return 0


def _print_description(d: dict[str, Any]) -> None:
    def cell(v: object) -> str:
        return "-" if v is None else str(v)

    members = d["members"]
    print(f"group {d['group']!r}: {len(members)} live member(s), total lag {d['lag']}")
    for m in members:
        print(f"  member {m['address']} ({','.join(m['topics'])}): {len(m['partitions'])} held")
    print(
        f"{'TOPIC':<16} {'PARTITION':<34} {'OWNER':<34} {'COMMITTED':>10} {'HEAD':>10} {'LAG':>8}"
    )
    for r in d["partitions"]:
        print(
            f"{r['topic']:<16} {r['partition']:<34} {cell(r['owner']):<34} "
            f"{cell(r['committed']):>10} {cell(r['head']):>10} {cell(r['lag']):>8}"
        )


def _add_groups_parser(sub: Any) -> None:
    """``groups`` and ``groups describe GROUP`` on the command line's subparsers."""
    g = sub.add_parser(
        "groups",
        help="consumer groups the stores hold commits of; 'groups describe GROUP' for one",
    )
    _add_node_args(g, "consumer", topic=False)
    g.add_argument("--json", action="store_true", help="print JSON")
    g.add_argument(
        "--timeout", type=_seconds, default=10.0, help="seconds to wait for a store (default 10)"
    )
    gsub = g.add_subparsers(dest="groups_command")
    de = gsub.add_parser("describe", help="members, partitions, commits, heads and lag")
    de.add_argument("group")
    de.add_argument("--json", action="store_true", help="print JSON")
    de.add_argument(
        "--listen",
        type=_seconds,
        default=1.5,
        help="seconds to hear the members' announcements (default 1.5: above one and a "
        "half of their beacon_interval)",
    )
    g.set_defaults(func=_cmd_groups)
