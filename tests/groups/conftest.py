"""A broker tuned for group tests: rebalances that are quick to watch.

`group.initial.rebalance.delay.ms` is small here (the 3 s default is tested on its own
broker in test_rebalance_timing.py), and KIP-848 members heartbeat every 500 ms.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import BrokerProcess

GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "200",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("groups") / "data",
                      overrides=GROUP_OVERRIDES).start()
    yield b
    b.stop()
