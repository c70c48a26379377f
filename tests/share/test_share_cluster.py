"""A share group on three brokers: the share-partition's leader is SIGKILLed while a
worker holds records; the new leader reads the state from the share coordinator
(in-process, or over ReadShareGroupState from the broker holding it) and delivers
exactly what was not acknowledged."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster, quiet_stderr
from tests.processes import started
from tests.share.helpers import new_topic, poll_until, produce, share_consumer, wait_for
from tests.share.test_share_consumer import lines, worker
from tests.wire import WireClient


def set_everywhere(c: Cluster, group: str, name: str, value: str) -> None:
    """A group config on every broker (they are kept where they are set, in memory)."""
    for node_id in c.alive():
        with WireClient(c.broker(node_id).bootstrap) as w:
            s = w.schema(44, 1)
            r = w.call(44, 1, resources=(s.AlterConfigsResource(
                resource_type=32, resource_name=group, configs=(s.AlterableConfig(
                    name=name, config_operation=0, value=value),)),), validate_only=False)
            assert r.responses[0].error_code == 0, r


@pytest.mark.slow
def test_a_leader_sigkill_redelivers_nothing_acknowledged(tmp_path: Path) -> None:
    with Cluster(tmp_path, size=3, configs={
            "share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.num.partitions": "3",
            "group.share.heartbeat.interval.ms": "500"}) as c, quiet_stderr():
        bootstrap = c.bootstrap
        topic = new_topic(bootstrap, replication=3)
        group = "g-cluster"
        set_everywhere(c, group, "share.auto.offset.reset", "earliest")
        produce(bootstrap, topic, [f"r{i}" for i in range(10)])
        log = tmp_path / "worker.log"
        with started(worker(bootstrap, group, topic, "partial:6:10"), log,
                     sigint_ignored=True) as w:
            held = wait_for(lambda: next((x["holding"] for x in lines(log)
                                          if "holding" in x), None), 90,
                            f"the worker did not get every record: {lines(log)}")
            assert held == [7, 8, 9]
            leader = c.partitions(topic)[0][0]
            c.kill(leader)
            w.send_signal(signal.SIGKILL)
            w.wait(30)
        c.wait_for(lambda: c.partitions(topic)[0][0] not in (leader, -1), 60,
                   "a new leader")
        with share_consumer(c.bootstrap, group, topic) as consumer:
            def accept(batch: list[Any]) -> None:
                for m in batch:
                    consumer.acknowledge(m)
                consumer.commit_sync(30)

            again = poll_until(consumer,
                               lambda seen: len({m.offset() for m in seen}) >= 4,
                               on_batch=accept, timeout=120)
            assert sorted({m.offset() for m in again}) == [6, 7, 8, 9], \
                "an acknowledged record came back, or a held one did not"


@pytest.mark.slow
def test_find_coordinator_key_type_2_names_the_state_partitions_leader(
        tmp_path: Path) -> None:
    import uuid

    from odradek.coordinator.group.coordinator import partition_for
    from odradek.coordinator.share.state import SHARE_STATE_TOPIC, coordinator_key, kafka_uuid

    with Cluster(tmp_path, size=3, configs={
            "share.coordinator.state.topic.num.partitions": "6"}) as c, quiet_stderr():
        keys = [("g", uuid.uuid4(), p) for p in range(12)]
        answers: dict[int, list[int]] = {}
        for node_id in c.alive():
            with WireClient(c.broker(node_id).bootstrap) as w:
                def found() -> Any:
                    r = w.call(10, 6, key_type=2, coordinator_keys=tuple(
                        f"{g}:{kafka_uuid(t)}:{p}" for g, t, p in keys))
                    # the first asks create the topic: COORDINATOR_NOT_AVAILABLE until
                    # its partitions have leaders, which a client retries
                    assert all(k.error_code in (0, 15) for k in r.coordinators), r
                    return r if all(k.error_code == 0 for k in r.coordinators) else None

                r = c.wait_for(found, 60, "no share coordinators")
                answers[node_id] = [k.node_id for k in r.coordinators]
        leaders = c.partitions(SHARE_STATE_TOPIC)
        expected = [leaders[partition_for(coordinator_key(*k), 6)][0] for k in keys]
        # every broker names the same share coordinator: the state partition's leader
        assert all(a == expected for a in answers.values()), (answers, expected)
        assert len(set(expected)) > 1  # the share-partitions spread over the brokers
