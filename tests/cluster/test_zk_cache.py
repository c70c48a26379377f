"""The image a ZooKeeper-mode broker builds from the znodes it read: a change to one
topic rebuilds that topic's entry only, and a change of the live brokers rebuilds every
entry (leaders and offline replicas depend on it)."""

from __future__ import annotations

from types import SimpleNamespace

from odradek.cluster import zk_data as zd
from odradek.cluster.metadata import BrokerInfo
from odradek.cluster.zk_cache import ZnodeCache
from odradek.cluster.zk_image import diff_events

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def _stat(version: int = 0) -> SimpleNamespace:
    return SimpleNamespace(version=version)


def _broker(cache: ZnodeCache, node_id: int) -> None:
    info = BrokerInfo(node_id, "127.0.0.1", 9000 + node_id)
    cache.apply(zd.broker_path(node_id), ("data", zd.encode_broker(info), _stat()), True)


def _topic(cache: ZnodeCache, name: str, partitions: int, leader: int) -> None:
    assignment = zd.TopicAssignment(TOPIC_ID, {p: (leader,) for p in range(partitions)})
    follow = cache.apply(zd.topic_path(name), ("data", zd.encode_topic(assignment), _stat()),
                         True)
    assert follow == {zd.partition_state_path(name, p) for p in range(partitions)}
    for p in range(partitions):
        _state(cache, name, p, leader, epoch=0)


def _state(cache: ZnodeCache, name: str, p: int, leader: int, epoch: int) -> None:
    state = zd.LeaderAndIsr(leader, epoch, (leader,), 1)
    cache.apply(zd.partition_state_path(name, p), ("data", zd.encode_state(state),
                                                   _stat(epoch)), False)


def _cache() -> ZnodeCache:
    cache = ZnodeCache()
    _broker(cache, 1)
    _broker(cache, 2)
    for i in range(50):
        _topic(cache, f"t{i:02d}", 4, leader=1 + i % 2)
    return cache


def test_a_new_leader_rebuilds_its_topic_only_and_is_the_one_event() -> None:
    cache = _cache()
    before = cache.build("c", None)
    assert list(before.topics) == sorted(before.topics)
    _state(cache, "t07", 2, leader=1, epoch=1)
    after = cache.build("c", None)
    assert after.topics["t07"].partitions[2].leader == 1
    assert after.topics["t07"].partitions[2].leader_epoch == 1
    assert after.topics["t07"] is not before.topics["t07"]
    assert all(after.topics[n] is before.topics[n] for n in before.topics if n != "t07")
    assert diff_events(before, after) == [("partition-state", "t07")]
    assert diff_events(after, cache.build("c", None)) == []


def test_a_broker_gone_takes_its_leaderships_from_every_topic() -> None:
    cache = _cache()
    before = cache.build("c", None)
    cache.apply(zd.BROKER_IDS, ("children", ["1"], None), False)
    after = cache.build("c", None)
    for i in range(50):
        entry = after.topics[f"t{i:02d}"]
        led_by_2 = i % 2 == 1
        assert all(p.leader == (-1 if led_by_2 else 1) for p in entry.partitions)
        assert all(p.offline_replicas == ((2,) if led_by_2 else ()) for p in entry.partitions)
    assert ("brokers", "") in diff_events(before, after)
    # this broker fenced: its own leaderships go too
    fenced = cache.build("c", fenced_node=1)
    assert all(p.leader == -1 for t in fenced.topics.values() for p in t.partitions)


def test_a_deleted_topic_leaves_no_state_and_a_config_change_reaches_its_entry() -> None:
    cache = _cache()
    before = cache.build("c", None)
    cache.apply(zd.TOPICS, ("children", [f"t{i:02d}" for i in range(1, 50)], None), False)
    cache.apply(zd.topic_config_path("t03"),
                ("data", b'{"version":1,"config":{"retention.ms":"1000"}}', _stat()), False)
    after = cache.build("c", None)
    assert "t00" not in after.topics
    assert not any(tp[0] == "t00" for tp in cache.states)
    assert after.topics["t03"].configs == {"retention.ms": "1000"}
    assert sorted(diff_events(before, after)) == [("configs", "t03"), ("deleted", "t00")]
    # created again under the same name: a new entry with the new partitions
    _topic(cache, "t00", 2, leader=2)
    again = cache.build("c", None)
    assert [p.leader for p in again.topics["t00"].partitions] == [2, 2]


def test_a_read_older_than_the_state_held_does_not_hand_it_back() -> None:
    """A leader's ISR write or the controller's own write lands while a re-read of the
    znode is in flight: the read answers with the version before, and is dropped."""
    cache = _cache()
    newer = zd.LeaderAndIsr(2, 1, (2,), 1, zk_version=3)
    assert cache.offer_state(("t04", 1), newer)
    _state(cache, "t04", 1, leader=1, epoch=2)  # read at version 2, applied after
    assert cache.build("c", None).topics["t04"].partitions[1].leader == 2
    _state(cache, "t04", 1, leader=1, epoch=4)  # the next version is taken
    assert cache.build("c", None).topics["t04"].partitions[1].leader == 1


def test_a_topic_created_again_with_a_new_id_starts_its_versions_over() -> None:
    cache = _cache()
    for epoch in range(1, 4):
        _state(cache, "t05", 0, leader=2, epoch=epoch)
    again = zd.TopicAssignment("AAAAAAAAAAAAAAAAAAAAAg", {0: (1,)})
    cache.apply(zd.topic_path("t05"), ("data", zd.encode_topic(again), _stat()), False)
    _state(cache, "t05", 0, leader=1, epoch=0)
    assert cache.build("c", None).topics["t05"].partitions[0].leader == 1
