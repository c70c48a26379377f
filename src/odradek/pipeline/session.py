"""A SparkSession set up the way the pipeline needs it; settings whose absence is silent harm.

See FINDINGS.md "Spark → Iceberg": without UTC and TIMESTAMP_MICROS, partition days and
timestamps land wrong without any error.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
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


# Spark's log4j2 defaults print WARN and above to stderr from the first second (its
# profile banner, the loopback hostname, the missing native Hadoop library, …): in a
# command's output they bury its own progress. Ours logs errors only.
QUIET_LOG4J2 = """\
# WARN at the root, as PySpark sets it anyway (at any other level it says so on stderr);
# build_session lowers it to ERROR once the session is up
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
"""


def quiet_log4j2() -> Path:
    """A log4j2 configuration for the driver JVM that logs errors only."""
    path = Path(tempfile.gettempdir()) / f"odradek-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != QUIET_LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(QUIET_LOG4J2)
        tmp.replace(path)
    return path


def build_session(master: str = "local[2]", app_name: str = "odradek-pipeline",
                  shuffle_partitions: int = 2, warehouse: Path | None = None,
                  extra: dict[str, str] | None = None, quiet: bool = True) -> SparkSession:
    """A local session with the pipeline's settings and the `odradek` source registered.

    `quiet`: Spark logs errors only, from the JVM's start (setLogLevel comes too late for
    the start-up warnings).
    """
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
               .config("spark.driver.memory", "2g")
               # a Python worker (the data source's planner among them) that starts slowly
               # on a busy machine failed the query after Spark's 15 s: "Python worker
               # failed to connect back"
               .config("spark.python.authenticate.socketTimeout", "120s")
               # The lake's partitioned Parquet writes keep a writer per partition open
               # instead of sorting each task's rows by partition first (a batch's rows
               # fall in one or two topic/day partitions; the sort cost a second a batch).
               .config("spark.sql.maxConcurrentOutputFileWriters", "16"))
    if quiet:
        builder = builder.config("spark.driver.extraJavaOptions",
                                 f"-Dlog4j2.configurationFile=file:{quiet_log4j2()}")
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
