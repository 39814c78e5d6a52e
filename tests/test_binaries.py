"""The standalone ``dafka-store`` and ``dafka-tower`` binaries (``target/release/``, built by
``scripts/setup.sh``) and the same command lines as ``dafka store`` / ``dafka tower``.

Every process runs on 127.0.0.1 ephemeral ports, every wait is bounded, and only the
processes a test started are signalled or killed.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

import dafka

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
STORE_BIN = TARGET / "dafka-store"
TOWER_BIN = TARGET / "dafka-tower"
PY_CLI = [sys.executable, "-m", "dafka.cli"]
LOCAL = "tcp://127.0.0.1:0"
FAST = ["--beacon-interval", "200", "--beacon-timeout", "3000"]


@dataclass
class Running:
    proc: subprocess.Popen[str]
    fields: dict[str, str]
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, within: float = 30.0) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=within)


class Procs:
    """Starts processes, parses their first stdout line, and kills what is left."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[subprocess.Popen[str]] = []
        self.logs: list[IO[str]] = []

    def start(self, name: str, argv: list[str], within: float = 30.0) -> Running:
        err_path = self.tmp / f"{name}-{len(self.started)}.stderr"
        err = err_path.open("w")
        self.logs.append(err)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
        self.started.append(p)
        assert p.stdout is not None
        ready, _, _ = select.select([p.stdout], [], [], within)
        line = p.stdout.readline() if ready else ""
        assert line, f"{name} printed nothing within {within}s: {err_path.read_text()}"
        words = line.split()
        fields = dict(w.split("=", 1) for w in words[1:])
        return Running(p, {"program": words[0], **fields}, err_path)

    def close(self) -> None:
        for p in self.started:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
            if p.stdout is not None:
                p.stdout.close()
        for f in self.logs:
            f.close()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    for binary in (STORE_BIN, TOWER_BIN):
        assert binary.is_file(), f"{binary} missing: run `cargo build --release --bins`"
    ps = Procs(tmp_path)
    try:
        yield ps
    finally:
        ps.close()


def run(argv: list[str], within: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=within, check=False)


def produce(tower: str, topic: str, n: int) -> tuple[str, list[bytes]]:
    """Sends ``n`` records and returns once a store ACKed all of them."""
    values = [b"%s-%08d" % (topic.encode(), i) for i in range(n)]
    with dafka.Producer(
        topic, towers=[tower], head_interval=0.2, beacon_interval=0.2, beacon_timeout=3.0
    ) as p:
        for i in range(0, n, 1000):
            p.send_many(values[i : i + 1000], timeout=30)
        left = p.flush(timeout=60)
        assert left == 0, f"{left} records not ACKed"
        assert p.acked_offset == n - 1
        return p.address, values


def consume(tower: str, topic: str, n: int, within: float = 60.0) -> list[bytes]:
    """A consumer started after the producer left: everything comes from stores."""
    got: list[dafka.Record] = []
    with dafka.Consumer(
        [topic],
        towers=[tower],
        offset_reset="earliest",
        beacon_interval=0.2,
        beacon_timeout=3.0,
    ) as c:
        deadline = time.monotonic() + within
        while len(got) < n and time.monotonic() < deadline:
            got.extend(c.poll_many(timeout=0.2))
    assert [r.offset for r in got] == list(range(n))
    return [r.value for r in got]


def read_log(store_dir: Path, topic: str) -> dict[str, list[bytes]]:
    """Every partition of ``topic`` in a stopped store's log, opened read-only."""
    out: dict[str, list[bytes]] = {}
    with dafka.Log(store_dir / "log", read_only=True, retain_hours=None) as log:
        for info in log.partitions(topic):
            values: list[bytes] = []
            while len(values) < info.next_offset:
                batch = log.read(topic, info.partition, len(values), max_records=5000)
                assert batch, f"log ends at {len(values)}, next_offset {info.next_offset}"
                values.extend(r.value for r in batch)
            out[info.partition] = values
    return out


def test_store_binary_acks_serves_and_stops_cleanly(procs: Procs, tmp_path: Path) -> None:
    tower = procs.start("tower", [str(TOWER_BIN), "--beacon-in", LOCAL, "--beacon-out", LOCAL])
    assert tower.fields["program"] == "dafka-tower"
    endpoint = tower.fields["endpoint"]
    assert endpoint.startswith("tcp://127.0.0.1:") and "," in endpoint
    store_dir = tmp_path / "store"
    store = procs.start("store", [str(STORE_BIN), str(store_dir), "--tower", endpoint, *FAST])
    assert store.fields["program"] == "dafka-store"
    address = store.fields["address"]
    assert len(address) == 32 and store.fields["endpoint"].startswith("tcp://127.0.0.1:")
    assert (store_dir / "store.id").read_text().strip() == address

    n = 20_000
    partition, values = produce(endpoint, "bins", n)
    assert consume(endpoint, "bins", n) == values

    assert store.stop(signal.SIGTERM) == 0, store.stderr()
    assert "store stopped" in store.stderr()
    assert read_log(store_dir, "bins") == {partition: values}

    # Restarted on the same directory: the same address, the records still served.
    again = procs.start("store", [str(STORE_BIN), str(store_dir), "--tower", endpoint, *FAST])
    assert again.fields["address"] == address
    assert consume(endpoint, "bins", n) == values
    assert again.stop(signal.SIGINT) == 0, again.stderr()
    assert tower.stop(signal.SIGTERM) == 0, tower.stderr()
    assert "tower stopped" in tower.stderr()


def test_sigterm_mid_stream_keeps_every_acked_record(procs: Procs, tmp_path: Path) -> None:
    tower = procs.start("tower", [str(TOWER_BIN), "--beacon-in", LOCAL, "--beacon-out", LOCAL])
    endpoint = tower.fields["endpoint"]
    store_dir = tmp_path / "store"
    store = procs.start("store", [str(STORE_BIN), str(store_dir), "--tower", endpoint, *FAST])
    values = [b"mid-%08d" % i for i in range(200_000)]
    with dafka.Producer(
        "mid", towers=[endpoint], head_interval=0.2, beacon_interval=0.2, beacon_timeout=3.0
    ) as p:
        # Once the store ACKs, stream until it has ACKed a good part, then stop it while
        # records flow.
        p.send_many(values[:1000], timeout=30)
        assert p.flush(timeout=60) == 0
        sent = 1000
        deadline = time.monotonic() + 60
        while (
            sent < 190_000
            and (p.acked_offset is None or p.acked_offset < 20_000)
            and time.monotonic() < deadline
        ):
            p.send_many(values[sent : sent + 1000], timeout=30)
            sent += 1000
            p.poll(0.002)
        p.send_many(values[sent : sent + 5000], timeout=30)
        sent += 5000
        assert store.stop(signal.SIGTERM) == 0, store.stderr()
        # The store is gone: what it had not ACKed stays unacknowledged, and closing
        # says how much (the block's exit would raise DeliveryError for it after
        # close_timeout; how much that is depends on how far the store got).
        left = p.close(timeout=0)
        acked = p.acked_offset
        # ACKs arrived while records flowed (999 was ACKed before the stream).
        assert acked is not None and acked >= 1000
        assert left == sent - 1 - acked
        partition = p.address
    logged = read_log(store_dir, "mid")[partition]
    assert len(logged) > acked
    assert logged == values[: len(logged)]
    assert tower.stop() == 0


def test_config_file_is_honoured_and_flags_win(procs: Procs, tmp_path: Path) -> None:
    tower_cfg = tmp_path / "tower.toml"
    tower_cfg.write_text(
        '[tower]\nsub_address = "tcp://127.0.0.1:0"\npub_address = "tcp://127.0.0.1:0"\n'
    )
    tower = procs.start("tower", [str(TOWER_BIN), "--config", str(tower_cfg)])
    # Without the file the tower would bind the default ports 5556/5557.
    beacon_in, beacon_out = tower.fields["beacon_in"], tower.fields["beacon_out"]
    assert beacon_in.startswith("tcp://127.0.0.1:") and not beacon_in.endswith(":5556")

    file_dir, flag_dir = tmp_path / "from-file", tmp_path / "from-flag"
    store_cfg = tmp_path / "store.toml"
    store_cfg.write_text(
        f"""
log_level = "debug"
[node]
bind = "tcp://127.0.0.1:0"
[beacon]
interval = 200
timeout = 3000
sub_address = "{beacon_in}"
pub_address = "{beacon_out}"
[store]
db = "{file_dir}"
fsync = "always"
"""
    )
    # The tower comes from the file's C-style [beacon] keys: ACKs prove the store found it.
    store = procs.start("store", [str(STORE_BIN), "--config", str(store_cfg)])
    partition, values = produce(tower.fields["endpoint"], "cfg", 500)
    assert store.stop() == 0, store.stderr()
    assert "DEBUG" in store.stderr()  # log_level from the file
    assert read_log(file_dir, "cfg") == {partition: values}

    # A flag overrides the file's key: DIR beats store.db, --log-level beats log_level.
    store = procs.start(
        "store", [str(STORE_BIN), str(flag_dir), "--config", str(store_cfg), "--log-level", "warn"]
    )
    assert store.fields["address"] != (file_dir / "store.id").read_text().strip()
    assert (flag_dir / "store.id").read_text().strip() == store.fields["address"]
    assert store.stop() == 0, store.stderr()
    assert "DEBUG" not in store.stderr() and "INFO" not in store.stderr()
    assert tower.stop() == 0


def test_bad_flags_and_config_fail_clearly(procs: Procs, tmp_path: Path) -> None:
    bad_key = tmp_path / "bad-key.toml"
    bad_key.write_text("[store]\nfsynk = 'always'\n")
    bad_value = tmp_path / "bad-value.toml"
    bad_value.write_text("[beacon]\ninterval = 5000\ntimeout = 1000\n")
    for argv, needle in [
        ([str(STORE_BIN), "--bogus"], "--bogus"),
        ([str(STORE_BIN), "--fsync", "sometimes"], "fsync"),
        ([str(STORE_BIN), "--beacon-interval", "soon"], "beacon-interval"),
        ([str(STORE_BIN), "--config", str(tmp_path / "missing.toml")], "cannot read config"),
        ([str(STORE_BIN), "--config", str(bad_key)], "fsynk"),
        ([str(STORE_BIN), "--config", str(bad_value)], "beacon_timeout"),
        ([str(STORE_BIN), "--tower", "localhost:5556"], "bad tower endpoint"),
        ([str(TOWER_BIN), "--beacon-in", "nonsense"], "beacon_in"),
        ([str(TOWER_BIN), "extra"], "extra"),
    ]:
        r = run(argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert needle in r.stderr, (argv, r.stderr)
        assert r.stdout == "", (argv, r.stdout)

    # Failing to start (a port taken, a directory that is a file) is exit code 1.
    tower = procs.start("tower", [str(TOWER_BIN), "--beacon-in", LOCAL, "--beacon-out", LOCAL])
    r = run([str(TOWER_BIN), "--beacon-in", tower.fields["beacon_in"], "--beacon-out", LOCAL])
    assert r.returncode == 1 and "cannot bind" in r.stderr, r.stderr
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    r = run([str(STORE_BIN), str(not_a_dir), "--tower", tower.fields["endpoint"]])
    assert r.returncode == 1 and str(not_a_dir) in r.stderr, r.stderr

    for binary in (STORE_BIN, TOWER_BIN):
        r = run([str(binary), "--help"])
        assert r.returncode == 0 and "--config" in r.stdout, r.stderr
        r = run([str(binary), "--version"])
        assert r.returncode == 0 and dafka.__version__ in r.stdout
    assert tower.stop() == 0


def test_python_cli_runs_the_same_store_and_tower(procs: Procs, tmp_path: Path) -> None:
    tower = procs.start("py-tower", [*PY_CLI, "tower", "--beacon-in", LOCAL, "--beacon-out", LOCAL])
    assert tower.fields["program"] == "dafka-tower"
    endpoint = tower.fields["endpoint"]
    store_dir = tmp_path / "py-store"
    store = procs.start("py-store", [*PY_CLI, "store", str(store_dir), "--tower", endpoint, *FAST])
    assert store.fields["program"] == "dafka-store"
    partition, values = produce(endpoint, "py", 5_000)
    assert store.stop(signal.SIGTERM) == 0, store.stderr()
    assert read_log(store_dir, "py") == {partition: values}
    # The binary reopens what the Python command wrote, under the same address.
    again = procs.start("store", [str(STORE_BIN), str(store_dir), "--tower", endpoint, *FAST])
    assert again.fields["address"] == store.fields["address"]
    assert again.stop(signal.SIGINT) == 0
    assert tower.stop(signal.SIGINT) == 0, tower.stderr()

    r = run([*PY_CLI, "store", "--bogus"])
    assert r.returncode == 2 and "--bogus" in r.stderr, r.stderr
    r = run([*PY_CLI, "store", "--help"])
    assert r.returncode == 0 and "dafka store" in r.stdout and "--fsync" in r.stdout
    r = run([*PY_CLI, "--help"])
    assert r.returncode == 0 and "store" in r.stdout and "tower" in r.stdout
