"""Operator-facing edges of the ``dafka`` command line, found by a review (session 21):
each test failed before its fix.

Every process runs on 127.0.0.1 (ephemeral ports or a static peer on the discard
port nobody listens on), every wait is bounded, and only processes a test started
are signalled or killed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import dafka

pytestmark = pytest.mark.timeout(180)

CLI = [sys.executable, "-u", "-m", "dafka.cli"]
NOBODY = "tcp://127.0.0.1:9"  # a static peer nothing answers on: no traffic leaves the host


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------------
# dafka demo
# ---------------------------------------------------------------------------


def test_demo_with_a_reused_data_dir_still_passes(tmp_path: Path) -> None:
    """``dafka demo --data DIR`` ("store directory") run twice: the second run's
    consumers also get the first run's partition of topic ``demo`` from the store,
    so the check counts 2n/n records and reports FAILED (exit 1) though every
    record of this run arrived in order."""
    data = tmp_path / "data"
    first = run("demo", "--records", "500", "--data", str(data))
    assert first.returncode == 0, first.stdout + first.stderr
    second = run("demo", "--records", "500", "--data", str(data))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "live consumer: 500/500 records, in order" in second.stdout, second.stdout


def test_demo_stopped_by_sigterm_removes_its_temporary_store(tmp_path: Path) -> None:
    """``dafka demo`` keeps its store in a temporary directory; SIGTERM (``timeout``,
    a CI runner, ``kill``) kills it without cleanup and the directory, with the
    store's data, stays behind (Ctrl-C removes it)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.Popen(
        [*CLI, "demo", "--records", "50000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    try:
        assert p.stdout is not None
        fd = p.stdout.fileno()
        seen = b""
        while b"  producer  " not in seen:
            ready, _, _ = select.select([fd], [], [], 60)
            assert ready, f"demo printed no producer line within 60s: {seen!r}"
            chunk = os.read(fd, 4096)
            assert chunk, f"demo ended early: {seen!r}"
            seen += chunk
        assert list(tmp.glob("dafka-demo-*")), seen
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
        if p.stdout is not None:
            p.stdout.close()
    left = list(tmp.glob("dafka-demo-*"))
    assert not left, f"SIGTERM left the demo's store behind: {left} (exit {p.returncode})"


# ---------------------------------------------------------------------------
# dafka log
# ---------------------------------------------------------------------------


def _damage_one_partition(root: Path) -> None:
    """A log with good/P1 intact and bad/P2 damaged mid-segment (valid records
    follow the bad one, so recovery refuses it; the store sets it aside)."""
    with dafka.Log(root) as log:
        log.append_many("good", "P1", 0, [b"good-%03d" % i for i in range(50)])
        log.append_many("bad", "P2", 0, [b"bad-%03d" % i for i in range(50)])
    (root / ".clean").unlink()
    seg = root / "bad" / "P2" / "00000000000000000000.log"
    (root / "bad" / "P2" / "00000000000000000000.index").unlink()
    raw = bytearray(seg.read_bytes())
    at = raw.index(b"bad-025")
    raw[at + 4] ^= 0xFF
    seg.write_bytes(bytes(raw))


def test_log_dump_of_a_healthy_partition_works_beside_a_damaged_one(tmp_path: Path) -> None:
    """``dafka log inspect`` sets a damaged partition aside and lists the others,
    and a store keeps serving them; ``dafka log dump`` of a healthy partition of
    the same log fails with the other partition's damage (exit 1, no records)."""
    root = tmp_path / "log"
    _damage_one_partition(root)
    inspected = run("log", "inspect", str(root))
    assert inspected.returncode == 1  # as documented: a damaged partition exists
    assert "DAMAGED bad/P2" in inspected.stderr and "good" in inspected.stdout
    dumped = run("log", "dump", str(root), "good", "P1", "--count", "3")
    assert dumped.returncode == 0, dumped.stderr
    assert [line.split("\t")[-1] for line in dumped.stdout.splitlines()] == [
        "good-000",
        "good-001",
        "good-002",
    ]


def test_log_inspect_of_a_store_directory_does_not_say_it_is_empty(tmp_path: Path) -> None:
    """``dafka store DIR`` keeps its log in DIR/log; ``dafka log inspect DIR`` (the
    directory the operator gave the store) reads ``log`` as a topic, finds no
    partition and reports "no partitions" with exit status 0, as if the store
    held nothing."""
    store_dir = tmp_path / "store"
    with dafka.Store(store_dir, peers=[NOBODY]):
        pass
    with dafka.Log(store_dir / "log") as log:
        log.append_many("weather", "P1", 0, [b"21.5", b"22.0"])
    r = run("log", "inspect", str(store_dir))
    assert r.returncode != 0 or "P1" in r.stdout, (r.returncode, r.stdout, r.stderr)


# ---------------------------------------------------------------------------
# dafka consume / produce: clear one-line errors, not tracebacks
# ---------------------------------------------------------------------------


def test_positions_file_with_an_offset_past_u64_is_a_clear_error(tmp_path: Path) -> None:
    """``_load_positions`` checks ``v >= 0`` but no upper bound, so 2**64 reaches
    ``Consumer(start_offsets=...)`` whose ValueError escapes as a traceback."""
    saved = tmp_path / "positions.json"
    saved.write_text(json.dumps({"85E3C6EBDC7B4156AD9C43611EBC09CE": 2**64}))
    r = run("consume", "t", "--peer", NOBODY, "--timeout", "0.2", "--positions", str(saved))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("dafka: "), r.stderr


@pytest.mark.parametrize("command", ["consume", "produce"])
def test_a_topic_that_is_not_utf8_is_a_clear_error(command: str) -> None:
    """A topic argument with a non-UTF-8 byte (argv is bytes on POSIX; Python hands
    it over with surrogateescape) reaches the node's constructor and fails with
    a UnicodeEncodeError traceback. ``dafka log dump`` handles the same argument."""
    r = subprocess.run(
        [
            *CLI,
            command,
            b"caf\xe9",
            "--peer",
            NOBODY,
            "--timeout" if command == "consume" else "--linger",
            "0.2",
        ],
        capture_output=True,
        input="",
        text=True,
        timeout=60,
    )
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 0


def test_consume_positions_saved_on_sigterm_cover_only_printed_records(tmp_path: Path) -> None:
    """``consume --positions FILE`` saves ``Consumer.positions()``, which counts
    every record a ``poll_many`` returned. SIGTERM (or Ctrl-C) while the batch is
    being written out (stdout a pipe that is full: ``| slow-reader``) stops the
    write loop part way, and the file then says the whole batch was consumed:
    the next run with that file starts after records it never printed."""
    fast = {"beacon_interval": 0.2, "beacon_timeout": 3.0}
    local = "tcp://127.0.0.1:0"
    saved = tmp_path / "positions.json"
    with (
        dafka.Tower(beacon_in=local, beacon_out=local) as tower,
        dafka.Store(tmp_path / "s", towers=[tower.endpoint], **fast) as store,  # type: ignore[arg-type]
    ):
        with dafka.Producer("t", towers=[tower.endpoint], **fast) as p:  # type: ignore[arg-type]
            p.wait_for_stores(1)
            p.send_many([b"%06d-" % i + b"x" * 200 for i in range(30000)])
            assert p.flush(60.0) == 0
            part = p.address
        assert store.partitions("t")[0].next_offset == 30000
        c = subprocess.Popen(
            [
                *CLI,
                "consume",
                "t",
                "--tower",
                tower.endpoint,
                "--from-beginning",
                "--positions",
                str(saved),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert c.stdout is not None
            ready, _, _ = select.select([c.stdout], [], [], 60)
            assert ready, "consume printed nothing within 60s"
            first = os.read(c.stdout.fileno(), 4096)  # unbuffered: communicate() reads the rest
            # Nothing reads stdout now: the pipe fills and the write loop blocks
            # in a write with the rest of the batch still to print.
            wchan = Path(f"/proc/{c.pid}/wchan")
            for _ in range(600):
                if "pipe" in wchan.read_text():
                    break
                select.select([], [], [], 0.1)
            c.send_signal(signal.SIGTERM)
            out, err = c.communicate(timeout=60)
        finally:
            if c.poll() is None:
                c.kill()
                c.wait(timeout=10)
    assert c.returncode == 0, err
    printed = {int(line[:6]) for line in (first + out).splitlines()}
    position = json.loads(saved.read_text())[part]
    never_printed = sorted(set(range(position)) - printed)
    assert not never_printed, (
        f"saved position {position}, yet {len(never_printed)} records below it were never "
        f"printed (first {never_printed[:3]}); a resumed run skips them"
    )


@pytest.mark.parametrize("command", ["tower", "store"])
def test_sigint_stops_a_command_started_with_it_ignored(command: str, tmp_path: Path) -> None:
    """A script's ``dafka store DIR &`` starts it with SIGINT ignored, and Python
    leaves an ignored SIGINT ignored: ``kill -INT`` did nothing (the Rust binaries
    stop on it). The command now stops cleanly on it, as on SIGTERM."""
    args = {
        "tower": ["tower", "--beacon-in", "tcp://127.0.0.1:0", "--beacon-out", "tcp://127.0.0.1:0"],
        "store": [
            "store",
            str(tmp_path / "store"),
            "--bind",
            "tcp://127.0.0.1:0",
            "--peer",
            NOBODY,
        ],
    }[command]
    p = subprocess.Popen(
        [*CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().startswith(f"dafka-{command} ")  # up and serving
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
        assert "stopped" in err, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
