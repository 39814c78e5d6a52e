"""The runnable jobs in spark_jobs/, in local mode (each starts its own tower and
store), on the shared SparkSession: `main(argv)` is called in-process with the
session's `stop` disabled, so the jobs' own `local_session` reuses it."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

JOBS = Path(__file__).resolve().parent.parent / "spark_jobs"


def job(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"spark_job_{name}", JOBS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def shared(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The session, which the jobs' final `spark.stop()` must not end."""
    monkeypatch.setattr(type(spark), "stop", lambda self: None)
    return spark


@pytest.mark.parametrize("name", ["bulk_ingest", "stream_to_parquet", "enrich"])
def test_job_help(name: str) -> None:
    out = subprocess.run(
        [sys.executable, str(JOBS / f"{name}.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout and "--towers" in out.stdout
    # For stores on other hosts to reach the job's producers and read clients.
    assert "--bind" in out.stdout and "--advertise-host" in out.stdout


@pytest.mark.parametrize(
    ("name", "args", "says"),
    [
        ("enrich", ["--trigger", "5s"], "available-now"),
        ("stream_to_parquet", ["--trigger", "-1"], "available-now"),
        ("bulk_ingest", ["--towers", " ; "], "no tower endpoint"),
        ("stream_to_parquet", ["--starting-time", "09:00"], "ISO 8601 time with a zone"),
    ],
)
def test_job_arguments_are_checked_before_anything_starts(
    name: str, args: list[str], says: str
) -> None:
    """A bad ``--trigger`` used to fail with a float() traceback once Spark and the
    local cluster had started and the demo records were sent; ``--towers`` with a
    stray ``;`` or spaces made a ConfigError traceback. Both are usage errors now."""
    out = subprocess.run(
        [sys.executable, str(JOBS / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert says in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("mode", ["arrow", "datasource", "foreach"])
def test_bulk_ingest_job(shared: Any, mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--rows", "20000", "--partitions", "2", "--mode", mode, "--topic", f"bulk-{mode}"]
    assert job("bulk_ingest").main(argv) == 0
    out = capsys.readouterr().out
    assert "sent 20000 records" in out, out
    assert f"the local store holds 20000 records of 'bulk-{mode}' in 2 partitions" in out, out
    # Keyed by device, timed from the job's start (offset 0 is row 0 or row 10000).
    assert re.search(r"offset 0 of \w+: key=b'device-00(000|010)', timestamp=\d{13} ms", out), out


def test_stream_to_parquet_job(
    shared: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output, ckpt = tmp_path / "parquet", tmp_path / "ckpt"
    argv = ["--demo", "3000", "--output", str(output), "--checkpoint", str(ckpt)]
    assert job("stream_to_parquet").main(argv) == 0
    assert "wrote 3000 records" in capsys.readouterr().out
    # Read as a user would, by Spark: the files the sink committed (its
    # _spark_metadata), not whatever a failed task attempt may have left.
    rows = shared.read.parquet(str(output)).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(
        b"demo record %d" % i for i in range(3000)
    )
    assert {r.topic for r in rows} == {"events"}
    assert {bytes(r.key) for r in rows} == {b"sensor-%d" % i for i in range(10)}
    assert {r.timestampType for r in rows} == {0}  # create times
    assert list(output.glob("day=*")), "partitioned by the day of its records"


def test_enrich_job(shared: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--demo", "2000", "--checkpoint", str(tmp_path / "ckpt")]
    assert job("enrich").main(argv) == 0
    out = capsys.readouterr().out
    assert "enriched 2000 records from 'raw' into 'enriched'" in out, out
    # The sink kept the source records' keys (and times).
    assert "read back 2000 enriched records from 'enriched', 10 distinct keys" in out, out
