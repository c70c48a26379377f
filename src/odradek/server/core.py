"""The parts of a broker its own adapters reach: the composition root's inside.

The group and transaction storage adapters, the marker sender and the metrics read a
few of the Broker's parts. They name this protocol, not the Broker, so that the Broker
(which builds them) stays above them and `server/` has no import circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from odradek.cluster.controller import MetadataController
    from odradek.coordinator.group import GroupCoordinator
    from odradek.replication.channel import ChannelSecurity
    from odradek.replication.replica_manager import ReplicaManager
    from odradek.server.config import BrokerConfig
    from odradek.storage.manager import LogManager


class BrokerCore(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def controller(self) -> MetadataController: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def groups(self) -> GroupCoordinator: ...

    @property
    def logs(self) -> LogManager: ...

    @property
    def inter_broker(self) -> ChannelSecurity: ...
