"""dafka.Record: construction, equality, hashing, repr, immutability, pickling."""

from __future__ import annotations

import copy
import pickle

import pytest

import dafka
from dafka import Record

P = "85E3C6EBDC7B4156AD9C43611EBC09CE"


def test_construction_positional_and_keyword() -> None:
    r = Record("t", P, 3, b"v")
    assert (r.topic, r.partition, r.offset, r.value, r.timestamp) == ("t", P, 3, b"v", None)
    assert Record(topic="t", partition=P, offset=3, value=b"v") == r
    assert Record("t", P, offset=3, value=b"v") == r
    assert Record("t", P, 3, b"v", timestamp=5).timestamp == 5
    assert dafka.record.Record is Record and type(r).__module__ == "dafka"


def test_timestamp_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        Record("t", P, 3, b"v", 5)  # type: ignore[call-arg]


def test_fields_are_type_checked() -> None:
    with pytest.raises(TypeError):
        Record("t", P, 3, "v")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Record(b"t", P, 3, b"v")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="offset must be an integer from 0"):
        Record("t", P, -1, b"v")


def test_equality_and_hash_cover_every_field() -> None:
    r = Record("t", P, 3, b"v", timestamp=7)
    same = Record("t", P, 3, b"v", timestamp=7)
    assert r == same and (r != same) is False and hash(r) == hash(same)
    # Every field: the dataclass's five, then key, headers and timestamp type.
    assert hash(r) == hash(("t", P, 3, b"v", 7, None, (), 0))
    for other in (
        Record("u", P, 3, b"v", timestamp=7),
        Record("t", "Q", 3, b"v", timestamp=7),
        Record("t", P, 4, b"v", timestamp=7),
        Record("t", P, 3, b"w", timestamp=7),
        Record("t", P, 3, b"v"),
        Record("t", P, 3, b"v", timestamp=7, timestamp_type=1),
        Record("t", P, 3, b"v", timestamp=7, key=b""),
        Record("t", P, 3, b"v", timestamp=7, headers=[("h", b"")]),
    ):
        assert r != other and (r == other) is False
    assert r != ("t", P, 3, b"v", 7)
    assert len({r, same, Record("t", P, 3, b"v")}) == 2
    with pytest.raises(TypeError):
        _ = r < same  # type: ignore[operator]


def test_repr_like_the_dataclass() -> None:
    r = Record("t", "P", 0, b"..")
    assert repr(r) == "Record(topic='t', partition='P', offset=0, value=b'..', timestamp=None)"
    r = Record("t'", "P", 2, b"\x00", timestamp=9)
    assert repr(r) == (
        "Record(topic=\"t'\", partition='P', offset=2, value=b'\\x00', timestamp=9, "
        "timestamp_type=0)"
    )
    assert eval(repr(r), {"Record": Record}) == r
    r = Record("t", "P", 2, b"v", timestamp=9, key=b"k", headers=[("a", b"1")])
    assert repr(r).endswith("timestamp_type=0, key=b'k', headers=[('a', b'1')])")
    assert eval(repr(r), {"Record": Record}) == r


def test_immutable() -> None:
    r = Record("t", P, 3, b"v")
    for name in (
        "topic",
        "partition",
        "offset",
        "value",
        "timestamp",
        "key",
        "headers",
        "timestamp_type",
    ):
        with pytest.raises(AttributeError):
            setattr(r, name, getattr(r, name))
        with pytest.raises(AttributeError):
            delattr(r, name)
    with pytest.raises(AttributeError):
        r.other = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip(protocol: int) -> None:
    for r in (Record("t", P, 3, b"v"), Record("caf\udce9", P, 2**64 - 1, b"", timestamp=5)):
        back = pickle.loads(pickle.dumps(r, protocol))
        assert type(back) is Record and back == r and back.timestamp == r.timestamp
    r = Record("t", P, 3, b"v", timestamp=1)
    assert copy.copy(r) == r and copy.deepcopy(r) == r


def test_match_args() -> None:
    match Record("t", P, 3, b"v"):
        case Record(topic, partition, offset, value):
            assert (topic, partition, offset, value) == ("t", P, 3, b"v")
        case _:
            pytest.fail("Record did not match positionally")


def test_surrogate_escaped_topic() -> None:
    raw = b"caf\xe9"
    r = Record(raw.decode("utf-8", "surrogateescape"), P, 0, b"v")
    assert r.topic.encode("utf-8", "surrogateescape") == raw
    assert r == Record("caf\udce9", P, 0, b"v") and r != Record("café", P, 0, b"v")
    assert hash(r) == hash(Record("caf\udce9", P, 0, b"v"))
    assert "caf\\udce9" in repr(r)
