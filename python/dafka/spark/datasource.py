"""The ``dafka`` Python data source (``spark.dataSource.register``).

Writing (batch ``df.write`` and streaming ``writeStream``, exactly-once: see
:mod:`dafka.spark._sink`) and reading (batch ``spark.read`` of a bounded range,
streaming ``readStream``). Every option, its default and meaning, in one table:
``docs/spark.md``, "Options"; which option applies where, and how each is checked:
:mod:`dafka.spark._options`. The driver asks stores for heads (GET-HEADS); every
executor task reads its ``[start, end)`` range straight from stores (FETCH), not
through the driver. Schema, as Kafka's: ``key binary, value binary, topic string,
partition string, offset long, timestamp timestamp, timestampType int`` and, with
``includeHeaders``, ``headers array<struct<key: string, value: binary>>``; offsets
are JSON ``{partition: next_offset}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

from dafka.spark._options import (  # noqa: F401 (BATCH_READ, STREAM_READ: as before)
    BATCH_READ,
    BATCH_WRITE,
    READ,
    STREAM_READ,
    STREAM_WRITE,
    check_options,
)
from dafka.spark._produce import Options, flag

# The reading side lives in _read_settings (options), _read_plan (offsets,
# planning) and _readers (batch and stream readers); its names stay importable
# from here.
from dafka.spark._read_plan import (  # noqa: F401
    _Reads,
    needs_firsts,
    plan,
    resolve,
    times_to_offsets,
)
from dafka.spark._read_settings import (  # noqa: F401
    ARROW_ROWS,
    EARLIEST,
    LATEST,
    TOPICS_REFRESH,
    OffsetSpec,
    PackedRanges,
    RangePartition,
    ReadSettings,
    TimeSpec,
    arrow_batch,
    parse_offsets,
    parse_partition_json,
    parse_times,
    source_schema,
)
from dafka.spark._readers import DafkaBatchReader, DafkaStreamReader
from dafka.spark._sink import (
    DafkaBatchWriter,
    DafkaCommit,
    DafkaStreamWriter,
    SinkSettings,
    check_write_schema,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


__all__ = ["DafkaCommit", "DafkaDataSource"]


class DafkaDataSource(DataSource):
    """``format("dafka")``: see the module documentation for options."""

    @classmethod
    def name(cls) -> str:
        return "dafka"

    def schema(self) -> StructType:
        # Spark asks for the schema at load(), before it knows whether the read
        # is batch or streaming: the options are checked for any read here, and
        # for the kind of read once it is planned.
        reads = _Reads(self.options, READ)
        return source_schema(reads.settings.include_headers)

    def _check_schema(self, schema: StructType) -> None:
        want = source_schema(flag(Options(self.options), "includeHeaders", False))
        if schema != want:
            raise ValueError(
                f"the dafka source has a fixed schema, {want.simpleString()}, not "
                f"{schema.simpleString()} (as Kafka's, it cannot be given: set includeHeaders "
                "for the headers column)"
            )

    def reader(self, schema: StructType) -> DafkaBatchReader:
        self._check_schema(schema)
        return DafkaBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DafkaStreamReader:
        self._check_schema(schema)
        return DafkaStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DafkaBatchWriter:
        if overwrite:
            # A topic is append-only: nothing already in it can be replaced.
            raise ValueError(
                "dafka topics are append-only: write with mode('append'), not overwrite"
            )
        options = check_options(self.options, BATCH_WRITE)
        columns = check_write_schema(schema, options)
        return DafkaBatchWriter(SinkSettings.from_options(options, columns, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DafkaStreamWriter:
        options = check_options(self.options, STREAM_WRITE)
        columns = check_write_schema(schema, options)
        return DafkaStreamWriter(SinkSettings.from_options(options, columns, streaming=True))
