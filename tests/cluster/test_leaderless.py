"""A partition without a leader: its followers wait for one, and never start a fetcher
toward "broker -1" (issue 22: about 120 such log lines per broker in a 3-broker run)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import NewTopic

from tests.cluster.harness import Cluster, quiet_stderr


def test_a_leaderless_partitions_follower_waits_instead_of_fetching_from_broker_minus_one(
        tmp_path: Path) -> None:
    topic = "leaderless"
    with quiet_stderr(), Cluster(tmp_path / "cluster", size=3) as c:
        admin = c.admin()  # held until its answer: a dropped client cancels it
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1,
                                      replica_assignment=[[2, 3]])])[topic].result(30)
        c.wait_for(lambda: c.partitions(topic).get(0, (None,))[0] == 2 or None, 30,
                   "broker 2 to lead")
        c.kill(3)  # the follower first: the ISR shrinks to the leader alone
        c.wait_for(lambda: c.partitions(topic, node_id=1)[0][2] == (2,) or None, 30,
                   "the ISR to shrink to broker 2")
        c.kill(2)  # the last in-sync replica: no clean leader is left
        c.wait_for(lambda: c.partitions(topic, node_id=1)[0][0] == -1 or None, 30,
                   "the partition to lose its leader")
        c.start(3)  # a replica out of the ISR: it may not lead (no unclean election)
        c.wait_for(lambda: "leaderless-0 has no leader" in _log(c, 3) or None, 60,
                   "broker 3 to say it waits for a leader")
        assert c.partitions(topic, node_id=3)[0][0] == -1
        for node_id in (1, 3):
            assert "from broker -1" not in _log(c, node_id)


def _log(c: Cluster, node_id: int) -> str:
    return c.broker(node_id).log_path.read_text(errors="replace")
