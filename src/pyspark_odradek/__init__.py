"""Spark's static data source discovery: `spark.read.format("odradek")` with no register()."""

from odradek.pipeline.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
