"""AlterConfigs (33): replace a resource's whole set of dynamic configs."""

from __future__ import annotations

from typing import Any

from odradek.server.configs import AlterOp
from odradek.server.handlers.base import ApiHandler, RequestContext
from odradek.server.handlers.incremental_alter_configs import alter

API_KEY = 33


def handle(ctx: RequestContext, request: Any) -> Any:
    return alter(
        ctx,
        request,
        incremental=False,
        ops_of=lambda res: [(c.name, AlterOp.SET, c.value) for c in res.configs],
        response_name="AlterConfigsResponse",
    )


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
