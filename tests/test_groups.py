"""Consumer groups from Python (issue 38, docs/groups.md): two members of a group
share a topic's partitions and each record reaches one of them; a member closing
hands its partitions over where it stopped; a restarted group resumes from the
commits the store kept; a consumer without a group has no commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodes_util import wait_for

from dafka import ConfigError, Consumer, Producer, Record, Store, Tower

pytestmark = pytest.mark.timeout(180)

LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}


def values(*got: list[Record]) -> list[bytes]:
    return sorted(r.value for g in got for r in g)


def produce(producers: list[Producer], start: int, n: int) -> list[bytes]:
    sent = []
    for i, p in enumerate(producers):
        for j in range(start, start + n):
            v = f"{i}-{j}".encode()
            p.send(v)
            sent.append(v)
        assert p.flush(30) == 0
    return sorted(sent)


def test_members_share_partitions_and_hand_them_over(tmp_path: Path) -> None:
    with (
        Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t,
        Store(tmp_path / "s", towers=[t.endpoint], **FAST),
    ):
        towers = [t.endpoint]
        a = Consumer(["orders"], towers=towers, group="billing", **FAST)
        b = Consumer(["orders"], towers=towers, group="billing", **FAST)
        with Consumer(["x"], towers=towers) as plain:
            assert (a.group, plain.group, plain.assignment()) == ("billing", None, [])
        producers = [Producer("orders", towers=towers, **FAST) for _ in range(8)]
        for p in producers:
            p.wait_for_stores(1, timeout=30)
        sent = produce(producers, 0, 10)
        got_a: list[Record] = []
        got_b: list[Record] = []

        def everything() -> bool:
            got_a.extend(a.poll_many(timeout=0.05))
            got_b.extend(b.poll_many(timeout=0.05))
            return len(got_a) + len(got_b) >= len(sent)

        wait_for(everything, "every record at one member", within=60)
        wait_for(
            lambda: len(a.assignment()) + len(b.assignment()) == len(producers),
            "every partition assigned",
        )
        assert values(got_a, got_b) == sent
        mine_a, mine_b = set(a.assignment()), set(b.assignment())
        assert not mine_a & mine_b
        assert {r.partition for r in got_a} <= {p for _, p in mine_a}
        a.commit()

        # B leaves; A takes its partitions where B stopped.
        b.close()
        wait_for(lambda: len(a.assignment()) == len(producers), "A holding every partition")
        more = produce(producers, 10, 5)

        def the_rest() -> bool:
            got_a.extend(a.poll_many(timeout=0.05))
            return len(got_a) + len(got_b) >= len(sent) + len(more)

        wait_for(the_rest, "the new records at A", within=60)
        got_a.extend(a.poll_many(timeout=0.3))
        assert values(got_a, got_b) == sorted(sent + more)
        a.close()
        for p in producers:
            p.close()


def test_a_restarted_group_resumes_from_its_commits(tmp_path: Path) -> None:
    store_dir = tmp_path / "s"
    with Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t:
        towers = [t.endpoint]
        with (
            Store(store_dir, towers=towers, **FAST),
            Producer("orders", towers=towers, **FAST) as p,
        ):
            p.wait_for_stores(1, timeout=30)
            first = produce([p], 0, 20)
            # Commits only on commit() (and where it stops, the same here).
            c = Consumer(["orders"], towers=towers, group="g", auto_commit_interval=None, **FAST)
            got: list[Record] = []

            def first_ones() -> bool:
                got.extend(c.poll_many(timeout=0.05))
                return len(got) >= 20

            wait_for(first_ones, "the first records")
            assert values(got) == first
            c.commit()
            log = store_dir / "commits.log"
            wait_for(lambda: log.exists() and log.stat().st_size > 0, "the commit in the store")
            c.close()
            later = produce([p], 20, 10)
            with Consumer(["orders"], towers=towers, group="g", **FAST) as c2:
                got2: list[Record] = []

                def later_ones() -> bool:
                    got2.extend(c2.poll_many(timeout=0.05))
                    return len(got2) >= 10

                wait_for(later_ones, "the records after the commit")
                got2.extend(c2.poll_many(timeout=0.3))
                assert values(got2) == later


def test_group_options_are_checked() -> None:
    with Consumer(["orders"], peers=[]) as c, pytest.raises(ConfigError, match="no group"):
        c.commit()
    with pytest.raises(ConfigError, match="group"):
        Consumer(["orders"], group="")
    with pytest.raises(ValueError, match="auto_commit_interval"):
        Consumer(["orders"], group="g", auto_commit_interval=-1.0)
