"""dafka.Log: the Python face of the segment store, its CLI, and a kill test."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import dafka
from dafka.cli import main
from dafka.log import StoredRecord

P = "85E3C6EBDC7B4156AD9C43611EBC09CE"


def value(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).digest() * (1 + i % 5)


def test_append_read_reopen(tmp_path: Path) -> None:
    with dafka.Log(tmp_path, segment_bytes=1024) as log:
        log.append("weather", P, 5, b"first")
        log.append_many("weather", P, 6, [value(i) for i in range(6, 60)])
        assert log.next_offset("weather", P) == 60
        assert log.first_offset("weather", P) == 5
        recs = log.read("weather", P, 5, max_records=3)
        assert [r.offset for r in recs] == [5, 6, 7]
        assert recs[0] == StoredRecord("weather", P, 5, b"first", recs[0].timestamp)
        assert (recs[0].key, recs[0].headers, recs[0].create_time) == (None, [], None)
        assert isinstance(recs[0].timestamp, int) and recs[0].timestamp > 1_600_000_000_000
        assert len(log.read("weather", P, 6, max_bytes=1)) == 1
        log.flush()
        (info,) = log.partitions()
        assert info.topic == "weather" and info.partition == P
        assert (info.first_offset, info.next_offset, info.durable_next) == (5, 60, 60)
        assert info.segments > 1 and info.bytes > 0
        assert log.partitions("other") == []
        assert log.topics() == ["weather"]
    assert log.closed
    with pytest.raises(dafka.LogError, match="closed"):
        log.read("weather", P, 5)
    log.close()  # twice is fine
    with dafka.Log(tmp_path) as log:
        recs = log.read("weather", P, 6, max_records=100)
        assert [r.value for r in recs] == [value(i) for i in range(6, 60)]
        when = recs[10].timestamp
        assert when is not None
        found = log.offset_for_time("weather", P, when)
        assert found is not None and found <= 16
        stamps = {r.offset: r.timestamp for r in log.read("weather", P, 5, max_records=100)}
        assert all(stamps[o] < when for o in range(5, found))
        assert stamps[found] >= when
        assert log.offset_for_time("weather", P, when + 10**9) is None


def test_errors_are_typed(tmp_path: Path) -> None:
    with dafka.Log(tmp_path) as log:
        log.append("t", P, 0, b"a")
        with pytest.raises(dafka.OffsetError, match="a gap"):
            log.append("t", P, 2, b"c")
        with pytest.raises(ValueError, match="already stored"):
            log.append("t", P, 0, b"a")
        with pytest.raises(dafka.OffsetError, match="out of range"):
            log.read("t", P, 5)
        with pytest.raises(dafka.UnknownPartitionError):
            log.read("nope", P, 0)
        with pytest.raises(dafka.LogValueError, match="partition name"):
            log.append("t", "../x", 0, b"a")
    with dafka.Log(tmp_path) as log, pytest.raises(dafka.LogError, match="elsewhere"):
        dafka.Log(tmp_path)
    with pytest.raises(dafka.LogValueError, match="fsync"):
        dafka.Log(tmp_path, fsync="sometimes")  # type: ignore[arg-type]
    with pytest.raises(dafka.LogValueError, match="segment_bytes"):
        dafka.Log(tmp_path, segment_bytes=1)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(dafka.LogIOError, match="file") as e:
        dafka.Log(blocker / "log")
    assert isinstance(e.value, OSError)


def test_non_utf8_topics_round_trip(tmp_path: Path) -> None:
    raw = b"caf\xe9/\x00"
    with dafka.Log(tmp_path) as log:
        log.append(raw, P, 0, b"v")
    with dafka.Log(tmp_path) as log:
        (topic,) = log.topics()
        assert topic.encode("utf-8", "surrogateescape") == raw
        (rec,) = log.read(topic, P, 0)
        assert rec.value == b"v" and rec.topic.encode("utf-8", "surrogateescape") == raw
        assert rec == StoredRecord(topic, P, 0, b"v", rec.timestamp)


def test_cli_inspect_and_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with dafka.Log(tmp_path) as log:
        log.append_many("weather", P, 0, [b"21.5", b"22.0", b"\xff"])
    assert main(["log", "inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert P in out and "weather " in out
    assert main(["log", "dump", str(tmp_path), "weather", P, "--from", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["1", "2"]
    assert lines[0].endswith("\t22.0")
    assert main(["log", "dump", str(tmp_path), "weather", P, "--count", "1", "--hex"]) == 0
    assert capsys.readouterr().out.strip().endswith(b"21.5".hex())
    assert main(["log", "dump", str(tmp_path), "weather", P, "--from", "9"]) == 1
    assert "out of range" in capsys.readouterr().err


def test_damaged_partition_set_aside_and_listed_by_inspect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = P, "B" * 32
    with dafka.Log(tmp_path, segment_bytes=2000) as log:
        for part in (good, bad):
            log.append_many("weather", part, 0, [value(i) for i in range(100)])
    seg = sorted((tmp_path / "weather" / bad).glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[60:62] = b"\xff\xff"
    seg.write_bytes(bytes(data))
    for idx in (tmp_path / "weather" / bad).glob("*.index"):
        idx.unlink()
    with pytest.raises(dafka.CorruptionError, match="sealed segment"):
        dafka.Log(tmp_path)
    with dafka.Log(tmp_path, isolate_damaged=True) as log:
        ((topic, part, why),) = log.damaged()
        assert (topic, part) == ("weather", bad) and "sealed segment" in why
        assert [p.partition for p in log.partitions()] == [good]
        assert len(log.read("weather", good, 0, max_records=1000)) == 100
        with pytest.raises(dafka.DafkaError, match="could not be opened"):
            log.append("weather", bad, 100, b"x")
    assert main(["log", "inspect", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert good in captured.out and bad not in captured.out
    assert f"DAMAGED weather/{bad}" in captured.err


def test_inspect_verify_finds_damage_in_the_middle_of_a_segment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A flipped byte in the middle of the active segment of a cleanly closed log:
    opening checks only the tail, so the log opens and a plain ``inspect`` lists it;
    ``Log.verify`` and ``inspect --verify`` read every record and find it."""
    good, bad = P, "B" * 32
    with dafka.Log(tmp_path) as log:
        for part in (good, bad):
            log.append_many("weather", part, 0, [value(i) for i in range(100)])
    seg = sorted((tmp_path / "weather" / bad).glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    at = data.index(value(50))
    data[at + 3] ^= 0xFF
    seg.write_bytes(bytes(data))
    with dafka.Log(tmp_path, read_only=True) as log:
        assert log.verify("weather", good) == 100
        with pytest.raises(dafka.CorruptionError, match=r"offset 50\)"):
            log.verify("weather", bad)
        assert len(log.read("weather", bad, 0, max_records=50)) == 50
    assert main(["log", "inspect", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["log", "inspect", "--verify", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert f"DAMAGED weather/{bad}" in captured.err and "offset 50)" in captured.err
    assert f"DAMAGED weather/{good}" not in captured.err


_CHILD = textwrap.dedent(
    """
    import hashlib, random, sys
    import dafka

    def value(i):
        return hashlib.sha256(str(i).encode()).digest() * (1 + i % 5)

    P = "85E3C6EBDC7B4156AD9C43611EBC09CE"
    log = dafka.Log(sys.argv[1], fsync="always", segment_bytes=64 * 1024)
    rng = random.Random(int(sys.argv[2]))
    nxt = log.next_offset("kill", P) or 0
    print("start", nxt, flush=True)
    while True:
        n = rng.randint(1, 20)
        log.append_many("kill", P, nxt, [value(i) for i in range(nxt, nxt + n)])
        nxt += n
        print("durable", log.durable_next("kill", P), flush=True)
    """
)


def test_sigkill_never_loses_a_durable_record(tmp_path: Path) -> None:
    """A child appends with fsync=always and reports its durable offset; we SIGKILL
    it at random moments. Every offset it reported durable must read back intact."""
    rng = random.Random(46)
    reported = 0
    for round_ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path), str(round_)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            first = child.stdout.readline().split()
            assert first[0] == "start" and int(first[1]) >= reported
            time.sleep(rng.uniform(0.0, 0.4))
        finally:
            os.kill(child.pid, signal.SIGKILL)
            out, _ = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL
        for line in out.split("\n")[:-1]:  # a line cut by the kill has no newline
            kind, n = line.split()
            assert kind == "durable"
            reported = max(reported, int(n))
        with dafka.Log(tmp_path) as log:
            nxt = log.next_offset("kill", P) or 0
            assert nxt >= reported
            got = []
            while len(got) < nxt:
                got += log.read("kill", P, len(got), max_records=5000, max_bytes=1 << 22)
            assert [r.offset for r in got] == list(range(nxt))
            for r in got:
                assert r.value == value(r.offset), f"offset {r.offset} differs"
    assert reported > 0


def test_disk_full_on_a_tiny_tmpfs(tmp_path: Path) -> None:
    """A real ENOSPC (needs root and permission to mount; skipped otherwise): the
    error names the file, nothing partial is visible, and a reopen recovers."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        filler = mnt / "filler"
        filler.write_bytes(b"\0" * 32768)
        stored = 0
        with dafka.Log(mnt / "log", fsync="always") as log:
            with pytest.raises(dafka.LogIOError, match="No space left") as e:
                for i in range(1000):
                    log.append("t", P, i, value(i) * 20)
                    stored = i + 1
            assert ".log" in str(e.value)
            assert 0 < stored < 1000
            assert log.next_offset("t", P) == stored
            assert len(log.read("t", P, 0, max_records=2000, max_bytes=1 << 30)) == stored
        filler.unlink()  # room for recovery to rebuild an index
        with dafka.Log(mnt / "log") as log:
            got = log.read("t", P, 0, max_records=2000, max_bytes=1 << 30)
            assert [r.value for r in got] == [value(i) * 20 for i in range(stored)]
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
