"""What the secure-cluster tests share: a trust directory with keys by name, and the
split of a keyed endpoint."""

from __future__ import annotations

import os
from pathlib import Path

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
