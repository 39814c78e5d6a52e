"""Errors typed across the thread boundary (issue 37): what a node's own thread
fails with (its certificate, its bind, its store directory) reaches Python as the
class it would have in the caller's thread, with the OS's errno, and IO errors by
kind (``FileNotFoundError``, ``PermissionError``). The certificate is read once,
by the node: no check before it in the binding. Nodes on 127.0.0.1."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dafka

pytestmark = pytest.mark.timeout(60)

LOCAL = "tcp://127.0.0.1:0"
LOOPBACK = {"beacon_in": LOCAL, "beacon_out": LOCAL}


def _nodes(tmp: Path) -> dict[str, Callable[..., Any]]:
    """Each node kind, started with the keywords given and closed at once (a node
    that starts is a test's mistake)."""

    def node(make: Callable[..., Any]) -> Callable[..., Any]:
        def call(**kw: Any) -> Any:
            n = make(**kw)
            n.close()
            return n

        return call

    return {
        "Tower": node(lambda **kw: dafka.Tower(**LOOPBACK, **kw)),
        "Producer": node(lambda **kw: dafka.Producer("t", bind=LOCAL, **kw)),
        "Consumer": node(lambda **kw: dafka.Consumer(["t"], bind=LOCAL, **kw)),
        "Store": node(lambda **kw: dafka.Store(tmp / "store", bind=LOCAL, **kw)),
    }


KINDS = ["Tower", "Producer", "Consumer", "Store"]
ROLE = {"Tower": "tower", "Producer": "producer", "Consumer": "consumer", "Store": "store"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_certificate_is_a_file_not_found_error(kind: str, tmp_path: Path) -> None:
    """Read by the node's thread: a ``FileNotFoundError`` naming the path, with
    errno ENOENT, not a string of it in a ``NodeError``."""
    keys = tmp_path / "keys"
    dafka.keygen(keys, "other", role=ROLE[kind])
    missing = keys / "nobody.key_secret"
    with pytest.raises(FileNotFoundError, match=str(missing)) as e:
        _nodes(tmp_path)[kind](cert=missing, trust=keys)
    assert e.value.errno == errno.ENOENT
    assert not isinstance(e.value, dafka.NodeError)


@pytest.mark.parametrize("kind", KINDS)
def test_a_malformed_certificate_is_a_security_error(kind: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    dafka.keygen(keys, "me", role=ROLE[kind])
    bad = tmp_path / "bad.key_secret"
    bad.write_text("not a certificate\n")
    with pytest.raises(dafka.SecurityError):
        _nodes(tmp_path)[kind](cert=bad, trust=keys)


@pytest.mark.parametrize("kind", KINDS)
def test_a_certificate_of_another_role_is_a_config_error(kind: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    other = "consumer" if kind != "Consumer" else "producer"
    dafka.keygen(keys, "me", role=other)
    with pytest.raises(dafka.ConfigError, match=other):
        _nodes(tmp_path)[kind](cert=keys / "me.key_secret", trust=keys)


@pytest.mark.parametrize("kind", ["Producer", "Consumer", "Store"])
def test_a_bind_failure_is_a_node_error(kind: str, tmp_path: Path) -> None:
    """The node thread binds: an endpoint in use fails its start as a
    ``NodeError`` naming the endpoint."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        endpoint = f"tcp://127.0.0.1:{taken.getsockname()[1]}"
        make = {
            "Producer": lambda: dafka.Producer("t", bind=endpoint),
            "Consumer": lambda: dafka.Consumer(["t"], bind=endpoint),
            "Store": lambda: dafka.Store(tmp_path / "store", bind=endpoint),
        }[kind]
        with pytest.raises(dafka.NodeError, match=endpoint.rsplit(":", 1)[1]):
            make().close()


def test_a_store_directory_that_is_a_file_is_a_log_io_error(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(dafka.LogIOError, match=str(f)) as e:
        dafka.Store(f, bind=LOCAL).close()
    assert isinstance(e.value, OSError) and e.value.errno is not None


def test_a_missing_log_directory_read_only_is_a_file_not_found_error(tmp_path: Path) -> None:
    """``dafka.Log`` opened read-only does not create its directory."""
    missing = tmp_path / "missing"
    with pytest.raises(dafka.LogFileNotFoundError, match=str(missing)) as e:
        dafka.Log(missing, read_only=True)
    assert isinstance(e.value, FileNotFoundError)
    assert isinstance(e.value, dafka.LogIOError)
    assert e.value.errno == errno.ENOENT


def _forbidden(tmp: Path) -> Path:
    """A directory path the process may not create: under a read-only directory
    (unless root, who may), else under /sys (EPERM even for root); skips when
    neither refuses."""
    if os.geteuid() != 0:
        ro = tmp / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        return ro / "store"
    probe = Path("/sys/dafka-probe")
    try:
        probe.mkdir()
    except PermissionError:
        return Path("/sys/dafka-store")
    except OSError as e:
        pytest.skip(f"no directory here refuses root with EPERM/EACCES ({e})")
    probe.rmdir()
    pytest.skip("root may create directories under /sys here")


def test_a_store_directory_it_may_not_create_is_a_permission_error(tmp_path: Path) -> None:
    """From the store's thread: a ``LogPermissionError``, which is also a
    ``PermissionError``."""
    path = _forbidden(tmp_path)
    with pytest.raises(dafka.LogPermissionError) as e:
        dafka.Store(path, bind=LOCAL).close()
    assert isinstance(e.value, PermissionError)
    assert e.value.errno in (errno.EPERM, errno.EACCES)


def test_a_log_directory_it_may_not_create_is_a_permission_error(tmp_path: Path) -> None:
    path = _forbidden(tmp_path)
    with pytest.raises(dafka.LogPermissionError) as e:
        dafka.Log(path)
    assert isinstance(e.value, PermissionError)
