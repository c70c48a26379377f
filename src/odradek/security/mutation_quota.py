"""Controller mutation quotas (KIP-599), sans-IO: partitions created, added or deleted
per (user, client-id), Kafka's ControllerMutationQuotaManager arithmetic.

- `TokenBucket` is Kafka's: `controller_mutation_rate` tokens a second, at most
  rate * `controller.quota.window.num` * `controller.quota.window.size.seconds` of them
  (the burst), full at first. A mutation takes as many tokens as partitions it touches,
  and may take the bucket below zero.
- `MutationQuota` is one request's view of its client's bucket. Strict (CreateTopics v6+,
  CreatePartitions v3+, DeleteTopics v5+, whose clients know THROTTLING_QUOTA_EXCEEDED):
  a topic is admitted while the bucket is not below zero — the first one may take it
  negative, however many partitions it has — and refused once it is, with the time the
  bucket needs to climb back to zero. Permissive (older versions): every topic is
  admitted, and a bucket below zero only throttles the response.
- The bound is resolved per request in the client quotas' precedence order
  (QuotaConfigs), so all of alice's clients under a `user=alice` quota share a bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.quotas import CONTROLLER_MUTATION_RATE, EntityKey, QuotaConfigs

# the API versions from which a quota violation is an error rather than a delay
STRICT_SINCE = {19: 6, 37: 3, 20: 5}  # CreateTopics, CreatePartitions, DeleteTopics


class ThrottlingQuotaExceeded(KafkaError):
    code = ErrorCode.throttling_quota_exceeded

    def __init__(self, throttle_ms: int) -> None:
        super().__init__("The throttling quota has been exceeded.")
        self.throttle_ms = throttle_ms


@dataclass
class TokenBucket:
    """Kafka's TokenBucket stat: `tokens` refilled at `rate` a second up to `burst`."""

    tokens: float
    last_ms: int

    def measure(self, rate: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + rate * max(now_ms - self.last_ms, 0) / 1000)
        self.last_ms = now_ms
        return self.tokens

    def take(self, permits: float, rate: float, burst: float, now_ms: int) -> float:
        self.measure(rate, burst, now_ms)
        self.tokens = min(burst, self.tokens - permits)
        return self.tokens


def throttle_ms(tokens: float, rate: float) -> int:
    """How long a bucket below zero needs to climb back to zero (0 when it is not)."""
    return round(-tokens / rate * 1000) if tokens < 0 else 0


@dataclass
class MutationQuota:
    """One request's quota: `record` each topic's partitions before changing it."""

    bucket: TokenBucket
    rate: float
    burst: float
    strict: bool
    _throttle_ms: int = 0
    _recorded_ms: int = 0

    def record(self, permits: float, now_ms: int) -> None:
        """Take `permits` tokens; ThrottlingQuotaExceeded (strict) when the bucket is
        already below zero, nothing taken."""
        if self.strict:
            tokens = self.bucket.measure(self.rate, self.burst, now_ms)
            if tokens < 0:
                self._throttled(throttle_ms(tokens, self.rate), now_ms)
                raise ThrottlingQuotaExceeded(self._throttle_ms)
            self.bucket.take(permits, self.rate, self.burst, now_ms)
            return
        tokens = self.bucket.take(permits, self.rate, self.burst, now_ms)
        if tokens < 0:
            self._throttled(throttle_ms(tokens, self.rate), now_ms)

    def _throttled(self, ms: int, now_ms: int) -> None:
        self._throttle_ms, self._recorded_ms = ms, now_ms

    def throttle_time(self, now_ms: int) -> int:
        """The response's throttle: what was found, less the time since (the request may
        have waited for the topics to settle)."""
        return max(0, self._throttle_ms - (now_ms - self._recorded_ms))


@dataclass
class ControllerMutationQuotaManager:
    configs: QuotaConfigs
    samples: int = 11  # controller.quota.window.num
    window_ms: int = 1000  # controller.quota.window.size.seconds * 1000
    _buckets: dict[EntityKey, TokenBucket] = field(default_factory=dict)

    def quota_for(self, user: str, client_id: str, api_key: int, version: int,
                  now_ms: int) -> MutationQuota | None:
        """The request's quota; None when no controller_mutation_rate applies."""
        sharing, rate = self.configs.resolve(CONTROLLER_MUTATION_RATE, user, client_id)
        if rate is None:
            return None
        burst = rate * self.samples * self.window_ms / 1000
        bucket = self._buckets.get(sharing)
        if bucket is None:
            bucket = self._buckets[sharing] = TokenBucket(burst, now_ms)
        return MutationQuota(bucket, rate, burst, version >= STRICT_SINCE[api_key])
