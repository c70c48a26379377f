"""DataFrame → topic, with the columns and options of Spark's Kafka sink.

Columns: `value` (string or binary, required), `key` (string or binary), `topic` (string;
or the `topic` option), `partition` (int), `headers` (array<struct<key string, value binary>>).
Each task has one idempotent producer, so a retried send never writes a record twice;
a task fails if any record is not acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.pipeline.options import OptionError

_PRODUCER_DEFAULTS: dict[str, str | int | bool] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 500_000,
    "compression.type": "lz4",
}


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    producer_params: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def parse(raw: Mapping[str, str], schema: StructType) -> SinkOptions:
        lowered = {k.lower(): v for k, v in raw.items()}
        bootstrap = lowered.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise OptionError("option kafka.bootstrap.servers is required")
        topic = lowered.get("topic")
        names = {f.name.lower(): f for f in schema.fields}
        if "value" not in names:
            raise OptionError("the sink needs a `value` column (string or binary)")
        checks = {
            "value": (StringType, BinaryType), "key": (StringType, BinaryType),
            "topic": (StringType,), "partition": (IntegerType,),
        }
        for name, types in checks.items():
            f = names.get(name)
            if f is not None and not isinstance(f.dataType, types):
                raise OptionError(f"column {name} has type {f.dataType.simpleString()}; the "
                                  f"sink takes {' or '.join(t().simpleString() for t in types)}")
        headers = names.get("headers")
        if headers is not None and not isinstance(headers.dataType, ArrayType):
            raise OptionError("column headers must be array<struct<key:string,value:binary>>")
        if topic is None and "topic" not in names:
            raise OptionError("name the topic: a `topic` column or the topic option")
        params = {k[len("kafka."):]: v for k, v in raw.items()
                  if k.lower().startswith("kafka.") and k.lower() != "kafka.bootstrap.servers"}
        return SinkOptions(bootstrap, topic, params)


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    records: int


def _as_bytes(column: pa.ChunkedArray | pa.Array | None, n: int) -> list[Any]:
    if column is None:
        return [None] * n
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    values: list[Any] = column.to_pylist()
    return values


class _Delivery:
    def __init__(self) -> None:
        self.error: KafkaError | None = None
        self.acked = 0

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            if self.error is None:
                self.error = err
        else:
            self.acked += 1


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row; return the count, or raise if any send failed."""
    conf: dict[str, str | int | bool] = {"bootstrap.servers": options.bootstrap_servers,
                                         **_PRODUCER_DEFAULTS}
    conf.update(options.producer_params)
    producer = Producer(conf)
    delivery = _Delivery()
    sent = 0
    for batch in batches:
        n = batch.num_rows
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def col(name: str, names: dict[str, int] = names,
                batch: pa.RecordBatch = batch) -> pa.Array | None:
            return batch.column(names[name]) if name in names else None

        values = _as_bytes(col("value"), n)
        keys = _as_bytes(col("key"), n)
        topics_col = col("topic")
        topics = topics_col.to_pylist() if topics_col is not None else [options.topic] * n
        parts_col = col("partition")
        parts = parts_col.to_pylist() if parts_col is not None else [None] * n
        headers_col = col("headers")
        headers = headers_col.to_pylist() if headers_col is not None else [None] * n
        for value, key, topic, part, hdrs in zip(values, keys, topics, parts, headers,
                                                 strict=True):
            topic = topic or options.topic
            if topic is None:
                raise ValueError("a row has a null topic and no topic option is set")
            kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": delivery}
            if part is not None:
                kwargs["partition"] = part
            if hdrs:
                kwargs["headers"] = [(h["key"], h["value"]) for h in hdrs]
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            sent += 1
        producer.poll(0)
        if delivery.error is not None:
            break
    remaining = producer.flush(120)
    if delivery.error is not None:
        raise KafkaException(delivery.error)
    if remaining:
        raise TimeoutError(f"{remaining} records were not acknowledged within 120s")
    return sent


class OdradekBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return SinkCommitMessage(write_batches(self.options, iterator))


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return SinkCommitMessage(write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Records are acknowledged by the time write() returns; nothing is left to do.
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None
