"""Consumer groups in a secure cluster (issue 38, docs/groups.md "Security"): a
consumer-role member joins, reads and commits through a secure store; a consumer
whose certificate does not cover the group's topic, and a producer-role insider in
the member's name, each send a GROUP-MEMBER and a COMMIT: the store refuses and
counts all four, and the group's commit does not move."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
import zmq
from nodes_util import drain, wait_for
from secure_util import FAST, Keys, address_of, forger, secure_tower, split

import dafka

pytestmark = pytest.mark.timeout(180)

NAMES = {
    "tower": "tower",
    "s1": "store",
    "p": "producer",
    "c": "consumer",
    "mallory": "producer",
}


def string(b: bytes) -> bytes:
    return bytes([len(b)]) + b


def commit_frames(group: bytes, member: bytes, topic: bytes, part: bytes, off: int) -> list[bytes]:
    """A COMMIT in the rfc dialect, as PROTOCOL.md "Extensions" frames it."""
    body = string(member) + struct.pack(">QI", 1, 1)
    body += string(topic) + string(part) + struct.pack(">QQ", 0, off)
    return [b"C" + group, b"\xaa\xa5C\x01" + body]


def member_frames(group: bytes, member: bytes, topic: bytes, part: bytes) -> list[bytes]:
    """A GROUP-MEMBER claiming `part` held, in the rfc dialect."""
    body = string(member) + b"\x00" + struct.pack(">I", 60_000)
    body += struct.pack(">I", 1) + struct.pack(">I", len(topic)) + topic
    body += struct.pack(">I", 1) + string(topic) + string(part) + b"\x00" + struct.pack(">Q", 0)
    return [b"J" + group, b"\xaa\xa5J\x01" + body]


def test_a_secure_group_refuses_outsiders_and_forgers(tmp_path: Path) -> None:
    keys = Keys(tmp_path / "keys", NAMES)
    dafka.keygen(str(keys.secret), "narrow", role="consumer", topics="other")
    (keys.secret / "narrow.key").rename(keys.trust / "narrow.key")
    ctx = zmq.Context()
    fakes: list[zmq.Socket[bytes]] = []
    try:
        with (
            secure_tower(keys) as t,
            dafka.Store(tmp_path / "s1", towers=[t.endpoint], **keys.of("s1"), **FAST) as s,  # type: ignore[arg-type]
            dafka.Producer("orders", towers=[t.endpoint], **keys.of("p"), **FAST) as p,  # type: ignore[arg-type]
        ):
            towers = [t.endpoint]
            p.wait_for_stores(1, timeout=30)
            for i in range(20):
                p.send(b"%d" % i)
            assert p.flush(30) == 0
            c = dafka.Consumer(
                ["orders"],
                towers=towers,
                group="g",
                **keys.of("c"),
                **FAST,  # type: ignore[arg-type]
            )
            got = drain(c, 20)
            assert sorted(int(r.value) for r in got) == list(range(20))
            c.commit(asynchronous=False)
            assert c.committed([p.address]) == {p.address: 20}

            # Forgers the store connects to: a consumer whose certificate does not
            # cover "orders" (as itself) and a producer-role insider (in the
            # member's name). Each one's GROUP-MEMBER and COMMIT are refused.
            before = s.stats()["denied"]
            me, part = c.address.encode(), p.address.encode()
            for name, address in (("narrow", None), ("mallory", me)):
                fake = forger(ctx, keys, name, s, b"C")
                fakes.append(fake)
                who = address or address_of(keys.z85(name)[0])
                fake.send_multipart(member_frames(b"g", who, b"orders", part))
                fake.send_multipart(commit_frames(b"g", who, b"orders", part, 1000))
            wait_for(lambda: s.stats()["denied"] >= before + 4, "the four forgeries refused")
            assert c.committed([p.address]) == {p.address: 20}, "the commit did not move"
            assert c.group_members() == 1
            c.close()
    finally:
        for fake in fakes:
            fake.close(0)
        ctx.term()


def test_a_certificate_covering_part_of_a_groups_topics_cannot_commit_or_listen(
    tmp_path: Path,
) -> None:
    """Review of issue 38, findings A and E. Group ``billing`` reads ``orders`` and
    ``payments``; a consumer-role insider whose certificate covers ``orders`` alone
    announces itself a member reading ``orders`` (which its certificate allows),
    holding an ``orders`` partition, and commits it past the group's commit: the
    store refuses it (its certificate does not cover the group's topics), and the
    group's commit does not move. It cannot subscribe to the group's announcements
    on a member's XPUB either (by the group's name or a prefix of it), nor can a
    producer-role insider: each subscription is refused and counted."""
    names = {**NAMES, "q": "producer", "c2": "consumer"}
    keys = Keys(tmp_path / "keys", names)
    dafka.keygen(str(keys.secret), "narrow", role="consumer", topics="orders")
    (keys.secret / "narrow.key").rename(keys.trust / "narrow.key")
    ctx = zmq.Context()
    socks: list[zmq.Socket[bytes]] = []
    try:
        with (
            secure_tower(keys) as t,
            dafka.Store(tmp_path / "s1", towers=[t.endpoint], **keys.of("s1"), **FAST) as s,  # type: ignore[arg-type]
            dafka.Producer("orders", towers=[t.endpoint], **keys.of("p"), **FAST) as p,  # type: ignore[arg-type]
            dafka.Producer("payments", towers=[t.endpoint], **keys.of("q"), **FAST) as q,  # type: ignore[arg-type]
        ):
            for prod in (p, q):
                prod.wait_for_stores(1, timeout=30)
                for i in range(20):
                    prod.send(b"%d" % i)
                assert prod.flush(30) == 0
            c = dafka.Consumer(
                ["orders", "payments"],
                towers=[t.endpoint],
                group="billing",
                enable_auto_commit=False,
                **keys.of("c"),
                **FAST,  # type: ignore[arg-type]
            )
            assert len(drain(c, 40)) == 40
            c.commit(asynchronous=False)
            assert c.committed([p.address]) == {p.address: 20}
            for i in range(20, 40):
                p.send(b"%d" % i)
            assert p.flush(30) == 0
            assert len(drain(c, 20)) == 20  # read, not committed

            # The narrow insider, as itself, joins and commits 40 on the store.
            fake = forger(ctx, keys, "narrow", s, b"C")
            socks.append(fake)
            me, part = address_of(keys.z85("narrow")[0]), p.address.encode()
            refused = s.stats()["commits_refused"]
            fake.send_multipart(member_frames(b"billing", me, b"orders", part))
            fake.send_multipart(commit_frames(b"billing", me, b"orders", part, 40))
            wait_for(lambda: s.stats()["commits_refused"] > refused, "the narrow commit refused")
            assert c.committed([p.address]) == {p.address: 20}, "the commit did not move"

            # Subscriptions to the member's announcements: the narrow consumer (by
            # the group's name, and by a prefix) and a producer-role insider are
            # refused; a consumer covering both topics hears them.
            c_ep, c_key = split(c.endpoint)
            denied = c.stats()["denied"]
            subs = []
            for name, prefix in (
                ("narrow", b"Jbilling"),
                ("narrow", b"Jb"),
                ("mallory", b"Jbilling"),
                ("c2", b"Jbilling"),
            ):
                sub = ctx.socket(zmq.SUB)
                socks.append(sub)
                sub.linger = 0
                public, secret = keys.z85(name)
                sub.curve_serverkey, sub.curve_publickey = c_key, public
                sub.curve_secretkey = secret  # type: ignore[assignment]
                sub.setsockopt(zmq.SUBSCRIBE, prefix)
                sub.connect(c_ep)
                subs.append(sub)
            wait_for(lambda: c.stats()["denied"] >= denied + 3, "three subscriptions refused")
            deadline = time.monotonic() + 20
            while subs[3].poll(100) == 0:
                assert time.monotonic() < deadline, "the covering consumer heard nothing"
            assert subs[3].recv_multipart()[0] == b"Jbilling"
            assert all(sub.poll(0) == 0 for sub in subs[:3])
            c.close()
    finally:
        for sock in socks:
            sock.close(0)
        ctx.term()
