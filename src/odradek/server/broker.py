"""The broker: owns the config, the logs, the metadata and the listeners.

Start-up order matters: recover the logs (in threads, it can take a while), bind the
listeners (so port 0 resolves before we advertise ourselves), load the metadata image,
reconcile the logs on disk against it, then start serving.

With `zookeeper.connect` the metadata is the cluster's, in ZooKeeper (zk_membership.py):
the image is read before the logs load, the broker registers once its listeners are
bound, and `broker.controller` is the ZkMetadataStore — the same calls as the embedded
Controller, so every handler works on every broker. The broker hosts a log and a
Partition for every replica assigned to it, leader or follower.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.broker_properties import BROKER_CONFIGS
from odradek.cluster.controller import Controller, MetadataController
from odradek.cluster.metadata import BrokerInfo, MetadataImage, TopicInfo, uuid_to_kafka
from odradek.cluster.store import FileMetadataStore
from odradek.coordinator.share import ShareConfig, ShareGroups
from odradek.coordinator.share.state import SHARE_STATE_TOPIC
from odradek.coordinator.txn import TRANSACTION_STATE_TOPIC
from odradek.replication.channel import ChannelSecurity
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.authorizer import AclAuthorizer
from odradek.security.sasl.scram import ScramCredential
from odradek.server import acl_store, inter_broker
from odradek.server.acceptor import Acceptor, listening_sockets
from odradek.server.authorization import RequestAuthorizer
from odradek.server.config import BrokerConfig
from odradek.server.configs import overrides_as_mapping
from odradek.server.connection_limits import ConnectionLimits
from odradek.server.group_storage import (
    OFFSETS_TOPIC,
    create_group_coordinator,
    ensure_offsets_topic,
    follow_leadership,
    led_partitions,
)
from odradek.server.listener_security import ListenerSecurity, listener_security
from odradek.server.memory_pool import MemoryPool
from odradek.server.metrics import GAUGE_INTERVAL_MS, BrokerMetrics
from odradek.server.partition_hosting import PartitionHosting
from odradek.server.pipeline import RequestPipeline
from odradek.server.ports import Ports
from odradek.server.quota_step import QuotaStep
from odradek.server.share_storage import (
    BrokerPersister,
    create_share_state_coordinator,
    ensure_share_state_topic,
    follow_share_state_leadership,
)
from odradek.server.txn_storage import BrokerTransactions
from odradek.storage import file_handles
from odradek.storage.checkpoints import (
    META_PROPERTIES,
    read_meta_properties,
)
from odradek.storage.cleaner_manager import CleanerConfig, owner_via
from odradek.storage.descriptors import DescriptorReserve
from odradek.storage.log_config import LogConfig
from odradek.storage.manager import LogManager

if TYPE_CHECKING:
    from odradek.cluster.zk_store import ZkMetadataStore
    from odradek.coordinator.group import GroupCoordinator
    from odradek.server.connection import KafkaConnection

log = logging.getLogger(__name__)

class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.metrics = BrokerMetrics()
        self.connections: set[KafkaConnection] = set()
        self.max_request_size = int(config["socket.request.max.bytes"])
        self.max_queued_requests = int(config["queued.max.requests"])
        self.memory_pool = MemoryPool(int(config["queued.max.request.bytes"]))
        self.metrics.watch_memory_pool(self.memory_pool)
        self.bound: dict[str, tuple[str, int]] = {}
        self.listener_security: dict[str, ListenerSecurity] = {}
        self._authorizer: AclAuthorizer | None = None
        if config.security_props.get("authorizer.class.name", "").strip():
            self._authorizer = AclAuthorizer.from_config(config.security_props)
        # how replica fetchers and WriteTxnMarkers reach the other brokers
        self.inter_broker = ChannelSecurity()
        if config["zookeeper.connect"]:
            listener = config.inter_broker_listener
            self.inter_broker = inter_broker.security(
                config.security_props, listener, config.security_protocol(listener))
        self._servers: list[Acceptor] = []
        self._tasks: set[asyncio.Future[Any]] = set()
        self._stopping = False
        self.hosting = PartitionHosting(self)
        self._metrics_server: Any = None
        self.logs: LogManager
        self.controller: MetadataController
        self.zk: ZkMetadataStore | None = None  # the cluster's metadata, with zookeeper.connect
        self.replicas: ReplicaManager
        self.groups: GroupCoordinator
        self.shares: ShareGroups
        self.share_persister: BrokerPersister
        self.transactions: BrokerTransactions
        self.pipeline: RequestPipeline
        self.quotas = QuotaStep({}, int(config["quota.window.num"]),
                                int(config["quota.window.size.seconds"]) * 1000,
                                int(config["controller.quota.window.num"]),
                                int(config["controller.quota.window.size.seconds"]) * 1000)
        self.connection_limits = ConnectionLimits.from_config(
            config.__getitem__, config.security_props, [li.name for li in config.listeners],
            lambda: self.quotas.configs, self.quotas.samples, self.quotas.window_ms)
        # The embedded store's contents, read once at start-up: the logs found on disk
        # take their configs from it and the Controller starts from it (issue 12: it was
        # re-read and re-parsed for every partition directory).
        self._stored: dict[str, Any] | None = None
        self._stored_topics: dict[str, TopicInfo] | None = None
        self._startup_configs: dict[str, LogConfig] = {}

    # ---- lifecycle --------------------------------------------------------------

    async def start(self) -> None:
        for warning in self.config.warnings():
            log.warning("risky setting: %s", warning)
        loop = asyncio.get_running_loop()
        dirs = self.config.log_dirs
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        cluster_id = self._cluster_id(dirs)
        store = FileMetadataStore(dirs[0])  # read here once, then the Controller's
        if self.config["zookeeper.connect"]:
            from odradek.server import zk_membership  # kazoo: only for clusters

            self.zk = await zk_membership.open_store(self.config.values(), self.node_id,
                                                     cluster_id, self.config.values)
            self.controller = self.zk
            cluster_id = self.zk.image.cluster_id  # /cluster/id is the cluster's
            stored_topics: Mapping[str, TopicInfo] = self.zk.image.topics
        else:
            self._stored = await loop.run_in_executor(None, store.load)
            stored_topics = self._stored_topics = MetadataImage.topics_from_json(
                self._stored or {})
        self._startup_configs = self._log_configs(stored_topics)
        self.logs = LogManager(
            dirs,
            node_id=self.node_id,
            cluster_id=cluster_id,
            config=self._config_for_dir_name,
            recovery_threads_per_dir=int(self.config["num.recovery.threads.per.data.dir"]),
            producer_id_expiration_ms=int(self.config["producer.id.expiration.ms"]),
            file_delete_delay_ms=int(self.config["log.segment.delete.delay.ms"]),
            cleaner_config=self._cleaner_config(),
        )
        self.logs.on_log_moved = self._on_log_moved
        self.logs.on_dir_offline = lambda d, _: self._on_dir_offline(loop, d)
        self.logs.flusher = ThreadPoolExecutor(2, thread_name_prefix="flusher")
        await loop.run_in_executor(None, self.logs.startup)
        log.info("loaded %d logs from %s in %.2fs", len(self.logs.all_logs()),
                 ", ".join(str(d) for d in dirs), time.monotonic() - started)
        self._check_open_files_limit(len(self.logs.all_logs()))
        self._startup_configs = {}
        await self._bind()
        me = self._broker_info()
        self.replicas = ReplicaManager(self.logs, self.node_id)
        self.replicas.configure(self.config.__getitem__)
        self.replicas.channel_security = self.inter_broker
        if self.zk is not None:
            from odradek.server import zk_membership

            self.replicas.alter_isr = self.zk.alter_isr
            await zk_membership.register(self.zk, me, self.config.security_protocols)
        else:
            self.controller = Controller(
                store,
                cluster_id=self.logs.cluster_id,
                local_broker=me,
                broker_defaults=self.config.values,
                loaded=self._stored,
                loaded_topics=self._stored_topics,
            )
            self._stored, self._stored_topics = None, None
        # no await from here until the listener is added: no metadata change is missed
        self._apply_dynamic_broker_configs(self.controller.image)
        self.hosting.reconcile()
        self.replicas.apply_leadership(self.controller.image)
        self.groups = create_group_coordinator(self)
        follow_leadership(self)  # loads the groups of the offsets partitions we lead
        self.groups.start()
        share_state = create_share_state_coordinator(self)
        self.share_persister = BrokerPersister(self, share_state)
        self.shares = ShareGroups(ShareConfig.from_broker(self.config.values()),
                                  self.groups.log.topics, self.replicas, share_state,
                                  self.share_persister)
        self.metrics.share.watch(self.shares)
        self._follow_share_leadership()
        self.shares.start()
        self.transactions = BrokerTransactions(self)
        self.transactions.start()  # loads the __transaction_state partitions we lead
        self.controller.add_listener(self._on_metadata_change)
        self.pipeline = RequestPipeline(self._ports(), self.metrics)
        if self._authorizer is not None:
            self._load_acls()
            self.pipeline.authorize = RequestAuthorizer(self._authorizer)
        self._load_quotas()
        # before the listeners: a broker that answers a client answers its scrapes too
        self._start_metrics_endpoint()
        for server in self._servers:
            await server.start_serving()
        # fsyncs and checkpoint writes block: keep them off the event loop
        self._every(int(self.config["log.flush.scheduler.interval.ms"]),
                    lambda: loop.run_in_executor(None, self.logs.flush_due))
        self._every(int(self.config["log.flush.offset.checkpoint.interval.ms"]) or 60_000,
                    lambda: loop.run_in_executor(None, self.logs.checkpoint))
        idle_ms = int(self.config["connections.max.idle.ms"])
        self._every(max(min(30_000, idle_ms // 2), 50), self._close_idle_connections)
        if any(s.tls is not None for s in self.listener_security.values()):
            self._every(10_000, self._reload_certificates)
        self._every(int(self.config["log.retention.check.interval.ms"]), self.logs.cleanup_logs)
        # The cleaner's threads swap cleaned segments in on the loop, which owns the logs.
        self.logs.start_cleaner(owner_via(loop.call_soon_threadsafe))
        log.info("odradek broker %d started, cluster %s, listening on %s", self.node_id,
                 self.controller.image.cluster_id,
                 ", ".join(f"{n}://{h}:{p}" for n, (h, p) in self.bound.items()))

    @property
    def stopping(self) -> bool:
        return self._stopping

    def plaintext_bootstrap(self) -> str:
        """host:port of this broker's first PLAINTEXT listener, as its own clients dial it."""
        protocols = self.config.security_protocols
        host, port = next(a for n, a in self.bound.items() if protocols.get(n) == "PLAINTEXT")
        return f"{'127.0.0.1' if host in ('', '0.0.0.0', '::') else host}:{port}"

    def abort_start(self) -> None:
        """SIGTERM while `start()` runs: the log loading stops within a partition."""
        if hasattr(self, "logs"):
            self.logs.abort_startup()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        for task in list(self._tasks):
            task.cancel()
        if hasattr(self, "groups"):
            self.groups.stop()
        if hasattr(self, "shares"):
            self.shares.stop()
            self.share_persister.close()
        if hasattr(self, "transactions"):
            self.transactions.stop()
        for server in self._servers:
            await server.wait_closed()
        if hasattr(self, "descriptor_reserve"):
            self.descriptor_reserve.close()
        await asyncio.sleep(0)
        if self.zk is not None:
            from odradek.server import zk_membership

            # leave before closing the logs, so the others take over our partitions now
            await zk_membership.leave(self.zk)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        if hasattr(self, "replicas"):
            await self.replicas.shutdown()
        if not hasattr(self, "logs") or not self.logs.started:
            log.info("odradek broker %d stopped during start-up", self.node_id)
            return  # nothing was loaded, or loading was aborted: nothing to write
        # In a thread: a cleaner thread may be waiting for the loop to swap a segment in.
        await asyncio.get_running_loop().run_in_executor(None, self.logs.stop_cleaner)
        self.logs.shutdown()
        log.info("odradek broker %d stopped", self.node_id)

    async def _bind(self) -> None:
        from odradek.server.connection import KafkaConnection

        loop = asyncio.get_running_loop()
        self.descriptor_reserve = DescriptorReserve()
        for listener in self.config.listeners:
            security = listener_security(
                self.config.security_props, listener.name,
                self.config.security_protocol(listener.name), self._scram_credential)
            self.listener_security[listener.name] = security
            # our own accept loop: on EMFILE uvloop's server closes itself, silently
            socks = listening_sockets(listener.host or None, listener.port, backlog=1024)
            for sock in socks:
                self._servers.append(Acceptor(
                    loop, sock, functools.partial(KafkaConnection, self, security),
                    security.ssl_context, self.logs.descriptor_warnings,
                    self.descriptor_reserve))
            host, port = socks[0].getsockname()[:2]
            self.bound[listener.name] = (listener.host or host, port)

    def _check_open_files_limit(self, partitions: int) -> None:
        """One line saying what to raise when the limit cannot keep every active
        segment open (the broker runs anyway: file_handles.py opens on demand)."""
        limit = file_handles.open_files_limit()
        needed = file_handles.files_needed(partitions)
        if limit is not None and limit < needed and not file_handles.HANDLES.warned:
            file_handles.HANDLES.warned = True
            log.warning(
                "%d partitions and an open-files limit of %d: segment files are opened "
                "and closed on demand (at most %d at once), which costs a system call "
                "per use; raise the open-files limit (ulimit -n, systemd LimitNOFILE) to "
                "%d to keep them open", partitions, limit, file_handles.HANDLES.budget,
                needed)

    def _current_acls(self) -> AclAuthorizer:
        assert self._authorizer is not None
        return self._authorizer

    def _load_acls(self) -> None:
        """The stored ACLs into a fresh authorizer (at start and after every change)."""
        assert self._authorizer is not None
        self._authorizer = acl_store.load(self._authorizer, self.controller.image.acls)
        if self.pipeline.authorize is not None:
            self.pipeline.authorize.acls = self._authorizer

    def _load_quotas(self) -> None:
        """The stored client quotas into the throttle step, which runs only while
        some quota is configured."""
        self.quotas.reload(self.controller.image.client_quotas)
        self.pipeline.throttle = self.quotas if self.quotas.active else None

    def _scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """A user's stored SCRAM credential (AlterUserScramCredentials put it there)."""
        stored = self.controller.image.user_configs.get(user, {}).get(mechanism)
        return ScramCredential.parse(stored) if stored else None

    def _reload_certificates(self) -> None:
        """Kafka's dynamic ssl.keystore.*: new files apply to the next handshakes."""
        for security in self.listener_security.values():
            if security.tls is None:
                continue
            try:
                if security.tls.reload_if_changed():
                    log.info("listener %s: reloaded its keystore and truststore",
                             security.name)
            except Exception as e:  # the old certificates stay in use
                log.error("listener %s: certificates changed but cannot be used: %s",
                          security.name, e)

    def _cluster_id(self, dirs: list[Path]) -> str:
        """The id recorded in the data dirs, else the configured one, else a new one."""
        for d in dirs:
            meta = read_meta_properties(d / META_PROPERTIES)
            if meta is not None and meta.cluster_id:
                return meta.cluster_id
        configured = self.config["cluster.id"]
        return str(configured) if configured else uuid_to_kafka(uuid.uuid4())

    def _broker_info(self) -> BrokerInfo:
        endpoints = []
        for adv in self.config.advertised_listeners:
            port = adv.port
            if port == 0 and adv.name in self.bound:
                port = self.bound[adv.name][1]
            endpoints.append((adv.name, adv.host, port))
        first = endpoints[0]
        return BrokerInfo(self.node_id, first[1], first[2], self.config["broker.rack"],
                          tuple(endpoints))

    def _cleaner_config(self) -> CleanerConfig:
        threads = int(self.config["log.cleaner.threads"])
        return CleanerConfig(
            enable=bool(self.config["log.cleaner.enable"]) and threads > 0,
            num_threads=max(threads, 1),
            dedupe_buffer_size=int(self.config["log.cleaner.dedupe.buffer.size"]),
            io_buffer_size=int(self.config["log.cleaner.io.buffer.size"]),
            io_max_bytes_per_second=float(self.config["log.cleaner.io.max.bytes.per.second"]),
            backoff_ms=int(self.config["log.cleaner.backoff.ms"]),
        )

    def _ports(self) -> Ports:
        """What handlers may use: the Broker itself stays out of their reach."""
        return Ports(
            node_id=self.node_id,
            config=self.config,
            metadata=self.controller,
            replicas=self.replicas,
            logs=self.logs,
            groups=self.groups,
            transactions=self.transactions,
            metrics=self.metrics,
            topic_config=self.log_config_for,
            acls=None if self._authorizer is None else self._current_acls,
            ensure_offsets_topic=partial(ensure_offsets_topic, self),
            spawn=lambda work: self.track(asyncio.ensure_future(work)),
            shares=self.shares,
            ensure_share_state_topic=partial(ensure_share_state_topic, self),
        )

    def _follow_share_leadership(self) -> None:
        """Share groups live in the offsets partitions, as consumer groups do; their
        partitions' state in `__share_group_state`."""
        self.shares.coordinator.follow(led_partitions(self, OFFSETS_TOPIC))
        if self.shares.state is not None:
            follow_share_state_leadership(self, self.shares.state)

    def track(self, task: asyncio.Future[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _every(self, interval_ms: int, fn: Callable[[], Any]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    result = fn()
                    if isinstance(result, Awaitable):
                        await result
                except Exception:
                    log.exception("background task %s failed", getattr(fn, "__name__", fn))

        self.track(asyncio.ensure_future(loop()))

    # ---- logs and metadata ------------------------------------------------------

    def log_config_for(self, topic: str) -> LogConfig:
        info = self.controller.image.topics.get(topic)
        overrides = overrides_as_mapping(info.configs) if info else {}
        return LogConfig.resolve(overrides, self.config.values())

    def _log_configs(self, topics: Mapping[str, TopicInfo]) -> dict[str, LogConfig]:
        """Each stored topic's resolved log config: one resolve per topic, not per
        partition directory."""
        broker = self.config.values()
        return {name: LogConfig.resolve(overrides_as_mapping(info.configs), broker)
                for name, info in topics.items()}

    def _config_for_dir_name(self, topic: str) -> LogConfig:
        """Config for a log found on disk at start-up, before the image is loaded: a
        dict lookup (the recovery threads call it once per partition directory)."""
        config = self._startup_configs.get(topic)
        return config if config is not None else LogConfig.resolve({}, self.config.values())

    def _on_metadata_change(
        self, event: str, old: MetadataImage, new: MetadataImage, topic: str
    ) -> asyncio.Task[None] | None:
        """Applies a change; a new topic's partitions open in slices (partition_hosting)."""
        if event in ("created", "partitions"):
            # the image current when the partitions are open: their leaders may have
            # come in a later image meanwhile, which this one must not undo
            return self.hosting.open_topic(
                topic, lambda: self._after_change(event, self.controller.image, topic))
        self._apply_change(event, old, new, topic)
        return None

    def _apply_change(self, event: str, old: MetadataImage, new: MetadataImage,
                      topic: str) -> None:
        if event == "partition-state":  # with ZooKeeper: leaders, ISRs, reassignments
            self.hosting.open_partitions(topic)
            self.hosting.drop_replicas_moved_away(topic)
        elif event == "deleted":
            # not awaited: DeleteTopics answers once the topic is gone from the metadata
            self.hosting.delete_topic(topic)
        elif event == "configs":
            config = self.log_config_for(topic)
            for p in self.replicas.topic_partitions(topic):
                p.log.update_config(config)
            if self.logs.cleaner is not None:
                self.logs.cleaner.wake()  # e.g. cleanup.policy became compact
        elif event == "acls" and self._authorizer is not None:
            # in place, by difference: a rebuild of 10,000 ACLs held the loop for a second
            acl_store.update(self._authorizer, old.acls, new.acls)
        elif event == "client-quotas":
            self._load_quotas()
        elif event == "broker-configs":
            self._apply_dynamic_broker_configs(new)
            for p in self.replicas.partitions.values():
                p.log.update_config(self.log_config_for(p.topic))
        self._after_change(event, new, topic)

    def _after_change(self, event: str, new: MetadataImage, topic: str) -> None:
        # a topic's event changed that topic only; the others are compared
        self.replicas.apply_leadership(new, (topic,) if topic else None)
        # the coordinators follow the leadership of their internal partitions: a topic's
        # events name it; brokers coming and going, or our own fencing, move any of them
        if event in ("created", "partitions", "deleted", "partition-state", "brokers",
                     "session"):
            if topic in ("", "__consumer_offsets", SHARE_STATE_TOPIC):
                follow_leadership(self)
                self._follow_share_leadership()
            if topic in ("", TRANSACTION_STATE_TOPIC):
                self.transactions.follow_leadership()

    def _apply_dynamic_broker_configs(self, image: MetadataImage) -> None:
        parsed = {}
        for name, value in image.broker_configs.items():
            if name in BROKER_CONFIGS:
                parsed[name] = BROKER_CONFIGS[name].parse(value)
        self.config.dynamic = parsed

    def _start_metrics_endpoint(self) -> None:
        port = int(self.config["metrics.port"])
        if port < 0:
            return
        from prometheus_client import start_http_server

        host = self.config.listeners[0].host or "0.0.0.0"
        server, _thread = start_http_server(port, addr=host, registry=self.metrics.registry)
        self._metrics_server = server
        log.info("metrics on http://%s:%d/metrics", host, server.server_port)
        # State gauges (log sizes, group lag, …) are read on the loop, off the hot path.
        self.controller.add_listener(partial(self.metrics.on_metadata_change, self.node_id))
        self.metrics.refresh(self)
        self._every(GAUGE_INTERVAL_MS, lambda: self.metrics.refresh(self))

    def _on_dir_offline(self, loop: asyncio.AbstractEventLoop, directory: Path) -> None:
        """Any thread: the dir's files are closed on the loop, which reads them; in a
        cluster the controller is told, so that leaders move off the dir at once."""
        with contextlib.suppress(RuntimeError):  # the loop is gone: the process ends
            loop.call_soon_threadsafe(self._dir_went_offline, directory)

    def _dir_went_offline(self, directory: Path) -> None:
        partitions = self.logs.partitions_in(directory)
        self.logs.close_offline_handles(directory)
        if self.zk is not None and partitions and not self._stopping:
            self.track(asyncio.ensure_future(self._notify_dir_failure(directory, partitions)))

    async def _notify_dir_failure(self, directory: Path,
                                  partitions: list[tuple[str, int]]) -> None:
        assert self.zk is not None
        try:
            await self.zk.notify_log_dir_failure(partitions)
            log.info("told the controller that %s failed (%d partitions)", directory,
                     len(partitions))
        except Exception as exc:  # ZooKeeper away: the restart after repair reconciles
            log.error("could not tell the controller that %s failed: %s", directory, exc)

    def _on_log_moved(self, tp: tuple[str, int], moved: Any) -> None:
        """AlterReplicaLogDirs finished: the partition serves from its new log."""
        partition = self.replicas.partitions.get(tp)
        if partition is not None:
            partition.log = moved

    def _close_idle_connections(self) -> None:
        limit = int(self.config["connections.max.idle.ms"]) / 1000
        now = asyncio.get_running_loop().time()
        for conn in list(self.connections):
            if now - conn.last_active > limit and conn.idle:
                conn.close()
        self.metrics.connections.set(len(self.connections))
