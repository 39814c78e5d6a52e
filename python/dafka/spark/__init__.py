"""PySpark integration: bulk ingest from DataFrames, UDF encoders, and the
``dafka`` data source (batch and streaming reads and writes).

PySpark, pyarrow and pandas are imported lazily (install the ``dafka[spark]``
extra); this module imports without them.

Producing (see :mod:`dafka.spark._produce` for retry semantics):

- :func:`foreach_partition_writer` → a function for ``df.foreachPartition(fn)``:
  one producer per task (its own partition), flushed until ``min_acks`` stores
  ACKed; a failure raises so Spark retries the task (at-least-once).
  ``ProducerSettings(reuse=True)`` makes the tasks of one Python worker share a
  producer instead (:func:`task_producer`).
- :func:`produce_arrow` → ``mapInArrow`` that hands whole Arrow batches to Rust
  (``Producer.send_buffers``) and returns a DataFrame of per-task
  ``(partition, first_offset, last_offset, count)``.
- :func:`json_value`, :func:`arrow_ipc_udf`, :func:`produce_udf`: encoders and a
  producing UDF.

:func:`run_query` runs a streaming query to its end, starting it again from its
checkpoint when Spark could not start its Python worker in time (a fixed 10 s);
:func:`died_starting` tells that case apart. :func:`local_session` and
:func:`local_cluster` (a tower and a store on 127.0.0.1) are for local runs.

Reading and writing with the data source, after :func:`register` (Kafka's schema,
sink columns and options; its sink is exactly-once, see :mod:`dafka.spark._sink`;
every option in docs/spark.md)::

    dafka.spark.register(spark)
    df.write.format("dafka").option("topic", "t").option("towers", tower).save()
    spark.readStream.format("dafka").option("subscribe", "t").option("towers", tower).load()
"""

from __future__ import annotations

from dafka.exceptions import DeliveryError
from dafka.spark._local import (
    add_cluster_args,
    local_cluster,
    local_session,
    node_options,
    trigger_arg,
)
from dafka.spark._produce import (
    OFFSETS_SCHEMA,
    ProducerSettings,
    TaskResult,
    encode_value,
    produce_arrow_batches,
    produce_rows,
    task_producer,
)
from dafka.spark._query import died_starting, run_query
from dafka.spark._udf import (
    arrow_ipc_udf,
    foreach_partition_writer,
    json_value,
    produce_arrow,
    produce_udf,
    register,
)

__all__ = [
    "OFFSETS_SCHEMA",
    "DeliveryError",
    "ProducerSettings",
    "TaskResult",
    "add_cluster_args",
    "arrow_ipc_udf",
    "died_starting",
    "encode_value",
    "foreach_partition_writer",
    "json_value",
    "local_cluster",
    "local_session",
    "node_options",
    "produce_arrow",
    "produce_arrow_batches",
    "produce_rows",
    "produce_udf",
    "register",
    "run_query",
    "task_producer",
    "trigger_arg",
]
