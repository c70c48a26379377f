"""The records of `__share_group_state`, in Kafka's share coordinator schemas (Kafka 4.x's
share-coordinator module: ShareSnapshotKey/Value, ShareUpdateKey/Value).

Sans-IO: bytes in, values out, and back.

    key    int16 record type (0 ShareSnapshot, 1 ShareUpdate), then v0 of
           GroupId string · TopicId uuid · Partition int32 (not flexible)
    value  int16 version 0, flexible:
           ShareSnapshotValue  SnapshotEpoch · StateEpoch · LeaderEpoch · StartOffset ·
                               [tag 0] DeliveryCompleteCount · CreateTimestamp ·
                               WriteTimestamp · StateBatches
           ShareUpdateValue    SnapshotEpoch · LeaderEpoch · StartOffset ·
                               [tag 0] DeliveryCompleteCount · StateBatches
           StateBatch          FirstOffset · LastOffset · DeliveryState (int8) ·
                               DeliveryCount (int16)
    A null value is a tombstone: the share-partition's state was deleted.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from odradek.protocol.group_records import Field, Malformed, Struct, read_message, write_message

__all__ = ["SNAPSHOT", "UPDATE", "Malformed", "ShareStateKey", "StateBatch", "StateValue",
           "decode_key", "decode_value", "encode_key", "encode_value"]

SNAPSHOT = 0
UPDATE = 1

_BATCH = Struct("StateBatch", (
    Field("firstOffset", "int64"),
    Field("lastOffset", "int64"),
    Field("deliveryState", "int8"),
    Field("deliveryCount", "int16"),
), flexible_since=0)
SHARE_SNAPSHOT_VALUE = Struct("ShareSnapshotValue", (
    Field("snapshotEpoch", "int32"),
    Field("stateEpoch", "int32"),
    Field("leaderEpoch", "int32"),
    Field("startOffset", "int64"),
    Field("deliveryCompleteCount", "int32", tag=0, default=-1),
    Field("createTimestamp", "int64"),
    Field("writeTimestamp", "int64"),
    Field("stateBatches", _BATCH),
), flexible_since=0)
SHARE_UPDATE_VALUE = Struct("ShareUpdateValue", (
    Field("snapshotEpoch", "int32"),
    Field("leaderEpoch", "int32"),
    Field("startOffset", "int64"),
    Field("deliveryCompleteCount", "int32", tag=0, default=-1),
    Field("stateBatches", _BATCH),
), flexible_since=0)

_HEAD = struct.Struct(">hh")
_TAIL = struct.Struct(">16si")


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    kind: int  # SNAPSHOT or UPDATE
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int  # 0 available, 2 acknowledged, 4 archived
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateValue:
    """A snapshot (the whole state) or an update (batches to merge into it)."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1 in an update that does not move it
    batches: tuple[StateBatch, ...]
    state_epoch: int = 0  # snapshots only
    create_ms: int = -1
    write_ms: int = -1
    delivery_complete_count: int = -1


def encode_key(key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    return _HEAD.pack(key.kind, len(group)) + group + _TAIL.pack(key.topic_id.bytes,
                                                                 key.partition)


def decode_key(data: bytes) -> ShareStateKey | None:
    """None for a record type that is not a share state record."""
    if len(data) < _HEAD.size:
        raise Malformed("Could not read version from key's buffer.")
    kind, size = _HEAD.unpack_from(data)
    if kind not in (SNAPSHOT, UPDATE):
        return None
    end = _HEAD.size + size
    if size < 0 or len(data) != end + _TAIL.size:
        raise Malformed(f"share state key of {len(data)} bytes does not parse")
    topic, partition = _TAIL.unpack_from(data, end)
    return ShareStateKey(kind, data[_HEAD.size:end].decode("utf-8", "replace"),
                         uuid.UUID(bytes=topic), partition)


def encode_value(kind: int, value: StateValue) -> bytes:
    batches = [{"firstOffset": b.first_offset, "lastOffset": b.last_offset,
                "deliveryState": b.delivery_state, "deliveryCount": b.delivery_count}
               for b in value.batches]
    fields = {"snapshotEpoch": value.snapshot_epoch, "leaderEpoch": value.leader_epoch,
              "startOffset": value.start_offset, "stateBatches": batches,
              "deliveryCompleteCount": value.delivery_complete_count}
    if kind == SNAPSHOT:
        fields.update(stateEpoch=value.state_epoch, createTimestamp=value.create_ms,
                      writeTimestamp=value.write_ms)
        return write_message(SHARE_SNAPSHOT_VALUE, 0, fields)
    return write_message(SHARE_UPDATE_VALUE, 0, fields)


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value


def decode_value(kind: int, data: bytes) -> StateValue:
    spec = SHARE_SNAPSHOT_VALUE if kind == SNAPSHOT else SHARE_UPDATE_VALUE
    version, f = read_message(spec, data)
    if version != 0:
        raise Malformed(f"unknown {spec.name} version {version}")
    raw = f["stateBatches"]
    assert isinstance(raw, list)
    batches = tuple(StateBatch(_int(b["firstOffset"]), _int(b["lastOffset"]),
                               _int(b["deliveryState"]), _int(b["deliveryCount"]))
                    for b in raw)
    return StateValue(
        snapshot_epoch=_int(f["snapshotEpoch"]), leader_epoch=_int(f["leaderEpoch"]),
        start_offset=_int(f["startOffset"]), batches=batches,
        state_epoch=_int(f.get("stateEpoch", 0)),
        create_ms=_int(f.get("createTimestamp", -1)),
        write_ms=_int(f.get("writeTimestamp", -1)),
        delivery_complete_count=_int(f.get("deliveryCompleteCount", -1)))
