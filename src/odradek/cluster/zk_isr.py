"""A leader's ISR changes, written to the partition state znodes in batches.

As a ZooKeeper-mode Kafka leader does, each change is a write of the state znode only
at the version the leader last saw (any change by the controller or another leader
since makes it lose), announced to the controller by an /isr_change_notification
znode. The changes that queue while a write is in flight go together in the next one
(as Kafka's AlterPartitionManager batches them): one ZooKeeper transaction and one
notification for up to ISR_BATCH partitions. A broker restarted next to 10,000
partitions is taken back into 3,000 ISRs per leader at once; one read and one
transaction each held both leaders' event loops for most of 20 s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from odradek.cluster import zk_data as zd
from odradek.cluster.zk_cache import ZnodeCache
from odradek.cluster.zk_client import ZkSession, ZkTransactionFailed

TopicPartition = tuple[str, int]
ISR_BATCH = 500  # states per transaction: ~80 KB, far below ZooKeeper's 1 MB request


@dataclass
class _Change:
    tp: TopicPartition
    new: zd.LeaderAndIsr  # its zk_version: the one the leader saw, written over
    done: asyncio.Future[bool]


class IsrWriter:
    def __init__(self, session: ZkSession, node_id: int, cache: ZnodeCache,
                 publish: Callable[[], None], fenced: Callable[[], bool]) -> None:
        self.session = session
        self.node_id = node_id
        self.cache = cache
        self._publish = publish
        self._fenced = fenced
        self._queue: list[_Change] = []
        self._flushing: asyncio.Task[None] | None = None

    async def alter(self, tp: TopicPartition, leader_epoch: int, partition_epoch: int,
                    new_isr: tuple[int, ...]) -> bool:
        """True once written, with the new state in the cache and published; False when
        the state moved on (this broker no longer leads it at that epoch and version,
        or is fenced): nothing was written, the new state comes through the watches."""
        held = self.cache.states.get(tp)
        if (held is None or held.zk_version != partition_epoch
                or held.leader_epoch != leader_epoch or held.leader != self.node_id
                or self._fenced()):
            return False
        loop = asyncio.get_running_loop()
        new = zd.LeaderAndIsr(self.node_id, leader_epoch, tuple(new_isr),
                              held.controller_epoch, partition_epoch)
        change = _Change(tp, new, loop.create_future())
        self._queue.append(change)
        if self._flushing is None or self._flushing.done():
            self._flushing = loop.create_task(self._flush())
        return await change.done

    def stop(self) -> None:
        if self._flushing is not None:
            self._flushing.cancel()
        for change in self._queue:
            if not change.done.done():
                change.done.cancel()
        self._queue.clear()

    async def _flush(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:ISR_BATCH], self._queue[ISR_BATCH:]
            try:
                versions = await self._write(batch)
            except Exception as e:  # ZooKeeper lost: each leader's change fails with it
                for change in batch:
                    if not change.done.done():
                        change.done.set_exception(e)
                continue
            for change, version in zip(batch, versions, strict=True):
                if version is not None:
                    # a read of the old state in flight cannot undo it: newest kept
                    self.cache.offer_state(change.tp, replace(change.new, zk_version=version))
            self._publish()
            for change, version in zip(batch, versions, strict=True):
                if not change.done.done():
                    change.done.set_result(version is not None)

    async def _write(self, batch: list[_Change]) -> list[int | None]:
        """Each change's new version, None for those that lost. A transaction applies
        all or nothing: when one state had moved, the others are written one by one."""
        written = await self._commit(batch)
        if written is not None:
            return list(written)
        if len(batch) == 1:
            return [None]
        alone = await asyncio.gather(*(self._commit([change]) for change in batch))
        return [None if versions is None else versions[0] for versions in alone]

    async def _commit(self, batch: list[_Change]) -> list[int] | None:
        ops: list[tuple[Any, ...]] = [zd.state_write(c.tp, c.new) for c in batch]
        ops.append(("create", f"{zd.ISR_CHANGE_NOTIFICATION}/{zd.ISR_CHANGE_PREFIX}",
                    zd.encode_partitions(c.tp for c in batch), False, True))
        outcome = await self.session.commit_async(ops, asyncio.get_running_loop())
        if isinstance(outcome, ZkTransactionFailed):
            if isinstance(outcome.error, (BadVersionError, NoNodeError)):
                return None  # a state moved on (or its topic went): nothing was written
            raise outcome
        return [stat.version for stat in outcome[:-1]]
