"""The request pipeline's authorization step: the permission Kafka's broker checks for
each API (odradek.security.operations), decided by the ACL authorizer.

A check on the whole request (the group of a JoinGroup, the transactional id of an
EndTxn, ALTER on the cluster for ElectLeaders) answers the API's error response with
Kafka's code. A check per item (each topic of a Produce, each group of a DescribeGroups)
narrows the request to the allowed items before the handler sees it and adds the denied
ones back to the response with their error — the same request/response mirrors that
build error responses (error_responses.py). Listings filter (Metadata of all topics,
ListGroups). Fetch and Metadata consult `ctx.topic_denied` themselves, ListGroups
`ctx.group_denied`.

An API with checks this step does not know yet is served to super users only: with an
authorizer configured, nothing is ever allowed by omission.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages import response_class
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as R
from odradek.security.authorizer import AclAuthorizer, Action, Decision
from odradek.security.authorizer import RequestContext as AuthContext
from odradek.security.operations import api_name, cluster_checks
from odradek.security.principal import ANONYMOUS
from odradek.server.error_responses import error_response
from odradek.server.handlers.base import RequestContext
from odradek.server.handlers.fetch import replica_id_of

TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed

# API -> (request list, the item's topic-name field, operation) for per-topic checks
_TOPIC_ITEMS: dict[int, tuple[str, str, Op]] = {
    0: ("topic_data", "name", Op.WRITE),
    2: ("topics", "name", Op.DESCRIBE),
    8: ("topics", "name", Op.READ),
    21: ("topics", "name", Op.DELETE),
    23: ("topics", "topic", Op.DESCRIBE),
    28: ("topics", "name", Op.READ),
    37: ("topics", "name", Op.ALTER),
    47: ("topics", "name", Op.READ),
    61: ("topics", "name", Op.READ),
}
# API -> (request list of group ids, operation) for per-group checks
_GROUP_ITEMS: dict[int, tuple[str, Op]] = {
    42: ("groups_names", Op.DELETE), 77: ("group_ids", Op.DESCRIBE),
}
# API -> operation on the request's group_id
_GROUP_REQUEST: dict[int, Op] = {
    8: Op.READ, 11: Op.READ, 12: Op.READ, 13: Op.READ, 14: Op.READ, 25: Op.READ,
    28: Op.READ, 47: Op.DELETE, 68: Op.READ,
    76: Op.READ, 78: Op.READ, 79: Op.READ, 91: Op.READ, 92: Op.DELETE,
}
_TXN_REQUEST = (25, 26, 28)  # WRITE on the request's transactional_id
_NO_CHECK = frozenset({17, 18, 36, 71, 72})
_HANDLED_HERE = frozenset({0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 20, 21, 22,
                           23, 24, 25, 26, 28, 32, 33, 37, 42, 44, 47, 60, 61, 65, 66, 68, 69,
                           75, 76, 77, 78, 79, 90, 91, 92})


def _with(request: Any, field: str, items: tuple[Any, ...]) -> Any:
    """The request with one list replaced: a kio dataclass, or the NamedTuple of the
    produce fast path (protocol/produce_request.py)."""
    if hasattr(request, "_replace"):
        return request._replace(**{field: list(items)})
    return replace(request, **{field: items})


@dataclass
class Verdict:
    request: Any
    finish: Callable[[Any], Any] | None = None  # adds the denied items to the response


class RequestAuthorizer:
    def __init__(self, acls: AclAuthorizer) -> None:
        self.acls = acls

    # ---- decisions ---------------------------------------------------------------------

    def _ctx(self, ctx: RequestContext) -> AuthContext:
        principal = ctx.security.principal if ctx.security is not None else ANONYMOUS
        return AuthContext(principal, ctx.client_host, api_name(ctx.header.api_key))

    def allowed(self, ctx: RequestContext, op: Op, rtype: R, name: str,
                log_denied: bool = True) -> bool:
        return self.acls.authorize_one(self._ctx(ctx), Action(
            op, rtype, name, log_if_denied=log_denied)) is Decision.ALLOWED

    def cluster(self, ctx: RequestContext, op: Op, log_denied: bool = True) -> bool:
        return self.allowed(ctx, op, R.CLUSTER, "kafka-cluster", log_denied)

    def operations(self, ctx: RequestContext, rtype: R, name: str) -> int:
        """Kafka's `authorized_operations` bit field: bit n set for operation code n."""
        return sum(1 << op.value for op in self.acls.authorized_operations(
            self._ctx(ctx), rtype, name))

    def _super(self, ctx: RequestContext) -> bool:
        principal = ctx.security.principal if ctx.security is not None else ANONYMOUS
        return str(principal) in self.acls.super_users

    # ---- the step ----------------------------------------------------------------------

    def __call__(self, ctx: RequestContext, request: Any) -> Verdict:
        """Raises KafkaError for a whole-request denial (the pipeline answers the API's
        error response with its code)."""
        api = ctx.header.api_key
        if api in _NO_CHECK:
            return Verdict(request)
        for check in cluster_checks(api):
            # as Kafka: the alternatives before the last are asked without logging a denial
            *first, last = check.any_of
            if not (any(self.cluster(ctx, p.operation, log_denied=False) for p in first)
                    or self.cluster(ctx, last.operation, check.log_if_denied)):
                answer = getattr(self, f"_cluster_denied_{api}", None)
                if answer is not None:  # an API whose error response is not generic
                    denied: Verdict = answer(ctx, request)
                    return denied
                raise KafkaError("Cluster authorization failed.", check.error)
        if api not in _HANDLED_HERE and not cluster_checks(api):
            if not self._super(ctx):
                raise KafkaError(f"{api_name(api)} is open to super users only while its "
                                 "ACL checks are not implemented", CLUSTER_DENIED)
            return Verdict(request)
        txn_id = getattr(request, "transactional_id", None)
        if api in _TXN_REQUEST and not self.allowed(ctx, Op.WRITE, R.TRANSACTIONAL_ID,
                                                     txn_id or ""):
            raise KafkaError("Transactional Id authorization failed.", TXN_DENIED)
        if api in _GROUP_REQUEST and not self.allowed(ctx, _GROUP_REQUEST[api], R.GROUP,
                                                       request.group_id):
            raise KafkaError("Group authorization failed.", GROUP_DENIED)
        special = getattr(self, f"_api_{api}", None)
        if special is not None:
            verdict: Verdict = special(ctx, request)
            return verdict
        if api in _TOPIC_ITEMS:
            field, name_field, op = _TOPIC_ITEMS[api]
            return self._narrow(ctx, request, field, TOPIC_DENIED, lambda item: self.allowed(
                ctx, op, R.TOPIC, getattr(item, name_field)))
        if api in _GROUP_ITEMS:
            field, op = _GROUP_ITEMS[api]
            return self._narrow(ctx, request, field, GROUP_DENIED,
                                lambda g: self.allowed(ctx, op, R.GROUP, g))
        return Verdict(request)

    def _narrow(self, ctx: RequestContext, request: Any, field: str,
                code: ErrorCode | Callable[[Any], ErrorCode],
                allowed: Callable[[Any], bool]) -> Verdict:
        """The handler gets the allowed items; the response gets the denied ones back,
        each with its error (`code`, or `code(item)`), as Kafka's per-item checks answer."""
        items = getattr(request, field, None)
        if not items:
            return Verdict(request)
        keep = tuple(i for i in items if allowed(i))
        if len(keep) == len(items):
            return Verdict(request)
        by_code: dict[ErrorCode, list[Any]] = {}
        for item in items:
            if item not in keep:
                by_code.setdefault(code(item) if callable(code) else code, []).append(item)
        errors = [error_response(ctx.header.api_key, ctx.version,
                                 _with(request, field, tuple(denied)), c, None)
                  for c, denied in by_code.items()]

        def finish(response: Any) -> Any:
            if response is None or not hasattr(response, "__dataclass_fields__"):
                return response
            for name in response.__dataclass_fields__:
                value = getattr(response, name)
                if not isinstance(value, tuple):
                    continue
                extra = tuple(x for e in errors if e is not None
                              for x in getattr(e, name, ()))
                if extra:
                    return replace(response, **{name: value + extra})
            return response

        return Verdict(_with(request, field, keep), finish)

    # ---- APIs with their own shape -------------------------------------------------------

    def _api_1(self, ctx: RequestContext, request: Any) -> Verdict:  # Fetch
        if replica_id_of(request) >= 0:  # a follower
            if not self.cluster(ctx, Op.CLUSTER_ACTION):
                ctx.topic_denied = lambda _name: True
            return Verdict(request)
        ctx.topic_denied = lambda name: not self.allowed(ctx, Op.READ, R.TOPIC, name)
        return Verdict(request)

    def _api_3(self, ctx: RequestContext, request: Any) -> Verdict:  # Metadata
        ctx.topic_denied = lambda name: not self.allowed(
            ctx, Op.DESCRIBE, R.TOPIC, name, log_denied=request.topics is not None)
        if getattr(request, "allow_auto_topic_creation", False) and not self.cluster(
                ctx, Op.CREATE, log_denied=False):
            # per topic: CREATE on the topic itself also allows its auto-creation
            ctx.topic_creatable = lambda name: self.allowed(ctx, Op.CREATE, R.TOPIC, name)
        topics = getattr(request, "include_topic_authorized_operations", False)
        cluster = getattr(request, "include_cluster_authorized_operations", False)
        if not (topics or cluster):
            return Verdict(request)

        def finish(response: Any) -> Any:
            if topics:
                response = replace(response, topics=tuple(
                    replace(t, topic_authorized_operations=self.operations(
                        ctx, R.TOPIC, t.name)) if t.error_code == 0 else t
                    for t in response.topics))
            if cluster:
                response = replace(response, cluster_authorized_operations=self.operations(
                    ctx, R.CLUSTER, "kafka-cluster"))
            return response

        return Verdict(request, finish)

    def _groups_operations(self, ctx: RequestContext, request: Any, field: str) -> Verdict:
        """DescribeGroups, ConsumerGroupDescribe: per group DESCRIBE, and the groups'
        authorized operations when asked."""
        verdict = self._narrow(ctx, request, field, GROUP_DENIED,
                               lambda g: self.allowed(ctx, Op.DESCRIBE, R.GROUP, g))
        if not request.include_authorized_operations:
            return verdict
        first = verdict.finish

        def finish(response: Any) -> Any:
            response = replace(response, groups=tuple(
                replace(g, authorized_operations=self.operations(ctx, R.GROUP, g.group_id))
                if g.error_code == 0 else g for g in response.groups))
            return first(response) if first is not None else response

        return Verdict(verdict.request, finish)

    def _api_15(self, ctx: RequestContext, request: Any) -> Verdict:  # DescribeGroups
        return self._groups_operations(ctx, request, "groups")

    def _api_69(self, ctx: RequestContext, request: Any) -> Verdict:  # ConsumerGroupDescribe
        return self._groups_operations(ctx, request, "group_ids")

    def _api_60(self, ctx: RequestContext, request: Any) -> Verdict:  # DescribeCluster
        if not request.include_cluster_authorized_operations:
            return Verdict(request)
        return Verdict(request, lambda response: replace(
            response, cluster_authorized_operations=self.operations(
                ctx, R.CLUSTER, "kafka-cluster")))

    def _api_75(self, ctx: RequestContext, request: Any) -> Verdict:  # DescribeTopicPartitions
        ctx.topic_denied = lambda name: not self.allowed(
            ctx, Op.DESCRIBE, R.TOPIC, name, log_denied=bool(request.topics))
        return Verdict(request)

    # ---- share groups: the share handlers consult ctx.topic_denied per topic ------------

    def _api_76(self, ctx: RequestContext, request: Any) -> Verdict:  # ShareGroupHeartbeat
        names = set(request.subscribed_topic_names or ())
        # as Kafka: a member may not subscribe to topics it cannot see
        if any(not self.allowed(ctx, Op.DESCRIBE, R.TOPIC, n) for n in sorted(names)):
            raise KafkaError("The group has subscribed to topics that are not authorized.",
                             TOPIC_DENIED)
        return Verdict(request)

    def _share_topics(self, ctx: RequestContext, op: Op) -> None:
        ctx.topic_denied = lambda name: not self.allowed(ctx, op, R.TOPIC, name)

    def _api_78(self, ctx: RequestContext, request: Any) -> Verdict:  # ShareFetch
        self._share_topics(ctx, Op.READ)
        return Verdict(request)

    def _api_79(self, ctx: RequestContext, request: Any) -> Verdict:  # ShareAcknowledge
        self._share_topics(ctx, Op.READ)
        return Verdict(request)

    def _api_91(self, ctx: RequestContext, request: Any) -> Verdict:  # AlterShareGroupOffsets
        self._share_topics(ctx, Op.READ)
        return Verdict(request)

    def _api_92(self, ctx: RequestContext, request: Any) -> Verdict:  # DeleteShareGroupOffsets
        self._share_topics(ctx, Op.READ)
        return Verdict(request)

    def _api_90(self, ctx: RequestContext, request: Any) -> Verdict:
        """DescribeShareGroupOffsets: DESCRIBE on each group (a denied one answers
        GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic (its partitions answer
        TOPIC_AUTHORIZATION_FAILED)."""
        self._share_topics(ctx, Op.DESCRIBE)
        denied = [g.group_id for g in request.groups
                  if not self.allowed(ctx, Op.DESCRIBE, R.GROUP, g.group_id)]
        if not denied:
            return Verdict(request)
        keep = tuple(g for g in request.groups if g.group_id not in denied)

        def finish(response: Any) -> Any:
            schema = ctx.schema
            extra = tuple(schema.DescribeShareGroupOffsetsResponseGroup(
                group_id=g, topics=(), error_code=GROUP_DENIED,
                error_message="Group authorization failed.") for g in denied)
            return replace(response, groups=tuple(response.groups) + extra)

        return Verdict(replace(request, groups=keep), finish)

    def _api_9(self, ctx: RequestContext, request: Any) -> Verdict:  # OffsetFetch
        if ctx.version >= 8:
            return self._narrow(ctx, request, "groups", GROUP_DENIED, lambda g: self.allowed(
                ctx, Op.DESCRIBE, R.GROUP, g.group_id))
        if not self.allowed(ctx, Op.DESCRIBE, R.GROUP, request.group_id):
            raise KafkaError("Group authorization failed.", GROUP_DENIED)
        return self._narrow(ctx, request, "topics", TOPIC_DENIED, lambda t: self.allowed(
            ctx, Op.DESCRIBE, R.TOPIC, t.name))

    def _api_10(self, ctx: RequestContext, request: Any) -> Verdict:  # FindCoordinator
        if getattr(request, "key_type", 0) == 2:  # SHARE: brokers ask it, as Kafka checks
            if not self.cluster(ctx, Op.CLUSTER_ACTION):
                raise KafkaError("Cluster authorization failed.", CLUSTER_DENIED)
            return Verdict(request)
        rtype = R.TRANSACTIONAL_ID if getattr(request, "key_type", 0) == 1 else R.GROUP
        code = TXN_DENIED if rtype is R.TRANSACTIONAL_ID else GROUP_DENIED
        if ctx.version >= 4:
            return self._narrow(ctx, request, "coordinator_keys", code,
                                lambda key: self.allowed(ctx, Op.DESCRIBE, rtype, key))
        if not self.allowed(ctx, Op.DESCRIBE, rtype, request.key):
            raise KafkaError("Authorization failed.", code)
        return Verdict(request)

    def _api_16(self, ctx: RequestContext, request: Any) -> Verdict:  # ListGroups
        if self.cluster(ctx, Op.DESCRIBE, log_denied=False):
            return Verdict(request)

        ctx.group_denied = lambda group_id: not self.allowed(
            ctx, Op.DESCRIBE, R.GROUP, group_id, log_denied=False)
        return Verdict(request)

    def _api_19(self, ctx: RequestContext, request: Any) -> Verdict:  # CreateTopics
        if self.cluster(ctx, Op.CREATE, log_denied=False):
            return Verdict(request)
        return self._narrow(ctx, request, "topics", TOPIC_DENIED, lambda t: self.allowed(
            ctx, Op.CREATE, R.TOPIC, t.name))

    def _api_20(self, ctx: RequestContext, request: Any) -> Verdict:  # DeleteTopics
        image = ctx.metadata.image
        if hasattr(request, "topic_names"):
            return self._narrow(ctx, request, "topic_names", TOPIC_DENIED,
                                lambda name: self.allowed(ctx, Op.DELETE, R.TOPIC, name))

        def name_of(t: Any) -> str:
            if t.name is not None:
                return str(t.name)
            info = image.topic_by_id(t.topic_id)
            return info.name if info is not None else ""

        return self._narrow(ctx, request, "topics", TOPIC_DENIED, lambda t: self.allowed(
            ctx, Op.DELETE, R.TOPIC, name_of(t)))

    def _api_22(self, ctx: RequestContext, request: Any) -> Verdict:  # InitProducerId
        if request.transactional_id is not None:
            if not self.allowed(ctx, Op.WRITE, R.TRANSACTIONAL_ID, request.transactional_id):
                raise KafkaError("Transactional Id authorization failed.", TXN_DENIED)
        elif not (self.cluster(ctx, Op.IDEMPOTENT_WRITE, log_denied=False)
                  or self.acls.authorize_by_resource_type(self._ctx(ctx), Op.WRITE, R.TOPIC)
                  is Decision.ALLOWED):
            raise KafkaError("Cluster authorization failed.", CLUSTER_DENIED)
        return Verdict(request)

    @staticmethod
    def _cluster_denied_34(ctx: RequestContext, request: Any) -> Verdict:
        """AlterReplicaLogDirs without ALTER on the cluster: every partition it names
        answers CLUSTER_AUTHORIZATION_FAILED and nothing moves (Kafka's getErrorResponse)."""
        schema = sys.modules[response_class(34, ctx.version).__module__]
        by_topic: dict[str, list[int]] = {}
        for d in request.dirs:
            for t in d.topics:
                by_topic.setdefault(t.name, []).extend(t.partitions)
        results = tuple(schema.AlterReplicaLogDirTopicResult(
            topic_name=name, partitions=tuple(schema.AlterReplicaLogDirPartitionResult(
                partition_index=p, error_code=CLUSTER_DENIED) for p in parts))
            for name, parts in by_topic.items())
        return Verdict(replace(request, dirs=()),
                       lambda response: replace(response, results=results))

    def _api_24(self, ctx: RequestContext, request: Any) -> Verdict:  # AddPartitionsToTxn
        if ctx.version >= 4:  # batched, from the brokers' produce verification
            if not self.cluster(ctx, Op.CLUSTER_ACTION):
                raise KafkaError("Cluster authorization failed.", CLUSTER_DENIED)
            return Verdict(request)
        if not self.allowed(ctx, Op.WRITE, R.TRANSACTIONAL_ID,
                            request.v3_and_below_transactional_id or ""):
            raise KafkaError("Transactional Id authorization failed.", TXN_DENIED)

        # the handler answers the denied partitions and OPERATION_NOT_ATTEMPTED for the
        # others, nothing added; one decision (and one log line) per topic, as Kafka's
        # filterByAuthorized
        @cache
        def denied(name: str) -> bool:
            return not self.allowed(ctx, Op.WRITE, R.TOPIC, name)

        ctx.topic_denied = denied
        return Verdict(request)

    def _configs(self, ctx: RequestContext, request: Any, op: Op) -> Verdict:
        def allowed(res: Any) -> bool:
            if res.resource_type == 2:  # TOPIC
                return self.allowed(ctx, op, R.TOPIC, res.resource_name)
            if res.resource_type == 32:  # GROUP
                return self.allowed(ctx, op, R.GROUP, res.resource_name)
            return self.cluster(ctx, op)  # BROKER, BROKER_LOGGER

        def code(res: Any) -> ErrorCode:
            return {2: TOPIC_DENIED, 32: GROUP_DENIED}.get(res.resource_type, CLUSTER_DENIED)

        return self._narrow(ctx, request, "resources", code, allowed)

    def _api_32(self, ctx: RequestContext, request: Any) -> Verdict:
        return self._configs(ctx, request, Op.DESCRIBE_CONFIGS)

    def _api_33(self, ctx: RequestContext, request: Any) -> Verdict:
        return self._configs(ctx, request, Op.ALTER_CONFIGS)

    def _api_44(self, ctx: RequestContext, request: Any) -> Verdict:
        return self._configs(ctx, request, Op.ALTER_CONFIGS)

    def _api_65(self, ctx: RequestContext, request: Any) -> Verdict:  # DescribeTransactions
        return self._narrow(ctx, request, "transactional_ids", TXN_DENIED,
                            lambda tid: self.allowed(ctx, Op.DESCRIBE, R.TRANSACTIONAL_ID, tid))

    def _api_66(self, ctx: RequestContext, request: Any) -> Verdict:  # ListTransactions
        def finish(response: Any) -> Any:
            return replace(response, transaction_states=tuple(
                t for t in response.transaction_states
                if self.allowed(ctx, Op.DESCRIBE, R.TRANSACTIONAL_ID, t.transactional_id,
                                log_denied=False)))

        return Verdict(request, finish)
