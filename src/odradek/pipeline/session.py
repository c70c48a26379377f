"""A SparkSession set up the way the pipeline needs it; settings whose absence is silent harm.

See FINDINGS.md "Spark → Iceberg": without UTC and TIMESTAMP_MICROS, partition days and
timestamps land wrong without any error.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

ROCKSDB_PROVIDER = (
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")

REQUIRED_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # Spark's own metadata files next to our Parquet would confuse nobody but clutter the lake.
    "spark.sql.sources.commitProtocolClass":
        "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol",
    "spark.hadoop.parquet.enable.summary-metadata": "false",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
}


def build_session(master: str = "local[2]", app_name: str = "odradek-pipeline",
                  shuffle_partitions: int = 2, warehouse: Path | None = None,
                  extra: dict[str, str] | None = None) -> SparkSession:
    """A local session with the pipeline's settings and the `odradek` source registered."""
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # Python workers must run the interpreter that has the pipeline's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from odradek.pipeline import register

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               # Our commands print their own progress; Spark's bars would tear it.
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g"))
    for key, value in {**REQUIRED_CONF, **(extra or {})}.items():
        builder = builder.config(key, value)
    if warehouse is not None:
        builder = builder.config("spark.sql.warehouse.dir", str(warehouse / "spark-warehouse"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def stop_gracefully(query: StreamingQuery, timeout_s: float = 60.0) -> None:
    """Stop a streaming query between two batches, not in the middle of one.

    `stop()` interrupts a running batch (its output is rolled back and replayed on the
    next start, so nothing is lost, but the logs fill with interrupted-job errors).
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and time.monotonic() < deadline:
        try:
            if not query.status.get("isTriggerActive", False):
                break
        except Exception:  # the query ended between the two calls
            break
        time.sleep(0.05)
    if query.isActive:
        query.stop()


@contextlib.contextmanager
def plain_ctrl_c() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt and nothing else while the block runs.

    PySpark's own handler cancels every running Spark job first, which fails the batch
    in flight; the jobs here stop their queries themselves, between batches.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
