"""The lake ingest job: topics → `odradek` stream source → `LakeWriter` per micro-batch.

Spark's checkpoint says where to go on. Without one (deleted, or a new machine), the job
starts where the table's own records say the last run stopped, so nothing is read twice
into the table and nothing is skipped.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyiceberg.exceptions import NoSuchTableError
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from odradek.pipeline.avro_values import ValueDecoder
from odradek.pipeline.cluster_view import ClusterView
from odradek.pipeline.lake_catalog import LakeConfig, open_catalog, recorded_offsets
from odradek.pipeline.lake_writer import BatchResult, LakeWriter
from odradek.pipeline.offsets import offsets_to_json
from odradek.pipeline.options import parse_options

log = logging.getLogger(__name__)


@dataclass
class IngestJob:
    bootstrap: str
    table: str
    lake: LakeConfig
    checkpoint: Path
    topics: list[str] = field(default_factory=list)
    topic_pattern: str | None = None
    available_now: bool = False
    trigger_interval: str = "2 seconds"
    max_offsets_per_trigger: int | None = None
    starting_offsets: str = "earliest"
    source_options: dict[str, str] = field(default_factory=dict)
    # Values are Avro records of this writer schema (.avsc) instead of JSON.
    avro_schema: Path | None = None
    confluent_framing: bool = True
    # Values are Confluent-framed Avro, JSON Schema or Protobuf, decoded by schema id
    # through the schema registry at this URL.
    schema_registry: str | None = None

    def group_id(self) -> str:
        return "odradek-lake-" + re.sub(r"[^A-Za-z0-9._-]", "_", self.table)

    def options(self) -> dict[str, str]:
        opts = {"kafka.bootstrap.servers": self.bootstrap, "startingOffsets":
                self.starting_offsets, "kafka.group.id": self.group_id(),
                "failOnDataLoss": "true"}
        if self.topic_pattern:
            opts["subscribePattern"] = self.topic_pattern
        elif self.topics:
            opts["subscribe"] = ",".join(self.topics)
        else:
            raise ValueError("name the topics to ingest (--topic or --topic-pattern)")
        if self.max_offsets_per_trigger:
            opts["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        opts.update(self.source_options)
        return opts


def checkpoint_started(checkpoint: Path) -> bool:
    """Has a query run from this checkpoint (so Spark, not the table, knows the offsets)?"""
    offsets = checkpoint / "offsets"
    return offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())


def resume_offsets(job: IngestJob) -> str | None:
    """startingOffsets JSON from the table's records, for a query without its checkpoint."""
    try:
        table = open_catalog(job.lake).load_table(
            job.table if "." in job.table else f"default.{job.table}")
    except NoSuchTableError:
        return None
    recorded = recorded_offsets(table)
    if not recorded:
        return None
    view = ClusterView(parse_options(job.options(), streaming=True))
    try:
        live = set(view.partitions())
    finally:
        view.close()
    kept = {tp: o for tp, o in recorded.items() if tp in live}
    if not kept:
        return None
    log.info("no checkpoint at %s: resuming %s from the offsets the table recorded",
             job.checkpoint, job.table)
    return json.dumps(offsets_to_json(kept))


def start_ingest(spark: SparkSession, job: IngestJob,
                 on_batch: Callable[[BatchResult], None] | None = None) -> StreamingQuery:
    from odradek.pipeline import register

    register(spark)
    options = job.options()
    if not checkpoint_started(job.checkpoint):
        resumed = resume_offsets(job)
        if resumed is not None:
            options["startingOffsets"] = resumed
    job.checkpoint.mkdir(parents=True, exist_ok=True)
    avro: ValueDecoder | None = None
    if job.avro_schema is not None:
        from odradek.pipeline.avro_values import AvroDecoder, load_schema

        avro = AvroDecoder(load_schema(job.avro_schema), job.confluent_framing)
    elif job.schema_registry is not None:
        from odradek.pipeline.registry_values import FramedDecoder

        avro = FramedDecoder(job.schema_registry)
    # The batches hold offset ranges; the writer's tasks read the records themselves.
    options["rangesOnly"] = "true"
    writer = LakeWriter(job.lake, job.table, job.checkpoint, on_batch=on_batch, avro=avro,
                        source=parse_options(options, streaming=True))
    stream = spark.readStream.format("odradek").options(**options).load()
    query = (stream.writeStream.foreachBatch(writer)
             .option("checkpointLocation", str(job.checkpoint))
             .queryName(_query_name(spark, job)))
    if job.available_now:
        query = query.trigger(availableNow=True)
    else:
        query = query.trigger(processingTime=job.trigger_interval)
    return query.start()


def _query_name(spark: SparkSession, job: IngestJob) -> str:
    """`lake-ingest-<table>`, numbered when another ingest into that table already runs in
    this session (Spark refuses two active queries of one name)."""
    active = {q.name for q in spark.streams.active}
    name = base = f"lake-ingest-{job.table}"
    n = 1
    while name in active:
        n += 1
        name = f"{base}-{n}"
    return name
