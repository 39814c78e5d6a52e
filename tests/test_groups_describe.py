"""Consumer groups described (issue 38, docs/groups.md "Lag"): ``dafka.list_groups``,
``dafka.describe_group`` (members, their partitions, commits, heads, lag) and the
command line's ``dafka groups``, ``dafka groups describe GROUP [--json]`` and
``dafka consume --group``, against a real tower, store, producer and member."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodes_util import drain, store_and_producer, wait_for

import dafka
from dafka import Consumer
from dafka.cli import main

pytestmark = pytest.mark.timeout(180)

FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}


def test_a_group_is_listed_and_described_with_its_lag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with store_and_producer(tmp_path, "orders", **FAST) as (tower, p):
        towers = [tower]
        for i in range(10):
            p.send(b"%d" % i)
        assert p.flush(30) == 0
        c = Consumer(["orders"], towers=towers, group="g", auto_commit_interval=0.1, **FAST)
        assert len(drain(c, 10)) == 10
        wait_for(lambda: c.committed([p.address]) == {p.address: 10}, "the auto-commit")
        # Five more that the member does not poll: the group lags by five.
        for i in range(10, 15):
            p.send(b"%d" % i)
        assert p.flush(30) == 0

        assert dafka.list_groups(towers=towers, **FAST) == [
            {"group": "g", "topics": ["orders"], "partitions": 1}
        ]
        d = dafka.describe_group("g", towers=towers, listen=0.5, **FAST)
        assert d["group"] == "g"
        assert d["members"] == [
            {"address": c.address, "topics": ["orders"], "partitions": [("orders", p.address)]}
        ]
        assert d["partitions"] == [
            {
                "topic": "orders",
                "partition": p.address,
                "owner": c.address,
                "committed": 10,
                "head": 14,
                "lag": 5,
            }
        ]
        assert d["lag"] == 5

        cli = ["--tower", tower]
        capsys.readouterr()
        assert main(["groups", *cli]) == 0
        out = capsys.readouterr().out
        assert "g " in out and "orders" in out
        assert main(["groups", *cli, "describe", "g", "--json", "--listen", "0.5"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["lag"] == 5 and shown["partitions"][0]["committed"] == 10
        assert main(["groups", *cli, "describe", "g"]) == 0
        table = capsys.readouterr().out
        assert p.address in table and "total lag 5" in table
        c.close()

        # `dafka consume --group`: prints what it reads, commits it on exit.
        argv = ["consume", "orders", *cli, "--group", "g2", "--from-beginning", "--count", "15"]
        assert main(argv) == 0
        printed = capsys.readouterr().out.split()
        assert sorted(printed, key=int) == [str(i) for i in range(15)]

        def final_commit() -> bool:
            d2 = dafka.describe_group("g2", towers=towers, listen=0.3, **FAST)
            return [(r["committed"], r["lag"]) for r in d2["partitions"]] == [(15, 0)]

        wait_for(final_commit, "the final commit of `dafka consume --group`")


def test_describing_without_a_store_times_out_and_arguments_are_checked() -> None:
    with pytest.raises(dafka.CommitTimeoutError, match="describe_group: no store answered"):
        dafka.describe_group("g", peers=[], timeout=0.3)
    with pytest.raises(dafka.CommitTimeoutError, match="list_groups"):
        dafka.list_groups(peers=[], timeout=0.3)
    with pytest.raises(dafka.ConfigError, match="group"):
        dafka.describe_group("", peers=[])
    with pytest.raises(ValueError, match="listen"):
        dafka.describe_group("g", peers=[], listen=-1)
    with pytest.raises(SystemExit, match="exclude each other"):
        main(["consume", "t", "--peer", "tcp://127.0.0.1:1", "--group", "g", "--positions", "x"])
