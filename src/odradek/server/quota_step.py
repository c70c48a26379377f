"""The request pipeline's throttle step: client quotas enforced as Kafka 2.0+ does
(KIP-219).

Every request of a quota-bound client is recorded against its quotas — Produce its
request size on `producer_byte_rate`, Fetch its response size on
`consumer_byte_rate`, and every request its handling time on `request_percentage` —
and answered at once (CreateTopics, CreatePartitions and DeleteTopics also get their
client's `controller_mutation_rate` quota, which the handlers charge per topic: see
security/mutation_quota.py), its `throttle_time_ms` set to how long the client is over.
The connection is then muted for that long (connection.py reads `Channel.throttle_ms`
after it sends the response): the broker reads nothing more from a throttled client,
however it behaves, and a well-behaved client also backs off by itself. A throttled
consumer fetch is answered empty and its bytes taken back, as Kafka does, and a
fetch never asks for more than the quota lets through in one window (Kafka's
getMaxValueInQuotaWindow), so one response cannot overshoot by much.

Not throttled, as in Kafka: follower fetches (replication has its own quotas),
ApiVersions and the SASL exchange, and inter-broker APIs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.protocol.fetch_response import encode_fetch_response
from odradek.security.mutation_quota import STRICT_SINCE, ControllerMutationQuotaManager
from odradek.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    QuotaConfigs,
    request_time_percentage,
)
from odradek.server.handlers.base import Encoded, RequestContext, ms
from odradek.server.handlers.fetch import replica_id_of

PRODUCE, FETCH = 0, 1
# ApiVersions, SaslHandshake, SaslAuthenticate and the inter-broker APIs
EXEMPT = frozenset({17, 18, 36, 4, 5, 6, 7, 27})


@dataclass(slots=True)
class Channel:
    """A connection's throttle: set by the pipeline, read (and reset) by the
    connection once it has sent the response."""

    throttle_ms: int = 0


class QuotaStep:
    def __init__(self, stored: Mapping[str, Mapping[str, str]], samples: int = 11,
                 window_ms: int = 1000, controller_samples: int = 11,
                 controller_window_ms: int = 1000) -> None:
        self.configs = QuotaConfigs.from_stored(stored)
        self.samples, self.window_ms = samples, window_ms
        self.produce = ClientQuotaManager(self.configs, PRODUCER_BYTE_RATE, samples, window_ms)
        self.fetch = ClientQuotaManager(self.configs, CONSUMER_BYTE_RATE, samples, window_ms)
        self.request = ClientQuotaManager(self.configs, REQUEST_PERCENTAGE, samples, window_ms)
        self.mutation = ControllerMutationQuotaManager(self.configs, controller_samples,
                                                       controller_window_ms)

    @property
    def active(self) -> bool:
        return bool(self.configs.entities)

    def reload(self, stored: Mapping[str, Mapping[str, str]]) -> None:
        """New quotas apply at once; the rates measured so far are kept."""
        self.configs = QuotaConfigs.from_stored(stored)
        for manager in (self.produce, self.fetch, self.request):
            manager.configs = self.configs
        self.mutation.configs = self.configs

    @staticmethod
    def _who(ctx: RequestContext) -> tuple[str, str]:
        user = "ANONYMOUS" if ctx.security is None else ctx.security.principal.name
        return user, ctx.header.client_id or ""

    def prepare(self, ctx: RequestContext, request: Any) -> Any:
        """A consumer fetch asks for no more than its quota passes in one window; a
        topic mutation gets its client's controller mutation quota."""
        if ctx.header.api_key in STRICT_SINCE:
            user, client_id = self._who(ctx)
            ctx.mutation_quota = self.mutation.quota_for(
                user, client_id, ctx.header.api_key, ctx.version, int(time.monotonic() * 1000))
            return request
        if ctx.header.api_key != FETCH or replica_id_of(request) >= 0:
            return request
        user, client_id = self._who(ctx)
        _, bound = self.configs.resolve(CONSUMER_BYTE_RATE, user, client_id)
        if bound is None:
            return request
        most = int(bound * (self.samples - 1) * self.window_ms / 1000)
        if request.max_bytes > most:
            request = dataclasses.replace(request, max_bytes=max(most, 1))
        return request

    def finish(self, ctx: RequestContext, request: Any, result: Any, handling_ns: int,
               channel: Channel) -> Any:
        """Record the request against its client's quotas; the response with its
        throttle time (an empty one for a throttled consumer fetch)."""
        api_key = ctx.header.api_key
        if api_key in EXEMPT:
            return result
        now = int(time.monotonic() * 1000)
        user, client_id = self._who(ctx)
        if api_key == FETCH and replica_id_of(request) >= 0:
            return result
        throttle = 0
        if api_key != PRODUCE or getattr(request, "acks", 1) != 0:
            throttle = self.request.record(user, client_id,
                                           request_time_percentage(handling_ns), now)
        if api_key == PRODUCE:
            throttle = max(throttle, self.produce.record(user, client_id, ctx.request_size,
                                                         now))
        elif ctx.mutation_quota is not None:
            throttle = max(throttle, ctx.mutation_quota.throttle_time(now))
        elif api_key == FETCH and isinstance(result, Encoded):
            size = len(result.frame) - 4
            fetch_throttle = self.fetch.record(user, client_id, size, now)
            throttle = max(throttle, fetch_throttle)
            if throttle > 0:
                self.fetch.unrecord(user, client_id, size, now)
                result = Encoded(encode_fetch_response(
                    ctx.version, ctx.header.correlation_id, [], throttle_ms=throttle))
        if throttle <= 0:
            return result
        channel.throttle_ms = max(channel.throttle_ms, throttle)
        if result is not None and hasattr(result, "throttle_time"):
            result = dataclasses.replace(result, throttle_time=ms(throttle))
        return result
