"""ConsumerGroupHeartbeat (68): KIP-848's one request to join, stay, reconcile and leave."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.consumer import HeartbeatResult
from odradek.protocol.errors import KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build, ms, to_ms
from odradek.server.handlers.group_common import client_host, client_id, coordinator

API_KEY = 68


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    owned = None
    if request.topic_partitions is not None:
        owned = {tp.topic_id: set(tp.partitions) for tp in request.topic_partitions}
    try:
        r = coordinator(ctx).consumer_heartbeat(
            request.group_id, request.member_id, request.member_epoch,
            instance_id=request.instance_id, rack_id=request.rack_id,
            rebalance_timeout_ms=to_ms(request.rebalance_timeout),
            subscribed_names=(None if request.subscribed_topic_names is None
                              else list(request.subscribed_topic_names)),
            subscribed_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor, owned=owned,
            client_id=client_id(ctx), client_host=client_host(ctx))
    except KafkaError as e:
        r = HeartbeatResult(e.code, request.member_id, request.member_epoch, message=str(e))
    assignment = None
    if r.assignment is not None:
        assignment = build(schema.Assignment, topic_partitions=tuple(
            build(schema.TopicPartitions, topic_id=t, partitions=tuple(sorted(p)))
            for t, p in sorted(r.assignment.items(), key=lambda i: str(i[0]))))
    return build(schema.ConsumerGroupHeartbeatResponse, error_code=r.error,
                 error_message=r.message, member_id=r.member_id or None,
                 member_epoch=r.epoch, heartbeat_interval=ms(r.heartbeat_interval_ms),
                 assignment=assignment)


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
