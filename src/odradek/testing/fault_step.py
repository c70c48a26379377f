"""The request pipeline's fault step: applies a `Faults` decision to one request.

The connection calls `intercept` only while a broker has fault rules; it gets back the
handler to call — the real one, or one that answers the injected error, closes the
connection, or waits first.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from odradek.server.handlers.base import CLOSE_CONNECTION, HandlerResult, RequestContext
from odradek.testing.faults import Answer, Delay

if TYPE_CHECKING:
    from odradek.server.broker import Broker

Handle = Callable[[RequestContext, Any], HandlerResult]
_PRODUCE = 0


def intercept(broker: Broker, api_key: int, version: int, request: Any,
              handle: Handle) -> Handle:
    faults = broker.faults
    assert faults is not None

    def topic_of_id(topic_id: uuid.UUID) -> str | None:
        info = broker.controller.image.topic_by_id(topic_id)
        return info.name if info is not None else None

    action = faults.decide(api_key, version, request, topic_of_id)
    if action is None:
        return handle
    if isinstance(action, Answer):
        if api_key == _PRODUCE and getattr(request, "acks", 1) == 0:
            # acks=0 gets no response: a broker tells such a producer of an error by
            # closing its connection, as Kafka does
            return lambda _ctx, _req: CLOSE_CONNECTION
        response = action.response
        return lambda _ctx, _req: response
    if isinstance(action, Delay):
        seconds = action.ms / 1000

        async def delayed(ctx: RequestContext, req: Any) -> Any:
            await asyncio.sleep(seconds)
            result = handle(ctx, req)
            if inspect.isawaitable(result):
                return await result
            return result

        return delayed
    return lambda _ctx, _req: CLOSE_CONNECTION
