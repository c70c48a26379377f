"""Which permission every API needs: one table, read from Kafka's KafkaApis.handleX.

`OPERATIONS[api_key]` is an `ApiAuthorization`: the API's Kafka name (the
`for request = …` of the authorizer log) and its checks in the order Kafka makes them.
A check names the operation, the resource type, where the resource name comes from,
what a denial answers (the error code, and whether it fails the whole request, one
item of it, or silently leaves the item out), and when it applies. `any_of` holds
alternatives: the first allowed one suffices (Metadata auto-create: CREATE on the
cluster, else CREATE on the topic).

The request pipeline can enforce the `Scope.REQUEST` checks on CLUSTER generically
(`cluster_checks`); per-topic, per-group and per-id checks belong to the handlers,
which know the names. docs/security.md's table is generated from this one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType

Op = AclOperation
R = ResourceType


class NameFrom(enum.Enum):
    CLUSTER = "kafka-cluster"
    TOPIC = "each topic"
    GROUP = "the group id"
    TRANSACTIONAL_ID = "the transactional id"
    CONFIG_RESOURCE = "each config resource"


class Scope(enum.Enum):
    REQUEST = "whole request"  # the API's error response, nothing done
    ITEM = "per item"  # that topic/partition/group/resource gets the error
    FILTER = "filtered"  # unauthorized items are left out of the response silently
    FLAG = "flag only"  # decides a detail (authorized_operations, config visibility)


@dataclass(frozen=True)
class Permission:
    operation: AclOperation
    resource_type: ResourceType
    name_from: NameFrom

    def __str__(self) -> str:
        where = "the config resource" if self.resource_type is R.ANY else self.resource_type.pascal
        return f"{self.operation.pascal} on {where}"


@dataclass(frozen=True)
class Check:
    any_of: tuple[Permission, ...]
    error: ErrorCode
    scope: Scope
    when: str = ""  # empty: always
    log_if_denied: bool = True

    def __str__(self) -> str:
        return " or ".join(map(str, self.any_of))


@dataclass(frozen=True)
class ApiAuthorization:
    api_key: int
    name: str
    checks: tuple[Check, ...]
    note: str = ""


def _p(op: AclOperation, rtype: ResourceType) -> Permission:
    name_from = {R.CLUSTER: NameFrom.CLUSTER, R.TOPIC: NameFrom.TOPIC, R.GROUP: NameFrom.GROUP,
                 R.TRANSACTIONAL_ID: NameFrom.TRANSACTIONAL_ID}[rtype]
    return Permission(op, rtype, name_from)


def _c(op: AclOperation, rtype: ResourceType, scope: Scope, when: str = "", *,
       alt: tuple[Permission, ...] = (), log: bool = True,
       error: ErrorCode | None = None) -> Check:
    err = error or {
        R.TOPIC: ErrorCode.topic_authorization_failed,
        R.GROUP: ErrorCode.group_authorization_failed,
        R.CLUSTER: ErrorCode.cluster_authorization_failed,
        R.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
    }[rtype]
    return Check((_p(op, rtype), *alt), err, scope, when, log)


REQ, ITEM, FILTER, FLAG = Scope.REQUEST, Scope.ITEM, Scope.FILTER, Scope.FLAG
_CONFIG_RESOURCE = ("per resource: BROKER/BROKER_LOGGER on the cluster, TOPIC on the topic, "
                    "GROUP on the group")

_TABLE: tuple[ApiAuthorization, ...] = (
    ApiAuthorization(0, "Produce", (
        _c(Op.WRITE, R.TRANSACTIONAL_ID, REQ, "the records are transactional"),
        _c(Op.WRITE, R.TOPIC, ITEM),
    ), "idempotence is authorized once, at InitProducerId"),
    ApiAuthorization(1, "Fetch", (
        _c(Op.CLUSTER_ACTION, R.CLUSTER, ITEM, "replica_id >= 0 (a follower)",
           error=ErrorCode.topic_authorization_failed),
        _c(Op.READ, R.TOPIC, ITEM, "a consumer"),
    ), "a follower without CLUSTER_ACTION gets TOPIC_AUTHORIZATION_FAILED on every partition"),
    ApiAuthorization(2, "ListOffsets", (_c(Op.DESCRIBE, R.TOPIC, ITEM),)),
    ApiAuthorization(3, "Metadata", (
        _c(Op.DESCRIBE, R.TOPIC, ITEM, "named topics; all-topics requests filter instead"),
        _c(Op.CREATE, R.CLUSTER, ITEM, "auto-creating a missing topic",
           alt=(_p(Op.CREATE, R.TOPIC),), log=False, error=ErrorCode.topic_authorization_failed),
        _c(Op.DESCRIBE, R.CLUSTER, FLAG, "include_cluster_authorized_operations"),
    )),
    ApiAuthorization(8, "OffsetCommit", (
        _c(Op.READ, R.GROUP, REQ), _c(Op.READ, R.TOPIC, ITEM))),
    ApiAuthorization(9, "OffsetFetch", (
        _c(Op.DESCRIBE, R.GROUP, REQ, "per group in v8+"),
        _c(Op.DESCRIBE, R.TOPIC, ITEM, "named topics; all-topics requests filter instead"),
    )),
    ApiAuthorization(10, "FindCoordinator", (
        _c(Op.DESCRIBE, R.GROUP, ITEM, "key_type GROUP"),
        _c(Op.DESCRIBE, R.TRANSACTIONAL_ID, ITEM, "key_type TRANSACTION"),
    ), "per key in v4+, the whole response before"),
    ApiAuthorization(11, "JoinGroup", (_c(Op.READ, R.GROUP, REQ),)),
    ApiAuthorization(12, "Heartbeat", (_c(Op.READ, R.GROUP, REQ),)),
    ApiAuthorization(13, "LeaveGroup", (_c(Op.READ, R.GROUP, REQ),)),
    ApiAuthorization(14, "SyncGroup", (_c(Op.READ, R.GROUP, REQ),)),
    ApiAuthorization(15, "DescribeGroups", (_c(Op.DESCRIBE, R.GROUP, ITEM),)),
    ApiAuthorization(16, "ListGroups", (
        _c(Op.DESCRIBE, R.CLUSTER, FILTER, "", alt=(_p(Op.DESCRIBE, R.GROUP),), log=False),
    ), "DESCRIBE on the cluster lists every group; otherwise only DESCRIBE-able groups"),
    ApiAuthorization(17, "SaslHandshake", (), "before authentication: no check"),
    ApiAuthorization(18, "ApiVersions", (), "no check"),
    ApiAuthorization(19, "CreateTopics", (
        _c(Op.CREATE, R.CLUSTER, ITEM, "", alt=(_p(Op.CREATE, R.TOPIC),), log=False,
           error=ErrorCode.topic_authorization_failed),
        _c(Op.DESCRIBE_CONFIGS, R.TOPIC, FLAG, "configs in the response", log=False),
    )),
    ApiAuthorization(20, "DeleteTopics", (
        _c(Op.DESCRIBE, R.TOPIC, ITEM, "topics named by id"),
        _c(Op.DELETE, R.TOPIC, ITEM),
    )),
    ApiAuthorization(21, "DeleteRecords", (_c(Op.DELETE, R.TOPIC, ITEM),)),
    ApiAuthorization(22, "InitProducerId", (
        _c(Op.WRITE, R.TRANSACTIONAL_ID, REQ, "a transactional id is given"),
        _c(Op.IDEMPOTENT_WRITE, R.CLUSTER, REQ, "no transactional id", log=False),
    ), "without IDEMPOTENT_WRITE, WRITE on any topic (authorizeByResourceType) suffices"),
    ApiAuthorization(23, "OffsetForLeaderEpoch", (
        _c(Op.CLUSTER_ACTION, R.CLUSTER, ITEM, "", alt=(_p(Op.DESCRIBE, R.TOPIC),), log=False,
           error=ErrorCode.topic_authorization_failed),
    )),
    ApiAuthorization(24, "AddPartitionsToTxn", (
        _c(Op.CLUSTER_ACTION, R.CLUSTER, REQ, "v4+ (broker to broker)"),
        _c(Op.WRITE, R.TRANSACTIONAL_ID, REQ, "v0-3"),
        _c(Op.WRITE, R.TOPIC, ITEM, "v0-3; other partitions answer OPERATION_NOT_ATTEMPTED"),
    ), "v0-3: an internal topic is always TOPIC_AUTHORIZATION_FAILED; nothing is added "
       "unless every partition passes"),
    ApiAuthorization(25, "AddOffsetsToTxn", (
        _c(Op.WRITE, R.TRANSACTIONAL_ID, REQ), _c(Op.READ, R.GROUP, REQ))),
    ApiAuthorization(26, "EndTxn", (_c(Op.WRITE, R.TRANSACTIONAL_ID, REQ),)),
    ApiAuthorization(27, "WriteTxnMarkers", (
        _c(Op.ALTER, R.CLUSTER, REQ, "", alt=(_p(Op.CLUSTER_ACTION, R.CLUSTER),)),
    ), "every partition answers CLUSTER_AUTHORIZATION_FAILED; only the ClusterAction "
       "denial is logged"),
    ApiAuthorization(28, "TxnOffsetCommit", (
        _c(Op.WRITE, R.TRANSACTIONAL_ID, REQ), _c(Op.READ, R.GROUP, REQ),
        _c(Op.READ, R.TOPIC, ITEM))),
    ApiAuthorization(29, "DescribeAcls", (_c(Op.DESCRIBE, R.CLUSTER, REQ),),
                     "SECURITY_DISABLED when no authorizer is configured"),
    ApiAuthorization(30, "CreateAcls", (_c(Op.ALTER, R.CLUSTER, REQ),),
                     "SECURITY_DISABLED when no authorizer is configured"),
    ApiAuthorization(31, "DeleteAcls", (_c(Op.ALTER, R.CLUSTER, REQ),),
                     "SECURITY_DISABLED when no authorizer is configured"),
    ApiAuthorization(32, "DescribeConfigs", (
        Check((Permission(Op.DESCRIBE_CONFIGS, R.ANY, NameFrom.CONFIG_RESOURCE),),
              ErrorCode.cluster_authorization_failed, ITEM, _CONFIG_RESOURCE),
    ), "the error is CLUSTER_/TOPIC_/GROUP_AUTHORIZATION_FAILED by resource type"),
    ApiAuthorization(33, "AlterConfigs", (
        Check((Permission(Op.ALTER_CONFIGS, R.ANY, NameFrom.CONFIG_RESOURCE),),
              ErrorCode.cluster_authorization_failed, ITEM, _CONFIG_RESOURCE),
    ), "the error is CLUSTER_/TOPIC_/GROUP_AUTHORIZATION_FAILED by resource type"),
    ApiAuthorization(34, "AlterReplicaLogDirs", (_c(Op.ALTER, R.CLUSTER, REQ),)),
    ApiAuthorization(35, "DescribeLogDirs", (_c(Op.DESCRIBE, R.CLUSTER, REQ),),
                     "no log dirs in the answer; the error code itself from v3"),
    ApiAuthorization(36, "SaslAuthenticate", (), "the authentication itself: no check"),
    ApiAuthorization(37, "CreatePartitions", (_c(Op.ALTER, R.TOPIC, ITEM),)),
    ApiAuthorization(42, "DeleteGroups", (_c(Op.DELETE, R.GROUP, ITEM),)),
    ApiAuthorization(43, "ElectLeaders", (_c(Op.ALTER, R.CLUSTER, REQ),)),
    ApiAuthorization(44, "IncrementalAlterConfigs", (
        Check((Permission(Op.ALTER_CONFIGS, R.ANY, NameFrom.CONFIG_RESOURCE),),
              ErrorCode.cluster_authorization_failed, ITEM, _CONFIG_RESOURCE),
    ), "the error is CLUSTER_/TOPIC_/GROUP_AUTHORIZATION_FAILED by resource type"),
    ApiAuthorization(45, "AlterPartitionReassignments", (_c(Op.ALTER, R.CLUSTER, REQ),)),
    ApiAuthorization(46, "ListPartitionReassignments", (_c(Op.DESCRIBE, R.CLUSTER, REQ),)),
    ApiAuthorization(47, "OffsetDelete", (
        _c(Op.DELETE, R.GROUP, REQ), _c(Op.READ, R.TOPIC, ITEM))),
    ApiAuthorization(48, "DescribeClientQuotas", (_c(Op.DESCRIBE_CONFIGS, R.CLUSTER, REQ),)),
    ApiAuthorization(49, "AlterClientQuotas", (_c(Op.ALTER_CONFIGS, R.CLUSTER, REQ),)),
    ApiAuthorization(50, "DescribeUserScramCredentials", (_c(Op.DESCRIBE, R.CLUSTER, REQ),)),
    ApiAuthorization(51, "AlterUserScramCredentials", (_c(Op.ALTER, R.CLUSTER, REQ),)),
    ApiAuthorization(57, "UpdateFeatures", (_c(Op.ALTER, R.CLUSTER, REQ),)),
    ApiAuthorization(60, "DescribeCluster", (
        _c(Op.DESCRIBE, R.CLUSTER, FLAG, "include_cluster_authorized_operations"),
    ), "no check to describe the cluster itself"),
    ApiAuthorization(61, "DescribeProducers", (_c(Op.READ, R.TOPIC, ITEM),)),
    ApiAuthorization(65, "DescribeTransactions", (
        _c(Op.DESCRIBE, R.TRANSACTIONAL_ID, ITEM),
        _c(Op.DESCRIBE, R.TOPIC, FILTER, "partitions listed in a transaction"),
    )),
    ApiAuthorization(66, "ListTransactions", (
        _c(Op.DESCRIBE, R.TRANSACTIONAL_ID, FILTER),)),
    ApiAuthorization(68, "ConsumerGroupHeartbeat", (_c(Op.READ, R.GROUP, REQ),)),
    ApiAuthorization(69, "ConsumerGroupDescribe", (_c(Op.DESCRIBE, R.GROUP, ITEM),)),
    ApiAuthorization(71, "GetTelemetrySubscriptions", (), "no check, as in Kafka"),
    ApiAuthorization(72, "PushTelemetry", (), "no check, as in Kafka"),
    ApiAuthorization(74, "ListConfigResources", (_c(Op.DESCRIBE_CONFIGS, R.CLUSTER, REQ),)),
    ApiAuthorization(75, "DescribeTopicPartitions", (
        _c(Op.DESCRIBE, R.TOPIC, ITEM, "named topics; all-topics requests filter instead"),)),
    # share groups (KIP-932), as Kafka 4.x's KafkaApis checks them
    ApiAuthorization(76, "ShareGroupHeartbeat", (
        _c(Op.READ, R.GROUP, REQ),
        _c(Op.DESCRIBE, R.TOPIC, REQ, "every subscribed topic"))),
    ApiAuthorization(77, "ShareGroupDescribe", (_c(Op.DESCRIBE, R.GROUP, ITEM),)),
    ApiAuthorization(78, "ShareFetch", (
        _c(Op.READ, R.GROUP, REQ), _c(Op.READ, R.TOPIC, ITEM))),
    ApiAuthorization(79, "ShareAcknowledge", (
        _c(Op.READ, R.GROUP, REQ), _c(Op.READ, R.TOPIC, ITEM))),
    # the share coordinator's inter-broker APIs
    ApiAuthorization(83, "InitializeShareGroupState", (_c(Op.CLUSTER_ACTION, R.CLUSTER, REQ),)),
    ApiAuthorization(84, "ReadShareGroupState", (_c(Op.CLUSTER_ACTION, R.CLUSTER, REQ),)),
    ApiAuthorization(85, "WriteShareGroupState", (_c(Op.CLUSTER_ACTION, R.CLUSTER, REQ),)),
    ApiAuthorization(86, "DeleteShareGroupState", (_c(Op.CLUSTER_ACTION, R.CLUSTER, REQ),)),
    ApiAuthorization(87, "ReadShareGroupStateSummary", (
        _c(Op.CLUSTER_ACTION, R.CLUSTER, REQ),)),
    ApiAuthorization(90, "DescribeShareGroupOffsets", (
        _c(Op.DESCRIBE, R.GROUP, ITEM), _c(Op.DESCRIBE, R.TOPIC, ITEM))),
    ApiAuthorization(91, "AlterShareGroupOffsets", (
        _c(Op.READ, R.GROUP, REQ), _c(Op.READ, R.TOPIC, ITEM))),
    ApiAuthorization(92, "DeleteShareGroupOffsets", (
        _c(Op.DELETE, R.GROUP, REQ), _c(Op.READ, R.TOPIC, ITEM))),
)

OPERATIONS: dict[int, ApiAuthorization] = {a.api_key: a for a in _TABLE}
API_NAMES: dict[int, str] = {a.api_key: a.name for a in _TABLE}


def api_name(api_key: int) -> str:
    """Kafka's ApiKeys name for the authorizer log's `for request = …`."""
    return API_NAMES.get(api_key, f"ApiKey{api_key}")


def cluster_checks(api_key: int) -> tuple[Check, ...]:
    """The unconditional whole-request checks on the cluster: what the pipeline can
    enforce before the handler runs (answer the API's error response with `error`)."""
    a = OPERATIONS.get(api_key)
    if a is None:
        return ()
    return tuple(c for c in a.checks if c.scope is Scope.REQUEST and not c.when
                 and all(p.resource_type is R.CLUSTER for p in c.any_of))


CLUSTER_RESOURCE_NAME = CLUSTER_NAME


def markdown_table() -> str:
    """docs/security.md's table: every API, the permission it needs, the error."""
    rows = ["| Key | API | Permission (operation on resource) | When | Denied → | Scope |",
            "|---:|---|---|---|---|---|"]
    for a in sorted(_TABLE, key=lambda x: x.api_key):
        if not a.checks:
            rows.append(f"| {a.api_key} | {a.name} | none | {a.note} | | |")
            continue
        for i, c in enumerate(a.checks):
            key, name = (str(a.api_key), a.name) if i == 0 else ("", "")
            names = ", ".join(dict.fromkeys(p.name_from.value for p in c.any_of))
            rows.append(f"| {key} | {name} | {c} ({names}) | {c.when} | "
                        f"{c.error.name.upper()} | {c.scope.value} |")
        if a.note:
            rows.append(f"| | | | *{a.note}* | | |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # regenerate docs/security.md's table
    print(markdown_table(), end="")
