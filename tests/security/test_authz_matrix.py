"""The authorization matrix: for every API the broker serves, a principal without the
permission Kafka's broker checks gets Kafka's error code and nothing changes (no topic
created or deleted, no offset committed, no config altered, no record appended); with
the ACL it needs, the same call works.

The list of APIs is security/operations.py's table and the broker's handlers: an API
with no case here fails the test. Raw requests over SASL_PLAINTEXT (PLAIN) on one
broker for the module; every grant is removed after its case, so cluster-wide grants
do not leak into the next one. `admin` is a super user and sets up what a case needs.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import time
import typing
import uuid
from collections.abc import Callable, Iterator
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class
from odradek.protocol.records import NewRecord, encode_batch
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as R
from odradek.security.operations import OPERATIONS
from odradek.server.handlers import HANDLERS
from tests.conftest import BrokerProcess, free_port
from tests.wire import WireClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')
SHARE_APIS = {76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch",
              79: "ShareAcknowledge"}
OK = ErrorCode.none
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
AUTH_ERRORS = {TOPIC_DENIED, GROUP_DENIED, TXN_DENIED, CLUSTER_DENIED}
MS = datetime.timedelta(milliseconds=1)


def make(cls: type, **values: Any) -> Any:
    """A kio message from the fields given; lists left out are empty, optional fields
    None, numbers 0."""
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        if f.name in values or f.default is not MISSING or f.default_factory is not MISSING:
            continue
        tp = hints[f.name]
        if typing.get_origin(tp) is tuple:
            values[f.name] = ()
        elif type(None) in typing.get_args(tp):
            values[f.name] = None
        elif isinstance(tp, type) and issubclass(tp, datetime.timedelta):
            values[f.name] = 30_000 * MS
        elif isinstance(tp, type) and issubclass(tp, bool):
            values[f.name] = False
        elif isinstance(tp, type) and issubclass(tp, bytes):
            values[f.name] = b""
        elif isinstance(tp, type) and issubclass(tp, str):
            values[f.name] = ""
        else:
            values[f.name] = 0
    return cls(**values)


def codes(node: Any) -> set[ErrorCode]:
    """Every error code in a response."""
    out: set[ErrorCode] = set()
    if isinstance(node, tuple):
        for item in node:
            out |= codes(item)
    elif is_dataclass(node):
        for f in fields(node):
            value = getattr(node, f.name)
            if f.name.endswith("error_code"):
                out.add(ErrorCode(int(getattr(value, "value", value))))
            else:
                out |= codes(value)
    return out


class Session(WireClient):
    """One authenticated connection: SaslHandshake and SaslAuthenticate (PLAIN)."""

    def __init__(self, port: int, user: str) -> None:
        super().__init__(f"127.0.0.1:{port}", timeout=30)
        self.user = user
        assert self.call(17, 1, mechanism="PLAIN").error_code == OK
        token = f"\0{user}\0{user}-secret".encode()
        assert self.call(36, 2, auth_bytes=token).error_code == OK

    def req(self, api_key: int, version: int, **values: Any) -> Any:
        cid, frame = self.framing.request(api_key, version,
                                          make(request_class(api_key, version), **values))
        self.send_raw(frame)
        from odradek.protocol.client_framing import decode_response
        return decode_response(api_key, version, self.read_frame(), cid)

    def kind(self, api_key: int, version: int, entity: str, /, **values: Any) -> Any:
        """A nested entity of a request (`TopicProduceData` of Produce…)."""
        return make(getattr(self.schema(api_key, version), entity), **values)


class Matrix:
    def __init__(self, port: int) -> None:
        self.port = port
        self.admin = Session(port, "admin")
        self.alice = Session(port, "alice")

    def ready(self) -> None:
        """Waits until the group and transaction coordinators have loaded."""
        self.create_topic("m-ready")
        deadline = time.monotonic() + 30
        while True:  # Kafka creates the coordinators' topics on the first FindCoordinator
            self.admin.req(10, 4, key_type=0, coordinator_keys=("m-ready-g",))
            self.admin.req(10, 4, key_type=1, coordinator_keys=("m-ready-x",))
            committed = codes(self.commit(self.admin, "m-ready-g", "m-ready", 0))
            init = ErrorCode(self.init_producer(self.admin, "m-ready-x").error_code)
            if committed == {OK} and init == OK:
                return
            assert time.monotonic() < deadline, f"coordinators not loaded: {committed} {init}"
            time.sleep(0.1)

    # ---- ACLs ----------------------------------------------------------------------

    def _binding(self, rtype: R, name: str, op: Op) -> dict[str, Any]:
        return dict(resource_type=rtype.value, resource_name=name, resource_pattern_type=3,
                    principal="User:alice", host="*", operation=op.value, permission_type=3)

    @contextlib.contextmanager
    def grant(self, *acls: tuple[R, str, Op]) -> Iterator[None]:
        bindings = [self._binding(*a) for a in acls]
        created = self.admin.req(30, 3, creations=tuple(
            self.admin.kind(30, 3, "AclCreation", **b) for b in bindings))
        assert codes(created) == {OK}, created
        try:
            yield
        finally:
            filters = tuple(self.admin.kind(31, 3, "DeleteAclsFilter", **{
                "resource_type_filter": b["resource_type"],
                "resource_name_filter": b["resource_name"], "pattern_type_filter": 3,
                "principal_filter": b["principal"], "host_filter": "*",
                "operation": b["operation"], "permission_type": 3}) for b in bindings)
            assert OK in codes(self.admin.req(31, 3, filters=filters))

    # ---- what a case checks before and after ---------------------------------------

    def create_topic(self, name: str, partitions: int = 1) -> None:
        topic = self.admin.kind(19, 7, "CreatableTopic", name=name, num_partitions=partitions,
                                replication_factor=1)
        response = self.admin.req(19, 7, topics=(topic,))
        assert response.topics[0].error_code in (OK, ErrorCode.topic_already_exists), response

    def topic_partitions(self, name: str) -> int:
        """How many partitions the topic has; 0 when it does not exist."""
        response = self.admin.req(3, 12, topics=(
            self.admin.kind(3, 12, "MetadataRequestTopic", name=name),))
        [topic] = response.topics
        return len(topic.partitions) if topic.error_code == OK else 0

    def offsets(self, topic: str, timestamp: int = -1) -> int:
        """The end offset (timestamp -1) or log start offset (-2) of partition 0."""
        response = self.admin.req(2, 7, replica_id=-1, topics=(self.admin.kind(
            2, 7, "ListOffsetsTopic", name=topic, partitions=(self.admin.kind(
                2, 7, "ListOffsetsPartition", partition_index=0, timestamp=timestamp),)),))
        [partition] = response.topics[0].partitions
        assert partition.error_code == OK, response
        return int(partition.offset)

    def produce(self, session: Session, topic: str, *, transactional_id: str | None = None,
                producer: tuple[int, int] = (-1, -1)) -> ErrorCode:
        records = encode_batch([NewRecord(value=b"v")], producer_id=producer[0],
                               producer_epoch=producer[1],
                               base_sequence=0 if producer[0] >= 0 else -1,
                               transactional=transactional_id is not None)
        response = session.req(0, 9, transactional_id=transactional_id, acks=-1,
                               timeout=30_000 * MS, topic_data=(session.kind(
                                   0, 9, "TopicProduceData", name=topic, partition_data=(
                                       session.kind(0, 9, "PartitionProduceData", index=0,
                                                    records=records),)),))
        return ErrorCode(response.responses[0].partition_responses[0].error_code)

    def committed(self, group: str, topic: str) -> int:
        group_request = self.admin.kind(9, 8, "OffsetFetchRequestGroup", group_id=group,
                                        topics=(self.admin.kind(
                                            9, 8, "OffsetFetchRequestTopics", name=topic,
                                            partition_indexes=(0,)),))
        response = self.admin.req(9, 8, groups=(group_request,))
        [partition] = response.groups[0].topics[0].partitions
        return int(partition.committed_offset)

    def commit(self, session: Session, group: str, topic: str, offset: int) -> Any:
        return session.req(8, 8, group_id=group, generation_id_or_member_epoch=-1,
                           member_id="", topics=(session.kind(
                               8, 8, "OffsetCommitRequestTopic", name=topic, partitions=(
                                   session.kind(8, 8, "OffsetCommitRequestPartition",
                                                partition_index=0, committed_offset=offset,
                                                committed_metadata=""),)),))

    def group_state(self, group: str) -> str:
        return str(self.admin.req(15, 5, groups=(group,)).groups[0].group_state)

    def init_producer(self, session: Session, txn: str) -> Any:
        return session.req(22, 4, transactional_id=txn, transaction_timeout=60_000 * MS,
                           producer_id=-1, producer_epoch=-1)

    def producer(self, txn: str) -> tuple[int, int]:
        response = self.init_producer(self.admin, txn)
        assert response.error_code == OK, response
        return int(response.producer_id), int(response.producer_epoch)

    def add_partitions(self, session: Session, txn: str, producer: tuple[int, int],
                       *topics: str) -> Any:
        return session.req(24, 3, v3_and_below_transactional_id=txn,
                           v3_and_below_producer_id=producer[0],
                           v3_and_below_producer_epoch=producer[1],
                           v3_and_below_topics=tuple(session.kind(
                               24, 3, "AddPartitionsToTxnTopic", name=t, partitions=(0,))
                               for t in topics))

    def txn_state(self, txn: str) -> str:
        """The transaction's state, as ListTransactions tells it."""
        listed = self.admin.req(66, 1).transaction_states
        return next(str(t.transaction_state) for t in listed if t.transactional_id == txn)

    def txn_partitions(self, txn: str) -> set[str]:
        """The partitions in the transaction (DescribeTransactions answers an empty one
        with a start time of -1, which kio cannot decode: asked only once it began)."""
        if self.txn_state(txn) == "Empty":
            return set()
        [state] = self.admin.req(65, 0, transactional_ids=(txn,)).transaction_states
        return {t.topic for t in state.topics}

    def acl_count(self, name: str) -> int:
        response = self.admin.req(29, 3, resource_type_filter=1, resource_name_filter=name,
                                  pattern_type_filter=1, principal_filter=None,
                                  host_filter=None, operation=1, permission_type=1)
        return len(response.resources)

    def topic_config(self, topic: str, key: str) -> str | None:
        response = self.admin.req(32, 4, resources=(self.admin.kind(
            32, 4, "DescribeConfigsResource", resource_type=2, resource_name=topic,
            configuration_keys=(key,)),))
        [result] = response.results
        return next((c.value for c in result.configs if c.name == key), None)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    sasl_port = free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("matrix") / "data", overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "group.initial.rebalance.delay.ms": "0",
    })
    process.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{process.port},"
                                      f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
    process.start()
    m: Matrix | None = None
    try:
        m = Matrix(sasl_port)
        m.ready()
        yield m
    finally:
        if m is not None:
            m.admin.close()
            m.alice.close()
        process.stop()


Case = Callable[[Matrix], None]
CASES: dict[int, Case] = {}


def case(api_key: int) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[api_key] = fn
        return fn
    return register


@pytest.mark.parametrize("api_key", sorted(set(OPERATIONS) | set(HANDLERS)))
def test_a_principal_without_the_permission_is_refused_and_with_it_served(
        matrix: Matrix, api_key: int) -> None:
    if api_key in SHARE_APIS:
        pytest.skip(f"{SHARE_APIS[api_key]}: the share groups' own authorization tests "
                    "cover it (share helper)")
    assert api_key in CASES, f"no authorization matrix case for API {api_key} " \
                             f"({OPERATIONS[api_key].name if api_key in OPERATIONS else '?'})"
    matrix.alice.close()  # a fresh connection: a failed case leaves nothing behind
    matrix.alice = Session(matrix.port, "alice")
    CASES[api_key](matrix)


# ---- produce, fetch, offsets, metadata --------------------------------------------------


@case(0)
def _produce(m: Matrix) -> None:
    m.create_topic("m-produce")
    assert m.produce(m.alice, "m-produce") == TOPIC_DENIED
    assert m.offsets("m-produce") == 0  # nothing appended
    with m.grant((R.TOPIC, "m-produce", Op.WRITE)):
        assert m.produce(m.alice, "m-produce") == OK
    assert m.offsets("m-produce") == 1


def _fetch(session: Session, topic: str) -> Any:
    return session.req(1, 12, replica_id=-1, max_wait=10 * MS, min_bytes=1,
                       max_bytes=1 << 20, topics=(session.kind(
                           1, 12, "FetchTopic", topic=topic, partitions=(session.kind(
                               1, 12, "FetchPartition", partition=0, fetch_offset=0,
                               partition_max_bytes=1 << 20),)),)).responses[0].partitions[0]


@case(1)
def _fetch_case(m: Matrix) -> None:
    m.create_topic("m-fetch")
    assert m.produce(m.admin, "m-fetch") == OK
    denied = _fetch(m.alice, "m-fetch")
    assert denied.error_code == TOPIC_DENIED and not denied.records
    with m.grant((R.TOPIC, "m-fetch", Op.READ)):
        allowed = _fetch(m.alice, "m-fetch")
    assert allowed.error_code == OK and allowed.records


@case(2)
def _list_offsets(m: Matrix) -> None:
    m.create_topic("m-list-offsets")

    def ask() -> Any:
        return m.alice.req(2, 7, replica_id=-1, topics=(m.alice.kind(
            2, 7, "ListOffsetsTopic", name="m-list-offsets", partitions=(m.alice.kind(
                2, 7, "ListOffsetsPartition", partition_index=0, timestamp=-1),)),)
        ).topics[0].partitions[0]

    assert ask().error_code == TOPIC_DENIED
    with m.grant((R.TOPIC, "m-list-offsets", Op.DESCRIBE)):
        assert ask().error_code == OK


@case(3)
def _metadata(m: Matrix) -> None:
    m.create_topic("m-metadata")

    def ask(name: str, create: bool = False) -> Any:
        return m.alice.req(3, 12, allow_auto_topic_creation=create, topics=(
            m.alice.kind(3, 12, "MetadataRequestTopic", name=name),)).topics[0]

    assert ask("m-metadata").error_code == TOPIC_DENIED
    assert ask("m-metadata-auto", create=True).error_code == TOPIC_DENIED
    assert m.topic_partitions("m-metadata-auto") == 0  # not auto-created
    with m.grant((R.TOPIC, "m-metadata", Op.DESCRIBE)):
        topic = ask("m-metadata")
    assert topic.error_code == OK and len(topic.partitions) == 1


@case(23)
def _offset_for_leader_epoch(m: Matrix) -> None:
    m.create_topic("m-ofle")

    def ask() -> Any:
        return m.alice.req(23, 4, replica_id=-1, topics=(m.alice.kind(
            23, 4, "OffsetForLeaderTopic", topic="m-ofle", partitions=(m.alice.kind(
                23, 4, "OffsetForLeaderPartition", partition=0, current_leader_epoch=-1,
                leader_epoch=0),)),)).topics[0].partitions[0]

    assert ask().error_code == TOPIC_DENIED
    with m.grant((R.TOPIC, "m-ofle", Op.DESCRIBE)):
        assert ask().error_code == OK


@case(75)
def _describe_topic_partitions(m: Matrix) -> None:
    m.create_topic("m-dtp")

    def ask() -> Any:
        return m.alice.req(75, 0, response_partition_limit=100, topics=(
            m.alice.kind(75, 0, "TopicRequest", name="m-dtp"),)).topics[0]

    assert ask().error_code == TOPIC_DENIED
    with m.grant((R.TOPIC, "m-dtp", Op.DESCRIBE)):
        topic = ask()
    assert topic.error_code == OK and len(topic.partitions) == 1


@case(61)
def _describe_producers(m: Matrix) -> None:
    m.create_topic("m-producers")

    def ask() -> Any:
        return m.alice.req(61, 0, topics=(m.alice.kind(
            61, 0, "TopicRequest", name="m-producers", partition_indexes=(0,)),)
        ).topics[0].partitions[0]

    assert ask().error_code == TOPIC_DENIED
    with m.grant((R.TOPIC, "m-producers", Op.READ)):
        assert ask().error_code == OK


@case(21)
def _delete_records(m: Matrix) -> None:
    m.create_topic("m-delete-records")
    assert m.produce(m.admin, "m-delete-records") == OK

    def ask() -> ErrorCode:
        response = m.alice.req(21, 2, timeout=30_000 * MS, topics=(m.alice.kind(
            21, 2, "DeleteRecordsTopic", name="m-delete-records", partitions=(m.alice.kind(
                21, 2, "DeleteRecordsPartition", partition_index=0, offset=1),)),))
        return ErrorCode(response.topics[0].partitions[0].error_code)

    assert ask() == TOPIC_DENIED
    assert m.offsets("m-delete-records", -2) == 0  # nothing deleted
    with m.grant((R.TOPIC, "m-delete-records", Op.DELETE)):
        assert ask() == OK
    assert m.offsets("m-delete-records", -2) == 1


# ---- groups ------------------------------------------------------------------------------


@case(8)
def _offset_commit(m: Matrix) -> None:
    m.create_topic("m-commit")
    response = m.commit(m.alice, "m-commit-g", "m-commit", 1)
    assert codes(response) == {GROUP_DENIED}
    with m.grant((R.GROUP, "m-commit-g", Op.READ)):
        # the group alone is not enough: READ on the topic too
        assert codes(m.commit(m.alice, "m-commit-g", "m-commit", 1)) == {TOPIC_DENIED}
        assert m.committed("m-commit-g", "m-commit") == -1  # nothing committed
        with m.grant((R.TOPIC, "m-commit", Op.READ)):
            assert codes(m.commit(m.alice, "m-commit-g", "m-commit", 1)) == {OK}
    assert m.committed("m-commit-g", "m-commit") == 1


@case(9)
def _offset_fetch(m: Matrix) -> None:
    m.create_topic("m-fetch-offsets")
    assert codes(m.commit(m.admin, "m-fetch-offsets-g", "m-fetch-offsets", 3)) == {OK}

    def ask() -> Any:
        return m.alice.req(9, 8, groups=(m.alice.kind(
            9, 8, "OffsetFetchRequestGroup", group_id="m-fetch-offsets-g", topics=(
                m.alice.kind(9, 8, "OffsetFetchRequestTopics", name="m-fetch-offsets",
                             partition_indexes=(0,)),)),)).groups[0]

    assert ask().error_code == GROUP_DENIED
    with m.grant((R.GROUP, "m-fetch-offsets-g", Op.DESCRIBE),
                 (R.TOPIC, "m-fetch-offsets", Op.DESCRIBE)):
        group = ask()
    assert group.error_code == OK
    assert group.topics[0].partitions[0].committed_offset == 3


@case(10)
def _find_coordinator(m: Matrix) -> None:
    def ask(key_type: int, key: str) -> Any:
        return m.alice.req(10, 4, key_type=key_type, coordinator_keys=(key,)).coordinators[0]

    assert ask(0, "m-find-g").error_code == GROUP_DENIED
    assert ask(1, "m-find-x").error_code == TXN_DENIED
    with m.grant((R.GROUP, "m-find-g", Op.DESCRIBE),
                 (R.TRANSACTIONAL_ID, "m-find-x", Op.DESCRIBE)):
        group, txn = ask(0, "m-find-g"), ask(1, "m-find-x")
    assert group.error_code == OK and group.node_id >= 0
    assert txn.error_code == OK and txn.node_id >= 0


def _join(session: Session, group: str, member_id: str = "") -> Any:
    protocol = session.kind(11, 5, "JoinGroupRequestProtocol", name="range", metadata=b"")
    return session.req(11, 5, group_id=group, session_timeout=30_000 * MS,
                       rebalance_timeout=30_000 * MS, member_id=member_id,
                       protocol_type="consumer", protocols=(protocol,))


def _joined(session: Session, group: str) -> tuple[str, int]:
    """A member of `group` (JoinGroup twice: Kafka asks for a member id first)."""
    first = _join(session, group)
    response = _join(session, group, str(first.member_id)) \
        if first.error_code == ErrorCode.member_id_required else first
    assert response.error_code == OK, response
    return str(response.member_id), int(response.generation_id)


@case(11)
def _join_group(m: Matrix) -> None:
    assert _join(m.alice, "m-join-g").error_code == GROUP_DENIED
    assert m.group_state("m-join-g") == "Dead"  # no group made
    with m.grant((R.GROUP, "m-join-g", Op.READ)):
        member, _ = _joined(m.alice, "m-join-g")
        assert member
        assert m.group_state("m-join-g") != "Dead"
        m.alice.req(13, 4, group_id="m-join-g", members=(
            m.alice.kind(13, 4, "MemberIdentity", member_id=member),))


def _sync(session: Session, group: str, member: str, generation: int) -> Any:
    return session.req(14, 5, group_id=group, generation_id=generation, member_id=member,
                       protocol_type="consumer", protocol_name="range", assignments=(
                           session.kind(14, 5, "SyncGroupRequestAssignment", member_id=member,
                                        assignment=b"\0\1"),))


@case(12)
def _heartbeat(m: Matrix) -> None:
    with m.grant((R.GROUP, "m-heartbeat-g", Op.READ)):
        member, generation = _joined(m.alice, "m-heartbeat-g")
        assert _sync(m.alice, "m-heartbeat-g", member, generation).error_code == OK

    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(12, 4, group_id="m-heartbeat-g", generation_id=generation,
                                     member_id=member).error_code)

    assert ask() == GROUP_DENIED
    with m.grant((R.GROUP, "m-heartbeat-g", Op.READ)):
        assert ask() == OK


@case(13)
def _leave_group(m: Matrix) -> None:
    with m.grant((R.GROUP, "m-leave-g", Op.READ)):
        member, _ = _joined(m.alice, "m-leave-g")

    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(13, 4, group_id="m-leave-g", members=(
            m.alice.kind(13, 4, "MemberIdentity", member_id=member),)).error_code)

    assert ask() == GROUP_DENIED
    members = m.admin.req(15, 5, groups=("m-leave-g",)).groups[0].members
    assert [x.member_id for x in members] == [member]  # still a member
    with m.grant((R.GROUP, "m-leave-g", Op.READ)):
        assert ask() == OK
    assert m.group_state("m-leave-g") == "Empty"


@case(14)
def _sync_group(m: Matrix) -> None:
    with m.grant((R.GROUP, "m-sync-g", Op.READ)):
        member, generation = _joined(m.alice, "m-sync-g")
    assert _sync(m.alice, "m-sync-g", member, generation).error_code == GROUP_DENIED
    assert m.group_state("m-sync-g") == "CompletingRebalance"  # no assignment taken
    with m.grant((R.GROUP, "m-sync-g", Op.READ)):
        assert _sync(m.alice, "m-sync-g", member, generation).error_code == OK
    assert m.group_state("m-sync-g") == "Stable"


@case(15)
def _describe_groups(m: Matrix) -> None:
    def ask() -> Any:
        return m.alice.req(15, 5, groups=("m-describe-g",),
                           include_authorized_operations=True).groups[0]

    assert ask().error_code == GROUP_DENIED
    with m.grant((R.GROUP, "m-describe-g", Op.DESCRIBE)):
        group = ask()
    assert group.error_code == OK
    assert group.authorized_operations == 1 << Op.DESCRIBE.value  # the flag: what it may do


@case(16)
def _list_groups(m: Matrix) -> None:
    m.create_topic("m-list-groups")
    assert codes(m.commit(m.admin, "m-list-groups-g", "m-list-groups", 1)) == {OK}

    def listed() -> set[str]:
        response = m.alice.req(16, 4)
        assert response.error_code == OK
        return {g.group_id for g in response.groups}

    assert "m-list-groups-g" not in listed()  # filtered, not refused
    with m.grant((R.GROUP, "m-list-groups-g", Op.DESCRIBE)):
        assert "m-list-groups-g" in listed()


@case(42)
def _delete_groups(m: Matrix) -> None:
    m.create_topic("m-delete-groups")
    assert codes(m.commit(m.admin, "m-delete-groups-g", "m-delete-groups", 1)) == {OK}

    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(42, 2, groups_names=("m-delete-groups-g",))
                         .results[0].error_code)

    assert ask() == GROUP_DENIED
    assert m.committed("m-delete-groups-g", "m-delete-groups") == 1  # still there
    with m.grant((R.GROUP, "m-delete-groups-g", Op.DELETE)):
        assert ask() == OK
    assert m.committed("m-delete-groups-g", "m-delete-groups") == -1


@case(47)
def _offset_delete(m: Matrix) -> None:
    m.create_topic("m-offset-delete")
    assert codes(m.commit(m.admin, "m-offset-delete-g", "m-offset-delete", 1)) == {OK}

    def ask() -> Any:
        return m.alice.req(47, 0, group_id="m-offset-delete-g", topics=(m.alice.kind(
            47, 0, "OffsetDeleteRequestTopic", name="m-offset-delete", partitions=(
                m.alice.kind(47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),))

    assert ask().error_code == GROUP_DENIED
    assert m.committed("m-offset-delete-g", "m-offset-delete") == 1
    with m.grant((R.GROUP, "m-offset-delete-g", Op.DELETE),
                 (R.TOPIC, "m-offset-delete", Op.READ)):
        assert codes(ask()) == {OK}
    assert m.committed("m-offset-delete-g", "m-offset-delete") == -1


@case(68)
def _consumer_group_heartbeat(m: Matrix) -> None:
    def ask() -> Any:
        return m.alice.req(68, 0, group_id="m-cg-g", member_id=str(uuid.uuid4()),
                           member_epoch=0, rebalance_timeout=30_000 * MS,
                           subscribed_topic_names=("m-cg",), topic_partitions=())

    assert ask().error_code == GROUP_DENIED
    assert m.admin.req(69, 0, group_ids=("m-cg-g",)).groups[0].error_code == \
        ErrorCode.group_id_not_found
    with m.grant((R.GROUP, "m-cg-g", Op.READ)):
        response = ask()
    assert response.error_code == OK and response.member_epoch >= 1


@case(69)
def _consumer_group_describe(m: Matrix) -> None:
    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(69, 0, group_ids=("m-cgd-g",)).groups[0].error_code)

    assert ask() == GROUP_DENIED
    with m.grant((R.GROUP, "m-cgd-g", Op.DESCRIBE)):
        assert ask() not in AUTH_ERRORS  # GROUP_ID_NOT_FOUND: it was looked up


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
