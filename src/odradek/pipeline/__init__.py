"""The data pipeline on PySpark: the `odradek` data source, the Iceberg lake, stateful jobs.

`register(spark)` makes `spark.read.format("odradek")` and `readStream`/`write`/
`writeStream` with it work in a session. Importing this package does not import Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Register the `odradek` data source with this session (idempotent)."""
    from odradek.pipeline.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
