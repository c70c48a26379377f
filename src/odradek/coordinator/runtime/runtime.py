"""One runtime for every coordinator (Kafka's CoordinatorRuntime).

A coordinator's state lives in the partitions of an internal compacted topic
(`__consumer_offsets`, `__transaction_state`, later `__share_group_state` and
`_schemas`); each partition has one state machine, its *shard*. The runtime
- follows leadership: elected → load (replay the partition's log into a new shard,
  loader.py) → serve; resigned → cancel the shard's timers and drop it;
- answers NOT_COORDINATOR for a partition it does not lead and
  COORDINATOR_LOAD_IN_PROGRESS while it loads, the same way for every coordinator;
- writes records with acks=all and returns once they are committed, so the caller
  applies a change only after the log took it (and only if the partition did not
  move meanwhile);
- owns the shards' timers (timer.py), the background tasks and periodic jobs.
A state machine knows nothing of partitions' leadership or of the broker.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from odradek.coordinator.runtime.errors import (
    CoordinatorLoadInProgress,
    NotCoordinator,
    append_error,
)
from odradek.coordinator.runtime.loader import CoordinatorShard, load
from odradek.coordinator.runtime.log import CoordinatorLog, Record
from odradek.coordinator.runtime.timer import CoordinatorTimer
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

S = TypeVar("S", bound=CoordinatorShard)
V = TypeVar("V")


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


class PartitionContext(Generic[S]):
    """One led partition: its state, its shard and the shard's timers."""

    def __init__(self, partition: int, shard: S, timer: CoordinatorTimer) -> None:
        self.partition = partition
        self.shard = shard
        self.timer = timer
        self.state = PartitionState.LOADING


class CoordinatorRuntime(Generic[S]):
    def __init__(self, topic: str, coordinator_log: CoordinatorLog,
                 new_shard: Callable[[int, CoordinatorTimer], S]) -> None:
        self.topic = topic
        self.log = coordinator_log
        self._new_shard = new_shard
        self.contexts: dict[int, PartitionContext[S]] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        self._periodic: list[tuple[int, Callable[[], Coroutine[Any, Any, Any]]]] = []
        self._started = False

    # ---- leadership --------------------------------------------------------------

    @property
    def led(self) -> set[int]:
        return set(self.contexts)

    @property
    def loading(self) -> set[int]:
        return {p for p, c in self.contexts.items() if c.state is PartitionState.LOADING}

    def follow(self, led: Iterable[int]) -> None:
        """This broker leads exactly these partitions now."""
        wanted = set(led)
        self.on_resigned(set(self.contexts) - wanted)
        self.on_elected(sorted(wanted - set(self.contexts)))

    def on_elected(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            if p in self.contexts:
                continue
            timer = CoordinatorTimer(f"{self.topic}-{p}")
            ctx = PartitionContext(p, self._new_shard(p, timer), timer)
            self.contexts[p] = ctx
            self.spawn(self._load(ctx))

    def on_resigned(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            ctx = self.contexts.pop(p, None)
            if ctx is not None:
                self._unload(ctx)

    def _unload(self, ctx: PartitionContext[S]) -> None:
        ctx.timer.close()
        try:
            ctx.shard.on_unloaded()
        except Exception:
            log.exception("unloading %s-%d failed", self.topic, ctx.partition)

    async def _load(self, ctx: PartitionContext[S]) -> None:
        p = ctx.partition
        try:
            summary = await load(self.log, self.topic, p, ctx.shard)
        except Exception:
            # the log itself is unreadable (gone, offline): not the coordinator after all
            log.exception("loading %s-%d failed", self.topic, p)
            if self.contexts.get(p) is ctx:
                del self.contexts[p]
                self._unload(ctx)
            return
        if self.contexts.get(p) is not ctx:
            return  # resigned while loading
        try:
            ctx.shard.on_loaded()
        except Exception:
            log.exception("starting %s-%d after its load failed", self.topic, p)
            del self.contexts[p]
            self._unload(ctx)
            return
        ctx.state = PartitionState.ACTIVE
        if summary.records or summary.skipped:
            log.info("loaded %s-%d: %d records to offset %d in %.3fs%s", self.topic, p,
                     summary.records, summary.end_offset, summary.seconds,
                     f", {summary.skipped} unreadable skipped" if summary.skipped else "")

    # ---- serving -----------------------------------------------------------------

    def context(self, partition: int, what: str = "") -> PartitionContext[S]:
        """The partition's context if it is served here (raises NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS otherwise)."""
        ctx = self.contexts.get(partition)
        if ctx is None:
            raise NotCoordinator(f"not the coordinator of {what or f'{self.topic}-{partition}'}")
        if ctx.state is PartitionState.LOADING:
            raise CoordinatorLoadInProgress(f"{what or f'{self.topic}-{partition}'} is loading")
        return ctx

    def shard(self, partition: int, what: str = "") -> S:
        return self.context(partition, what).shard

    def active(self, partition: int) -> S | None:
        ctx = self.contexts.get(partition)
        return ctx.shard if ctx is not None and ctx.state is PartitionState.ACTIVE else None

    def active_shards(self) -> Iterator[S]:
        for ctx in list(self.contexts.values()):
            if ctx.state is PartitionState.ACTIVE:
                yield ctx.shard

    def all_shards(self) -> Iterator[S]:
        """Loading ones too (what they have replayed so far)."""
        return iter([ctx.shard for ctx in self.contexts.values()])

    async def write(self, partition: int, records: Sequence[Record], *,
                    producer_id: int = -1, producer_epoch: int = -1,
                    transactional: bool = False,
                    too_large: ErrorCode = ErrorCode.unknown_server_error) -> int | None:
        """Append with acks=all; returns once committed and the partition is still
        served here by the same shard — only then may the caller apply the change.
        Raises KafkaError with the code the client should see. Returns the offset of the
        first record written (None when the log does not say)."""
        ctx = self.context(partition)  # nothing is written where we do not serve
        try:
            offset = await self.log.append(partition, records, producer_id=producer_id,
                                           producer_epoch=producer_epoch,
                                           transactional=transactional)
        except KafkaError as e:
            raise KafkaError(str(e), append_error(e, too_large)) from e
        if self.contexts.get(partition) is not ctx:
            raise NotCoordinator(f"{self.topic}-{partition} moved during the write")
        return offset

    def leader_epoch(self, partition: int) -> int:
        return self.log.leader_epoch(partition)

    # ---- tasks -------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s coordinator task failed", self.topic, exc_info=task.exception())

    def every(self, interval_ms: int, fn: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run `fn` every `interval_ms` from `start()` to `stop()`."""
        self._periodic.append((interval_ms, fn))
        if self._started:
            self.spawn(self._repeat(interval_ms, fn))

    async def _repeat(self, interval_ms: int,
                      fn: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await fn()
            except Exception:
                log.exception("%s failed", getattr(fn, "__name__", fn))

    def start(self) -> None:
        self._started = True
        for interval_ms, fn in self._periodic:
            self.spawn(self._repeat(interval_ms, fn))

    def stop(self) -> None:
        """Cancel every task and unload every partition."""
        self._started = False
        for task in list(self._tasks):
            task.cancel()
        for p in list(self.contexts):
            self.on_resigned([p])


class ShardMaps(Mapping[str, V]):
    """One read-only mapping over a map of every shard (each key lives in one shard:
    its partition's), e.g. all the groups a group coordinator holds."""

    def __init__(self, maps: Callable[[], Iterable[Mapping[str, V]]]) -> None:
        self._maps = maps

    def __getitem__(self, key: str) -> V:
        for m in self._maps():
            if key in m:
                return m[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter([k for m in self._maps() for k in m])

    def __len__(self) -> int:
        return sum(len(m) for m in self._maps())
