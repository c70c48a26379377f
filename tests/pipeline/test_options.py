"""The source's options are checked like Spark's Kafka source checks them, before any task."""

from __future__ import annotations

import pytest

from odradek.pipeline.options import OptionError, Subscription, parse_options

BASE = {"kafka.bootstrap.servers": "h:1"}


def test_subscribe_defaults_differ_for_batch_and_streaming() -> None:
    batch = parse_options({**BASE, "subscribe": "a, b"}, streaming=False)
    stream = parse_options({**BASE, "subscribe": "a"}, streaming=True)
    assert batch.topics == ("a", "b") and batch.subscription is Subscription.SUBSCRIBE
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert stream.starting.kind == "latest"
    assert not batch.include_headers and batch.fail_on_data_loss


def test_exactly_one_subscription_is_required() -> None:
    with pytest.raises(OptionError, match="exactly one of subscribe"):
        parse_options(BASE, streaming=False)
    with pytest.raises(OptionError, match="got subscribe, subscribePattern"):
        parse_options({**BASE, "subscribe": "a", "subscribePattern": "a.*"}, streaming=False)


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers is required"):
        parse_options({"subscribe": "a"}, streaming=True)


def test_per_partition_offsets_json_with_earliest_and_latest() -> None:
    o = parse_options({**BASE, "subscribe": "a",
                       "startingOffsets": '{"a": {"0": 5, "1": -2}}',
                       "endingOffsets": '{"a": {"0": 9, "1": -1}}'}, streaming=False)
    assert o.starting.kind == "offsets" and o.starting.per_partition == {"a": {0: 5, 1: -2}}
    assert o.ending.per_partition == {"a": {0: 9, 1: -1}}


def test_offsets_that_make_no_sense_are_refused() -> None:
    with pytest.raises(OptionError, match="cannot be latest"):
        parse_options({**BASE, "subscribe": "a", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(OptionError, match="cannot be earliest"):
        parse_options({**BASE, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'},
                      streaming=False)
    with pytest.raises(OptionError, match="batch queries only"):
        parse_options({**BASE, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="not valid JSON"):
        parse_options({**BASE, "subscribe": "a", "startingOffsets": "{oops"}, streaming=True)


def test_timestamps_take_precedence_over_offsets() -> None:
    o = parse_options({**BASE, "subscribe": "a", "startingOffsets": "earliest",
                       "startingTimestamp": "1700000000000",
                       "endingOffsetsByTimestamp": '{"a": {"0": 1700000001000}}'},
                      streaming=False)
    assert o.starting.kind == "timestamp" and o.starting.timestamp_ms == 1700000000000
    assert o.ending.kind == "timestamps"


def test_assign_pattern_and_kafka_params() -> None:
    o = parse_options({**BASE, "assign": '{"a": [0, 2]}', "kafka.isolation.level":
                       "read_committed", "kafka.client.id": "me"}, streaming=True)
    assert o.assigned == {"a": (0, 2)} and o.read_committed
    assert o.consumer_config()["client.id"] == "me"
    p = parse_options({**BASE, "subscribePattern": r"fleet\..*"}, streaming=True)
    assert p.matches("fleet.door") and not p.matches("other")
    with pytest.raises(OptionError, match=r"auto\.offset\.reset"):
        parse_options({**BASE, "subscribe": "a", "kafka.auto.offset.reset": "earliest"},
                      streaming=True)


def test_group_id_is_stable_and_can_be_named() -> None:
    a = parse_options({**BASE, "subscribe": "a"}, streaming=True)
    b = parse_options({**BASE, "subscribe": "a"}, streaming=True)
    named = parse_options({**BASE, "subscribe": "a", "kafka.group.id": "mine"}, streaming=True)
    prefixed = parse_options({**BASE, "subscribe": "a", "groupIdPrefix": "etl"}, streaming=True)
    assert a.group_id == b.group_id and a.group_id.startswith("spark-kafka-source-")
    assert named.group_id == "mine" and prefixed.group_id.startswith("etl-")


def test_numbers_and_booleans_are_checked() -> None:
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger"):
        parse_options({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, streaming=True)
    with pytest.raises(OptionError, match="true or false"):
        parse_options({**BASE, "subscribe": "a", "failOnDataLoss": "maybe"}, streaming=True)
    o = parse_options({**BASE, "subscribe": "a", "minPartitions": "4",
                       "failOnDataLoss": "false", "includeHeaders": "true"}, streaming=False)
    assert o.min_partitions == 4 and not o.fail_on_data_loss and o.include_headers
