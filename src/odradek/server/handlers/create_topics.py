"""CreateTopics (19)."""

from __future__ import annotations

import logging
from typing import Any

from odradek.cluster.metadata import ZERO_UUID
from odradek.protocol.errors import ErrorCode, InvalidRequest, KafkaError
from odradek.server.configs import describe_topic
from odradek.server.handlers.base import ApiHandler, RequestContext, build, to_ms

API_KEY = 19
log = logging.getLogger(__name__)

# Kafka's controller builds at most this many metadata records for one request
# (QuorumController.MAX_RECORDS_PER_USER_OP) and refuses a bigger one whole: a topic and
# its configs and partitions are a record each. It also bounds the work one small frame
# can ask for (a num_partitions of 2^31-1 would build as many replica lists).
MAX_RECORDS_PER_USER_OP = 10_000
TOO_LARGE = "Unable to perform excessively large batch operation."


def records_of(topics: Any) -> int:
    """The metadata records a CreateTopics request would write (-1 partitions counts
    as one: the broker default is small)."""
    return sum(1 + len(t.configs) + max(t.num_partitions, len(t.assignments), 1)
               for t in topics)


async def _create(ctx: RequestContext, t: Any, validate_only: bool, seen: set[str]) -> Any:
    schema = ctx.schema
    controller = ctx.metadata
    if t.name in seen:
        raise InvalidRequest(f"Create topics request from client `{ctx.header.client_id}` "
                             f"contains multiple entries for the following topics: {t.name}")
    configs: dict[str, str | None] = {}
    for c in t.configs:
        if c.name in configs:
            raise InvalidRequest(f"Duplicate config key {c.name}")
        configs[c.name] = c.value
    assignments = {a.partition_index: tuple(a.broker_ids) for a in t.assignments} or None

    async def create(validate: bool) -> Any:
        return await controller.create_topic(
            t.name,
            num_partitions=t.num_partitions,
            replication_factor=t.replication_factor,
            assignments=assignments,
            configs=configs,
            validate_only=validate,
        )

    if ctx.mutation_quota is not None:
        # as Kafka's controller: a valid topic's partitions are charged before it is
        # created (a validate-only request too), an invalid one answers its own error
        topic = await create(True)
        ctx.record_mutation(len(topic.partitions))
        if not validate_only:
            topic = await create(False)
    else:
        topic = await create(validate_only)
    entries = [] if validate_only else describe_topic(ctx.ports, t.name)
    return build(
        schema.CreatableTopicResult,
        name=t.name,
        topic_id=topic.topic_id if not validate_only else ZERO_UUID,
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=len(topic.partitions),
        replication_factor=topic.replication_factor,
        configs=tuple(
            build(schema.CreatableTopicConfigs, name=e.name, value=e.value,
                  read_only=e.read_only, config_source=int(e.source),
                  is_sensitive=e.sensitive)
            for e in entries
        ),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    results = []
    seen: set[str] = set()
    if records_of(request.topics) > MAX_RECORDS_PER_USER_OP:
        log.info("create topics refused: more than %d records", MAX_RECORDS_PER_USER_OP)
        return build(schema.CreateTopicsResponse, topics=tuple(
            build(schema.CreatableTopicResult, name=t.name, topic_id=ZERO_UUID,
                  error_code=ErrorCode.policy_violation, error_message=TOO_LARGE,
                  num_partitions=-1, replication_factor=-1, configs=())
            for t in request.topics))
    for t in request.topics:
        try:
            results.append(await _create(ctx, t, request.validate_only, seen))
        except KafkaError as e:
            log.info("create topic %s refused: %s", t.name, e)
            results.append(
                build(schema.CreatableTopicResult, name=t.name, topic_id=ZERO_UUID,
                      error_code=e.code, error_message=str(e), num_partitions=-1,
                      replication_factor=-1, configs=())
            )
        seen.add(t.name)
    response = build(schema.CreateTopicsResponse, topics=tuple(results))
    created = [r.name for r in results if r.error_code == ErrorCode.none]
    if not request.validate_only and created:
        # In a cluster the controller elects the leaders a moment later: answer when
        # they are known (Kafka's CreateTopics waits the same way, up to its timeout)
        await ctx.metadata.settle(created, timeout_s=max(to_ms(request.timeout), 0) / 1000)
    return response


HANDLER = ApiHandler(API_KEY, 2, 7, handle)
