"""The ``dafka tower`` / ``produce`` / ``consume`` / ``demo`` commands, as processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

CLI = [sys.executable, "-m", "dafka.cli"]


@pytest.mark.parametrize("batches", [[], ["--record-batches"]], ids=["records", "batches"])
def test_tower_produce_consume_and_ctrl_c(batches: list[str]) -> None:
    tower = subprocess.Popen(
        [*CLI, "tower", "--beacon-in", "tcp://127.0.0.1:0", "--beacon-out", "tcp://127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    consumer: subprocess.Popen[str] | None = None
    try:
        assert tower.stdout is not None
        # "dafka-tower endpoint=tcp://H:IN,OUT beacon_in=... beacon_out=..."
        fields = dict(f.split("=", 1) for f in tower.stdout.readline().split()[1:])
        endpoint = fields["endpoint"]
        consumer = subprocess.Popen(
            [*CLI, "consume", "lines", "--tower", endpoint, "--from-beginning", "--count", "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        produced = subprocess.run(
            [*CLI, "produce", "lines", "--tower", endpoint, "--linger", "3", *batches],
            input="alpha\nbeta\ngamma\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        # No store: min_acks=1 is not met, and that is a failure.
        assert produced.returncode == 1, produced.stderr
        assert "sent 3 records" in produced.stderr
        assert "3 of 3 records not acknowledged" in produced.stderr
        out, err = consumer.communicate(timeout=60)
        assert consumer.returncode == 0, err
        assert out.splitlines() == ["alpha", "beta", "gamma"]
        tower.send_signal(signal.SIGINT)
        _, err = tower.communicate(timeout=20)
        assert tower.returncode == 0
        assert "tower stopped" in err
    finally:
        for p in (tower, consumer):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_offsets_lists_first_and_next_offsets_from_the_stores(tmp_path: Path) -> None:
    from dafka import Producer, Store, Tower

    fast = {"beacon_interval": 0.2, "beacon_timeout": 3.0}
    with Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower:
        with Store(tmp_path / "s", towers=[tower.endpoint], **fast) as store:
            with Producer("t", towers=[tower.endpoint], **fast) as p:
                p.send_many([b"v%d" % i for i in range(25)])
                assert p.flush(30.0) == 0
                part = p.address
            got = subprocess.run(
                [*CLI, "offsets", "t", "--tower", tower.endpoint],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert got.returncode == 0, got.stderr
            lines = got.stdout.splitlines()
            assert lines[0].split() == ["PARTITION", "FIRST", "NEXT", "RECORDS"]
            assert [line.split() for line in lines[1:]] == [[part, "0", "25", "25"]]
            assert store.partitions("t")[0].next_offset == 25
        # No store left to answer: a clear error, exit status 1.
        got = subprocess.run(
            [*CLI, "offsets", "t", "--tower", tower.endpoint, "--timeout", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert got.returncode == 1
        assert "towers" in got.stderr


def test_bad_endpoint_is_a_clear_error() -> None:
    r = subprocess.run(
        [*CLI, "consume", "t", "--tower", "localhost:5556", "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert "bad tower endpoint" in r.stderr and "tcp://HOST:IN_PORT" in r.stderr


def test_demo_command() -> None:
    r = subprocess.run(
        [*CLI, "demo", "--records", "5000", "--wire", "zproto"],
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "live consumer: 5000/5000 records, in order" in r.stdout
    assert "late consumer: 5000/5000 records from the store, in order" in r.stdout
    assert "the store ACKed 5000 durably" in r.stdout
    assert r.stdout.rstrip().endswith("ok")


_DEFAULT_SIGINT_EXEC = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def _signal_state(pid: int | str) -> str:
    with open(f"/proc/{pid}/status") as f:
        return "".join(line for line in f if line.startswith(("Name", "Sig", "Shd")))


def _interrupt_after_ready(
    args: list[str], *, ready_on_stderr: bool = False
) -> subprocess.CompletedProcess[str]:
    """Starts a process, waits for its first output line, sends SIGINT, collects it."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    # Ctrl-C at a terminal reaches a process whose SIGINT is at its default. A suite
    # started in the background (`bash scripts/test.sh &`) passes SIGINT ignored on
    # to its children, and Python leaves an inherited ignored SIGINT ignored: the
    # child would not stop (30 s timeouts in runs started so). So it starts through
    # an exec that sets SIGINT back to its default.
    launch = [sys.executable, "-c", _DEFAULT_SIGINT_EXEC, *args]
    p = subprocess.Popen(launch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        stream = p.stderr if ready_on_stderr else p.stdout
        assert stream is not None
        first = stream.readline()
        time.sleep(0.2)  # let it block in the call under test
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            # Say why it did not stop: the signal state of the child and of this
            # process, and the child's threads (faulthandler dumps them on SIGABRT).
            state = _signal_state(p.pid) + _signal_state("self")
            p.send_signal(signal.SIGABRT)
            out, err = p.communicate(timeout=30)
            detail = f"{state}\n{first}{out}\n{err}"
            raise AssertionError(f"no exit 30 s after SIGINT\n{detail}") from None
        if ready_on_stderr:
            return subprocess.CompletedProcess(args, p.returncode, out, first + err)
        return subprocess.CompletedProcess(args, p.returncode, first + out, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_ctrl_c_interrupts_blocking_calls() -> None:
    script = """
import dafka
with dafka.Producer("t", max_unacked_bytes=10, close_timeout=0) as p, dafka.Consumer(["t"]) as c:
    p.send(b"x" * 10)
    print("ready", flush=True)
    for call in (lambda: p.send(b"y" * 10), lambda: c.poll(), lambda: p.flush()):
        try:
            call()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            break
"""
    r = _interrupt_after_ready([sys.executable, "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ready", "interrupted"]


def test_consume_stops_cleanly_on_ctrl_c() -> None:
    r = _interrupt_after_ready(
        [*CLI, "consume", "t", "--peer", "tcp://127.0.0.1:9"], ready_on_stderr=True
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("consuming 't' (latest) as ")
    assert r.stdout == ""


def test_consume_resumes_from_a_positions_file(tmp_path: Path) -> None:
    from dafka import Producer, Store, Tower

    fast = {"beacon_interval": 0.2, "beacon_timeout": 3.0}
    saved = tmp_path / "positions.json"
    local = "tcp://127.0.0.1:0"
    with (
        Tower(beacon_in=local, beacon_out=local) as tower,
        Store(tmp_path / "s", towers=[tower.endpoint], **fast) as store,  # type: ignore[arg-type]
    ):
        with Producer("t", towers=[tower.endpoint], **fast) as p:  # type: ignore[arg-type]
            p.wait_for_stores(1)
            p.send_many([b"v%d" % i for i in range(5)])
            assert p.flush(30.0) == 0
            part = p.address

        def consume(*extra: str) -> list[str]:
            r = subprocess.run(
                [*CLI, "consume", "t", "--tower", tower.endpoint, "--timeout", "20", *extra],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert r.returncode == 0, r.stderr
            return r.stdout.splitlines()

        resume = ("--positions", str(saved))
        assert consume(*resume, "--from-beginning", "--count", "2") == ["v0", "v1"]
        assert json.loads(saved.read_text()) == {part: 2}
        # Without --from-beginning (latest) the saved position still wins.
        assert consume(*resume, "--count", "3") == ["v2", "v3", "v4"]
        assert json.loads(saved.read_text()) == {part: 5}
        assert store.partitions("t")[0].next_offset == 5
    saved.write_text("[1, 2]")
    r = subprocess.run(
        [*CLI, "consume", "t", "--peer", "tcp://127.0.0.1:1", "--positions", str(saved)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert "JSON object of partition: offset" in r.stderr
