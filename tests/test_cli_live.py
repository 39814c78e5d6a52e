"""The ``dafka tower`` / ``produce`` / ``consume`` / ``demo`` commands, as processes."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)

CLI = [sys.executable, "-m", "dafka.cli"]


def test_tower_produce_consume_and_ctrl_c() -> None:
    tower = subprocess.Popen(
        [*CLI, "tower", "--beacon-in", "tcp://127.0.0.1:0", "--beacon-out", "tcp://127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    consumer: subprocess.Popen[str] | None = None
    try:
        assert tower.stdout is not None
        endpoint = tower.stdout.readline().split()[1]
        consumer = subprocess.Popen(
            [*CLI, "consume", "lines", "--tower", endpoint, "--from-beginning", "--count", "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        produced = subprocess.run(
            [*CLI, "produce", "lines", "--tower", endpoint, "--linger", "3"],
            input="alpha\nbeta\ngamma\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert produced.returncode == 0, produced.stderr
        assert "sent 3 records" in produced.stderr
        assert "not acknowledged" in produced.stderr  # no store: min_acks=1 is not met
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
    assert r.stdout.count("5000/5000 records, in order") == 2
