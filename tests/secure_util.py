"""What the secure-cluster tests share: a trust directory with keys by name, and the
split of a keyed endpoint."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
import zmq.utils.z85

import dafka

LOCAL = "tcp://127.0.0.1:0"
FAST = {"beacon_interval": 0.1, "beacon_timeout": 1.0}

# The cluster of the secure tests: a tower, two stores, a producer, a consumer, and
# a consumer-role insider.
CLUSTER = {
    "tower": "tower",
    "s1": "store",
    "s2": "store",
    "p": "producer",
    "c": "consumer",
    "mallory": "consumer",
}


class Keys:
    """A trust directory with one certificate per name, and the secret files."""

    def __init__(self, root: Path, names: dict[str, str]) -> None:
        self.trust = root / "trust"
        self.secret = root / "secret"
        self.trust.mkdir(parents=True)
        for name, role in names.items():
            public, _ = dafka.keygen(self.secret, name, role=role)
            public.rename(self.trust / public.name)

    def of(self, name: str) -> dict[str, str]:
        return {"cert": str(self.secret / f"{name}.key_secret"), "trust": str(self.trust)}

    def z85(self, name: str) -> tuple[bytes, bytes]:
        public, secret = zmq.auth.load_certificate(self.secret / f"{name}.key_secret")
        assert secret is not None
        return public, secret


def split(endpoint: str) -> tuple[str, bytes]:
    ep, key = endpoint.split(";curve=")
    return ep, key.encode()


def address_of(public_z85: bytes) -> bytes:
    """An address a node holding this key may use: the key's first 8 bytes and 8
    random ones, in upper-case hex (what a secure node's address is)."""
    raw = zmq.utils.z85.decode(public_z85)[:8] + os.urandom(8)
    return raw.hex().upper().encode()


def secure_tower(keys: Keys) -> dafka.Tower:
    """A secure tower on ephemeral ports of 127.0.0.1, with the key ``tower``."""
    return dafka.Tower(beacon_in=LOCAL, beacon_out=LOCAL, **keys.of("tower"))


def forger(
    ctx: zmq.Context[Any], keys: Keys, name: str, node: Any, subscribed: bytes
) -> zmq.Socket[bytes]:
    """An insider's peer socket holding ``name``'s key: a CURVE XPUB that ``node``
    connects to, returned once ``node`` subscribed ``subscribed`` on it (so what is
    sent next reaches it). The caller closes it."""
    pub, sec = keys.z85(name)
    fake: zmq.Socket[bytes] = ctx.socket(zmq.XPUB)
    fake.setsockopt(zmq.XPUB_VERBOSE, 1)
    fake.curve_server = True
    fake.curve_secretkey = sec  # type: ignore[assignment]
    fake.bind("tcp://127.0.0.1:*")
    ep = fake.getsockopt(zmq.LAST_ENDPOINT).decode()  # type: ignore[union-attr]
    node.connect(f"{ep};curve={pub.decode()}")
    deadline = time.monotonic() + 20
    while fake.poll(100) == 0 or fake.recv() != b"\x01" + subscribed:
        if time.monotonic() >= deadline:
            fake.close(linger=0)
            raise AssertionError(f"{name}: the node never subscribed {subscribed!r}")
    return fake
