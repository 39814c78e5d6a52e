"""dafka.Log records with keys, headers and create times (segment format 2), their
``dafka log dump`` lines, and the log checked in under ``tests/data/log-v1``: written
by the code before format 2, it still opens, reads, recovers and takes new records."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

import dafka
from dafka.cli import main
from dafka.log import StoredRecord

P = "85E3C6EBDC7B4156AD9C43611EBC09CE"
DATA = Path(__file__).resolve().parent / "data"
HEADERS = [("", b""), ("trace", b"a"), ("trace", b"b"), ("naïve-名前", b"\x00\xff")]


def _meta(r: StoredRecord) -> tuple[int, bytes, bytes | None, list[tuple[str, bytes]], int | None]:
    return (r.offset, r.value, r.key, r.headers, r.create_time)


def test_keys_headers_and_create_times_round_trip(tmp_path: Path) -> None:
    before = int(time.time() * 1000)
    with dafka.Log(tmp_path, segment_bytes=300) as log:
        log.append("t", P, 0, b"plain")
        log.append("t", P, 1, b"v1", key=b"k", headers=HEADERS, timestamp=1_700_000_000_000)
        log.append("t", P, 2, bytearray(b"v2"), key=memoryview(b""), timestamp=5)
        log.append("t", P, 3, b"", headers=[("h", bytearray(b"x"))])
        log.append_many(
            "t",
            P,
            4,
            [b"a", b"b", b"c"],
            keys=[b"ka", None, b""],
            headers=[None, [("n", b"v")], []],
            timestamps=[10, None, 30],
        )
        log.append_many("t", P, 7, [b"d"], timestamps=[40])
        log.append_many("t", P, 8, [b"e", b"f"])
        assert log.partitions()[0].segments > 1
    want = [
        (0, b"plain", None, [], None),
        (1, b"v1", b"k", HEADERS, 1_700_000_000_000),
        (2, b"v2", b"", [], 5),
        (3, b"", None, [("h", b"x")], None),
        (4, b"a", b"ka", [], 10),
        (5, b"b", None, [("n", b"v")], None),
        (6, b"c", b"", [], 30),
        (7, b"d", None, [], 40),
        (8, b"e", None, [], None),
        (9, b"f", None, [], None),
    ]
    after = int(time.time() * 1000)
    for read_only in (False, True):
        with dafka.Log(tmp_path, read_only=read_only) as log:
            recs = log.read("t", P, 0, max_records=100)
            assert [_meta(r) for r in recs] == want
            assert all(before <= r.timestamp == r.append_time <= after for r in recs)
            assert log.verify("t", P) == 10
            # A record's time is its create time, else its append time.
            assert log.offset_for_time("t", P, 6) == 0  # record 0's append time
            assert log.offset_for_time("t", P, after + 1) is None
    rec = recs[1]
    assert rec == StoredRecord(
        "t", P, 1, b"v1", rec.timestamp, b"k", list(HEADERS), 1_700_000_000_000
    )
    assert hash(rec) == hash(
        StoredRecord("t", P, 1, b"v1", rec.timestamp, b"k", [], rec.create_time)
    )


def test_times_position_by_create_time(tmp_path: Path) -> None:
    """Create times out of order: the first record whose time reaches T."""
    times = [100, 300, 200, 400, 250]
    with dafka.Log(tmp_path, segment_bytes=200, index_interval_bytes=64) as log:
        log.append_many("t", P, 0, [b"x" * 40] * 5, timestamps=times)
        for t, want in [(0, 0), (100, 0), (101, 1), (250, 1), (301, 3), (400, 3), (401, None)]:
            assert log.offset_for_time("t", P, t) == want, t


def test_bad_metadata_arguments_say_what_to_pass(tmp_path: Path) -> None:
    with dafka.Log(tmp_path) as log:
        with pytest.raises(dafka.LogValueError, match="keys has 1 entries for 2 values"):
            log.append_many("t", P, 0, [b"a", b"b"], keys=[b"k"])
        with pytest.raises(dafka.LogValueError, match="timestamps has 3 entries"):
            log.append_many("t", P, 0, [b"a", b"b"], timestamps=[1, 2, 3])
        with pytest.raises(TypeError, match=r"list of \(name, value\) pairs"):
            log.append("t", P, 0, b"v", headers={"a": b"b"})  # type: ignore[dict-item]
        with pytest.raises(TypeError, match="a header name is a str"):
            log.append("t", P, 0, b"v", headers=[(b"a", b"b")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="encode it first"):
            log.append("t", P, 0, b"v", headers=[("a", "text")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="each header is a"):
            log.append("t", P, 0, b"v", headers=[("a",)])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="encode it first"):
            log.append("t", P, 0, b"v", key="k")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timestamp must be an integer from 0"):
            log.append("t", P, 0, b"v", timestamp=-1)
        with pytest.raises(TypeError, match="one entry per value"):
            log.append_many("t", P, 0, [b"a"], keys=b"k")  # type: ignore[arg-type]
        assert log.next_offset("t", P) is None, "nothing was appended"


def test_dump_shows_key_headers_and_both_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with dafka.Log(tmp_path) as log:
        log.append("t", P, 0, b"21.5")
        log.append("t", P, 1, b"v1", key=b"k", headers=HEADERS, timestamp=1_700_000_000_000)
        log.append("t", P, 2, b"v2", key=b"", timestamp=5)
        appended = [r.timestamp for r in log.read("t", P, 0)]
    assert main(["log", "dump", str(tmp_path), "t", P]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    # offset, append time, create time, key, headers, value
    assert [r[:4] + r[5:] for r in rows] == [
        ["0", str(appended[0]), "-", "-", "21.5"],
        ["1", str(appended[1]), "1700000000000", "k", "v1"],
        ["2", str(appended[2]), "5", "", "v2"],
    ]
    assert (rows[0][4], rows[2][4]) == ("-", "-")
    assert json.loads(rows[1][4]) == [
        ["", ""],
        ["trace", "a"],
        ["trace", "b"],
        ["naïve-名前", "\x00\\xff"],
    ]
    assert main(["log", "dump", str(tmp_path), "t", P, "--from", "1", "--count", "1", "--hex"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    fields = line.split("\t")
    assert (fields[3], fields[5]) == (b"k".hex(), b"v1".hex())
    assert json.loads(fields[4])[3] == ["naïve-名前", "00ff"]


def _manifest() -> list[tuple[str, str, int, int, bytes]]:
    raw = json.loads((DATA / "log-v1.json").read_text(encoding="utf-8"))
    return [(t, p, o, ts, bytes.fromhex(v)) for t, p, o, ts, v in raw["records"]]


def test_the_checked_in_format1_log_opens_reads_recovers_and_takes_new_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _manifest()
    root = tmp_path / "log"
    shutil.copytree(DATA / "log-v1", root)
    parts = list(dict.fromkeys((t, p) for t, p, *_ in manifest))
    assert len(parts) == 3

    def old_rows(t: str, p: str, below: int | None = None) -> list[tuple[object, ...]]:
        return [
            (o, ts, v, None, [], None)
            for t2, p2, o, ts, v in manifest
            if (t2, p2) == (t, p) and (below is None or o < below)
        ]

    def rows(recs: list[StoredRecord]) -> list[tuple[object, ...]]:
        return [(r.offset, r.timestamp, r.value, r.key, r.headers, r.create_time) for r in recs]

    with dafka.Log(root, read_only=True, retain_hours=None) as log:
        assert sorted((i.topic, i.partition) for i in log.partitions()) == sorted(parts)
        for t, p in parts:
            want = old_rows(t, p)
            first = log.first_offset(t, p)
            assert first is not None and first == want[0][0]
            assert rows(log.read(t, p, first, max_records=100)) == want
            assert log.verify(t, p) == len(want)
            for o, ts, *_ in want:
                assert log.offset_for_time(t, p, ts) == o  # type: ignore[arg-type]

    # The dump of a record without metadata: "-" for its create time, key, headers.
    t0, p0 = parts[0]
    assert main(["log", "dump", str(root), t0, p0, "--count", "2"]) == 0
    o, ts, v, *_ = old_rows(t0, p0)[0]
    assert capsys.readouterr().out.splitlines()[0] == f"{o}\t{ts}\t-\t-\t-\t{v.decode()}"  # type: ignore[attr-defined]

    # Recovery: indexes gone, the last record of the first partition torn.
    for idx in root.rglob("*.index"):
        idx.unlink()
    last_seg = sorted((root / t0 / p0).glob("*.log"))[-1]
    last_seg.write_bytes(last_seg.read_bytes()[:-2])
    torn = max(o for t, p, o, *_ in manifest if (t, p) == (t0, p0))
    with dafka.Log(root, retain_hours=None) as log:
        assert log.next_offset(t0, p0) == torn
        new = {}
        for t, p in parts:
            at = log.next_offset(t, p)
            assert at is not None
            log.append(t, p, at, b"new", key=b"key", headers=HEADERS, timestamp=1_000 + at)
            log.append_many(t, p, at + 1, [b"", b"plain"], keys=[b"", None])
            new[(t, p)] = at
    with dafka.Log(root, read_only=True, retain_hours=None) as log:
        for t, p in parts:
            at = new[(t, p)]
            recs = log.read(t, p, log.first_offset(t, p) or 0, max_records=100)
            assert rows(recs)[: len(recs) - 3] == old_rows(t, p, below=at)
            assert [_meta(r) for r in recs[-3:]] == [
                (at, b"new", b"key", HEADERS, 1_000 + at),
                (at + 1, b"", b"", [], None),
                (at + 2, b"plain", None, [], None),
            ]
            assert log.verify(t, p) == len(recs)
            # Its create time, older than every append time: it counts.
            assert log.offset_for_time(t, p, 1_000 + at) == recs[0].offset
    # A new segment for the new records; the old ones are as they were.
    segs = sorted((root / "weather" / "0F1E2D3C4B5A69788796A5B4C3D2E1F0").glob("*.log"))
    assert [s.name for s in segs] == [f"{7:020}.log", f"{10:020}.log"]
    assert [s.read_bytes()[8:12] for s in segs] == [b"\0\0\0\1", b"\0\0\0\2"]
    assert (
        segs[0].read_bytes()
        == (
            DATA / "log-v1" / "weather" / "0F1E2D3C4B5A69788796A5B4C3D2E1F0" / segs[0].name
        ).read_bytes()
    )
