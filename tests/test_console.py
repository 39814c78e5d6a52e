"""The console's server, snapshot and command line without a browser (issue 39): the
JSON endpoint, throughput measured from successive heads, a cluster that is slow or
not reachable, bad requests and hostile clients. The page in Chromium:
test_console_browser.py."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from console_util import (
    CLI,
    console_process,
    dead_tower,
    exchange,
    get_json,
    status_of,
    wait_json,
)
from nodes_util import wait_for

from dafka.console import Console, GroupView, NodeView, TopicView, page

pytestmark = pytest.mark.timeout(120)


class Scripted:
    """A console source answering ``script`` in turn (then its last answer again);
    ``gate``, when given, holds every ``topics()`` until it is set."""

    def __init__(self, script: list[list[TopicView]], gate: threading.Event | None = None):
        self.script = list(script)
        self.gate = gate
        self.calls = 0
        self.closed = False

    def topics(self) -> list[TopicView]:
        if self.gate is not None:
            self.gate.wait()
        self.calls += 1
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def groups(self) -> list[GroupView]:
        return []

    def nodes(self) -> list[NodeView] | None:
        return [{"kind": "store", "address": "ab" * 16, "endpoint": "tcp://h:1", "last_heard": 0.5}]

    def close(self) -> None:
        self.closed = True


def heads(**parts: int | tuple[int, int]) -> list[TopicView]:
    """One topic, "t", with partitions NAME=next or NAME=(next, bytes)."""
    out: list[Any] = []
    for name, v in parts.items():
        nxt, size = v if isinstance(v, tuple) else (v, None)
        out.append(
            {
                "partition": name,
                "first": 0,
                "next": nxt,
                **({} if size is None else {"bytes": size}),
            }
        )
    return [{"topic": "t", "partitions": out}]


@contextmanager
def console(source: Any, **kw: Any) -> Iterator[Console]:
    with Console(listen="127.0.0.1:0", source=source, **kw) as c:
        yield c


def test_the_json_endpoint_serves_the_last_snapshot() -> None:
    source = Scripted([heads(a=10, b=3)])
    with console(source, interval=0.05, slow_interval=0.05) as c:
        snap = wait_json(
            c.url, lambda s: s["cluster"]["polls"] >= 2 and s["nodes"]["list"], "polls"
        )
        assert snap["cluster"]["reachable"] is True and snap["cluster"]["error"] is None
        assert snap["topics"][0]["topic"] == "t" and snap["topics"][0]["records"] == 13
        assert snap["topics"][0]["partitions"] == [
            {"partition": "a", "first": 0, "next": 10, "records": 10},
            {"partition": "b", "first": 0, "next": 3, "records": 3},
        ]
        assert snap["groups"]["list"] == [] and snap["groups"]["error"] is None
        assert snap["nodes"]["list"][0]["kind"] == "store"
        assert c.snapshot()["topics"][0]["topic"] == "t"
    assert source.closed


def test_throughput_is_measured_from_successive_heads() -> None:
    """A partition counts from its second poll; a head that went down counts 0;
    bytes/s where the source gives bytes, else None."""
    source = Scripted(
        [
            heads(a=(10, 1000)),
            heads(a=(15, 1500), b=100),  # b is new: not counted
            heads(a=(12, 1200), b=103),  # a went down: 0
            heads(a=(20, 2000), b=103),
        ]
    )
    with console(source, interval=0.05) as c:
        snap = wait_json(c.url, lambda s: s["cluster"]["polls"] >= 6, "six polls")
        history = snap["topics"][0]["history"]
        assert [h["records"] for h in history[:3]] == [5, 3, 8], history
        assert [h["bytes"] for h in history[:3]] == [500, 0, 800], history
        assert all(h["records"] == 0 for h in history[3:]), history
        assert all(h["seconds"] > 0 for h in history), history
    source = Scripted([heads(a=1), heads(a=4)])
    with console(source, interval=0.05) as c:
        snap = wait_json(c.url, lambda s: s["topics"] and s["topics"][0]["history"], "a point")
        assert snap["topics"][0]["history"][0]["bytes"] is None


def test_a_slow_cluster_never_stalls_a_request() -> None:
    gate = threading.Event()
    source = Scripted([heads(a=1)], gate=gate)
    with console(source) as c:
        try:
            # The first poll is held: the page still answers, "not polled yet".
            for _ in range(3):
                assert get_json(c.url)["cluster"]["reachable"] is None
            assert status_of(exchange(c.url, b"GET / HTTP/1.0\r\n\r\n")) == 200
        finally:
            gate.set()
        wait_json(c.url, lambda s: s["cluster"]["reachable"] is True, "the held poll")


BAD = {
    "unknown path": (b"GET /etc/passwd HTTP/1.0\r\n\r\n", 404),
    "unknown api": (b"GET /api/clusters HTTP/1.0\r\n\r\n", 404),
    "write method": (b"POST /api/cluster HTTP/1.0\r\nContent-Length: 0\r\n\r\n", 405),
    "unknown method": (b"BREW / HTTP/1.0\r\n\r\n", 501),
    "malformed request line": (b"hello\r\n\r\n", 400),
    "bad version": (b"GET / HTTP/9.9\r\n\r\n", 505),
    "oversized request line": (b"GET /" + b"a" * 70_000 + b" HTTP/1.0\r\n\r\n", 414),
    "oversized header": (b"GET / HTTP/1.0\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
    "too many headers": (b"GET / HTTP/1.0\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431),
    "another host": (b"GET /api/cluster HTTP/1.1\r\nHost: rebound.example:80\r\n\r\n", 421),
    "another host, no port": (b"GET / HTTP/1.1\r\nHost: 127.0.0.1.example\r\n\r\n", 421),
    "a body": (b"GET /api/cluster HTTP/1.0\r\nContent-Length: 1000000000\r\n\r\n", 413),
    "chunked body": (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 413),
}


@pytest.mark.parametrize("request_, status", BAD.values(), ids=BAD.keys())
def test_bad_requests_get_an_error_and_the_console_goes_on(request_: bytes, status: int) -> None:
    with console(Scripted([heads(a=1)])) as c:
        answer = exchange(c.url, request_)
        assert status_of(answer) == status, answer[:300]
        if status == 405:
            assert b"\r\nAllow: GET, HEAD\r\n" in answer
        assert get_json(c.url)["console"]["interval"] == 1.0


def test_the_page_and_the_api_answer_get_and_head() -> None:
    with console(Scripted([heads(a=1)])) as c:
        port = c.server.server_address[1]
        for host in [f"127.0.0.1:{port}", f"localhost:{port}", "localhost", "[::1]:80"]:
            answer = exchange(c.url, f"GET /api/cluster HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            assert status_of(answer) == 200, (host, answer[:300])
        answer = exchange(c.url, b"GET /?refresh=1 HTTP/1.0\r\n\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert status_of(head) == 200 and body == page()
        assert b"Content-Type: text/html; charset=utf-8" in head
        # The inline script may run (its hash is allowed), nothing from elsewhere.
        csp = re.search(rb"Content-Security-Policy: ([^\r]*)", head)
        assert csp and b"script-src 'sha256-" in csp.group(1), head
        assert b"default-src 'none'" in csp.group(1) and b"connect-src 'self'" in csp.group(1)
        assert re.findall(rb"https?://[^\"' ]+", body) == [b"http://www.w3.org/2000/svg"]
        answer = exchange(c.url, b"HEAD /api/cluster HTTP/1.0\r\n\r\n")
        assert status_of(answer) == 200 and answer.endswith(b"\r\n\r\n")
        assert b"Content-Type: application/json" in answer


def test_a_trickling_client_is_cut_at_its_deadline_and_stalls_nobody() -> None:
    with console(Scripted([heads(a=1)]), request_timeout=5.0, request_deadline=1.5) as c:
        host, port = c.server.server_address[:2]
        slow = socket.create_connection((host, port), timeout=30)
        slow.sendall(b"GET /api/clu")
        cut = threading.Event()

        def trickle() -> None:
            # One byte every 0.2 s: no single read waits long, the request never ends.
            try:
                while True:
                    slow.sendall(b"s")
                    time.sleep(0.2)
            except OSError:
                cut.set()

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        try:
            # Meanwhile every other client is served.
            for _ in range(5):
                assert get_json(c.url)["cluster"]["polls"] >= 0
            wait_for(cut.is_set, "the trickling connection to be cut", within=60)
        finally:
            slow.close()
            t.join(10)


def test_connections_over_the_cap_get_503_until_one_closes() -> None:
    with console(Scripted([heads(a=1)]), max_connections=2, request_timeout=60.0) as c:
        host, port = c.server.server_address[:2]
        idle = [socket.create_connection((host, port), timeout=30) for _ in range(2)]
        try:
            # Refused at once, before it sends anything.
            with socket.create_connection((host, port), timeout=30) as third:
                assert status_of(third.recv(1000)) == 503
        finally:
            for s in idle:
                s.close()

        def served() -> bool:
            try:
                answer = exchange(c.url, b"GET /api/cluster HTTP/1.0\r\n\r\n")
            except ConnectionResetError:  # refused while this request was arriving
                return False
            return status_of(answer) == 200

        wait_for(served, "a free connection slot", within=60)


def test_no_cluster_reachable_is_said_in_the_json() -> None:
    with (
        dead_tower() as nowhere,
        Console(listen="127.0.0.1:0", towers=[nowhere], timeout=0.5, slow_interval=0.5) as c,
    ):
        snap = wait_json(
            c.url,
            lambda s: s["cluster"]["reachable"] is False and s["groups"]["error"],
            "the failed polls",
        )
        assert snap["cluster"]["error"].startswith("FetchTimeoutError"), snap
        assert snap["cluster"]["updated"] is None and snap["topics"] == []
        assert snap["groups"]["error"].startswith("CommitTimeoutError"), snap
        # No tower heard: the nodes could not be read either.
        snap = wait_json(c.url, lambda s: s["nodes"]["error"], "the nodes' failed poll")
        assert snap["nodes"]["error"].startswith("FetchTimeoutError"), snap
        assert snap["nodes"]["list"] is None


def test_the_command_prints_its_url_serves_and_stops_on_sigterm() -> None:
    with (
        dead_tower() as nowhere,
        console_process("--tower", nowhere, "--timeout", "0.5") as (
            url,
            proc,
        ),
    ):
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        assert get_json(url)["console"]["interval"] == 1.0
        assert status_of(exchange(url, b"GET /nope HTTP/1.0\r\n\r\n")) == 404
        assert proc.poll() is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--listen", "8080"], "HOST:PORT"),
        (["--listen", "127.0.0.1:70000"], "HOST:PORT"),
        (["--listen", "localhost:http"], "HOST:PORT"),
        (["--interval", "0"], "seconds > 0"),
        (["--timeout", "nan"], "seconds"),
    ],
)
def test_the_command_refuses_bad_options(args: list[str], message: str) -> None:
    r = subprocess.run([*CLI, "console", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_the_command_says_when_the_address_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(
            [*CLI, "console", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 1 and "Address already in use" in r.stderr, r.stderr


def test_the_python_api_refuses_bad_values() -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        Console(listen="nowhere")
    with pytest.raises(ValueError, match="interval"):
        Console(listen="127.0.0.1:0", interval=0, source=Scripted([heads(a=1)]))
    with pytest.raises(ValueError, match="max_connections"):
        Console(listen="127.0.0.1:0", max_connections=0, source=Scripted([heads(a=1)]))
