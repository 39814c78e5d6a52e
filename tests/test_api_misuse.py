"""Python-layer arguments of the wrong type or value: ``dafka.Log`` topics and values,
``dafka.aio`` timeouts, buffer-full messages and closed consumers, and the numeric
flags of the ``dafka`` command line. Each is a clear error that says what to pass."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path

import pytest

import dafka
from dafka import Consumer, Producer, aio, cli

pytestmark = pytest.mark.timeout(60)

P = "85E3C6EBDC7B4156AD9C43611EBC09CE"


def test_log_topic_of_wrong_type_is_a_type_error(tmp_path: Path) -> None:
    with dafka.Log(tmp_path) as log:
        log.append("t", P, 0, b"a")
        calls = [
            lambda t: log.append(t, P, 1, b"x"),
            lambda t: log.append_many(t, P, 1, [b"x"]),
            lambda t: log.read(t, P, 0),
            lambda t: log.partitions(t),
            lambda t: log.next_offset(t, P),
            lambda t: log.first_offset(t, P),
            lambda t: log.durable_next(t, P),
            lambda t: log.offset_for_time(t, P, 0),
        ]
        for call in calls:
            with pytest.raises(TypeError, match=r"^topic must be str or bytes, got int$"):
                call(5)
        for call in calls[:3]:
            with pytest.raises(TypeError, match=r"topic must be str or bytes, got NoneType"):
                call(None)
        # None still means every topic for the listing.
        assert (
            [p.topic for p in log.partitions(None)] == ["t"] == [p.topic for p in log.partitions()]
        )
        assert log.next_offset(b"t", P) == 1


def test_log_append_many_wants_an_iterable_and_values_may_be_bytes_like(tmp_path: Path) -> None:
    with dafka.Log(tmp_path) as log:
        for one in (b"abc", "abc", bytearray(b"abc"), memoryview(b"abc")):
            with pytest.raises(TypeError, match=r"iterable of values, e\.g\..*use append\(\)"):
                log.append_many("t", P, 0, one)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"iterable of values.*got int"):
            log.append_many("t", P, 0, 5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"encode it first"):
            log.append("t", P, 0, "text")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"bytes-like object .* got int"):
            log.append("t", P, 0, 5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"value 1\).* got NoneType"):
            log.append_many("t", P, 0, [b"a", None])  # type: ignore[list-item]
        assert log.next_offset("t", P) is None, "a refused batch stores nothing"
        # Any bytes-like value is taken, as Producer.send takes it.
        log.append("t", P, 0, bytearray(b"ba"))
        log.append("t", P, 1, memoryview(b"xmvx")[1:3])
        log.append_many("t", P, 2, (v for v in [memoryview(b"m"), b"b", bytearray(b"y")]))
        assert [r.value for r in log.read("t", P, 0)] == [b"ba", b"mv", b"m", b"b", b"y"]


def test_aio_timeout_of_wrong_type_is_a_type_error_and_values_show_as_repr() -> None:
    async def main() -> None:
        with Consumer(["aio-misuse"]) as c:
            with pytest.raises(TypeError, match=r"timeout must be a number .* got str '1'"):
                await aio.poll_many(c, 10, "1")  # type: ignore[arg-type]
            with pytest.raises(ValueError, match=r">= 0 or None, got -1$"):
                await aio.poll_many(c, 10, -1)
            with pytest.raises(ValueError, match=r"got nan$"):
                await aio.poll_many(c, 10, float("nan"))
            assert await aio.poll_many(c, 10, 0) == []

    asyncio.run(main())


def test_aio_send_buffer_full_reports_the_whole_wait() -> None:
    async def main() -> str:
        with Producer(
            "aio-misuse", max_unacked_bytes=10, close_timeout=0
        ) as p:  # no store: nothing ACKs
            await aio.send(p, b"x" * 10)
            with pytest.raises(dafka.BufferFullError) as e:
                await aio.send(p, b"y", timeout=0.5)
            return str(e.value)

    message = asyncio.run(main())
    waited = re.search(r"after waiting ([0-9.]+)s", message)
    assert waited is not None, message
    # At least the timeout (the deadline passed); how much more is the machine's.
    assert float(waited.group(1)) >= 0.45, message
    assert "max_unacked_bytes=10" in message


def test_async_for_over_a_closed_consumer_ends_as_for_does() -> None:
    c = Consumer(["aio-misuse"])
    c.close()
    assert list(c) == [], "a sync for loop over a closed consumer ends"

    async def main() -> None:
        async with asyncio.timeout(10):
            assert [r async for r in aio.records(c)] == []
            # Closed while an async for waits: it ends too.
            with Consumer(["aio-misuse"]) as live:
                loop = asyncio.get_running_loop()
                loop.call_later(0.3, live.close)
                assert [r async for r in aio.records(live)] == []

    asyncio.run(main())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["log", "dump", "LOG", "t", P, "--from", "-1"], r"--from: must be an offset from 0"),
        (["log", "dump", "LOG", "t", P, "--from", "2" * 25], r"--from: must be an offset"),
        (["log", "dump", "LOG", "t", P, "--count", "-1"], r"--count: must be a count >= 0"),
        (["log", "dump", "LOG", "t", P, "--from", "x"], r"--from: .* got 'x'"),
        (["consume", "t", "--count", "-5"], r"--count: must be a count >= 0"),
        (["consume", "t", "--timeout", "-1"], r"--timeout: must be a finite number of seconds"),
        (["offsets", "t", "--timeout", "nan"], r"--timeout: must be a finite number"),
        (["produce", "t", "--min-acks", "-1"], r"--min-acks: must be a number of stores"),
        (["produce", "t", "--min-acks", "1025"], r"--min-acks: .* from 0 to 1024"),
        (["produce", "t", "--linger", "inf"], r"--linger: must be a finite number"),
        (["demo", "--records", "-3"], r"--records: must be a count >= 0"),
        (["demo", "--timeout", "-1"], r"--timeout: must be a finite number"),
        (["wire", "encode", "FETCH", "--topic", "t", "--sequence", "-1"], r"--sequence: must be"),
        (["wire", "encode", "FETCH", "--topic", "t", "--count", str(2**32)], r"to 4294967295"),
    ],
)
def test_cli_invalid_numeric_flags_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage: dafka" in err
    assert re.search(message, err), err
    assert "Traceback" not in err


def test_cli_log_dump_takes_valid_numeric_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with dafka.Log(tmp_path) as log:
        log.append_many("t", P, 0, [b"a", b"b", b"c"])
    assert cli.main(["log", "dump", str(tmp_path), "t", P, "--from", "1", "--count", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    fields = [line.split("\t") for line in out]
    assert [(f[0], f[2:]) for f in fields] == [("1", ["-", "-", "-", "b"])]


@pytest.mark.parametrize("cls", [dafka.Producer, dafka.Consumer, dafka.Store, dafka.Tower])
def test_every_constructor_argument_is_documented(cls: type) -> None:
    """`help(dafka.Producer)` lists each keyword argument with its default: a new
    argument without a line in the docstring fails here."""
    sig = inspect.signature(cls)
    doc = cls.__doc__ or ""
    missing = [name for name in sig.parameters if not re.search(rf"^{name} : ", doc, re.M)]
    assert not missing, f"{cls.__name__}: undocumented arguments {missing}"


def test_tower_beacon_out_on_another_host_is_a_config_error() -> None:
    """``Tower.endpoint`` names both ports by ``beacon_in``'s host: a ``beacon_out``
    bound elsewhere is refused before anything binds, saying what to do."""
    with pytest.raises(dafka.ConfigError, match="same host"):
        dafka.Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://10.0.0.2:0")
