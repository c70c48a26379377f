"""The `odradek` source and sink on real Spark (local[2]) against a real odradek broker."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Row, SparkSession

# The skipif conditions below are strings, evaluated when each test runs (after the broker
# probe can start): the capability names must be module globals.
from tests.pipeline.helpers import (  # noqa: F401
    DELETE_RECORDS,
    END_TXN,
    OFFSET_COMMIT,
    add_partitions,
    broker_supports,
    create_topic,
    produce,
    produce_values,
    topic,
)

SparkError = (PySparkException, Py4JJavaError)


def read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    return spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
        .options(**options).load()


def rows(df: DataFrame, *cols: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in cols) for r in df.select(*cols).collect())


def test_batch_read_returns_every_record_with_sparks_kafka_schema(
        spark: SparkSession, bootstrap: str) -> None:
    name = create_topic(bootstrap, topic(), partitions=2)
    produce(bootstrap, name, [
        {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 2,
         "timestamp": 1_700_000_000_000 + i, "headers": [("trace", f"t{i}".encode())]}
        for i in range(40)] + [{"key": None, "value": None, "partition": 0}])
    df = read(spark, bootstrap, subscribe=name, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    got = df.collect()
    assert len(got) == 41
    by_key = {bytes(r.key): r for r in got if r.key is not None}
    r7 = by_key[b"k7"]
    assert (bytes(r7.value), r7.topic, r7.partition, r7.timestampType) == (b"v7", name, 1, 0)
    assert int(r7.timestamp.timestamp() * 1000) == 1_700_000_000_007
    assert [(h.key, bytes(h.value)) for h in r7.headers] == [("trace", b"t7")]
    assert sorted(r.offset for r in got if r.partition == 1) == list(range(20))
    tombstone = [r for r in got if r.key is None]
    assert len(tombstone) == 1 and tombstone[0].value is None
    # The row path (no Arrow) yields the same records.
    plain = read(spark, bootstrap, subscribe=name, arrow="false")
    assert rows(plain, "partition", "offset", "value") == rows(df, "partition", "offset", "value")


def test_offsets_json_with_earliest_latest_and_min_partitions(
        spark: SparkSession, bootstrap: str) -> None:
    name = create_topic(bootstrap, topic(), partitions=2)
    for p in (0, 1):
        produce_values(bootstrap, name, [f"p{p}-{i}" for i in range(10)], partition=p)
    df = read(spark, bootstrap, subscribe=name,
              startingOffsets=json.dumps({name: {"0": 3, "1": -2}}),
              endingOffsets=json.dumps({name: {"0": 6, "1": -1}}))
    assert rows(df, "partition", "offset") == [(0, 3), (0, 4), (0, 5)] + [
        (1, i) for i in range(10)]
    split = read(spark, bootstrap, subscribe=name, minPartitions="7")
    assert split.rdd.getNumPartitions() >= 7
    assert split.count() == 20 and split.distinct().count() == 20
    assigned = read(spark, bootstrap, assign=json.dumps({name: [1]}))
    assert {r.partition for r in assigned.collect()} == {1}


def test_ranges_only_gives_each_tasks_offset_range_and_read_ranges_its_records(
        spark: SparkSession, bootstrap: str) -> None:
    from functools import partial

    from odradek.pipeline.options import parse_options
    from odradek.pipeline.range_reader import SPARK_SCHEMA_WITH_HEADERS, read_ranges

    name = create_topic(bootstrap, topic(), partitions=2)
    for p in (0, 1):
        produce(bootstrap, name, [{"value": f"p{p}-{i}".encode(), "partition": p,
                                   "headers": [("h", b"%d" % i)]} for i in range(10)])
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": name,
               "startingOffsets": json.dumps({name: {"0": 3, "1": 0}}),
               "includeHeaders": "true", "rangesOnly": "true", "minPartitions": "3"}
    ranges = spark.read.format("odradek").options(**options).load()
    assert [f.name for f in ranges.schema.fields] == [
        "topic", "partition", "startOffset", "endOffset"]
    got = rows(ranges, "partition", "startOffset", "endOffset")
    assert got[0] == (0, 3, 10) and sorted({r[0] for r in got}) == [0, 1]
    assert sum(e - s for _, s, e in got) == 17  # split for minPartitions, nothing twice
    # the ranges' records, read in the tasks, are the records the source gives
    records = ranges.mapInArrow(partial(read_ranges, parse_options(options, streaming=False)),
                                SPARK_SCHEMA_WITH_HEADERS)
    plain = read(spark, bootstrap, subscribe=name, includeHeaders="true",
                 startingOffsets=json.dumps({name: {"0": 3, "1": 0}}))
    assert rows(records, "partition", "offset", "value", "timestamp") == rows(
        plain, "partition", "offset", "value", "timestamp")
    assert {tuple(h) for r in records.collect() for h in r.headers} == {
        tuple(h) for r in plain.collect() for h in r.headers}


def test_starting_and_ending_by_timestamp(spark: SparkSession, bootstrap: str) -> None:
    name = create_topic(bootstrap, topic(), partitions=1)
    produce(bootstrap, name, [{"value": str(i).encode(), "timestamp": 1_000 * (i + 1)}
                              for i in range(8)])
    df = read(spark, bootstrap, subscribe=name, startingTimestamp="3000",
              endingTimestamp="6000")
    assert [bytes(v) for (v,) in rows(df, "value")] == [b"2", b"3", b"4"]
    by_partition = read(spark, bootstrap, subscribe=name,
                        startingOffsetsByTimestamp=json.dumps({name: {"0": 7000}}))
    assert [bytes(v) for (v,) in rows(by_partition, "value")] == [b"6", b"7"]
    with pytest.raises(SparkError, match="no record at or after the starting timestamp"):
        read(spark, bootstrap, subscribe=name, startingTimestamp="99000").collect()


def test_clear_errors_for_a_missing_topic_an_unreachable_broker_and_bad_options(
        spark: SparkSession, bootstrap: str) -> None:
    with pytest.raises(SparkError, match=r"topic no-such-topic does not exist"):
        read(spark, bootstrap, subscribe="no-such-topic").collect()
    with pytest.raises(SparkError, match=r"cannot reach the brokers at 127\.0\.0\.1:1"):
        read(spark, "127.0.0.1:1", subscribe="x",
             **{"kafka.default.api.timeout.ms": "2000"}).collect()
    with pytest.raises(SparkError, match="exactly one of subscribe"):
        read(spark, bootstrap).collect()


def test_offsets_past_the_end_are_data_loss_unless_allowed(
        spark: SparkSession, bootstrap: str) -> None:
    name = create_topic(bootstrap, topic(), partitions=1)
    produce_values(bootstrap, name, ["a", "b", "c"])
    start = json.dumps({name: {"0": 50}})
    with pytest.raises(SparkError, match=rf"offsets \[3, 50\) of {name}-0"):
        read(spark, bootstrap, subscribe=name, startingOffsets=start).collect()
    skipped = read(spark, bootstrap, subscribe=name, startingOffsets=start,
                   failOnDataLoss="false")
    assert skipped.count() == 3


@pytest.mark.skipif("not broker_supports(DELETE_RECORDS)",
                    reason="the broker does not support DeleteRecords (api key 21) yet")
def test_offsets_lost_to_retention_fail_with_the_lost_range(
        spark: SparkSession, bootstrap: str) -> None:
    from confluent_kafka import TopicPartition

    name = create_topic(bootstrap, topic(), partitions=1)
    produce_values(bootstrap, name, [str(i) for i in range(10)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_records([TopicPartition(name, 0, 4)]).values():
        f.result(30)
    start = json.dumps({name: {"0": 0}})
    with pytest.raises(SparkError, match=rf"offsets \[0, 4\) of {name}-0"):
        read(spark, bootstrap, subscribe=name, startingOffsets=start).collect()
    rest = read(spark, bootstrap, subscribe=name, startingOffsets=start, failOnDataLoss="false")
    assert sorted(r.offset for r in rest.collect()) == list(range(4, 10))


def _collecting_stream(spark: SparkSession, bootstrap: str, checkpoint: Path,
                       batches: list[list[tuple[int, int]]], **options: str) -> None:
    def collect(df: DataFrame, batch_id: int) -> None:
        batches.append(sorted((r.partition, r.offset) for r in df.collect()))

    stream = spark.readStream.format("odradek") \
        .option("kafka.bootstrap.servers", bootstrap).options(**options).load()
    query = stream.writeStream.foreachBatch(collect) \
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert not query.isActive and query.exception() is None


def test_stream_rate_limit_restart_and_partitions_added_mid_query(
        spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    name = create_topic(bootstrap, topic(), partitions=2)
    for p in (0, 1):
        produce_values(bootstrap, name, [f"{p}-{i}" for i in range(25)], partition=p)
    batches: list[list[tuple[int, int]]] = []
    opts = {"subscribe": name, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "20"}
    _collecting_stream(spark, bootstrap, tmp_path / "ckpt", batches, **opts)
    assert [len(b) for b in batches] == [20, 20, 10]
    assert sorted(x for b in batches for x in b) == [(p, i) for p in (0, 1) for i in range(25)]

    add_partitions(bootstrap, name, 3)
    produce_values(bootstrap, name, ["new"] * 4, partition=2)
    produce_values(bootstrap, name, ["more"] * 3, partition=0)
    batches.clear()
    _collecting_stream(spark, bootstrap, tmp_path / "ckpt", batches, **opts)
    assert sorted(x for b in batches for x in b) == [(0, 25), (0, 26), (0, 27)] + [
        (2, i) for i in range(4)]


def test_streaming_sink_copies_a_topic(spark: SparkSession, bootstrap: str,
                                       tmp_path: Path) -> None:
    src = create_topic(bootstrap, topic(), partitions=2)
    dst = create_topic(bootstrap, topic(), partitions=1)
    produce_values(bootstrap, src, [f"m{i}" for i in range(30)])
    stream = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", src).option("startingOffsets", "earliest").load()
    query = (stream.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", dst).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    out = read(spark, bootstrap, subscribe=dst)
    assert sorted(bytes(v).decode() for (v,) in rows(out, "value")) == sorted(
        f"M{i}" for i in range(30))


def test_batch_sink_writes_keys_values_headers_and_partitions(
        spark: SparkSession, bootstrap: str) -> None:
    name = create_topic(bootstrap, topic(), partitions=3)
    df = spark.createDataFrame(
        [Row(key=f"d{i}", value=f"reading {i}", partition=i % 3,
             headers=[Row(key="src", value=b"test")]) for i in range(12)],
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>")
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", name).mode("append").save()
    back = read(spark, bootstrap, subscribe=name, includeHeaders="true").collect()
    assert sorted((bytes(r.key).decode(), r.partition) for r in back) == sorted(
        (f"d{i}", i % 3) for i in range(12))
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("src", b"test")] for r in back)
    with pytest.raises(SparkError, match="needs a `value` column"):
        spark.createDataFrame([("k",)], "key string").write.format("odradek") \
            .option("kafka.bootstrap.servers", bootstrap).option("topic", name) \
            .mode("append").save()


@pytest.mark.skipif("not broker_supports(OFFSET_COMMIT)",
                    reason="the broker has no consumer groups (OffsetCommit, api key 8) yet")
def test_the_pipelines_group_shows_its_progress_and_lag(
        spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    name = create_topic(bootstrap, topic(), partitions=2)
    produce_values(bootstrap, name, [str(i) for i in range(20)])
    batches: list[list[tuple[int, int]]] = []
    group = f"lag-{name}"
    _collecting_stream(spark, bootstrap, tmp_path / "ckpt", batches, subscribe=name,
                       startingOffsets="earliest", **{"kafka.group.id": group})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0),
                                                   TopicPartition(name, 1)])
    deadline = time.monotonic() + 20
    while True:
        result = admin.list_consumer_group_offsets([request])[group].result(30)
        committed = {tp.partition: tp.offset for tp in result.topic_partitions}
        seen = [x for b in batches for x in b]
        ends = {p: max((o for q, o in seen if q == p), default=-1) + 1 for p in (0, 1)}
        if committed == ends or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert committed == ends and sum(ends.values()) == 20


@pytest.mark.skipif("not broker_supports(END_TXN)",
                    reason="the broker has no transactions (EndTxn, api key 26) yet")
def test_read_committed_hides_aborted_records(spark: SparkSession, bootstrap: str) -> None:
    name = create_topic(bootstrap, topic(), partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{name}"})
    producer.init_transactions(30)
    for values, commit in ((["c1", "c2"], True), (["a1", "a2", "a3"], False), (["c3"], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce(name, v.encode())
        # librdkafka purges records still queued when a transaction aborts: send them first
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    committed = read(spark, bootstrap, subscribe=name,
                     **{"kafka.isolation.level": "read_committed"})
    assert sorted(bytes(v).decode() for (v,) in rows(committed, "value")) == ["c1", "c2", "c3"]
    # Each transaction marker takes an offset, and aborted records too when hidden: the
    # offsets a reader sees have gaps, and each row keeps its own.
    assert rows(committed, "offset") == [(0,), (1,), (7,)]
    everything = read(spark, bootstrap, subscribe=name)
    assert rows(everything, "offset") == [(0,), (1,), (3,), (4,), (5,), (7,)]
