"""Replication quotas for reassignment (KIP-73), as Kafka's ReplicationQuotaManager.

A broker has two: the leader quota (`leader.replication.throttled.rate`) counts the bytes
it returns to followers for throttled replicas, the follower quota
(`follower.replication.throttled.rate`) the bytes its fetchers receive for them. A
replica is throttled where the topic's `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` names `partition:this broker` (or is `*`).
Over quota, throttled partitions are left out (of the leader's answer, of the
follower's fetch) while every other partition goes on at full speed; replicas in sync
are never held back.

The rate is Kafka's `Rate` over sampled windows: `replication.quota.window.num`
samples of `replication.quota.window.size.seconds`; the elapsed time it divides by is
at least (samples - 1) windows, so a fresh quota lets that many windows' worth through
before it bites, as Kafka's does.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence

from odradek.configdef import LONG_MAX

UNLIMITED = LONG_MAX


class ReplicationQuota:
    """One direction's byte rate against its bound (read live: the bound is dynamic)."""

    __slots__ = ("_bound", "_clock", "_samples", "_window", "num_samples")

    def __init__(self, bound: Callable[[], int] = lambda: UNLIMITED, num_samples: int = 11,
                 window_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._bound = bound
        self.num_samples = max(1, num_samples)
        self._window = window_s
        self._clock = clock
        self._samples: list[list[float]] = []  # [start, bytes], oldest first

    @property
    def bound(self) -> int:
        return int(self._bound())

    def _purge(self, now: float) -> None:
        # samples older than the whole window count for nothing
        horizon = self.num_samples * self._window
        while self._samples and now - self._samples[0][0] >= horizon:
            self._samples.pop(0)

    def record(self, nbytes: int, now: float | None = None) -> None:
        if nbytes <= 0 and not self._samples:
            return
        now = self._clock() if now is None else now
        self._purge(now)
        if not self._samples or now - self._samples[-1][0] >= self._window:
            self._samples.append([now, 0.0])
            if len(self._samples) > self.num_samples:
                self._samples.pop(0)
        self._samples[-1][1] += nbytes

    def rate(self, now: float | None = None) -> float:
        """Bytes per second over the sampled windows."""
        now = self._clock() if now is None else now
        self._purge(now)
        if not self._samples:
            return 0.0
        total = sum(s[1] for s in self._samples)
        elapsed = now - self._samples[0][0]
        full = int(elapsed // self._window)
        if full < self.num_samples - 1:
            elapsed += (self.num_samples - 1 - full) * self._window
        return total / elapsed if elapsed > 0 else (float("inf") if total else 0.0)

    def exceeded(self, now: float | None = None) -> bool:
        bound = self.bound
        if bound >= UNLIMITED:
            return False
        return self.rate(now) > bound


@functools.lru_cache(maxsize=4096)
def _parsed(entries: tuple[str, ...], broker: int) -> tuple[bool, frozenset[int]]:
    wildcard = bool(entries) and entries[0].strip() == "*"
    parts = set()
    for e in entries:
        partition, sep, replica = e.strip().partition(":")
        if sep and partition.isdigit() and replica.isdigit() and int(replica) == broker:
            parts.add(int(partition))
    return wildcard, frozenset(parts)


def is_throttled(entries: Sequence[str], partition: int, broker: int) -> bool:
    """Whether `partition`'s replica on `broker` is throttled by a
    `*.replication.throttled.replicas` value (parsed list)."""
    if not entries:
        return False
    wildcard, parts = _parsed(tuple(entries), broker)
    return wildcard or partition in parts
