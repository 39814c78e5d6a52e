"""``dafka console``: serves the live web page of the cluster (docs/console.md) until
Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from typing import Any

from dafka._cli_nodes import (
    _add_node_args,
    _discovery,
    _node_kwargs,
    _seconds,
    _sigterm_as_interrupt,
)


def _listen(text: str) -> str:
    from dafka.console import parse_listen

    try:
        parse_listen(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def _cmd_console(args: argparse.Namespace) -> int:
    from dafka.console import Console

    towers, peers = _discovery(args)
    with (
        _sigterm_as_interrupt(),
        Console(
            listen=args.listen,
            topics=args.topic,
            interval=args.interval,
            timeout=args.timeout,
            towers=towers,
            peers=peers,
            **_node_kwargs(args),
        ) as console,
    ):
        # The first line says where (with --listen HOST:0, the port picked).
        print(f"dafka console: {console.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
        print("dafka console: stopped", file=sys.stderr)
    return 0


def _add_console_parser(sub: Any) -> None:
    """``console`` on the command line's subparsers."""
    c = sub.add_parser(
        "console",
        help="serve a read-only live web page of the cluster (topics, offsets, groups, "
        "throughput), see docs/console.md",
    )
    _add_node_args(c, "consumer", topic=False)
    c.add_argument(
        "--listen",
        type=_listen,
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="where the page is served (default 127.0.0.1:8080, this host only; port 0 "
        "picks a free one, printed on the first line)",
    )
    c.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="show this topic (repeat for several); default: every topic the stores hold "
        "(in a secure cluster, those the certificate allows)",
    )
    c.add_argument(
        "--interval",
        type=_positive_seconds,
        default=1.0,
        help="seconds between two polls of the topics (default 1)",
    )
    c.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=5.0,
        help="seconds a poll waits for the stores before the page says no cluster is "
        "reachable (default 5)",
    )
    c.set_defaults(func=_cmd_console)
