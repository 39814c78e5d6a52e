"""The codec through its Python surface: golden vectors, RFC bytes, properties."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dafka
from dafka import wire

KINDS = {
    "RECORD",
    "DIRECT-RECORD",
    "FETCH",
    "ACK",
    "HEAD",
    "DIRECT-HEAD",
    "GET-HEADS",
    "CONSUMER-HELLO",
    "STORE-HELLO",
    "RECORD-BATCH",
    "DIRECT-RECORD-BATCH",
    "ADDRESSED-ACK",
}
ADDR = b"85E3C6EBDC7B4156AD9C43611EBC09CE"


def test_golden_vectors_decode_and_reencode(vectors: list[dict[str, Any]]) -> None:
    checked = 0
    for v in vectors:
        if v["type"] not in KINDS:
            continue
        frames = [bytes.fromhex(h) for h in v["frames_hex"]]
        d = v["decoded"]
        m = wire.decode(frames)
        assert m.kind == v["type"]
        assert m.dialect == "zproto"
        assert m.topic == d["topic"].encode()
        for name in ("address", "subject", "sequence", "count"):
            got = getattr(m, name, None)
            want = d.get(name)
            if isinstance(want, str):
                want = want.encode()
            assert got == want, (v["type"], name)
        if "content_hex" in d:
            assert m.content.hex() == d["content_hex"]  # type: ignore[attr-defined]
        if "subjects" in d:
            assert list(m.subjects) == [s.encode() for s in d["subjects"]]  # type: ignore[attr-defined]
        assert wire.encode(m, "zproto") == frames
        checked += 1
    assert checked == 79


def _all_messages() -> list[wire.Message]:
    n = b"9E51FBAE55A649C1A50C0B360F3FF7AE"
    return [
        wire.Record(topic=b"t", address=ADDR, subject=b"t", sequence=5, content=b"x" * 100),
        wire.DirectRecord(topic=n, address=ADDR, subject=b"t", sequence=5, content=b""),
        wire.Fetch(topic=ADDR, address=n, subject=b"t", sequence=5, count=3),
        wire.Ack(topic=ADDR, address=n, subject=b"t", sequence=5),
        wire.Ack(topic=ADDR, subject=b"t", sequence=5),
        wire.AddressedAck(topic=ADDR, address=n, subject=b"t", sequence=5),
        wire.Head(topic=b"t", address=ADDR, subject=b"t", sequence=5),
        wire.DirectHead(topic=n, address=ADDR, subject=b"t", sequence=5),
        wire.GetHeads(topic=b"t", address=n),
        wire.ConsumerHello(topic=n, address=ADDR, subjects=(b"a", b"b")),
        wire.ConsumerHello(topic=n, address=ADDR),
        wire.StoreHello(topic=ADDR, address=n),
        wire.RecordBatch(topic=b"t", address=ADDR, subject=b"t", sequence=5, values=(b"a", b"")),
        wire.DirectRecordBatch(topic=n, address=ADDR, subject=b"t", sequence=5, values=(b"b",)),
    ]


@pytest.mark.parametrize("message", _all_messages(), ids=lambda m: m.kind)
def test_rfc_round_trip(message: wire.Message) -> None:
    frames = wire.encode(message)
    back = wire.decode(frames)
    assert back == message
    assert back.dialect == "rfc"
    assert frames[1][:2] == b"\xaa\xa5"
    assert len(frames) == (3 if isinstance(message, wire.Record | wire.RecordBatch) else 2)


def test_rfc_record_bytes_by_hand() -> None:
    m = wire.Record(topic="hello", address=ADDR, subject="hello", sequence=258, content=b"one")
    frames = wire.encode(m)
    assert frames == [
        b"Mhello",
        b"\xaa\xa5M\x01" + b"\x20" + ADDR + b"\x05hello" + (258).to_bytes(8, "big"),
        b"one",
    ]


def test_record_batch_bytes_by_hand_and_what_it_refuses() -> None:
    m = wire.RecordBatch(topic="t", address=ADDR, subject="t", sequence=7, values=(b"one", b""))
    frames = wire.encode(m)
    assert frames == [
        b"Rt",
        b"\xaa\xa5R\x01\x20" + ADDR + b"\x01t" + (7).to_bytes(8, "big") + (2).to_bytes(4, "big"),
        b"\x00\x00\x00\x03one\x00\x00\x00\x00",
    ]
    back = wire.decode(frames)
    assert back == m and isinstance(back, wire.RecordBatch) and back.values == (b"one", b"")
    zproto = wire.encode(m, "zproto")
    assert len(zproto) == 2 and wire.decode(zproto) == m
    with pytest.raises(dafka.WireError, match="at least one record"):
        wire.encode(wire.RecordBatch(topic=b"t", address=ADDR, subject=b"t", sequence=0))
    with pytest.raises(dafka.WireError, match="last offset must be below"):
        wire.encode(replace(m, sequence=2**64 - 2))
    assert wire.decode(wire.encode(replace(m, sequence=2**64 - 3))).sequence == 2**64 - 3
    # The count says three values, the frame holds two; one value cut short.
    three = frames[1][:-4] + (3).to_bytes(4, "big")
    with pytest.raises(dafka.WireError, match="truncated values"):
        wire.decode([frames[0], three, frames[2]])
    with pytest.raises(dafka.WireError, match="truncated values"):
        wire.decode([frames[0], frames[1], frames[2][:-5]])
    with pytest.raises(dafka.WireError, match="trailing bytes in frame 2"):
        wire.decode([frames[0], frames[1], frames[2] + b"x"])


def test_zproto_ack_drops_address() -> None:
    m = wire.Ack(topic=ADDR, address=b"S", subject=b"t", sequence=1)
    back = wire.decode(wire.encode(m, "zproto"))
    assert isinstance(back, wire.Ack)
    assert back.address is None
    assert back.dialect == "zproto"


@pytest.mark.parametrize(
    ("frames", "needle"),
    [
        ([], "frame count"),
        ([b""], "truncated id"),
        ([b"Zt", b""], "unknown message id"),
        ([b"Ht", b"\xaa\xa0H\x01"], "bad signature"),
        ([b"Ht", b"\xaa\xa5H\x30"], "bad version"),
        ([b"Ht", b"\xaa\xa5H\x01\x01"], "truncated address"),
        ([b"Gt", b"\xaa\xa5G\x01\x00\x00"], "trailing bytes"),
        ([b"Ht", b"", b"", b""], "wrong frame count"),
    ],
)
def test_malformed_raises_wire_error(frames: list[bytes], needle: str) -> None:
    with pytest.raises(dafka.WireError, match=needle) as info:
        wire.decode(frames)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, dafka.DafkaError)


def test_encode_errors() -> None:
    with pytest.raises(dafka.WireError, match="at most 255"):
        wire.encode(wire.GetHeads(topic=b"t", address=b"a" * 256))
    with pytest.raises(dafka.WireError, match="NUL"):
        wire.encode(wire.GetHeads(topic=b"a\0b", address=b"a"), "zproto")
    with pytest.raises(ValueError, match="dialect"):
        wire.encode(wire.GetHeads(topic=b"t", address=b"a"), "json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sequence"):
        wire.Head(topic=b"t", address=b"a", subject=b"t", sequence=-1)
    with pytest.raises(TypeError, match="bytes or str"):
        wire.Head(topic=1, address=b"a", subject=b"t", sequence=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"sequence must be an int from 0 to 2\*\*64 - 1"):
        wire.Head(topic=b"t", address=b"a", subject=b"t", sequence=2**64)


small = st.binary(max_size=255)


@st.composite
def messages(draw: st.DrawFn) -> wire.Message:
    kind = draw(st.sampled_from(sorted(KINDS)))
    topic = draw(st.binary(max_size=40).filter(lambda b: b"\0" not in b))
    seq = draw(st.integers(0, 2**64 - 1))
    cls = wire._CLASSES[kind]
    if kind in ("RECORD", "DIRECT-RECORD"):
        return cls(  # type: ignore[call-arg]
            topic=topic,
            address=draw(small),
            subject=draw(small),
            sequence=seq,
            content=draw(st.binary(max_size=3000)),
        )
    if kind == "FETCH":
        return wire.Fetch(
            topic=topic,
            address=draw(small),
            subject=draw(small),
            sequence=seq,
            count=draw(st.integers(0, 2**32 - 1)),
        )
    if kind == "ACK":
        return wire.Ack(
            topic=topic, address=draw(st.none() | small), subject=draw(small), sequence=seq
        )
    if kind in ("HEAD", "DIRECT-HEAD", "ADDRESSED-ACK"):
        return cls(topic=topic, address=draw(small), subject=draw(small), sequence=seq)  # type: ignore[call-arg]
    if kind in ("RECORD-BATCH", "DIRECT-RECORD-BATCH"):
        values = tuple(draw(st.lists(st.binary(max_size=300), min_size=1, max_size=5)))
        return cls(  # type: ignore[call-arg]
            topic=topic,
            address=draw(small),
            subject=draw(small),
            sequence=min(seq, 2**64 - 2 - len(values)),
            values=values,
        )
    if kind == "CONSUMER-HELLO":
        return wire.ConsumerHello(
            topic=topic,
            address=draw(small),
            subjects=tuple(draw(st.lists(st.binary(max_size=300), max_size=4))),
        )
    return cls(topic=topic, address=draw(small))  # type: ignore[call-arg]


@settings(max_examples=400, deadline=None)
@given(messages(), st.sampled_from(["rfc", "zproto"]))
def test_property_round_trip(message: wire.Message, dialect: str) -> None:
    back = wire.decode(wire.encode(message, dialect))  # type: ignore[arg-type]
    assert back.dialect == dialect
    if dialect == "zproto" and isinstance(message, wire.Ack):
        message = wire.Ack(topic=message.topic, subject=message.subject, sequence=message.sequence)
    assert back == message


@settings(max_examples=600, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=5))
def test_property_garbage_never_crashes(frames: list[bytes]) -> None:
    with contextlib.suppress(dafka.WireError):
        wire.decode(frames)


def test_cli_demo_and_decode() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dafka.cli", "wire", "demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "all round trips ok" in out
    assert out.count("ok ") >= 18
    enc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dafka.cli",
            "wire",
            "encode",
            "HEAD",
            "--topic",
            "t",
            "--address",
            "P",
            "--subject",
            "t",
            "--sequence",
            "7",
            "--dialect",
            "zproto",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert enc == [(b"Ht\x00\x01\x01P\x01t" + (7).to_bytes(8, "big")).hex()]
    dec = subprocess.run(
        [sys.executable, "-m", "dafka.cli", "wire", "decode", *enc],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "HEAD [zproto]" in dec and "sequence=7" in dec
    bad = subprocess.run(
        [sys.executable, "-m", "dafka.cli", "wire", "decode", "4d"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "wrong frame count" in bad.stderr
