"""What the znodes a broker watches say, as last read: one cache, updated one read at a
time (`apply` returns the paths a read leads to), and the MetadataImage built from it.
The store (zk_store.py) does the reading, the watching and the writing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from odradek.cluster import zk_acls
from odradek.cluster import zk_data as zd
from odradek.cluster.metadata import BrokerInfo, MetadataImage, TopicInfo
from odradek.cluster.zk_image import build_image, build_topic

TopicPartition = tuple[str, int]
ReadResult = tuple[str, Any, Any]  # ("data", bytes, stat) | ("children", names, None) | ("none",…)
SCRAM_PREFIX = "SCRAM-"  # a user's SCRAM credentials share its /config/users znode


class ZnodeCache:
    """The image is rebuilt where it changed: a topic's entry when one of its znodes was
    read again, every entry when the live brokers (or this broker's fencing) changed.
    With 30,000 partitions a change to one topic costs that topic, and the entries of
    the others stay the same objects, which the listeners and Metadata's cache rely on."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, zd.TopicAssignment] = {}
        self._states: dict[TopicPartition, zd.LeaderAndIsr] = {}
        self._partitions_of: dict[str, set[int]] = {}  # the states held, by topic
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.broker_configs: dict[str, str] = {}
        # /config/users/<u>[/clients/<c>], /config/clients/<c> and
        # /config/client-metrics/<name>: {path: config}
        self.entity_configs: dict[str, dict[str, str]] = {}
        self.acls = zk_acls.AclCache()  # /kafka-acl*, followed through its notifications
        self.controller_id = -1
        self.deleting: set[str] = set()
        self.features: dict[str, int] = {}
        self.features_epoch = 0  # the /feature znode's version, Kafka's epoch in ZK mode
        self._entries: dict[str, TopicInfo] = {}  # as last built
        self._changed: set[str] = set()  # topics whose entries are stale
        self._built_for: tuple[dict[int, BrokerInfo], int | None] | None = None

    @property
    def states(self) -> dict[TopicPartition, zd.LeaderAndIsr]:
        """Every partition's state, read-only: `set_state` changes one."""
        return self._states

    def set_state(self, tp: TopicPartition, state: zd.LeaderAndIsr | None) -> None:
        if state is None:
            self._states.pop(tp, None)
            held = self._partitions_of.get(tp[0])
            if held is not None:
                held.discard(tp[1])
        else:
            self._states[tp] = state
            self._partitions_of.setdefault(tp[0], set()).add(tp[1])
        self._changed.add(tp[0])

    def offer_state(self, tp: TopicPartition, state: zd.LeaderAndIsr) -> bool:
        """Keep `state` unless a newer version of the znode is held: states arrive by
        three ways (a watched re-read, the leader's own ISR write, the controller's
        write on this broker), and a read that was in flight while one of the others
        landed must not hand an older state back. True when the state changed."""
        held = self._states.get(tp)
        if held == state or (held is not None and held.zk_version > state.zk_version):
            return False
        self.set_state(tp, state)
        return True

    def apply(self, path: str, result: ReadResult, full: bool) -> set[str]:
        """Put one read into the cache; returns the paths it leads to."""
        kind, value, stat = result
        parts = path.strip("/").split("/")
        follow: set[str] = set()
        if zk_acls.AclCache.handles(path):
            return self.acls.apply(path, kind, value, full)
        if path == zd.BROKER_IDS:
            ids = {int(n) for n in value or () if n.isdigit()}
            for gone in set(self.brokers) - ids:
                del self.brokers[gone]
            wanted_ids = ids if full else ids - set(self.brokers)
            follow |= {zd.broker_path(i) for i in wanted_ids}
        elif path.startswith(zd.BROKER_IDS + "/"):
            node_id = int(parts[2])
            if kind == "data":
                self.brokers[node_id] = zd.decode_broker(node_id, value)
            else:
                self.brokers.pop(node_id, None)
        elif path == zd.TOPICS:
            names = set(value or ())
            for gone_topic in set(self.topics) - names:
                self.forget_topic(gone_topic)
            wanted = names if full else names - set(self.topics)
            for name in wanted:
                follow |= {zd.topic_path(name), zd.topic_config_path(name)}
        elif len(parts) == 3 and path.startswith(zd.TOPICS + "/"):
            topic = parts[2]
            if kind != "data":
                self.forget_topic(topic)
            else:
                assignment = zd.decode_topic(value)
                known = self.topics.get(topic)
                if known is not None and known.topic_id not in (None, assignment.topic_id):
                    self._forget_states(topic)  # deleted and created again: new versions
                self.topics[topic] = assignment
                self._changed.add(topic)
                follow |= {zd.partition_state_path(topic, p) for p in assignment.partitions}
        elif len(parts) == 6 and parts[5] == "state":
            tp = (parts[2], int(parts[4]))
            if kind != "data":
                self.set_state(tp, None)
            else:
                self.offer_state(tp, zd.decode_state(value, stat.version))
        elif path.startswith(zd.CONFIG_TOPICS + "/"):
            if kind == "data":
                self.topic_configs[parts[2]] = zd.decode_config(value)
            else:
                self.topic_configs.pop(parts[2], None)
            self._changed.add(parts[2])
        elif path == zd.broker_config_path():
            self.broker_configs = zd.decode_config(value) if kind == "data" else {}
        elif path.startswith((zd.CONFIG_USERS, zd.CONFIG_CLIENTS, zd.CONFIG_CLIENT_METRICS)):
            follow |= self._apply_entity(path, parts, kind, value)
        elif path == zd.FEATURE:
            self.features = zd.decode_features(value) if kind == "data" else {}
            self.features_epoch = stat.version if kind == "data" else 0
        elif path == zd.CONTROLLER:
            self.controller_id = zd.decode_controller(value) if kind == "data" else -1
        elif path == zd.DELETE_TOPICS:
            self.deleting = set(value or ())
        return follow

    def _apply_entity(self, path: str, parts: list[str], kind: str, value: Any) -> set[str]:
        """Quota entities and client-metrics subscriptions: a children list leads to its
        entities (and a user's clients); an entity's data is its config."""
        if is_children_path(path):
            names = set(value or ())
            below = {f"{path}/{n}" for n in names}
            for known in [k for k in self.entity_configs if k.startswith(path + "/")]:
                if "/".join(known.split("/")[: len(parts) + 2]) not in below:
                    del self.entity_configs[known]  # its entity (or its user) is gone
            follow = set(below)
            if path == zd.CONFIG_USERS:
                follow |= {f"{b}/clients" for b in below}
            return follow
        if kind == "data":
            self.entity_configs[path] = zd.decode_config(value)
        else:
            self.entity_configs.pop(path, None)
        return set()

    def forget_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self.topic_configs.pop(name, None)
        self._forget_states(name)

    def _forget_states(self, name: str) -> None:
        for p in self._partitions_of.pop(name, ()):
            self._states.pop((name, p), None)
        self._changed.add(name)

    def _topic_entries(self, fenced_node: int | None) -> dict[str, TopicInfo]:
        basis = (dict(self.brokers), fenced_node)
        if basis != self._built_for:  # leaders and offline replicas depend on liveness
            self._built_for = basis
            self._entries.clear()
            self._changed = set(self.topics)
        live = basis[0]
        for name in self._changed:
            assignment = self.topics.get(name)
            entry = None if assignment is None else build_topic(
                name, assignment, self._states, self.topic_configs.get(name, {}), live,
                fenced_node)
            if entry is None:
                self._entries.pop(name, None)
            else:
                self._entries[name] = entry
        self._changed = set()
        return self._entries

    def build(self, cluster_id: str, fenced_node: int | None) -> MetadataImage:
        image = build_image(cluster_id, self.brokers, self._topic_entries(fenced_node),
                            self.broker_configs, self.controller_id)
        quotas: dict[str, dict[str, str]] = {}
        users: dict[str, dict[str, str]] = {}
        metrics: dict[str, dict[str, str]] = {}
        for path, config in self.entity_configs.items():
            if not config:
                continue  # Kafka leaves an emptied entity's znode: nothing is set there
            if path.startswith(zd.CONFIG_CLIENT_METRICS + "/"):
                metrics[path.rsplit("/", 1)[1]] = dict(config)
                continue
            quota = {k: v for k, v in config.items() if not k.startswith(SCRAM_PREFIX)}
            if quota:
                quotas[path] = quota
            user = path.removeprefix(zd.CONFIG_USERS + "/")
            if path.startswith(zd.CONFIG_USERS + "/") and "/" not in user:
                scram = {k: v for k, v in config.items() if k.startswith(SCRAM_PREFIX)}
                if scram:
                    users[user] = scram
        return replace(image, client_quotas=quotas, user_configs=users,
                       acls=self.acls.rows(), client_metrics=metrics,
                       features=dict(self.features), features_epoch=self.features_epoch)


def is_children_path(path: str) -> bool:
    if zk_acls.AclCache.handles(path):
        return zk_acls.AclCache.is_children(path)
    if path in (zd.BROKER_IDS, zd.TOPICS, zd.DELETE_TOPICS, zd.CONFIG_USERS,
                zd.CONFIG_CLIENTS, zd.CONFIG_CLIENT_METRICS):
        return True
    parts = path.split("/")  # /config/users/<user>/clients
    return len(parts) == 5 and path.startswith(zd.CONFIG_USERS + "/") and parts[4] == "clients"
