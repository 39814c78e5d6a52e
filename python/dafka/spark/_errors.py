"""The Spark layer words its own errors.

The core (and :class:`dafka.spark.ProducerSettings`, a Python API too) names the
Python keywords a setting was given by (``advertise_host``, ``beacon_timeout``,
``cert=``); a Spark user wrote data-source options (``advertiseHost``,
``beaconTimeout``, ``option("cert", ...)``). :func:`as_options` re-raises an error
of a check made on options with the keywords replaced by the options' names, as
the same exception type (a caller catching :class:`dafka.ConfigError` or
``ValueError`` still does), chained to the original. The core needs to know
nothing of Spark.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

#: Python keyword -> the data-source option that sets it.
KEYWORD_OPTIONS: Mapping[str, str] = {
    "advertise_host": "advertiseHost",
    "beacon_interval": "beaconInterval",
    "beacon_timeout": "beaconTimeout",
    "connect_wait": "connectWait",
    "fail_on_data_loss": "failOnDataLoss",
    "fail_on_loss": "failOnDataLoss",
    "fetch_timeout": "fetchTimeout",
    "flush_timeout": "flushTimeout",
    "heads_settle": "headsSettle",
    "heads_timeout": "headsTimeout",
    "include_headers": "includeHeaders",
    "max_records_per_task": "maxRecordsPerTask",
    "min_acks": "minAcks",
    "min_partitions": "minPartitions",
    "min_records_per_task": "minRecordsPerTask",
    "record_batches": "recordBatches",
}

_WORD = re.compile(r"\b([a-z]+(?:_[a-z]+)+)\b(=)?|\b(cert|trust|bind|wire|towers|peers|topic)=")


def spark_wording(text: str, renamed: Mapping[str, str] | None = None) -> str:
    """``text`` with Python keywords (``beacon_timeout``, ``cert=``) replaced by
    the data-source options that set them (``option beaconTimeout``,
    ``option cert``); ``renamed`` maps a keyword to another option (a check of
    ``readCert`` made as ``cert``)."""
    names = {**KEYWORD_OPTIONS, **(renamed or {})}

    def word(m: re.Match[str]) -> str:
        keyword = m.group(1) or m.group(3)
        option = names.get(keyword)
        if option is None:
            if m.group(3) is None:
                return m.group(0)
            option = keyword
        return f"option {option}"

    return _WORD.sub(word, text)


@contextmanager
def as_options(renamed: Mapping[str, str] | None = None) -> Iterator[None]:
    """Checks of data-source options: a ``ValueError`` (``ConfigError`` included)
    raised inside names the options, not the Python keywords (see
    :func:`spark_wording`)."""
    try:
        yield
    except ValueError as e:
        text = str(e)
        worded = spark_wording(text, renamed)
        if worded == text:
            raise
        try:
            again = type(e)(worded)
        except Exception:  # an exception type that takes other arguments
            again = ValueError(worded)
        raise again from e


@contextmanager
def as_read() -> Iterator[None]:
    """A read's errors (:class:`dafka.DataLossError`, :class:`dafka.FetchTimeoutError`)
    name the data-source options (``option failOnDataLoss``), not the keywords of
    ``fetch_ranges``: the same exception type, without the original (Spark prints a
    task's whole traceback, which would name the keyword again)."""
    from dafka.exceptions import DafkaError

    try:
        yield
    except DafkaError as e:
        text = str(e)
        worded = spark_wording(text)
        if worded == text:
            raise
        try:
            again = type(e)(worded)
        except Exception:  # an exception type that takes other arguments
            raise e from None
        raise again from None
