"""Keys for secure clusters: CURVE certificates in czmq's format.

:func:`keygen` writes a pair (``NAME.key``, the public certificate that goes in a
cluster's trust directory, and ``NAME.key_secret``, which only its node keeps), with the
node's role and topic patterns in the metadata; :func:`read_certificate` reads one.
pyzmq's ``zmq.auth.load_certificate`` reads these files too, and this module reads the
ones ``zmq.auth.create_certificates`` writes (their role is then none).

>>> import tempfile, dafka
>>> d = tempfile.mkdtemp()
>>> public, secret = dafka.keygen(d, "store-1", role="store")
>>> dafka.read_certificate(public).role
'store'
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dafka import _native

__all__ = ["ROLES", "Certificate", "has_curve", "keygen", "read_certificate"]

ROLES = ("store", "producer", "consumer", "tower")


@dataclass(frozen=True)
class Certificate:
    """What a certificate file says: its public key (Z85, 40 characters), the role
    and topic patterns in its metadata, and whether it holds the secret key."""

    public_key: str
    role: str | None
    topics: tuple[str, ...]
    has_secret: bool


def _topics(topics: str | Sequence[str] | None) -> str | None:
    if topics is None:
        return None
    if isinstance(topics, str):
        return topics
    if not topics or not all(isinstance(t, str) for t in topics):
        raise TypeError("topics must be a str of comma-separated patterns or a list of str")
    return ",".join(topics)


def keygen(
    directory: str | os.PathLike[str],
    name: str,
    *,
    role: str,
    topics: str | Sequence[str] | None = None,
) -> tuple[Path, Path]:
    """Writes ``DIRECTORY/NAME.key`` and ``DIRECTORY/NAME.key_secret`` (mode 0600) for a
    node of ``role`` (``"store"``, ``"producer"``, ``"consumer"`` or ``"tower"``) that
    may read and write ``topics`` (patterns such as ``"weather.*"``; a list or a
    comma-separated str; None for every topic). Returns ``(public, secret)``.

    Raises :class:`dafka.ConfigError` for an unknown role, a bad pattern or a name that
    is not letters, digits, ``.``, ``-`` and ``_``; ``FileExistsError`` rather than
    overwrite a certificate.
    """
    if role not in ROLES:
        from dafka.exceptions import ConfigError

        raise ConfigError(f"unknown role {role!r}: use store, producer, consumer or tower")
    public, secret = _native.keygen(os.fspath(directory), name, role=role, topics=_topics(topics))
    return Path(public), Path(secret)


def read_certificate(path: str | os.PathLike[str]) -> Certificate:
    """Reads a certificate file, public or secret. Raises :class:`dafka.SecurityError`
    if it is not one."""
    public, role, topics, has_secret = _native.read_certificate(os.fspath(path))
    return Certificate(public, role, tuple(topics.split(",")), has_secret)


def has_curve() -> bool:
    """Whether this build's ZeroMQ has CURVE encryption (wheels of dafka do)."""
    return _native.has_curve()
