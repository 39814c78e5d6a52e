"""The ``dafka`` command line.

``dafka tower`` runs a tower and ``dafka store [DIR]`` a store until Ctrl-C or SIGTERM (the
same Rust code as the ``dafka-tower`` and ``dafka-store`` binaries: ``dafka store --help``
lists their flags and ``--config FILE``); ``dafka produce TOPIC`` publishes one record per stdin
line; ``dafka consume TOPIC`` prints records (``--positions FILE`` resumes where the last
run with that file stopped); ``dafka offsets TOPIC`` lists each
partition's first and next offset as the stores (and live producers) report them
(where ``--from-beginning`` starts, what retention kept); ``dafka demo`` runs a local cluster
(tower, store, producer, consumer), checks every record arrives in order, then replays
the topic from the store to a late consumer.
``dafka wire demo`` encodes every Dafka message in both dialects, decodes it back and
checks the round trip; ``dafka wire encode`` and ``dafka wire decode`` work on hex frames.
``dafka log inspect PATH`` lists the partitions of a log directory (and, on stderr with
exit status 1, those whose damage recovery refuses; ``--verify`` reads every record
too) and ``dafka log dump PATH TOPIC PARTITION --from N`` prints records (offset, append
time, create time, key, headers, value); both open the log read-only.
"""

from __future__ import annotations

import argparse
import json
import logging
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

from dafka import wire
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
from dafka.exceptions import CorruptionError, DafkaError
from dafka.log import Log, StoredRecord

_DEMO_PARTITION = b"85E3C6EBDC7B4156AD9C43611EBC09CE"
_DEMO_NODE = b"9E51FBAE55A649C1A50C0B360F3FF7AE"


def _demo_messages() -> list[wire.Message]:
    p, n = _DEMO_PARTITION, _DEMO_NODE
    return [
        wire.Record(topic=b"weather", address=p, subject=b"weather", sequence=0, content=b"21.5"),
        wire.DirectRecord(topic=n, address=p, subject=b"weather", sequence=0, content=b"21.5"),
        wire.Fetch(topic=p, address=n, subject=b"weather", sequence=0, count=10),
        wire.Ack(topic=p, address=n, subject=b"weather", sequence=0),
        wire.Head(topic=b"weather", address=p, subject=b"weather", sequence=0),
        wire.DirectHead(topic=n, address=p, subject=b"weather", sequence=0),
        wire.GetHeads(topic=b"weather", address=n),
        wire.ConsumerHello(topic=n, address=p, subjects=(b"weather",)),
        wire.StoreHello(topic=p, address=n),
        wire.RecordBatch(
            topic=b"weather", address=p, subject=b"weather", sequence=1, values=(b"22.0", b"22.4")
        ),
        wire.DirectRecordBatch(
            topic=n, address=p, subject=b"weather", sequence=1, values=(b"22.0", b"22.4")
        ),
    ]


def _show(message: wire.Message) -> str:
    fields = {k: v for k, v in message.__dict__.items() if k != "dialect"}
    parts = []
    for k, v in fields.items():
        parts.append(f"{k}={v.decode(errors='replace') if isinstance(v, bytes) else v!r}")
    return f"{message.kind} [{message.dialect}] " + " ".join(parts)


def _cmd_wire_demo(_: argparse.Namespace) -> int:
    failures = 0
    for message in _demo_messages():
        for dialect in wire.DIALECTS:
            frames = wire.encode(message, dialect)
            back = wire.decode(frames)
            expected = message
            if dialect == "zproto" and isinstance(message, wire.Ack):
                expected = wire.Ack(
                    topic=message.topic, subject=message.subject, sequence=message.sequence
                )
            ok = back == expected and back.dialect == dialect
            failures += not ok
            print(
                f"{'ok ' if ok else 'BAD'} {message.kind:<14} {dialect:<6} "
                + " | ".join(f.hex() for f in frames)
            )
    garbage = [b"M", b"\xaa\xa0\x4d\x01"]
    try:
        wire.decode(garbage)
    except DafkaError as e:
        print(f"ok  malformed input rejected: {e}")
    else:
        failures += 1
        print("BAD malformed input was accepted")
    print("all round trips ok" if not failures else f"{failures} failures")
    return 1 if failures else 0


def _cmd_decode(args: argparse.Namespace) -> int:
    try:
        frames = [bytes.fromhex(h) for h in args.frames]
    except ValueError as e:
        print(f"dafka: frames must be hex strings: {e}", file=sys.stderr)
        return 2
    print(_show(wire.decode(frames)))
    return 0


def _cmd_encode(args: argparse.Namespace) -> int:
    cls = wire._CLASSES[args.kind]
    fields: dict[str, object] = {"topic": args.topic.encode()}
    for name in ("address", "subject", "content"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value.encode()
    for name in ("sequence", "count"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    if args.subjects:
        fields["subjects"] = tuple(s.encode() for s in args.subjects)
    if args.values:
        fields["values"] = tuple(v.encode() for v in args.values)
    try:
        message = cls(**fields)  # type: ignore[arg-type]
    except TypeError as e:
        print(f"dafka: {args.kind} needs other fields: {e}", file=sys.stderr)
        return 2
    for frame in wire.encode(message, args.dialect):
        print(frame.hex())
    return 0


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
    reset = "earliest" if args.from_beginning else "latest"
    out = sys.stdout
    towers, peers = _discovery(args)
    starts = _load_positions(args.positions)
    with (
        _sigterm_as_interrupt(),
        Consumer(
            [args.topic],
            offset_reset=reset,
            towers=towers,
            peers=peers,
            start_offsets=starts,
            start_time=args.from_time,
            **_node_kwargs(args),
        ) as c,
    ):
        how = reset if args.from_time is None else f"from {args.from_time}"
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


def _add_node_args(p: argparse.ArgumentParser, role: str) -> None:
    """The topic and the discovery and security flags; ``role`` is the one a
    ``--cert`` must have."""
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


def _show_topic(topic: str) -> str:
    raw = topic.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return repr(raw)


def _log_path(path: str) -> str:
    """The log directory at ``path``: a store's (``dafka store DIR`` keeps it in
    ``DIR/log``) or ``path`` itself."""
    p = Path(path)
    if (p / "store.id").is_file() and (p / "log").is_dir():
        return str(p / "log")
    return path


def _cmd_log_inspect(args: argparse.Namespace) -> int:
    path = _log_path(args.path)
    with Log(path, read_only=True, retain_hours=None, isolate_damaged=True) as log:
        rows = log.partitions()
        damaged = log.damaged()
        if args.verify:
            # Opening checked each segment's tail; this reads every record.
            for p in rows:
                try:
                    log.verify(p.topic, p.partition)
                except CorruptionError as e:
                    damaged.append((p.topic, p.partition, str(e)))
    for topic, partition, why in damaged:
        print(f"DAMAGED {_show_topic(topic)}/{partition}: {why}", file=sys.stderr)
    if not rows:
        print(f"{args.path}: no partitions")
        return 1 if damaged else 0
    print(f"{'TOPIC':<24} {'PARTITION':<34} {'FIRST':>10} {'NEXT':>10} {'BYTES':>12} SEGMENTS")
    for p in rows:
        print(
            f"{_show_topic(p.topic):<24} {p.partition:<34} "
            f"{p.first_offset:>10} {p.next_offset:>10} {p.bytes:>12} {p.segments}"
        )
    return 1 if damaged else 0


def _dump_line(r: StoredRecord, as_hex: bool) -> str:
    """One record of ``dafka log dump``: tab-separated offset, append time, create
    time, key, headers and value; ``-`` for a create time, key or headers the record
    has none of (an empty key prints as nothing). Headers are a JSON list of
    ``[name, value]`` pairs. Values (and keys, header values) print as text, bytes
    that are not UTF-8 as backslash escapes, or as hex with ``--hex``."""

    def show(b: bytes) -> str:
        return b.hex() if as_hex else b.decode(errors="backslashreplace")

    create = "-" if r.create_time is None else str(r.create_time)
    key = "-" if r.key is None else show(r.key)
    headers = (
        json.dumps([[n, show(v)] for n, v in r.headers], ensure_ascii=False) if r.headers else "-"
    )
    return f"{r.offset}\t{r.timestamp}\t{create}\t{key}\t{headers}\t{show(r.value)}"


def _cmd_log_dump(args: argparse.Namespace) -> int:
    topic = args.topic.encode("utf-8", "surrogateescape")
    remaining = args.count
    # Damage in other partitions is no reason not to dump this one.
    with Log(_log_path(args.path), read_only=True, retain_hours=None, isolate_damaged=True) as log:
        for t, partition, why in log.damaged():
            if partition == args.partition and t.encode("utf-8", "surrogateescape") == topic:
                print(f"dafka: {args.topic}/{partition} is damaged: {why}", file=sys.stderr)
                return 1
        start = args.start
        if start is None:
            start = log.first_offset(topic, args.partition) or 0
        while remaining is None or remaining > 0:
            batch = min(remaining, 1000) if remaining is not None else 1000
            records = log.read(topic, args.partition, start, max_records=batch)
            if not records:
                break
            for r in records:
                print(_dump_line(r, args.hex))
            start = records[-1].offset + 1
            if remaining is not None:
                remaining -= len(records)
    return 0


def _cmd_keygen(args: argparse.Namespace) -> int:
    from dafka.security import keygen

    try:
        public, secret = keygen(args.directory, args.name, role=args.role, topics=args.topics)
    except (FileExistsError, OSError) as e:
        print(f"dafka: {e}", file=sys.stderr)
        return 1
    print(f"public certificate (for trust directories): {public}")
    print(f"secret certificate (keep it on this node):  {secret}")
    return 0


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
    co.set_defaults(func=_cmd_consume)

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
