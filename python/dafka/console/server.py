"""The console's HTTP server (the standard library's ``ThreadingHTTPServer``): ``/``
the page, ``/api/cluster`` the last snapshot as JSON, nothing else.

A hostile client cannot stall the others: each connection has a thread of its own
(at most ``max_connections`` at once: the next ones get a 503 and are closed), each
read or write on it waits at most ``timeout`` seconds, and a connection still open
``deadline`` seconds after it was accepted is shut down (a client trickling a request
one byte at a time). One request per connection (HTTP/1.0); a request with a body,
a request line over 64 KiB or a header line over 64 KiB (or over 100 headers) is
refused with an error status, and so is any method but GET and HEAD. A console bound
to a loopback address refuses a Host header that is no loopback name (421: DNS
rebinding)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import ipaddress
import logging
import re
import socket
import socketserver
import threading
import time
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from dafka.console.poller import Poller

log = logging.getLogger("dafka.console")


def page() -> bytes:
    """The console's page (``index.html``, package data of ``dafka.console``)."""
    return resources.files("dafka.console").joinpath("index.html").read_bytes()


def _csp(html: bytes) -> str:
    """A Content-Security-Policy that allows the page's own inline script and style
    (by their hashes) and requests to this server only."""

    def hashes(tag: bytes) -> str:
        found = re.findall(rb"<" + tag + rb">(.*?)</" + tag + rb">", html, re.S)
        return " ".join(
            f"'sha256-{base64.b64encode(hashlib.sha256(body).digest()).decode()}'" for body in found
        )

    return (
        f"default-src 'none'; script-src {hashes(b'script')}; style-src {hashes(b'style')}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6; port 0 picks a free one) as
    ``(host, port)``; ValueError saying what to give otherwise."""
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not sep or not host or not 0 <= port <= 65535:
        raise ValueError(
            f"listen address must be HOST:PORT, e.g. 127.0.0.1:8080 ([::1]:8080 for IPv6, "
            f"port 0 for a free one), got {text!r}"
        )
    return host, port


def _is_loopback(name: str) -> bool:
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class _Handler(http.server.BaseHTTPRequestHandler):
    server: ConsoleServer
    server_version = "dafka-console"
    sys_version = ""
    # Answers to a malformed request (which names no version) have a status line too.
    default_request_version = "HTTP/1.0"
    #: Whether the answer was an error: see :meth:`finish`.
    _linger = False

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.io_timeout)

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _refuse_method(self) -> None:
        self._linger = True
        self.send_response(405, "Method Not Allowed")
        self.send_header("Allow", "GET, HEAD")
        self._send_body(b"the console is read-only: GET or HEAD\n", "text/plain", True)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _answer(self, body: bool) -> None:
        length = self.headers.get("Content-Length")
        if length not in (None, "0") or self.headers.get("Transfer-Encoding") is not None:
            self.send_error(413, "Content Too Large", "a GET or HEAD request carries no body")
            return
        if not self.server.host_allowed(self.headers.get("Host")):
            self.send_error(
                421, "Misdirected Request", "a console on a loopback address answers to it only"
            )
            return
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            self.send_response(200)
            self.send_header("Content-Security-Policy", self.server.csp)
            self._send_body(self.server.page, "text/html; charset=utf-8", body)
        elif path == "/api/cluster":
            self.send_response(200)
            self._send_body(self.server.poller.snapshot_json(), "application/json", body)
        else:
            self.send_error(404, "Not Found", "the console serves / and /api/cluster")

    def _send_body(self, data: bytes, kind: str, body: bool) -> None:
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self._linger = True
        super().send_error(code, message, explain)

    def finish(self) -> None:
        """After an error, the client may still be sending (the rest of an oversized
        request): closing with unread bytes would reset the connection, and the client
        could lose the answer. So the answer's end is signalled (FIN) and what is left
        read for at most a second (and 1 MiB), until the client closes."""
        super().finish()
        if not self._linger:
            return
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(1.0)
            left = 1 << 20
            while left > 0:
                chunk = self.connection.recv(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class ConsoleServer(http.server.ThreadingHTTPServer):
    """Serves the page and ``poller``'s snapshot on ``(host, port)`` (see the module's
    doc for the bounds). :meth:`serve_forever` in a thread; :meth:`shutdown` and
    :meth:`server_close` to stop."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        poller: Poller,
        *,
        max_connections: int = 64,
        timeout: float = 10.0,
        deadline: float = 30.0,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.poller = poller
        self.page = page()
        self.csp = _csp(self.page)
        self.io_timeout = timeout
        self.deadline = deadline
        self._slots = threading.BoundedSemaphore(max_connections)
        self._open: dict[socket.socket, float] = {}
        self._open_lock = threading.Lock()
        self._closed = threading.Event()
        super().__init__(address, _Handler)
        self._reaper = threading.Thread(target=self._reap, name="dafka-console-reaper", daemon=True)
        self._reaper.start()

    def server_bind(self) -> None:
        # HTTPServer's asks the DNS for the host's name (getfqdn), which can hang
        # where no DNS answers; the name is not used here.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self._bound()

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request's Host header names this server. A console bound to a
        loopback address answers only to a loopback name (127.0.0.1, [::1],
        localhost): a web page elsewhere that rebinds its own name to 127.0.0.1 (DNS
        rebinding) gets no snapshot. A request without Host is no browser's."""
        if host is None or not _is_loopback(self._bound()[0]):
            return True
        name = host.strip()
        if name.startswith("["):
            name = name[1 : name.find("]")]
        elif name.count(":") == 1:
            name = name.split(":", 1)[0]
        return _is_loopback(name)

    def _bound(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return (host if isinstance(host, str) else bytes(host).decode()), int(port)

    @property
    def url(self) -> str:
        host, port = self._bound()
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            # Too many connections open: say so at once (never wait on this client).
            try:
                request.settimeout(0)
                request.send(
                    b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\n\r\n"
                )
            except OSError:
                pass
            self._close_now(request)
            return
        with self._open_lock:
            self._open[request] = time.monotonic() + self.deadline
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(request)
            raise

    @staticmethod
    def _close_now(request: socket.socket) -> None:
        """Closes a connection refused at once, after reading what already came
        (without waiting), so that the close does not reset it under the answer."""
        try:
            request.shutdown(socket.SHUT_WR)
            for _ in range(16):
                if not request.recv(65536, socket.MSG_DONTWAIT):
                    break
        except OSError:
            pass
        request.close()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def _release(self, request: socket.socket) -> None:
        with self._open_lock:
            if self._open.pop(request, None) is None:
                return
        self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed (reset, timed out, cut at its deadline) concerns
        that client alone: logged at debug level, not printed."""
        log.debug("console: connection from %s failed", client_address, exc_info=True)

    def _reap(self) -> None:
        """Shuts down the connections open past their deadline (their thread then
        ends on its next read or write)."""
        while not self._closed.wait(0.25):
            now = time.monotonic()
            with self._open_lock:
                late = [s for s, until in self._open.items() if until <= now]
            for s in late:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()
