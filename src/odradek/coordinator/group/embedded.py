"""The classic consumer's embedded protocol, as far as a consumer group reads it.

A classic member inside a consumer group (KIP-848's online migration) states its
subscription in JoinGroup's protocol metadata (ConsumerProtocolSubscription: topics,
v1+ owned partitions, v3+ rack) and gets its assignment back in SyncGroup as a
ConsumerProtocolAssignment written at the version of its subscription.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from odradek.coordinator.group.consumer import TopicsView
from odradek.protocol.group_records import (
    Field,
    Malformed,
    Struct,
    decode_consumer_assignment,
    encode_consumer_assignment,
    read_message,
)

Assignment = dict[uuid.UUID, set[int]]

_TOPIC_PARTITIONS = Struct(
    "TopicPartition", (Field("topic", "string"), Field("partitions", "[]int32")))
_SUBSCRIPTION = Struct(
    "ConsumerProtocolSubscription",
    (
        Field("topics", "[]string"),
        Field("userData", "bytes", nullable=True),
        Field("ownedPartitions", _TOPIC_PARTITIONS, since=1),
        Field("generationId", "int32", since=2),
        Field("rackId", "string", since=3, nullable=True),
    ),
)


@dataclass
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, list[int]] = field(default_factory=dict)
    rack_id: str | None = None


def decode_subscription(data: bytes) -> Subscription:
    """Raises Malformed when the metadata is not a ConsumerProtocolSubscription."""
    version, v = read_message(_SUBSCRIPTION, data, "subscription")
    owned: dict[str, list[int]] = {}
    for tp in v.get("ownedPartitions") or []:  # type: ignore[attr-defined]
        owned.setdefault(str(tp["topic"]), []).extend(tp["partitions"])
    rack = v.get("rackId")
    return Subscription(version, [str(t) for t in v["topics"]],  # type: ignore[attr-defined]
                        owned, str(rack) if rack is not None else None)


def version_of(metadata: bytes) -> int:
    """ConsumerProtocol.deserializeVersion: the version an assignment is written at."""
    if len(metadata) < 2:
        raise Malformed("Could not read version from subscription's buffer.")
    return int(struct.unpack_from(">h", metadata)[0])


def to_ids(by_name: dict[str, list[int]], topics: TopicsView) -> Assignment:
    """Partitions named by topic → by topic id; topics that do not exist are dropped."""
    out: Assignment = {}
    for name, parts in by_name.items():
        found = topics.by_name(name)
        if found is not None and parts:
            out.setdefault(found[0], set()).update(parts)
    return out


def to_names(by_id: Assignment, topics: TopicsView) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic_id, parts in by_id.items():
        name = topics.name_of(topic_id)
        if name is not None and parts:
            out[name] = sorted(parts)
    return out


def encode_assignment(assigned: Assignment, topics: TopicsView, metadata: bytes) -> bytes:
    # ConsumerProtocolAssignment v0-v3 share one layout; the version follows the member's
    return encode_consumer_assignment(to_names(assigned, topics),
                                      min(max(version_of(metadata), 0), 3))


def decode_assignment(data: bytes, topics: TopicsView) -> Assignment:
    decoded = decode_consumer_assignment(data)
    if decoded is None:
        raise Malformed("Could not read the assignment.")
    return to_ids(decoded, topics)
