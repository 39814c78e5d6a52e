"""Malformed frames of every kind sent by a raw pyzmq peer to a consumer, a producer
and a tower: each is dropped and counted, and the node keeps working."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from dafka import Consumer, Producer, Tower, WireError, wire

pytestmark = pytest.mark.timeout(60)

P = b"85E3C6EBDC7B4156AD9C43611EBC09CE"


@pytest.fixture
def ctx() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    c: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield c
    c.destroy(linger=0)


def corrupt(frames: list[bytes], index: int, at: int, byte: int) -> list[bytes]:
    f = bytearray(frames[index])
    f[at] = byte
    return [*frames[:index], bytes(f), *frames[index + 1 :]]


def malformed_for(topic: bytes, me: bytes) -> list[list[bytes]]:
    rec = wire.encode(wire.Record(topic=topic, address=P, subject=topic, sequence=5, content=b"x"))
    zrec = wire.encode(
        wire.Record(topic=topic, address=P, subject=topic, sequence=5, content=b"x"), "zproto"
    )
    head = wire.encode(wire.Head(topic=topic, address=P, subject=topic, sequence=9))
    dhead = wire.encode(wire.DirectHead(topic=me, address=P, subject=topic, sequence=9))
    hello = wire.encode(wire.StoreHello(topic=me, address=P))
    drec = wire.encode(wire.DirectRecord(topic=me, address=P, subject=topic, sequence=1))
    return [
        [rec[0]],  # RECORD with one frame: wrong frame count
        [*rec, b"extra"],  # four frames
        [*rec, b"more", b"frames"],  # five frames
        corrupt(rec, 1, 1, 0xA0),  # signature AA A0 (the RFC prose's typo)
        corrupt(rec, 1, 3, 0x02),  # version 2
        corrupt(rec, 1, 2, ord("H")),  # body ID differs from the topic frame's
        [rec[0], rec[1][:-3], rec[2]],  # truncated sequence
        [rec[0], rec[1] + b"\x00", rec[2]],  # trailing byte
        [rec[0], b"", rec[2]],  # empty body
        [rec[0], rec[1][:4] + b"\xff" + rec[1][5:], rec[2]],  # address length past the end
        [zrec[0][:-4], zrec[1]],  # zproto RECORD truncated
        corrupt(zrec, 0, len(topic) + 2, 0x07),  # zproto version 7
        [head[0], head[1][:-1]],  # HEAD truncated
        [head[0] + b"\x00\x01\x20"],  # zproto HEAD with its fields cut short
        [dhead[0], dhead[1] + b"zz"],  # DIRECT-HEAD trailing bytes
        corrupt(hello, 1, 0, 0x00),  # STORE-HELLO bad signature
        [hello[0], hello[1], b"third"],  # STORE-HELLO with a content frame
        [drec[0], drec[1]],  # DIRECT-RECORD missing its content frame
        corrupt(drec, 1, 2, ord("Z")),  # unknown body ID
    ]


def wait_sub(xpub: zmq.Socket[bytes], prefix: bytes) -> None:
    xpub.setsockopt(zmq.RCVTIMEO, 20_000)
    while xpub.recv() != b"\x01" + prefix:
        pass


def test_consumer_drops_and_counts_malformed(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    xpub = ctx.socket(zmq.XPUB)
    xpub.bind("tcp://127.0.0.1:*")
    ep = xpub.getsockopt_string(zmq.LAST_ENDPOINT)
    with Consumer(["bad"], peers=[ep], offset_reset="latest") as c:
        me = c.address.encode()
        bad = malformed_for(b"bad", me)
        for frames in bad:
            with pytest.raises(WireError):
                wire.decode(frames)
        wait_sub(xpub, b"Hbad")
        for frames in bad:
            xpub.send_multipart(frames)
        good = wire.Record(topic=b"bad", address=P, subject=b"bad", sequence=5, content=b"ok")
        xpub.send_multipart(wire.encode(good))
        r = c.poll(timeout=20)
        assert r is not None and (r.offset, r.value, r.partition) == (5, b"ok", P.decode())
        assert c.stats()["malformed"] == len(bad)
        # A prefix match for another topic ("bad2" matches the prefix "Mbad") is not
        # malformed, just not ours: checked exactly and ignored.
        other = wire.Record(topic=b"bad2", address=P, subject=b"bad2", sequence=6, content=b"no")
        xpub.send_multipart(wire.encode(other))
        xpub.send_multipart(wire.encode(wire.Record(**{**good.__dict__, "sequence": 6})))
        r = c.poll(timeout=20)
        assert r is not None and (r.offset, r.value) == (6, b"ok")
        # Well-formed, but no record can stand at the last offset (its next would
        # overflow): dropped and counted, for a new partition or a known one.
        q = b"0123456789ABCDEF0123456789ABCDEF"
        last = 2**64 - 1
        for frames in (
            wire.encode(wire.Record(topic=b"bad", address=q, subject=b"bad", sequence=last)),
            wire.encode(wire.Head(topic=b"bad", address=P, subject=b"bad", sequence=last)),
            wire.encode(wire.Record(topic=b"bad", address=P, subject=b"bad", sequence=last)),
        ):
            xpub.send_multipart(frames)
        xpub.send_multipart(wire.encode(wire.Record(**{**good.__dict__, "sequence": 7})))
        r = c.poll(timeout=20)
        assert r is not None and (r.offset, r.partition) == (7, P.decode())
        assert c.stats()["malformed"] == len(bad) + 3


def test_producer_drops_and_counts_malformed(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    xpub = ctx.socket(zmq.XPUB)
    xpub.bind("tcp://127.0.0.1:*")
    ep = xpub.getsockopt_string(zmq.LAST_ENDPOINT)
    me = b"9E51FBAE55A649C1A50C0B360F3FF7AE"
    with Producer("pbad", peers=[ep], close_timeout=0) as p:
        part = p.address.encode()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"D" + me)
        sub.connect(p.endpoint)
        wait_sub(xpub, b"Gpbad")
        p.send_many([b"a", b"b", b"c"])
        fetch = wire.encode(
            wire.Fetch(topic=part, address=me, subject=b"pbad", sequence=0, count=3)
        )
        ack = wire.encode(wire.Ack(topic=part, address=me, subject=b"pbad", sequence=2))
        gh = wire.encode(wire.GetHeads(topic=b"pbad", address=me))
        bad = [
            [fetch[0]],
            corrupt(fetch, 1, 0, 0x00),
            [fetch[0], fetch[1][:-2]],
            [fetch[0], fetch[1] + b"\x01"],
            [ack[0], ack[1][:5]],
            corrupt(ack, 1, 3, 0x09),
            [gh[0], gh[1], b"x", b"y"],
            [gh[0], b"\xaa\xa5"],
        ]
        for frames in bad:
            with pytest.raises(WireError):
                wire.decode(frames)
            xpub.send_multipart(frames)
        got: list[wire.Message] = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            xpub.send_multipart(fetch)
            while sub.poll(300):
                got.append(wire.decode(sub.recv_multipart()))
        assert [m.content for m in got[:3]] == [b"a", b"b", b"c"]  # type: ignore[attr-defined]
        assert p.stats()["malformed"] == len(bad)


def test_tower_drops_and_counts_malformed_beacons(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    with Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as t:
        pub = ctx.socket(zmq.PUB)
        pub.connect(t.beacon_in)
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"B")
        sub.connect(t.beacon_out)
        uuid = P
        bad = [
            [b"B"],
            [b"B", uuid],
            [b"B", uuid, b"127.0.0.1", b"0"],
            [b"B", uuid, b"127.0.0.1", b"70000"],
            [b"B", uuid, b"127.0.0.1", b"12x"],
            [b"B", b"", b"127.0.0.1", b"5"],
            [b"B", uuid, b"h", b"5", b"extra"],
            [b"Bogus", uuid, b"h", b"5"],
            [b"B", uuid, b"127.0.0.1\x00", b"5"],  # a NUL byte in the host
        ]
        good = [b"B", uuid, b"", b"4242"]
        deadline = time.monotonic() + 20
        relayed: list[bytes] = []
        while not relayed and time.monotonic() < deadline:
            for frames in bad:
                pub.send_multipart(frames)
            pub.send_multipart(good)
            if sub.poll(200):
                relayed = sub.recv_multipart()
        assert relayed == [b"B", uuid, b"tcp://127.0.0.1:4242"]
        stats = t.stats()
        assert stats["malformed"] >= len(bad) and stats["malformed"] % len(bad) == 0, stats


def wait_disconnected(monitor: zmq.Socket[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if monitor.poll(200) and recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED:
            return
    pytest.fail("the peer was not disconnected within 20 s")


OVERSIZED = b"B" + b"x" * (1 << 20)  # a tower takes frames of at most 64 KiB


def test_a_tower_disconnects_a_peer_sending_an_oversized_frame(
    ctx: zmq.Context[zmq.Socket[bytes]],
) -> None:
    """Beacons are a few dozen bytes: a tower does not read a 1 MiB frame into
    memory, it drops the connection (ZMQ_MAXMSGSIZE), and relays the sender's
    beacons again once it has reconnected."""
    with Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as t:
        listener = ctx.socket(zmq.SUB)
        listener.setsockopt(zmq.SUBSCRIBE, b"B")
        listener.connect(t.beacon_out)
        sender = ctx.socket(zmq.XPUB)  # an XPUB sees the tower's subscription arrive
        monitor = sender.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sender.connect(t.beacon_in)
        wait_sub(sender, b"B")
        sender.send(OVERSIZED)
        wait_disconnected(monitor)  # ZeroMQ reconnects by itself
        good = [b"B", P, b"", b"4242"]
        deadline = time.monotonic() + 20
        relayed: list[bytes] = []
        while not relayed and time.monotonic() < deadline:
            sender.send_multipart(good)
            if listener.poll(200):
                relayed = listener.recv_multipart()
        assert relayed == [b"B", P, b"tcp://127.0.0.1:4242"]
        assert t.stats()["malformed"] == 0, "the oversized frame was never read"


OVERSIZED_SUBSCRIBER = """
import os, sys, time
import zmq
from zmq.utils.monitor import recv_monitor_message
s = zmq.Context().socket(zmq.XSUB)  # an XSUB sends its subscriptions as messages
monitor = s.get_monitor_socket(zmq.EVENT_DISCONNECTED)
s.connect(sys.argv[1])
s.send(b"\\x01M" + b"x" * (1 << 20))
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    if monitor.poll(200) and recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED:
        print("DISCONNECTED", flush=True)
        break
os._exit(0)  # its own trie would recurse a million deep when closed
"""


def test_a_node_disconnects_a_peer_sending_an_oversized_subscription(
    ctx: zmq.Context[zmq.Socket[bytes]],
) -> None:
    """Only subscriptions (a few hundred bytes at most) reach a node's XPUB: a peer
    sending a 1 MiB one is disconnected before it is read (ZMQ_MAXMSGSIZE), and the
    node goes on serving its other subscribers."""
    with Producer("tsub", min_acks=0) as p:
        out = subprocess.run(
            [sys.executable, "-c", OVERSIZED_SUBSCRIBER, p.endpoint],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "DISCONNECTED" in out.stdout, out.stdout + out.stderr[-2000:]
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"Mtsub")
        sub.connect(p.endpoint)
        deadline = time.monotonic() + 20
        got: list[bytes] = []
        while not got and time.monotonic() < deadline:
            p.send(b"hello")
            if sub.poll(200):
                got = sub.recv_multipart()
        assert got and got[-1] == b"hello", got
        assert p.stats()["malformed"] == 0


TOWER_CHILD = """
import sys
import dafka
with dafka.Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as t:
    print(t.beacon_in, t.beacon_out, flush=True)
    sys.stdin.read()
"""

LONG_SUBSCRIBER = """
import os, sys, time
import zmq
s = zmq.Context().socket(zmq.XSUB)
s.connect(sys.argv[1])
s.send(b"\\x01B" + b"x" * 60_000)
time.sleep(1.0)
os._exit(0)  # its own trie would recurse 60,000 deep when closed
"""


def test_a_tower_survives_a_long_subscription(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    """A tower used to relay every subscription upstream; its XSUB keeps each in
    libzmq's trie, which recurses once per byte, so one of 60,000 bytes killed the
    tower's process when its subscriber left. It relays only short ones now (the
    tower runs in a child process, so that the old behaviour fails this test rather
    than ending pytest)."""
    tower = subprocess.Popen(
        [sys.executable, "-c", TOWER_CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert tower.stdout is not None
        beacon_in, beacon_out = tower.stdout.readline().split()
        node = ctx.socket(zmq.XPUB)  # a node's beacon socket: sees what is relayed
        node.connect(beacon_in)
        subprocess.run([sys.executable, "-c", LONG_SUBSCRIBER, beacon_out], timeout=60, check=True)
        time.sleep(1.0)  # the subscriber is gone: its subscriptions are dropped
        assert tower.poll() is None, f"the tower died: exit {tower.returncode}"
        # Still relaying: a node subscribing to beacons is passed upstream.
        listener = ctx.socket(zmq.SUB)
        listener.setsockopt(zmq.SUBSCRIBE, b"B")
        listener.connect(beacon_out)
        wait_sub(node, b"B")
        assert tower.poll() is None
    finally:
        if tower.poll() is None:
            assert tower.stdin is not None
            tower.stdin.close()
            tower.wait(timeout=30)


def test_a_node_drops_a_tower_beacon_naming_an_endpoint_with_a_nul_byte(
    ctx: zmq.Context[zmq.Socket[bytes]],
) -> None:
    """ZeroMQ endpoints are C strings (the zmq crate panics on a NUL byte): a
    tower beacon naming one is malformed, dropped and counted, and the node keeps
    working."""
    out = ctx.socket(zmq.XPUB)  # a tower's beacon_out, played by hand
    out.bind("tcp://127.0.0.1:*")
    beacons_in = ctx.socket(zmq.SUB)
    beacons_in.bind("tcp://127.0.0.1:*")
    port_in = beacons_in.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1]
    port_out = out.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1]
    with Producer("tnul", towers=[f"tcp://127.0.0.1:{port_in},{port_out}"], min_acks=0) as p:
        wait_sub(out, b"B")
        deadline = time.monotonic() + 20
        while p.stats()["malformed"] == 0 and time.monotonic() < deadline:
            out.send_multipart([b"B", P, b"tcp://127.0.0.1\x00:5"])
            time.sleep(0.05)
        assert p.stats()["malformed"] >= 1
        assert p.send(b"still alive") == 0
        assert p.send(b"and sending") == 1


def test_a_zproto_producer_drops_an_answer_its_dialect_cannot_carry(
    ctx: zmq.Context[zmq.Socket[bytes]],
) -> None:
    """A FETCH (rfc framing) from a requester whose address has a NUL byte: the
    DIRECT-RECORD answer's topic key is that address, which a ``zproto`` key cannot
    hold. The answer is dropped and counted; the producer keeps working."""
    xpub = ctx.socket(zmq.XPUB)
    xpub.bind("tcp://127.0.0.1:*")
    ep = xpub.getsockopt_string(zmq.LAST_ENDPOINT)
    # The requester subscribes its answers: a producer answers only a requester
    # whose `D` + address subscription it has read.
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"DRE\x00Q")
    with Producer(
        "pz", peers=[ep], wire="zproto", close_timeout=0
    ) as p:  # min_acks=1: it keeps them
        sub.connect(p.endpoint)
        wait_sub(xpub, b"Gpz")
        p.send_many([b"a", b"b"])
        part = p.address.encode()
        fetch = wire.Fetch(topic=part, address=b"RE\x00Q", subject=b"pz", sequence=0, count=2)
        deadline = time.monotonic() + 20
        while p.stats()["malformed"] == 0 and time.monotonic() < deadline:
            xpub.send_multipart(wire.encode(fetch))
            time.sleep(0.05)
        assert p.stats()["malformed"] >= 1
        assert p.send(b"c") == 2, "the node thread is alive"
