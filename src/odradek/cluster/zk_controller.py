"""The cluster controller: one broker, elected through /controller, changes partition states.

Kafka's KafkaController on ZooKeeper: every broker runs one; the first to create the
ephemeral /controller (bumping /controller_epoch in the same transaction) is active
until its session ends. The active controller watches the brokers, topics, deletion
markers, ISR change notifications, reassignments and preferred-election requests,
and answers them by writing partition state znodes (zk_partitions.py). Brokers read
those znodes themselves (zk_store.py): there are no LeaderAndIsr requests, except that
the controller hands its own broker each state it wrote (`on_states`), because that
broker's reads share the controller's ZooKeeper connection and queue behind its writes.

Events are handled one at a time on the controller's own thread, in order, with
blocking ZooKeeper calls (Kafka's ControllerEventManager): kazoo's watch callbacks
only queue events. A periodic tick re-checks reassignments and runs the
auto-rebalance (`auto.leader.rebalance.enable`, `leader.imbalance.*`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.protocol.states import EventType, WatchedEvent

from odradek.cluster import zk_data as zd
from odradek.cluster.zk_client import ZkError, ZkSession, ZkTransactionFailed
from odradek.cluster.zk_partitions import (
    ControllerContext,
    ControllerMoved,
    PartitionStates,
    StatesWritten,
    TopicPartition,
)

log = logging.getLogger(__name__)

Event = tuple[Any, ...]
TICK_S = 1.0


class ZkController:
    def __init__(self, zk: ZkSession, node_id: int,
                 broker_defaults: Callable[[], Mapping[str, Any]],
                 on_states: StatesWritten | None = None) -> None:
        self.zk = zk
        self.node_id = node_id
        self._defaults = broker_defaults
        self._on_states = on_states
        self._queue: queue.Queue[Event] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.active = False
        self.ctx = ControllerContext(node_id)
        self.states = PartitionStates(zk, self.ctx, broker_defaults, on_states)
        self._reassigning: dict[TopicPartition, tuple[int, ...]] = {}
        self._offline: set[TopicPartition] = set()  # elections that found no leader
        self._new_waiting: set[TopicPartition] = set()  # new partitions with no live replica
        self._next_rebalance = 0.0
        self.elected_at: float | None = None  # monotonic time we last became active

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.zk.add_state_listener(lambda event: self._queue.put(("session", event)))
        self._thread = threading.Thread(target=self._run, name=f"controller-{self.node_id}",
                                        daemon=True)
        self._thread.start()
        self._queue.put(("elect",))

    def stop(self) -> None:
        if self._thread is None:
            return
        self._queue.put(("stop",))
        self._thread.join(10)
        self._thread = None

    def submit(self, *event: Any) -> None:
        self._queue.put(event)

    def call(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run `fn` on the controller's thread, in order with its events, if it is still
        the active controller then (else the future fails with ControllerMoved)."""
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                if not self.active:
                    raise ControllerMoved(f"broker {self.node_id} is not the controller")
                done.set_result(fn())
            except BaseException as e:
                done.set_exception(e)
                if isinstance(e, ControllerMoved):
                    raise

        self._queue.put(("call", run))
        return done

    def _run(self) -> None:
        # the tick is due by the clock, not by an idle queue: a busy controller (ISR
        # notifications every second) must still check reassignments and rebalance
        next_tick = time.monotonic() + TICK_S
        while True:
            try:
                event = self._queue.get(timeout=max(0.0, next_tick - time.monotonic()))
            except queue.Empty:
                event = ("tick",)
            if event[0] == "tick" or time.monotonic() >= next_tick:
                next_tick = time.monotonic() + TICK_S
                if event[0] != "tick":
                    self._queue.put(("tick",))
            if event[0] == "stop":
                self._resign("shutting down")
                return
            try:
                self._process(event)
            except ControllerMoved as e:
                self._resign(str(e))
                self._queue.put(("elect",))
            except (ZkError, ZkTransactionFailed) as e:
                # nothing to do without ZooKeeper; a reconnect reloads everything
                log.warning("controller event %s failed: %s", event[0], e)
            except Exception:
                log.exception("controller event %s failed", event)

    def _on_watch(self, event: WatchedEvent) -> None:
        """kazoo's callback thread: queue the event for the controller thread."""
        if event.type == EventType.NONE or event.path is None:
            return
        path = event.path
        if path == zd.CONTROLLER:
            self._queue.put(("controller-change",))
        elif path == zd.BROKER_IDS:
            self._queue.put(("brokers",))
        elif path == zd.TOPICS:
            self._queue.put(("topics",))
        elif path == zd.DELETE_TOPICS:
            self._queue.put(("delete-topics",))
        elif path == zd.ISR_CHANGE_NOTIFICATION:
            self._queue.put(("isr-change",))
        elif path == zd.LOG_DIR_EVENT_NOTIFICATION:
            self._queue.put(("log-dir-event",))
        elif path == zd.REASSIGN_PARTITIONS:
            self._queue.put(("reassign",))
        elif path == zd.PREFERRED_REPLICA_ELECTION:
            self._queue.put(("preferred",))
        elif path == zd.broker_config_path():
            self._queue.put(("broker-config",))
        elif path.startswith(zd.CONFIG_TOPICS + "/"):
            self._queue.put(("topic-config", path.rsplit("/", 1)[1]))
        elif path.startswith(zd.TOPICS + "/") and path.count("/") == 3:
            self._queue.put(("topic", path.rsplit("/", 1)[1]))

    def _process(self, event: Event) -> None:
        kind = event[0]
        if kind in ("elect", "controller-change"):
            self._elect()
        elif kind == "session":
            self._on_session(event[1])
        elif kind == "call":
            event[1]()  # says itself when we are not active
        elif not self.active:
            return
        elif kind == "brokers":
            self._on_brokers()
        elif kind == "topics":
            self._on_topics()
        elif kind == "topic":
            self._on_topic(event[1])
        elif kind == "delete-topics":
            self._on_delete_topics()
        elif kind == "isr-change":
            self._on_isr_change()
        elif kind == "log-dir-event":
            self._on_log_dir_events()
        elif kind == "reassign":
            self._on_reassign()
        elif kind == "preferred":
            self._on_preferred()
        elif kind in ("topic-config", "broker-config"):
            self._on_config(event[1] if kind == "topic-config" else None)
        elif kind == "tick":
            self._on_tick()

    # ---- election --------------------------------------------------------------------------

    def _elect(self) -> None:
        found = self.zk.get(zd.CONTROLLER, watch=self._on_watch)
        if found is not None:
            active_id = zd.decode_controller(found[0])
            mine = found[1].ephemeralOwner == self.zk.session_id
            if active_id == self.node_id and mine:
                if not self.active:
                    self._activate()
                return
            if self.active:
                self._resign(f"broker {active_id} is the controller now")
            return
        epoch_found = self.zk.get(zd.CONTROLLER_EPOCH)
        epoch = 0 if epoch_found is None else zd.decode_controller_epoch(epoch_found[0])
        ops: list[tuple[Any, ...]] = [
            ("create", zd.CONTROLLER, zd.encode_controller(self.node_id), True)]
        if epoch_found is None:
            ops.append(("create", zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(1)))
        else:
            ops.append(("set", zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(epoch + 1),
                        epoch_found[1].version))
        try:
            results = self.zk.commit(ops)
        except ZkTransactionFailed:
            # another broker won (or bumped the epoch) first: follow it, and watch again
            self.zk.get(zd.CONTROLLER, watch=self._on_watch)
            return
        self.ctx.epoch = epoch + 1
        self.ctx.epoch_zk_version = 0 if epoch_found is None else results[1].version
        log.info("broker %d is the controller, epoch %d", self.node_id, self.ctx.epoch)
        self._activate()

    def _activate(self) -> None:
        """Kafka's onControllerFailover: load everything with watches, then bring every
        partition online that can be, and resume what the last controller left."""
        self.active = True
        self.elected_at = time.monotonic()
        self._load()
        self._clear_isr_notifications()
        ctx = self.ctx
        missing = [tp for tp in ctx.all_partitions() if tp not in ctx.states]
        self._new_waiting = set(self.states.init_partitions(missing))
        dead_in_isr = {r for s in ctx.states.values() for r in s.isr if r not in ctx.live}
        offline = [tp for tp, s in ctx.states.items() if s.leader not in ctx.live]
        # the states were read a moment ago: the first round works on them as they are
        self._elect_offline(offline, held=True)
        if dead_in_isr:
            self._remove_from_isr(dead_in_isr, held=True)
        self._on_log_dir_events()
        self._on_delete_topics()
        self._on_reassign()
        self._on_preferred()
        interval = float(self._setting("leader.imbalance.check.interval.seconds", 300))
        self._next_rebalance = time.monotonic() + interval

    def _resign(self, why: str) -> None:
        if not self.active:
            return
        log.info("broker %d resigns as controller: %s", self.node_id, why)
        self.active = False
        self.ctx = ControllerContext(self.node_id)
        self.states = PartitionStates(self.zk, self.ctx, self._defaults, self._on_states)
        self._reassigning.clear()
        self._offline.clear()
        self._new_waiting.clear()

    def _on_session(self, event: str) -> None:
        if event == "expired":
            self._resign("the ZooKeeper session expired")
        elif event == "new-session":
            self._elect()
        elif event == "connected":
            # same session, but kazoo dropped our watches: take them again
            if self.active:
                self._activate()
            else:
                self._elect()

    # ---- loading ----------------------------------------------------------------------------

    def _load(self) -> None:
        ctx, zk, watch = self.ctx, self.zk, self._on_watch
        self._read_brokers()
        names = zk.children(zd.TOPICS, watch=watch)
        ctx.topics.clear()
        ctx.topic_versions.clear()
        for name, found in zip(names, zk.get_many([zd.topic_path(n) for n in names], watch),
                               strict=True):
            if found is not None:
                ctx.topics[name] = zd.decode_topic(found[0])
                ctx.topic_versions[name] = found[1].version
        self.states.ensure_topic_ids()
        ctx.states.clear()
        self.states.read_states(ctx.all_partitions())
        configs = zk.get_many([zd.topic_config_path(n) for n in ctx.topics], watch)
        ctx.topic_configs = {n: zd.decode_config(f[0]) for n, f in zip(ctx.topics, configs,
                                                                        strict=True) if f}
        for name in ctx.topics:  # watch the missing ones for their creation
            if name not in ctx.topic_configs:
                zk.exists(zd.topic_config_path(name), watch=watch)
        found_default = zk.get(zd.broker_config_path(), watch=watch)
        ctx.broker_configs = zd.decode_config(found_default[0]) if found_default else {}
        ctx.deleting = set(zk.children(zd.DELETE_TOPICS, watch=watch))

    def _read_brokers(self) -> tuple[set[int], set[int]]:
        """Re-read the registrations; (new, gone) ids. A broker that re-registered between
        two reads (a new czxid) counts as both gone and new, as Kafka's bounce handling."""
        ids = [int(n) for n in self.zk.children(zd.BROKER_IDS, watch=self._on_watch)
               if n.isdigit()]
        found = self.zk.get_many([zd.broker_path(i) for i in ids])
        live, epochs = {}, {}
        for node_id, item in zip(ids, found, strict=True):
            if item is not None:
                live[node_id] = zd.decode_broker(node_id, item[0])
                epochs[node_id] = item[1].czxid
        before = self.ctx.broker_epochs
        bounced = {b for b in live if b in before and before[b] != epochs[b]}
        new = (set(live) - set(before)) | bounced
        gone = (set(before) - set(live)) | bounced
        self.ctx.live, self.ctx.broker_epochs = live, epochs
        return new, gone

    def _clear_isr_notifications(self) -> set[TopicPartition]:
        names = self.zk.children(zd.ISR_CHANGE_NOTIFICATION, watch=self._on_watch)
        changed: set[TopicPartition] = set()
        paths = [f"{zd.ISR_CHANGE_NOTIFICATION}/{n}" for n in names]
        for item in self.zk.get_many(paths):
            if item is not None:
                changed |= zd.decode_partitions(item[0])
        for path in paths:
            self.zk.delete(path)
        return changed

    # ---- events -------------------------------------------------------------------------------

    def _elect_offline(self, tps: list[TopicPartition], held: bool = False) -> None:
        if not tps:
            return
        self.states.elect_offline(tps, held)
        self._offline = {tp for tp in set(tps) | self._offline
                         if tp in self.ctx.states
                         and self.ctx.states[tp].leader not in self.ctx.live}

    def _remove_from_isr(self, gone: set[int], held: bool = False) -> None:
        tps = [tp for tp, s in self.ctx.states.items() if set(s.isr) & gone]
        self.states.remove_from_isr(tps, gone, held)

    def _on_brokers(self) -> None:
        """Kafka's onBrokerFailure and onBrokerStartup."""
        new, gone = self._read_brokers()
        ctx = self.ctx
        if gone:
            log.info("brokers %s are gone", sorted(gone))
            self._elect_offline([tp for tp, s in ctx.states.items() if s.leader in gone])
            self._remove_from_isr(gone)
        if new:
            log.info("brokers %s joined", sorted(new))
            # offline partitions may have a leader now; new partitions a live replica
            offline = [tp for tp, s in ctx.states.items() if s.leader not in ctx.live]
            self._elect_offline(offline)
            waiting = [tp for tp in self._new_waiting if tp[0] in ctx.topics]
            self._new_waiting = set(self.states.init_partitions(waiting))
            self._on_reassign()

    def _on_topics(self) -> None:
        names = set(self.zk.children(zd.TOPICS, watch=self._on_watch))
        ctx = self.ctx
        for gone in set(ctx.topics) - names:
            assignment = ctx.topics.pop(gone)
            ctx.topic_versions.pop(gone, None)
            for p in assignment.partitions:
                ctx.states.pop((gone, p), None)
        self._on_new_topics(sorted(names - set(ctx.topics)))

    def _on_topic(self, name: str) -> None:
        """A topic changed (partitions added): new partitions get states."""
        self._on_new_topics([name])

    def _on_new_topics(self, names: list[str]) -> None:
        """Topics created or changed: read them together (one pipelined round trip per
        kind of znode, not one per topic), and give new partitions their states."""
        ctx, zk, watch = self.ctx, self.zk, self._on_watch
        found_names = []
        for name, found in zip(names, zk.get_many([zd.topic_path(n) for n in names], watch),
                               strict=True):
            if found is not None:
                ctx.topics[name] = zd.decode_topic(found[0])
                ctx.topic_versions[name] = found[1].version
                found_names.append(name)
        self.states.ensure_topic_ids(found_names)
        unconfigured = [n for n in found_names if n not in ctx.topic_configs]
        for name, config in zip(unconfigured,
                                zk.get_many([zd.topic_config_path(n) for n in unconfigured],
                                            watch), strict=True):
            ctx.topic_configs[name] = zd.decode_config(config[0]) if config else {}
            if config is None:  # watch for its creation
                zk.exists(zd.topic_config_path(name), watch=watch)
        tps = [(n, p) for n in found_names for p in sorted(ctx.topics[n].partitions)]
        known = self.states.read_states(tps)
        missing = [tp for tp in tps if tp not in known]
        if missing:
            self._new_waiting |= set(self.states.init_partitions(missing))

    def _on_delete_topics(self) -> None:
        ctx = self.ctx
        ctx.deleting = set(self.zk.children(zd.DELETE_TOPICS, watch=self._on_watch))
        enabled = str(self._setting("delete.topic.enable", True)).lower() == "true"
        for name in sorted(ctx.deleting):
            if not enabled:
                log.info("topic deletion is disabled: dropping the request for %s", name)
                self.zk.delete(zd.delete_topic_path(name))
                continue
            if any(tp[0] == name for tp in self._reassigning):
                continue  # deleted once its reassignment is done, as Kafka does
            self.states.delete_topic(name)
            self._reassigning = {tp: r for tp, r in self._reassigning.items() if tp[0] != name}

    def _on_log_dir_events(self) -> None:
        """Kafka's onBrokerLogDirFailure: leaders move off the replicas on a failed log
        dir at once, and those replicas leave the ISRs (they return by catching up
        after the broker restarts with the dir repaired)."""
        names = self.zk.children(zd.LOG_DIR_EVENT_NOTIFICATION, watch=self._on_watch)
        paths = [f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{n}" for n in names]
        failed: dict[int, set[TopicPartition]] = {}
        for item in self.zk.get_many(paths):
            if item is not None:
                broker, tps = zd.decode_log_dir_event(item[0])
                failed.setdefault(broker, set()).update(tps)
        for broker, tps in failed.items():
            known = sorted(tp for tp in tps if tp in self.ctx.states)
            log.warning("broker %d: a log dir failed; %d replica(s) offline, moving their "
                        "leadership", broker, len(known))
            self.states.move_off_failed_dir(known, broker)
        for path in paths:
            self.zk.delete(path)

    def _on_isr_change(self) -> None:
        changed = self._clear_isr_notifications()
        if changed:
            self.states.read_states(sorted(tp for tp in changed if tp[0] in self.ctx.topics))
            if any(tp in self._reassigning for tp in changed):
                self._check_reassignments()

    def _on_reassign(self) -> None:
        found = self.zk.get(zd.REASSIGN_PARTITIONS, watch=self._on_watch)
        wanted = zd.decode_reassignment(found[0]) if found else {}
        ctx = self.ctx
        # moves withdrawn before they completed go back to the original replicas
        for tp in list(self._reassigning):
            if tp not in wanted and tp[0] in ctx.topics:
                self.states.cancel_reassignment(tp)
                del self._reassigning[tp]
        moving = [(t, p) for t, a in ctx.topics.items() for p in {**a.adding, **a.removing}]
        for tp in moving:
            if tp not in wanted and tp not in self._reassigning:
                self.states.cancel_reassignment(tp)  # left by a move cancelled meanwhile
        invalid = []
        for tp, target in wanted.items():
            topic, index = tp
            if topic not in ctx.topics or index not in ctx.topics[topic].partitions or \
                    not target or len(set(target)) != len(target):
                log.warning("dropping invalid reassignment of %s-%d to %s", topic, index,
                            list(target))
                invalid.append(tp)
                continue
            if self._reassigning.get(tp) != target and self.states.start_reassignment(tp, target):
                self._reassigning[tp] = target
        if invalid:
            self._finish_reassignments(set(invalid))
        self._check_reassignments()

    def _check_reassignments(self) -> None:
        done = {tp for tp, target in list(self._reassigning.items())
                if self.states.complete_reassignment(tp, target)}
        if done:
            for tp in done:
                del self._reassigning[tp]
            self._finish_reassignments(done)
            self._on_delete_topics()  # deletions that waited for these

    def _finish_reassignments(self, done: set[TopicPartition]) -> None:
        """Drop finished moves from /admin/reassign_partitions (the znode goes when empty)."""
        for _ in range(5):
            found = self.zk.get(zd.REASSIGN_PARTITIONS, watch=self._on_watch)
            if found is None:
                return
            remaining = {tp: r for tp, r in zd.decode_reassignment(found[0]).items()
                         if tp not in done}
            try:
                if remaining:
                    self.states.tx([("set", zd.REASSIGN_PARTITIONS,
                                     zd.encode_reassignment(remaining), found[1].version)])
                else:
                    self.states.tx([("delete", zd.REASSIGN_PARTITIONS, found[1].version)])
                return
            except ZkTransactionFailed:
                continue

    def _on_preferred(self) -> None:
        found = self.zk.get(zd.PREFERRED_REPLICA_ELECTION, watch=self._on_watch)
        if found is None:
            return
        wanted = sorted(tp for tp in zd.decode_partitions(found[0])
                        if tp[0] in self.ctx.topics and tp not in self._reassigning)
        self.states.elect_preferred(wanted)
        try:
            self.states.tx([("delete", zd.PREFERRED_REPLICA_ELECTION, found[1].version)])
        except ZkTransactionFailed:
            self._queue.put(("preferred",))  # more were added meanwhile

    def _on_config(self, topic: str | None) -> None:
        """unclean.leader.election.enable turned on brings offline partitions back at once."""
        if topic is None:
            found = self.zk.get(zd.broker_config_path(), watch=self._on_watch)
            self.ctx.broker_configs = zd.decode_config(found[0]) if found else {}
        else:
            found = self.zk.get(zd.topic_config_path(topic), watch=self._on_watch)
            self.ctx.topic_configs[topic] = zd.decode_config(found[0]) if found else {}
        offline = [tp for tp, s in self.ctx.states.items()
                   if s.leader not in self.ctx.live and (topic is None or tp[0] == topic)]
        self._elect_offline(offline)

    def _on_tick(self) -> None:
        if self._reassigning:
            self._check_reassignments()
        if time.monotonic() >= self._next_rebalance:
            interval = float(self._setting("leader.imbalance.check.interval.seconds", 300))
            self._next_rebalance = time.monotonic() + interval
            if str(self._setting("auto.leader.rebalance.enable", True)).lower() == "true":
                self._rebalance()

    def _rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: a broker leading fewer than its
        preferred partitions by more than leader.imbalance.per.broker.percentage gets
        them back, where it is alive and in sync."""
        ctx = self.ctx
        if self._reassigning or ctx.deleting:
            return
        # Leaders are ours to change, but the cache can lag what the znodes say (a state
        # written by a previous controller, or by hand): decide on what they say now.
        self.states.read_states(ctx.all_partitions())
        percentage = float(self._setting("leader.imbalance.per.broker.percentage", 10))
        moves: list[TopicPartition] = []
        for broker in ctx.live:
            preferred = [tp for tp in ctx.all_partitions()
                         if ctx.replicas(tp)[:1] == (broker,) and tp in ctx.states]
            if not preferred:
                continue
            not_led = [tp for tp in preferred if ctx.states[tp].leader != broker]
            if len(not_led) / len(preferred) * 100 > percentage:
                moves += [tp for tp in not_led if broker in ctx.states[tp].isr]
        if moves:
            log.info("leader imbalance: moving %d partitions back to their preferred leader",
                     len(moves))
            self.states.elect_preferred(sorted(moves))

    def _setting(self, name: str, default: Any) -> Any:
        value = self.ctx.broker_configs.get(name)
        if value is not None:
            return value
        value = self._defaults().get(name)
        return default if value is None else value
