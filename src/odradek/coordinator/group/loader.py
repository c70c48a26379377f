"""Rebuild a partition's groups from `__consumer_offsets`, as a new leader does.

The partition is read from its log start to its high watermark; the last record for a
key wins and a tombstone removes it, exactly what compaction will leave behind, so a
compacted and an uncompacted log load the same groups. The reads yield to the event
loop between chunks: a large partition does not stall the broker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from odradek.coordinator.group.classic import ClassicGroup
from odradek.coordinator.group.model import Group, OffsetAndMetadata
from odradek.protocol.group_records import (
    GroupMetadataKey,
    Malformed,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from odradek.protocol.records import decode_batches

if TYPE_CHECKING:
    from odradek.coordinator.group.coordinator import GroupCoordinator, OffsetsLog

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20


async def replay(offsets_log: OffsetsLog, partition: int, coordinator: GroupCoordinator
                 ) -> dict[str, Group]:
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
    metadata: dict[str, tuple[bytes | None, int]] = {}  # last GroupMetadata value, timestamp
    position = offsets_log.log_start_offset(partition)
    while True:
        data, high_watermark = offsets_log.read(partition, position, CHUNK_BYTES)
        if position >= high_watermark or not data:
            break
        for batch in decode_batches(data):
            position = batch.last_offset + 1
            if batch.is_control:
                continue
            for record in batch:
                if record.key is None:
                    continue
                try:
                    key = decode_key(record.key)
                    if isinstance(key, OffsetCommitKey):
                        group_offsets = offsets.setdefault(key.group, {})
                        tp = (key.topic, key.partition)
                        if record.value is None:
                            group_offsets.pop(tp, None)
                        else:
                            v = decode_offset_commit_value(record.value)
                            group_offsets[tp] = OffsetAndMetadata(
                                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                v.expire_timestamp)
                    elif isinstance(key, GroupMetadataKey):
                        metadata[key.group] = (record.value, record.timestamp)
                except (Malformed, AssertionError, KeyError, TypeError) as exc:
                    log.warning("skipping unreadable record at __consumer_offsets-%d offset "
                                "%d: %s", partition, record.offset, exc)
        await asyncio.sleep(0)
    groups: dict[str, Group] = {}
    for group_id, (value, timestamp) in metadata.items():
        if value is None:
            continue
        group = coordinator.new_classic(group_id, partition)
        try:
            group.load(decode_group_metadata_value(value), timestamp)
        except (Malformed, AssertionError, KeyError, TypeError) as exc:
            log.warning("skipping unreadable metadata of group %s: %s", group_id, exc)
            continue
        groups[group_id] = group
    for group_id, group_offsets in offsets.items():
        if not group_offsets:
            continue
        existing = groups.get(group_id)
        if existing is None:
            # offsets without group metadata: a group whose members assign themselves
            existing = groups[group_id] = ClassicGroup(group_id, partition, coordinator)
            existing.current_state_timestamp = max(v.commit_timestamp
                                                   for v in group_offsets.values())
        existing.offsets = group_offsets
    return groups
