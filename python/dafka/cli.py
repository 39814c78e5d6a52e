"""The ``dafka`` command line.

``dafka wire demo`` encodes every Dafka message in both dialects, decodes it back and
checks the round trip; ``dafka wire encode`` and ``dafka wire decode`` work on hex frames.
``dafka log inspect PATH`` lists the partitions of a log directory and ``dafka log dump
PATH TOPIC PARTITION --from N`` prints records; both open the log read-only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dafka import wire
from dafka.exceptions import DafkaError
from dafka.log import Log

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
    ]


def _show(message: wire.Message) -> str:
    fields = {k: v for k, v in message.__dict__.items() if k != "dialect"}
    parts = []
    for k, v in fields.items():
        parts.append(f"{k}={v.decode(errors='replace') if isinstance(v, bytes) else v!r}")
    return f"{message.kind} [{message.dialect}] " + " ".join(parts)


def _cmd_demo(_: argparse.Namespace) -> int:
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
    try:
        message = cls(**fields)  # type: ignore[arg-type]
    except TypeError as e:
        print(f"dafka: {args.kind} needs other fields: {e}", file=sys.stderr)
        return 2
    for frame in wire.encode(message, args.dialect):
        print(frame.hex())
    return 0


def _show_topic(topic: str) -> str:
    raw = topic.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return repr(raw)


def _cmd_log_inspect(args: argparse.Namespace) -> int:
    with Log(args.path, read_only=True, retain_hours=None) as log:
        rows = log.partitions()
    if not rows:
        print(f"{args.path}: no partitions")
        return 0
    print(f"{'TOPIC':<24} {'PARTITION':<34} {'FIRST':>10} {'NEXT':>10} {'BYTES':>12} SEGMENTS")
    for p in rows:
        print(
            f"{_show_topic(p.topic):<24} {p.partition:<34} "
            f"{p.first_offset:>10} {p.next_offset:>10} {p.bytes:>12} {p.segments}"
        )
    return 0


def _cmd_log_dump(args: argparse.Namespace) -> int:
    topic = args.topic.encode("utf-8", "surrogateescape")
    remaining = args.count
    with Log(args.path, read_only=True, retain_hours=None) as log:
        start = args.start
        if start is None:
            start = log.first_offset(topic, args.partition) or 0
        while remaining is None or remaining > 0:
            batch = min(remaining, 1000) if remaining is not None else 1000
            records = log.read(topic, args.partition, start, max_records=batch)
            if not records:
                break
            for r in records:
                value = r.value.hex() if args.hex else r.value.decode(errors="backslashreplace")
                print(f"{r.offset}\t{r.timestamp}\t{value}")
            start = records[-1].offset + 1
            if remaining is not None:
                remaining -= len(records)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dafka", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    w = sub.add_parser("wire", help="encode and decode Dafka messages")
    wsub = w.add_subparsers(dest="wire_command", required=True)
    demo = wsub.add_parser("demo", help="round-trip every message in both dialects")
    demo.set_defaults(func=_cmd_demo)
    dec = wsub.add_parser("decode", help="decode a message given as hex frames")
    dec.add_argument("frames", nargs="+", metavar="HEX")
    dec.set_defaults(func=_cmd_decode)
    enc = wsub.add_parser("encode", help="encode a message, printing one hex frame a line")
    enc.add_argument("kind", choices=sorted(wire._CLASSES))
    enc.add_argument("--dialect", choices=["rfc", "zproto"], default="rfc")
    enc.add_argument("--topic", required=True)
    enc.add_argument("--address")
    enc.add_argument("--subject")
    enc.add_argument("--sequence", type=int)
    enc.add_argument("--count", type=int)
    enc.add_argument("--content")
    enc.add_argument("--subjects", nargs="*")
    enc.set_defaults(func=_cmd_encode)

    lg = sub.add_parser("log", help="inspect a durable log directory (read-only)")
    lsub = lg.add_subparsers(dest="log_command", required=True)
    ins = lsub.add_parser("inspect", help="list topics and partitions with their offsets")
    ins.add_argument("path")
    ins.set_defaults(func=_cmd_log_inspect)
    dump = lsub.add_parser("dump", help="print records: offset, timestamp (ms), value")
    dump.add_argument("path")
    dump.add_argument("topic")
    dump.add_argument("partition")
    dump.add_argument("--from", dest="start", type=int, help="first offset (default: first)")
    dump.add_argument("--count", type=int, help="at most this many records")
    dump.add_argument("--hex", action="store_true", help="print values as hex")
    dump.set_defaults(func=_cmd_log_dump)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except DafkaError as e:
        print(f"dafka: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
