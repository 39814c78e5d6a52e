"""Issue 35: the attacks that worked against a secure cluster, played with raw pyzmq
peers holding trusted keys, against real nodes. Each failed on the code before.

- One store-role key ACKs under many addresses (and none): ``min_acks=2`` is not
  reached by it alone, and nothing is lost when the honest stores come.
- A trusted insider beacons another node's UUID: the tower refuses it, nothing moves,
  delivery goes on as before.
- A trusted insider announces other nodes as other kinds to the tower: refused, the
  tower's counts by kind do not move.
- A plaintext peer is refused and counted (``auth_refused``).
- Junk data frames before a subscription: the subscription still reaches only the
  peer that sent it (libzmq patched, third_party/zeromq-src/README.dafka.md).
"""

from __future__ import annotations

import itertools
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from nodes_util import wait_for
from secure_util import CLUSTER, FAST, Keys, address_of, secure_tower, split

import dafka
from dafka import wire

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys", {**CLUSTER, "evil": "store"})


@pytest.fixture
def tower(keys: Keys) -> Iterator[dafka.Tower]:
    with secure_tower(keys) as t:
        yield t


@pytest.fixture
def ctx() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    c: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield c
    c.destroy(linger=0)


def client(
    ctx: zmq.Context[zmq.Socket[bytes]], kind: int, keys: Keys, name: str, server: bytes
) -> zmq.Socket[bytes]:
    """A socket of `kind` with `name`'s keys, a CURVE client of `server`."""
    s = ctx.socket(kind)
    s.linger = 0
    public, secret = keys.z85(name)
    s.curve_serverkey, s.curve_publickey = server, public
    s.curve_secretkey = secret  # type: ignore[assignment]
    return s


def server(
    ctx: zmq.Context[zmq.Socket[bytes]], kind: int, keys: Keys, name: str
) -> tuple[zmq.Socket[bytes], str]:
    """A bound CURVE server socket of `kind` with `name`'s keys, and its keyed endpoint."""
    s = ctx.socket(kind)
    s.linger = 0
    public, secret = keys.z85(name)
    s.curve_server = True
    s.curve_secretkey = secret  # type: ignore[assignment]
    s.bind("tcp://127.0.0.1:*")
    ep = s.getsockopt(zmq.LAST_ENDPOINT).decode()  # type: ignore[union-attr]
    return s, f"{ep};curve={public.decode()}"


def test_one_store_key_cannot_satisfy_min_acks_alone(
    keys: Keys, tower: dafka.Tower, tmp_path: Path, ctx: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """A trusted store-role peer, with the honest stores down, ACKs everything under
    two addresses of its key and once without an address, and subscribes as a store
    on two connections: it counts as one store, so ``min_acks=2`` releases nothing;
    when the honest stores come, everything is ACKed and both hold every record."""
    towers = [tower.endpoint]
    n = 300
    values = [b"%06d" % i for i in range(n)]
    with dafka.Producer("t", towers=towers, min_acks=2, **keys.of("p"), **FAST) as p:  # type: ignore[arg-type]
        p_ep, p_key = split(p.endpoint)
        evil_pub, _ = keys.z85("evil")
        fake, fake_ep = server(ctx, zmq.XPUB, keys, "evil")
        fake.setsockopt(zmq.XPUB_VERBOSE, 1)
        p.connect(fake_ep)
        want = b"\x01K" + p.address.encode()
        deadline = time.monotonic() + 30
        while fake.poll(100) == 0 or fake.recv() != want:
            assert time.monotonic() < deadline, "the producer never connected to the peer"
        # The same key subscribes as a store twice, on two connections.
        subs = [client(ctx, zmq.SUB, keys, "evil", p_key) for _ in range(2)]
        for s in subs:
            for prefix in (b"R", b"M", b"X"):
                s.setsockopt(zmq.SUBSCRIBE, prefix)
            s.connect(p_ep)
        # Records until both connections hear them: their store subscriptions
        # (sent before `X`) have been read by the producer.
        sent = 0
        heard = [False, False]
        deadline = time.monotonic() + 30
        while not all(heard):
            assert time.monotonic() < deadline, "the subscriptions never took"
            if sent < n:
                p.send(values[sent])
                sent += 1
            for i, s in enumerate(subs):
                heard[i] = heard[i] or s.poll(10) != 0
        assert p.stores_seen == 1, "two connections of one store key are one store"
        p.send_many(values[sent:])
        unacked = p.unacked_bytes
        partition = p.address.encode()
        for address in (address_of(evil_pub), address_of(evil_pub)):
            ack = wire.AddressedAck(topic=partition, address=address, subject=b"t", sequence=n - 1)
            fake.send_multipart(wire.encode(ack))  # type: ignore[arg-type]
        anonymous = wire.Ack(topic=partition, subject=b"t", sequence=n - 1)
        fake.send_multipart(wire.encode(anonymous, "zproto"))  # type: ignore[arg-type]
        wait_for(lambda: p.stats()["acks_received"] >= 3, "the ACKs read")
        assert p.stats()["denied"] == 0, "its ACKs are a store's own: taken, counted once"
        assert p.acked_offset is None, "one store key released records alone"
        assert p.unacked_bytes == unacked
        with (
            dafka.Store(tmp_path / "s1", towers=towers, **keys.of("s1"), **FAST) as s1,  # type: ignore[arg-type]
            dafka.Store(tmp_path / "s2", towers=towers, **keys.of("s2"), **FAST) as s2,  # type: ignore[arg-type]
        ):
            # Released once an honest store ACKed too (two keys): that one holds
            # them, and the other gets them from it.
            assert p.flush(90) == 0, p.stats()

            def held(s: dafka.Store) -> tuple[int, int] | None:
                infos = [i for i in s.partitions("t") if i.partition == p.address]
                return (infos[0].first_offset, infos[0].next_offset) if infos else None

            wait_for(lambda: held(s1) == held(s2) == (0, n), "every record in both stores", 90)
            assert p.wait_for_stores(3, 30) == 3, "the honest stores and the peer: three keys"
        # The honest stores gone, their connections are forgotten: one key left.
        wait_for(lambda: p.stores_seen == 1, "the stores that left no longer counted")


def latencies(p: dafka.Producer, c: dafka.Consumer, n: int) -> list[float]:
    """Sends `n` records one at a time, each once the one before arrived; the
    delivery time of each."""
    got: list[float] = []
    for _ in range(n):
        t = time.monotonic()
        p.send(b"x")
        deadline = t + 60
        while c.poll(timeout=0.5) is None:
            assert time.monotonic() < deadline, "a record never arrived"
        got.append(time.monotonic() - t)
    return got


def test_a_beacon_for_another_node_s_uuid_changes_nothing(
    keys: Keys, tower: dafka.Tower, tmp_path: Path, ctx: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """A consumer-role insider beacons the producer's UUID with its own endpoint and
    key every 5 ms: the tower refuses (and counts) every one and relays none, the
    stores keep their connection to the producer, and delivery goes on as before."""
    towers = [tower.endpoint]
    tower_ep, tower_key = split(tower.endpoint)
    host, ports = tower_ep.removeprefix("tcp://").rsplit(":", 1)
    beacon_in, beacon_out = (f"tcp://{host}:{port}" for port in ports.split(","))
    mallory_pub, _ = keys.z85("mallory")
    with (
        dafka.Producer("t", towers=towers, min_acks=2, **keys.of("p"), **FAST) as p,  # type: ignore[arg-type]
        dafka.Store(tmp_path / "s1", towers=towers, **keys.of("s1"), **FAST) as s1,  # type: ignore[arg-type]
        dafka.Store(tmp_path / "s2", towers=towers, **keys.of("s2"), **FAST) as s2,  # type: ignore[arg-type]
        dafka.Consumer(["t"], towers=towers, offset_reset="earliest", **keys.of("c"), **FAST) as c,  # type: ignore[arg-type]
    ):
        assert p.wait_for_stores(2, 60) == 2
        before = latencies(p, c, 60)
        fetched = c.stats()["fetches_sent"]
        # A spy hears every beacon the tower relays.
        spy = client(ctx, zmq.SUB, keys, "mallory", tower_key)
        spy.setsockopt(zmq.SUBSCRIBE, b"B")
        spy.connect(beacon_out)
        # Mallory's own endpoint, and its beacons for the producer's UUID.
        _, lure_ep = server(ctx, zmq.XPUB, keys, "mallory")
        lure_port = lure_ep.split(";")[0].rsplit(":", 1)[1].encode()
        beacons = client(ctx, zmq.PUB, keys, "mallory", tower_key)
        beacons.connect(beacon_in)
        stolen = [b"B", p.address.encode(), b"127.0.0.1", lure_port, mallory_pub]
        stop = threading.Event()
        count = [0]

        def attack() -> None:
            while not stop.wait(0.005):
                beacons.send_multipart(stolen)
                count[0] += 1

        attacker = threading.Thread(target=attack, daemon=True)
        attacker.start()
        try:
            wait_for(lambda: count[0] > 100, "the attack under way")
            during = latencies(p, c, 60)
        finally:
            stop.set()
            attacker.join(timeout=10)
        assert p.flush(60) == 0, p.stats()
        # Then one of Mallory's own beacons, on the same connection: the spy has
        # heard whatever the tower relayed of the attack once that one arrives.
        own = address_of(mallory_pub)
        relayed: list[list[bytes]] = []
        deadline = time.monotonic() + 30
        while not any(b[1] == own for b in relayed):
            assert time.monotonic() < deadline, "Mallory's own beacon never relayed"
            beacons.send_multipart([b"B", own, b"127.0.0.1", lure_port, mallory_pub])
            while spy.poll(50):
                relayed.append(spy.recv_multipart())
        mine = b"curve=" + mallory_pub
        hijacks = [b for b in relayed if b[1] == p.address.encode() and mine in b[2]]
        assert hijacks == [], "a beacon for the producer's UUID with Mallory's key was relayed"
        assert tower.stats()["identity_refused"] > 0, "refused and counted"
        assert p.stores_seen == 2
        for node in (p, s1, s2, c):
            assert node.stats()["identity_refused"] == 0, "no such beacon reached a node"
        # Delivery went on as before: every record of the attack's round came
        # live, none by a FETCH after a lost connection. (Its latency is
        # printed, not asserted: two rounds' medians on a shared machine differ
        # by whatever else runs meanwhile.)
        assert c.stats()["fetches_sent"] == fetched, (c.stats(), before, during)
        slow, fast = statistics.median(during), statistics.median(before)
        print(f"delivery p50 {fast * 1e3:.1f} ms before, {slow * 1e3:.1f} ms during the attack")


def test_a_kind_announcement_for_another_node_changes_nothing(
    tmp_path: Path, ctx: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """Insiders with trusted keys of every role announce, on the tower's XPUB, the
    producer as a store, the store as a consumer and the consumer as a producer
    (PROTOCOL.md, kind announcements): the tower refuses and counts each
    (``identity_refused``), and its counts by kind do not move; they move when a node
    really leaves."""
    insiders = {"mallory": "consumer", "evil": "store", "forger": "producer", "t2": "tower"}
    keys = Keys(tmp_path / "keys", {**CLUSTER, **insiders})
    with (
        secure_tower(keys) as tower,
        dafka.Producer("t", towers=[tower.endpoint], **keys.of("p"), **FAST) as p,  # type: ignore[arg-type]
        dafka.Store(tmp_path / "s1", towers=[tower.endpoint], **keys.of("s1"), **FAST) as s1,  # type: ignore[arg-type]
        dafka.Consumer(["t"], towers=[tower.endpoint], **keys.of("c"), **FAST) as c,  # type: ignore[arg-type]
    ):
        want = {"producer": 1, "consumer": 1, "store": 1, "unknown": 0}

        def by_kind() -> dict[str, int]:
            st = tower.stats()
            return {k: st[f"nodes_{k}"] for k in want}

        wait_for(lambda: by_kind() == want, "the tower to count the three nodes by kind")
        refused = tower.stats()["identity_refused"]
        lies = [b"Vs" + p.address.encode(), b"Vc" + s1.address.encode(), b"Vp" + c.address.encode()]
        _, tower_key = split(tower.endpoint)
        subs: list[zmq.Socket[bytes]] = []
        for name in insiders:
            s = client(ctx, zmq.SUB, keys, name, tower_key)
            for topic in lies:
                s.setsockopt(zmq.SUBSCRIBE, topic)
            s.connect(tower.beacon_out)
            subs.append(s)
        n = len(lies) * len(insiders)
        wait_for(lambda: tower.stats()["identity_refused"] >= refused + n, "the lies refused")
        assert tower.stats()["identity_refused"] == refused + n
        assert by_kind() == want
        for s in subs:
            s.close()
        c.close()
        wait_for(lambda: by_kind() == {**want, "consumer": 0}, "the consumer to leave its count")
        assert tower.stats()["identity_refused"] == refused + n


def test_plaintext_peers_are_refused_and_counted(
    keys: Keys, tower: dafka.Tower, ctx: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """A peer without CURVE is refused at the handshake by CURVE itself (no ZAP
    request is made): the node and the tower count it in ``auth_refused``."""
    tower_ep, _ = split(tower.endpoint)
    host, ports = tower_ep.removeprefix("tcp://").rsplit(":", 1)
    with dafka.Producer("t", towers=[tower.endpoint], min_acks=0, **keys.of("p")) as p:  # type: ignore[arg-type]
        p_ep, _ = split(p.endpoint)
        assert p.stats()["auth_refused"] == 0
        plain = ctx.socket(zmq.SUB)
        plain.linger = 0
        plain.setsockopt(zmq.SUBSCRIBE, b"")
        plain.connect(p_ep)
        for port in ports.split(","):
            plain.connect(f"tcp://{host}:{port}")
        wait_for(lambda: p.stats()["auth_refused"] >= 1, "the producer counting it")
        wait_for(lambda: tower.stats()["auth_refused"] >= 1, "the tower counting it")


def test_junk_before_a_subscription_does_not_move_it_to_another_peer(
    keys: Keys, ctx: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """A real secure producer, stopped (SIGSTOP) while a trusted peer sends data
    frames and then its subscription (HEADs) and a second peer subscribes to the
    records, so that the producer's XPUB reads all three at once: each peer gets what
    it subscribed, and only that. Unpatched, libzmq applied the first peer's
    subscription to the second peer's connection."""
    here = Path(__file__).parent
    cert, trust = keys.of("p")["cert"], keys.of("p")["trust"]
    proc = subprocess.Popen(
        [sys.executable, str(here / "secure_procs.py"), cert, trust, "t"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line and line[0] == "READY", line
        p_ep, p_key = split(line[1])
        for _ in range(3):
            x = client(ctx, zmq.XSUB, keys, "mallory", p_key)
            v = client(ctx, zmq.SUB, keys, "c", p_key)
            for s in (x, v):
                mon = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
                s.connect(p_ep)
                assert mon.poll(30_000), "no handshake"
                mon.recv_multipart()
                s.disable_monitor()
                mon.close(0)
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                x.send(b"junk-1")
                x.send(b"junk-2")
                v.setsockopt(zmq.SUBSCRIBE, b"Xt")
                x.send(b"\x01Ht")
                time.sleep(0.2)  # the bytes reach the producer's socket buffers
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            # X subscribed HEADs only; V the records only.
            assert x.poll(30_000), "the first peer never got its HEADs"
            assert x.recv_multipart()[0] == b"Ht"
            for _ in range(20):
                assert v.poll(30_000), "the second peer never got its records"
                first = v.recv_multipart()[0]
                assert first == b"Xt", f"the second peer got {first!r}, another's subscription"
            x.close(0)
            v.close(0)
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


def watched(
    ctx: zmq.Context[zmq.Socket[bytes]], keys: Keys, name: str, server_key: bytes, prefix: bytes
) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
    """A SUB with `name`'s keys subscribed to `prefix`, and its monitor (connects
    and disconnects)."""
    s = client(ctx, zmq.SUB, keys, name, server_key)
    s.setsockopt(zmq.SUBSCRIBE, prefix)
    mon = s.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    return s, mon


def test_revoking_a_key_cuts_off_that_key_only(
    keys: Keys, tower: dafka.Tower, tmp_path: Path, ctx: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """Adding a key reconnects nobody; removing one cuts that key's connections to the
    producer and to the tower, and no other: an honest reader streaming throughout is
    never disconnected. Before, every change bound every node's XPUB again (everyone
    reconnected), and a tower kept relaying beacons to a revoked key."""
    tower_ep, tower_key = split(tower.endpoint)
    host, ports = tower_ep.removeprefix("tcp://").rsplit(":", 1)
    beacon_out = f"tcp://{host}:{ports.split(',')[1]}"
    with dafka.Producer(
        "t", towers=[tower.endpoint], min_acks=0, head_interval=0.05, **keys.of("p")
    ) as p:
        p_ep, p_key = split(p.endpoint)
        honest, honest_mon = watched(ctx, keys, "c", p_key, b"Xt")
        honest_b, honest_b_mon = watched(ctx, keys, "c", tower_key, b"B")
        spy, spy_mon = watched(ctx, keys, "mallory", p_key, b"Xt")
        spy_b, spy_b_mon = watched(ctx, keys, "mallory", tower_key, b"B")
        for s in (honest, spy):
            s.connect(p_ep)
        for s in (honest_b, spy_b):
            s.connect(beacon_out)
        stop = threading.Event()
        sender = threading.Thread(
            target=lambda: [p.send(b"x") for _ in iter(lambda: stop.wait(0.002), True)],
            daemon=True,
        )
        for s in (honest_b, spy_b):
            assert s.poll(30_000), "no beacon relayed"
        sender.start()
        arrivals: list[float] = []

        def read_honest() -> None:
            while not stop.is_set():
                if honest.poll(50):
                    honest.recv_multipart()
                    arrivals.append(time.monotonic())

        reader = threading.Thread(target=read_honest, daemon=True)
        reader.start()
        try:
            wait_for(lambda: len(arrivals) > 0, "records at the honest reader")
            assert spy.poll(30_000), "the spy heard nothing"
            # A key added: its holder gets in, and nobody is reconnected.
            public, _ = dafka.keygen(tmp_path / "late", "newbie", role="consumer")
            (keys.trust / public.name).write_bytes(public.read_bytes())
            late = tmp_path / "late" / "newbie.key_secret"
            newbie_pub, newbie_sec = zmq.auth.load_certificate(late)
            deadline = time.monotonic() + 30
            while True:
                # Refused until the trust directory is read again (within a
                # second), and a client refused at its handshake gives up.
                newbie = ctx.socket(zmq.SUB)
                newbie.linger = 0
                newbie.curve_serverkey, newbie.curve_publickey = p_key, newbie_pub
                newbie.curve_secretkey = newbie_sec  # type: ignore[assignment]
                newbie.setsockopt(zmq.SUBSCRIBE, b"Xt")
                newbie.connect(p_ep)
                if newbie.poll(2000):
                    break
                newbie.close(0)
                assert time.monotonic() < deadline, "the added key never got in"
            # Mallory's key removed: its connections, at the producer and at the
            # tower, are cut.
            revoked_at = time.monotonic()
            (keys.trust / "mallory.key").unlink()
            for mon in (spy_mon, spy_b_mon):
                deadline = time.monotonic() + 30
                while not mon.poll(10):
                    assert time.monotonic() < deadline, "the revoked key kept its connection"
                    # Read what they queued: a socket that stops reading never
                    # sees its connection end.
                    for s in (spy, spy_b, honest_b):
                        while s.poll(0):
                            s.recv_multipart()
            # Records after that reach the honest reader: every event it had is in.
            seen = len(arrivals)
            wait_for(lambda: len(arrivals) > seen + 50, "records after the revocation")
        finally:
            stop.set()
            sender.join(timeout=10)
            reader.join(timeout=10)
        assert honest_mon.poll(0) == 0, "the honest reader was disconnected from the producer"
        assert honest_b_mon.poll(0) == 0, "the honest reader was disconnected from the tower"
        gaps = [b - a for a, b in itertools.pairwise(arrivals) if b >= revoked_at]
        print(f"honest reader's longest silence around the revocation: {max(gaps) * 1e3:.1f} ms")
