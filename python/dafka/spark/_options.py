"""The ``dafka`` data source's options: which apply where, and how they are checked.

Every option a read or write is given is checked when the read is loaded
(``load()``) and again when it is planned, and when a write is saved or a
streaming write started (``save()`` / ``start()``): an unknown option, one that
applies to another kind of read or write, or a known one with a bad value raises
a ``ValueError`` naming the option and listing the valid ones. No option is
ignored in silence.

Spark passes a few options of its own to a data source: ``checkpointLocation``
and ``queryName`` (given to ``writeStream``, Spark's own business) are accepted;
``path`` and ``paths`` (what ``load(path)``, ``save(path)`` or ``start(path)``
set) are refused, since a dafka read or write has no path: it names topics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dafka.spark._produce import Options, flag, integer, seconds

__all__ = [
    "BATCH_READ",
    "BATCH_WRITE",
    "OPTIONS",
    "READ",
    "STREAM_READ",
    "STREAM_WRITE",
    "check_options",
    "duration_ms",
    "timestamp_ms",
]

BATCH_READ, STREAM_READ = "batch read", "streaming read"
BATCH_WRITE, STREAM_WRITE = "batch write", "streaming write"
#: A read not known yet to be batch or streaming (``load()``: Spark asks the schema
#: before it knows).
READ = "read"
_KINDS = {
    BATCH_READ: {BATCH_READ},
    STREAM_READ: {STREAM_READ},
    BATCH_WRITE: {BATCH_WRITE},
    STREAM_WRITE: {STREAM_WRITE},
    READ: {BATCH_READ, STREAM_READ},
}
_R = frozenset({BATCH_READ, STREAM_READ})
_W = frozenset({BATCH_WRITE, STREAM_WRITE})
_RW = _R | _W

Check = Callable[[str, str], object]


def _any(_name: str, _value: str) -> None:
    """Any string (endpoints, paths and the like are checked where they are used)."""


def _nonempty(name: str, value: str) -> None:
    if not value.strip():
        raise ValueError(f"option {name} must not be empty")


def _seconds(name: str, value: str) -> None:
    seconds({name: value}, name, 1.0)


def _integer(least: int) -> Check:
    def check(name: str, value: str) -> None:
        integer({name: value}, name, least, least=least)

    return check


def _flag(name: str, value: str) -> None:
    flag({name: value}, name, False)


def _choice(*choices: str) -> Check:
    def check(name: str, value: str) -> None:
        if value.lower() not in choices:
            raise ValueError(f"option {name} must be one of {', '.join(choices)}, got {value!r}")

    return check


def _pattern(name: str, value: str) -> None:
    try:
        re.compile(value)
    except re.error as e:
        raise ValueError(f"option {name} must be a regular expression: {e}") from None


def timestamp_ms(name: str, value: str) -> int:
    """A time option: milliseconds since the epoch, an integer >= 0 (as Kafka's)."""
    try:
        ms = int(value.strip())
    except ValueError:
        raise ValueError(
            f"option {name} must be a time in milliseconds since the epoch (an integer), "
            f"got {value!r}"
        ) from None
    if ms < 0:
        raise ValueError(f"option {name} must be >= 0 ms, got {ms}")
    return ms


_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def duration_ms(name: str, value: str) -> float:
    """A duration as Spark writes them (``JavaUtils.timeStringAsMs``): a number with
    a unit, ``us``, ``ms``, ``s``, ``m``/``min``, ``h`` or ``d``; a bare number is
    milliseconds. More than 0."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", value.lower())
    if m is None or m.group(2) not in ("", *_UNITS_MS):
        raise ValueError(
            f"option {name} must be a duration such as 30s, 15m or 500ms (a bare number is "
            f"milliseconds), got {value!r}"
        )
    ms = float(m.group(1)) * _UNITS_MS.get(m.group(2), 1)
    if not ms > 0:
        raise ValueError(f"option {name} must be longer than 0, got {value!r}")
    return ms


def _timestamp(name: str, value: str) -> None:
    timestamp_ms(name, value)


def _duration(name: str, value: str) -> None:
    duration_ms(name, value)


def _json_object(name: str, value: str) -> None:
    try:
        d = json.loads(value)
    except json.JSONDecodeError as e:
        raise ValueError(f"option {name} must be a JSON object: {e}") from None
    if not isinstance(d, dict):
        raise ValueError(f"option {name} must be a JSON object, got {value!r}")


@dataclass(frozen=True)
class Opt:
    """One option: its name as documented, where it applies, its value check."""

    name: str
    kinds: frozenset[str]
    check: Check = _any


#: Every option of the ``dafka`` data source (docs/spark.md, "Options"). Offsets
#: options are parsed (and checked in full) by ``_read_settings.parse_offsets``.
OPTIONS: tuple[Opt, ...] = (
    # Reads.
    Opt("subscribe", _R, _nonempty),
    Opt("subscribePattern", _R, _pattern),
    Opt("startingOffsets", _R, _any),
    Opt("startingTimestamp", _R, _timestamp),
    Opt("startingOffsetsByTimestamp", _R, _json_object),
    Opt("startingOffsetsByTimestampStrategy", _R, _choice("latest", "error")),
    Opt("endingOffsets", frozenset({BATCH_READ}), _any),
    Opt("endingTimestamp", frozenset({BATCH_READ}), _timestamp),
    Opt("endingOffsetsByTimestamp", frozenset({BATCH_READ}), _json_object),
    Opt("includeHeaders", _R, _flag),
    Opt("minPartitions", _R, _integer(1)),
    Opt("maxOffsetsPerTrigger", frozenset({STREAM_READ}), _integer(1)),
    Opt("minOffsetsPerTrigger", frozenset({STREAM_READ}), _integer(1)),
    Opt("maxTriggerDelay", frozenset({STREAM_READ}), _duration),
    Opt("failOnDataLoss", _R, _flag),
    Opt("fetchTimeout", _R, _seconds),
    Opt("headsTimeout", _R, _seconds),
    Opt("headsSettle", _R, _seconds),
    Opt("maxRecordsPerTask", _R, _integer(1)),
    Opt("minRecordsPerTask", _R, _integer(1)),
    Opt("forgetPartitionsAfter", frozenset({STREAM_READ}), _seconds),
    # Both.
    Opt("towers", _RW, _any),
    Opt("peers", _RW, _any),
    Opt("wire", _RW, _choice("rfc", "zproto")),
    Opt("beaconInterval", _RW, _seconds),
    Opt("bind", _RW, _nonempty),
    Opt("advertiseHost", _RW, _any),
    Opt("cert", _RW, _any),
    Opt("trust", _RW, _any),
    # Writes.
    Opt("topic", _W, _nonempty),
    Opt("minAcks", _W, _integer(0)),
    Opt("flushTimeout", _W, _seconds),
    Opt("beaconTimeout", _W, _seconds),
    Opt("recordBatches", _W, _flag),
    Opt("writeId", frozenset({BATCH_WRITE}), _nonempty),
    Opt("readCert", frozenset({STREAM_WRITE}), _nonempty),
    # Spark's own, given to writeStream for Spark's use.
    Opt("checkpointLocation", frozenset({STREAM_WRITE})),
    Opt("queryName", frozenset({STREAM_WRITE})),
)
_BY_KEY = {o.name.lower(): o for o in OPTIONS}

#: Options that are gone or never were, with what to do instead.
_REFUSED = {
    "path": "a dafka read or write has no path: call load(), save() and start() without "
    "one, and name topics with option('subscribe', ...) or option('topic', ...)",
    "paths": "a dafka read has no paths: call load() without them, and name topics with "
    "option('subscribe', ...)",
    "reuseproducer": "the sink writes one dafka partition per Spark partition and write "
    "(streaming: per query), so that a retried task rewrites the same offsets "
    "(exactly-once); there is no producer to reuse across tasks",
}


def valid(kind: str) -> list[str]:
    """The options that apply to ``kind``, sorted."""
    kinds = _KINDS[kind]
    return sorted(o.name for o in OPTIONS if o.kinds & kinds)


def _where(o: Opt) -> str:
    names = sorted(o.kinds)
    if o.kinds == _R:
        return "reads"
    if o.kinds == _W:
        return "writes"
    return " and ".join(f"{n}s" for n in names)


def check_options(options: Mapping[str, str], kind: str) -> Options:
    """Checks every option for ``kind`` (``BATCH_READ``, ``STREAM_READ``, ``READ``,
    ``BATCH_WRITE`` or ``STREAM_WRITE``); returns them as :class:`Options`. Raises
    ``ValueError`` naming the first bad option and listing the valid ones."""
    opts = Options(options)
    kinds = _KINDS[kind]
    for key in sorted(opts):
        value = opts[key]
        o = _BY_KEY.get(key)
        if key in _REFUSED:
            name = "reuseProducer" if key == "reuseproducer" else key
            raise ValueError(f"option {name} is not a dafka option: {_REFUSED[key]}")
        if o is None:
            raise ValueError(
                f"unknown option {key!r} for a dafka {kind}; valid options (any case): "
                f"{', '.join(valid(kind))}"
            )
        if not o.kinds & kinds:
            raise ValueError(
                f"option {o.name} applies to {_where(o)}, not to a dafka {kind}; valid "
                f"options (any case): {', '.join(valid(kind))}"
            )
        o.check(o.name, value)
    return opts
