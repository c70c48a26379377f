"""coordinator/share: share groups (KIP-932, "queues for Kafka").

coordinator.py is the share group coordinator (members, epochs, assignment) on the
coordinator runtime; partition.py one share-partition's in-flight records, their
states, delivery counts and acquisition locks; sessions.py the share sessions;
manager.py the leader's share-partitions and what ShareFetch/ShareAcknowledge do with
them; state.py the share coordinator, which keeps every share-partition's state in
`__share_group_state`; config.py the `group.share.*` settings. Share groups' members
are in memory (rebuilt by their heartbeats); see docs/share-groups.md.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.coordinator.group.consumer import TopicsView
from odradek.coordinator.share.admin import ShareGroupAdmin
from odradek.coordinator.share.config import (
    AUTO_OFFSET_RESET,
    AUTO_OFFSET_RESET_CHOICES,
    ISOLATION_LEVEL,
    ISOLATION_LEVEL_CHOICES,
    ShareConfig,
)
from odradek.coordinator.share.coordinator import ShareGroupCoordinator
from odradek.coordinator.share.group import HeartbeatResult, ShareGroup, ShareMember
from odradek.coordinator.share.manager import Persister, Replicas, SharePartitionManager
from odradek.coordinator.share.state import ShareStateCoordinator
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["AUTO_OFFSET_RESET", "HeartbeatResult", "ShareConfig", "ShareGroup",
           "ShareGroupCoordinator", "ShareGroups", "ShareMember", "SharePartitionManager"]

GROUP_CONFIGS = {AUTO_OFFSET_RESET: "latest", ISOLATION_LEVEL: "read_uncommitted"}
CHOICES = {AUTO_OFFSET_RESET: AUTO_OFFSET_RESET_CHOICES,
           ISOLATION_LEVEL: ISOLATION_LEVEL_CHOICES}


class ShareGroups:
    """The broker's share groups: the coordinator, the share-partitions it leads and
    the groups' configs (`share.auto.offset.reset`)."""

    def __init__(self, config: ShareConfig, topics: TopicsView, replicas: Replicas,
                 state: ShareStateCoordinator | None = None,
                 persister: Persister | None = None) -> None:
        self.config = config
        self.topics = topics
        self.state = state  # the share coordinator, when this broker runs one
        self.group_configs: dict[str, dict[str, str]] = {}
        self.partitions = SharePartitionManager(config, replicas, topics,
                                                self.auto_offset_reset, persister,
                                                self.read_committed)
        self.coordinator = ShareGroupCoordinator(config, topics,
                                                 self.partitions.release_member)
        self.admin = ShareGroupAdmin(self.coordinator, self.partitions, topics)

    def start(self) -> None:
        self.coordinator.start()
        if self.state is not None:
            self.state.start()

    def stop(self) -> None:
        self.coordinator.stop()
        self.partitions.close()
        if self.state is not None:
            self.state.stop()

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups of a share group: its state, the group, and its configs."""
        await self.admin.delete_group(group_id)
        self.group_configs.pop(group_id, None)

    def auto_offset_reset(self, group_id: str) -> str:
        return self.group_configs.get(group_id, {}).get(AUTO_OFFSET_RESET, "latest")

    def read_committed(self, group_id: str) -> bool:
        return self.group_configs.get(group_id, {}).get(ISOLATION_LEVEL) == "read_committed"

    def describe_group_config(self, group_id: str) -> dict[str, tuple[str, bool]]:
        """name → (value, is it the default)."""
        set_here = self.group_configs.get(group_id, {})
        return {name: (set_here.get(name, default), name not in set_here)
                for name, default in GROUP_CONFIGS.items()}

    def alter_group_config(self, group_id: str, changes: Mapping[str, str | None]) -> None:
        """Set (a value) or delete (None) group configs; all or none."""
        for name, value in changes.items():
            if name not in GROUP_CONFIGS:
                raise KafkaError(f"Unknown group config name: {name}",
                                 ErrorCode.invalid_config)
            if value is not None and value not in CHOICES[name]:
                raise KafkaError(f"Invalid value {value} for configuration {name}: "
                                 f"one of {', '.join(CHOICES[name])}",
                                 ErrorCode.invalid_config)
        configs = self.group_configs.setdefault(group_id, {})
        for name, value in changes.items():
            if value is None:
                configs.pop(name, None)
            else:
                configs[name] = value
        if not configs:
            del self.group_configs[group_id]
