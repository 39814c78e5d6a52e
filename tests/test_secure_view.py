"""The cluster view in a secure cluster (issue 39; issue 38's leftover, docs/groups.md
"Security"): a consumer-role certificate sees the whole view of the topics it may
read, and nothing of the others, in ``describe_topics``, ``describe_topic``,
``topics``, ``list_groups`` and ``describe_group``; a producer-role insider's
questions of every topic, every group and every partition are refused and counted,
and so is a narrow consumer's question of a topic it may not read."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
import zmq
from nodes_util import drain, wait_for
from secure_util import FAST, Keys, address_of, forger, secure_tower

import dafka

pytestmark = pytest.mark.timeout(240)

NAMES = {
    "tower": "tower",
    "s1": "store",
    "s2": "store",
    "p": "producer",
    "c": "consumer",
    "mallory": "producer",
}
SENT = (("a", 5), ("a", 7), ("b", 11))


def shape(topics: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    return {
        (t["topic"], p["partition"]): (
            p["first"],
            p["next"],
            sorted(s["store"] for s in p["stores"]),
        )
        for t in topics
        for p in t["partitions"]
    }


def string(b: bytes) -> bytes:
    return bytes([len(b)]) + b


def body(kind: bytes, fields: bytes) -> bytes:
    return b"\xaa\xa5" + kind + b"\x01" + fields


def test_a_narrow_consumer_sees_its_topics_only(tmp_path: Path) -> None:
    keys = Keys(tmp_path / "keys", NAMES)
    dafka.keygen(str(keys.secret), "narrow", role="consumer", topics="a")
    (keys.secret / "narrow.key").rename(keys.trust / "narrow.key")
    ctx = zmq.Context()
    fakes: list[zmq.Socket[bytes]] = []
    try:
        with secure_tower(keys) as t:
            towers = [t.endpoint]
            s1 = dafka.Store(tmp_path / "s1", towers=towers, **keys.of("s1"), **FAST)  # type: ignore[arg-type]
            s2 = dafka.Store(tmp_path / "s2", towers=towers, **keys.of("s2"), **FAST)  # type: ignore[arg-type]
            producers = []
            for topic, n in SENT:
                p = dafka.Producer(topic, towers=towers, min_acks=2, **keys.of("p"), **FAST)  # type: ignore[arg-type]
                p.wait_for_stores(2, timeout=30)
                for i in range(n):
                    p.send(b"%d" % i)
                producers.append(p)
            for p in producers:
                assert p.flush(30) == 0
            held = sorted([s1.address, s2.address])
            want = {
                (topic, p.address): (0, n, held)
                for (topic, n), p in zip(SENT, producers, strict=True)
            }
            # A group on each topic, both committed.
            for topic, group, n in (("a", "ga", 12), ("b", "gb", 11)):
                c = dafka.Consumer(
                    [topic],
                    towers=towers,
                    group=group,
                    auto_commit_interval=0.1,
                    **keys.of("c"),
                    **FAST,  # type: ignore[arg-type]
                )
                assert len(drain(c, n)) == n
                c.commit(asynchronous=False)
                c.close()

            narrow = {**keys.of("narrow"), **FAST}
            full = {**keys.of("c"), **FAST}
            seen: list[Any] = []

            def view_is(opts: dict[str, Any], expected: dict[Any, Any]) -> bool:
                seen[:] = dafka.describe_topics(towers=towers, **opts)
                return shape(seen) == expected

            only_a = {k: v for k, v in want.items() if k[0] == "a"}
            wait_for(lambda: view_is(narrow, only_a), "topic a alone", 60)
            wait_for(lambda: view_is(full, want), "both topics", 60)

            # `topics()` (what Spark's subscribePattern lists) works for a consumer
            # now, with its topics only.
            def topics_are(opts: dict[str, Any], expected: list[str]) -> bool:
                return dafka.topics(towers=towers, **opts) == expected

            wait_for(lambda: topics_are(narrow, ["a"]), "topics() of a narrow")
            wait_for(lambda: topics_are(full, ["a", "b"]), "topics() of a reader")
            # Groups: the one on "a" only, and of "b" nothing.
            wait_for(
                lambda: [g["group"] for g in dafka.list_groups(towers=towers, **narrow)] == ["ga"],
                "list_groups of a narrow consumer",
            )
            wait_for(
                lambda: (
                    [g["group"] for g in dafka.list_groups(towers=towers, **full)] == ["ga", "gb"]
                ),
                "list_groups of a reader of every topic",
            )
            gb = dafka.describe_group("gb", towers=towers, listen=0.3, **narrow)
            assert gb["partitions"] == [] and gb["lag"] == 0
            wait_for(
                lambda: (
                    sorted(
                        r["committed"]
                        for r in dafka.describe_group("ga", towers=towers, listen=0.3, **narrow)[
                            "partitions"
                        ]
                    )
                    == [5, 7]
                ),
                "group ga described to a narrow consumer",
            )

            def described() -> bool:
                d = dafka.describe_topic("a", towers=towers, **narrow)
                return shape([d]) == only_a and [g["group"] for g in d["groups"]] == ["ga"]

            wait_for(described, "topic a and its group, to a narrow consumer", 60)
            with pytest.raises(dafka.ConfigError, match='allows topics a, not "b"'):
                dafka.describe_topic("b", towers=towers, **narrow)

            # Insiders asking what they may not: a producer-role key (every topic,
            # every group, every partition) and the narrow consumer (topic "b").
            before = s1.stats()["denied"]
            for name, topic in (("mallory", b""), ("narrow", b"b")):
                fake = forger(ctx, keys, name, s1, b"I")
                fakes.append(fake)
                me = address_of(keys.z85(name)[0])
                fake.send_multipart([b"I" + topic, body(b"I", string(me) + struct.pack(">Q", 1))])
                fake.send_multipart([b"G" + topic, body(b"G", string(me))])
                fake.send_multipart(
                    [b"U", body(b"U", string(me) + struct.pack(">QI", 1, 1) + b"\0\0\0\1" + topic)]
                    if topic
                    else [b"U", body(b"U", string(me) + struct.pack(">QI", 1, 0))]
                )
            wait_for(lambda: s1.stats()["denied"] >= before + 6, "the six questions refused")
            for p in producers:
                p.close()
            s2.close()
            s1.close()
    finally:
        for fake in fakes:
            fake.close(0)
        ctx.term()
