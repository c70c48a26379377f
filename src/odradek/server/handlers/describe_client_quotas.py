"""DescribeClientQuotas (48): the configured quotas of the entities a filter matches.

A filter is a list of components, one per entity type: EXACT (a name), DEFAULT (the
`<default>` entity) or SPECIFIED (any entity of that type); `strict` keeps only
entities with no other types. Bad filters answer INVALID_REQUEST with Kafka's
messages (ClientQuotaControlManager / ClientQuotasImage), an unknown entity type
UNSUPPORTED_VERSION as Kafka's.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.quotas import QuotaConfigs
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 48
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
ENTITY_TYPES = ("user", "client-id", "ip")
_Filter = tuple[dict[str, str | None], set[str]]


def parse_filter(components: Any) -> _Filter:
    """(exact names by type — None for the default —, types that match any name)."""
    exact: dict[str, str | None] = {}
    any_name: set[str] = set()
    for c in components:
        etype = c.entity_type
        if not etype:
            raise KafkaError("Invalid empty entity type.", ErrorCode.invalid_request)
        if etype in exact or etype in any_name:
            raise KafkaError(f"Entity type {etype} cannot appear more than once in the "
                             "filter.", ErrorCode.invalid_request)
        if etype not in ENTITY_TYPES:
            raise KafkaError(f"Unsupported entity type {etype}",
                             ErrorCode.unsupported_version)
        if c.match_type == EXACT:
            if c.match is None:
                raise KafkaError("Request specified MATCH_TYPE_EXACT, but set match string "
                                 "to null.", ErrorCode.invalid_request)
            exact[etype] = c.match
        elif c.match_type == DEFAULT:
            if c.match is not None:
                raise KafkaError("Request specified MATCH_TYPE_DEFAULT, but also specified "
                                 "a match string.", ErrorCode.invalid_request)
            exact[etype] = None
        elif c.match_type == SPECIFIED:
            if c.match is not None:
                raise KafkaError("Request specified MATCH_TYPE_SPECIFIED, but also "
                                 "specified a match string.", ErrorCode.invalid_request)
            any_name.add(etype)
        else:
            raise KafkaError(f"Unknown match type {c.match_type}", ErrorCode.invalid_request)
    named = set(exact) | any_name
    if "ip" in named and named & {"user", "client-id"}:
        raise KafkaError("Invalid entity filter component combination. IP filter component "
                         "should not be used with user or clientId filter component.",
                         ErrorCode.invalid_request)
    return exact, any_name


def matches(entity: dict[str, str | None], flt: _Filter, strict: bool) -> bool:
    exact, any_name = flt
    if strict and set(entity) != set(exact) | any_name:
        return False
    for etype, name in exact.items():
        if etype not in entity or entity[etype] != name:
            return False
    return all(etype in entity for etype in any_name)


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    try:
        flt = parse_filter(request.components)
    except KafkaError as e:
        return build(schema.DescribeClientQuotasResponse, error_code=e.code,
                     error_message=str(e), entries=None)
    configs = QuotaConfigs.from_stored(ctx.metadata.image.client_quotas)
    entries = []
    for entity, values in configs.describe():
        if not matches(entity, flt, request.strict):
            continue
        entries.append(build(
            schema.EntryData,
            entity=tuple(build(schema.EntityData, entity_type=t, entity_name=n)
                         for t, n in entity.items()),
            values=tuple(build(schema.ValueData, key=k, value=v)
                         for k, v in sorted(values.items()))))
    return build(schema.DescribeClientQuotasResponse, error_code=ErrorCode.none,
                 error_message=None, entries=tuple(entries))


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
