"""The console in a secure cluster (issue 39, docs/console.md): with a consumer-role
certificate it shows the topics it is told to, or those the stores list to its
certificate; the keys of the other roles are refused before it starts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from console_util import CLI, offsets_of, wait_json
from secure_util import FAST, Keys, secure_tower

from dafka import ConfigError, Producer, Store
from dafka.console import Console

pytestmark = pytest.mark.timeout(180)

NAMES = {"tower": "tower", "s1": "store", "p": "producer", "viewer": "consumer"}


def test_a_secure_console_shows_its_topics_and_refuses_other_roles(tmp_path: Path) -> None:
    keys = Keys(tmp_path / "keys", NAMES)
    with (
        secure_tower(keys) as t,
        Store(tmp_path / "s1", towers=[t.endpoint], **keys.of("s1"), **FAST),  # type: ignore[arg-type]
        Producer("orders", towers=[t.endpoint], **keys.of("p"), **FAST) as p,  # type: ignore[arg-type]
    ):
        p.send_many([b"order %d" % i for i in range(12)])
        assert p.flush(60) == 0
        towers = [t.endpoint]
        with Console(
            listen="127.0.0.1:0", topics=["orders"], towers=towers, **keys.of("viewer")
        ) as c:
            snap = wait_json(
                c.url, lambda s: offsets_of(s) == {("orders", p.address): (0, 12)}, "orders"
            )
            assert snap["cluster"]["reachable"] is True
        for name in ("p", "s1", "tower"):
            with pytest.raises(ConfigError, match="role"):
                Console(listen="127.0.0.1:0", topics=["orders"], towers=towers, **keys.of(name))
        # Told no topics, it shows those the stores list to its certificate.
        with Console(listen="127.0.0.1:0", towers=towers, **keys.of("viewer")) as c:
            wait_json(c.url, lambda s: offsets_of(s) == {("orders", p.address): (0, 12)}, "listed")
        producer_key = keys.of("p")
        r = subprocess.run(
            [
                *CLI,
                "console",
                "--listen",
                "127.0.0.1:0",
                "--topic",
                "orders",
                "--tower",
                t.endpoint,
                "--cert",
                producer_key["cert"],
                "--trust",
                producer_key["trust"],
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 1 and "role" in r.stderr, r.stderr
