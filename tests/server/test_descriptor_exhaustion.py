"""Out of file descriptors (a broker started with a low RLIMIT_NOFILE): more partitions
than descriptors stay online (log files open on use, within a budget); the broker says
why it sheds, with the limit and what to raise; connections already open keep working;
new ones are shed, not wedged; the log dir stays online; and after a restart with the
limit raised nothing was lost."""

from __future__ import annotations

import socket
import struct
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.clients.test_confluent_kafka import consume_all, create_topic
from tests.conftest import BrokerProcess

LIMIT = 256


def _api_versions_answered(port: int, timeout: float = 5.0) -> bool | None:
    """True: served; False: closed by the broker at once (shed); None: no word at all."""
    request = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            head = s.recv(4)
            return len(head) == 4
    except (ConnectionResetError, BrokenPipeError):
        return False
    except TimeoutError:
        return None


def _metadata_errors(admin: AdminClient, topic: str) -> dict[int, object]:
    md = admin.list_topics(topic, timeout=15).topics[topic]
    return {p: part.error for p, part in md.partitions.items()}


def test_out_of_descriptors_sheds_new_connections_and_keeps_the_rest(
        fresh_broker: BrokerProcess, topic_name: str) -> None:
    fresh_broker.nofile = LIMIT
    fresh_broker.overrides = {"offsets.topic.num.partitions": "1"}
    fresh_broker.start()
    create_topic(fresh_broker.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": fresh_broker.bootstrap, "acks": "all",
                         "linger.ms": 0})
    producer.produce(topic_name, b"before")
    assert producer.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    # connected before the descriptors run out (to the bootstrap and to broker 1)
    admin.create_topics([NewTopic(f"{topic_name}-warm", 1, 1)])[f"{topic_name}-warm"].result(15)

    # more partitions than descriptors, as the user who found the wedge did: the logs
    # open their files on use within a budget, so every partition is online
    big = f"{topic_name}-big"
    admin.create_topics([NewTopic(big, 600, 1)])[big].result(60)
    errors = _metadata_errors(admin, big)
    assert len(errors) == 600 and set(errors.values()) == {None}

    # the connections already open carry on
    delivered: list[object] = []
    producer.produce(topic_name, b"during", on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(15) == 0 and delivered == [None]

    # a new connection is served or shed at once, never left hanging; fill the table
    # with sockets until the broker sheds one
    held = []
    try:
        outcome: bool | None = True
        while outcome and len(held) < LIMIT:
            held.append(socket.create_connection(("127.0.0.1", fresh_broker.port)))
            outcome = _api_versions_answered(fresh_broker.port)
        assert outcome is False, "once out of descriptors, a new connection is shed"
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 10
    while "new connections shed" not in fresh_broker.logs() and time.monotonic() < deadline:
        time.sleep(0.1)
    logs = fresh_broker.logs()
    assert "new connections shed" in logs
    assert "out of file descriptors" in logs and f"limit is {LIMIT}" in logs, logs
    assert "ulimit -n" in logs
    assert "is offline (" not in logs, "running out of descriptors is not a failed disk"

    # restarted with the limit raised, as the message says: every partition opens
    fresh_broker.stop()
    assert "Traceback" not in fresh_broker.logs(), fresh_broker.logs()
    fresh_broker.nofile = 4 * 1024
    fresh_broker.start()
    fresh = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    errors = _metadata_errors(fresh, big)
    assert len(errors) == 600 and set(errors.values()) == {None}
    producer.produce(topic_name, b"after")
    assert producer.flush(15) == 0
    values = {m.value() for m in consume_all(fresh_broker.bootstrap, topic_name, 3)}
    assert values == {b"before", b"during", b"after"}
