"""Authorization matrix cases: transactions, topics and configs, the cluster, and the
APIs Kafka does not authorize."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as R
from tests.security.authz import (
    AUTH_ERRORS,
    CASES,
    CLUSTER_DENIED,
    GROUP_DENIED,
    MS,
    OK,
    TOPIC_DENIED,
    TXN_DENIED,
    Case,
    Matrix,
    case,
    codes,
)

# ---- transactions ------------------------------------------------------------------------


@case(22)
def _init_producer_id(m: Matrix) -> None:
    assert m.init_producer(m.alice, "m-init-x").error_code == TXN_DENIED
    idempotent = m.alice.req(22, 4, transactional_id=None, transaction_timeout=60_000 * MS,
                             producer_id=-1, producer_epoch=-1)
    assert idempotent.error_code == CLUSTER_DENIED  # no IDEMPOTENT_WRITE, no WRITE anywhere
    with m.grant((R.TRANSACTIONAL_ID, "m-init-x", Op.WRITE)):
        response = m.init_producer(m.alice, "m-init-x")
    assert response.error_code == OK and response.producer_id >= 0
    with m.grant((R.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE)):
        assert m.alice.req(22, 4, transactional_id=None, transaction_timeout=60_000 * MS,
                           producer_id=-1, producer_epoch=-1).error_code == OK


@case(24)
def _add_partitions_to_txn(m: Matrix) -> None:
    m.create_topic("m-apt")
    m.create_topic("m-apt-other")
    producer = m.producer("m-apt-x")

    def errors(response: Any) -> dict[str, ErrorCode]:
        return {t.name: ErrorCode(p.partition_error_code)
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition}

    denied = m.add_partitions(m.alice, "m-apt-x", producer, "m-apt", "m-apt-other")
    assert errors(denied) == {"m-apt": TXN_DENIED, "m-apt-other": TXN_DENIED}
    with m.grant((R.TRANSACTIONAL_ID, "m-apt-x", Op.WRITE),
                 (R.TOPIC, "m-apt-other", Op.WRITE)):
        one_topic_denied = m.add_partitions(m.alice, "m-apt-x", producer, "m-apt",
                                            "m-apt-other", "__consumer_offsets")
        assert errors(one_topic_denied) == {
            "m-apt": TOPIC_DENIED, "m-apt-other": ErrorCode.operation_not_attempted,
            "__consumer_offsets": TOPIC_DENIED}  # internal topics: never from a client
        assert m.txn_partitions("m-apt-x") == set()  # nothing added
        with m.grant((R.TOPIC, "m-apt", Op.WRITE)):
            allowed = m.add_partitions(m.alice, "m-apt-x", producer, "m-apt", "m-apt-other")
    assert errors(allowed) == {"m-apt": OK, "m-apt-other": OK}
    assert m.txn_partitions("m-apt-x") == {"m-apt", "m-apt-other"}

    # v4+: the batched form brokers send each other needs CLUSTER_ACTION
    def verify() -> Any:
        txn = m.alice.kind(24, 4, "AddPartitionsToTxnTransaction", transactional_id="m-apt-x",
                           producer_id=producer[0], producer_epoch=producer[1],
                           verify_only=True, topics=(m.alice.kind(
                               24, 4, "AddPartitionsToTxnTopic", name="m-apt",
                               partitions=(0,)),))
        return m.alice.req(24, 4, transactions=(txn,))

    assert verify().error_code == CLUSTER_DENIED
    with m.grant((R.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)):
        verified = verify()
    assert verified.error_code == OK and codes(verified.results_by_transaction) == {OK}


@case(25)
def _add_offsets_to_txn(m: Matrix) -> None:
    producer = m.producer("m-aot-x")

    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(25, 3, transactional_id="m-aot-x",
                                     producer_id=producer[0], producer_epoch=producer[1],
                                     group_id="m-aot-g").error_code)

    assert ask() == TXN_DENIED
    with m.grant((R.TRANSACTIONAL_ID, "m-aot-x", Op.WRITE)):
        assert ask() == GROUP_DENIED
        assert m.txn_partitions("m-aot-x") == set()
        with m.grant((R.GROUP, "m-aot-g", Op.READ)):
            assert ask() == OK
    assert m.txn_partitions("m-aot-x") == {"__consumer_offsets"}


@case(26)
def _end_txn(m: Matrix) -> None:
    m.create_topic("m-end")
    producer = m.producer("m-end-x")
    assert codes(m.add_partitions(m.admin, "m-end-x", producer, "m-end")) == {OK}

    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(26, 3, transactional_id="m-end-x", producer_id=producer[0],
                                     producer_epoch=producer[1], committed=True).error_code)

    assert ask() == TXN_DENIED
    assert m.txn_state("m-end-x") == "Ongoing"
    with m.grant((R.TRANSACTIONAL_ID, "m-end-x", Op.WRITE)):
        assert ask() == OK
    assert m.txn_state("m-end-x") in ("PrepareCommit", "CompleteCommit")


@case(27)
def _write_txn_markers(m: Matrix) -> None:
    m.create_topic("m-markers")
    producer = m.producer("m-markers-x")

    def ask() -> set[ErrorCode]:
        marker = m.alice.kind(27, 1, "WritableTxnMarker", producer_id=producer[0],
                              producer_epoch=producer[1], transaction_result=False,
                              coordinator_epoch=0, topics=(m.alice.kind(
                                  27, 1, "WritableTxnMarkerTopic", name="m-markers",
                                  partition_indexes=(0,)),))
        return codes(m.alice.req(27, 1, markers=(marker,)))

    assert ask() == {CLUSTER_DENIED}
    assert m.offsets("m-markers") == 0  # no marker written
    with m.grant((R.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)):
        assert ask() == {OK}
    assert m.offsets("m-markers") == 1


@case(28)
def _txn_offset_commit(m: Matrix) -> None:
    m.create_topic("m-toc")
    producer = m.producer("m-toc-x")
    added = m.admin.req(25, 3, transactional_id="m-toc-x", producer_id=producer[0],
                        producer_epoch=producer[1], group_id="m-toc-g")
    assert added.error_code == OK

    def ask() -> set[ErrorCode]:
        return codes(m.alice.req(28, 3, transactional_id="m-toc-x", group_id="m-toc-g",
                                 producer_id=producer[0], producer_epoch=producer[1],
                                 generation_id=-1, topics=(m.alice.kind(
                                     28, 3, "TxnOffsetCommitRequestTopic", name="m-toc",
                                     partitions=(m.alice.kind(
                                         28, 3, "TxnOffsetCommitRequestPartition",
                                         partition_index=0, committed_offset=5,
                                         committed_metadata=""),)),)))

    assert ask() == {TXN_DENIED}
    with m.grant((R.TRANSACTIONAL_ID, "m-toc-x", Op.WRITE), (R.GROUP, "m-toc-g", Op.READ)):
        assert ask() == {TOPIC_DENIED}
        with m.grant((R.TOPIC, "m-toc", Op.READ)):
            assert ask() == {OK}
    # pending until the transaction commits: committing it shows the one offset written
    assert m.admin.req(26, 3, transactional_id="m-toc-x", producer_id=producer[0],
                       producer_epoch=producer[1], committed=True).error_code == OK
    for _ in range(200):
        if m.committed("m-toc-g", "m-toc") == 5:
            break
    assert m.committed("m-toc-g", "m-toc") == 5


@case(65)
def _describe_transactions(m: Matrix) -> None:
    m.create_topic("m-dt")
    producer = m.producer("m-dt-x")  # begun: an empty one's start time is -1 (see above)
    assert codes(m.add_partitions(m.admin, "m-dt-x", producer, "m-dt")) == {OK}

    def ask() -> ErrorCode:
        [state] = m.alice.req(65, 0, transactional_ids=("m-dt-x",)).transaction_states
        return ErrorCode(state.error_code)

    assert ask() == TXN_DENIED
    with m.grant((R.TRANSACTIONAL_ID, "m-dt-x", Op.DESCRIBE)):
        assert ask() == OK


@case(66)
def _list_transactions(m: Matrix) -> None:
    m.producer("m-lt-x")

    def listed() -> set[str]:
        response = m.alice.req(66, 1)
        assert response.error_code == OK
        return {t.transactional_id for t in response.transaction_states}

    assert "m-lt-x" not in listed()
    with m.grant((R.TRANSACTIONAL_ID, "m-lt-x", Op.DESCRIBE)):
        assert "m-lt-x" in listed()


# ---- topics and configs ------------------------------------------------------------------


@case(19)
def _create_topics(m: Matrix) -> None:
    def ask() -> ErrorCode:
        topic = m.alice.kind(19, 7, "CreatableTopic", name="m-created", num_partitions=1,
                             replication_factor=1)
        return ErrorCode(m.alice.req(19, 7, topics=(topic,)).topics[0].error_code)

    assert ask() == TOPIC_DENIED
    assert m.topic_partitions("m-created") == 0
    with m.grant((R.TOPIC, "m-created", Op.CREATE)):
        assert ask() == OK
    assert m.topic_partitions("m-created") == 1


@case(20)
def _delete_topics(m: Matrix) -> None:
    m.create_topic("m-deleted")

    def ask() -> ErrorCode:
        state = m.alice.kind(20, 6, "DeleteTopicState", name="m-deleted", topic_id=None)
        response = m.alice.req(20, 6, timeout=30_000 * MS, topics=(state,))
        return ErrorCode(response.responses[0].error_code)

    assert ask() == TOPIC_DENIED
    assert m.topic_partitions("m-deleted") == 1  # still there
    with m.grant((R.TOPIC, "m-deleted", Op.DELETE)):
        assert ask() == OK
    assert m.topic_partitions("m-deleted") == 0


@case(37)
def _create_partitions(m: Matrix) -> None:
    m.create_topic("m-grown")

    def ask() -> ErrorCode:
        topic = m.alice.kind(37, 3, "CreatePartitionsTopic", name="m-grown", count=2,
                             assignments=None)
        return ErrorCode(m.alice.req(37, 3, timeout=30_000 * MS, validate_only=False,
                                     topics=(topic,)).results[0].error_code)

    assert ask() == TOPIC_DENIED
    assert m.topic_partitions("m-grown") == 1
    with m.grant((R.TOPIC, "m-grown", Op.ALTER)):
        assert ask() == OK
    assert m.topic_partitions("m-grown") == 2


@case(32)
def _describe_configs(m: Matrix) -> None:
    m.create_topic("m-dc")

    def ask(resource_type: int, name: str) -> Any:
        return m.alice.req(32, 4, resources=(m.alice.kind(
            32, 4, "DescribeConfigsResource", resource_type=resource_type,
            resource_name=name, configuration_keys=None),)).results[0]

    assert ask(2, "m-dc").error_code == TOPIC_DENIED
    assert ask(4, "1").error_code == CLUSTER_DENIED  # a broker: the cluster's permission
    with m.grant((R.TOPIC, "m-dc", Op.DESCRIBE_CONFIGS)):
        result = ask(2, "m-dc")
    assert result.error_code == OK and result.configs


@case(33)
def _alter_configs(m: Matrix) -> None:
    m.create_topic("m-ac")
    before = m.topic_config("m-ac", "retention.ms")

    def ask() -> ErrorCode:
        resource = m.alice.kind(33, 2, "AlterConfigsResource", resource_type=2,
                                resource_name="m-ac", configs=(m.alice.kind(
                                    33, 2, "AlterableConfig", name="retention.ms",
                                    value="123456"),))
        return ErrorCode(m.alice.req(33, 2, resources=(resource,), validate_only=False)
                         .responses[0].error_code)

    assert ask() == TOPIC_DENIED
    assert m.topic_config("m-ac", "retention.ms") == before != "123456"
    with m.grant((R.TOPIC, "m-ac", Op.ALTER_CONFIGS)):
        assert ask() == OK
    assert m.topic_config("m-ac", "retention.ms") == "123456"


@case(44)
def _incremental_alter_configs(m: Matrix) -> None:
    m.create_topic("m-iac")

    def ask() -> ErrorCode:
        resource = m.alice.kind(44, 1, "AlterConfigsResource", resource_type=2,
                                resource_name="m-iac", configs=(m.alice.kind(
                                    44, 1, "AlterableConfig", name="retention.ms",
                                    config_operation=0, value="654321"),))
        return ErrorCode(m.alice.req(44, 1, resources=(resource,), validate_only=False)
                         .responses[0].error_code)

    assert ask() == TOPIC_DENIED
    assert m.topic_config("m-iac", "retention.ms") != "654321"
    with m.grant((R.TOPIC, "m-iac", Op.ALTER_CONFIGS)):
        assert ask() == OK
    assert m.topic_config("m-iac", "retention.ms") == "654321"


# ---- the cluster -------------------------------------------------------------------------


def _cluster_case(api_key: int, version: int, op: Op, answer: Callable[[Any], set[ErrorCode]],
                  changed: Callable[[Matrix], bool] | None = None, **values: Any) -> Case:
    """A whole-request check on the cluster: CLUSTER_AUTHORIZATION_FAILED and nothing
    changed without `op` on the cluster, served with it."""
    def run(m: Matrix) -> None:
        def ask() -> set[ErrorCode]:
            return answer(m.alice.req(api_key, version, **{
                k: v(m) if callable(v) else v for k, v in values.items()}))

        assert ask() == {CLUSTER_DENIED}
        if changed is not None:
            assert not changed(m)
        with m.grant((R.CLUSTER, "kafka-cluster", op)):
            assert not ask() & AUTH_ERRORS
        if changed is not None:
            assert changed(m)
    return run


def _top(response: Any) -> set[ErrorCode]:
    return {ErrorCode(response.error_code)}


def _acl_creation(m: Matrix) -> tuple[Any, ...]:
    return (m.alice.kind(30, 3, "AclCreation", resource_type=2, resource_name="m-acl-made",
                         resource_pattern_type=3, principal="User:nobody", host="*",
                         operation=3, permission_type=3),)


def _acl_made(m: Matrix) -> bool:
    return m.acl_count("m-acl-made") > 0


@case(29)
def _describe_acls(m: Matrix) -> None:
    _cluster_case(29, 3, Op.DESCRIBE, _top, resource_type_filter=1, resource_name_filter=None,
                  pattern_type_filter=1, principal_filter=None, host_filter=None,
                  operation=1, permission_type=1)(m)


@case(30)
def _create_acls(m: Matrix) -> None:
    _cluster_case(30, 3, Op.ALTER, lambda r: codes(r.results), _acl_made,
                  creations=_acl_creation)(m)


@case(31)
def _delete_acls(m: Matrix) -> None:
    with m.grant((R.TOPIC, "m-acl-deleted", Op.READ)):
        def ask() -> Any:
            return m.alice.req(31, 3, filters=(m.alice.kind(
                31, 3, "DeleteAclsFilter", resource_type_filter=2,
                resource_name_filter="m-acl-deleted", pattern_type_filter=3,
                principal_filter=None, host_filter=None, operation=1, permission_type=1),))

        assert codes(ask()) == {CLUSTER_DENIED}
        assert m.acl_count("m-acl-deleted") == 1
        with m.grant((R.CLUSTER, "kafka-cluster", Op.ALTER)):
            assert codes(ask()) == {OK}
        assert m.acl_count("m-acl-deleted") == 0


@case(34)
def _alter_replica_log_dirs(m: Matrix) -> None:
    m.create_topic("m-move")
    _cluster_case(34, 2, Op.ALTER, lambda r: codes(r.results), dirs=lambda m: (m.alice.kind(
        34, 2, "AlterReplicaLogDir", path="/nonexistent", topics=(m.alice.kind(
            34, 2, "AlterReplicaLogDirTopic", name="m-move", partitions=(0,)),)),))(m)


@case(35)
def _describe_log_dirs(m: Matrix) -> None:
    denied = m.alice.req(35, 4, topics=None)
    assert denied.error_code == CLUSTER_DENIED and denied.results == ()
    with m.grant((R.CLUSTER, "kafka-cluster", Op.DESCRIBE)):
        allowed = m.alice.req(35, 4, topics=None)
    assert allowed.error_code == OK and allowed.results


@case(43)
def _elect_leaders(m: Matrix) -> None:
    _cluster_case(43, 2, Op.ALTER, _top, election_type=0, topic_partitions=None)(m)


@case(45)
def _alter_partition_reassignments(m: Matrix) -> None:
    _cluster_case(45, 0, Op.ALTER, _top, topics=())(m)


@case(46)
def _list_partition_reassignments(m: Matrix) -> None:
    _cluster_case(46, 0, Op.DESCRIBE, _top, topics=None)(m)


@case(48)
def _describe_client_quotas(m: Matrix) -> None:
    _cluster_case(48, 1, Op.DESCRIBE_CONFIGS, _top, components=(), strict=False)(m)


@case(49)
def _alter_client_quotas(m: Matrix) -> None:
    def quota_set(m: Matrix) -> bool:
        response = m.admin.req(48, 1, strict=True, components=(m.admin.kind(
            48, 1, "ComponentData", entity_type="user", match_type=0, match="m-quota-user"),))
        return bool(response.entries)

    _cluster_case(49, 1, Op.ALTER_CONFIGS, lambda r: codes(r.entries), quota_set,
                  validate_only=False, entries=lambda m: (m.alice.kind(
                      49, 1, "EntryData", entity=(m.alice.kind(
                          49, 1, "EntityData", entity_type="user",
                          entity_name="m-quota-user"),), ops=(m.alice.kind(
                              49, 1, "OpData", key="producer_byte_rate", value=1e6,
                              remove=False),)),))(m)


@case(50)
def _describe_user_scram_credentials(m: Matrix) -> None:
    _cluster_case(50, 0, Op.DESCRIBE, _top, users=None)(m)


@case(51)
def _alter_user_scram_credentials(m: Matrix) -> None:
    salt = b"m-salt-0123456789"
    salted = hashlib.pbkdf2_hmac("sha512", b"carol-secret", salt, 4096)

    def made(m: Matrix) -> bool:
        response = m.admin.req(50, 0, users=(m.admin.kind(50, 0, "UserName", name="carol"),))
        return response.results[0].error_code == OK

    _cluster_case(51, 0, Op.ALTER, lambda r: codes(r.results), made,
                  upsertions=lambda m: (m.alice.kind(
                      51, 0, "ScramCredentialUpsertion", name="carol", mechanism=2,
                      iterations=4096, salt=salt, salted_password=salted),))(m)


@case(57)
def _update_features(m: Matrix) -> None:
    _cluster_case(57, 1, Op.ALTER, _top, feature_updates=(), validate_only=True)(m)


@case(74)
def _list_config_resources(m: Matrix) -> None:
    _cluster_case(74, 1, Op.DESCRIBE_CONFIGS, _top, resource_types=())(m)


# ---- APIs Kafka does not authorize -------------------------------------------------------


@case(17)
def _sasl_handshake(m: Matrix) -> None:
    assert m.alice.user == "alice"  # Session() made both calls, with no ACL at all


CASES[36] = CASES[17]  # SaslAuthenticate: the login itself


@case(18)
def _api_versions(m: Matrix) -> None:
    assert m.alice.req(18, 3, client_software_name="m", client_software_version="1"
                       ).error_code == OK


@case(60)
def _describe_cluster(m: Matrix) -> None:
    response = m.alice.req(60, 1, include_cluster_authorized_operations=True)
    assert response.error_code == OK and response.brokers
    with m.grant((R.CLUSTER, "kafka-cluster", Op.DESCRIBE)):
        described = m.alice.req(60, 1, include_cluster_authorized_operations=True)
    # the flag: bit 8 (DESCRIBE) appears in the authorized operations with the grant
    assert described.cluster_authorized_operations & (1 << 8)
    assert not response.cluster_authorized_operations & (1 << 8)


@case(71)
def _get_telemetry_subscriptions(m: Matrix) -> None:
    assert m.alice.req(71, 0, client_instance_id=uuid.UUID(int=0)).error_code == OK


@case(72)
def _push_telemetry(m: Matrix) -> None:
    subscription = m.alice.req(71, 0, client_instance_id=uuid.UUID(int=0))
    response = m.alice.req(72, 0, client_instance_id=subscription.client_instance_id,
                           subscription_id=subscription.subscription_id, terminating=False,
                           compression_type=0, metrics=b"")
    assert ErrorCode(response.error_code) not in AUTH_ERRORS
