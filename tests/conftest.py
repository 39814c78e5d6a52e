"""Shared fixtures: the golden vectors, and one SparkSession per process for every
Spark test (started on first use: it takes ~10 s)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def vectors() -> list[dict[str, Any]]:
    return json.loads((DATA / "zproto-vectors.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession (2 cores) for the whole run, with the ``dafka`` data
    source registered. PySpark is a test dependency (scripts/setup.sh installs it):
    if it is missing the Spark tests fail rather than skip."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import dafka.spark

    session = (
        SparkSession.builder.master("local[2,4]")  # 2 cores, a task may fail 3 times
        .appName("dafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    dafka.spark.register(session)
    yield session
    session.stop()


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for ``pytest -n 2 --dist loadgroup`` (scripts/test.sh): every test on
    the shared SparkSession in one, the speculation test (a standalone Spark cluster
    of its own) in another, the rest spread over both workers. pytest-xdist 3.8 does
    not keep them under pytest 9.2 (its issue 1386): then each worker starts its own
    session (docs/testing.md)."""
    for item in items:
        if item.path.name == "test_spark_speculation.py":
            item.add_marker(pytest.mark.xdist_group("spark-standalone"))
        elif "spark" in getattr(item, "fixturenames", ()) or item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.xdist_group("spark"))
