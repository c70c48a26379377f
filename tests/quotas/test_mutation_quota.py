"""controller_mutation_rate (KIP-599) on a live broker.

With confluent-kafka (librdkafka 2.16 sends CreateTopics v4, DeleteTopics v4,
CreatePartitions v2: versions before the strict ones, so it never sees
THROTTLING_QUOTA_EXCEEDED) a user over the rate sees every topic created and the
throttle reported (throttle_cb), and its next admin request waits; another user on the
same broker is not slowed. Newer versions (CreateTopics v6+, CreatePartitions v3+,
DeleteTopics v5+) refuse the topics past the burst with THROTTLING_QUOTA_EXCEEDED and
leave them unchanged.

Set with `odradek configs alter --entity-type users --entity-name alice --add-config
controller_mutation_rate=8` and shown by `odradek configs describe`.
The broker keeps 2 windows of 1 s (controller.quota.window.num=2): a burst is 2 x rate."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.client_framing import ClientFraming
from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.quotas.test_client_quotas_admin import Quotas
from tests.quotas.test_quota_cli import odradek
from tests.sasl_broker import plain_sasl_broker
from tests.security.authz import make
from tests.wire import WireClient

MS = datetime.timedelta(milliseconds=1)
M = "controller_mutation_rate"


@pytest.fixture(scope="module")
def mutation_broker(tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[tuple[BrokerProcess, int]]:
    with plain_sasl_broker(tmp_path_factory.mktemp("mutation-quota") / "data",
                           **{"controller.quota.window.num": "2"}) as started:
        yield started


def _set(broker: BrokerProcess, entity: dict[str, str | None], rate: float) -> None:
    q = Quotas(broker.bootstrap)
    try:
        assert q.alter(entity, {M: rate}) == (0, None)
    finally:
        q.close()


def _admin(port: int, user: str, throttles: list[float]) -> AdminClient:
    return AdminClient({
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret",
        "throttle_cb": lambda e: throttles.append(e.throttle_time)})


def _create_delete_create(port: int, user: str) -> tuple[list[float], float]:
    """Eight topics of two partitions in one request, their deletion, and one more topic
    by the same client: the throttles reported and how long the last creation took."""
    throttles: list[float] = []
    admin = _admin(port, user, throttles)
    names = [f"{user}-t{i}" for i in range(8)]
    for future in admin.create_topics([NewTopic(n, 2, 1) for n in names]).values():
        future.result(30)  # created, however far over the quota
    for future in admin.delete_topics(names).values():
        future.result(30)
    started = time.monotonic()
    admin.create_topics([NewTopic(f"{user}-after", 1, 1)])[f"{user}-after"].result(30)
    took = time.monotonic() - started
    admin.poll(0)  # serves throttle_cb
    return throttles, took


def test_a_user_is_held_to_its_mutation_rate_and_another_is_not(
        mutation_broker: tuple[BrokerProcess, int]) -> None:
    broker, port = mutation_broker
    b = ["--bootstrap-server", broker.bootstrap]
    done = odradek("configs", "alter", "--entity-type", "users", "--entity-name", "alice",
                   "--add-config", f"{M}=8", *b)  # a burst of 16 partitions
    assert done.returncode == 0, done.stderr
    shown = odradek("configs", "describe", "--entity-type", "users", "--entity-name", "alice",
                    *b)
    assert shown.stdout.strip() == f"Quota configs for user-principal 'alice' are {M}=8.0"
    # alice: 16 partitions take the bucket to 0 (still admitted), the 16 deleted right
    # after take it to about -16: two seconds at 8 a second, reported, and her next
    # request waits them out (the broker reads nothing more from her connection)
    alice_throttles, alice_s = _create_delete_create(port, "alice")
    bob_throttles, bob_s = _create_delete_create(port, "bob")
    assert alice_throttles and max(alice_throttles) >= 0.8  # seconds
    assert not bob_throttles
    assert alice_s >= 0.8 and bob_s < alice_s / 2


def _wire(broker: BrokerProcess, client_id: str) -> WireClient:
    w = WireClient(broker.bootstrap, timeout=30)
    w.framing = ClientFraming(client_id)
    return w


def _create(w: WireClient, version: int, topics: dict[str, int]) -> Any:
    schema = w.schema(19, version)
    return w.call(19, version, topics=tuple(
        make(schema.CreatableTopic, name=n, num_partitions=p, replication_factor=1)
        for n, p in topics.items()), timeout=30_000 * MS)


def test_new_versions_refuse_the_topics_past_the_burst(
        mutation_broker: tuple[BrokerProcess, int]) -> None:
    broker, _ = mutation_broker
    _set(broker, {"client-id": "greedy"}, 1.0)  # a burst of 2 partitions
    with _wire(broker, "greedy") as w:
        # the first topic may take the bucket below zero (2 - 5 = -3); the next is refused
        first = _create(w, 7, {"greedy-a": 5, "greedy-b": 1})
        a, b = first.topics
        assert a.error_code == ErrorCode.none and a.num_partitions == 5
        assert b.error_code == ErrorCode.throttling_quota_exceeded == 89
        assert b.error_message == "The throttling quota has been exceeded."
        # -3 tokens at 1 a second: up to three seconds to wait
        assert 1000 < first.throttle_time.total_seconds() * 1000 <= 3000
    with _wire(broker, "greedy") as w:  # a new connection: not muted, the same bucket
        # a v5 request (before KIP-599) is throttled, never refused
        old = _create(w, 5, {"greedy-b": 2})
        assert old.topics[0].error_code == ErrorCode.none
        assert old.throttle_time.total_seconds() > 0
    with _wire(broker, "other") as w:  # not under the quota
        names = {t.name: t.error_code for t in _create(w, 7, {"greedy-b": 1, "free": 5}).topics}
        assert names == {"greedy-b": ErrorCode.topic_already_exists, "free": ErrorCode.none}


def test_deletions_and_new_partitions_are_charged_too(
        mutation_broker: tuple[BrokerProcess, int]) -> None:
    # at 1 a second (a burst of 2), the first topic's 5 partitions take the bucket to -3
    broker, _ = mutation_broker
    with _wire(broker, "setup") as w:
        assert all(t.error_code == 0 for t in _create(w, 7, {
            "del-a": 5, "del-b": 1, "grow-a": 1, "grow-b": 1}).topics)
    _set(broker, {"client-id": "deleter"}, 1.0)
    _set(broker, {"client-id": "grower"}, 1.0)
    with _wire(broker, "deleter") as w:
        schema = w.schema(20, 6)
        response = w.call(20, 6, topics=tuple(
            make(schema.DeleteTopicState, name=n) for n in ("del-a", "del-b")),
            timeout=30_000 * MS)
        codes = {r.name: r.error_code for r in response.responses}
        assert codes == {"del-a": ErrorCode.none,
                         "del-b": ErrorCode.throttling_quota_exceeded}
        assert response.throttle_time.total_seconds() > 0
    with _wire(broker, "grower") as w:
        schema = w.schema(37, 3)
        response = w.call(37, 3, topics=tuple(
            make(schema.CreatePartitionsTopic, name=n, count=6, assignments=None)
            for n in ("grow-a", "grow-b")), timeout=30_000 * MS, validate_only=False)
        codes = {r.name: r.error_code for r in response.results}
        assert codes == {"grow-a": ErrorCode.none,
                         "grow-b": ErrorCode.throttling_quota_exceeded}
    with _wire(broker, "setup") as w:  # what was refused is unchanged
        [topic] = w.call(3, 12, topics=(make(w.schema(3, 12).MetadataRequestTopic,
                                             name="grow-b"),),
                         include_topic_authorized_operations=False).topics
        assert len(topic.partitions) == 1
        [topic] = w.call(3, 12, topics=(make(w.schema(3, 12).MetadataRequestTopic,
                                             name="del-b"),),
                         include_topic_authorized_operations=False).topics
        assert topic.error_code == ErrorCode.none
