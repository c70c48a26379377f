"""EmbeddedBroker and EmbeddedCluster as a test suite drives them: start, topics,
restart, bad input, a broker in a child process, a frozen cluster broker."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.protocol.errors import KafkaError as OdradekKafkaError
from odradek.testing import EmbeddedBroker, EmbeddedCluster, TestkitError


def produce(bootstrap: str, topic: str, values: list[bytes], **config: object) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, **config})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0


def read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    try:
        for _ in range(200):
            if len(out) == count:
                break
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
    finally:
        consumer.close()
    return out


def test_unknown_broker_property_is_refused_naming_the_nearest() -> None:
    with pytest.raises(TestkitError, match=r"unknown broker property 'num.partition' "
                                           r"\(did you mean num.partitions"):
        EmbeddedBroker({"num.partition": 3})
    with pytest.raises(TestkitError, match=r"num\.partitions"):
        EmbeddedBroker({"num.partitions": "many"})
    with pytest.raises(TestkitError, match="pass data_dir= instead"):
        EmbeddedBroker({"log.dirs": "/tmp/x"})
    with pytest.raises(TestkitError, match="pass host= and port= instead"):
        EmbeddedBroker({"listeners": "PLAINTEXT://127.0.0.1:9092"})


def test_a_port_already_taken_is_a_one_line_error_and_leaves_nothing() -> None:
    threads = set(threading.enumerate())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = EmbeddedBroker(port=port)
        with pytest.raises(TestkitError) as e:
            broker.start()
    assert str(e.value) == f"cannot start the broker: 127.0.0.1:{port} is already in use"
    assert broker.data_dir is None and not broker.running
    assert set(threading.enumerate()) == threads


def test_a_broker_whose_loop_dies_is_reported_at_stop_in_one_line() -> None:
    threads = set(threading.enumerate())
    broker = EmbeddedBroker().start()
    data = broker.data_dir
    assert broker._loop is not None
    broker._loop.call_soon_threadsafe(broker._loop.stop)  # as a crash of the loop
    with pytest.raises(TestkitError, match=r"crashed: RuntimeError: Event loop stopped"):
        broker.stop()
    assert not broker.running and data is not None and not data.exists()
    assert set(threading.enumerate()) == threads
    with socket.socket() as s:  # its port was closed
        s.bind(("127.0.0.1", broker.port))


def test_restart_keeps_data_and_port_and_stop_removes_the_data(tmp_path: Path) -> None:
    broker = EmbeddedBroker({"num.partitions": 1}).start()
    try:
        broker.create_topic("kept", partitions=1)
        with pytest.raises(OdradekKafkaError, match="already exists"):
            broker.create_topic("kept")
        produce(broker.bootstrap_servers, "kept", [b"a", b"b"])
        port, data = broker.port, broker.data_dir
        broker.restart()
        assert broker.port == port and broker.data_dir == data
        assert read(broker.bootstrap_servers, "kept", 2) == [b"a", b"b"]
        broker.delete_topic("kept")
        md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=5)
        assert "kept" not in md.topics
    finally:
        broker.stop()
    assert data is not None and not data.exists()
    with pytest.raises(TestkitError, match="not running"):
        _ = broker.bootstrap_servers


def test_a_given_data_dir_is_kept(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:
        broker.create_topic("t")
    assert (tmp_path / "data" / "t-0").is_dir()


def test_a_broker_in_a_child_process_serves_topics_and_faults() -> None:
    with EmbeddedBroker(process=True) as broker:
        broker.create_topic("child", partitions=1)
        broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
        produce(broker.bootstrap_servers, "child", [b"x"], **{"enable.idempotence": True})
        assert len(broker.faults.injected) == 2
        assert read(broker.bootstrap_servers, "child", 1) == [b"x"]
        with pytest.raises(OdradekKafkaError, match="already exists"):
            broker.create_topic("child")
        pid = broker._child.proc.pid if broker._child and broker._child.proc else None
    assert pid is not None and not Path(f"/proc/{pid}").exists()


def test_a_paused_leader_loses_its_partition_and_rejoins_when_resumed() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("frozen", partitions=1, replication_factor=3)
        leader = cluster.leader("frozen", 0)
        cluster.pause(leader)
        assert leader not in cluster.alive()
        new = cluster.wait_for_leader("frozen", 0, not_on=leader, timeout=30)
        produce(cluster.bootstrap_servers, "frozen", [b"during"], acks="all")
        cluster.resume(leader)
        cluster.wait_for(lambda: sorted(cluster.isr("frozen", 0)) == [1, 2, 3], 30,
                         "the resumed broker back in the ISR")
        produce(cluster.bootstrap_servers, "frozen", [b"after"], acks="all")
        assert new != leader
        cluster.faults(leader).fail("Metadata", "UNKNOWN_SERVER_ERROR")
        with pytest.raises(TestkitError, match="no broker 9"):
            cluster.kill(9)
