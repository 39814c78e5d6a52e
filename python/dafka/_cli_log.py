"""``dafka log inspect`` / ``dafka log dump`` (a log directory, read-only) and
``dafka keygen``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dafka.exceptions import CorruptionError
from dafka.log import Log, StoredRecord


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
