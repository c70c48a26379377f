"""Authorization matrix cases of the share groups' state and admin APIs (83-87, 90-92).

The state APIs are broker-to-broker (the share-partition leader asks the share
coordinator): CLUSTER_ACTION, as Kafka's KafkaApis checks them. The admin APIs check the
group and the topics as Kafka's. The consumer-side share APIs (76-79) are covered by
tests/share/test_share_acls.py.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as R
from tests.security.authz import (
    AUTH_ERRORS,
    CLUSTER_DENIED,
    GROUP_DENIED,
    Matrix,
    case,
    codes,
)

STATE_ENTITIES = {  # api: (version, topic entity, partition entity, partition fields)
    83: (0, "InitializeStateData", {"state_epoch": 0, "start_offset": 0}),
    84: (0, "ReadStateData", {"leader_epoch": 0}),
    85: (1, "WriteStateData", {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0}),
    86: (0, "DeleteStateData", {}),
    87: (1, "ReadStateSummaryData", {"leader_epoch": 0}),
}


def _topic_id(m: Matrix, name: str) -> Any:
    response = m.admin.req(3, 12, topics=(m.admin.kind(3, 12, "MetadataRequestTopic",
                                                       name=name),))
    return response.topics[0].topic_id


def _state_case(api_key: int) -> None:
    version, entity, fields = STATE_ENTITIES[api_key]

    @case(api_key)
    def run(m: Matrix) -> None:
        name = f"m-share-state-{api_key}"
        m.create_topic(name)
        topic_id = _topic_id(m, name)

        def ask() -> set[ErrorCode]:
            partition = m.alice.kind(api_key, version, "PartitionData", partition=0, **fields)
            topic = m.alice.kind(api_key, version, entity, topic_id=topic_id,
                                 partitions=(partition,))
            return codes(m.alice.req(api_key, version, group_id=f"{name}-g", topics=(topic,)))

        assert ask() == {CLUSTER_DENIED}
        with m.grant((R.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)):
            assert not ask() & AUTH_ERRORS


for _api in STATE_ENTITIES:
    _state_case(_api)


@case(90)
def _describe_share_group_offsets(m: Matrix) -> None:
    m.create_topic("m-dsgo")

    def ask() -> set[ErrorCode]:
        group = m.alice.kind(90, 1, "DescribeShareGroupOffsetsRequestGroup",
                             group_id="m-dsgo-g", topics=None)
        return codes(m.alice.req(90, 1, groups=(group,)))

    assert GROUP_DENIED in ask()
    with m.grant((R.GROUP, "m-dsgo-g", Op.DESCRIBE), (R.TOPIC, "m-dsgo", Op.DESCRIBE)):
        assert not ask() & AUTH_ERRORS


@case(91)
def _alter_share_group_offsets(m: Matrix) -> None:
    m.create_topic("m-asgo")

    def ask() -> set[ErrorCode]:
        topic = m.alice.kind(91, 0, "AlterShareGroupOffsetsRequestTopic", topic_name="m-asgo",
                             partitions=(m.alice.kind(
                                 91, 0, "AlterShareGroupOffsetsRequestPartition",
                                 partition_index=0, start_offset=0),))
        return codes(m.alice.req(91, 0, group_id="m-asgo-g", topics=(topic,)))

    assert GROUP_DENIED in ask()
    with m.grant((R.GROUP, "m-asgo-g", Op.READ), (R.TOPIC, "m-asgo", Op.READ)):
        assert not ask() & AUTH_ERRORS


@case(92)
def _delete_share_group_offsets(m: Matrix) -> None:
    m.create_topic("m-dlsgo")

    def ask() -> set[ErrorCode]:
        topic = m.alice.kind(92, 0, "DeleteShareGroupOffsetsRequestTopic",
                             topic_name="m-dlsgo")
        return codes(m.alice.req(92, 0, group_id="m-dlsgo-g", topics=(topic,)))

    assert GROUP_DENIED in ask()
    with m.grant((R.GROUP, "m-dlsgo-g", Op.DELETE), (R.TOPIC, "m-dlsgo", Op.READ)):
        assert not ask() & AUTH_ERRORS
