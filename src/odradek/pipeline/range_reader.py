"""Read one offset range of one partition into Arrow record batches (runs in Spark tasks).

The per-record Python work is what limits the source, so the loop touches each message
only through a few list comprehensions and hands whole columns to Arrow.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import logging
import time
from collections.abc import Iterator
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from odradek.pipeline.offsets import DataLoss, DataLossError, OffsetRange
from odradek.pipeline.options import SourceOptions

log = logging.getLogger(__name__)

# Records a consume() call and an Arrow batch hold. Spark's own Arrow batches default to
# 10 k rows; measured here (bench/pipeline_source.py, A/B) 2 k-20 k cost the same CPU a row
# within noise, 50 k about 0.2 µs a row more in the worker (its lists outgrow the caches).
_CHUNK = 10_000
_HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_UTC = dt.UTC

SPARK_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int")
SPARK_SCHEMA_WITH_HEADERS = SPARK_SCHEMA + ", headers array<struct<key:string,value:binary>>"
# The source's rows with `rangesOnly`: what each task of the batch is to read.
RANGES_SCHEMA = "topic string, partition int, startOffset long, endOffset long"


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow form of Spark's Kafka schema; Spark rejects any other physical type."""
    fields = [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(("headers", _HEADER_TYPE))
    return pa.schema(fields)


def _offsets(msgs: list[Message], n: int) -> pa.Array:
    first, last = msgs[0].offset(), msgs[-1].offset()
    if first is not None and last is not None and last - first == n - 1:
        # No gap (no compaction, no transaction markers): the offsets are a range.
        return pa.array(np.arange(first, last + 1, dtype=np.int64))
    return pa.array(np.fromiter(map(Message.offset, msgs), np.int64, n))


def _same_string(value: str, n: int) -> pa.Array:
    """n copies of one string, built as Arrow buffers (no Python object per row)."""
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(raw * n)])


def _to_batch(msgs: list[Message], topic: str, partition: int, include_headers: bool,
              schema: pa.Schema) -> pa.RecordBatch:
    n = len(msgs)
    # (type, millis) pairs flattened in C: half the cost of two generator passes.
    stamps = np.fromiter(chain.from_iterable(map(Message.timestamp, msgs)), np.int64,
                         2 * n).reshape(n, 2)
    columns: list[pa.Array] = [
        pa.array(list(map(Message.key, msgs)), pa.binary()),
        pa.array(list(map(Message.value, msgs)), pa.binary()),
        _same_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        _offsets(msgs, n),
        pa.array(stamps[:, 1] * 1000, pa.timestamp("us", tz="UTC")),
        # confluent-kafka numbers timestamp types 0 none, 1 create, 2 log append; Kafka's
        # Java client (and so Spark's column) numbers them -1, 0, 1.
        pa.array((stamps[:, 0] - 1).astype(np.int32)),
    ]
    if include_headers:
        columns.append(pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h]
             for h in (_headers(m) for m in msgs)], _HEADER_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _headers(m: Message) -> list[tuple[str, bytes]] | None:
    headers: Any = m.headers()
    return None if headers is None else list(headers)


def _offset(m: Message) -> int:
    offset = m.offset()
    assert offset is not None
    return offset


def _to_rows(msgs: list[Message], include_headers: bool) -> Iterator[tuple[Any, ...]]:
    for m in msgs:
        stamp: Any = m.timestamp()
        kind, millis = stamp
        row: tuple[Any, ...] = (
            m.key(), m.value(), m.topic(), m.partition(), m.offset(),
            dt.datetime.fromtimestamp(millis / 1000, _UTC), kind - 1)
        if include_headers:
            row += (_headers(m),)
        yield row


class RangeReader:
    """Consumes [start, end) of one partition; stops at `end` whatever lies beyond it."""

    def __init__(self, options: SourceOptions, rng: OffsetRange) -> None:
        self.options = options
        self.range = rng

    def _lost(self, consumer: Consumer, position: int, reason: str) -> int:
        """Handle records that are gone; returns where reading goes on."""
        tp = TopicPartition(self.range.topic, self.range.partition)
        low, high = consumer.get_watermark_offsets(tp, timeout=30, cached=False)
        if position < low:
            loss = DataLoss(self.range.topic, self.range.partition, position,
                            min(low, self.range.end), reason)
        else:
            loss = DataLoss(self.range.topic, self.range.partition, max(position, high),
                            self.range.end, "the partition ends before them")
        if self.options.fail_on_data_loss:
            raise DataLossError([loss])
        log.warning("skipping lost records: %s", loss.message())
        return max(low, position) if position < low else self.range.end

    def batches(self) -> Iterator[pa.RecordBatch | tuple[Any, ...]]:
        rng, opts = self.range, self.options
        if rng.size <= 0:
            return
        schema = arrow_schema(opts.include_headers)
        consumer = Consumer(opts.consumer_config())
        # Every record is a GC-tracked Message: with the cyclic collector on, its passes over
        # tens of thousands of live messages cost more than reading them (measured 2-3x).
        # Nothing here makes cycles, so the collector rests until the range is read.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
            next_offset = rng.start
            idle_since = time.monotonic()
            while next_offset < rng.end:
                msgs = consumer.consume(min(_CHUNK, rng.end - next_offset), 1.0)
                if not msgs:
                    if time.monotonic() - idle_since > opts.poll_timeout_s:
                        raise TimeoutError(
                            f"no records from {rng.describe()} after {opts.poll_timeout_s:.0f}s "
                            f"(waiting at offset {next_offset}); is the broker reachable?")
                    continue
                idle_since = time.monotonic()
                good = msgs
                done = False
                # (a KafkaError is always true; the unbound method spares a frame a record)
                if any(map(Message.error, msgs)):
                    good = []
                    for m in msgs:
                        err = m.error()
                        if err is None:
                            good.append(m)
                        elif err.code() == KafkaError._PARTITION_EOF:
                            # The end of the log (or, read_committed, the last stable offset).
                            if _offset(m) >= rng.end:
                                done = True
                            else:
                                self._lost(consumer, max(next_offset, _offset(m)),
                                           "the log ends before them")
                                done = True
                        elif err.code() in (KafkaError._AUTO_OFFSET_RESET,
                                            KafkaError.OFFSET_OUT_OF_RANGE):
                            resume = self._lost(consumer, next_offset, "deleted by retention")
                            consumer.seek(TopicPartition(rng.topic, rng.partition, resume))
                            next_offset = resume
                            good = []
                            break
                        else:
                            raise RuntimeError(f"reading {rng.describe()}: {err.str()}")
                if done and not good:
                    break
                if not good:
                    continue
                if _offset(good[-1]) >= rng.end:
                    good = [m for m in good if _offset(m) < rng.end]
                    next_offset = rng.end
                else:
                    next_offset = _offset(good[-1]) + 1
                if good:
                    if opts.arrow:
                        yield _to_batch(good, rng.topic, rng.partition,
                                        opts.include_headers, schema)
                    else:
                        yield from _to_rows(good, opts.include_headers)
                if done:
                    break
                # Aborted transactions and control records leave offsets that are never
                # delivered; the consumer's position tells when the range is done.
                if next_offset < rng.end:
                    pos = consumer.position([TopicPartition(rng.topic, rng.partition)])[0]
                    if pos.offset >= rng.end:
                        break
        finally:
            if gc_was_on:
                gc.enable()
            consumer.close()


def ranges_in(batches: Iterator[pa.RecordBatch]) -> Iterator[OffsetRange]:
    """The offset ranges in Arrow batches of RANGES_SCHEMA rows."""
    for batch in batches:
        for row in batch.to_pylist():
            yield OffsetRange(row["topic"], row["partition"], row["startOffset"],
                              row["endOffset"])


def read_ranges(options: SourceOptions,
                batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A `mapInArrow` function: the records of the ranges it is given (RANGES_SCHEMA), as
    the source reads them (SPARK_SCHEMA, with headers if the options ask)."""
    records = dataclasses.replace(options, arrow=True, ranges_only=False)
    for rng in ranges_in(batches):
        for batch in RangeReader(records, rng).batches():
            assert isinstance(batch, pa.RecordBatch)
            yield batch
