"""The cluster view (issue 39, docs/operations.md "Cluster view"): ``dafka.cluster``,
``dafka.describe_topics``, ``dafka.describe_topic`` and the command line's ``dafka
cluster``, ``dafka topics``, ``dafka describe TOPIC`` (``--json``), against a real
tower, two stores and three producers on two topics; and the PARTITIONS-QUERY
extension tried as an outsider would (a malformed one dropped and counted, a forged
answer ignored)."""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import zmq
from nodes_util import drain, wait_for

import dafka
from dafka.cli import main

pytestmark = pytest.mark.timeout(240)

FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}
# Records each producer sends: two partitions of "a", one of "b".
SENT = (("a", 5), ("a", 7), ("b", 11))


@contextmanager
def cluster(tmp_path: Path, **opts: Any) -> Iterator[tuple[str, list[dafka.Store], list[Any]]]:
    """A tower, two stores and three producers (SENT), every record ACKed by both
    stores; yields the tower's endpoint, the stores and the producers."""
    with ExitStack() as stack:
        t = stack.enter_context(
            dafka.Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0")
        )
        towers = [t.endpoint]
        stores = [
            stack.enter_context(dafka.Store(tmp_path / f"s{i}", towers=towers, **opts))
            for i in (1, 2)
        ]
        producers = []
        for topic, n in SENT:
            p = stack.enter_context(dafka.Producer(topic, towers=towers, min_acks=2, **opts))
            p.wait_for_stores(2, timeout=30)
            for i in range(n):
                p.send(b"%d" % i)
            producers.append(p)
        for p in producers:
            assert p.flush(30) == 0
        yield t.endpoint, stores, producers


def shape(topics: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """What the view says of each partition: offsets, and each store's offsets."""
    return {
        (t["topic"], p["partition"]): (
            p["first"],
            p["next"],
            p["records"],
            [(s["store"], s["first"], s["next"]) for s in p["stores"]],
        )
        for t in topics
        for p in t["partitions"]
    }


def produced(stores: list[dafka.Store], producers: list[Any]) -> dict[tuple[str, str], Any]:
    held = sorted(s.address for s in stores)
    return {
        (topic, p.address): (0, n, n, [(s, 0, n) for s in held])
        for (topic, n), p in zip(SENT, producers, strict=True)
    }


def test_topics_and_cluster_show_what_was_produced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with cluster(tmp_path, **FAST) as (tower, stores, producers):
        towers = [tower]
        want = produced(stores, producers)
        seen: list[Any] = []

        def topics_match() -> bool:
            seen[:] = dafka.describe_topics(towers=towers, **FAST)
            return shape(seen) == want and all(p["live"] for t in seen for p in t["partitions"])

        wait_for(topics_match, "the view of what was produced", within=60)
        for t in seen:
            for p in t["partitions"]:
                # Each store holds a whole copy: the records' bytes, at least.
                assert all(s["bytes"] >= p["records"] for s in p["stores"]), p
                assert p["bytes"] == max(s["bytes"] for s in p["stores"])
            assert t["records"] == sum(p["records"] for p in t["partitions"])
            assert t["bytes"] == sum(p["bytes"] for p in t["partitions"])
        assert [t["topic"] for t in seen] == ["a", "b"]
        # Plain data: JSON takes it as it is.
        assert json.loads(json.dumps(seen)) == seen

        # The command line prints the same.
        cli = ["--tower", tower]

        def cli_matches() -> bool:
            capsys.readouterr()
            assert main(["topics", *cli, "--json"]) == 0
            return shape(json.loads(capsys.readouterr().out)) == want

        wait_for(cli_matches, "dafka topics --json", within=60)
        assert main(["topics", *cli]) == 0
        table = capsys.readouterr().out
        assert "topic 'a': 2 partition(s), 12 records" in table
        assert "topic 'b': 1 partition(s), 11 records" in table

        # The towers' view: both stores and the three producers, by kind.
        addresses = {s.address: "store" for s in stores}
        addresses.update({p.address: "producer" for p in producers})
        last: dict[str, Any] = {}

        def nodes_known() -> bool:
            last.update(dafka.cluster(towers=towers, **FAST))
            kinds = {n["address"]: n["kind"] for n in last["nodes"]}
            return all(kinds.get(a) == k for a, k in addresses.items())

        wait_for(nodes_known, "every node by kind", within=60)
        assert last["towers"] == towers
        assert last["counts"]["store"] == 2 and last["counts"]["producer"] == 3
        for n in last["nodes"]:
            if n["address"] in addresses:
                assert n["endpoint"].startswith("tcp://127.0.0.1:")
                assert n["key"] is None and n["last_heard"] >= 0

        def cli_cluster() -> bool:
            capsys.readouterr()
            assert main(["cluster", *cli, "--json"]) == 0
            shown = json.loads(capsys.readouterr().out)
            return {n["address"]: n["kind"] for n in shown["nodes"]}.items() >= addresses.items()

        wait_for(cli_cluster, "dafka cluster --json", within=60)

        # One topic, and the group that read it.
        c = dafka.Consumer(["a"], towers=towers, group="g", auto_commit_interval=0.1, **FAST)
        assert len(drain(c, 12)) == 12
        parts = [p.address for p in producers[:2]]
        wait_for(lambda: c.committed(parts) == {parts[0]: 5, parts[1]: 7}, "the group's commits")
        only_a = {k: v for k, v in want.items() if k[0] == "a"}
        d: dict[str, Any] = {}

        def described() -> bool:
            d.update(dafka.describe_topic("a", towers=towers, **FAST))
            return shape([d]) == only_a and [g["group"] for g in d["groups"]] == ["g"]

        wait_for(described, "topic a and its group", within=60)
        g = d["groups"][0]
        assert sorted(r["partition"] for r in g["partitions"]) == sorted(parts)
        assert g["lag"] == 0 and all(r["committed"] == r["head"] + 1 for r in g["partitions"])
        assert [m["address"] for m in g["members"]] == [c.address]
        c.close()
        capsys.readouterr()
        assert main(["describe", "b", *cli, "--json"]) == 0
        b = json.loads(capsys.readouterr().out)
        assert b["groups"] == [] and [p["partition"] for p in b["partitions"]] == [
            producers[2].address
        ]
        assert main(["describe", "nothing", *cli, "--no-groups"]) == 0
        assert "0 partition(s)" in capsys.readouterr().out


def string(b: bytes) -> bytes:
    return bytes([len(b)]) + b


def query_frames(topic: bytes, requester: bytes, sequence: int) -> list[bytes]:
    """A PARTITIONS-QUERY in the rfc dialect, as PROTOCOL.md "Extensions" frames it."""
    return [b"I" + topic, b"\xaa\xa5I\x01" + string(requester) + struct.pack(">Q", sequence)]


def answer_frames(to: bytes, store: bytes, part: bytes) -> list[bytes]:
    """A PARTITIONS claiming `part` of topic "a" holds a billion records."""
    body = string(store) + struct.pack(">QB", 1, 1) + struct.pack(">I", 1)
    body += string(b"a") + string(part) + struct.pack(">QQQ", 0, 10**9, 1)
    return [b"P" + to, b"\xaa\xa5P\x01" + body]


def test_malformed_and_forged_view_messages_are_dropped_and_counted(tmp_path: Path) -> None:
    ctx = zmq.Context()
    fake = ctx.socket(zmq.XPUB)
    try:
        with cluster(tmp_path, **FAST) as (tower, stores, producers):
            s = stores[0]
            fake.setsockopt(zmq.XPUB_VERBOSE, 1)
            fake.bind("tcp://127.0.0.1:*")
            ep = fake.getsockopt(zmq.LAST_ENDPOINT).decode()  # type: ignore[union-attr]
            s.connect(ep)
            deadline = time.monotonic() + 20
            while fake.poll(100) == 0 or fake.recv() != b"\x01I":
                assert time.monotonic() < deadline, "the store never subscribed to queries"
            before = s.stats()
            ok = query_frames(b"", b"F" * 32, 1)
            # Trailing byte, truncated, wrong version, empty requester.
            fake.send_multipart([ok[0], ok[1] + b"\x00"])
            fake.send_multipart([ok[0], ok[1][:-1]])
            fake.send_multipart([ok[0], ok[1][:3] + b"\x02" + ok[1][4:]])
            fake.send_multipart(query_frames(b"", b"", 1))
            wait_for(
                lambda: s.stats()["malformed"] >= before["malformed"] + 4,
                "four malformed PARTITIONS-QUERYs counted",
            )

            # A viewer the fake peer reaches: a forged answer (to no question the
            # viewer asked: its sequence is random) and a malformed one change
            # nothing it shows.
            forged: list[bytes] = []

            def forge() -> None:
                end = time.monotonic() + 60
                while time.monotonic() < end and not forged:
                    if fake.poll(100) == 0:
                        continue
                    sub = fake.recv()
                    if sub.startswith(b"\x01P"):
                        to = sub[2:]
                        fake.send_multipart(answer_frames(to, b"F" * 32, b"X" * 32))
                        fake.send_multipart([b"P" + to, b"\xaa\xa5P\x01\x00"])
                        forged.append(to)

            want = produced(stores, producers)
            thread = threading.Thread(target=forge)
            thread.start()
            try:
                view = dafka.describe_topics(towers=[tower], peers=[ep], listen=1.0, **FAST)
            finally:
                thread.join()
            assert forged, "the viewer never subscribed to its answers"
            assert ("a", "X" * 32) not in shape(view)
            wait_for(
                lambda: shape(dafka.describe_topics(towers=[tower], **FAST)) == want,
                "the view of what was produced",
                within=60,
            )
    finally:
        fake.close(0)
        ctx.term()


def test_bad_arguments_and_no_cluster() -> None:
    with pytest.raises(dafka.FetchTimeoutError, match="no tower"):
        dafka.cluster(towers=["tcp://127.0.0.1:1,2"], timeout=0.3)
    with pytest.raises(dafka.FetchTimeoutError, match="no store answered"):
        dafka.describe_topics(peers=[], timeout=0.3)
    with pytest.raises(ValueError, match="topic"):
        dafka.describe_topic("", peers=[])
    with pytest.raises(dafka.ConfigError, match="topic"):
        dafka.describe_topic("x" * 256, peers=[])
    with pytest.raises(ValueError, match="listen"):
        dafka.cluster(peers=[], listen=-1)
    assert main(["topics", "--peer", "tcp://127.0.0.1:1", "--timeout", "0.3"]) == 1
