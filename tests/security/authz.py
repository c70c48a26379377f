"""The authorization matrix's tools: raw requests over an authenticated SASL PLAIN
connection (Session), what a case checks before and after (Matrix: offsets, committed
offsets, topics, configs, transactions, ACLs as `admin` sees them), grants that are
removed after their case, and the registry of cases by API key (test_authz_matrix.py
runs them)."""

from __future__ import annotations

import contextlib
import datetime
import time
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class
from odradek.protocol.records import NewRecord, encode_batch
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as R
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




Case = Callable[[Matrix], None]
CASES: dict[int, Case] = {}


def case(api_key: int) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[api_key] = fn
        return fn
    return register

