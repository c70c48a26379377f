"""The request pipeline's fault step (server/pipeline.py): applies a `Faults` decision
to one request.

A step answers None to let the request go on, or what to answer instead: here a
KafkaError (the pipeline builds the API's error response at the request's version, or
closes an acks=0 producer's connection, as for any real failure), CLOSE_CONNECTION, or
an awaitable that waits and then runs the handler itself.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from typing import Any

from odradek.protocol.errors import KafkaError
from odradek.server.handlers import HANDLERS
from odradek.server.handlers.base import CLOSE_CONNECTION, RequestContext
from odradek.testing.faults import Delay, Fail, Faults


class FaultStep:
    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def __call__(self, ctx: RequestContext, request: Any) -> Any:
        if not self.faults.active:  # one attribute read while a test sets no faults
            return None
        api_key = ctx.header.api_key

        def topic_of_id(topic_id: uuid.UUID) -> str | None:
            info = ctx.metadata.image.topic_by_id(topic_id)
            return info.name if info is not None else None

        action = self.faults.decide(api_key, ctx.version, request, topic_of_id)
        if action is None:
            return None
        if isinstance(action, Fail):
            return KafkaError(f"{action.error.name.upper()} (injected by odradek.testing)",
                              action.error)
        if isinstance(action, Delay):
            return _delayed(action.ms / 1000, ctx, request)
        return CLOSE_CONNECTION


async def _delayed(seconds: float, ctx: RequestContext, request: Any) -> Any:
    """Wait, then handle the request as if nothing happened (this step is the last)."""
    await asyncio.sleep(seconds)
    result = HANDLERS[ctx.header.api_key].handle(ctx, request)
    if inspect.isawaitable(result):
        return await result
    return result
