"""The ``dafka`` command line.

``dafka tower`` runs a tower and ``dafka store [DIR]`` a store until Ctrl-C or SIGTERM (the
same Rust code as the ``dafka-tower`` and ``dafka-store`` binaries: ``dafka store --help``
lists their flags and ``--config FILE``); ``dafka produce TOPIC`` publishes one record per stdin
line; ``dafka consume TOPIC`` prints records (``--positions FILE`` resumes where the last
run with that file stopped, ``--group G`` shares the topic with group G's other members
and resumes from its commits); ``dafka groups`` lists the consumer groups and ``dafka
groups describe GROUP`` shows one's members, commits and lag; ``dafka cluster`` lists the
nodes the towers relay by kind, ``dafka topics`` every topic's partitions, offsets per
store, bytes and live producers, ``dafka describe TOPIC`` one topic and the groups that
read it (``--json`` on each); ``dafka offsets TOPIC`` lists each
partition's first and next offset as the stores (and live producers) report them
(where ``--from-beginning`` starts, what retention kept); ``dafka demo`` runs a local cluster
(tower, store, producer, consumer), checks every record arrives in order, then replays
the topic from the store to a late consumer. ``dafka console --listen HOST:PORT`` serves
a read-only live web page of the cluster (topics, offsets, groups, throughput).
``dafka wire demo`` encodes every Dafka message in both dialects, decodes it back and
checks the round trip; ``dafka wire encode`` and ``dafka wire decode`` work on hex frames.
``dafka log inspect PATH`` lists the partitions of a log directory (and, on stderr with
exit status 1, those whose damage recovery refuses; ``--verify`` reads every record
too) and ``dafka log dump PATH TOPIC PARTITION --from N`` prints records (offset, append
time, create time, key, headers, value); both open the log read-only.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from dafka import wire
from dafka._cli_console import _add_console_parser
from dafka._cli_groups import _add_groups_parser
from dafka._cli_log import _cmd_keygen, _cmd_log_dump, _cmd_log_inspect
from dafka._cli_nodes import (
    _NATIVE_COMMANDS,
    _add_node_args,
    _cmd_consume,
    _cmd_demo,
    _cmd_native,
    _cmd_offsets,
    _cmd_produce,
    _count,
    _natural,
    _offset,
    _run_native,
    _seconds,
    _time_arg,
)
from dafka._cli_view import _add_view_parsers
from dafka._cli_wire import _cmd_decode, _cmd_encode, _cmd_wire_demo
from dafka._defaults import WIRE
from dafka.exceptions import DafkaError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dafka", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    # Parsed by the Rust command line: `main` hands everything after the name over.
    for name, what in (("tower", "a tower"), ("store", "a store")):
        native = sub.add_parser(
            name, help=f"run {what} until Ctrl-C (see dafka {name} --help)", add_help=False
        )
        native.add_argument("args", nargs=argparse.REMAINDER)
        native.set_defaults(func=_cmd_native)

    pr = sub.add_parser("produce", help="publish one record per stdin line")
    _add_node_args(pr, "producer")
    pr.add_argument(
        "--min-acks",
        # A producer tracks the ACKs of at most 1,024 stores.
        type=_natural("a number of stores", 1024),
        default=1,
        help="stores that must ACK, 0 to 1024 (default 1)",
    )
    pr.add_argument(
        "--linger",
        type=_seconds,
        default=10.0,
        help="seconds to wait at EOF for ACKs, serving FETCHes (default 10); records "
        "still not acknowledged then exit 1",
    )
    pr.add_argument(
        "--record-batches",
        action="store_true",
        help="publish in RECORD-BATCH messages (this project's wire extension; nodes "
        "that do not know it fetch the records)",
    )
    pr.add_argument(
        "--key-separator",
        metavar="SEP",
        help="each line is KEY SEP VALUE (a line without SEP: a value with no key), as "
        "kafka-console-producer's parse.key",
    )
    pr.set_defaults(func=_cmd_produce)

    co = sub.add_parser("consume", help="print records, one per line")
    _add_node_args(co, "consumer")
    co.add_argument("--from-beginning", action="store_true", help="offset_reset=earliest")
    co.add_argument(
        "--from-time",
        type=_time_arg,
        metavar="TIME",
        help="start each partition at its first record at or after TIME: ms since the "
        "epoch or ISO 8601 (2026-11-27T09:00, local time; or with +00:00)",
    )
    co.add_argument(
        "--keys", action="store_true", help="prefix each value with its key and a tab (- for none)"
    )
    co.add_argument("--count", type=_count, help="stop after this many records")
    co.add_argument(
        "--timeout", type=_seconds, help="stop after this many idle seconds (default: never)"
    )
    co.add_argument(
        "--offsets", action="store_true", help="prefix each value with partition, offset"
    )
    co.add_argument(
        "--positions",
        type=Path,
        metavar="FILE",
        help="resume from the positions saved in FILE (JSON partition: next offset; the "
        "partitions it does not name, born since, start at their first record) and save "
        "them there on exit",
    )
    co.add_argument(
        "--group",
        metavar="GROUP",
        help="join consumer group GROUP: share the topic's partitions with its other "
        "members and resume from its commits (each partition a new group never committed "
        "starts as --from-beginning says); commits what was printed every 5 s and on exit",
    )
    co.set_defaults(func=_cmd_consume)
    _add_groups_parser(sub)
    _add_view_parsers(sub)

    of = sub.add_parser(
        "offsets", help="each partition's first and next offset, as the stores report them"
    )
    _add_node_args(of, "consumer")
    of.add_argument(
        "--timeout", type=_seconds, default=10.0, help="seconds to wait for a store (default 10)"
    )
    of.add_argument(
        "--at",
        type=_time_arg,
        metavar="TIME",
        help="instead: each partition's first offset at or after TIME (ms since the epoch "
        "or ISO 8601), as offsets_for_times finds it",
    )
    of.set_defaults(func=_cmd_offsets)
    _add_console_parser(sub)

    de = sub.add_parser(
        "demo",
        help="run a local cluster and check every record arrives (plaintext: the demo "
        "cluster lives on 127.0.0.1 and takes no --cert/--trust)",
    )
    de.add_argument("--records", type=_count, default=100_000)
    de.add_argument("--wire", choices=["rfc", "zproto"], default=WIRE)
    de.add_argument("--timeout", type=_seconds, default=60.0, help="per step, seconds")
    de.add_argument("--data", help="store directory (default: a temporary one)")
    de.set_defaults(func=_cmd_demo)

    w = sub.add_parser("wire", help="encode and decode Dafka messages")
    wsub = w.add_subparsers(dest="wire_command", required=True)
    demo = wsub.add_parser("demo", help="round-trip every message in both dialects")
    demo.set_defaults(func=_cmd_wire_demo)
    dec = wsub.add_parser("decode", help="decode a message given as hex frames")
    dec.add_argument("frames", nargs="+", metavar="HEX")
    dec.set_defaults(func=_cmd_decode)
    enc = wsub.add_parser("encode", help="encode a message, printing one hex frame a line")
    enc.add_argument("kind", choices=sorted(wire._CLASSES))
    enc.add_argument("--dialect", choices=["rfc", "zproto"], default="rfc")
    enc.add_argument("--topic", required=True)
    enc.add_argument("--address")
    enc.add_argument("--subject")
    enc.add_argument("--sequence", type=_offset)
    enc.add_argument("--count", type=_natural("a count", 2**32 - 1))
    enc.add_argument("--content")
    enc.add_argument("--subjects", nargs="*")
    enc.add_argument("--values", nargs="*", help="a batch's values")
    enc.set_defaults(func=_cmd_encode)

    kg = sub.add_parser(
        "keygen",
        help="write a CURVE certificate pair (NAME.key, NAME.key_secret) for a secure cluster",
    )
    kg.add_argument("directory", type=Path)
    kg.add_argument("name", help="letters, digits, '.', '-' and '_'")
    kg.add_argument("--role", required=True, choices=["store", "producer", "consumer", "tower"])
    kg.add_argument(
        "--topics",
        help="comma-separated topic patterns its holder may read and write, * for any "
        "run of characters (default: every topic)",
    )
    kg.set_defaults(func=_cmd_keygen)

    lg = sub.add_parser("log", help="inspect a durable log directory (read-only)")
    lsub = lg.add_subparsers(dest="log_command", required=True)
    ins = lsub.add_parser("inspect", help="list topics and partitions with their offsets")
    ins.add_argument("path")
    ins.add_argument(
        "--verify",
        action="store_true",
        help="read every record and check its CRC (opening checks only each segment's tail)",
    )
    ins.set_defaults(func=_cmd_log_inspect)
    dump = lsub.add_parser(
        "dump",
        help="print records, one a line, tab-separated: offset, append time (ms), create "
        "time (ms), key, headers (JSON [name, value] pairs), value; - where a record has none",
    )
    dump.add_argument("path")
    dump.add_argument("topic")
    dump.add_argument("partition")
    dump.add_argument("--from", dest="start", type=_offset, help="first offset (default: first)")
    dump.add_argument("--count", type=_count, help="at most this many records")
    dump.add_argument(
        "--hex", action="store_true", help="print values, keys and header values as hex"
    )
    dump.set_defaults(func=_cmd_log_dump)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _NATIVE_COMMANDS:
        try:
            return _run_native(argv[0], argv[1:])
        except KeyboardInterrupt:
            return 130
    parser = build_parser()
    args = parser.parse_args(argv)
    # What the nodes warn of (no tower heard, records not acknowledged) on stderr.
    logging.basicConfig(level=logging.WARNING, format="dafka: %(message)s")
    if (getattr(args, "cert", None) is None) != (getattr(args, "trust", None) is None):
        parser.error(
            "--cert and --trust go together: secure mode needs this node's secret "
            "certificate (--cert NAME.key_secret) and the trust directory (--trust DIR)"
        )
    try:
        return int(args.func(args))
    except DafkaError as e:
        print(f"dafka: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except UnicodeEncodeError as e:
        # A topic (or other name) that is not valid UTF-8, from the command line.
        print(
            f"dafka: an argument is not valid UTF-8 ({e.reason} at character {e.start}): "
            "topics and partitions are UTF-8 text",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:
        # The reader went away (`dafka log dump ... | head`): stop quietly, as
        # other Unix tools do. Python's own flush of stdout at exit would fail
        # again, so stdout points at /dev/null from here on.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool SIGPIPE ended
    except OSError as e:
        # E.g. a --cert or --trust path that cannot be read (the message names it).
        print(f"dafka: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
