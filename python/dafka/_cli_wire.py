"""``dafka wire``: round-trips every message (``demo``), encodes and decodes hex
frames."""

from __future__ import annotations

import argparse
import sys

from dafka import wire
from dafka.exceptions import DafkaError

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
