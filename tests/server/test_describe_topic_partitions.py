"""DescribeTopicPartitions (75, KIP-966) through kafka-python 3.0's admin client:
cursor paging, the response partition limit, unknown topics, and bad cursors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient

from odradek.protocol.errors import ErrorCode
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.wire import WireClient


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield a
    a.close()


def _pages(admin: KafkaAdminClient, topics: list[str], limit: int) -> list[Any]:
    pages, cursor = [], None
    while True:
        page = admin.describe_topic_partitions(topics, response_partition_limit=limit,
                                               cursor=cursor)
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 20, "the cursor does not advance"


def test_a_client_pages_through_partitions_with_the_cursor(
        broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str) -> None:
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(broker.bootstrap, a, partitions=5)
    create_topic(broker.bootstrap, b, partitions=2)
    pages = _pages(admin, [b, a], limit=3)  # answered in name order, whatever asked
    seen = [(t["name"], p["partition_index"]) for page in pages for t in page["topics"]
            for p in t["partitions"]]
    assert seen == [(a, i) for i in range(5)] + [(b, 0), (b, 1)]
    assert [sum(len(t["partitions"]) for t in p["topics"]) for p in pages] == [3, 3, 1]
    assert pages[0]["next_cursor"] == {"topic_name": a, "partition_index": 3}
    # a page that ends exactly with a topic points at the start of the next one
    [first, *_] = _pages(admin, [a, b], limit=5)
    assert first["next_cursor"] == {"topic_name": b, "partition_index": 0}
    topic = first["topics"][0]
    assert topic["error_code"] == 0 and topic["is_internal"] is False
    assert topic["partitions"][0]["leader_id"] == 1
    assert topic["partitions"][0]["replica_nodes"] == [1] == topic["partitions"][0]["isr_nodes"]


def test_no_named_topics_means_every_topic(broker: BrokerProcess, admin: KafkaAdminClient,
                                           topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    pages = _pages(admin, [], limit=2000)
    names = [t["name"] for page in pages for t in page["topics"]]
    assert topic_name in names and names == sorted(names)


def test_unknown_and_illegal_topics_get_kafkas_errors(admin: KafkaAdminClient,
                                                      topic_name: str) -> None:
    page = admin.describe_topic_partitions([f"{topic_name}-none", "bad/name"])
    assert {t["name"]: t["error_code"] for t in page["topics"]} == {
        f"{topic_name}-none": ErrorCode.unknown_topic_or_partition.value,
        "bad/name": ErrorCode.invalid_topic_exception.value}


def _raw(broker: BrokerProcess, topics: list[str], cursor: tuple[str, int] | None,
         limit: int = 10) -> Any:
    with WireClient(broker.bootstrap) as w:
        m = w.schema(75, 0)
        return w.call(75, 0, topics=tuple(m.TopicRequest(name=t) for t in topics),
                      response_partition_limit=limit,
                      cursor=None if cursor is None else m.Cursor(
                          topic_name=cursor[0], partition_index=cursor[1]))


@pytest.mark.parametrize("cursor", [("elsewhere", 0), ("mine", -1)])
def test_a_bad_cursor_is_an_invalid_request(broker: BrokerProcess, topic_name: str,
                                            cursor: tuple[str, int]) -> None:
    named = cursor[0].replace("mine", topic_name)
    response = _raw(broker, [topic_name], (named, cursor[1]))
    assert [(t.name, t.error_code) for t in response.topics] == [
        (topic_name, ErrorCode.invalid_request)]


def test_a_limit_below_one_still_answers_one_partition(broker: BrokerProcess,
                                                       topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    response = _raw(broker, [topic_name], None, limit=0)
    assert [len(t.partitions) for t in response.topics] == [1]
    assert response.next_cursor.partition_index == 1
