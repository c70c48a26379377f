"""AlterClientQuotas (49): set or remove quota keys of user, client-id and ip entities.

Each entry succeeds or fails alone, with Kafka's error for the first problem
(INVALID_REQUEST: an unknown entity type or key, an empty name, a value that is not
positive or not whole for a byte rate, an ip entity mixed with others). An entry's
changes are stored together; `validate_only` checks without storing. The broker's
quotas follow the store (the metadata listener in server/quota_step.py).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.quotas import QuotaConfigs, stored_value, validate_alteration
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 49


def _entity(entry: Any) -> dict[str, str | None]:
    entity: dict[str, str | None] = {}
    for e in entry.entity:
        if e.entity_type in entity:
            raise KafkaError(f"Duplicate {e.entity_type} entity in the request",
                             ErrorCode.invalid_request)
        entity[e.entity_type] = e.entity_name
    return entity


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    results = []
    for entry in request.entries:
        code, message = ErrorCode.none, None
        try:
            entity = _entity(entry)
            changes: list[tuple[str, str, str | None]] = []
            for op in entry.ops:
                value = None if op.remove else float(op.value)
                validate_alteration(entity, op.key, value)
                changes.append((QuotaConfigs.zk_path(entity), op.key,
                                None if value is None else stored_value(op.key, value)))
            if changes and not request.validate_only:
                await ctx.metadata.alter_client_quotas(changes)
        except KafkaError as e:
            code, message = e.code, str(e)
        results.append(build(
            schema.EntryData, error_code=code, error_message=message,
            entity=tuple(build(schema.EntityData, entity_type=e.entity_type,
                               entity_name=e.entity_name) for e in entry.entity)))
    return build(schema.AlterClientQuotasResponse, entries=tuple(results))


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
