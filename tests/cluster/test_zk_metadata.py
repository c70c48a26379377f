"""The ZooKeeper metadata store and controller, driven in-process against a real ZooKeeper.

Three "brokers" share one event loop; each has its own session, store and controller.
Partition states are what the controller writes; ISR changes a leader would make are
written here by hand, as the leader does (a versioned set of the state znode).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from odradek.cluster import zk_data as zd
from odradek.protocol.errors import (
    InvalidReplicationFactor,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from tests.cluster.inproc import Node, active_controller, until
from tests.zk import ZooKeeperProcess, zookeeper  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(120)


def run(zk: ZooKeeperProcess, scenario: Callable[[list[Node], str], Awaitable[Any]],
        racks: tuple[str | None, ...] = (None, None, None),
        configs: dict[str, Any] | None = None) -> Any:
    """Run `scenario(nodes, chroot)` with three nodes in a fresh chroot of the ZooKeeper."""
    chroot = f"/t{uuid.uuid4().hex[:8]}"
    connect = f"{zk.connect}{chroot}"

    async def main() -> Any:
        from kazoo.client import KazooClient
        root = KazooClient(hosts=zk.connect)
        root.start(10)
        root.ensure_path(chroot)
        root.stop()
        nodes = [await Node(connect, i + 1, racks[i], configs).start() for i in range(3)]
        await until(lambda: all(len(n.image.brokers) == 3 for n in nodes), 10,
                    "every broker to see every broker")
        try:
            return await scenario(nodes, connect)
        finally:
            for n in nodes:
                n.stop()

    return asyncio.run(main())


@pytest.fixture
def zk(zookeeper: ZooKeeperProcess) -> Iterator[ZooKeeperProcess]:  # noqa: F811
    yield zookeeper


def test_topic_created_through_one_broker_is_seen_by_all_with_spread_leaders(
        zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        created = await nodes[1].store.create_topic("orders", 3, 3)
        assert "orders" in nodes[1].image.topics  # its own image shows it at once
        for n in nodes:
            assert await n.store.settle(["orders"], timeout_s=10)
            topic = n.image.topics["orders"]
            assert topic.topic_id == created.topic_id
            assert all(len(p.isr) == 3 for p in topic.partitions)
        leaders = {p.leader for p in nodes[0].image.topics["orders"].partitions}
        assert leaders == {1, 2, 3}
        with pytest.raises(TopicAlreadyExists):
            await nodes[2].store.create_topic("orders", 1, 1)
        with pytest.raises(InvalidReplicationFactor):
            await nodes[2].store.create_topic("too-many", 1, 4)

    run(zk, scenario)


def test_znodes_are_laid_out_as_kafka_does(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], connect: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        await nodes[0].store.create_topic("layout", 2, 2, configs={"retention.ms": "1000"})
        for n in nodes:  # node 2 changes its configs below: it must know the topic
            assert await n.store.settle(["layout"], timeout_s=30)
        z = nodes[0].session
        assert sorted(z.children(zd.BROKER_IDS)) == ["1", "2", "3"]
        assignment = json.loads(z.get("/brokers/topics/layout")[0])  # type: ignore[index]
        assert set(assignment["partitions"]) == {"0", "1"} and assignment["topic_id"]
        state = json.loads(z.get("/brokers/topics/layout/partitions/0/state")[0])  # type: ignore[index]
        assert set(state) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
        config = json.loads(z.get("/config/topics/layout")[0])  # type: ignore[index]
        assert config == {"version": 1, "config": {"retention.ms": "1000"}}
        controller = json.loads(z.get("/controller")[0])  # type: ignore[index]
        assert controller["brokerid"] == active_controller(nodes).node_id  # type: ignore[union-attr]
        assert int(z.get("/controller_epoch")[0]) >= 1  # type: ignore[index]
        assert json.loads(z.get("/cluster/id")[0])["id"] == "test-cluster"  # type: ignore[index]
        await nodes[1].store.set_topic_configs("layout", {"retention.ms": "2000"})
        changes = z.children(zd.CONFIG_CHANGES)
        assert any(c.startswith("config_change_") for c in changes)

    run(zk, scenario)


def test_broker_loss_moves_leadership_and_shrinks_isr(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        await nodes[0].store.create_topic("loss", 3, 3)
        for n in nodes:  # each learns of it through its own watches
            assert await n.store.settle(["loss"], timeout_s=10)
        victim = next(n for n in nodes if n is not active_controller(nodes))
        led = [p.partition for p in victim.image.topics["loss"].partitions
               if p.leader == victim.node_id]
        victim.stop()  # closes the session: the registration goes at once
        rest = [n for n in nodes if n is not victim]

        def moved() -> bool:
            parts = rest[0].image.topics["loss"].partitions
            return all(p.leader not in (-1, victim.node_id) and victim.node_id not in p.isr
                       for p in parts)

        await until(moved, 10, "new leaders and smaller ISRs")
        parts = rest[0].image.topics["loss"].partitions
        for index in led:
            assert parts[index].leader_epoch >= 1
            assert parts[index].offline_replicas == (victim.node_id,)

    run(zk, scenario)


def test_controller_failover_bumps_the_epoch(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        first = await until(lambda: active_controller(nodes), what="a controller")
        epoch = first.store.controller.ctx.epoch  # type: ignore[union-attr]
        first.stop()
        rest = [n for n in nodes if n is not first]
        second = await until(lambda: active_controller(rest), 10, "a new controller")
        assert second.store.controller.ctx.epoch == epoch + 1  # type: ignore[union-attr]
        await until(lambda: rest[0].image.controller_id == second.node_id, 5)
        # the new controller does the work: a topic created now gets leaders
        await rest[0].store.create_topic("after-failover", 2, 2)
        assert await rest[1].store.settle(["after-failover"], timeout_s=10)

    run(zk, scenario)


def test_delete_topic_configs_partitions_and_producer_ids(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        a, b, c = nodes
        await a.store.create_topic("gone", 2, 2)
        for n in nodes:
            assert await n.store.settle(["gone"], timeout_s=10)
        await b.store.set_topic_configs("gone", {"retention.ms": "5000"})
        await until(lambda: c.image.topics["gone"].configs == {"retention.ms": "5000"}, 5)
        await c.store.create_partitions("gone", 4)
        assert len(c.image.topics["gone"].partitions) == 4
        assert await c.store.settle(["gone"], timeout_s=10)
        await until(lambda: len(a.image.topics["gone"].partitions) == 4, 5)
        await b.store.set_broker_configs({"log.retention.ms": "60000"})
        await until(lambda: a.image.broker_configs == {"log.retention.ms": "60000"}, 5)
        await c.store.delete_topic("gone")
        for n in nodes:
            assert await n.store.settle(deleted=["gone"], timeout_s=10)
        with pytest.raises(UnknownTopicOrPartition):
            await a.store.delete_topic("gone")
        assert a.session.exists("/brokers/topics/gone") is None
        assert a.session.exists("/config/topics/gone") is None
        await a.store.create_topic("gone", 1, 1)  # the name can be used again
        ids = [await n.store.allocate_producer_id() for n in nodes for _ in range(3)]
        assert len(set(ids)) == 9

    run(zk, scenario)


def test_isr_update_by_a_leader_is_seen_by_every_broker(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        await nodes[0].store.create_topic("isr", 1, 3)
        for n in nodes:  # every node knows the topic before its ISR is looked at there
            assert await n.store.settle(["isr"], timeout_s=10)
        p = nodes[0].image.topics["isr"].partitions[0]
        path = zd.partition_state_path("isr", 0)
        shrunk = zd.LeaderAndIsr(p.leader, p.leader_epoch, (p.leader,), p.controller_epoch,
                                 p.partition_epoch)
        nodes[0].session.set(path, zd.encode_state(shrunk), p.partition_epoch)
        for n in nodes:
            def shrunk_seen(n: Node = n) -> bool:
                return n.image.topics["isr"].partitions[0].isr == (p.leader,)

            await until(shrunk_seen, 5)
        assert ("partition-state", "isr") in nodes[2].events

    run(zk, scenario)


def test_unclean_election_only_when_enabled(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        controller: Node = await until(lambda: active_controller(nodes), what="a controller")
        others = [n for n in nodes if n is not controller]
        leader, follower = others
        await controller.store.create_topic(
            "rack-power", assignments={0: [leader.node_id, follower.node_id]})
        await controller.store.settle(["rack-power"], timeout_s=10)
        p = controller.image.topics["rack-power"].partitions[0]
        assert p.leader == leader.node_id
        # the follower fell behind: the leader took it out of the ISR
        controller.session.set(zd.partition_state_path("rack-power", 0), zd.encode_state(
            zd.LeaderAndIsr(p.leader, p.leader_epoch, (p.leader,), p.controller_epoch)),
            p.partition_epoch)
        leader.stop()
        await until(lambda: controller.image.brokers.keys() == {controller.node_id,
                                                                follower.node_id}, 5)
        await asyncio.sleep(1.0)
        offline = controller.image.topics["rack-power"].partitions[0]
        assert offline.leader == -1 and offline.isr == (leader.node_id,)
        await controller.store.set_topic_configs("rack-power",
                                           {"unclean.leader.election.enable": "true"})
        await until(lambda: controller.image.topics["rack-power"].partitions[0].leader
                    == follower.node_id, 10, "the unclean leader")
        assert controller.image.topics["rack-power"].partitions[0].isr == (follower.node_id,)

    run(zk, scenario)


def test_reassignment_grows_waits_for_isr_moves_leader_and_shrinks(
        zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        controller: Node = await until(lambda: active_controller(nodes), what="a controller")
        a = controller.store
        await a.create_topic("move", assignments={0: [1, 2]})
        await a.settle(["move"], timeout_s=10)
        await a.alter_reassignments({("move", 0): [3, 2]})

        def grown() -> bool:
            p = a.image.topics["move"].partitions[0]
            return p.replicas == (3, 2, 1) and p.adding_replicas == (3,) \
                and p.removing_replicas == (1,)

        await until(grown, 10, "the grown replica set")
        assert ("move", 0) in await a.list_reassignments()
        # the leader (1) sees 3 catch up and adds it to the ISR, with a notification
        p = a.image.topics["move"].partitions[0]
        controller.session.set(zd.partition_state_path("move", 0), zd.encode_state(
            zd.LeaderAndIsr(p.leader, p.leader_epoch, (1, 2, 3), p.controller_epoch)),
            p.partition_epoch)
        controller.session.create(f"{zd.ISR_CHANGE_NOTIFICATION}/{zd.ISR_CHANGE_PREFIX}",
                                  zd.encode_partitions([("move", 0)]), sequence=True)

        def done() -> bool:
            p = a.image.topics["move"].partitions[0]
            return p.replicas == (3, 2) and p.leader == 3 and p.isr == (2, 3) \
                and not p.adding_replicas
        await until(done, 10, "the reassignment to complete")
        assert controller.session.exists(zd.REASSIGN_PARTITIONS) is None
        assert await a.list_reassignments() == {}

    run(zk, scenario)


def test_preferred_election_and_auto_rebalance(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        controller: Node = await until(lambda: active_controller(nodes), what="a controller")
        a = controller.store
        await a.create_topic("pref", assignments={0: [1, 2], 1: [2, 1]})
        await a.settle(["pref"], timeout_s=10)

        def move_leader(index: int, leader: int) -> None:
            p = a.image.topics["pref"].partitions[index]
            controller.session.set(zd.partition_state_path("pref", index), zd.encode_state(
                zd.LeaderAndIsr(leader, p.leader_epoch + 1, p.isr, p.controller_epoch)),
                p.partition_epoch)

        move_leader(0, 2)
        await until(lambda: a.image.topics["pref"].partitions[0].leader == 2, 5)
        await a.elect_preferred_leaders([("pref", 0)])
        await until(lambda: a.image.topics["pref"].partitions[0].leader == 1, 10,
                    "the preferred leader")
        # auto rebalance: broker 2 lost its preferred partition 1
        move_leader(1, 1)
        await until(lambda: a.image.topics["pref"].partitions[1].leader == 1, 5)
        nodes_configs = {"auto.leader.rebalance.enable": True,
                         "leader.imbalance.check.interval.seconds": 1}
        for n in nodes:
            n.configs.update(nodes_configs)
        controller.store.controller._next_rebalance = 0  # type: ignore[union-attr]
        await until(lambda: a.image.topics["pref"].partitions[1].leader == 2, 10,
                    "the rebalanced leader")

    run(zk, scenario)


def test_session_expiry_fences_and_the_broker_registers_again(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        victim = nodes[2]
        victim.expire_session()
        await until(lambda: victim.store.fenced, 10, "the fence")
        await until(lambda: not victim.store.fenced, 15, "registering again")
        # the others learn of the new registration through their watch, a moment later
        await until(lambda: 3 in nodes[0].image.brokers, 5, "the others to see broker 3")

    run(zk, scenario)


def test_rack_aware_topic(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        await until(lambda: len(nodes[0].image.brokers) == 3, 5)
        await nodes[0].store.create_topic("racked", 6, 2)
        racks = {1: "a", 2: "a", 3: "b"}
        for p in nodes[0].image.topics["racked"].partitions:
            assert {racks[r] for r in p.replicas} == {"a", "b"}

    run(zk, scenario, racks=("a", "a", "b"))


def test_alter_isr_is_a_conditional_write_by_the_leader(zk: ZooKeeperProcess) -> None:
    async def scenario(nodes: list[Node], _: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        await nodes[0].store.create_topic("alter", assignments={0: [2, 1, 3]})
        leader = nodes[1]  # broker 2
        for n in nodes:  # broker 2 (the leader) first among them
            assert await n.store.settle(["alter"], timeout_s=10)
        before = leader.image.topics["alter"].partitions[0]
        assert before.leader == 2 and before.isr == (2, 1, 3)
        after = await leader.store.alter_isr("alter", 0, before.leader_epoch,
                                             before.partition_epoch, (2, 1))
        assert after is not None and after.isr == (2, 1)
        assert after.partition_epoch == before.partition_epoch + 1
        assert after.leader_epoch == before.leader_epoch
        assert leader.image.topics["alter"].partitions[0].isr == (2, 1)  # published at once
        for n in nodes:
            def seen(n: Node = n) -> bool:
                return n.image.topics["alter"].partitions[0].isr == (2, 1)

            await until(seen, 5, f"broker {n.node_id} to see the new ISR")
        # a write at a version that moved on, or by a broker that is not the leader, loses
        assert await leader.store.alter_isr("alter", 0, before.leader_epoch,
                                            before.partition_epoch, (2,)) is None
        assert await nodes[0].store.alter_isr("alter", 0, after.leader_epoch,
                                              after.partition_epoch, (1,)) is None
        assert await leader.store.alter_isr("alter", 0, after.leader_epoch + 1,
                                            after.partition_epoch, (2,)) is None
        assert leader.image.topics["alter"].partitions[0].isr == (2, 1)
        # the controller was told (the notification is consumed) and re-read the state
        z = nodes[0].session
        await until(lambda: not z.children(zd.ISR_CHANGE_NOTIFICATION), 5,
                    "the controller to consume the ISR change notification")
        controller = active_controller(nodes)
        assert controller is not None
        await until(lambda: controller.store.controller.ctx.states[("alter", 0)].isr  # type: ignore[union-attr]
                    == (2, 1), 5, "the controller's view of the ISR")

    run(zk, scenario)


def test_the_controllers_broker_learns_what_the_controller_wrote_without_reading_it(
        zk: ZooKeeperProcess) -> None:
    """Kafka's controller sends LeaderAndIsr to its own broker too: that broker's watched
    re-reads share the controller's ZooKeeper connection and queue behind its writes."""
    async def scenario(nodes: list[Node], _: str) -> None:
        controller = await until(lambda: active_controller(nodes), what="a controller")
        await controller.store.create_topic("told", 6, 3)
        for n in nodes:
            assert await n.store.settle(["told"], timeout_s=10)
        victim = next(n for n in nodes if n is not controller)
        assert any(p.leader == victim.node_id
                   for p in controller.image.topics["told"].partitions)
        held = asyncio.Event()

        async def held_up(paths: list[str]) -> list[Any]:
            await held.wait()  # never: the controller's broker reads nothing from here on
            return []

        controller.store._read_many = held_up  # type: ignore[method-assign]
        victim.stop()

        def moved() -> bool:
            return all(p.leader not in (-1, victim.node_id) and victim.node_id not in p.isr
                       for p in controller.image.topics["told"].partitions)

        await until(moved, 10, "the new leaders in the controller's broker's image")

    run(zk, scenario)


def test_isr_changes_made_together_go_in_one_transaction_and_a_stale_one_loses_alone(
        zk: ZooKeeperProcess) -> None:
    """A broker restarted next to thousands of partitions rejoins thousands of ISRs at
    once: its leaders write them in batches, and one state that moved meanwhile loses
    by itself, not the batch."""
    async def scenario(nodes: list[Node], _: str) -> None:
        await until(lambda: active_controller(nodes), what="a controller")
        count = 300
        await nodes[0].store.create_topic(
            "many", assignments={p: [2, 1, 3] for p in range(count)})
        leader = nodes[1]  # broker 2
        for n in nodes:
            assert await n.store.settle(["many"], timeout_s=20)
        client = leader.session.client
        made: list[object] = []
        original = client.transaction

        def counted() -> object:
            made.append(original())
            return made[-1]

        client.transaction = counted
        parts = leader.image.topics["many"].partitions
        results = await asyncio.gather(*(
            leader.store.alter_isr("many", p.partition, p.leader_epoch, p.partition_epoch,
                                   (2, 1)) for p in parts))
        assert all(r is not None and r.isr == (2, 1) for r in results)
        assert len(made) == 1
        assert all(p.isr == (2, 1) for p in leader.image.topics["many"].partitions)
        # ten more; one state moved on in ZooKeeper before this broker read it (here: its
        # cache is set one version back)
        made.clear()
        cache = leader.store.cache
        held = cache.states[("many", 4)]
        cache.set_state(("many", 4), replace(held, zk_version=held.zk_version - 1))
        leader.store._publish()
        parts = leader.image.topics["many"].partitions[:10]
        results = await asyncio.gather(*(
            leader.store.alter_isr("many", p.partition, p.leader_epoch, p.partition_epoch,
                                   (2,)) for p in parts))
        assert [r is None for r in results] == [p == 4 for p in range(10)]
        assert len(made) == 1 + 10  # the batch applied nothing; then each alone
        for n in nodes:
            def seen(n: Node = n) -> bool:
                isrs = [p.isr for p in n.image.topics["many"].partitions[:10]]
                return isrs == [(2, 1) if p == 4 else (2,) for p in range(10)]

            await until(seen, 10, f"broker {n.node_id} to see the ISRs")

    run(zk, scenario)
