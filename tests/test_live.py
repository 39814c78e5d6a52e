"""The live path: towers, producers and consumers on 127.0.0.1 ephemeral ports."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nodes_util import drain, wait_for

import dafka
from dafka import Consumer, Producer, Record, Tower

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).parent
LOCAL = "tcp://127.0.0.1:0"


@pytest.fixture
def tower() -> Iterator[Tower]:
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t:
        yield t


def test_tower_endpoint_and_context_manager(tower: Tower) -> None:
    host, ports = tower.endpoint.rsplit(":", 1)
    pin, pout = ports.split(",")
    assert host == "tcp://127.0.0.1"
    assert tower.beacon_in.endswith(":" + pin) and tower.beacon_out.endswith(":" + pout)
    assert tower.stats()["malformed"] == 0


def test_tower_forgets_a_node_at_once_when_it_closes_or_dies(tower: Tower) -> None:
    """`stats()["peers"]` counts the nodes the tower knows. One that closes, or
    whose process is killed, is forgotten when its connection drops, not
    seconds later: nodes joining meanwhile are not told of it."""
    opts = {"towers": [tower.endpoint], "beacon_interval": 0.1}
    with Producer("t", **opts) as p:  # type: ignore[arg-type]
        wait_for(lambda: tower.stats()["peers"] == 1, "the producer known")
        with Consumer(["t"], **opts):  # type: ignore[arg-type]
            wait_for(lambda: tower.stats()["peers"] == 2, "the consumer known")
        wait_for(lambda: tower.stats()["peers"] == 1, "the closed consumer forgotten")
        code = (
            "import sys, time, dafka\n"
            f"c = dafka.Consumer(['t'], towers=[{tower.endpoint!r}], beacon_interval=0.1)\n"
            "print('READY', flush=True)\n"
            "time.sleep(120)\n"
        )
        child = _spawn("-c", code)
        try:
            assert child.stdout is not None
            assert child.stdout.readline().startswith("READY")
            wait_for(lambda: tower.stats()["peers"] == 2, "the child's consumer known")
            child.kill()
            child.wait(timeout=20)
            wait_for(lambda: tower.stats()["peers"] == 1, "the killed node forgotten")
        finally:
            _stop([child])
        assert p.stats()["malformed"] == 0
    wait_for(lambda: tower.stats()["peers"] == 0, "the closed producer forgotten")


def test_advertise_host_is_the_host_peers_are_told(tower: Tower, tmp_path: Path) -> None:
    """A node behind NAT or in a container names the host its peers must connect to
    (the CLI's `--advertise-host`): the tower relays its beacon as
    `tcp://HOST:PORT`. Without it, a node bound to 127.0.0.1 announces that. Each
    node is alone on the tower, watched by a raw SUB: no node connects to (or looks
    up) a made-up host."""
    import zmq

    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"B")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(tower.beacon_out)

    def relayed(address: str) -> str:
        """The endpoint the tower relays for the node at `address`."""
        for _ in range(200):  # beacons every 0.1 s: 20 s at most
            if sub.poll(100):
                frames = sub.recv_multipart()
                if len(frames) == 3 and frames[1] == address.encode():
                    return frames[2].decode()
        raise AssertionError(f"no beacon of {address} relayed")

    opts = {"towers": [tower.endpoint], "beacon_interval": 0.1}
    nodes: list[tuple[Callable[..., Any], str | None, str]] = [
        (lambda **kw: Producer("t", **kw), "node1.example", "tcp://node1.example:"),
        (lambda **kw: Consumer(["t"], **kw), "[::1]", "tcp://[::1]:"),
        # Empty: the tower puts in the TCP peer address.
        (lambda **kw: dafka.Store(tmp_path / "s", **kw), "", "tcp://127.0.0.1:"),
        (lambda **kw: Producer("t", **kw), None, "tcp://127.0.0.1:"),
    ]
    try:
        for make, host, prefix in nodes:
            with make(advertise_host=host, **opts) as node:
                port = node.endpoint.rsplit(":", 1)[1]
                assert relayed(node.address) == prefix + port, host
            # Else the tower would tell the next node of this one, which would then
            # look up and connect to the made-up host.
            wait_for(lambda: tower.stats()["peers"] == 0, "the node forgotten")
        # A read client (every Spark read task runs one) beacons too.
        with dafka.HeadsWatch("t", advertise_host="node2.example", **opts) as w:  # type: ignore[arg-type]
            # No store answers; after its first round the watch goes on beaconing.
            with contextlib.suppress(dafka.FetchTimeoutError):
                w.offsets(timeout=0.5, settle=0.1)
            for _ in range(200):
                if sub.poll(100):
                    frames = sub.recv_multipart()
                    if frames[2].startswith(b"tcp://node2.example:"):
                        break
            else:
                raise AssertionError("no beacon of the read client relayed")
    finally:
        sub.close()
        ctx.term()
    with pytest.raises(dafka.ConfigError, match="advertise_host must be a host"):
        dafka.heads("t", peers=["tcp://127.0.0.1:1"], advertise_host="a b")
    for bad in ("tcp://10.0.0.5", "10.0.0.5:5556", "a b", "h\0", "*", "-x", "h" * 256):
        with pytest.raises(dafka.ConfigError, match="advertise_host must be a host"):
            Producer("t", advertise_host=bad)
        with pytest.raises(dafka.ConfigError, match="advertise_host must be a host"):
            dafka.Store(tmp_path / "bad", advertise_host=bad)
    assert not (tmp_path / "bad").exists(), "a refused store writes nothing"


@pytest.mark.parametrize("wire", ["rfc", "zproto"])
def test_in_process_tower_producer_two_consumers(tower: Tower, wire: str) -> None:
    opts = {"towers": [tower.endpoint], "wire": wire}
    with (
        Consumer(["t"], offset_reset="earliest", beacon_interval=0.1, **opts) as c1,  # type: ignore[arg-type]
        Consumer(["t", "other"], offset_reset="earliest", beacon_interval=0.1, **opts) as c2,  # type: ignore[arg-type]
        Producer("t", head_interval=0.1, beacon_interval=0.1, close_timeout=0, **opts) as p,  # type: ignore[arg-type]
    ):
        assert p.send(b"first") == 0
        assert p.send_many([b"v%d" % i for i in range(1, 5000)]) == 4999
        assert p.send_many([]) is None
        assert p.next_offset == 5000
        for c in (c1, c2):
            got = drain(c, 5000)
            assert [r.offset for r in got] == list(range(5000))
            # Stamped at `send`: its create time.
            ts = got[0].timestamp
            assert ts is not None and got[0].timestamp_type == dafka.TIMESTAMP_CREATE
            assert got[0] == Record("t", p.address, 0, b"first", timestamp=ts)
            assert type(got[0]) is Record
            # One str object per partition, shared by its records across calls.
            assert all(r.topic is got[0].topic and r.partition is got[0].partition for r in got)
            assert all(r.value == b"v%d" % r.offset for r in got[1:])
        assert c1.poll(timeout=0.05) is None


def test_static_peers_no_tower_and_seek() -> None:
    with Producer("s", close_timeout=0) as p:
        for i in range(100):
            p.send(b"%d" % i)
        with Consumer(["s"], peers=[p.endpoint], offset_reset="earliest") as c:
            p.connect(c.endpoint)
            got = drain(c, 100)
            assert [r.offset for r in got] == list(range(100))
            c.seek(p.address, 90)
            again = drain(c, 10)
            assert [r.offset for r in again] == list(range(90, 100))
            assert [r.value for r in again] == [b"%d" % i for i in range(90, 100)]


def test_node_starts_without_tower_and_joins_when_it_appears() -> None:
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as probe:
        endpoint = probe.endpoint
    # The tower is gone: nodes still start.
    fast = {"beacon_interval": 0.1, "beacon_timeout": 1.0}
    with (
        Consumer(["late"], towers=[endpoint], offset_reset="earliest", **fast) as c,  # type: ignore[arg-type]
        Producer("late", towers=[endpoint], head_interval=0.1, close_timeout=0, **fast) as p,  # type: ignore[arg-type]
    ):
        p.send_many([b"a", b"b", b"c"])
        assert c.poll(timeout=0.3) is None
        pin, pout = endpoint.rsplit(":", 1)[1].split(",")
        with Tower(beacon_in=f"tcp://127.0.0.1:{pin}", beacon_out=f"tcp://127.0.0.1:{pout}"):
            got = drain(c, 3)
            assert [r.value for r in got] == [b"a", b"b", b"c"]


def test_iteration_and_poll_timeout() -> None:
    with (
        Producer("it", close_timeout=0) as p,
        Consumer(["it"], peers=[p.endpoint], offset_reset="earliest") as c,
    ):
        p.connect(c.endpoint)
        p.send_many([b"x", b"y"])
        it = iter(c)
        assert next(it).value == b"x"
        assert next(it).value == b"y"
        assert c.poll(timeout=0.0) is None


def test_min_acks_zero_flush_and_delivery_callback() -> None:
    seen: list[int] = []
    with Producer("d", min_acks=0, on_delivery=seen.append) as p:
        assert p.acked_offset is None
        p.send_many([b"a"] * 10)
        assert p.flush(timeout=10) == 0
        assert p.acked_offset == 9
        assert seen == [9]
        assert p.poll() == 0


def test_buffer_full_raises_after_timeout() -> None:
    with Producer("full", max_unacked_bytes=100, send_timeout=0.2, close_timeout=0) as p:
        p.send(b"x" * 60)
        with pytest.raises(dafka.BufferFullError, match="max_unacked_bytes=100"):
            p.send(b"y" * 60)
        with pytest.raises(dafka.BufferFullError):
            p.send_many([b"z" * 60], timeout=0.1)
        assert p.flush(timeout=0.1) == 1  # no store ever ACKs


def test_consumer_forgets_positions_unheard_of_for_forget_after() -> None:
    """A position not heard of for `forget_after` seconds is forgotten (a topic that
    Spark jobs feed gets a partition per task); a seeked one is kept."""
    given, seeked = "6" * 32, "5" * 32
    with Consumer(["t"], start_offsets={given: 3}, idle_after=0.1, forget_after=0.3) as c:
        c.seek(seeked, 7)
        assert c.positions() == {given: 3, seeked: 7}
        wait_for(lambda: c.stats()["partitions_forgotten"] == 1, "the given offset forgotten")
        assert c.positions() == {seeked: 7}
    with Consumer(["t"], start_offsets={given: 3}, forget_after=None) as c:
        assert c.positions() == {given: 3}


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="rfc"):
        Producer("t", wire="json")
    with pytest.raises(dafka.ConfigError, match="earliest"):
        Consumer(["t"], offset_reset="middle")
    with pytest.raises(TypeError, match="list of str"):
        Consumer("t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        Consumer([])
    # A bare str where a list of endpoints goes says how to fix it.
    with pytest.raises(TypeError, match=r"'peers': .*wrap it in a list"):
        Consumer(["t"], peers="tcp://127.0.0.1:1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"'towers': expected a list of str, got list"):
        Producer("t", towers=[5556])  # type: ignore[list-item]
    with pytest.raises(dafka.ConfigError, match="tower endpoint"):
        Producer("t", towers=["localhost:5556"])
    with pytest.raises(dafka.ConfigError, match="bind endpoint"):
        Producer("t", bind="nowhere")
    with pytest.raises(dafka.ConfigError, match="topic"):
        Producer("")
    with pytest.raises(ValueError, match="seconds"):
        Producer("t", head_interval=-1)
    with pytest.raises(dafka.ConfigError, match="idle_after must be > 0"):
        Consumer(["t"], idle_after=0)
    with pytest.raises(dafka.ConfigError, match="forget_after must be > 0"):
        Consumer(["t"], forget_after=0)
    with pytest.raises(dafka.ConfigError, match=r"max_buffered_bytes .*must be > 0"):
        Consumer(["t"], max_buffered_bytes=0)
    with pytest.raises(ValueError, match="max_buffered_bytes"):
        Consumer(["t"], max_buffered_bytes=-1)
    with Producer("t", close_timeout=0) as p:
        with pytest.raises(dafka.NodeError, match="bind"):
            Producer("t", bind=p.endpoint)
        with pytest.raises(TypeError, match="bytes"):
            p.send_many(["text"])  # type: ignore[list-item]
        with pytest.raises(TypeError, match=r"encode it first"):
            p.send("text")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"bytes-like object .* got int"):
            p.send(5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"iterable of values"):
            p.send_many(b"abc")  # type: ignore[arg-type]
        # Any bytes-like value is taken as it is.
        first = p.send(bytearray(b"ba"))
        assert p.send_many([memoryview(b"mv"), b"b", bytearray(b"x")]) == first + 3
    with pytest.raises(dafka.ClosedError):
        p.send(b"after close")
    p.close()  # idempotent


def test_endpoints_timeouts_and_sizes_that_used_to_end_a_node() -> None:
    """A NUL byte in an endpoint (the zmq crate panics on one), a peer without its
    port, timeouts too long for the clock, an invalid timeout on the fast path, and a
    value over ``max_record_bytes`` (stores drop it, and its partition stalls): each a
    clear error up front, or taken as "forever", and the node keeps working."""
    nul = "tcp://127.0.0.1\x00:5"
    with Producer("t", min_acks=0) as p:
        for bad in (nul, "tcp://127.0.0.1:*", "tcp://127.0.0.1:0"):
            with pytest.raises(dafka.ConfigError, match="peer endpoint"):
                p.connect(bad)
        with pytest.raises(ValueError, match="seconds"):
            p.send(b"x", timeout=-1)
        with pytest.raises(ValueError, match="seconds"):
            p.send(b"x", timeout=float("nan"))
        assert p.send(b"x") == 0, "the node is alive"
        assert p.flush(1e19) == 0, "a timeout this long is forever"
        assert p.poll(1e19) >= 0
    with pytest.raises(dafka.ConfigError, match="bind endpoint"):
        Producer("t", bind="tcp://127.0.0.1\x00:0")
    with pytest.raises(dafka.ConfigError, match="peer endpoint"):
        Consumer(["t"], peers=["tcp://127.0.0.1:*"])
    with pytest.raises(dafka.ConfigError, match="tower endpoint"):
        Consumer(["t"], towers=["tcp://127.0.0.1\x00:5556"])
    with pytest.raises(dafka.ConfigError, match="bind endpoint"):
        dafka.heads("t", bind=nul, peers=["tcp://127.0.0.1:1"], timeout=0.1)
    with Producer("t", head_interval=1e19, min_acks=0) as p:
        assert [p.send(b"a"), p.send(b"b")] == [0, 1]
        p.flush(1.0)
        assert p.send(b"c") == 2, "the node thread is alive"
    with Consumer(["t"], idle_after=1e19) as c:
        assert c.poll(0.01) is None
        assert c.poll(0.01) is None
    with Producer("t", max_record_bytes=100, min_acks=0) as p:
        with pytest.raises(dafka.RecordTooLargeError, match=r"max_record_bytes=100") as e:
            p.send(b"x" * 101)
        assert isinstance(e.value, ValueError)
        with pytest.raises(dafka.RecordTooLargeError):
            p.send_many([b"ok", b"x" * 101])
        assert p.next_offset == 0, "nothing of the batch was sent"
        assert p.send(b"x" * 100) == 0


def test_values_that_make_no_sense_are_refused_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by an audit: each was accepted and then lost data, waited out a whole
    timeout, wrote in the current directory, or raised a plain ValueError where the
    docs promise ConfigError."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(dafka.ConfigError, match="path is empty"):
        dafka.Store("")
    with pytest.raises(dafka.LogValueError, match="path is empty"):
        dafka.Log("")
    assert list(tmp_path.iterdir()) == [], "nothing written in the current directory"
    with pytest.raises(ValueError, match="pass None to keep records forever"):
        dafka.Store(tmp_path / "s", retain_hours=0)
    with pytest.raises(ValueError, match="pass None to keep records forever"):
        dafka.Log(tmp_path / "l", retain_hours=0)
    with pytest.raises(ValueError, match="pass None to keep them for good"):
        dafka.Store(tmp_path / "s", forget_parked_hours=0)
    with pytest.raises(ValueError, match="pass None to keep them for good"):
        dafka.Log(tmp_path / "l", forget_parked_hours=0)
    with pytest.raises(dafka.ConfigError, match="at most 1024 stores"):
        dafka.Producer("t", min_acks=1025)
    with pytest.raises(dafka.ConfigError, match="max_record_bytes must be at least 1"):
        dafka.Store(tmp_path / "s", max_record_bytes=0)
    with pytest.raises(dafka.ConfigError, match="flush_messages must be at least 1"):
        dafka.Store(tmp_path / "s", flush_messages=0)
    for kw in ({"fsync": "sometimes"}, {"recovery": "hope"}, {"fetch_retry": 0}):
        with pytest.raises(dafka.ConfigError):
            dafka.Store(tmp_path / "s", **kw)  # type: ignore[arg-type]
    with pytest.raises(dafka.ConfigError, match="wire"):
        Producer("t", wire="json")
    for hwm in (2**31, -1):
        with pytest.raises(ValueError, match=r"sndhwm must be an integer from 0 \(unlimited\)"):
            Producer("t", sndhwm=hwm)
        with pytest.raises(ValueError, match=r"rcvhwm must be an integer from 0 \(unlimited\)"):
            dafka.Store(tmp_path / "s", rcvhwm=hwm)
    with pytest.raises(ValueError, match="dialect"):
        dafka.wire.encode(
            dafka.wire.Head(topic=b"t", address=b"A", subject=b"t", sequence=1),
            "json",  # type: ignore[arg-type]
        )
    peers = ["tcp://127.0.0.1:1"]
    for topic in ("", "x" * 256):
        with pytest.raises(dafka.ConfigError, match="topic must be 1 to 255 bytes"):
            dafka.heads(topic, peers=peers, timeout=30)
        with pytest.raises(dafka.ConfigError, match="topic must be 1 to 255 bytes"):
            dafka.HeadsWatch(topic, peers=peers)
        with pytest.raises(dafka.ConfigError, match="topic must be 1 to 255 bytes"):
            dafka.fetch_range(topic, "P", 0, 1, peers=peers, timeout=30)
    with pytest.raises(dafka.ConfigError, match=r"partition name .* must be 1 to 64 bytes"):
        dafka.fetch_range("t", "", 0, 1, peers=peers, timeout=30)
    with pytest.raises(dafka.ConfigError, match=r"partition name .* must be 1 to 64 bytes"):
        dafka.fetch_ranges([("t", "P" * 300, 0, 1)], peers=peers, timeout=30)
    with pytest.raises(ValueError, match=r"start 5 is past end 2"):
        dafka.fetch_range("t", "P", 5, 2, peers=peers, timeout=30)
    with pytest.raises(ValueError, match=r"start 5 is past end 2"):
        dafka.fetch_ranges([("t", "P", 0, 1), ("t", "P", 5, 2)], peers=peers, timeout=30)
    with pytest.raises(dafka.ConfigError, match="forget_after must be > 0"):
        dafka.HeadsWatch("t", peers=peers, forget_after=0)
    c = Consumer(["t"])
    c.close()
    with pytest.raises(dafka.ClosedError):
        c.seek("ZZ", 5)
    assert c.positions() == {}, "a closed consumer records no position"


def test_integer_arguments_out_of_range_name_the_argument(tmp_path: Path) -> None:
    """A negative count or offset is a ValueError that names the argument and its
    range (PyO3 alone raises an OverflowError naming neither)."""
    with pytest.raises(ValueError, match=r"min_acks must be an integer from 0"):
        Producer("t", min_acks=-1)
    with pytest.raises(ValueError, match=r"max_fetch must be an integer from 0 to 4294967295"):
        Consumer(["t"], max_fetch=2**32)
    with pytest.raises(ValueError, match=r'start_offsets\["P"\] must be an integer'):
        Consumer(["t"], start_offsets={"P": -1})
    with pytest.raises(ValueError, match=r"retain_hours must be an integer"):
        dafka.Store(tmp_path, retain_hours=-1)
    with pytest.raises(ValueError, match=r"offset must be an integer"):
        dafka.Record("t", "P", -1, b"v")
    assert dafka.Record("t", "P", 2**64 - 1, b"v").offset == 2**64 - 1
    with pytest.raises(ValueError, match=r"start must be an integer"):
        dafka.fetch_range("t", "P", -1, 1, peers=["tcp://127.0.0.1:1"], timeout=0.1)
    with Consumer(["t"]) as c:
        with pytest.raises(ValueError, match=r"offset must be an integer"):
            c.seek("P", -5)
        with pytest.raises(ValueError, match=r"max_records must be an integer"):
            c.poll_many(-1)


# ---------------------------------------------------------------- multi-process


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.mark.parametrize("wire", ["rfc", "zproto"])
def test_multi_process_tower_producer_two_consumers(wire: str) -> None:
    n = 100_000
    procs: list[subprocess.Popen[str]] = []
    try:
        tower = _spawn("-m", "dafka.cli", "tower", "--beacon-in", LOCAL, "--beacon-out", LOCAL)
        procs.append(tower)
        assert tower.stdout is not None
        line = tower.stdout.readline()
        assert line.startswith("dafka-tower "), line + (tower.stderr.read() if tower.stderr else "")
        endpoint = dict(f.split("=", 1) for f in line.split()[1:])["endpoint"]
        helper = str(HERE / "live_procs.py")
        consumers = [_spawn(helper, "consumer", endpoint, "mp", str(n), wire) for _ in range(2)]
        procs.extend(consumers)
        for c in consumers:
            assert c.stdout is not None
            assert c.stdout.readline().startswith("READY")
        producer = _spawn(helper, "producer", endpoint, "mp", str(n), wire)
        procs.append(producer)
        assert producer.stdout is not None
        assert producer.stdout.readline().startswith("READY")
        for c in consumers:
            out, err = c.communicate(timeout=100)
            assert c.returncode == 0, out + err
            assert out.strip().endswith(f"OK {n}"), out + err
        assert producer.stdout.readline().strip() == "SENT"
        assert producer.stdin is not None
        producer.stdin.close()
        assert producer.wait(timeout=20) == 0
        tower.send_signal(__import__("signal").SIGINT)
        assert tower.wait(timeout=20) == 0
    finally:
        _stop(procs)
