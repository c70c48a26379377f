"""UpdateFeatures (57): change the cluster's finalized feature levels (KIP-584).

As Kafka's controller (FeatureControlManager): every update is checked against the
levels the cluster has finalized now and the range this broker supports
(server/features.py) — an upgrade must raise a level, a safe or unsafe downgrade must
lower it — and the first refused one fails the whole request with
INVALID_UPDATE_VERSION in Kafka's words, as Kafka 4's QuorumController answers it: at
the top level, behind "The update failed for all features since …", with no
per-feature rows at any version (a success has a NONE row per feature at v0 and v1,
none at v2). An accepted request stores all its levels
in one change (the embedded store's log, or ZooKeeper's /feature znode that every
broker watches); `validate_only` (v1+) checks without storing. CLUSTER ALTER is
checked by the pipeline (security/operations.py).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server import features
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 57
ALL_FAILED = "The update failed for all features since the following feature had an error: "


def _upgrade_type(update: Any) -> int:
    if hasattr(update, "upgrade_type"):
        return int(update.upgrade_type)
    # v0: allow_downgrade means a safe downgrade
    return features.SAFE_DOWNGRADE if update.allow_downgrade else features.UPGRADE


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    code, message = ErrorCode.none, None
    current = ctx.metadata.image.features
    wanted = dict(current)
    seen: set[str] = set()
    for update in request.feature_updates:
        if update.feature in seen:
            code, message = ErrorCode.invalid_request, (
                f"Feature {update.feature} appears more than once in the request.")
            break
        seen.add(update.feature)
        why = features.update_error(update.feature, update.max_version_level,
                                    _upgrade_type(update), current, ctx.node_id)
        if why is not None:
            code, message = ErrorCode.invalid_update_version, ALL_FAILED + why
            break
        wanted[update.feature] = update.max_version_level
    if (code == ErrorCode.none and not getattr(request, "validate_only", False)
            and {n: v for n, v in wanted.items() if v > 0} != current):
        try:
            await ctx.metadata.set_features(wanted)
        except KafkaError as e:
            code, message = e.code, str(e)
    results = () if code != ErrorCode.none else tuple(
        build(schema.UpdatableFeatureResult, feature=u.feature, error_code=code,
              error_message=None)
        for u in request.feature_updates)
    return build(schema.UpdateFeaturesResponse, error_code=code, error_message=message,
                 results=results)


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
