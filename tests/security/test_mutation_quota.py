"""controller_mutation_rate's arithmetic (KIP-599), sans-IO: Kafka's token bucket, strict
and permissive quotas, and the sharing of a bucket by a user's clients."""

from __future__ import annotations

import pytest

from odradek.security.mutation_quota import (
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from odradek.security.quotas import CONTROLLER_MUTATION_RATE as M
from odradek.security.quotas import QuotaConfigs

CREATE_TOPICS, CREATE_PARTITIONS, DELETE_TOPICS = 19, 37, 20


def _manager(rate: float = 2.0, samples: int = 2) -> ControllerMutationQuotaManager:
    configs = QuotaConfigs()
    configs.alter({"user": "alice"}, M, rate)
    return ControllerMutationQuotaManager(configs, samples, 1000)


def test_no_quota_means_no_accounting() -> None:
    assert _manager().quota_for("bob", "c", CREATE_TOPICS, 7, 0) is None


def test_strict_admits_while_tokens_are_not_negative_then_refuses() -> None:
    m = _manager(rate=2.0, samples=2)  # burst 4 partitions
    q = m.quota_for("alice", "c", CREATE_TOPICS, 6, 0)
    assert q is not None and q.strict
    q.record(3, 0)  # 4 -> 1
    q.record(5, 0)  # 1 is not below zero: admitted, the bucket goes to -4
    with pytest.raises(ThrottlingQuotaExceeded) as err:
        q.record(1, 0)
    # -4 tokens at 2 a second: two seconds to climb back to zero
    assert err.value.throttle_ms == 2000 and err.value.code == 89
    assert q.throttle_time(500) == 1500  # less the time since it was found
    # refilled at the rate: after 2 s the bucket is at zero again, and admits
    later = m.quota_for("alice", "other-client", CREATE_TOPICS, 7, 2000)
    assert later is not None
    later.record(1, 2000)
    assert later.throttle_time(2000) == 0


def test_the_first_topic_may_take_more_than_the_burst() -> None:
    q = _manager(rate=1.0, samples=1).quota_for("alice", "c", DELETE_TOPICS, 5, 0)
    assert q is not None
    q.record(100, 0)  # one topic of 100 partitions against a burst of 1: admitted
    with pytest.raises(ThrottlingQuotaExceeded):
        q.record(1, 10)


def test_older_versions_are_throttled_not_refused() -> None:
    m = _manager(rate=2.0, samples=2)
    q = m.quota_for("alice", "c", CREATE_PARTITIONS, 2, 0)
    assert q is not None and not q.strict
    q.record(4, 0)
    assert q.throttle_time(0) == 0
    q.record(2, 0)  # permissive: recorded, -2 tokens, throttled 1 s
    q.record(2, 0)
    assert q.throttle_time(0) == 2000
    strict = m.quota_for("alice", "c", CREATE_PARTITIONS, 3, 0)
    assert strict is not None
    with pytest.raises(ThrottlingQuotaExceeded):  # the same bucket, shared
        strict.record(1, 0)


def test_the_bucket_never_holds_more_than_the_burst() -> None:
    m = _manager(rate=10.0, samples=2)  # burst 20
    q = m.quota_for("alice", "c", CREATE_TOPICS, 7, 0)
    assert q is not None
    q.record(20, 60_000)  # a minute idle refills to 20, not 600: now at zero
    q.record(1, 60_000)  # zero is not below zero: admitted, -1
    with pytest.raises(ThrottlingQuotaExceeded) as err:
        q.record(1, 60_000)
    assert err.value.throttle_ms == 100
