"""Keys for secure clusters: ``dafka.keygen`` / ``dafka keygen`` write czmq-format
certificate pairs that pyzmq reads, and read the ones pyzmq writes."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
import zmq
import zmq.auth

import dafka


def test_this_build_has_curve() -> None:
    assert dafka.has_curve()


def test_keygen_writes_a_pair_pyzmq_reads(tmp_path: Path) -> None:
    public, secret = dafka.keygen(tmp_path / "keys", "store-1", role="store", topics=["a.*", "b"])
    assert (public.name, secret.name) == ("store-1.key", "store-1.key_secret")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    pub_z85, none = zmq.auth.load_certificate(public)
    assert none is None
    pub2, sec = zmq.auth.load_certificate(secret)
    assert pub2 == pub_z85 and sec is not None and len(sec) == 40
    # The pair is a real CURVE pair: libzmq derives the public key from the secret.
    assert zmq.curve_public(sec) == pub_z85
    c = dafka.read_certificate(public)
    assert c == dafka.security.Certificate(pub_z85.decode(), "store", ("a.*", "b"), False)
    assert dafka.read_certificate(secret).has_secret
    # Every key is new.
    other, _ = dafka.keygen(tmp_path / "keys", "store-2", role="store")
    assert dafka.read_certificate(other).public_key != c.public_key
    assert dafka.read_certificate(other).topics == ("*",)


def test_reads_what_pyzmq_writes(tmp_path: Path) -> None:
    public, secret = zmq.auth.create_certificates(tmp_path, "node")
    c = dafka.read_certificate(secret)
    assert c.has_secret and c.role is None
    assert c.public_key.encode() == zmq.auth.load_certificate(public)[0]


def test_keygen_refuses_bad_input_and_never_overwrites(tmp_path: Path) -> None:
    public, _ = dafka.keygen(tmp_path, "n", role="consumer")
    before = public.read_bytes()
    with pytest.raises(FileExistsError, match="does not overwrite"):
        dafka.keygen(tmp_path, "n", role="consumer")
    assert public.read_bytes() == before
    with pytest.raises(dafka.ConfigError, match="store, producer, consumer or tower"):
        dafka.keygen(tmp_path, "m", role="admin")
    with pytest.raises(dafka.ConfigError, match="topic pattern"):
        dafka.keygen(tmp_path, "m", role="store", topics="a,,b")
    with pytest.raises(dafka.ConfigError, match="certificate name"):
        dafka.keygen(tmp_path, "../m", role="store")
    with pytest.raises(TypeError, match="topics"):
        dafka.keygen(tmp_path, "m", role="store", topics=[1])  # type: ignore[list-item]
    assert not (tmp_path / "m.key").exists()
    (tmp_path / "junk.key").write_text('curve\n    public-key = "short"\n')
    with pytest.raises(dafka.SecurityError, match="40 characters"):
        dafka.read_certificate(tmp_path / "junk.key")
    with pytest.raises(OSError, match="cannot read"):
        dafka.read_certificate(tmp_path / "missing.key")


def test_the_cli_writes_a_pair(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "dafka.cli", "keygen", str(tmp_path), "p1"]
    out = subprocess.run(
        [*run, "--role", "producer", "--topics", "weather.*"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / "p1.key_secret") in out.stdout
    c = dafka.read_certificate(tmp_path / "p1.key")
    assert (c.role, c.topics) == ("producer", ("weather.*",))
    again = subprocess.run([*run, "--role", "producer"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "does not overwrite" in again.stderr
    bad = subprocess.run([*run, "--role", "admin"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
