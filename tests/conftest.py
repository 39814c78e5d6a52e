"""Shared fixtures: the golden vectors and a timeout on every test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def vectors() -> list[dict[str, Any]]:
    return json.loads((DATA / "zproto-vectors.json").read_text())  # type: ignore[no-any-return]
