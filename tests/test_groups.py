"""Consumer groups from Python (issue 38, docs/groups.md): two members of a group
share a topic's partitions and each record reaches one of them; a member closing
hands its partitions over where it stopped; a restarted group resumes from the
commits the store kept; a consumer without a group has no commits; synchronous and
explicit commits, ``committed()``, ``enable_auto_commit``, ``on_assign`` and
``on_revoke``, ``pause`` and ``resume``, and their argument errors."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from nodes_util import drain, store_and_producer, wait_for

from dafka import CommitTimeoutError, ConfigError, Consumer, Producer, Record, Store, Tower, aio

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
            Store(store_dir, towers=towers, **FAST) as s,
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
            # The store's counters show it: one row (one partition), taken, none refused.
            wait_for(lambda: s.stats()["commits_taken"] >= 1, "the commit counted")
            stats = s.stats()
            assert (stats["commit_rows"], stats["commits_refused"]) == (1, 0)
            assert stats["group_malformed"] == 0
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


def test_commits_synchronous_explicit_and_committed(tmp_path: Path) -> None:
    with store_and_producer(tmp_path, "orders", **FAST) as (tower, p):
        towers = [tower]
        sent = produce([p], 0, 20)
        assigned: list[list[tuple[str, str]]] = []
        c = Consumer(
            ["orders"],
            towers=towers,
            group="g",
            enable_auto_commit=False,
            auto_commit_interval=0.05,
            on_assign=assigned.append,
            **FAST,
        )
        got = drain(c, 20)
        assert values(got) == sent
        # on_assign came from poll, before its records.
        assert assigned == [[("orders", p.address)]]
        # Auto-commit off: nothing committed yet, whatever the interval says.
        assert c.committed([p.address]) == {p.address: None}
        c.commit(asynchronous=False)
        assert c.committed([p.address]) == {p.address: 20}
        assert c.committed() == {p.address: 20}
        # The same from asyncio, the loop free meanwhile.
        asyncio.run(aio.commit(c, {p.address: 20}))
        assert asyncio.run(aio.committed(c, [p.address])) == {p.address: 20}
        # An explicit commit behind the group's commit does not move it back.
        c.commit({p.address: 5}, asynchronous=False)
        assert c.committed([p.address]) == {p.address: 20}
        with pytest.raises(ConfigError, match="not one this member reads"):
            c.commit({"0" * 32: 1})
        with pytest.raises(ConfigError, match="not a partition"):
            c.commit({"0": 1})
        with pytest.raises(ValueError, match="offsets"):
            c.commit({p.address: -1})
        with pytest.raises(TypeError, match="dict"):
            c.commit([p.address])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="list of partition names"):
            c.committed(p.address)
        c.close()
        # Leaving, it committed where poll stopped; a new member resumes there.
        later = produce([p], 20, 5)
        with Consumer(["orders"], towers=towers, group="g", auto_commit_interval=0.2, **FAST) as c2:
            got2 = drain(c2, 5)
            # Auto-commit on (the default): what poll returned is committed.
            wait_for(lambda: c2.committed([p.address]) == {p.address: 25}, "the auto-commit")
            got2.extend(c2.poll_many(timeout=0.3))
            assert values(got2) == later


def test_on_revoke_and_on_assign_follow_a_rebalance_from_poll(tmp_path: Path) -> None:
    events: dict[str, list[tuple[str, list[tuple[str, str]]]]] = {"a": [], "b": []}

    def recorder(who: str, what: str) -> Callable[[list[tuple[str, str]]], None]:
        return lambda parts: events[who].append((what, parts))

    with (
        Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t,
        Store(tmp_path / "s", towers=[t.endpoint], **FAST),
    ):
        towers = [t.endpoint]

        def member(who: str) -> Consumer:
            return Consumer(
                ["orders"],
                towers=towers,
                group="g",
                on_assign=recorder(who, "assign"),
                on_revoke=recorder(who, "revoke"),
                **FAST,
            )

        a = member("a")
        producers = [Producer("orders", towers=towers, **FAST) for _ in range(16)]
        for p in producers:
            p.wait_for_stores(1, timeout=30)
        sent = produce(producers, 0, 5)
        got_a: list[Record] = []
        got_b: list[Record] = []

        def all_at_a() -> bool:
            got_a.extend(a.poll_many(timeout=0.05))
            return len(got_a) >= len(sent) and len(a.assignment()) == len(producers)

        wait_for(all_at_a, "every partition at A")
        b = member("b")
        wait_for(lambda: a.group_members() == b.group_members() == 2, "A and B to count two")
        more = produce(producers, 5, 5)

        def parts(who: str, what: str) -> set[tuple[str, str]]:
            return {x for w, ps in events[who] if w == what for x in ps}

        def settled() -> bool:
            got_a.extend(a.poll_many(timeout=0.05))
            got_b.extend(b.poll_many(timeout=0.05))
            mine_a, mine_b = set(a.assignment()), set(b.assignment())
            # B wins none of 16 partitions once in 65,536 runs only.
            return (
                len(got_a) + len(got_b) >= len(sent) + len(more)
                and len(mine_a | mine_b) == len(producers)
                and bool(mine_b)
                and parts("a", "revoke") == parts("b", "assign") == mine_b
            )

        wait_for(settled, "every record, and B's partitions taken from A", within=60)
        got_a.extend(a.poll_many(timeout=0.3))
        got_b.extend(b.poll_many(timeout=0.3))
        assert values(got_a, got_b) == sorted(sent + more), "nothing lost or twice"
        # What A gave up is what B took, and A's callbacks say what it holds.
        assert parts("a", "revoke") == parts("b", "assign") == set(b.assignment())
        assert parts("a", "assign") - parts("a", "revoke") == set(a.assignment())
        assert not parts("b", "revoke")
        for c in (a, b):
            c.close()
        for p in producers:
            p.close()


def test_a_callback_that_raises_loses_no_record(tmp_path: Path) -> None:
    """``on_assign`` raising in ``poll`` (a failed connect, a Ctrl-C) leaves the
    ``with`` block: nothing was returned, so nothing is committed past it, and the
    next member of the group gets every record. The callback after the one that
    raised is called by the next ``poll``."""
    with store_and_producer(tmp_path, "orders", **FAST) as (tower, p):
        towers = [tower]
        sent = produce([p], 0, 20)
        calls: list[str] = []

        def fails_once(parts: list[tuple[str, str]]) -> None:
            calls.append("assign")
            if calls.count("assign") == 1:
                raise RuntimeError("the database is not up yet")

        with (
            pytest.raises(RuntimeError, match="not up yet"),
            Consumer(
                ["orders"],
                towers=towers,
                group="g",
                auto_commit_interval=0.05,
                on_assign=fails_once,
                **FAST,
            ) as c,
        ):
            while True:
                assert c.poll_many(timeout=0.05) == [], "records before on_assign"
        with Consumer(["orders"], towers=towers, group="g", on_assign=fails_once, **FAST) as c2:
            got = drain(c2, 20)
            assert values(got) == sent, "every record, none skipped"
            assert calls == ["assign", "assign"]


def test_pause_holds_a_partition_back_until_resume(tmp_path: Path) -> None:
    with (
        Tower(beacon_in=LOCAL, beacon_out=LOCAL) as t,
        Store(tmp_path / "s", towers=[t.endpoint], **FAST),
    ):
        towers = [t.endpoint]
        p, q = (Producer("orders", towers=towers, **FAST) for _ in range(2))
        for x in (p, q):
            x.wait_for_stores(1, timeout=30)
        c = Consumer(["orders"], towers=towers, group="g", **FAST)
        first = produce([p, q], 0, 5)
        got = drain(c, len(first))
        with pytest.raises(ConfigError, match="assignment"):
            c.pause(["0" * 32])
        with pytest.raises(TypeError, match="list of partition names"):
            c.pause(p.address)
        c.pause([p.address])
        assert c.paused() == [p.address]
        for j in range(5, 10):
            p.send(f"0-{j}".encode())
            q.send(f"1-{j}".encode())
        p.flush(30)
        q.flush(30)
        # The other partition's records while one is paused.
        while_paused = drain(c, 5)
        assert {r.partition for r in while_paused} == {q.address}
        c.resume([p.address])
        assert c.paused() == []
        after = drain(c, 5)
        after.extend(c.poll_many(timeout=0.3))
        assert values(got, while_paused, after) == sorted(
            first + [f"{i}-{j}".encode() for i in range(2) for j in range(5, 10)]
        ), "nothing lost, nothing twice"
        c.close()
        for x in (p, q):
            x.close()


def test_new_group_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="on_assign is for consumer groups"):
        Consumer(["orders"], on_assign=print)
    with pytest.raises(ConfigError, match="on_revoke is for consumer groups"):
        Consumer(["orders"], on_revoke=print)
    with pytest.raises(ConfigError, match="enable_auto_commit is for consumer groups"):
        Consumer(["orders"], enable_auto_commit=False)
    with pytest.raises(TypeError, match="on_assign must be callable"):
        Consumer(["orders"], group="g", on_assign=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="commit_timeout"):
        Consumer(["orders"], group="g", commit_timeout=0)
    with Consumer(["orders"], peers=[]) as plain:
        with pytest.raises(ConfigError, match="no group"):
            plain.commit(asynchronous=False)
        with pytest.raises(ConfigError, match="no group"):
            plain.committed([])
        with pytest.raises(ConfigError, match="positions"):
            plain.pause(["0" * 32])
    # No store answers: committed() raises CommitTimeoutError, a TimeoutError.
    with Consumer(["orders"], peers=[], group="g", commit_timeout=0.3) as c:
        with pytest.raises(CommitTimeoutError, match="no store answered") as e:
            c.committed(["0" * 32])
        assert isinstance(e.value, TimeoutError)
        # Nothing to commit (no partition read): confirmed at once.
        c.commit(asynchronous=False)


def test_a_member_behind_its_records_still_commits_synchronously(tmp_path: Path) -> None:
    """While the application is behind (its buffer full, the node not reading), a
    synchronous commit and ``committed()`` still get the stores' answers; what the
    node dropped meanwhile is fetched once the application reads again."""
    with store_and_producer(tmp_path, "orders", **FAST) as (tower, p):
        sent = produce([p], 0, 200)
        c = Consumer(
            ["orders"],
            towers=[tower],
            group="g",
            max_buffered=10,
            enable_auto_commit=False,
            **FAST,
        )
        got: list[Record] = []

        def five() -> bool:
            got.extend(c.poll_many(max_records=5 - len(got), timeout=0.1))
            return len(got) >= 5

        wait_for(five, "five records polled")
        wait_for(lambda: c.stats()["pauses"] >= 1, "the member's buffer full")
        c.commit(asynchronous=False)
        assert c.committed([p.address]) == {p.address: len(got)}
        got.extend(drain(c, len(sent) - len(got)))
        assert values(got) == sent, "nothing lost"
        c.close()
