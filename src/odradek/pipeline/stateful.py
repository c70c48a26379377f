"""Stateful stream jobs on Spark: per-device windowed statistics and word count.

Kafka Streams keeps a state store with a changelog topic and serves interactive queries;
here Spark keeps the state (RocksDB state store, in the query's checkpoint, readable with
`odradek pipeline state`), and each update goes both to a compacted topic (the table as a
stream: the latest value per key) and to an Iceberg table (the stream as a table).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from odradek.pipeline.fleet import ensure_topics
from odradek.pipeline.lake_catalog import LakeConfig, open_catalog, split_identifier, with_retry
from odradek.pipeline.session import ROCKSDB_PROVIDER

log = logging.getLogger(__name__)

COMPACTED = {"cleanup.policy": "compact"}

# Firmware 1.x sends tenths of a degree as an integer; 2.x sends degrees as a float.
_READING = """CASE type
  WHEN 'climate' THEN CASE WHEN startswith(firmware, '1.')
                           THEN try_variant_get(v, '$.temperature', 'double') / 10
                           ELSE try_variant_get(v, '$.temperature', 'double') END
  WHEN 'camera' THEN try_variant_get(v, '$.confidence', 'double')
  END"""


@dataclass
class StatefulSink:
    """Where a stateful job's updates go: a compacted topic and an Iceberg table."""

    bootstrap: str
    topic: str
    lake: LakeConfig | None
    table: str | None
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    batches: int = 0
    updates: int = 0

    def _table(self, catalog: Catalog, arrow_schema: pa.Schema) -> Table:
        assert self.table is not None
        namespace, _ = split_identifier(self.table)
        try:
            return catalog.load_table(self.table)
        except NoSuchTableError:
            pass
        with contextlib.suppress(NamespaceAlreadyExistsError):
            catalog.create_namespace(namespace)
        return catalog.create_table_if_not_exists(self.table, schema=arrow_schema)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        key = F.concat_ws("|", *[F.col(c).cast("string") for c in self.key_columns])
        value = F.to_json(F.struct(*[F.col(c) for c in self.key_columns + self.value_columns]))
        out = df.select(key.alias("key"), value.alias("value"))
        out.write.format("odradek").option("kafka.bootstrap.servers", self.bootstrap) \
            .option("topic", self.topic).mode("append").save()
        self.batches += 1
        if self.lake is None or self.table is None:
            return
        # A stateful job's update set is small (one row per changed key), so the driver
        # merges it into the table; upsert keeps one row per key, as a compacted topic does.
        rows = df.select(*self.key_columns, *self.value_columns).toArrow()
        self.updates += rows.num_rows
        if rows.num_rows == 0:
            return
        rows = rows.cast(pa.schema([pa.field(f.name, f.type, nullable=True) for f in rows.schema]))
        catalog = open_catalog(self.lake)
        table = with_retry("open stats table", lambda: self._table(catalog, rows.schema))
        with_retry(f"upsert batch {batch_id} into {self.table}",
                   lambda: catalog.load_table(self.table or "").upsert(
                       rows, join_cols=list(self.key_columns),
                       snapshot_properties={"odradek.batch-id": str(batch_id)}))
        del table


def _source(spark: SparkSession, bootstrap: str, options: dict[str, str]) -> DataFrame:
    from odradek.pipeline import register

    register(spark)
    reader = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    return reader.options(**options).load()


def device_stats(spark: SparkSession, bootstrap: str, topic_pattern: str,
                 window: str = "1 minute", watermark: str = "30 seconds",
                 starting_offsets: str = "earliest",
                 max_offsets_per_trigger: int | None = None) -> DataFrame:
    """Per device and event-time window: count, min/max/avg reading, last seen, door opens."""
    options = {"subscribePattern": topic_pattern, "startingOffsets": starting_offsets,
               "kafka.group.id": "odradek-device-stats"}
    if max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    events = (
        _source(spark, bootstrap, options)
        .selectExpr("timestamp AS event_time", "try_parse_json(CAST(value AS STRING)) AS v")
        .where("v IS NOT NULL")
        .selectExpr("event_time", "v",
                    "try_variant_get(v, '$.device_id', 'string') AS device_id",
                    "try_variant_get(v, '$.type', 'string') AS type",
                    "try_variant_get(v, '$.firmware', 'string') AS firmware",
                    "try_variant_get(v, '$.event', 'string') AS event")
        .where("device_id IS NOT NULL")
        .withColumn("reading", F.expr(_READING))
    )
    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window), "device_id", "type")
        .agg(F.count(F.lit(1)).alias("events"),
             F.min("reading").alias("min_reading"),
             F.max("reading").alias("max_reading"),
             F.avg("reading").alias("avg_reading"),
             F.max("event_time").alias("last_seen"),
             F.sum(F.when(F.col("event") == "open", 1).otherwise(0)).alias("door_opens"))
        .select("device_id", "type", F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"), "events", "min_reading",
                "max_reading", "avg_reading", "last_seen", "door_opens")
    )


def word_counts(spark: SparkSession, bootstrap: str, topic: str,
                starting_offsets: str = "earliest") -> DataFrame:
    """Kafka Streams' word count: lines in, the running count of each word out."""
    lines = _source(spark, bootstrap, {"subscribe": topic, "startingOffsets": starting_offsets,
                                       "kafka.group.id": f"odradek-wordcount-{topic}"})
    words = lines.select(F.explode(F.split(F.lower(F.col("value").cast("string")),
                                           r"[^\p{L}\p{N}']+")).alias("word"))
    return words.where("word <> ''").groupBy("word").agg(F.count(F.lit(1)).alias("count"))


def start_stateful(spark: SparkSession, frame: DataFrame, sink: StatefulSink,
                   checkpoint: Path, name: str, available_now: bool = False,
                   interval: str = "2 seconds") -> StreamingQuery:
    """Run a stateful aggregation in update mode into its sink, state in RocksDB."""
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    ensure_topics(sink.bootstrap, partitions=1, topics=[sink.topic], config=COMPACTED)
    writer = (frame.writeStream.outputMode("update").foreachBatch(sink)
              .option("checkpointLocation", str(checkpoint)).queryName(name))
    writer = (writer.trigger(availableNow=True) if available_now
              else writer.trigger(processingTime=interval))
    return writer.start()


def device_stats_sink(bootstrap: str, lake: LakeConfig | None,
                      topic: str = "fleet.device-stats",
                      table: str = "iot.device_stats") -> StatefulSink:
    return StatefulSink(bootstrap, topic, lake, table, ("device_id", "window_start"),
                        ("type", "window_end", "events", "min_reading", "max_reading",
                         "avg_reading", "last_seen", "door_opens"))


def word_count_sink(bootstrap: str, lake: LakeConfig | None, topic: str,
                    table: str = "text.word_counts") -> StatefulSink:
    return StatefulSink(bootstrap, topic, lake, table, ("word",), ("count",))


def read_state(spark: SparkSession, checkpoint: Path, key: str | None = None,
               operator_id: int | None = None, batch_id: int | None = None) -> DataFrame:
    """The live state of a stateful query, from its checkpoint (Spark's state data source).

    `key` matches any key whose JSON form contains it: a device id, a word.
    """
    reader = spark.read.format("statestore")
    if operator_id is not None:
        reader = reader.option("operatorId", str(operator_id))
    if batch_id is not None:
        reader = reader.option("batchId", str(batch_id))
    state = reader.load(str(checkpoint))
    if key is not None:
        state = state.where(F.to_json(F.col("key")).contains(key))
    return state


def state_operators(spark: SparkSession, checkpoint: Path) -> list[dict[str, Any]]:
    rows = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    return [r.asDict(recursive=True) for r in rows]
