"""A broker's metadata in a ZooKeeper cluster: the image it keeps from the znodes it watches,
its registration, and the Controller interface the handlers use, done by writing znodes.

How the image stays current: every znode the image is made of is read with a watch
(brokers, topics, partition states, configs, /controller). A watch fires on kazoo's
thread and only marks the path dirty on the event loop; a refresher task re-reads the
dirty paths (pipelined, nothing blocks the loop), in rounds until what they lead to
is read too (a new topic → its partition states), then publishes one new image and
tells the listeners what changed. A connection loss drops every watch (kazoo), so a
reconnect re-reads everything.

Admin operations (create a topic, change configs, …) are coroutines: their blocking
ZooKeeper writes run on one admin thread (bounded by the operation timeout; a paused
ZooKeeper never holds the event loop), then they read back what they wrote without
blocking, so the image shows the change when they return. What the controller does in
answer (leaders for a new topic, deleting one) arrives later through the watches; `settle()` waits
for it, bounded, as Kafka's CreateTopics and DeleteTopics wait in their purgatory.

Fencing: kazoo reports SUSPENDED when the connection drops but never LOST while it
cannot reach a server, so the store runs its own timer: suspended for longer than the
session timeout — or told the session expired — the broker is `fenced` and must stop
acting as a leader, because the controller has (or will have) moved its leaderships
elsewhere. A new session re-registers the broker and re-reads everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from odradek.cluster import topic_rules as rules
from odradek.cluster import zk_acls, zk_admin, zk_reads
from odradek.cluster import zk_data as zd
from odradek.cluster.controller import Listener, new_cluster_configs
from odradek.cluster.metadata import (
    NEW_CLUSTER_FEATURES,
    BrokerInfo,
    MetadataImage,
    PartitionInfo,
    TopicInfo,
)
from odradek.cluster.zk_cache import ReadResult, ZnodeCache
from odradek.cluster.zk_client import ZkError, ZkSession
from odradek.cluster.zk_controller import ZkController
from odradek.cluster.zk_image import diff_events
from odradek.cluster.zk_isr import IsrWriter
from odradek.protocol.errors import (
    ErrorCode,
    KafkaError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_ROOTS = (zd.BROKER_IDS, zd.TOPICS, zd.CONTROLLER, zd.DELETE_TOPICS, zd.FEATURE, zd.CONFIG_USERS,
          zd.CONFIG_CLIENTS, zd.CONFIG_CLIENT_METRICS, zk_acls.LITERAL_CHANGES,
          zk_acls.EXTENDED_CHANGES)


class ZkMetadataStore:
    def __init__(
        self,
        session: ZkSession,
        *,
        local_broker: BrokerInfo,
        broker_defaults: Callable[[], Mapping[str, Any]],
    ) -> None:
        self.session = session
        self.local_broker = local_broker
        self.security_protocols: dict[str, str] = {}  # listener -> protocol, registered
        self.node_id = local_broker.node_id
        self._broker_defaults = broker_defaults
        self._listeners: list[Listener] = []
        self.image = MetadataImage(cluster_id="", controller_id=-1, brokers={}, topics={})
        self.cache = ZnodeCache()  # the znodes as last read
        # refreshing
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[str] = set()
        self._full = False
        self._refresher: asyncio.Task[None] | None = None
        self._generation = 0  # bumped by synchronous read-backs: in-flight reads are stale
        self._published = asyncio.Event()
        self._publish_due = False  # states the controller wrote wait for one publish
        # producer ids: the block this broker claimed
        self._pid_next = 0
        self._pid_end = 0
        self._pid_lock = asyncio.Lock()
        # blocking ZooKeeper writes of admin operations run here, in order, off the loop
        self._admin = ThreadPoolExecutor(1, thread_name_prefix=f"zk-admin-{self.node_id}")
        # fencing
        self.fenced = False
        self._fence_timer: asyncio.TimerHandle | None = None
        self._registered = False
        self._stopping = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.controller: ZkController | None = None  # every broker runs one; one is active
        self._isr = IsrWriter(session, self.node_id, self.cache, self._publish,
                              lambda: self.fenced)

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self, proposed_cluster_id: str) -> None:
        """Create the top-level znodes, learn the cluster id and read the whole image."""
        self._loop = asyncio.get_running_loop()
        self._published = asyncio.Event()
        loop = self._loop
        await loop.run_in_executor(None, self.session.create_top_level_paths)
        cluster_id = await loop.run_in_executor(None, self.session.cluster_id,
                                                proposed_cluster_id)
        self.image = replace(self.image, cluster_id=cluster_id)
        if cluster_id == proposed_cluster_id:  # this broker created the cluster
            await loop.run_in_executor(None, self._seed_cluster_configs)
        await loop.run_in_executor(None, self._seed_features)

        def on_state(event: str) -> None:
            loop.call_soon_threadsafe(self._on_session, event)

        self.session.add_state_listener(on_state)
        await self.refresh_all()
        self._spawn(self._purge_notifications())

    def _seed_cluster_configs(self) -> None:
        found = self.session.get(zd.broker_config_path())
        current = zd.decode_config(found[0]) if found else {}
        wanted = new_cluster_configs(self._broker_defaults())
        if any(name not in current for name in wanted):
            zk_admin.set_configs(self.session, "brokers", zd.DEFAULT_ENTITY,
                                 {**wanted, **current})

    def _seed_features(self) -> None:
        """Kafka's controller creates /feature when it is missing: a new cluster (or one
        from before levels were stored, when they were fixed at these) gets Kafka 4's
        levels. Whichever broker comes first writes it."""
        with contextlib.suppress(NodeExistsError):
            self.session.create(zd.FEATURE, zd.encode_features(NEW_CLUSTER_FEATURES))

    async def _purge_notifications(self, every_s: float = 60.0) -> None:
        """Kafka's brokers delete change notifications older than 15 minutes; so do we
        (they are only announcements: the znodes they name hold the state)."""
        roots = (zk_acls.LITERAL_CHANGES, zk_acls.EXTENDED_CHANGES, zd.CONFIG_CHANGES)
        while not self._stopping:
            await asyncio.sleep(every_s)
            now_ms = int(time.time() * 1000)
            for root in roots:
                try:
                    await self._zk(zk_acls.purge_expired, self.session, root, now_ms)
                except (KafkaError, NoNodeError) as e:
                    log.debug("purging %s: %s", root, e)

    async def refresh_all(self) -> None:
        self._full = True
        self._mark(*_ROOTS, zd.broker_config_path())
        await self._wait_refreshed()

    async def _wait_refreshed(self) -> None:
        while self._refresher is not None and not self._refresher.done():
            await asyncio.shield(self._refresher)

    async def register(self) -> None:
        """Register /brokers/ids/<id> (ephemeral). A registration left by our previous
        life (killed before its session expired) is waited out, up to the session
        timeout and a margin; a live broker with our id is a configuration error."""
        path = zd.broker_path(self.node_id)
        data = zd.encode_broker(self.local_broker, self.security_protocols)
        deadline = time.monotonic() + self.session.session_timeout_ms / 1000 * 1.5 + 5
        announced = False
        loop = asyncio.get_running_loop()
        while True:
            try:
                await loop.run_in_executor(self._admin, partial(
                    self.session.create, path, data, ephemeral=True, makepath=True))
                break
            except NodeExistsError:
                found = await loop.run_in_executor(self._admin, self.session.get, path)
                if found is not None and found[1].ephemeralOwner == self.session.session_id:
                    break
                if time.monotonic() > deadline:
                    raise ZkError(f"broker id {self.node_id} is registered by another live "
                                  "broker: give each broker its own node.id") from None
                if not announced:
                    log.info("waiting for the old registration of broker %d to expire",
                             self.node_id)
                    announced = True
                await asyncio.sleep(0.2)
        self._registered = True
        log.info("registered broker %d at %s", self.node_id, path)
        await self._read_back([zd.BROKER_IDS, path])

    def start_controller(self) -> None:
        """Stand for election as the cluster's controller (after registering)."""
        self.controller = ZkController(self.session, self.node_id, self._broker_defaults,
                                       self._controller_wrote)
        self.controller.start()

    def _controller_wrote(self, states: list[tuple[TopicPartition, zd.LeaderAndIsr]]) -> None:
        """The controller's thread: states it wrote, for this broker's image now rather
        than when the watches' re-reads get through the connection the two share."""
        if self._loop is not None and not self._stopping:
            with contextlib.suppress(RuntimeError):  # the loop is closed: we are stopping
                self._loop.call_soon_threadsafe(self._adopt_states, states)

    def _adopt_states(self, states: list[tuple[TopicPartition, zd.LeaderAndIsr]]) -> None:
        changed = False
        for tp, state in states:
            assignment = self.cache.topics.get(tp[0])
            if assignment is not None and tp[1] in assignment.partitions:
                # a topic not read yet: its states come with it, through the refresher
                changed |= self.cache.offer_state(tp, state)
        if changed and not self._publish_due:
            # one image for the batches the controller wrote in one go
            self._publish_due = True
            asyncio.get_running_loop().call_soon(self._publish_adopted)

    def _publish_adopted(self) -> None:
        self._publish_due = False
        if not self._stopping:
            self._publish()

    def stop(self) -> None:
        """Stop watching and resign; the session (and with it our ephemeral znodes) is
        the caller's to close."""
        self._stopping = True
        if self.controller is not None:
            self.controller.stop()
        if self._fence_timer is not None:
            self._fence_timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._refresher is not None:
            self._refresher.cancel()
        self._isr.stop()
        self._admin.shutdown(wait=False, cancel_futures=True)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # ---- session and fencing -------------------------------------------------------------

    def _on_session(self, event: str) -> None:
        if self._stopping:
            return
        if event == "suspended":
            if self._fence_timer is None:
                timeout = self.session.session_timeout_ms / 1000
                self._fence_timer = asyncio.get_running_loop().call_later(
                    timeout, self._fence_if_still_suspended)
        elif event == "expired":
            self._set_fenced(True, "the ZooKeeper session expired")
        elif event in ("connected", "new-session"):
            if self._fence_timer is not None:
                self._fence_timer.cancel()
                self._fence_timer = None
            if event == "new-session":
                self._set_fenced(True, "the ZooKeeper session expired")
                self._spawn(self._rejoin())
            else:
                self._set_fenced(False, "reconnected to ZooKeeper")
                self._spawn(self.refresh_all())

    def _fence_if_still_suspended(self) -> None:
        self._fence_timer = None
        if self.session.suspended_for() >= self.session.session_timeout_ms / 1000:
            self._set_fenced(True, f"no ZooKeeper for {self.session.session_timeout_ms} ms")

    async def _rejoin(self) -> None:
        """A new session: our registration is gone; register again and re-read."""
        self._registered = False
        while not self._stopping:
            try:
                await self.refresh_all()
                await self.register()
                self._set_fenced(False, "registered again in a new ZooKeeper session")
                return
            except (ZkError, KafkaError) as e:
                log.warning("could not register again yet: %s", e)
                await asyncio.sleep(0.5)

    def _set_fenced(self, fenced: bool, why: str) -> None:
        if fenced == self.fenced:
            return
        self.fenced = fenced
        if fenced:
            log.warning("broker %d fenced: %s; it stops leading partitions", self.node_id, why)
        else:
            log.info("broker %d unfenced: %s", self.node_id, why)
        if self._loop is not None:
            self._publish()  # our leaderships leave (or come back into) our own image
        for listener in list(self._listeners):
            listener("session", self.image, self.image, "")

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- watches and refreshing ------------------------------------------------------------

    def _on_watch(self, event: WatchedEvent) -> None:
        """kazoo's callback thread: hand the path to the loop."""
        if event.type == EventType.NONE or event.path is None or self._loop is None:
            return  # the connection dropped: everything is re-read on reconnect
        with contextlib.suppress(RuntimeError):  # the loop is closed: we are stopping
            self._loop.call_soon_threadsafe(self._mark, event.path)

    def _mark(self, *paths: str) -> None:
        self._pending.update(paths)
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.ensure_future(self._refresh())

    async def _refresh(self) -> None:
        while self._pending and not self._stopping:
            batch, self._pending = list(self._pending), set()
            generation = self._generation
            try:
                results = await self._read_many(batch)
            except ZkError as e:
                log.info("ZooKeeper read failed (%s); will re-read after reconnecting", e)
                self._pending.update(batch)
                return
            if generation != self._generation:
                self._pending.update(batch)  # a synchronous read-back overtook us: read again
                continue
            for path, result in zip(batch, results, strict=True):
                self._pending |= self.cache.apply(path, result, self._full)
            if not self._pending:
                self._full = False
                self._publish()

    async def _read_many(self, paths: list[str]) -> list[ReadResult]:
        assert self._loop is not None
        return await zk_reads.read_watched(self.session, self._loop, paths, self._on_watch)

    async def _read_async(self, path: str) -> ReadResult:
        assert self._loop is not None
        return await zk_reads.read_one(self.session, self._loop, path, self._on_watch)

    # ---- the image ---------------------------------------------------------------------------

    def _publish(self) -> None:
        fenced_node = self.node_id if self.fenced else None
        old, new = self.image, self.cache.build(self.image.cluster_id, fenced_node)
        events = diff_events(old, new)
        self.image = new
        self._published.set()
        self._published = asyncio.Event()
        for event, topic in events:
            for listener in list(self._listeners):
                try:
                    listener(event, old, new, topic)
                except Exception:
                    log.exception("metadata listener failed on %s %s", event, topic)

    async def settle(self, created: Sequence[str] = (), deleted: Sequence[str] = (),
                     timeout_s: float = 30.0) -> bool:
        """Wait until the created topics have a leader for every partition and the deleted
        ones are gone from the image; False at the timeout."""
        deadline = time.monotonic() + timeout_s

        def done() -> bool:
            topics = self.image.topics
            return all(name in topics and all(p.leader >= 0 for p in topics[name].partitions)
                       for name in created) and not any(name in topics for name in deleted)

        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._published.wait(), remaining)
        return True

    # ---- the Controller interface: admin operations through ZooKeeper -----------------------

    async def _zk(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking ZooKeeper operation on the admin thread, never on the loop (a
        paused ZooKeeper holds it up to the operation timeout); an unreachable ZooKeeper
        is a timeout to the client. One thread: admin writes keep their order."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._admin, fn, *args)
        except ZkError as e:
            raise KafkaError(str(e), ErrorCode.request_timed_out) from e

    async def _read_back(self, paths: Sequence[str]) -> None:
        """Read `paths` again after a write and publish, so the image shows the change when
        the operation returns; what they lead to (a new topic's partition states) is left
        to the refresher."""
        self._generation += 1  # reads in flight predate the write: the refresher redoes them
        try:
            results = await asyncio.gather(*(self._read_async(p) for p in paths))
        except ZkError as e:
            raise KafkaError(str(e), ErrorCode.request_timed_out) from e
        follow: set[str] = set()
        for path, result in zip(paths, results, strict=True):
            follow |= self.cache.apply(path, result, self._full)
        self._publish()
        if follow:
            self._mark(*follow)

    def validate_topic_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        return rules.validate_topic_configs(configs)

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        topic = zk_admin.plan_topic(self.image, self.cache.deleting, name, num_partitions,
                                    replication_factor, assignments, configs or {},
                                    self._broker_defaults())
        if validate_only:
            return topic
        await self._zk(zk_admin.create_topic, self.session, topic)
        await self._read_back([zd.topic_config_path(name), zd.topic_path(name)])
        return self.image.topics.get(name, topic)

    async def create_internal_topic(self, name: str, num_partitions: int,
                                    replication_factor: int,
                                    configs: Mapping[str, str]) -> TopicInfo:
        existing = self.image.topics.get(name)
        if existing is not None:
            return existing
        # Kafka's rule: an internal topic is created with its full replication factor or
        # not at all, so the coordinators wait (COORDINATOR_NOT_AVAILABLE) for brokers
        live = sum(1 for b in self.image.brokers.values() if not b.fenced)
        if live < replication_factor:
            raise KafkaError(
                f"{name} needs {replication_factor} live brokers "
                f"(offsets.topic.replication.factor / transaction.state.log.replication"
                f".factor), {live} are alive", ErrorCode.coordinator_not_available)
        try:
            return await self.create_topic(name, num_partitions, replication_factor,
                                           configs=configs)
        except TopicAlreadyExists:
            # another broker created it a moment ago: read it now
            await self._read_back([zd.topic_config_path(name), zd.topic_path(name)])
            if name in self.image.topics:
                return self.image.topics[name]
            raise

    async def delete_topic(self, name: str, *, enabled: bool = True) -> TopicInfo:
        topic: TopicInfo = await self._zk(zk_admin.delete_topic, self.session, self.image,
                                          name, enabled)
        self.cache.deleting.add(name)
        return topic

    async def create_partitions(self, name: str, total: int,
                                assignments: Sequence[Sequence[int]] | None = None,
                                validate_only: bool = False) -> TopicInfo:
        updated: TopicInfo = await self._zk(zk_admin.add_partitions, self.session, self.image,
                                            name, total, assignments, validate_only)
        if not validate_only:
            await self._read_back([zd.topic_path(name)])
        return updated

    async def set_topic_configs(self, name: str,
                                configs: Mapping[str, str | None]) -> TopicInfo:
        if name not in self.image.topics:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        clean = rules.validate_topic_configs(configs)
        await self._zk(zk_admin.set_configs, self.session, "topics", name, clean)
        await self._read_back([zd.topic_config_path(name)])
        return self.image.topics[name]

    async def set_broker_configs(self, configs: Mapping[str, str]) -> None:
        await self._zk(zk_admin.set_configs, self.session, "brokers", zd.DEFAULT_ENTITY,
                       dict(configs))
        await self._read_back([zd.broker_config_path()])

    async def alter_user_config(self, user: str, key: str, value: str | None) -> None:
        """A SCRAM credential into /config/users/<user> beside the user's quotas, with
        Kafka's /config/changes notification; every broker watches the znode."""
        path = f"{zd.CONFIG_USERS}/{user}"
        await self._zk(zk_admin.alter_entity_configs, self.session, path, {key: value})
        await self._read_back([path, zd.CONFIG_USERS])

    async def alter_client_quotas(
            self, changes: Sequence[tuple[str, str, str | None]]) -> None:
        """Into the entities' znodes in Kafka's format; every broker watches them."""
        by_path: dict[str, dict[str, str | None]] = {}
        for path, key, value in changes:
            by_path.setdefault(path, {})[key] = value
        for path, entity_changes in by_path.items():
            await self._zk(zk_admin.alter_entity_configs, self.session, path, entity_changes)
        parents = {p.rsplit("/", 1)[0] for p in by_path}
        await self._read_back([*by_path, *sorted(parents)])

    async def set_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        """/config/client-metrics/<name> and a change notification, as Kafka's ZooKeeper
        mode kept them (an emptied subscription stays an empty znode); every broker
        watches the znodes and serves the subscription."""
        await self._zk(zk_admin.set_configs, self.session, "client-metrics", name,
                       dict(configs))
        await self._read_back([f"{zd.CONFIG_CLIENT_METRICS}/{name}", zd.CONFIG_CLIENT_METRICS])

    async def set_acls(self, acls: Sequence[tuple[str, ...]]) -> None:
        """What changed from our image, resource by resource, into Kafka's /kafka-acl
        znodes with their notifications (each resource merged with what is stored, so
        changes made through other brokers meanwhile are kept)."""
        changes = zk_acls.changes_between(self.image.acls, acls)
        if not changes:
            return
        try:
            await self._zk(zk_acls.apply_changes, self.session, changes)
        except zk_acls.AclZnodeError as e:
            raise KafkaError(str(e), ErrorCode.invalid_request) from None
        await self._read_back([zk_acls.resource_path(k) for k in changes])

    async def set_features(self, levels: Mapping[str, int]) -> None:
        """Into Kafka's /feature znode; every broker watches it. The write is conditional
        on the version this broker's image holds: the levels were checked against that
        image, so an update made meanwhile through another broker fails this one
        (FEATURE_UPDATE_FAILED, the client retries) instead of being overwritten."""
        try:
            await self._zk(self.session.set, zd.FEATURE, zd.encode_features(levels),
                           self.cache.features_epoch)
        except (BadVersionError, NoNodeError):
            await self._read_back([zd.FEATURE])
            raise KafkaError("The finalized features were changed meanwhile through "
                             "another broker; retry the update.",
                             ErrorCode.feature_update_failed) from None
        await self._read_back([zd.FEATURE])

    async def allocate_producer_id(self) -> int:
        """From a block of 1000 this broker claimed in /latest_producer_id_block."""
        async with self._pid_lock:  # one claim at a time: a block is never skipped
            if self._pid_next >= self._pid_end:
                first, last = await self._zk(zk_admin.next_producer_id_block, self.session,
                                             self.node_id)
                self._pid_next, self._pid_end = first, last + 1
            pid = self._pid_next
            self._pid_next += 1
            return pid

    # ---- a leader's ISR change (ReplicaManager.alter_isr) ---------------------------------

    async def alter_isr(self, topic: str, partition: int, leader_epoch: int,
                        partition_epoch: int, new_isr: tuple[int, ...]) -> PartitionInfo | None:
        """As a ZooKeeper-mode Kafka leader does: set the state znode only at the version
        it read (`partition_epoch`) and only while the leader epoch is still its own,
        announced by an /isr_change_notification znode so the controller re-reads the
        state (zk_isr.py, batched). None when the write lost (the controller or another
        leader moved the partition on); the new state otherwise, also published at once
        so an unrelated image change cannot hand the old ISR back."""
        if not await self._isr.alter((topic, partition), leader_epoch, partition_epoch,
                                     tuple(new_isr)):
            return None
        info = self.image.topics.get(topic)
        if info is None or partition >= len(info.partitions):
            return None
        return info.partitions[partition]

    async def notify_log_dir_failure(self, partitions: Iterable[TopicPartition]) -> None:
        """A log dir failed here: tell the controller (Kafka's
        /log_dir_event_notification), which moves leadership off its replicas."""
        data = zd.encode_log_dir_event(self.node_id, partitions)
        await self._zk(partial(self.session.create, sequence=True),
                       f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{zd.LOG_DIR_EVENT_PREFIX}", data)

    # ---- reassignment and elections (for the admin APIs and tools) -----------------------

    async def run_elections(self, election: int, partitions: Sequence[TopicPartition],
                            timeout_s: float) -> set[TopicPartition]:
        """On the active controller's thread (as in Kafka, the request must reach the
        controller; elsewhere NOT_CONTROLLER sends the client to it)."""
        controller = self.controller
        if controller is None or not controller.active:
            raise KafkaError("this broker is not the controller", ErrorCode.not_controller)
        states = controller.states
        run = states.elect_preferred if election == 0 else states.elect_unclean
        todo = list(partitions)
        try:
            written = await asyncio.wait_for(
                asyncio.wrap_future(controller.call(lambda: run(todo))), timeout_s)
        except TimeoutError:
            raise KafkaError("the election did not finish in time",
                             ErrorCode.request_timed_out) from None
        except Exception as e:
            raise KafkaError(str(e), ErrorCode.not_controller) from e
        return set(written)

    async def alter_reassignment(self, tp: TopicPartition, current: PartitionInfo,
                                 replicas: Sequence[int] | None) -> None:
        """Written to /admin/reassign_partitions, which any broker may do: the controller
        carries it out (the replicas were checked by the request's handler)."""
        await self._zk(zk_admin.request_reassignment, self.session, self.image, {tp: replicas})

    async def alter_reassignments(self, moves: Mapping[TopicPartition, Sequence[int] | None]
                                  ) -> None:
        await self._zk(zk_admin.request_reassignment, self.session, self.image, moves)

    async def list_reassignments(self) -> dict[TopicPartition, PartitionInfo]:
        """Partitions with replicas being added or removed, or a move not started yet."""
        pending = await self._zk(zk_admin.pending_reassignments, self.session)
        return zk_admin.ongoing_reassignments(self.image, pending)

    async def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]) -> None:
        await self._zk(zk_admin.request_preferred_election, self.session, set(partitions))


