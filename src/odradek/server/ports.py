"""What handlers may use: narrow, typed ports, handed to them in the request context.

The Broker is only the composition root: it builds one `Ports` at start-up and the
request pipeline passes it to every handler. A handler never sees the Broker, so a test
can drive one with small fakes of the ports it touches, and the difference between the
embedded store and ZooKeeper stays behind the metadata port.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.server.configs import ConfigView as ConfigView

if TYPE_CHECKING:
    from odradek.cluster.controller import MetadataController
    from odradek.coordinator.group import GroupCoordinator
    from odradek.coordinator.share import ShareGroups
    from odradek.protocol.errors import KafkaError
    from odradek.replication.fetch_session import (
        FetchSessionCache,
        ReplicaFetchSession,
        SessionKey,
    )
    from odradek.replication.partition import Partition
    from odradek.replication.replica_manager import PartitionRead
    from odradek.replication.settings import ReplicaSettings
    from odradek.security.authorizer import AclAuthorizer
    from odradek.server.metrics import BrokerMetrics
    from odradek.server.txn_storage import BrokerTransactions
    from odradek.storage.log_config import LogConfig


class Replicas(Protocol):
    """The partitions this broker hosts (the replica manager)."""

    @property
    def partitions(self) -> Mapping[tuple[str, int], Partition]: ...

    def get(self, topic: str, index: int) -> Partition: ...

    def get_leader(self, topic: str, index: int,
                   current_leader_epoch: int = -1) -> Partition: ...

    def get_readable(self, topic: str, index: int,
                     current_leader_epoch: int = -1) -> Partition: ...

    def read(self, wanted: Iterable[tuple[Partition | None, KafkaError | None, int, int]],
             max_bytes: int, read_committed: bool, replica_id: int = -1,
             client_rack: str = "", from_followers: bool = False,
             file_records: bool = False) -> tuple[list[PartitionRead], int]: ...

    @property
    def settings(self) -> ReplicaSettings: ...

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...

    def read_session(self, session: ReplicaFetchSession, keys: Iterable[SessionKey],
                     max_bytes: int, out: dict[SessionKey, PartitionRead]) -> int: ...


class LogDirs(Protocol):
    """The log directories: their usage, moves between them, record deletion."""

    def delete_records(self, topic: str, partition: int, offset: int) -> int: ...

    def start_move(self, topic: str, partition: int, target: Any) -> Any: ...

    def move_ended(self, move: Any) -> None: ...

    def dir_usage(self) -> Iterable[Any]: ...

    @property
    def unopened(self) -> Mapping[tuple[str, int], str]: ...

    @property
    def offline_dirs(self) -> Mapping[Any, str]: ...


@dataclass(frozen=True, slots=True)
class Ports:
    node_id: int
    config: ConfigView
    metadata: MetadataController
    replicas: Replicas
    logs: LogDirs
    groups: GroupCoordinator
    transactions: BrokerTransactions
    metrics: BrokerMetrics
    # the effective log config of a topic (its overrides over the broker's defaults)
    topic_config: Callable[[str], LogConfig]
    # creates __consumer_offsets on the first FindCoordinator; False when it cannot yet
    ensure_offsets_topic: Callable[[], Awaitable[bool]]
    # the ACL authorizer as it stands now (None: no authorizer.class.name)
    acls: Callable[[], AclAuthorizer] | None
    # background work that outlives the request (a log-dir move), stopped with the broker
    spawn: Callable[[Awaitable[Any]], None]
    # share groups (KIP-932): their coordinator and the share-partitions we lead
    shares: ShareGroups | None = None
    # creates __share_group_state on a FindCoordinator for a share-partition (key type 2)
    ensure_share_state_topic: Callable[[], Awaitable[bool]] | None = None
