"""The ``dafka`` commands that run nodes: ``store`` and ``tower`` (the Rust
command line), ``produce``, ``consume``, ``offsets`` and ``demo``, and the
arguments they share."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from dafka._defaults import BIND, WIRE
from dafka._native import (
    Consumer,
    Producer,
    Record,
    Store,
    Tower,
    offsets,
    offsets_for_times,
    run_store_cli,
    run_tower_cli,
)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a command the way Ctrl-C does: a clean close (the commands
    that catch the interrupt exit 0; one that does not, 130)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _discovery(args: argparse.Namespace) -> tuple[list[str] | None, list[str] | None]:
    towers: list[str] | None = args.tower or None
    peers: list[str] | None = args.peer or None
    if towers is None and peers is None:
        towers = ["tcp://127.0.0.1:5556,5557"]
    return towers, peers


_NATIVE_COMMANDS = {"store": run_store_cli, "tower": run_tower_cli}


def _run_native(command: str, argv: list[str]) -> int:
    """``dafka store`` / ``dafka tower``: the Rust command line, SIGTERM acting as Ctrl-C.

    A server started from a script with ``&`` inherits SIGINT ignored, and Python
    leaves an ignored SIGINT ignored: ``kill -INT`` would do nothing, while the Rust
    binaries stop on it. These two commands stop on SIGINT whatever they inherited."""
    old_int = signal.getsignal(signal.SIGINT)
    if old_int is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with _sigterm_as_interrupt():
            return _NATIVE_COMMANDS[command](argv)
    finally:
        if old_int is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _cmd_native(args: argparse.Namespace) -> int:
    return _run_native(args.command, list(args.args))


def _cmd_produce(args: argparse.Namespace) -> int:
    """Exits 1 when records were not acknowledged by ``--min-acks`` stores within
    ``--linger`` seconds of the end of input: stores may not hold them."""
    towers, peers = _discovery(args)
    with (
        _sigterm_as_interrupt(),
        Producer(
            args.topic,
            min_acks=args.min_acks,
            towers=towers,
            peers=peers,
            record_batches=args.record_batches,
            close_timeout=args.linger,
            **_node_kwargs(args),
        ) as p,
    ):
        print(f"producing to {args.topic!r} as partition {p.address}", file=sys.stderr)
        count = 0
        sep = None if args.key_separator is None else args.key_separator.encode()
        try:
            for line in sys.stdin.buffer:
                line = line.rstrip(b"\r\n")
                if sep is not None and sep in line:
                    key, value = line.split(sep, 1)
                    p.send(value, key=key)
                else:
                    p.send(line)
                count += 1
            left = p.close()
        except KeyboardInterrupt:
            left = p.close(timeout=0)
        print(f"sent {count} records", file=sys.stderr)
    if left:
        print(
            f"dafka: {left} of {count} records not acknowledged by {args.min_acks} "
            f"store(s) after {args.linger}s: is a store running and reachable through "
            "the towers?",
            file=sys.stderr,
        )
        return 1
    return 0


def _load_positions(path: Path | None) -> dict[str, int] | None:
    """Positions saved by an earlier ``consume --positions PATH`` (None: no file yet)."""
    if path is None or not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"dafka: cannot read positions from {path}: {e}") from e
    if not isinstance(saved, dict) or not all(
        isinstance(k, str) and type(v) is int and 0 <= v <= _U64_MAX for k, v in saved.items()
    ):
        raise SystemExit(
            f"dafka: {path} must hold a JSON object of partition: offset (0 to 2**64 - 1); "
            "delete it to start over"
        )
    return saved


def _save_positions(path: Path, c: Consumer, unprinted: Sequence[Record] = ()) -> None:
    """Writes ``c.positions()`` to ``path`` atomically (a new file, then a rename),
    each partition's position moved back to its first record in ``unprinted``
    (taken from the consumer but not known to be written out): a run resumed from
    the file prints them (again, at worst), never skips them."""
    positions = c.positions()
    for r in unprinted:
        positions[r.partition] = min(positions.get(r.partition, r.offset), r.offset)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(positions, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        raise SystemExit(f"dafka: cannot save positions to {path}: {e}") from e


def _time_arg(s: str) -> str:
    """``--from-time`` / ``--at``: ms since the epoch or an ISO 8601 time, checked
    here so a typo is an argparse error, not a traceback."""
    s = s.strip()
    if s.isdigit():
        return s
    try:
        datetime.fromisoformat(s)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{s!r} is neither ms since the epoch nor an ISO 8601 time such as "
            "2026-11-27T09:00 (local time) or 2026-11-27T09:00:00+00:00"
        ) from None
    return s


def _cmd_consume(args: argparse.Namespace) -> int:
    if args.from_time is not None and args.from_beginning:
        raise SystemExit("dafka: --from-time and --from-beginning exclude each other")
    if args.group is not None and args.positions is not None:
        raise SystemExit(
            "dafka: --group and --positions exclude each other: a group keeps its "
            "positions in the stores (its commits)"
        )
    reset = "earliest" if args.from_beginning else "latest"
    out = sys.stdout
    towers, peers = _discovery(args)
    starts = _load_positions(args.positions)
    group: dict[str, Any] = {} if args.group is None else {"group": args.group}
    with (
        _sigterm_as_interrupt(),
        Consumer(
            [args.topic],
            offset_reset=reset,
            towers=towers,
            peers=peers,
            start_offsets=starts,
            start_time=args.from_time,
            **group,
            **_node_kwargs(args),
        ) as c,
    ):
        how = reset if args.from_time is None else f"from {args.from_time}"
        if args.group is not None:
            how += f", group {args.group!r}"
        print(f"consuming {args.topic!r} ({how}) as {c.address}", file=sys.stderr, flush=True)
        count = 0
        # Taken but not yet flushed to stdout: an interrupted write (SIGTERM, a
        # closed pipe) leaves them out of the saved positions.
        unprinted: list[Record] = []
        try:
            while args.count is None or count < args.count:
                # Take no more than is printed: positions() counts what was taken.
                left = 10000 if args.count is None else min(10000, args.count - count)
                unprinted = c.poll_many(max_records=left, timeout=args.timeout)
                if not unprinted:
                    break
                for r in unprinted:
                    if args.offsets:
                        out.write(f"{r.partition} {r.offset} ")
                    if args.keys:
                        key = "-" if r.key is None else r.key.decode(errors="replace")
                        out.write(f"{key}\t")
                    out.write(r.value.decode(errors="replace") + "\n")
                    count += 1
                out.flush()
                unprinted = []
        except KeyboardInterrupt:
            pass
        finally:
            if args.positions is not None:
                _save_positions(args.positions, c, unprinted)
    return 0


def _cmd_offsets(args: argparse.Namespace) -> int:
    towers, peers = _discovery(args)
    if args.at is not None:
        at = offsets_for_times(
            args.topic,
            args.at,
            towers=towers,
            peers=peers,
            timeout=args.timeout,
            **_node_kwargs(args),
        )
        if not at:
            print(f"{args.topic!r}: no store holds a partition of it")
            return 0
        print(f"{'PARTITION':<34} {'OFFSET':>12}   (first record at or after {args.at})")
        for p, off in sorted(at.items()):
            print(f"{p:<34} {off:>12}")
        return 0
    got = offsets(
        args.topic, towers=towers, peers=peers, timeout=args.timeout, **_node_kwargs(args)
    )
    if not got:
        print(f"{args.topic!r}: no store or producer holds a partition of it")
        return 0
    print(f"{'PARTITION':<34} {'FIRST':>12} {'NEXT':>12} {'RECORDS':>12}")
    for p, (first, nxt) in sorted(got.items()):
        print(f"{p:<34} {first:>12} {nxt:>12} {nxt - first:>12}")
    return 0


def _drain_check(c: Consumer, partition: str, n: int, timeout: float) -> tuple[int, bool]:
    """Reads up to ``n`` records of ``partition`` (a store reused with ``--data`` also
    holds earlier runs'); returns how many arrived and if all were right."""
    got: list[int] = []
    ok = True
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for r in c.poll_many(timeout=0.5):
            if r.partition == partition:
                ok = ok and r.value == b"record %d" % r.offset
                got.append(r.offset)
    return len(got), ok and got == list(range(n))


def _demo_consumer(topic: str, towers: list[str], wire: str) -> Consumer:
    return Consumer(
        [topic],
        towers=towers,
        wire=wire,
        offset_reset="earliest",
        beacon_interval=0.2,
        beacon_timeout=2.0,
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    n, topic = args.records, "demo"
    print(f"starting a local cluster: tower, store, producer, consumer ({args.wire} dialect)")
    with (
        _sigterm_as_interrupt(),  # so the temporary store is removed on SIGTERM too
        tempfile.TemporaryDirectory(prefix="dafka-demo-") as tmp,
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
    ):
        towers = [tower.endpoint]
        data = args.data or tmp
        print(f"  tower     {tower.endpoint}")
        with Store(
            data, towers=towers, wire=args.wire, beacon_interval=0.2, beacon_timeout=2.0
        ) as store:
            print(f"  store     {store.address} at {store.endpoint}, data in {data}")
            with (
                _demo_consumer(topic, towers, args.wire) as live,
                Producer(
                    topic,
                    towers=towers,
                    wire=args.wire,
                    head_interval=0.2,
                    beacon_interval=0.2,
                    beacon_timeout=2.0,
                ) as p,
            ):
                print(f"  consumer  {live.address} at {live.endpoint}")
                print(f"  producer  {p.address} at {p.endpoint}")
                start = time.monotonic()
                for i in range(0, n, 1000):
                    p.send_many([b"record %d" % j for j in range(i, min(n, i + 1000))])
                left = p.flush(args.timeout)
                print(
                    f"sent {n} records to {topic!r}; the store ACKed "
                    f"{n - left} durably in {time.monotonic() - start:.2f}s"
                )
                got, ok = _drain_check(live, p.address, n, args.timeout)
                stats = live.stats()
                print(
                    f"live consumer: {got}/{n} records, {'in order' if ok else 'NOT in order'}"
                    f" ({stats['gaps']} gaps repaired by {stats['fetches_sent']} FETCHes)"
                )
                ok = ok and left == 0
            print("producer closed; a late consumer replays the topic from the store alone")
            start = time.monotonic()
            with _demo_consumer(topic, towers, args.wire) as late:
                got, late_ok = _drain_check(late, p.address, n, args.timeout)
            print(
                f"late consumer: {got}/{n} records from the store, "
                f"{'in order' if late_ok else 'NOT in order'} in {time.monotonic() - start:.2f}s"
            )
            for info in store.partitions(topic):
                print(
                    f"store holds {info.topic}/{info.partition}: offsets "
                    f"{info.first_offset}..{info.next_offset - 1}, {info.bytes} bytes on disk"
                )
            ok = ok and late_ok
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


_U64_MAX = 2**64 - 1


def _natural(what: str, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: an integer from 0 (to ``high``), else a usage error."""
    bound = ">= 0" if high is None else f"from 0 to {high}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0 or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what} {bound}, got {text!r}")
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse ``type=``: a finite number of seconds >= 0, else a usage error."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds >= 0, e.g. 2.5, got {text!r}"
        )
    return value


_offset = _natural("an offset", _U64_MAX)
_count = _natural("a count")


def _add_node_args(p: argparse.ArgumentParser, role: str, topic: bool = True) -> None:
    """The topic (if ``topic``) and the discovery and security flags; ``role`` is the
    one a ``--cert`` must have."""
    if topic:
        p.add_argument("topic")
    p.add_argument(
        "--tower",
        action="append",
        metavar="ENDPOINT",
        help="tower to discover peers through, tcp://HOST:IN[,OUT] "
        "(default tcp://127.0.0.1:5556,5557 unless --peer is given)",
    )
    p.add_argument("--peer", action="append", metavar="ENDPOINT", help="static peer XPUB endpoint")
    p.add_argument("--wire", choices=["rfc", "zproto"], default=WIRE)
    p.add_argument(
        "--bind",
        default=BIND,
        metavar="ENDPOINT",
        help="the node's XPUB endpoint (default reachable from this host only: use "
        "tcp://*:0 with towers or peers on other hosts)",
    )
    p.add_argument(
        "--advertise-host",
        metavar="HOST",
        help="host put in beacons (default: the bound host; '' lets the tower use the "
        "TCP peer address)",
    )
    p.add_argument(
        "--cert",
        type=Path,
        metavar="FILE",
        help="secure mode (docs/security.md): this node's secret certificate, NAME.key_secret "
        f"from 'dafka keygen --role {role}'; needs --trust, and --tower/--peer endpoints "
        "with their keys (tcp://HOST:IN,OUT;curve=KEY)",
    )
    p.add_argument(
        "--trust",
        type=Path,
        metavar="DIR",
        help="secure mode: the directory of trusted public certificates (NAME.key); needs --cert",
    )


def _node_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """What every node of the CLI takes from ``_add_node_args``."""
    return {
        "wire": args.wire,
        "bind": args.bind,
        "advertise_host": args.advertise_host,
        "cert": args.cert,
        "trust": args.trust,
    }
