"""Rebuild a partition's groups from `__consumer_offsets`, as a new leader does.

The partition is read from its log start to its log end (as Kafka loads); the last record for a
key wins and a tombstone removes it, exactly what compaction will leave behind, so a
compacted and an uncompacted log load the same groups. The reads yield to the event
loop between chunks: a large partition does not stall the broker.

Offsets in a transactional batch (TxnOffsetCommit) are held per producer until that
producer's marker: COMMIT makes them committed, ABORT drops them, and those still
open when the log ends stay pending in their group (txn_offsets.py has the rules).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from odradek.coordinator.group.classic import ClassicGroup
from odradek.coordinator.group.model import Group, OffsetAndMetadata, now_ms
from odradek.protocol.errors import CorruptMessage
from odradek.protocol.group_records import (
    GroupMetadataKey,
    Malformed,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from odradek.protocol.records import ControlType, Record, decode_batches, read_control_record

if TYPE_CHECKING:
    from odradek.coordinator.group.coordinator import GroupCoordinator, OffsetsLog

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20


async def replay(offsets_log: OffsetsLog, partition: int, coordinator: GroupCoordinator
                 ) -> dict[str, Group]:
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
    metadata: dict[str, tuple[bytes | None, int]] = {}  # last GroupMetadata value, timestamp
    # producer id → group → offsets written in its open transaction
    pending: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
    position = offsets_log.log_start_offset(partition)
    while True:
        data, log_end = offsets_log.read(partition, position, CHUNK_BYTES)
        if position >= log_end or not data:
            break
        for batch in decode_batches(data):
            position = batch.last_offset + 1
            pid = batch.header.producer_id
            if batch.is_control:
                if len(batch) and pid in pending:
                    _end_transaction(batch.records[0], pending.pop(pid), offsets, partition)
                continue
            txn = pending.setdefault(pid, {}) if batch.is_transactional else None
            for record in batch:
                if record.key is None:
                    continue
                try:
                    key = decode_key(record.key)
                    if isinstance(key, OffsetCommitKey):
                        tp = (key.topic, key.partition)
                        if txn is not None:
                            if record.value is not None:
                                txn.setdefault(key.group, {})[tp] = _offset(record.value)
                            continue
                        group_offsets = offsets.setdefault(key.group, {})
                        if record.value is None:
                            group_offsets.pop(tp, None)
                        else:
                            group_offsets[tp] = _offset(record.value)
                            _supersede(pending, key.group, tp)
                    elif isinstance(key, GroupMetadataKey):
                        metadata[key.group] = (record.value, record.timestamp)
                except (Malformed, AssertionError, KeyError, TypeError) as exc:
                    log.warning("skipping unreadable record at __consumer_offsets-%d offset "
                                "%d: %s", partition, record.offset, exc)
        await asyncio.sleep(0)
    groups: dict[str, Group] = {}
    still_open = {g for by_group in pending.values() for g, tps in by_group.items() if tps}
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
    for group_id in still_open - offsets.keys():
        offsets[group_id] = {}
    for group_id, group_offsets in offsets.items():
        if not group_offsets and group_id not in still_open:
            continue
        existing = groups.get(group_id)
        if existing is None:
            # offsets without group metadata: a group whose members assign themselves
            existing = groups[group_id] = ClassicGroup(group_id, partition, coordinator)
            existing.current_state_timestamp = max(
                (v.commit_timestamp for v in group_offsets.values()), default=now_ms())
        existing.offsets = group_offsets
    for pid, by_group in pending.items():
        for group_id, tps in by_group.items():
            if tps:
                groups[group_id].pending_txn_offsets[pid] = tps
    return groups


def _offset(value: bytes) -> OffsetAndMetadata:
    v = decode_offset_commit_value(value)
    return OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                             v.expire_timestamp)


def _supersede(pending: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]],
               group_id: str, tp: tuple[str, int]) -> None:
    """An ordinary commit after a transactional one: the later write wins."""
    for by_group in pending.values():
        by_group.get(group_id, {}).pop(tp, None)


def _end_transaction(marker: Record, by_group: dict[str, dict[tuple[str, int], OffsetAndMetadata]],
                     offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]],
                     partition: int) -> None:
    try:
        kind, _ = read_control_record(marker)
    except CorruptMessage as exc:
        log.warning("unreadable transaction marker at __consumer_offsets-%d offset %d: %s",
                    partition, marker.offset, exc)
        return
    if kind is ControlType.COMMIT:
        for group_id, tps in by_group.items():
            offsets.setdefault(group_id, {}).update(tps)
