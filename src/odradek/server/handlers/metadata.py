"""Metadata (3): brokers, controller, and topics with their partitions and topic ids."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

from odradek.cluster.metadata import ZERO_UUID, PartitionInfo, TopicInfo
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.metadata_cache import encode_entity, entries_for, splice

API_KEY = 3
NO_AUTHORIZED_OPERATIONS = -2147483648


def _partition(schema: Any, topic: TopicInfo, p: PartitionInfo, ctx: RequestContext) -> Any:
    offline = p.offline_replicas
    isr = p.isr
    leader = p.leader
    error = ErrorCode.none
    local = ctx.replicas.partitions.get((topic.name, p.partition))
    unopened = ctx.node_id in p.replicas and (topic.name, p.partition) in ctx.ports.logs.unopened
    if unopened or (local is not None and local.log.offline):
        # this broker's copy sits on a failed log dir: as Kafka reports an offline
        # partition, with no leader, so clients stop sending to it
        offline = (*offline, ctx.node_id)
        isr = tuple(r for r in isr if r != ctx.node_id)
        if leader == ctx.node_id:
            leader, error = -1, ErrorCode.kafka_storage_error
    if leader < 0 and error == ErrorCode.none:
        error = ErrorCode.leader_not_available  # no live replica may lead right now
    return build(
        schema.MetadataResponsePartition,
        error_code=error,
        partition_index=p.partition,
        leader_id=leader,
        leader_epoch=p.leader_epoch,
        replica_nodes=p.replicas,
        # the ISR as the partition state says, dead brokers included until the
        # controller removes them (as Kafka): it is what acks=all and
        # min.insync.replicas go by; offline_replicas tells who is down
        isr_nodes=isr,
        offline_replicas=offline,
    )


def _topic(schema: Any, topic: TopicInfo, ctx: RequestContext) -> Any:
    return build(
        schema.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=tuple(_partition(schema, topic, p, ctx) for p in topic.partitions),
        topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
    )


def _error_topic(
    schema: Any, code: ErrorCode, name: str | None, topic_id: uuid.UUID | None
) -> Any:
    return build(
        schema.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id or ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
    )


def _to_create(ctx: RequestContext, request: Any) -> list[str]:
    """Topics a request names that do not exist and may be auto-created."""
    if (not request.topics or not getattr(request, "allow_auto_topic_creation", True)
            or not ctx.config["auto.create.topics.enable"]):
        return []
    image = ctx.metadata.image
    names = (w if isinstance(w, str) else getattr(w, "name", None) for w in request.topics)
    denied, creatable = ctx.topic_denied, ctx.topic_creatable
    return [n for n in names if n is not None and n not in image.topics
            and (denied is None or not denied(n)) and (creatable is None or creatable(n))]


def handle(ctx: RequestContext, request: Any) -> Any:
    missing = _to_create(ctx, request)
    large = request.topics is not None and len(request.topics) > SLICE
    if not missing and not large:
        return _respond(ctx, request, list(_entries(ctx, request, {})))

    async def in_slices() -> Any:
        failed: dict[str, ErrorCode] = {}
        for name in missing:
            try:
                await ctx.metadata.create_topic(name)
            except KafkaError as e:
                failed[name] = e.code
        topics: list[Any] = []
        for entry in _entries(ctx, request, failed):
            topics.append(entry)
            if len(topics) % SLICE == 0:
                await asyncio.sleep(0)  # a request naming 300,000 topics shares the loop
        return _respond(ctx, request, topics)

    return in_slices()


SLICE = 2000


def _entries(ctx: RequestContext, request: Any, failed: dict[str, ErrorCode]
             ) -> Iterator[bytes]:
    """Each topic's entry, encoded: from the cache while this broker's replicas are all
    on line (an entry then depends on the image alone), built afresh otherwise."""
    for entry in _entities(ctx, request, failed):
        yield entry if isinstance(entry, bytes) else encode_entity(entry)


def _entities(ctx: RequestContext, request: Any, failed: dict[str, ErrorCode]
              ) -> Iterator[Any]:
    schema = ctx.schema
    image = ctx.metadata.image
    requested = request.topics
    denied = ctx.topic_denied
    logs = ctx.ports.logs
    cache = entries_for(ctx.metadata) if not logs.unopened and not logs.offline_dirs \
        else None
    version = ctx.version

    def topic_entry(t: TopicInfo) -> Any:
        if cache is None:
            return _topic(schema, t, ctx)
        return cache.get(t, version, lambda: _topic(schema, t, ctx))

    if requested is None or (ctx.version == 0 and not requested):
        # null (v1+) or an empty list at v0 means every topic: those it may describe
        if cache is not None:
            cache.forget_missing(image.topics)
        for t in image.topics.values():
            if denied is None or not denied(t.name):
                yield topic_entry(t)
        return
    for wanted in requested:
        name = wanted if isinstance(wanted, str) else getattr(wanted, "name", None)
        topic_id = getattr(wanted, "topic_id", None)
        if name is None and topic_id not in (None, ZERO_UUID):
            found = image.topic_by_id(topic_id)
            if found is None:
                yield _error_topic(schema, ErrorCode.unknown_topic_id, None, topic_id)
            else:
                yield topic_entry(found)
            continue
        if name is None:
            yield _error_topic(schema, ErrorCode.invalid_topic_exception, None, None)
            continue
        topic = image.topics.get(name)
        if denied is not None and denied(name):
            yield _error_topic(schema, ErrorCode.topic_authorization_failed, name, None)
        elif name in failed:
            yield _error_topic(schema, failed[name], name, None)
        elif topic is None:
            yield _error_topic(schema, ErrorCode.unknown_topic_or_partition, name, None)
        else:
            yield topic_entry(topic)


def _respond(ctx: RequestContext, request: Any, topics: list[bytes]) -> Any:
    schema = ctx.schema
    image = ctx.metadata.image
    brokers = tuple(
        build(schema.MetadataResponseBroker, node_id=b.node_id,
              host=b.endpoint(ctx.listener)[0], port=b.endpoint(ctx.listener)[1], rack=b.rack)
        for b in image.brokers.values()
        if not b.fenced
    )
    empty = build(
        schema.MetadataResponse,
        brokers=brokers,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        topics=(),
        cluster_authorized_operations=NO_AUTHORIZED_OPERATIONS,
        error_code=ErrorCode.none,
    )
    return splice(ctx.version, ctx.header.correlation_id, empty, topics)


HANDLER = ApiHandler(API_KEY, 0, 13, handle)
