"""The controller: the one place that changes the metadata image.

Every change is validated, persisted through the store, and then announced to the
listeners (the broker creates or deletes logs, applies configs) — in that order, so a
crash between the two leaves the store as the source of truth the broker reconciles
against at start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from odradek.cluster import store as store_records
from odradek.cluster import topic_rules as rules
from odradek.cluster.metadata import (
    NEW_CLUSTER_FEATURES,
    BrokerInfo,
    MetadataImage,
    PartitionInfo,
    TopicInfo,
    new_topic_id,
    topic_to_json,
    validate_topic_name,
)
from odradek.cluster.store import MetadataStore
from odradek.protocol.errors import (
    ErrorCode,
    InvalidReplicationFactor,
    KafkaError,
    TopicAlreadyExists,
    TopicDeletionDisabled,
    UnknownTopicOrPartition,
)

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000

TopicPartition = tuple[str, int]
# a listener may return what is left of its work; the controller's change completes
# (CreateTopics answers) when it is done
Listener = Callable[[str, MetadataImage, MetadataImage, str], Awaitable[None] | None]
"""(event, old image, new image, topic name) — event is created/deleted/partitions/configs
(and with ZooKeeper also partition-state, brokers, controller, broker-configs, session)."""


class MetadataController(Protocol):
    """The metadata port of handlers and coordinators: the embedded `Controller` of a
    single broker, or a cluster's `ZkMetadataStore`. Every change is a coroutine: with
    ZooKeeper it waits on the network, and it must never hold the event loop while it
    does. What differs between the backends (leaders elected later, reassignments,
    elections) lives behind these methods, not in the handlers."""

    image: MetadataImage

    def add_listener(self, listener: Listener) -> None: ...

    def validate_topic_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]: ...

    async def create_topic(self, name: str, num_partitions: int = -1,
                           replication_factor: int = -1,
                           assignments: Mapping[int, Sequence[int]] | None = None,
                           configs: Mapping[str, str | None] | None = None,
                           validate_only: bool = False) -> TopicInfo: ...

    async def create_internal_topic(self, name: str, num_partitions: int,
                                    replication_factor: int,
                                    configs: Mapping[str, str]) -> TopicInfo: ...

    async def delete_topic(self, name: str, *, enabled: bool = True) -> TopicInfo: ...

    async def create_partitions(self, name: str, total: int,
                                assignments: Sequence[Sequence[int]] | None = None,
                                validate_only: bool = False) -> TopicInfo: ...

    async def set_topic_configs(self, name: str,
                                configs: Mapping[str, str | None]) -> TopicInfo: ...

    async def set_broker_configs(self, configs: Mapping[str, str]) -> None: ...

    async def allocate_producer_id(self) -> int: ...

    async def alter_user_config(self, user: str, key: str, value: str | None) -> None:
        """Set (None: remove) one entry of a user's config: a SCRAM credential."""
        ...

    async def alter_client_quotas(
            self, changes: Sequence[tuple[str, str, str | None]]) -> None:
        """Set (value None: remove) quota keys of entities, named by their ZooKeeper
        paths; every change of one request in one write."""
        ...

    async def set_acls(self, acls: Sequence[tuple[str, ...]]) -> None:
        """Replace the stored ACLs (CreateAcls and DeleteAcls compute the new set)."""
        ...

    async def set_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace one client-metrics subscription's configs (empty: remove it)."""
        ...

    async def set_features(self, levels: Mapping[str, int]) -> None:
        """Replace the finalized feature levels (UpdateFeatures has checked them)."""
        ...

    async def settle(self, created: Sequence[str] = (), deleted: Sequence[str] = (),
                     timeout_s: float = 30.0) -> bool:
        """Wait until created topics have leaders and deleted ones are gone."""
        ...

    async def run_elections(self, election: int, partitions: Sequence[TopicPartition],
                            timeout_s: float) -> set[TopicPartition]:
        """Elect leaders (0 preferred, 1 unclean); the partitions that got one."""
        ...

    async def alter_reassignment(self, tp: TopicPartition, current: PartitionInfo,
                                 replicas: Sequence[int] | None) -> None:
        """Start (None: cancel) a partition's move; KafkaError when refused."""
        ...

    async def list_reassignments(self) -> dict[TopicPartition, PartitionInfo]: ...


def new_cluster_configs(static: Mapping[str, Any]) -> dict[str, str]:
    """The cluster-level dynamic configs a new cluster starts with, as Kafka 4.1+'s: with
    eligible leader replicas (KIP-966, on for new clusters) the controller's activation
    writes `min.insync.replicas` at cluster level from the static value, so that every
    broker and topic resolves the same one (DescribeConfigs then reports it as
    DYNAMIC_DEFAULT_BROKER_CONFIG)."""
    return {"min.insync.replicas": str(int(static.get("min.insync.replicas", 1)))}


def _finalized(levels: Mapping[str, int]) -> dict[str, int]:
    return {str(n): int(v) for n, v in levels.items() if int(v) > 0}


def _stored_features(data: dict[str, Any] | None) -> dict[str, Any]:
    """The finalized feature levels a store holds; a new store (or one written before
    levels were stored, when they were fixed at these) starts at Kafka 4's."""
    stored = (data or {}).get("features")
    if not isinstance(stored, dict):
        return {"features": dict(NEW_CLUSTER_FEATURES), "features_epoch": 1}
    return {"features": _finalized(stored.get("levels", {})),
            "features_epoch": int(stored.get("epoch", 1))}


class Controller:
    def __init__(
        self,
        store: MetadataStore,
        *,
        cluster_id: str,
        local_broker: BrokerInfo,
        broker_defaults: Callable[[], Mapping[str, Any]],
        loaded: dict[str, Any] | None = None,
        loaded_topics: dict[str, TopicInfo] | None = None,
    ) -> None:
        """`loaded`: what the store holds, when the caller has read it already (the
        broker reads it once at start-up, before the logs), and `loaded_topics` its
        topics already parsed."""
        self.store = store
        self.node_id = local_broker.node_id
        self._broker_defaults = broker_defaults
        self._listeners: list[Listener] = []
        data = loaded if loaded is not None else store.load()
        if loaded_topics is not None and loaded is not None:
            topics = loaded_topics
        else:
            topics = MetadataImage.topics_from_json(data) if data else {}
        self.image = MetadataImage(
            cluster_id=(data or {}).get("cluster_id", cluster_id),
            controller_id=local_broker.node_id,
            brokers={local_broker.node_id: local_broker},
            topics=topics,
            broker_configs=(dict(data.get("broker_configs", {})) if data
                            else new_cluster_configs(broker_defaults())),
            next_producer_id=int((data or {}).get("next_producer_id", 0)),
            user_configs={str(u): dict(c) for u, c in
                          (data or {}).get("user_configs", {}).items()},
            acls=tuple(tuple(str(x) for x in a) for a in (data or {}).get("acls", [])),
            client_quotas={str(e): {str(k): str(v) for k, v in c.items()} for e, c in
                           (data or {}).get("client_quotas", {}).items()},
            client_metrics={str(n): dict(c) for n, c in
                            (data or {}).get("client_metrics", {}).items()},
            **_stored_features(data),
        )
        self._pid_next = self.image.next_producer_id
        self._pid_end = self.image.next_producer_id
        # One change at a time: each is computed from the image the previous one left,
        # and the store's write (an append and its fsync) runs off the event loop.
        self._changing = asyncio.Lock()
        if data is None:
            self.store.save(self.image.to_json())

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def _save(self, new: MetadataImage) -> None:
        """Persist what changed from the current image: a record per changed topic and
        one for the cluster-wide fields if they changed (store.py); a full snapshot
        when the store's log has outgrown it."""
        old = self.image
        loop = asyncio.get_running_loop()
        if self.store.wants_snapshot():
            await loop.run_in_executor(None, self.store.save, new.to_json())
            return
        records = [
            store_records.topic_record(name, None if t is None else topic_to_json(t))
            for name in old.topics.keys() | new.topics.keys()
            if (t := new.topics.get(name)) is not old.topics.get(name)
        ]
        header = new.header_json()
        if header != old.header_json():
            records.append(store_records.header_record(header))
        if (new.features, new.features_epoch) != (old.features, old.features_epoch):
            records.append(store_records.features_record(new.features_json()))
        await loop.run_in_executor(None, self.store.append, records)

    async def _commit(self, new: MetadataImage, event: str, topic: str) -> None:
        old = self.image
        await self._save(new)
        self.image = new
        for listener in self._listeners:
            pending = listener(event, old, new, topic)
            if pending is not None:  # the broker still opening a big topic's partitions
                await pending

    # ---- topics -----------------------------------------------------------------

    def validate_topic_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        return rules.validate_topic_configs(configs)

    def _live_brokers(self) -> list[int]:
        return sorted(b.node_id for b in self.image.brokers.values() if not b.fenced)

    def _assign(self, first: int, count: int, rf: int) -> list[tuple[int, ...]]:
        """Round-robin replica placement with a staggered start, like Kafka's."""
        brokers = self._live_brokers()
        if rf > len(brokers):
            raise InvalidReplicationFactor(
                f"Replication factor: {rf} larger than available brokers: {len(brokers)}."
            )
        out = []
        for p in range(first, first + count):
            start = p % len(brokers)
            out.append(tuple(brokers[(start + i) % len(brokers)] for i in range(rf)))
        return out

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        async with self._changing:
            return await self._create_topic(name, num_partitions, replication_factor,
                                            assignments, configs, validate_only)

    async def _create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]] | None,
        configs: Mapping[str, str | None] | None,
        validate_only: bool,
    ) -> TopicInfo:
        validate_topic_name(name)
        if name in self.image.topics:
            raise TopicAlreadyExists(f"Topic '{name}' already exists.")
        clean = self.validate_topic_configs(configs or {})
        replica_lists = rules.new_topic_replicas(
            assignments, num_partitions, replication_factor, self._broker_defaults(),
            self._live_brokers(), lambda n, rf: self._assign(0, n, rf), cap_default_rf=True)
        topic = TopicInfo(
            name=name,
            topic_id=new_topic_id(),
            partitions=tuple(
                PartitionInfo(p, replicas[0], 0, replicas, replicas)
                for p, replicas in enumerate(replica_lists)
            ),
            configs=clean,
        )
        rules.check_collision(name, self.image.topics)
        if validate_only:
            return topic
        topics = dict(self.image.topics)
        topics[name] = topic
        await self._commit(replace(self.image, topics=topics), "created", name)
        log.info("created topic %s with %d partitions", name, len(topic.partitions))
        return topic

    async def create_internal_topic(self, name: str, num_partitions: int,
                                    replication_factor: int,
                                    configs: Mapping[str, str]) -> TopicInfo:
        """Create an internal topic (`__consumer_offsets`) unless it exists; the
        replication factor is capped at the live brokers, as Kafka does for these."""
        async with self._changing:
            existing = self.image.topics.get(name)
            if existing is not None:
                return existing
            rf = max(1, min(replication_factor, len(self._live_brokers())))
            return await self._create_topic(name, num_partitions, rf, None, configs, False)

    async def delete_topic(self, name: str, *, enabled: bool = True) -> TopicInfo:
        async with self._changing:
            topic = self.image.topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
            if not enabled:
                raise TopicDeletionDisabled("Topic deletion is disabled.")
            topics = dict(self.image.topics)
            del topics[name]
            await self._commit(replace(self.image, topics=topics), "deleted", name)
        log.info("deleted topic %s", name)
        return topic

    async def create_partitions(
        self,
        name: str,
        total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        async with self._changing:
            return await self._create_partitions(name, total, assignments, validate_only)

    async def _create_partitions(self, name: str, total: int,
                                 assignments: Sequence[Sequence[int]] | None,
                                 validate_only: bool) -> TopicInfo:
        topic = self.image.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        current = len(topic.partitions)
        added = rules.check_partition_growth(current, total,
                                             len(assignments) if assignments else None)
        if assignments:
            replica_lists = [tuple(a) for a in assignments]
            rules.check_assignment(replica_lists, topic.replication_factor,
                                   self._live_brokers(), first=current)
        else:
            replica_lists = self._assign(current, added, topic.replication_factor)
        new_parts = tuple(
            PartitionInfo(current + i, r[0], 0, r, r) for i, r in enumerate(replica_lists)
        )
        updated = replace(topic, partitions=topic.partitions + new_parts)
        if not validate_only:
            topics = dict(self.image.topics)
            topics[name] = updated
            await self._commit(replace(self.image, topics=topics), "partitions", name)
        return updated

    async def set_topic_configs(self, name: str,
                                configs: Mapping[str, str | None]) -> TopicInfo:
        """Replace a topic's overrides with `configs` (validated)."""
        async with self._changing:
            topic = self.image.topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
            clean = self.validate_topic_configs(configs)
            updated = topic.with_configs(clean)
            topics = dict(self.image.topics)
            topics[name] = updated
            await self._commit(replace(self.image, topics=topics), "configs", name)
            return updated

    async def set_broker_configs(self, configs: Mapping[str, str]) -> None:
        async with self._changing:
            await self._commit(replace(self.image, broker_configs=dict(configs)),
                               "broker-configs", "")

    async def alter_user_config(self, user: str, key: str, value: str | None) -> None:
        async with self._changing:
            users = {u: dict(c) for u, c in self.image.user_configs.items()}
            entry = users.setdefault(user, {})
            if value is None:
                entry.pop(key, None)
                if not entry:
                    del users[user]
            else:
                entry[key] = value
            await self._commit(replace(self.image, user_configs=users), "user-configs", user)

    async def alter_client_quotas(
            self, changes: Sequence[tuple[str, str, str | None]]) -> None:
        async with self._changing:
            quotas = {e: dict(c) for e, c in self.image.client_quotas.items()}
            for entity, key, value in changes:
                entry = quotas.setdefault(entity, {})
                if value is None:
                    entry.pop(key, None)
                else:
                    entry[key] = value
                if not entry:
                    del quotas[entity]
            await self._commit(replace(self.image, client_quotas=quotas), "client-quotas", "")

    async def set_acls(self, acls: Sequence[tuple[str, ...]]) -> None:
        async with self._changing:
            await self._commit(replace(self.image, acls=tuple(acls)), "acls", "")

    async def set_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        async with self._changing:
            subscriptions = dict(self.image.client_metrics)
            if configs:
                subscriptions[name] = dict(configs)
            else:
                subscriptions.pop(name, None)
            await self._commit(replace(self.image, client_metrics=subscriptions),
                               "client-metrics", name)

    async def set_features(self, levels: Mapping[str, int]) -> None:
        async with self._changing:
            await self._commit(replace(self.image, features=_finalized(levels),
                                       features_epoch=self.image.features_epoch + 1),
                               "features", "")

    # ---- producer ids -----------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before, across restarts: blocks are persisted."""
        async with self._changing:
            if self._pid_next >= self._pid_end:
                start = self.image.next_producer_id
                new = replace(self.image, next_producer_id=start + PRODUCER_ID_BLOCK)
                await self._save(new)
                self.image = new
                self._pid_next, self._pid_end = start, start + PRODUCER_ID_BLOCK
            pid = self._pid_next
            self._pid_next += 1
            return pid

    # ---- what only a cluster does -----------------------------------------------

    async def settle(self, created: Sequence[str] = (), deleted: Sequence[str] = (),
                     timeout_s: float = 30.0) -> bool:
        return True  # a single broker's changes are complete when they return

    async def run_elections(self, election: int, partitions: Sequence[TopicPartition],
                            timeout_s: float) -> set[TopicPartition]:
        # The only broker leads every partition: no election is ever needed, so the
        # prechecks have answered every partition before this is reached.
        return set()

    async def alter_reassignment(self, tp: TopicPartition, current: PartitionInfo,
                                 replicas: Sequence[int] | None) -> None:
        if replicas is None:
            raise KafkaError("no reassignment is in progress",
                             ErrorCode.no_reassignment_in_progress)
        if tuple(replicas) != current.replicas:
            raise KafkaError(
                f"a single broker has no broker other than {self.node_id} to move to",
                ErrorCode.invalid_replica_assignment)

    async def list_reassignments(self) -> dict[TopicPartition, PartitionInfo]:
        return {}

