"""The secure-mode options (issue 30) through every entry point, checked where they are
given: Python ``cert=``/``trust=`` on every node kind and read client, the CLI's
``--cert``/``--trust``, and the Spark options ``cert``/``trust``. None of this needs the
secure transport: a bad pair, path, role or endpoint is refused before a node starts."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq

import dafka
from dafka import _native, cli

KEY = zmq.curve_keypair()[0].decode()
KEYED_TOWER = f"tcp://127.0.0.1:5556,5557;curve={KEY}"
PLAIN_TOWER = "tcp://127.0.0.1:5556,5557"
LOOPBACK = {"beacon_in": "tcp://127.0.0.1:0", "beacon_out": "tcp://127.0.0.1:0"}

ROLE_OF = {
    "Tower": "tower",
    "Producer": "producer",
    "Consumer": "consumer",
    "Store": "store",
    "HeadsWatch": "consumer",
    "heads": "consumer",
    "offsets": "consumer",
    "fetch_range": "consumer",
    "fetch_ranges": "consumer",
    "check_node": "consumer",
}


def _entries(tmp: Path) -> dict[str, Callable[..., Any]]:
    """Each entry point, called with only what it needs besides the keywords given
    (a read client reads something, so that it starts its node). A node that starts
    (a test's mistake) is closed at once."""

    def node(make: Callable[..., Any]) -> Callable[..., Any]:
        def call(**kw: Any) -> Any:
            n = make(**kw)
            n.close()
            return n

        return call

    return {
        "Tower": node(lambda **kw: dafka.Tower(**LOOPBACK, **kw)),
        "Producer": node(lambda **kw: dafka.Producer("t", **kw)),
        "Consumer": node(lambda **kw: dafka.Consumer(["t"], **kw)),
        "Store": node(lambda **kw: dafka.Store(tmp / "store", **kw)),
        "HeadsWatch": node(lambda **kw: dafka.HeadsWatch("t", **kw)),
        "heads": lambda **kw: dafka.heads("t", timeout=0.1, **kw),
        "offsets": lambda **kw: dafka.offsets("t", timeout=0.1, **kw),
        "fetch_range": lambda **kw: dafka.fetch_range("t", "p", 0, 1, timeout=0.1, **kw),
        "fetch_ranges": lambda **kw: dafka.fetch_ranges([("t", "p", 0, 1)], timeout=0.1, **kw),
        "check_node": lambda **kw: _native.check_node(**kw),
    }


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A directory with one certificate pair of each role, which is also the trust
    directory (``*.key_secret`` files in it are skipped)."""
    d = tmp_path / "keys"
    for role in ("tower", "producer", "consumer", "store"):
        dafka.keygen(d, role, role=role)
    return d


@pytest.mark.parametrize("entry", list(ROLE_OF))
def test_cert_and_trust_go_together(entry: str, tmp_path: Path, keys: Path) -> None:
    call = _entries(tmp_path)[entry]
    secret = keys / f"{ROLE_OF[entry]}.key_secret"
    with pytest.raises(dafka.ConfigError, match=r"cert= given without trust=.*pass both"):
        call(cert=secret)
    with pytest.raises(dafka.ConfigError, match=r"trust= given without cert=.*pass both"):
        call(trust=keys)
    assert not (tmp_path / "store").exists(), "refused before the store's directory is made"


@pytest.mark.parametrize("entry", list(ROLE_OF))
def test_a_missing_certificate_is_named(entry: str, tmp_path: Path, keys: Path) -> None:
    call = _entries(tmp_path)[entry]
    missing = tmp_path / "nope" / "gone.key_secret"
    with pytest.raises(OSError, match=str(missing)):
        call(cert=missing, trust=keys)
    # A missing trust directory too.
    nodir = tmp_path / "no-trust-here"
    with pytest.raises(OSError, match=str(nodir)):
        call(cert=keys / f"{ROLE_OF[entry]}.key_secret", trust=nodir)


@pytest.mark.parametrize("entry", list(ROLE_OF))
def test_a_certificate_of_another_role_names_both(entry: str, tmp_path: Path, keys: Path) -> None:
    call = _entries(tmp_path)[entry]
    want = ROLE_OF[entry]
    other = "producer" if want != "producer" else "store"
    with pytest.raises(dafka.ConfigError) as e:
        call(cert=keys / f"{other}.key_secret", trust=keys)
    msg = str(e.value)
    assert f"is a {other} certificate" in msg and f"this node is a {want}" in msg, msg
    assert f"--role {want}" in msg, msg


@pytest.mark.parametrize("entry", list(ROLE_OF))
def test_a_public_certificate_is_not_a_secret_one(entry: str, tmp_path: Path, keys: Path) -> None:
    call = _entries(tmp_path)[entry]
    with pytest.raises(dafka.SecurityError, match="key_secret"):
        call(cert=keys / f"{ROLE_OF[entry]}.key", trust=keys)


@pytest.mark.parametrize("entry", [e for e in ROLE_OF if e != "Tower"])
def test_endpoints_match_the_mode(entry: str, tmp_path: Path, keys: Path) -> None:
    call = _entries(tmp_path)[entry]
    secure = {"cert": keys / f"{ROLE_OF[entry]}.key_secret", "trust": keys}
    # A plaintext node given a secure tower (or peer), and a secure node a plaintext one.
    with pytest.raises(dafka.ConfigError, match="carries a CURVE key"):
        call(towers=[KEYED_TOWER])
    with pytest.raises(dafka.ConfigError, match="carries a CURVE key"):
        call(peers=[f"tcp://127.0.0.1:7000;curve={KEY}"])
    with pytest.raises(dafka.ConfigError, match="has no key"):
        call(towers=[PLAIN_TOWER], **secure)
    with pytest.raises(dafka.ConfigError, match="has no key"):
        call(peers=["tcp://127.0.0.1:7000"], **secure)
    # A malformed key after ;curve= is refused however the node runs.
    with pytest.raises(dafka.DafkaError, match="curve"):
        call(towers=[PLAIN_TOWER + ";curve=short"], **secure)


def test_a_certificate_must_allow_the_nodes_topics(tmp_path: Path, keys: Path) -> None:
    """Checked by the node as it starts: it does not start. The node thread's error
    keeps its class across the thread (issue 37): a ``ConfigError``, as when it is
    checked in the caller's thread (it was a ``NodeError`` holding its text)."""
    dafka.keygen(keys, "narrow-writer", role="producer", topics=["logs.*"])
    dafka.keygen(keys, "narrow-store", role="store", topics=["logs.*"])
    secure = {"towers": [KEYED_TOWER], "trust": keys}
    with pytest.raises(dafka.ConfigError, match="allows topics"):
        dafka.Producer("metrics", cert=keys / "narrow-writer.key_secret", **secure)
    with pytest.raises(dafka.ConfigError, match="every topic"):
        dafka.Store(tmp_path / "s", cert=keys / "narrow-store.key_secret", **secure)


def test_check_node_takes_a_secure_configuration(keys: Path) -> None:
    """Paths as ``str`` or ``os.PathLike``; ``role`` says whose certificate it is."""
    for role in ("producer", "consumer", "store", "tower"):
        secret = keys / f"{role}.key_secret"
        _native.check_node(towers=[KEYED_TOWER], cert=secret, trust=keys, role=role)
        _native.check_node(towers=[KEYED_TOWER], cert=str(secret), trust=os.fspath(keys), role=role)
    _native.check_node(towers=[KEYED_TOWER], cert=keys / "consumer.key_secret", trust=keys)
    with pytest.raises(dafka.ConfigError, match="unknown role"):
        _native.check_node(role="admin")
    with pytest.raises(TypeError):
        _native.check_node(cert=42, trust=keys)  # type: ignore[arg-type]


def test_the_defaults_are_plaintext() -> None:
    for entry in ROLE_OF:
        assert _native.DEFAULTS[entry]["cert"] is None
        assert _native.DEFAULTS[entry]["trust"] is None
    assert _native.DEFAULTS["check_node"]["role"] == "consumer"


# --- the CLI ------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["produce", "consume", "offsets"])
def test_cli_flags_go_together(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main([command, "t", "--cert", "x.key_secret"])
    assert e.value.code == 2
    assert "--cert and --trust go together" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main([command, "t", "--trust", "dir"])
    assert e.value.code == 2


@pytest.mark.parametrize(
    ("command", "role"), [("produce", "producer"), ("consume", "consumer"), ("offsets", "consumer")]
)
def test_cli_passes_the_pair_to_the_node(
    command: str, role: str, tmp_path: Path, keys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file and a certificate of another role exit 1 naming them; a keyless
    tower with a valid pair is refused (the node got both)."""
    missing = tmp_path / "gone.key_secret"
    argv = [command, "t", "--tower", KEYED_TOWER, "--trust", str(keys)]
    assert cli.main([*argv, "--cert", str(missing)]) == 1
    assert str(missing) in capsys.readouterr().err
    other = "store"
    assert cli.main([*argv, "--cert", str(keys / f"{other}.key_secret")]) == 1
    err = capsys.readouterr().err
    assert f"is a {other} certificate" in err and f"this node is a {role}" in err, err
    plain = [command, "t", "--cert", str(keys / f"{role}.key_secret"), "--trust", str(keys)]
    assert cli.main(plain) == 1  # the default tower has no key
    assert "has no key" in capsys.readouterr().err


def test_cli_help_shows_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("produce", "consume", "offsets"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert "--cert FILE" in out and "--trust DIR" in out, command
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    assert "--cert" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "plaintext" in capsys.readouterr().out


def test_native_commands_take_the_flags(
    tmp_path: Path, keys: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``dafka store``/``dafka tower``: one flag alone is a usage error (2); a
    certificate of another role stops the start (1), naming both roles."""
    assert _native.run_store_cli(["--cert", "x.key_secret"]) == 2
    assert "without a trust" in capfd.readouterr().err
    assert _native.run_tower_cli(["--trust", str(keys)]) == 2
    assert "without a cert" in capfd.readouterr().err
    loop = ["--beacon-in", "tcp://127.0.0.1:0", "--beacon-out", "tcp://127.0.0.1:0"]
    code = _native.run_tower_cli(
        [*loop, "--cert", str(keys / "store.key_secret"), "--trust", str(keys)]
    )
    assert code == 1
    err = capfd.readouterr().err
    assert "is a store certificate" in err and "this node is a tower" in err, err
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "tower.toml").write_text('[security]\ncert = "gone.key_secret"\ntrust = "keys"\n')
    code = _native.run_tower_cli([*loop, "--config", str(conf / "tower.toml")])
    assert code == 1
    # Relative to the config file's directory.
    assert str(conf / "gone.key_secret") in capfd.readouterr().err


# --- Spark --------------------------------------------------------------------------


def test_spark_endpoint_lists_keep_keys() -> None:
    from dafka.spark._produce import split_endpoints

    a, b = f"tcp://h:5556,5557;curve={KEY}", f"tcp://g:6000;curve={KEY}"
    assert split_endpoints(f"{a},{b}") == [a, b]
    assert split_endpoints(f"{a};{b}") == [a, b]
    assert split_endpoints(f"{a} tcp://x:1,2") == [a, "tcp://x:1,2"]


def test_spark_producer_settings_check_the_pair_on_the_driver(keys: Path) -> None:
    pytest.importorskip("pyspark")
    from dafka.spark import ProducerSettings

    secret = str(keys / "producer.key_secret")
    with pytest.raises(dafka.ConfigError, match="pass both"):
        ProducerSettings("t", towers=[KEYED_TOWER], cert=secret)
    with pytest.raises(dafka.ConfigError, match="this node is a producer"):
        ProducerSettings(
            "t", towers=[KEYED_TOWER], cert=str(keys / "consumer.key_secret"), trust=str(keys)
        )
    with pytest.raises(dafka.ConfigError, match="has no key"):
        ProducerSettings("t", towers=[PLAIN_TOWER], cert=secret, trust=str(keys))
    s = ProducerSettings.from_options(
        {"topic": "t", "towers": KEYED_TOWER, "cert": secret, "trust": str(keys)}
    )
    assert (s.towers, s.cert, s.trust) == ([KEYED_TOWER], secret, str(keys))
    assert ProducerSettings.from_options({"topic": "t", "towers": PLAIN_TOWER}).cert is None


def test_spark_read_options_check_the_pair_on_the_driver(keys: Path) -> None:
    pytest.importorskip("pyspark")
    from dafka.spark.datasource import ReadSettings

    opts = {"subscribe": "t", "towers": KEYED_TOWER, "trust": str(keys)}
    # Spark lower-cases option names; these are lower case already.
    s = ReadSettings.from_options({**opts, "cert": str(keys / "consumer.key_secret")})
    assert (s.towers, s.cert, s.trust) == (
        (KEYED_TOWER,),
        str(keys / "consumer.key_secret"),
        str(keys),
    )
    with pytest.raises(dafka.ConfigError, match="this node is a consumer"):
        ReadSettings.from_options({**opts, "cert": str(keys / "producer.key_secret")})
    with pytest.raises(dafka.ConfigError, match="pass both"):
        ReadSettings.from_options({"subscribe": "t", "towers": KEYED_TOWER, "trust": str(keys)})
    with pytest.raises(OSError, match="gone"):
        ReadSettings.from_options({**opts, "cert": str(keys / "gone.key_secret")})
