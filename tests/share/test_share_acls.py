"""Share groups under an authorizer, as Kafka checks them: READ on the group and READ on
the topic to fetch and acknowledge, DESCRIBE on subscribed topics to join, DESCRIBE on
the group to describe; a principal with those ACLs consumes with confluent-kafka's
ShareConsumer, one without gets Kafka's error on the wire and nothing is delivered."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.conftest import BrokerProcess
from tests.sasl_broker import AUTHORIZER, plain_sasl_broker
from tests.share.conftest import STATE_PARTITIONS
from tests.share.helpers import new_topic, poll_until, set_group_config
from tests.wire import WireClient

GROUP_AUTHORIZATION_FAILED = 30
TOPIC_AUTHORIZATION_FAILED = 29


class Secured:
    def __init__(self, process: BrokerProcess, sasl_port: int) -> None:
        self.process, self.sasl_port = process, sasl_port

    def client(self, user: str, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": f"{user}-secret", **extra}

    def allow(self, rtype: ResourceType, name: str, user: str, op: AclOperation) -> None:
        admin = AdminClient(self.client("admin"))
        binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, f"User:{user}", "*",
                             op, AclPermissionType.ALLOW)
        for fut in admin.create_acls([binding]).values():
            fut.result(15)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with plain_sasl_broker(tmp_path_factory.mktemp("share-acls") / "data", **{
            **AUTHORIZER, "super.users": "User:admin;User:ANONYMOUS",
            "group.share.heartbeat.interval.ms": "500", **STATE_PARTITIONS}) as (process, port):
        yield Secured(process, port)


def test_a_share_consumer_needs_read_on_group_and_topic(secured: Secured) -> None:
    plain = secured.process.bootstrap  # ANONYMOUS on the plaintext listener: a super user
    topic, group = new_topic(plain), f"g-{uuid.uuid4().hex[:8]}"
    set_group_config(plain, group, "share.auto.offset.reset", "earliest")
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": plain})
    p.produce(topic, b"secret")
    assert p.flush(30) == 0

    secured.allow(ResourceType.GROUP, group, "alice", AclOperation.READ)
    secured.allow(ResourceType.TOPIC, topic, "alice", AclOperation.READ)
    consumer = ShareConsumer(secured.client("alice", **{
        "group.id": group, "share.acknowledgement.mode": "explicit"}))
    consumer.subscribe([topic])
    try:
        got = poll_until(consumer, lambda seen: len(seen) >= 1,
                         on_batch=lambda b: [consumer.acknowledge(m) for m in b])
        assert [m.value() for m in got] == [b"secret"]
        assert all(e is None for e in consumer.commit_sync(30).values())
    finally:
        consumer.close()


def _sasl_wire(secured: Secured, user: str) -> WireClient:
    """A raw client logged in with SASL/PLAIN (SaslHandshake v1, SaslAuthenticate v2)."""
    c = WireClient(f"127.0.0.1:{secured.sasl_port}")
    assert c.call(17, 1, mechanism="PLAIN").error_code == 0
    token = b"\x00" + user.encode() + b"\x00" + f"{user}-secret".encode()
    assert c.call(36, 2, auth_bytes=token).error_code == 0
    return c


def test_without_acls_the_share_apis_answer_kafkas_authorization_errors(
        secured: Secured) -> None:
    plain = secured.process.bootstrap
    topic, group = new_topic(plain), f"g-{uuid.uuid4().hex[:8]}"
    with _sasl_wire(secured, "bob") as c:
        r = c.call(76, 1, group_id=group, member_id="m", member_epoch=0, rack_id=None,
                   subscribed_topic_names=(topic,))
        assert r.error_code == GROUP_AUTHORIZATION_FAILED
        d = c.call(77, 1, group_ids=(group,), include_authorized_operations=False)
        assert d.groups[0].error_code == GROUP_AUTHORIZATION_FAILED
        secured.allow(ResourceType.GROUP, group, "bob", AclOperation.READ)
        r = c.call(76, 1, group_id=group, member_id="m", member_epoch=0, rack_id=None,
                   subscribed_topic_names=(topic,))
        assert r.error_code == TOPIC_AUTHORIZATION_FAILED  # may not even see the topic
        secured.allow(ResourceType.TOPIC, topic, "bob", AclOperation.DESCRIBE)
        r = c.call(76, 1, group_id=group, member_id="m", member_epoch=0, rack_id=None,
                   subscribed_topic_names=(topic,))
        assert r.error_code == 0, r
        topic_id = r.assignment.topic_partitions[0].topic_id
        s = c.schema(78, 1)
        f = c.call(78, 1, group_id=group, member_id="m", share_session_epoch=0,
                   max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                   max_records=10, batch_size=10,
                   topics=(s.FetchTopic(topic_id=topic_id, partitions=(
                       s.FetchPartition(partition_index=0, acknowledgement_batches=()),)),),
                   forgotten_topics_data=())
        assert f.error_code == 0
        assert f.responses[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED
