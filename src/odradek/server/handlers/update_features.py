"""UpdateFeatures (57): change the cluster's finalized feature levels (KIP-584).

odradek's levels are fixed by what it implements (server/features.py): an update to
the current level is accepted and changes nothing; any other is refused with
INVALID_UPDATE_VERSION in Kafka's words, the whole request failing as in Kafka's
controller (v0 and v1 repeat the error for each named feature; v2 answers at the top
level only).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server import features
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 57


def _upgrade_type(update: Any) -> int:
    if hasattr(update, "upgrade_type"):
        return int(update.upgrade_type)
    return 2 if update.allow_downgrade else 1  # v0: safe downgrade when allowed


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    code, message = ErrorCode.none, None
    seen: set[str] = set()
    for update in request.feature_updates:
        if update.feature in seen:
            code, message = ErrorCode.invalid_request, (
                f"Feature {update.feature} appears more than once in the request.")
            break
        seen.add(update.feature)
        why = features.update_error(update.feature, update.max_version_level,
                                    _upgrade_type(update), ctx.node_id)
        if why is not None:
            code, message = ErrorCode.invalid_update_version, why
            break
    results = tuple(
        build(schema.UpdatableFeatureResult, feature=u.feature, error_code=code,
              error_message=message)
        for u in request.feature_updates)
    return build(schema.UpdateFeaturesResponse, error_code=code, error_message=message,
                 results=results)


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
