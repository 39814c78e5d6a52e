"""DataFrame-level helpers: the foreachPartition writer, the mapInArrow bulk
path, encoder UDFs, a producing UDF, and data-source registration."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from dafka.exceptions import DeliveryError
from dafka.spark._produce import (
    OFFSETS_SCHEMA,
    Encoder,
    ProducerSettings,
    _arrow_schema,
    check_encoder,
    produce_arrow_batches,
    produce_rows,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession


def foreach_partition_writer(
    settings: ProducerSettings,
    *,
    column: str | None = "value",
    encoder: Encoder = "bytes",
    schema: Any = None,
    key: str | None = None,
    timestamp: str | None = None,
) -> Callable[[Iterable[Any]], None]:
    """A function for ``df.foreachPartition(fn)`` (or ``rdd.foreachPartition``):
    each task opens a producer (its own dafka partition), sends ``column`` of every
    row encoded by ``encoder`` (``"bytes"``, ``"str"``, ``"json"``, ``"arrow"`` or a
    function; with ``column=None`` the encoder gets the whole Row), with the ``key``
    column's record keys and the ``timestamp`` column's create times when given,
    flushes until ``settings.min_acks`` stores ACKed, and raises
    :class:`DeliveryError` otherwise so Spark retries the task. A retry is a new
    partition: at-least-once (the data source's sink is exactly-once).

    With ``encoder="arrow"`` pass ``schema`` (``df.schema``, or the struct's type
    when ``column`` names a struct) so that every record carries the DataFrame's
    types; without it each record's types are inferred from its own row."""
    check_encoder(encoder)
    if encoder == "arrow" and schema is not None:
        _arrow_schema(schema)  # a bad schema fails here, on the driver

    def write(rows: Iterable[Any]) -> None:
        produce_rows(
            rows,
            settings,
            column=column,
            encoder=encoder,
            schema=schema,
            key=key,
            timestamp=timestamp,
        )

    return write


def produce_arrow(
    df: DataFrame,
    settings: ProducerSettings,
    *,
    column: str = "value",
    key: str | None = None,
    timestamp: str | None = None,
) -> DataFrame:
    """The columnar bulk path: ``df.mapInArrow`` hands each task's Arrow batches to
    Rust (``Producer.send_buffers``, no Python call per row). ``column`` must be
    binary or string without nulls; ``key`` names a binary or string column of
    record keys (null: no key) and ``timestamp`` a timestamp column (or long ms) of
    record create times (null: when sent). Returns a DataFrame with one row per
    task, ``partition string, first_offset long, last_offset long, count long``;
    nothing runs until an action (e.g. ``.collect()``) is called on it."""
    wanted = {"value": column, "key": key, "timestamp": timestamp}
    for c in wanted.values():
        if c is not None and c not in df.columns:
            raise KeyError(f"no column {c!r} in {df.columns}")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return produce_arrow_batches(
            batches,
            settings,
            column="value",
            key=None if key is None else "key",
            timestamp=None if timestamp is None else "timestamp",
        )

    # Quoted: a name holding a dot is a column of its own, not a struct's field;
    # renamed, as mapInArrow resolves its input columns by plain name.
    picked = [
        "`" + c.replace("`", "``") + f"` AS `{as_}`" for as_, c in wanted.items() if c is not None
    ]
    return df.selectExpr(*picked).mapInArrow(run, OFFSETS_SCHEMA)


def json_value(*cols: str | Column) -> Column:
    """A binary column holding each row's ``cols`` as a JSON object (Spark's own
    ``to_json``, no Python worker involved)."""
    from pyspark.sql import functions as F

    if not cols:
        raise ValueError("json_value needs at least one column")
    return F.to_json(F.struct(*cols)).cast("binary")


def arrow_ipc_udf() -> Callable[..., Column]:
    """An Arrow UDF taking a struct column and returning, per row, that row as a
    one-row Arrow IPC stream (binary): ``df.select(arrow_ipc_udf()(F.struct(...)))``.
    Each record carries the struct's Spark types as Arrow types (a field null in
    every row of a batch keeps its type). Readers decode with
    ``pyarrow.ipc.open_stream(value).read_all()``."""
    import pyarrow as pa
    from pyspark.sql.pandas.functions import arrow_udf

    def to_ipc(rows: pa.Array) -> pa.Array:
        if not pa.types.is_struct(rows.type):
            raise TypeError(f"arrow_ipc_udf takes a struct column (F.struct(...)), got {rows.type}")
        if isinstance(rows, pa.ChunkedArray):
            rows = rows.combine_chunks()
        out = []
        for i in range(len(rows)):
            batch = pa.RecordBatch.from_struct_array(rows.slice(i, 1))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as w:
                w.write_batch(batch)
            out.append(sink.getvalue().to_pybytes())
        return pa.array(out, type=pa.binary())

    # PySpark reads the hints to pick the UDF kind; resolve them here (this module
    # postpones annotations and imports pyarrow lazily).
    to_ipc.__annotations__ = {"rows": pa.Array, "return": pa.Array}
    return arrow_udf("binary")(to_ipc)  # type: ignore[call-overload, no-any-return]


def produce_udf(settings: ProducerSettings) -> Callable[..., Column]:
    """A pandas UDF that produces a binary/string column and returns each value's
    offset (long): ``df.select(produce_udf(s)("value"))``. Each batch is flushed
    until acknowledged before its offsets are returned (a DeliveryError fails the
    task, and Spark retries it). The producer lives as long as the Python worker
    (one partition per worker, shared by the tasks it runs), so offsets are unique
    per worker, not per task; use :func:`produce_arrow` when you need each task's
    partition."""
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql.pandas.functions import pandas_udf

    shared = dataclasses.replace(settings, reuse=True)

    def produce(values: pd.Series) -> pd.Series:
        from dafka.spark._produce import send_arrow, task_producer

        arr = pa.array(values, from_pandas=True)
        if arr.null_count:
            raise ValueError("produce_udf got nulls: filter them first")
        if not (pa.types.is_binary(arr.type) or pa.types.is_string(arr.type)):
            raise TypeError(f"produce_udf takes a binary or string column, got {arr.type}")
        with task_producer(shared) as p:
            got = send_arrow(p, arr)
            left = p.flush(settings.flush_timeout)
            if left:
                raise DeliveryError(
                    f"{left} records of partition {p.address} were not acknowledged within "
                    f"{settings.flush_timeout}s; Spark will retry the task"
                )
        if got is None:
            return pd.Series([], dtype="int64")
        return pd.Series(range(got[0], got[1] + 1), dtype="int64")

    produce.__annotations__ = {"values": pd.Series, "return": pd.Series}
    # Nondeterministic: it has a side effect, and Spark may otherwise evaluate a
    # deterministic UDF twice (e.g. a filter on its result pushed below it),
    # producing every value twice.
    return pandas_udf("long")(produce).asNondeterministic()  # type: ignore[call-overload, no-any-return]


def register(spark: SparkSession) -> None:
    """Registers the ``dafka`` data source with ``spark`` (format ``"dafka"``)."""
    from dafka.spark.datasource import DafkaDataSource

    spark.dataSource.register(DafkaDataSource)
