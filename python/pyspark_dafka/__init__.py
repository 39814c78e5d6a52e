"""Lets PySpark discover the ``dafka`` data source without ``spark.dataSource.register``:
PySpark (4.x) imports top-level ``pyspark_*`` modules and registers their
``DefaultSource``. The implementation is :mod:`dafka.spark.datasource`."""

from dafka.spark.datasource import DafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
