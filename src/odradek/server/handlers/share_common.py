"""What the share group handlers share: the share groups port and acknowledgements
as the requests carry them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any

from odradek.coordinator.share.partition import AckBatch, validate_ack_batches
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.configs import AlterOp, ConfigEntry, ConfigSource

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareGroups
    from odradek.server.handlers.base import RequestContext

TopicIdPartition = tuple[uuid.UUID, int]


def shares(ctx: RequestContext) -> ShareGroups:
    port = ctx.ports.shares
    if port is None:
        raise KafkaError("share groups are not enabled", ErrorCode.unsupported_version)
    return port


def topic_denied(ctx: RequestContext, name: str | None) -> KafkaError | None:
    """TOPIC_AUTHORIZATION_FAILED when the authorizer denies this topic (the operation
    the request needs: the authorization step set `ctx.topic_denied`)."""
    if name is not None and ctx.topic_denied is not None and ctx.topic_denied(name):
        return KafkaError("Topic authorization failed.", ErrorCode.topic_authorization_failed)
    return None


def topic_id_denied(ctx: RequestContext, topic_id: uuid.UUID) -> KafkaError | None:
    if ctx.topic_denied is None:
        return None
    return topic_denied(ctx, shares(ctx).topics.name_of(topic_id))


def check_ids(group_id: str | None, member_id: str | None) -> tuple[str, str]:
    if not group_id:
        raise KafkaError("the group id is empty", ErrorCode.invalid_group_id)
    if not member_id:
        raise KafkaError("the member id is empty", ErrorCode.invalid_request)
    return group_id, member_id


async def acknowledge_all(ctx: RequestContext, group_id: str, member_id: str,
                          topics: Iterable[Any]) -> dict[TopicIdPartition, KafkaError | None]:
    """Apply each partition's acknowledgement batches; the error of each, if any, once
    the share coordinator has them (every partition's write at once)."""
    manager = shares(ctx).partitions
    results: dict[TopicIdPartition, KafkaError | None] = {}
    pending: dict[TopicIdPartition, Awaitable[KafkaError | None]] = {}
    for t in topics:
        for p in t.partitions:
            batches = [AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                       for b in p.acknowledgement_batches]
            if not batches:
                continue
            tp = (t.topic_id, p.partition_index)
            denied = topic_id_denied(ctx, t.topic_id)
            if denied is not None:
                results[tp] = denied
                continue
            try:
                # RENEW (4) came with v2 (Kafka 4.2, KIP-1222)
                validate_ack_batches(batches, renew=ctx.version >= 2)
            except KafkaError as e:
                results[tp] = e
                continue
            pending[tp] = manager.acknowledge(group_id, member_id, t.topic_id,
                                              p.partition_index, batches)
            results[tp] = None
    if pending:
        errors = await asyncio.gather(*pending.values())
        results.update(zip(pending, errors, strict=True))
    return results


def has_acks(topics: Iterable[Any]) -> bool:
    return any(p.acknowledgement_batches for t in topics for p in t.partitions)


STRING_TYPE = 2  # DescribeConfigs' config_type for a string
GROUP_CONFIG_DOCS = {
    "share.auto.offset.reset": "Where a share group starts reading a partition it has no "
                               "state for: latest or earliest.",
    "share.isolation.level": "read_committed: deliver only committed transactions' "
                             "records, up to the last stable offset; read_uncommitted: "
                             "everything up to the high watermark.",
}


def describe_group_configs(ctx: RequestContext, group_id: str) -> list[ConfigEntry]:
    """A group's configs (GROUP resources): `share.auto.offset.reset` today."""
    if not group_id:
        raise KafkaError("the group id is empty", ErrorCode.invalid_group_id)
    out = []
    for name, (value, default) in shares(ctx).describe_group_config(group_id).items():
        source = ConfigSource.DEFAULT_CONFIG if default else ConfigSource.DYNAMIC_GROUP_CONFIG
        out.append(ConfigEntry(name, value, source, False, False, STRING_TYPE,
                               GROUP_CONFIG_DOCS.get(name, ""), ((name, value, source),)))
    return out


def alter_group_configs(ctx: RequestContext, group_id: str,
                        ops: list[tuple[str, AlterOp, str | None]], *,
                        validate_only: bool) -> None:
    """IncrementalAlterConfigs on a GROUP resource: SET or DELETE (in memory for now,
    as share groups are: docs/share-groups.md)."""
    if not group_id:
        raise KafkaError("the group id is empty", ErrorCode.invalid_group_id)
    changes: dict[str, str | None] = {}
    for name, op, value in ops:
        if op == AlterOp.SET:
            changes[name] = value
        elif op == AlterOp.DELETE:
            changes[name] = None
        else:
            raise KafkaError(f"{op.name} is not supported for {name}: it is not a list",
                             ErrorCode.invalid_config)
    port = shares(ctx)
    if validate_only:
        saved = {g: dict(c) for g, c in port.group_configs.items()}
        try:
            port.alter_group_config(group_id, changes)
        finally:
            port.group_configs = saved
        return
    port.alter_group_config(group_id, changes)
