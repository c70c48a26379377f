"""Brokers for share group tests: one with Kafka's default record lock (30 s) and one
whose locks expire quickly, for the tests that wait for a lock to time out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import BrokerProcess

SHORT_LOCK_MS = 1500


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data",
                      overrides={"group.share.heartbeat.interval.ms": "500"}).start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def short_lock_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share-short") / "data",
                      overrides={"group.share.heartbeat.interval.ms": "500",
                                 "group.share.record.lock.duration.ms": str(SHORT_LOCK_MS)}
                      ).start()
    yield b
    b.stop()
