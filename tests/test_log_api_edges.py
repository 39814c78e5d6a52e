"""Edges of the Python API over the durable log and the store (dafka.Log, dafka.Store,
dafka.Record), found by a review (session 21): each test failed before its fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import dafka

P = "85E3C6EBDC7B4156AD9C43611EBC09CE"


def _store(path: Path) -> dafka.Store:
    return dafka.Store(path, bind="tcp://127.0.0.1:*", retain_hours=None)


def test_store_partitions_keeps_non_utf8_topics_as_log_does(tmp_path: Path) -> None:
    # A store's log holds raw topic bytes (the wire carries bytes). dafka.Log lists
    # them surrogate-escaped, as Record.topic documents; Store.partitions() must
    # give the same names, or two distinct topics collapse into one 'caf\ufffd'.
    with dafka.Log(tmp_path / "log") as log:
        log.append(b"caf\xfe", P, 0, b"x")
        log.append(b"caf\xff", P, 0, b"y")
        expected = sorted(i.topic for i in log.partitions())
    assert expected == ["caf\udcfe", "caf\udcff"]
    with _store(tmp_path) as store:
        got = sorted(i.topic for i in store.partitions())
    assert got == expected


def test_store_partitions_filters_on_a_surrogate_escaped_topic(tmp_path: Path) -> None:
    # The name Log.partitions()/Record.topic give for a non-UTF-8 topic must be
    # accepted back as a filter, not raise UnicodeEncodeError.
    with dafka.Log(tmp_path / "log") as log:
        log.append(b"caf\xff", P, 0, b"y")
        (info,) = log.partitions()
    with _store(tmp_path) as store:
        got = store.partitions(info.topic)
    assert [i.partition for i in got] == [P]


def test_store_path_is_the_directory_as_given(tmp_path: Path) -> None:
    # Store.path is documented as "the store's directory, as given"; a directory
    # name that is not UTF-8 (surrogate-escaped, as os.fsdecode gives it) comes
    # back with U+FFFD instead, a path that does not exist.
    where = tmp_path / os.fsdecode(b"caf\xff")
    with _store(where) as store:
        got = store.path
    assert got == str(where)
    assert os.path.isdir(got)


def test_surrogate_partition_name_is_a_log_value_error(tmp_path: Path) -> None:
    # LogValueError is documented for an invalid partition name ("x\0" gets one,
    # with a message saying what a name may hold); a lone surrogate escapes as a
    # bare UnicodeEncodeError that names neither the argument nor the rule.
    with dafka.Log(tmp_path) as log:
        with pytest.raises(dafka.LogValueError, match="partition name"):
            log.append("t", "x\x00", 0, b"v")
        with pytest.raises(dafka.LogValueError, match="partition name"):
            log.append("t", "\udcff", 0, b"v")
