"""coordinator/runtime: one runtime under every coordinator (Kafka's CoordinatorRuntime).

runtime.py follows partition leadership, loads and serves shards and writes with
acks=all; loader.py replays a partition into its shard; timer.py is a partition's
timers; log.py the partitions as the runtime reads and writes them; errors.py what a
client is told. The group and transaction coordinators are shards on it.

A new coordinator (share groups' `__share_group_state`, the registry's `_schemas`) is
a shard class (`replay`, `replay_end_transaction`, `on_loaded`, `on_unloaded`: see
loader.CoordinatorShard), a `CoordinatorRuntime(topic, ReplicaLog(…), new_shard)`,
and, on the broker's side, `runtime.follow(led_partitions(broker, topic))` at each
metadata change (server/group_storage.py).
"""

from odradek.coordinator.runtime.errors import (
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    NotCoordinator,
    append_error,
)
from odradek.coordinator.runtime.loader import CoordinatorShard, LoadSummary, load
from odradek.coordinator.runtime.log import CoordinatorLog, Record, ReplicaLog
from odradek.coordinator.runtime.runtime import CoordinatorRuntime, PartitionState, ShardMaps
from odradek.coordinator.runtime.timer import CoordinatorTimer

__all__ = [
    "CoordinatorLoadInProgress",
    "CoordinatorLog",
    "CoordinatorNotAvailable",
    "CoordinatorRuntime",
    "CoordinatorShard",
    "CoordinatorTimer",
    "LoadSummary",
    "NotCoordinator",
    "PartitionState",
    "Record",
    "ReplicaLog",
    "ShardMaps",
    "append_error",
    "load",
]
