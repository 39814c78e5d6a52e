"""Helpers of the console tests: raw HTTP, the console as a process, headless
Chromium (Debian's ``chromium``, which scripts/setup.sh installs when missing) and
the figures the page shows."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "dafka.cli"]


def artifacts(name: str) -> Path:
    """The directory a test keeps its screenshots in: ``$DAFKA_TEST_ARTIFACTS/NAME``,
    by default ``test-artifacts/console/NAME`` in the checkout (git-ignored)."""
    base = Path(os.environ.get("DAFKA_TEST_ARTIFACTS", ROOT / "test-artifacts" / "console"))
    path = base / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def dead_tower() -> Iterator[str]:
    """A tower endpoint nobody listens on: its two ports are bound (so no other test
    takes them) but not listening, so connections are refused."""
    socks = [socket.socket() for _ in range(2)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        a, b = (s.getsockname()[1] for s in socks)
        yield f"tcp://127.0.0.1:{a},{b}"
    finally:
        for s in socks:
            s.close()


def exchange(url: str, data: bytes, *, timeout: float = 30.0) -> bytes:
    """Sends ``data`` raw to the server of ``url`` (then closes its side, as a client
    with nothing more to say) and returns all it answers, until it closes."""
    host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


def status_of(answer: bytes) -> int:
    """The status code of a raw HTTP answer."""
    return int(answer.split(b" ", 2)[1])


def get_json(url: str) -> dict[str, Any]:
    answer = exchange(url, b"GET /api/cluster HTTP/1.0\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert status_of(head) == 200, answer[:500]
    result: dict[str, Any] = json.loads(body)
    return result


def wait_json(url: str, cond: Any, what: str, within: float = 90.0) -> dict[str, Any]:
    """Polls ``/api/cluster`` until ``cond(snapshot)`` holds; returns that snapshot."""
    deadline = time.monotonic() + within
    while True:
        snap = get_json(url)
        if cond(snap):
            return snap
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last snapshot: {snap}")
        time.sleep(0.2)


def offsets_of(snap: dict[str, Any]) -> dict[tuple[str, str], tuple[int, int]]:
    """``{(topic, partition): (first, next)}`` of a snapshot."""
    return {
        (t["topic"], p["partition"]): (p["first"], p["next"])
        for t in snap["topics"]
        for p in t["partitions"]
    }


@contextmanager
def console_process(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``dafka console --listen 127.0.0.1:0 ARGS``: yields the URL it printed and
    the process, stopped with SIGTERM at the end (it must exit 0)."""
    proc = subprocess.Popen(
        [*CLI, "console", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("dafka console: http://127.0.0.1:"), (
            first + proc.communicate(timeout=30)[1]
        )
        yield first.split(": ", 1)[1].strip(), proc
        proc.terminate()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def chromium() -> str:
    """The headless browser, or a skip saying why there is none."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "no Chromium: scripts/setup.sh installs Debian's chromium package when apt-get "
        "can (as root or with passwordless sudo); here it could not (install it with "
        "`apt-get install -y chromium`)"
    )


def browse(url: str, *, screenshot: Path | None = None, budget_ms: int = 4000) -> str:
    """Loads ``url`` in headless Chromium and returns the DOM once the page's scripts
    ran for ``budget_ms`` of virtual time (fetches pause that clock, so the page's
    first answers are in); with ``screenshot``, also saves a PNG of it there."""
    browser = chromium()
    with tempfile.TemporaryDirectory(prefix="dafka-chromium-") as profile:
        common = [
            browser,
            "--headless",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            "--window-size=1280,1400",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            common.append("--no-sandbox")  # Chromium refuses to run as root otherwise
        dom = subprocess.run(
            [*common, "--dump-dom", url], capture_output=True, text=True, timeout=120
        )
        assert dom.returncode == 0, dom.stderr[-3000:]
        if screenshot is not None:
            shot = subprocess.run(
                [*common, f"--screenshot={screenshot}", url],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert shot.returncode == 0 and screenshot.stat().st_size > 0, shot.stderr[-3000:]
    return dom.stdout


def browse_until(
    url: str, cond: Callable[[Page], bool], screenshot: Path, within: float = 120.0
) -> Page:
    """Loads the page (see :func:`browse`) until ``cond`` holds of what it shows (a
    poll of a loaded cluster may have timed out just then), at most ``within``
    seconds; returns the last page, whose checks then say what differs."""
    deadline = time.monotonic() + within
    while True:
        page = Page(browse(url, screenshot=screenshot))
        if cond(page) or time.monotonic() > deadline:
            return page


class Page(HTMLParser):
    """What the console page shows, from its DOM: the status (``state``, ``status``
    text), ``partitions`` ``{(topic, partition): {"first", "next", "records"}}``,
    ``group_rows`` ``{group: {"members", "lag"}}``, the chart's ``lines`` (topics
    with a polyline) and the whole text."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.state = ""
        self.status = ""
        self.partitions: dict[tuple[str, str], dict[str, str]] = {}
        self.group_rows: dict[str, dict[str, str]] = {}
        self.lines: set[str] = set()
        self.text = ""
        self._row: dict[str, str] | None = None
        self._cell: str | None = None
        self._in_status = 0
        self._code = False  # in a script or style: not shown
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self._code = tag in ("script", "style")
        classes = a.get("class", "").split()
        if a.get("id") == "status":
            self.state = a.get("data-state", "")
            self._in_status = 1
        elif self._in_status:
            self._in_status += 1
        if tag == "tr" and "partition" in classes:
            self._row = self.partitions.setdefault((a["data-topic"], a["data-partition"]), {})
        elif tag == "tr" and "group" in classes:
            self._row = self.group_rows.setdefault(a["data-group"], {})
        elif tag == "tr":
            self._row = None
        if tag == "td" and self._row is not None:
            self._cell = next((c for c in classes if c != "num"), None)
        if tag == "polyline":
            self.lines.add(a.get("data-topic", ""))

    def handle_endtag(self, tag: str) -> None:
        self._code = False
        if self._in_status:
            self._in_status -= 1
        if tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._code:
            return
        self.text += data
        if self._in_status:
            self.status += data
        if self._row is not None and self._cell is not None:
            self._row[self._cell] = self._row.get(self._cell, "") + data
