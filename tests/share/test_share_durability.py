"""A share group's progress survives its broker: what was acknowledged is never
delivered again after a SIGKILL and a restart, and what was released or still held
(unacknowledged) at the kill is delivered again (confluent-kafka's ShareConsumer).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from tests.conftest import BrokerProcess
from tests.processes import started
from tests.share.conftest import STATE_PARTITIONS
from tests.share.helpers import (
    earliest_group,
    new_topic,
    poll_until,
    produce,
    share_consumer,
    wait_for,
)
from tests.share.test_share_consumer import lines, worker


def test_acknowledged_records_stay_acknowledged_after_a_broker_kill_and_restart(
        tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data",
                           overrides={"group.share.heartbeat.interval.ms": "500",
                                      **STATE_PARTITIONS})
    try:
        broker.start()
        bootstrap = broker.bootstrap
        topic = new_topic(bootstrap)
        group = earliest_group(bootstrap)
        produce(bootstrap, topic, [f"r{i}" for i in range(10)])
        log = tmp_path / "worker.log"
        # accepts 0-5, releases 6, holds 7-9 without acknowledging them
        with started(worker(bootstrap, group, topic, "partial:6:10"), log,
                     sigint_ignored=True) as w:
            held = wait_for(lambda: next((x["holding"] for x in lines(log)
                                          if "holding" in x), None), 60,
                            f"the worker did not get every record: {lines(log)}")
            assert held == [7, 8, 9]
            assert all(x["committed"] for x in lines(log) if "committed" in x)
            broker.kill()
            w.send_signal(signal.SIGKILL)
            w.wait(30)
        broker.start()
        with share_consumer(bootstrap, group, topic) as c:
            def accept(batch: list[Any]) -> None:
                for m in batch:
                    c.acknowledge(m)
                assert all(e is None for e in c.commit_sync(30).values())

            again = poll_until(c, lambda seen: len({m.offset() for m in seen}) >= 4,
                               on_batch=accept)
            assert sorted((m.offset(), m.delivery_count()) for m in again) == \
                [(6, 2), (7, 2), (8, 2), (9, 2)], "an acknowledged record came back"
            produce(bootstrap, topic, ["after"])
            later = poll_until(c, lambda seen: any(m.value() == b"after" for m in seen),
                               on_batch=accept)
            assert [m.offset() for m in later] == [10]
    finally:
        broker.kill()
