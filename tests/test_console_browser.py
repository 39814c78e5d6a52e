"""``dafka console`` in a real browser (issue 39): a local cluster with known records
on two topics and a consumer group, the console as a process, the page loaded in
headless Chromium; what the page shows must be what was produced. Screenshots are
kept in ``test-artifacts/console/`` (``$DAFKA_TEST_ARTIFACTS``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_util import (
    artifacts,
    browse_until,
    chromium,
    console_process,
    dead_tower,
    offsets_of,
    wait_json,
)
from nodes_util import drain

from dafka import Consumer, Producer, Store, Tower

pytestmark = pytest.mark.timeout(300)

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}


def appended(snap: dict[str, Any], topic: str) -> int:
    """Records the console measured appended to ``topic`` (its history's sum)."""
    return sum(h["records"] for t in snap["topics"] if t["topic"] == topic for h in t["history"])


def test_the_page_shows_the_topics_partitions_counts_and_groups(tmp_path: Path) -> None:
    chromium()  # skip early, before a cluster is started, when there is no browser
    with (
        Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        Store(tmp_path / "store", towers=[tower.endpoint], **FAST),
        Producer("orders", towers=[tower.endpoint], **FAST) as o1,
        Producer("orders", towers=[tower.endpoint], **FAST) as o2,
        Producer("clicks", towers=[tower.endpoint], **FAST) as c1,
    ):
        for p, n in ((o1, 25), (o2, 40), (c1, 17)):
            p.wait_for_stores(1, timeout=60)
            p.send_many([b"record %d" % i for i in range(n)])
            assert p.flush(60) == 0
        with Consumer(
            ["orders"], towers=[tower.endpoint], group="billing", offset_reset="earliest", **FAST
        ) as member:
            assert len(drain(member, 65)) == 65
            member.commit(asynchronous=False)
            with console_process("--tower", tower.endpoint, "--interval", "0.5") as (url, _):
                want = {
                    ("orders", o1.address): (0, 25),
                    ("orders", o2.address): (0, 40),
                    ("clicks", c1.address): (0, 17),
                }
                wait_json(url, lambda s: offsets_of(s) == want, "the produced offsets")
                # Throughput: records appended while the console watches are measured
                # from successive head offsets.
                o1.send_many([b"more %d" % i for i in range(30)])
                assert o1.flush(60) == 0
                want[("orders", o1.address)] = (0, 55)
                snap = wait_json(
                    url,
                    lambda s: offsets_of(s) == want and appended(s, "orders") == 30,
                    "the 30 records appended to orders, in its history",
                )
                assert appended(snap, "clicks") == 0, snap
                assert snap["cluster"]["reachable"] is True
                assert [t["records"] for t in snap["topics"]] == [17, 95]  # clicks, orders
                group = wait_json(
                    url,
                    lambda s: (
                        [g["group"] for g in s["groups"]["list"]] == ["billing"]
                        and s["groups"]["list"][0]["members"]
                        and s["groups"]["list"][0]["lag"] == 30
                    ),
                    "group billing with its member and its lag of 30",
                )["groups"]["list"][0]
                assert group["topics"] == ["orders"] and group["error"] is None, group
                assert [m["address"] for m in group["members"]] == [member.address], group

                shown = {
                    key: {
                        "name": key[1],
                        "first": f"{first:,}",
                        "next": f"{nxt:,}",
                        "records": f"{nxt - first:,}",
                    }
                    for key, (first, nxt) in want.items()
                }
                groups = {"billing": {"members": "1", "lag": "30"}}
                shot = artifacts("cluster") / "console.png"
                page = browse_until(
                    url,
                    lambda p: p.state == "ok" and p.partitions == shown and p.group_rows == groups,
                    shot,
                )
                print(f"screenshot: {shot}")
                assert page.state == "ok", page.status
                assert "Cluster reachable: 2 topic(s), 3 partition(s)" in page.status
                assert page.partitions == shown
                assert page.group_rows == groups
                assert "orders" in page.lines  # its records/s line in the chart
                # The nodes the towers relay: the store and the three producers.
                nodes = wait_json(
                    url,
                    lambda s: (
                        {o1.address, o2.address, c1.address}
                        <= {n["address"] for n in s["nodes"]["list"] or []}
                    ),
                    "the producers among the towers' nodes",
                )["nodes"]["list"]
                kinds = {n["address"]: n["kind"] for n in nodes}
                assert kinds[o1.address] == "producer", nodes
                assert "store" in kinds.values(), nodes


def test_the_page_says_when_no_cluster_is_reachable() -> None:
    chromium()
    with (
        dead_tower() as nowhere,
        console_process("--tower", nowhere, "--timeout", "0.5") as (url, _),
    ):
        snap = wait_json(
            url, lambda s: s["cluster"]["reachable"] is False, "an unreachable cluster"
        )
        assert snap["cluster"]["error"] and snap["topics"] == [], snap
        shot = artifacts("unreachable") / "console.png"
        page = browse_until(url, lambda p: p.state == "unreachable", shot)
        assert page.state == "unreachable", page.status
        assert page.status.startswith("No cluster reachable"), page.status
        assert "FetchTimeoutError" in page.status and "Last answer: never" in page.status
        assert page.partitions == {}
