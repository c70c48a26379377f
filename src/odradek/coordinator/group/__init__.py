"""coordinator/group: consumer groups and their committed offsets over `__consumer_offsets`.

`GroupCoordinator` (coordinator.py) is the entry point; classic.py is the classic
protocol's state machine, consumer.py KIP-848's, assignors.py the server-side
assignors, shard.py one offsets partition's groups on the coordinator runtime (its
replay of `__consumer_offsets`).
"""

from odradek.coordinator.group.coordinator import (
    GroupCoordinator,
    OffsetsLog,
    java_hash_code,
    partition_for,
)
from odradek.coordinator.group.model import GroupConfig, OffsetAndMetadata, OffsetCommit

__all__ = [
    "GroupConfig",
    "GroupCoordinator",
    "OffsetAndMetadata",
    "OffsetCommit",
    "OffsetsLog",
    "java_hash_code",
    "partition_for",
]
