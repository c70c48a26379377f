"""One `__consumer_offsets` partition's groups: the group coordinator's state machine
on the coordinator runtime.

While the partition loads, `replay` collects each group's last metadata record and
offsets (the last record for a key wins, a tombstone removes it) and the offsets of
transactions not ended yet, by producer (a COMMIT marker makes them committed, an
ABORT drops them; those still open at the log end stay pending in their group —
txn_offsets.py has the rules). `on_loaded` builds the groups from that and starts
their timers. Serving, the shard is what a group's state machine calls for time,
timers and writes (model.Runtime).
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from odradek.coordinator.group.classic import ClassicGroup
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.coordinator.group.model import (
    Group,
    GroupConfig,
    OffsetAndMetadata,
    TopicPartition,
    now_ms,
)
from odradek.coordinator.runtime import CoordinatorTimer, Record
from odradek.protocol.batch import BatchHeader
from odradek.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from odradek.protocol.records import Record as LogRecord

if TYPE_CHECKING:
    from odradek.coordinator.runtime import CoordinatorRuntime

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, OffsetAndMetadata]


class GroupShard:
    def __init__(self, partition: int, config: GroupConfig, timer: CoordinatorTimer,
                 runtime: CoordinatorRuntime[GroupShard]) -> None:
        self.partition = partition
        self.config = config
        self.timer = timer
        self._runtime = runtime
        self.groups: dict[str, Group] = {}
        # what the load has read so far; dropped once the groups are built
        self._offsets: dict[str, Offsets] = {}
        self._metadata: dict[str, tuple[GroupMetadataValue | None, int]] = {}  # last, when
        self._pending: dict[int, dict[str, Offsets]] = {}  # producer → group → offsets

    # ---- model.Runtime: what a group's state machine calls --------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._runtime.spawn(coro)

    async def store_group(self, group: Group, record: Record) -> None:
        await self._runtime.write(group.partition, [record])

    # ---- replay ---------------------------------------------------------------------

    def replay(self, batch: BatchHeader, record: LogRecord) -> None:
        if record.key is None:
            return
        key = decode_key(record.key)
        if isinstance(key, OffsetCommitKey):
            tp = (key.topic, key.partition)
            if batch.is_transactional:
                if record.value is not None:
                    by_group = self._pending.setdefault(batch.producer_id, {})
                    by_group.setdefault(key.group, {})[tp] = _offset(record.value)
                return
            group_offsets = self._offsets.setdefault(key.group, {})
            if record.value is None:
                group_offsets.pop(tp, None)
            else:
                group_offsets[tp] = _offset(record.value)
                # an ordinary commit after a transactional one: the later write wins
                for by_group in self._pending.values():
                    by_group.get(key.group, {}).pop(tp, None)
        elif isinstance(key, GroupMetadataKey):
            value = None if record.value is None else decode_group_metadata_value(record.value)
            self._metadata[key.group] = (value, record.timestamp)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        by_group = self._pending.pop(producer_id, None)
        if by_group and commit:
            for group_id, tps in by_group.items():
                self._offsets.setdefault(group_id, {}).update(tps)

    def on_loaded(self) -> None:
        groups = self.groups
        still_open = {g for by_group in self._pending.values() for g, tps in by_group.items()
                      if tps}
        for group_id, (value, timestamp) in self._metadata.items():
            if value is None:
                continue
            group = ClassicGroup(group_id, self.partition, self)
            try:
                group.load(value, timestamp)
            except (AssertionError, KeyError, TypeError, ValueError) as exc:
                log.warning("skipping unreadable metadata of group %s: %s", group_id, exc)
                continue
            groups[group_id] = group
        for group_id in still_open - self._offsets.keys():
            self._offsets[group_id] = {}
        for group_id, group_offsets in self._offsets.items():
            if not group_offsets and group_id not in still_open:
                continue
            existing = groups.get(group_id)
            if existing is None:
                # offsets without group metadata: a group whose members assign themselves
                existing = groups[group_id] = ClassicGroup(group_id, self.partition, self)
                existing.current_state_timestamp = max(
                    (v.commit_timestamp for v in group_offsets.values()), default=now_ms())
            existing.offsets = group_offsets
        for pid, by_group in self._pending.items():
            for group_id, tps in by_group.items():
                if tps:
                    groups[group_id].pending_txn_offsets[pid] = tps
        self._offsets, self._metadata, self._pending = {}, {}, {}
        for loaded in groups.values():
            if isinstance(loaded, ClassicGroup):
                loaded.start_timers()

    def on_unloaded(self) -> None:
        for group in self.groups.values():
            if isinstance(group, ClassicGroup | ConsumerGroup):
                group.remove_all()
        self.groups.clear()


def _offset(value: bytes) -> OffsetAndMetadata:
    v = decode_offset_commit_value(value)
    return OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                             v.expire_timestamp)
