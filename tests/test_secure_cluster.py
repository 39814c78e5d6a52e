"""A secure cluster (CURVE + ZAP + roles) from Python, against hostile peers played
with pyzmq: a tower, two stores, a producer with ``min_acks=2`` and a consumer; an
outsider cannot read, a sniffer on the wire sees no record content, a trusted
consumer-role insider cannot forge ACKs or inject a RECORD, and nothing is lost."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
import zmq.auth
from nodes_util import drain, wait_for
from secure_util import CLUSTER, FAST, Keys, secure_tower, split

import dafka
from dafka import wire

pytestmark = pytest.mark.timeout(180)

SECRET = b"SECRET-PAYLOAD-7f3a9c"


class Sniffer:
    """A TCP relay in front of a node's port that keeps every byte it relays (both
    ways): what anyone on the wire sees."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("tcp://").rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.seen = bytearray()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        pairs: dict[socket.socket, socket.socket] = {}
        self.listener.setblocking(False)
        while not self.stop.is_set():
            ready, _, _ = select.select([self.listener, *pairs], [], [], 0.05)
            for s in ready:
                if s is self.listener:
                    client, _ = self.listener.accept()
                    upstream = socket.create_connection(self.target)
                    pairs[client], pairs[upstream] = upstream, client
                    continue
                if s not in pairs:
                    continue  # closed with its other end earlier in this round
                try:
                    data = s.recv(65536)
                    if data:
                        self.seen += data
                        pairs[s].sendall(data)
                except OSError:
                    data = b""  # a reset, of either end: as a close
                if data:
                    continue
                other = pairs.pop(s)
                pairs.pop(other, None)
                s.close()
                other.close()
        for s in pairs:
            s.close()
        self.listener.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys", CLUSTER)


@pytest.fixture
def tower(keys: Keys) -> Iterator[dafka.Tower]:
    with secure_tower(keys) as t:
        yield t


def test_secure_cluster_against_hostile_peers(
    keys: Keys, tower: dafka.Tower, tmp_path: Path
) -> None:
    towers = [tower.endpoint]
    assert ";curve=" in tower.endpoint
    n = 2000
    values = [SECRET + b"%06d" % i for i in range(n)]
    ctx = zmq.Context()
    sockets: list[zmq.Socket[bytes]] = []
    try:
        with dafka.Producer(
            "t",
            towers=towers,
            min_acks=2,
            head_interval=0.1,
            **keys.of("p"),
            **FAST,  # type: ignore[arg-type]
        ) as p:
            p_ep, p_key = split(p.endpoint)

            # An outsider (a key nobody trusts) subscribes to everything: nothing.
            (tmp_path / "outside").mkdir()
            _, out_sec = zmq.auth.create_certificates(tmp_path / "outside", "eve")
            eve_pub, eve_sec = zmq.auth.load_certificate(out_sec)
            spy = ctx.socket(zmq.SUB)
            sockets.append(spy)
            spy.curve_serverkey, spy.curve_publickey = p_key, eve_pub
            spy.curve_secretkey = eve_sec  # type: ignore[assignment]
            spy.setsockopt(zmq.SUBSCRIBE, b"")
            spy.connect(p_ep)
            # The outsider offers itself as a peer: the producer never connects to
            # a key its trust directory lacks (it would hear its ACKs otherwise).
            lure = ctx.socket(zmq.XPUB)
            sockets.append(lure)
            lure.curve_server = True
            lure.curve_secretkey = eve_sec  # type: ignore[assignment]
            lure.bind("tcp://127.0.0.1:*")
            lure_ep = lure.getsockopt(zmq.LAST_ENDPOINT).decode()  # type: ignore[union-attr]
            p.connect(f"{lure_ep};curve={eve_pub.decode()}")

            # A trusted consumer-role insider, which the producer connects to.
            m_pub, m_sec = keys.z85("mallory")
            assert dafka.read_certificate(keys.secret / "mallory.key_secret").role == "consumer"
            fake = ctx.socket(zmq.XPUB)
            sockets.append(fake)
            # Every subscription is told, also the second store's `M`.
            fake.setsockopt(zmq.XPUB_VERBOSE, 1)
            fake.curve_server = True
            fake.curve_secretkey = m_sec  # type: ignore[assignment]
            fake.bind("tcp://127.0.0.1:*")
            fake_ep = f"{fake.getsockopt(zmq.LAST_ENDPOINT).decode()};curve={m_pub.decode()}"  # type: ignore[union-attr]
            p.connect(fake_ep)
            want = b"\x01K" + p.address.encode()
            deadline = time.monotonic() + 20
            while fake.poll(100) == 0 or fake.recv() != want:
                assert time.monotonic() < deadline, "the producer never connected to the insider"

            # No store runs yet: the insider ACKs everything, in both dialects.
            p.send_many(values)
            unacked = p.unacked_bytes
            for dialect in ("rfc", "zproto"):
                ack = wire.Ack(topic=p.address.encode(), subject=b"t", sequence=n - 1)
                fake.send_multipart(wire.encode(ack, dialect))  # type: ignore[arg-type]
            wait_for(lambda: p.stats()["denied"] >= 2, "the forged ACKs refused")
            assert p.flush(0.5) == n and p.acked_offset is None
            assert p.unacked_bytes == unacked, "the forged ACKs released nothing"

            sniffer = Sniffer(p_ep)
            relayed = f"tcp://127.0.0.1:{sniffer.port};curve={p_key.decode()}"
            with dafka.Consumer(
                ["t"], peers=[relayed], offset_reset="earliest", **keys.of("c")
            ) as c:
                # The producer hears the consumer's FETCHes directly; the
                # consumer reads the producer through the sniffer only.
                p.connect(c.endpoint)
                # Everything is read before a store runs. The producer holds
                # each record until two stores ACK it, and leaves a consumer's
                # FETCH from below what it holds to the stores, which this
                # consumer cannot reach. Stores started with the consumer ACK
                # everything within a few dozen ms, while the consumer's first
                # FETCH is lost when it goes out before the producer's
                # subscription to it is in, and is repeated only after
                # `fetch_retry`: the consumer would read nothing.
                got = drain(c, n, within=60)
                assert [r.offset for r in got] == list(range(n)), (
                    len(got),
                    c.stats(),
                    p.stats(),
                    len(sniffer.seen),
                )
                assert [r.value for r in got] == values
                assert p.unacked_bytes == unacked, "nothing released before the stores"
                with (
                    dafka.Store(tmp_path / "s1", towers=towers, **keys.of("s1"), **FAST) as s1,  # type: ignore[arg-type]
                    dafka.Store(tmp_path / "s2", towers=towers, **keys.of("s2"), **FAST) as s2,  # type: ignore[arg-type]
                ):
                    # The insider injects a RECORD into the producer's
                    # partition, next in line, to the stores and the consumer
                    # that connect to it.
                    for node in (s1, s2, c):
                        node.connect(fake_ep)
                    # Every store's subscription (`M`, two of them) and the
                    # consumer's (`Mt`) in: the RECORD reaches all three.
                    subscribed: list[bytes] = []
                    deadline = time.monotonic() + 20
                    while subscribed.count(b"\x01M") < 2 or b"\x01Mt" not in subscribed:
                        assert time.monotonic() < deadline, subscribed
                        if fake.poll(100):
                            subscribed.append(fake.recv())
                    forged = wire.Record(
                        topic=b"t",
                        address=p.address.encode(),
                        subject=b"t",
                        sequence=n,
                        content=b"forged",
                    )
                    fake.send_multipart(wire.encode(forged))
                    wait_for(
                        lambda: (
                            min(s1.stats()["denied"], s2.stats()["denied"], c.stats()["denied"])
                            >= 1
                        ),
                        "the injected RECORD refused everywhere",
                    )
                    assert p.flush(60) == 0, p.stats()
                    assert not c.poll_many(timeout=0.5), "nothing past the producer's records"
                    for s in (s1, s2):
                        (info,) = [i for i in s.partitions("t") if i.partition == p.address]
                        assert info.next_offset == n, "the forged record is stored nowhere"
            sniffer.close()
            assert len(sniffer.seen) > n * len(SECRET), "the records crossed the sniffer"
            assert SECRET not in sniffer.seen, "a record's content in plain text on the wire"
            assert lure.poll(200) == 0, "the producer subscribed to an untrusted peer"
            spy.setsockopt(zmq.RCVTIMEO, 200)
            with pytest.raises(zmq.Again):
                spy.recv()
            assert p.stats()["auth_refused"] >= 1
    finally:
        for sock in sockets:
            sock.close(0)
        ctx.term()


def test_the_sniffer_does_see_an_insecure_cluster() -> None:
    """The control for the test above: without security the sniffer reads records."""
    with dafka.Producer("t", min_acks=0) as p:
        sniffer = Sniffer(p.endpoint)
        try:
            with dafka.Consumer(["t"], peers=[f"tcp://127.0.0.1:{sniffer.port}"]) as c:
                deadline = time.monotonic() + 20
                while not c.poll_many(timeout=0.1):
                    assert time.monotonic() < deadline
                    p.send(SECRET)
        finally:
            sniffer.close()
    assert SECRET in sniffer.seen


def test_an_outsider_cannot_join_through_the_tower(
    keys: Keys, tower: dafka.Tower, tmp_path: Path
) -> None:
    """An insecure node cannot name a secure tower, and a node with a key the trust
    directory lacks is refused by the tower: nobody hears of it."""
    with pytest.raises(dafka.ConfigError, match="give it cert and trust"):
        dafka.Consumer(["t"], towers=[tower.endpoint])
    stranger = Keys(tmp_path / "stranger", {"x": "consumer"})
    own_trust = {"cert": stranger.of("x")["cert"], "trust": str(keys.trust)}
    with (
        dafka.Producer("t", towers=[tower.endpoint], min_acks=0, **keys.of("p"), **FAST) as p,  # type: ignore[arg-type]
        dafka.Consumer(["t"], towers=[tower.endpoint], **own_trust, **FAST) as c,  # type: ignore[arg-type]
    ):
        wait_for(lambda: tower.stats()["auth_refused"] > 0, "the tower to refuse the stranger")
        p.send(b"x")
        time.sleep(1.0)
        assert c.stats()["peers"] == 0
        assert not c.poll_many(timeout=0.2)


def test_a_sigkilled_secure_store_loses_nothing(
    keys: Keys, tower: dafka.Tower, tmp_path: Path
) -> None:
    """A secure store in its own process, SIGKILLed while records stream and started
    again: every record ACKed and delivered, in order."""
    here = Path(__file__).parent

    def start() -> subprocess.Popen[str]:
        cert, trust = keys.of("s1")["cert"], keys.of("s1")["trust"]
        args = ["store", str(tmp_path / "s"), tower.endpoint, "rfc", cert, trust]
        proc = subprocess.Popen(
            [sys.executable, str(here / "store_procs.py"), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line and line[0] == "READY", line
        return proc

    procs = [start()]
    try:
        towers = [tower.endpoint]
        with dafka.Producer("t", towers=towers, head_interval=0.1, **keys.of("p"), **FAST) as p:  # type: ignore[arg-type]
            assert p.wait_for_stores(1, 30) == 1
            for i in range(0, 20_000, 500):
                p.send_many([b"%08d" % j for j in range(i, i + 500)])
            wait_for(lambda: (p.acked_offset or 0) > 1000, "the first ACKs")
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(timeout=30)
            for i in range(20_000, 30_000, 500):
                p.send_many([b"%08d" % j for j in range(i, i + 500)])
            procs.append(start())
            assert p.flush(90) == 0, p.stats()
            with dafka.Consumer(
                ["t"], towers=towers, offset_reset="earliest", **keys.of("c"), **FAST
            ) as c:  # type: ignore[arg-type]
                got = drain(c, 30_000, within=90)
            assert [r.offset for r in got] == list(range(30_000))
            assert all(r.value == b"%08d" % r.offset for r in got)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
