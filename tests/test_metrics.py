"""Prometheus metrics (docs/metrics.md): ``dafka.serve_metrics`` in this process, and
``--metrics`` of the binaries and of ``dafka store`` / ``dafka tower``. Every scrape is
parsed by the official ``prometheus_client`` OpenMetrics parser, and the figures are
compared with the workload and with ``stats()``. The port is also tried as a hostile
client would: unknown paths, other methods, garbage, a client that sends nothing, a
megabyte of headers, more clients than it serves at once (the cap itself:
``metrics::tests``); none of it stalls the nodes or a later scrape. In a secure cluster
the port shows no secret and no record, and no method writes.
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import zmq
from nodes_util import drain, store_and_producer, wait_for
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from secure_util import FAST as SECURE_FAST
from secure_util import Keys, secure_tower
from test_binaries import FAST, LOCAL, PY_CLI, STORE_BIN, TOWER_BIN, Procs, produce, run
from test_binaries import procs as procs  # the fixture

import dafka

pytestmark = pytest.mark.timeout(180)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

#: The bytes of every record of the workload (its body: metadata and value), so that a
#: node that received some twice (live and from a store) still counts BODY per record.
BODY = 32


def varint_len(n: int) -> int:
    """Octets of ``n`` as an unsigned LEB128 varint."""
    return next(i for i in range(1, 6) if n < 1 << (7 * i))


def body_size(
    value: bytes, key: bytes | None = None, headers: list[tuple[str, bytes]] | None = None
) -> int:
    """A record's bytes as docs/metrics.md ("Bytes") counts them: a flags octet and an
    8-octet timestamp, the key and headers each with their varint lengths, the value."""
    size = 1 + 8 + len(value)
    if key is not None:
        size += varint_len(len(key)) + len(key)
    if headers:
        size += varint_len(len(headers))
        for name, v in headers:
            size += varint_len(len(name.encode())) + len(name.encode())
            size += varint_len(len(v)) + len(v)
    return size


def plain(j: int, prefix: bytes = b"") -> bytes:
    """A value of 23 bytes: a record of BODY bytes without key or headers."""
    return prefix + b"%0*d" % (23 - len(prefix), j)


def keyed(j: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """A value, key and headers of a record of BODY bytes: 9 + (1 + 4) + (1 + 2 + 4) + 11."""
    return b"%011d" % j, b"k%03d" % j, [("h", b"%03d" % j)]


def scrape_text(url: str) -> str:
    """The text of one scrape, checked to be OpenMetrics."""
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        return str(r.read().decode())


def scrape(url: str) -> tuple[Samples, dict[str, str]]:
    """``({(sample name, labels): value}, {family name: type})`` of one scrape."""
    return parse(scrape_text(url))


def parse(text: str) -> tuple[Samples, dict[str, str]]:
    """:func:`scrape`'s figures of a scrape's text."""
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, types


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    got = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    assert len(got) == 1, f"{name}{labels}: {len(got)} samples"
    return got[0]


def nodes(samples: Samples, kind: str) -> set[str]:
    return {dict(ls)["node"] for (_, ls) in samples if dict(ls).get("kind") == kind}


def status(url: str, method: str = "GET") -> int:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def raw(port: int, data: bytes) -> bytes:
    """Sends ``data`` and returns the whole answer (the server closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        return read_all(s)


def read_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def test_a_scrape_counts_the_workload_and_matches_stats(tmp_path: Path) -> None:
    # Records without metadata and with a key and headers, of BODY bytes each.
    n, k = 3000, 20
    assert body_size(plain(0)) == body_size(*keyed(0)) == body_size(plain(0, b"late")) == BODY
    total = n + k
    with (
        dafka.serve_metrics("127.0.0.1", 0) as server,
        dafka.Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t,
        dafka.Store(tmp_path / "s", towers=[t.endpoint]) as first,
        dafka.Producer("orders", towers=[t.endpoint]) as p,
        dafka.Consumer(["orders"], towers=[t.endpoint]) as c,
    ):
        tower, store = t.endpoint, first.address
        p.wait_for_stores(1, timeout=30)
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
        for i in range(0, n, 500):
            p.send_many([plain(j) for j in range(i, i + 500)], timeout=30)
        for j in range(k):
            v, key, headers = keyed(j)
            p.send(v, key, headers=headers, timeout=30)
        assert p.flush(timeout=60) == 0
        assert len(drain(c, total)) == total
        s, types = scrape(server.url)
        # Every node of the process (other tests' nodes may live in it too).
        assert p.address in nodes(s, "producer") and store in nodes(s, "store")
        assert tower in nodes(s, "tower") and c.address in nodes(s, "consumer")
        # What the producer sent and the store appended, ACKed before the scrape, in
        # records and in bytes.
        sent = value(s, "dafka_records_sent_total", node=p.address, topic="orders")
        assert sent == total
        assert value(s, "dafka_bytes_sent_total", node=p.address) == BODY * total
        assert value(s, "dafka_store_appended_total", node=store) == total
        assert value(s, "dafka_store_bytes_appended_total", node=store) == BODY * total
        assert value(s, "dafka_delivered_total", node=c.address) == total
        assert p.stats()["bytes_sent"] == BODY * total
        assert first.stats()["bytes_appended"] == BODY * total
        assert value(s, "dafka_store_acks_sent_total", node=store) >= 1
        assert value(s, "dafka_acks_received_total", node=p.address) >= 1
        assert value(s, "dafka_store_storage_error", node=store) == 0
        assert types["dafka_store_appended"] == "counter"
        assert types["dafka_bytes_received"] == "counter"
        assert types["dafka_peers"] == "gauge"
        assert types["dafka_store_sync_seconds"] == "histogram"
        syncs = value(s, "dafka_store_sync_seconds_count", node=store)
        inf = value(s, "dafka_store_sync_seconds_bucket", node=store, le="+Inf")
        assert syncs >= 1 and inf == syncs
        # docs/metrics.md names every family.
        docs = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text()
        assert [f for f in types if f"`{f}`" not in docs] == []
        # Once quiet, every counter of the store's stats() is the scraped one.
        with dafka.Store(tmp_path / "s2", towers=[tower]) as s2:
            p.send_many([plain(j, b"late") for j in range(100)], timeout=30)
            assert p.flush(timeout=60) == 0
            caught_up = (total + 100, BODY * (total + 100))

            def appended() -> tuple[int, int]:
                st = s2.stats()
                return st["appended"], st["bytes_appended"]

            wait_for(lambda: appended() == caught_up, "the second store to catch up")

            def same() -> bool:
                st = s2.stats()
                sc, _ = scrape(server.url)
                pairs = [
                    ("dafka_store_appended_total", st["appended"]),
                    ("dafka_store_bytes_appended_total", st["bytes_appended"]),
                    ("dafka_store_fetches_sent_total", st["store_fetches_sent"]),
                    ("dafka_records_received_total", st["records_received"]),
                    ("dafka_bytes_received_total", st["bytes_received"]),
                    ("dafka_store_open_files", st["open_files"]),
                    ("dafka_store_sync_seconds_count", st["syncs"]),
                ]
                return all(value(sc, k, node=s2.address) == v for k, v in pairs)

            wait_for(same, "the scrape to equal the second store's stats()")
            # What each node received, served or answered is BODY bytes per record
            # (the second store caught up from FETCH answers; a consumer may receive a
            # record twice, live and from a store).
            per_record = [
                (c.address, "dafka_records_received_total", "dafka_bytes_received_total"),
                (s2.address, "dafka_records_received_total", "dafka_bytes_received_total"),
                (store, "dafka_store_records_served_total", "dafka_store_bytes_served_total"),
                (p.address, "dafka_direct_records_sent_total", "dafka_direct_bytes_sent_total"),
            ]

            def bytes_per_record() -> bool:
                sc, _ = scrape(server.url)
                return all(
                    value(sc, b, node=node) == BODY * value(sc, r, node=node)
                    for node, r, b in per_record
                )

            wait_for(bytes_per_record, "every node's bytes to be BODY per record counted")
            # Not trivially: the first store served the records the producer had
            # released, and the second received every record.
            assert first.stats()["records_served"] >= total
            assert s2.stats()["records_received"] >= total + 100
        # A closed node leaves the scrape.
        s, _ = scrape(server.url)
        assert store in nodes(s, "store") and s2.address not in nodes(s, "store")
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=5)


def tower_nodes(url: str, tower: str) -> dict[str, float]:
    """The tower's ``dafka_tower_nodes`` by ``node_kind``, from one scrape."""
    s, types = scrape(url)
    assert types["dafka_tower_nodes"] == "gauge"
    return {
        dict(ls)["node_kind"]: v
        for (name, ls), v in s.items()
        if name == "dafka_tower_nodes" and dict(ls)["node"] == tower
    }


def test_a_tower_counts_the_nodes_it_knows_by_kind(tmp_path: Path) -> None:
    """A tower counts the nodes it knows by the kind they announce (PROTOCOL.md, kind
    announcements): a store, a producer and a consumer of this project, and a node that
    beacons without announcing, as the C reference's do, as ``unknown``. A node that
    closes leaves its kind's count."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    with (
        dafka.serve_metrics("127.0.0.1", 0) as server,
        dafka.Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t,
        dafka.Store(tmp_path / "s", towers=[t.endpoint]),
        dafka.Producer("kinds", towers=[t.endpoint]),
    ):
        c = dafka.Consumer(["kinds"], towers=[t.endpoint])
        try:
            want = {"producer": 1, "consumer": 1, "store": 1, "unknown": 0}
            wait_for(lambda: tower_nodes(server.url, t.endpoint) == want, "the three kinds")
            st = t.stats()
            assert {k: st[f"nodes_{k}"] for k in want} == want and st["peers"] == 3, st
            # A C-reference node: its beacon only (4 frames), no announcement.
            legacy = ctx.socket(zmq.PUB)
            legacy.linger = 0
            legacy.connect(t.beacon_in)
            beacon = [b"B", uuid.uuid4().hex.upper().encode(), b"127.0.0.1", b"9"]

            def heard() -> bool:
                legacy.send_multipart(beacon)
                return tower_nodes(server.url, t.endpoint) == {**want, "unknown": 1}

            wait_for(heard, "the node that announces nothing, as unknown")
            legacy.close()
            wait_for(lambda: tower_nodes(server.url, t.endpoint) == want, "it to be forgotten")
            c.close()
            left = {**want, "consumer": 0}
            wait_for(lambda: tower_nodes(server.url, t.endpoint) == left, "the consumer to leave")
            assert value(scrape(server.url)[0], "dafka_peers", node=t.endpoint) == 2
        finally:
            c.close()
            ctx.destroy(linger=0)


def test_bad_requests_get_errors_and_never_stall_the_nodes(tmp_path: Path) -> None:
    with (
        dafka.serve_metrics() as server,
        store_and_producer(tmp_path, "t") as (_, p),
    ):
        base = f"http://127.0.0.1:{server.port}"
        assert status(base + "/") == 404
        assert status(base + "/metrics/x") == 404
        assert status(base + "/metrics", "POST") == 405
        assert raw(server.port, b"\x16\x03\x01 not http\r\n\r\n").startswith(b"HTTP/1.1 400")
        # A client that connects and sends nothing, and one sending 1 MB of headers.
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        big: dict[str, Any] = {}

        def flood() -> None:
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
                try:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * (1 << 20) + b"\r\n\r\n")
                except OSError as e:
                    big["send"] = e
                try:
                    big["answer"] = read_all(s)
                except OSError as e:
                    big["answer"] = f"no answer: {e!r}".encode()

        t = threading.Thread(target=flood)
        t.start()
        try:
            # Records still flow and a scrape still succeeds meanwhile.
            p.send_many([b"x"] * 1000, timeout=30)
            assert p.flush(timeout=60) == 0
            s, _ = scrape(server.url)
            assert value(s, "dafka_records_sent_total", node=p.address) == 1000
            t.join(timeout=60)
            assert big["answer"].startswith(b"HTTP/1.1 431"), big
            # The silent client is answered 408 and closed, not kept.
            assert read_all(silent).startswith(b"HTTP/1.1 408")
        finally:
            silent.close()
            t.join(timeout=60)
        s, _ = scrape(server.url)
        assert value(s, "dafka_records_sent_total", node=p.address) == 1000


def test_serve_metrics_refuses_what_it_cannot_serve() -> None:
    with dafka.serve_metrics() as a, pytest.raises(dafka.ConfigError, match="cannot listen"):
        dafka.serve_metrics("127.0.0.1", a.port)
    with pytest.raises(dafka.ConfigError, match="host is empty"):
        dafka.serve_metrics("", 0)
    with pytest.raises(dafka.ConfigError, match="HOST:PORT"):
        dafka.serve_metrics("tcp://127.0.0.1", 0)
    with pytest.raises(OverflowError):
        dafka.serve_metrics("127.0.0.1", 70000)


def test_binaries_serve_metrics_of_their_node(procs: Procs, tmp_path: Path) -> None:
    cfg = tmp_path / "tower.toml"
    cfg.write_text('[metrics]\nlisten = "127.0.0.1:0"\n')
    tower = procs.start(
        "tower", [str(TOWER_BIN), "--config", str(cfg), "--beacon-in", LOCAL, "--beacon-out", LOCAL]
    )
    store = procs.start(
        "store",
        [
            str(STORE_BIN),
            str(tmp_path / "s"),
            "--tower",
            tower.fields["endpoint"],
            "--metrics",
            "127.0.0.1:0",
            *FAST,
        ],
    )
    n = 2500
    address, values = produce(tower.fields["endpoint"], "m", n)
    s, _ = scrape(f"http://{store.fields['metrics']}/metrics")
    assert nodes(s, "store") == {store.fields["address"]}
    assert value(s, "dafka_store_appended_total") == n
    assert value(s, "dafka_store_bytes_appended_total") == sum(map(body_size, values))
    assert value(s, "dafka_records_received_total") >= n
    t, _ = scrape(f"http://{tower.fields['metrics']}/metrics")
    assert nodes(t, "tower") == {tower.fields["endpoint"]}
    assert value(t, "dafka_beacons_total") >= 1
    assert status(f"http://{tower.fields['metrics']}/nope") == 404
    assert store.stop() == 0 and tower.stop() == 0
    # The Python command line runs the same code.
    py_tower = procs.start(
        "py-tower",
        [*PY_CLI, "tower", "--beacon-in", LOCAL, "--beacon-out", LOCAL, "--metrics", "127.0.0.1:0"],
    )
    t, _ = scrape(f"http://{py_tower.fields['metrics']}/metrics")
    assert nodes(t, "tower") == {py_tower.fields["endpoint"]}
    assert py_tower.stop() == 0
    bad = run([str(STORE_BIN), str(tmp_path / "x"), "--metrics", "9100"])
    assert bad.returncode == 2 and '--metrics "9100"' in bad.stderr, bad.stderr
    assert address


def test_a_secure_cluster_s_metrics_show_no_secret_no_record_and_take_no_write(
    tmp_path: Path,
) -> None:
    """The port is unauthenticated (docs/metrics.md): what it shows an outsider is
    counts and addresses, never a secret key, a key file's path or a record, and no
    method changes anything."""
    keys = Keys(tmp_path / "keys", {"tower": "tower", "s": "store", "p": "producer"})
    marker = b"payload-" + os.urandom(8).hex().encode()
    with (
        secure_tower(keys) as t,
        dafka.Store(tmp_path / "s", towers=[t.endpoint], **keys.of("s"), **SECURE_FAST) as st,  # type: ignore[arg-type]
        dafka.Producer("t", towers=[t.endpoint], **keys.of("p"), **SECURE_FAST) as p,  # type: ignore[arg-type]
        dafka.serve_metrics() as server,
    ):
        p.wait_for_stores(1, timeout=30)
        p.send_many([marker] * 100, timeout=30)
        assert p.flush(timeout=60) == 0
        wait_for(lambda: st.stats()["appended"] == 100, "the store to append 100")
        text = scrape_text(server.url)
        samples, _ = parse(text)
        assert value(samples, "dafka_records_sent_total", node=p.address) == 100
        assert value(samples, "dafka_store_appended_total", node=st.address) == 100
        assert marker.decode() not in text
        assert str(tmp_path) not in text
        for name in ("tower", "s", "p"):
            _, secret = keys.z85(name)
            assert secret.decode() not in text, name
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            request = (
                f"{method} /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nreset"
            ).encode()
            assert raw(server.port, request).startswith(b"HTTP/1.1 405"), method
        samples, _ = scrape(server.url)
        assert value(samples, "dafka_records_sent_total", node=p.address) == 100
        assert value(samples, "dafka_store_appended_total", node=st.address) == 100
