"""The controller's partition state changes, written to the partition state znodes.

Kafka's PartitionStateMachine and ReplicaStateMachine, reduced to what the state
znodes record: a new partition gets its first state; a partition without a live
leader gets one elected; a replica that went offline leaves the ISRs; a reassignment
grows the replica set, waits for the new replicas to join the ISR, moves the leader
and shrinks the set; a topic marked for deletion is removed.

Every write is conditional twice: on the state znode's version (a leader may have
changed its ISR meanwhile: re-read and retry) and on /controller_epoch's version (a
newer controller exists: `ControllerMoved`, and this one resigns).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from odradek.cluster import election
from odradek.cluster import zk_data as zd
from odradek.cluster.metadata import BrokerInfo, new_topic_id, uuid_to_kafka
from odradek.cluster.zk_client import ZkSession, ZkTransactionFailed

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("odradek.state.change")

TopicPartition = tuple[str, int]
StatesWritten = Callable[[list[tuple[TopicPartition, zd.LeaderAndIsr]]], None]
WRITE_BATCH = 1000  # states per transaction: ~150 KB, far below ZooKeeper's 1 MB
INIT_BATCH = 250  # partitions per transaction: ~500 ops, far below ZooKeeper's 1 MB request


class ControllerMoved(Exception):
    """/controller_epoch moved on: another broker is the controller now."""


@dataclass
class ControllerContext:
    """What the active controller knows (Kafka's ControllerContext)."""

    node_id: int
    epoch: int = 0
    epoch_zk_version: int = -1
    live: dict[int, BrokerInfo] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)  # czxid of the registration
    topics: dict[str, zd.TopicAssignment] = field(default_factory=dict)
    topic_versions: dict[str, int] = field(default_factory=dict)
    states: dict[TopicPartition, zd.LeaderAndIsr] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, str] = field(default_factory=dict)  # dynamic cluster default

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.topics.get(tp[0])
        return () if assignment is None else assignment.partitions.get(tp[1], ())

    def all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, a in sorted(self.topics.items()) for p in sorted(a.partitions)]


class PartitionStates:
    def __init__(self, zk: ZkSession, ctx: ControllerContext,
                 broker_defaults: Callable[[], Mapping[str, Any]],
                 on_written: StatesWritten | None = None) -> None:
        self.zk = zk
        self.ctx = ctx
        self._defaults = broker_defaults
        # told every state written, with its new version, as Kafka's controller sends
        # LeaderAndIsr to its own broker: that broker's watched re-reads share this
        # ZooKeeper connection and queued behind 9,000 new partitions' writes for 40 s
        self._on_written = on_written

    # ---- plumbing ------------------------------------------------------------------------

    def tx(self, ops: list[tuple[Any, ...]]) -> list[Any]:
        """Commit `ops` only while our controller epoch is current."""
        outcome = self.tx_many([ops])[0]
        if isinstance(outcome, ZkTransactionFailed):
            raise outcome
        return outcome

    def tx_many(self, transactions: list[list[tuple[Any, ...]]]
                ) -> list[list[Any] | ZkTransactionFailed]:
        """Independent transactions, pipelined, each only while our controller epoch is
        current: ControllerMoved if any found it stale."""
        fence = ("check", zd.CONTROLLER_EPOCH, self.ctx.epoch_zk_version)
        outcomes: list[list[Any] | ZkTransactionFailed] = []
        for outcome in self.zk.commit_many([[fence, *ops] for ops in transactions]):
            if isinstance(outcome, ZkTransactionFailed):
                if outcome.index == 0:
                    raise ControllerMoved(f"controller epoch {self.ctx.epoch} is stale")
                outcomes.append(ZkTransactionFailed(outcome.index - 1, outcome.error))
            else:
                outcomes.append(outcome[1:])
        return outcomes

    def read_states(self, tps: list[TopicPartition]) -> dict[TopicPartition, zd.LeaderAndIsr]:
        found = self.zk.read_many([zd.partition_state_path(*tp) for tp in tps])
        out = {}
        for tp, item in zip(tps, found, strict=True):
            if item is not None:
                out[tp] = zd.decode_state(item[0], item[1].version)
                self.ctx.states[tp] = out[tp]
            else:
                self.ctx.states.pop(tp, None)
        return out

    def _held_or_read(self, tps: list[TopicPartition]) -> dict[TopicPartition, zd.LeaderAndIsr]:
        held = self.ctx.states
        out = {tp: held[tp] for tp in tps if tp in held}
        if len(out) < len(tps):
            out.update(self.read_states([tp for tp in tps if tp not in out]))
        return out

    def write_states(self, changes: list[tuple[TopicPartition, zd.LeaderAndIsr]], why: str
                     ) -> dict[TopicPartition, bool]:
        """Write each `new` over the state at its zk_version; False for those whose state
        changed meanwhile (a failover writes a state for every partition the dead broker
        led: one round trip each took seconds). They go in
        transactions of WRITE_BATCH states, pipelined; a transaction that fails because
        one state moved applies nothing, and its states are written one by one."""
        batches = [changes[i:i + WRITE_BATCH] for i in range(0, len(changes), WRITE_BATCH)]
        outcomes = self.tx_many([[zd.state_write(tp, new) for tp, new in b] for b in batches])
        done: dict[TopicPartition, bool] = {}
        for batch, outcome in zip(batches, outcomes, strict=True):
            if isinstance(outcome, ZkTransactionFailed):
                if not isinstance(outcome.error, (BadVersionError, NoNodeError)):
                    raise outcome
                # one of them moved and nothing was applied: each alone
                self._written(batch, self.tx_many([[zd.state_write(tp, new)] for tp, new in batch])
                              if len(batch) > 1 else [outcome], why, done)
            else:
                self._written(batch, [[stat] for stat in outcome], why, done)
        self._tell([(tp, self.ctx.states[tp]) for tp, ok in done.items() if ok])
        return done

    def _tell(self, written: list[tuple[TopicPartition, zd.LeaderAndIsr]]) -> None:
        if written and self._on_written is not None:
            self._on_written(written)

    def _written(self, changes: list[tuple[TopicPartition, zd.LeaderAndIsr]],
                 outcomes: list[list[Any] | ZkTransactionFailed], why: str,
                 done: dict[TopicPartition, bool]) -> None:
        for (tp, new), outcome in zip(changes, outcomes, strict=True):
            if isinstance(outcome, ZkTransactionFailed):
                if not isinstance(outcome.error, (BadVersionError, NoNodeError)):
                    raise outcome
                done[tp] = False
                continue
            (stat,) = outcome
            self.ctx.states[tp] = replace(new, zk_version=stat.version)
            state_change_log.info("%s-%d: leader %d epoch %d isr %s (%s)", tp[0], tp[1],
                                  new.leader, new.leader_epoch, list(new.isr), why)
            done[tp] = True

    def _config(self, topic: str, name: str) -> str | None:
        value = self.ctx.topic_configs.get(topic, {}).get(name)
        if value is None:
            value = self.ctx.broker_configs.get(name)
        if value is None:
            default = self._defaults().get(name)
            value = None if default is None else str(default)
        return value

    def unclean_enabled(self, topic: str) -> bool:
        return str(self._config(topic, "unclean.leader.election.enable")).lower() == "true"

    def _retrying(self, tps: Iterable[TopicPartition],
                  change: Callable[[TopicPartition, zd.LeaderAndIsr], zd.LeaderAndIsr | None],
                  why: str, held: bool = False) -> dict[TopicPartition, zd.LeaderAndIsr]:
        """Apply `change` to each partition's current state, re-reading those whose state
        moved under us (a leader's ISR update) a few times. Returns what was written.
        `held`: the states this controller holds are current (it has just loaded them):
        the first round applies `change` to them without reading them again."""
        todo = list(tps)
        written: dict[TopicPartition, zd.LeaderAndIsr] = {}
        for attempt in range(5):
            if not todo:
                break
            states = self._held_or_read(todo) if held and attempt == 0 \
                else self.read_states(todo)
            changes = []
            for tp in todo:
                state = states.get(tp)
                if state is None:
                    continue
                new = change(tp, state)
                if new is not None:
                    changes.append((tp, new))
            done = self.write_states(changes, why)
            written.update((tp, self.ctx.states[tp]) for tp, ok in done.items() if ok)
            todo = [tp for tp, ok in done.items() if not ok]
        return written

    # ---- new partitions --------------------------------------------------------------------

    def init_partitions(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """NewPartition → OnlinePartition: leader = first live replica, ISR = the live
        replicas. Those with no live replica wait for a broker; returned.

        A topic's new states are created in transactions of up to INIT_BATCH partitions
        (with their parent znodes), not one round trip each: a 500-partition topic took
        6 s when each partition cost two sequential ZooKeeper round trips. A transaction
        that fails because a state exists (a previous controller got that far) is redone
        a partition at a time."""
        waiting: list[TopicPartition] = []
        by_topic: dict[str, list[tuple[TopicPartition, zd.LeaderAndIsr]]] = {}
        for tp in tps:
            replicas = self.ctx.replicas(tp)
            live = [r for r in replicas if r in self.ctx.live]
            if not live:
                waiting.append(tp)
                log.warning("%s-%d has no live replica among %s: it stays offline", *tp,
                            list(replicas))
                continue
            state = zd.LeaderAndIsr(live[0], 0, tuple(live), self.ctx.epoch)
            by_topic.setdefault(tp[0], []).append((tp, state))
        for topic, items in by_topic.items():
            parent = zd.partitions_path(topic)
            existing = set(self.zk.children(parent)) if self.zk.exists(parent) else None
            for i in range(0, len(items), INIT_BATCH):
                chunk = items[i:i + INIT_BATCH]
                ops: list[tuple[Any, ...]] = []
                if existing is None:
                    ops.append(("create", parent, b""))
                    existing = set()
                for tp, state in chunk:
                    if str(tp[1]) not in existing:
                        ops.append(("create", zd.partition_path(*tp), b""))
                    ops.append(("create", zd.partition_state_path(*tp), zd.encode_state(state)))
                try:
                    self.tx(ops)
                except ZkTransactionFailed as e:
                    if not isinstance(e.error, NodeExistsError):
                        raise
                    for tp, state in chunk:
                        self._init_one(tp, state)
                    existing.update(str(tp[1]) for tp, _ in chunk)
                    continue
                existing.update(str(tp[1]) for tp, _ in chunk)
                for tp, state in chunk:
                    self._initialised(tp, state)
                self._tell([(tp, self.ctx.states[tp]) for tp, _ in chunk])
        return waiting

    def _init_one(self, tp: TopicPartition, state: zd.LeaderAndIsr) -> None:
        self.zk.ensure_path(zd.partition_path(*tp))
        try:
            self.tx([("create", zd.partition_state_path(*tp), zd.encode_state(state))])
        except ZkTransactionFailed as e:
            if isinstance(e.error, NodeExistsError):
                return  # initialised already (a previous controller got this far)
            raise
        self._initialised(tp, state)
        self._tell([(tp, self.ctx.states[tp])])

    def _initialised(self, tp: TopicPartition, state: zd.LeaderAndIsr) -> None:
        self.ctx.states[tp] = replace(state, zk_version=0)
        state_change_log.info("%s-%d: new, leader %d isr %s", *tp, state.leader,
                              list(state.isr))

    def ensure_topic_ids(self, names: Iterable[str] | None = None) -> None:
        """Topics written by tools that know no topic ids get one, as Kafka's controller
        does: `names`, or every topic."""
        topics = self.ctx.topics
        chosen = list(topics) if names is None else [n for n in names if n in topics]
        for name in chosen:
            assignment = topics[name]
            if assignment.topic_id is not None:
                continue
            new = replace(assignment, topic_id=uuid_to_kafka(new_topic_id()))
            try:
                (stat,) = self.tx([("set", zd.topic_path(name), zd.encode_topic(new),
                                    self.ctx.topic_versions.get(name, -1))])
            except ZkTransactionFailed:
                continue  # changed meanwhile: its watch brings it back
            self.ctx.topics[name] = new
            self.ctx.topic_versions[name] = stat.version
            log.info("gave topic %s the id %s", name, new.topic_id)

    # ---- leader elections ----------------------------------------------------------------

    def elect_offline(self, tps: Iterable[TopicPartition], held: bool = False
                      ) -> dict[TopicPartition, zd.LeaderAndIsr]:
        """Partitions whose leader is not alive get the first live ISR member (in replica
        order), or with unclean election enabled any live replica."""
        live = self.ctx.live
        offline: list[TopicPartition] = []

        def change(tp: TopicPartition, state: zd.LeaderAndIsr) -> zd.LeaderAndIsr | None:
            if state.leader in live:
                return None
            elected = election.offline_partition(self.ctx.replicas(tp), state.isr, live,
                                                 self.unclean_enabled(tp[0]))
            if elected is None:
                if state.leader == zd.NO_LEADER:
                    return None
                leader, isr = election.without_replica(state.leader, state.isr, state.leader)
                offline.append(tp)
                return state.new_leader(leader, isr, self.ctx.epoch)
            if elected.unclean:
                log.warning("%s-%d: unclean election of out-of-sync replica %d; writes that "
                            "only the ISR %s had are lost", *tp, elected.leader,
                            list(state.isr))
            return state.new_leader(elected.leader, elected.isr, self.ctx.epoch)

        written = self._retrying(tps, change, "offline partition election", held)
        offline = [tp for tp in dict.fromkeys(offline) if tp in written]
        if offline:
            # one line, not one per partition: a dead broker's 10,000 partitions logged
            # one by one held the new controller a second (each is in the state-change log)
            log.warning("%d partitions are offline: no live replica in their ISRs (%s)",
                        len(offline), ", ".join(f"{t}-{p}" for t, p in offline[:5])
                        + (", …" if len(offline) > 5 else ""))
        return written

    def remove_from_isr(self, tps: Iterable[TopicPartition], gone: set[int],
                        held: bool = False) -> dict[TopicPartition, zd.LeaderAndIsr]:
        """Offline replicas leave the ISRs (all but the last member) at once, rather than
        after replica.lag.time.max.ms, so acks=all writes stop waiting for them."""

        def change(tp: TopicPartition, state: zd.LeaderAndIsr) -> zd.LeaderAndIsr | None:
            leader, isr = state.leader, state.isr
            for replica in gone:
                if replica in isr:
                    leader, isr = election.without_replica(leader, isr, replica)
            if (leader, isr) == (state.leader, state.isr):
                return None
            return state.new_leader(leader, isr, self.ctx.epoch)

        return self._retrying(tps, change, f"replicas {sorted(gone)} offline", held)

    def move_off_failed_dir(self, tps: Iterable[TopicPartition], broker: int
                            ) -> dict[TopicPartition, zd.LeaderAndIsr]:
        """Kafka's onReplicasBecomeOffline: `broker`'s replicas of `tps` sit on a failed
        log dir. A partition it leads gets the first other live in-sync replica (none:
        it is offline); it leaves every ISR (all but a last member)."""
        live = self.ctx.live

        def change(tp: TopicPartition, state: zd.LeaderAndIsr) -> zd.LeaderAndIsr | None:
            if state.leader == broker:
                elected = election.controlled_shutdown(self.ctx.replicas(tp), state.isr,
                                                       live, {broker})
                if elected is not None:
                    return state.new_leader(elected.leader, elected.isr, self.ctx.epoch)
            leader, isr = election.without_replica(state.leader, state.isr, broker)
            if (leader, isr) == (state.leader, state.isr):
                return None
            return state.new_leader(leader, isr, self.ctx.epoch)

        return self._retrying(tps, change, f"broker {broker}'s replicas on a failed log dir")

    def elect_preferred(self, tps: Iterable[TopicPartition]
                        ) -> dict[TopicPartition, zd.LeaderAndIsr]:
        live = self.ctx.live

        def change(tp: TopicPartition, state: zd.LeaderAndIsr) -> zd.LeaderAndIsr | None:
            elected = election.preferred_replica(self.ctx.replicas(tp), state.isr, live)
            if elected is None or elected.leader == state.leader:
                return None
            return state.new_leader(elected.leader, elected.isr, self.ctx.epoch)

        return self._retrying(tps, change, "preferred replica election")

    def elect_unclean(self, tps: Iterable[TopicPartition]
                      ) -> dict[TopicPartition, zd.LeaderAndIsr]:
        """ElectLeaders(UNCLEAN): offline partitions, as if unclean election were on."""
        live = self.ctx.live

        def change(tp: TopicPartition, state: zd.LeaderAndIsr) -> zd.LeaderAndIsr | None:
            if state.leader in live:
                return None
            elected = election.offline_partition(self.ctx.replicas(tp), state.isr, live, True)
            if elected is None:
                return None
            return state.new_leader(elected.leader, elected.isr, self.ctx.epoch)

        return self._retrying(tps, change, "unclean election requested")

    # ---- reassignment -----------------------------------------------------------------------

    def _write_assignment(self, topic: str, partitions: dict[int, tuple[int, ...]],
                          adding: dict[int, tuple[int, ...]],
                          removing: dict[int, tuple[int, ...]]) -> bool:
        current = self.ctx.topics[topic]
        new = zd.TopicAssignment(current.topic_id, partitions, adding, removing)
        try:
            (stat,) = self.tx([("set", zd.topic_path(topic), zd.encode_topic(new),
                                self.ctx.topic_versions.get(topic, -1))])
        except ZkTransactionFailed as e:
            if isinstance(e.error, BadVersionError):
                self._reread_topic(topic)
                return False
            raise
        self.ctx.topics[topic] = new
        self.ctx.topic_versions[topic] = stat.version
        return True

    def _reread_topic(self, topic: str) -> None:
        found = self.zk.get(zd.topic_path(topic))
        if found is not None:
            self.ctx.topics[topic] = zd.decode_topic(found[0])
            self.ctx.topic_versions[topic] = found[1].version

    def start_reassignment(self, tp: TopicPartition, target: tuple[int, ...]) -> bool:
        """Phase A: replicas = target + the original ones not in it; the added replicas
        start following (they see themselves in the assignment)."""
        topic, index = tp
        assignment = self.ctx.topics[topic]
        current = assignment.partitions[index]
        original = tuple(r for r in current if r not in assignment.adding.get(index, ()))
        full = tuple(dict.fromkeys(target + original))
        adding = tuple(r for r in full if r not in original)
        removing = tuple(r for r in full if r not in target)
        if (full == current and assignment.adding.get(index, ()) == adding
                and assignment.removing.get(index, ()) == removing):
            return True
        partitions = dict(assignment.partitions)
        partitions[index] = full
        adds, removes = dict(assignment.adding), dict(assignment.removing)
        _put(adds, index, adding)
        _put(removes, index, removing)
        if not self._write_assignment(topic, partitions, adds, removes):
            return False
        log.info("reassigning %s-%d: %s → %s (adding %s, removing %s)", topic, index,
                 list(original), list(target), list(adding), list(removing))
        return True

    def complete_reassignment(self, tp: TopicPartition, target: tuple[int, ...]) -> bool:
        """Phase B, once every target replica is in the ISR: lead from the target (moving
        the leader if it is being removed), drop the removed replicas from the ISR, then
        make the target the assignment. False while replicas are still catching up."""
        topic, index = tp
        state = self.read_states([tp]).get(tp)
        if state is None or not all(r in state.isr for r in target):
            return False
        live = self.ctx.live

        def change(_: TopicPartition, st: zd.LeaderAndIsr) -> zd.LeaderAndIsr | None:
            if not all(r in st.isr for r in target):
                return None
            if st.leader in target and st.leader in live:
                return st.new_leader(st.leader, [r for r in st.isr if r in target],
                                     self.ctx.epoch)
            elected = election.reassigned_partition(target, st.isr, live)
            if elected is None:
                return None
            return st.new_leader(elected.leader, elected.isr, self.ctx.epoch)

        if tp not in self._retrying([tp], change, f"reassignment to {list(target)}"):
            return False
        assignment = self.ctx.topics[topic]
        partitions = dict(assignment.partitions)
        partitions[index] = target
        adds, removes = dict(assignment.adding), dict(assignment.removing)
        adds.pop(index, None)
        removes.pop(index, None)
        for _ in range(3):
            if self._write_assignment(topic, partitions, adds, removes):
                log.info("reassignment of %s-%d to %s completed", topic, index, list(target))
                return True
            assignment = self.ctx.topics[topic]
            partitions, adds, removes = (dict(assignment.partitions), dict(assignment.adding),
                                         dict(assignment.removing))
            partitions[index] = target
            adds.pop(index, None)
            removes.pop(index, None)
        return False

    def cancel_reassignment(self, tp: TopicPartition) -> None:
        """A move withdrawn before it completed: back to the original replicas."""
        topic, index = tp
        assignment = self.ctx.topics[topic]
        adding = assignment.adding.get(index, ())
        original = tuple(r for r in assignment.partitions[index] if r not in adding)
        live = self.ctx.live

        def change(_: TopicPartition, st: zd.LeaderAndIsr) -> zd.LeaderAndIsr | None:
            isr = [r for r in st.isr if r in original]
            if st.leader in original:
                return st.new_leader(st.leader, isr, self.ctx.epoch)
            elected = election.reassigned_partition(original, st.isr, live)
            return None if elected is None else st.new_leader(elected.leader, elected.isr,
                                                              self.ctx.epoch)

        self._retrying([tp], change, "reassignment cancelled")
        partitions = dict(assignment.partitions)
        partitions[index] = original
        adds, removes = dict(assignment.adding), dict(assignment.removing)
        adds.pop(index, None)
        removes.pop(index, None)
        self._write_assignment(topic, partitions, adds, removes)
        log.info("reassignment of %s-%d cancelled: back to %s", topic, index, list(original))

    # ---- topic deletion --------------------------------------------------------------------

    def delete_topic(self, topic: str) -> None:
        """Remove the topic's znodes in one transaction; brokers delete the logs when they
        see it gone (and brokers that are down, when they start)."""
        ops: list[tuple[Any, ...]] = []
        assignment = self.ctx.topics.get(topic)
        base = zd.partitions_path(topic)
        for name in self.zk.children(base):
            for child in self.zk.children(f"{base}/{name}"):
                ops.append(("delete", f"{base}/{name}/{child}", -1))
            ops.append(("delete", f"{base}/{name}", -1))
        if self.zk.exists(base) is not None:
            ops.append(("delete", base, -1))
        if assignment is not None or self.zk.exists(zd.topic_path(topic)) is not None:
            ops.append(("delete", zd.topic_path(topic), -1))
        if self.zk.exists(zd.topic_config_path(topic)) is not None:
            ops.append(("delete", zd.topic_config_path(topic), -1))
        ops.append(("delete", zd.delete_topic_path(topic), -1))
        self.tx(ops)
        self.ctx.topics.pop(topic, None)
        self.ctx.topic_versions.pop(topic, None)
        self.ctx.topic_configs.pop(topic, None)
        for tp in [tp for tp in self.ctx.states if tp[0] == topic]:
            del self.ctx.states[tp]
        self.ctx.deleting.discard(topic)
        log.info("deleted topic %s", topic)


def _put(m: dict[int, tuple[int, ...]], key: int, value: tuple[int, ...]) -> None:
    if value:
        m[key] = value
    else:
        m.pop(key, None)
