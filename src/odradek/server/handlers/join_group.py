"""JoinGroup (11): join a classic group; answered when the generation is complete.

v4+ clients without a member id get MEMBER_ID_REQUIRED and the id to come back with.
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.classic import JoinResult
from odradek.protocol.errors import KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build, to_ms
from odradek.server.handlers.group_common import client_host, client_id, coordinator

API_KEY = 11


def _response(ctx: RequestContext, r: JoinResult) -> Any:
    schema = ctx.schema
    nullable = ctx.version >= 7
    members = tuple(
        build(schema.JoinGroupResponseMember, member_id=member_id, group_instance_id=instance,
              metadata=metadata)
        for member_id, instance, metadata in r.members
    )
    return build(
        schema.JoinGroupResponse,
        error_code=r.error,
        generation_id=r.generation,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name if r.protocol_name is not None or nullable else "",
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=members,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    session_ms = to_ms(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_ms = session_ms if rebalance is None else to_ms(rebalance)
    protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
    try:
        result = coordinator(ctx).join_group(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            client_id(ctx), client_host(ctx), session_ms, rebalance_ms, request.protocol_type,
            protocols, require_known_member_id=ctx.version >= 4)
    except KafkaError as e:
        result = JoinResult(e.code, request.member_id)
    if isinstance(result, JoinResult):
        return _response(ctx, result)
    waiter = result

    async def wait() -> Any:
        return _response(ctx, await waiter)

    return wait()


HANDLER = ApiHandler(API_KEY, 0, 9, handle)
