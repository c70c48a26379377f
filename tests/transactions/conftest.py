"""A broker tuned for transaction tests: quick rebalances and a quick abort scan.

`transaction.abort.timed.out.transaction.cleanup.interval.ms` is 500 ms here (10 s by
default) so that a transaction left open past its timeout is aborted within a second
of it; `group.initial.rebalance.delay.ms` is small as in the group tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import BrokerProcess

TXN_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    # small, so the tests' transaction.timeout.ms values are checked against it
    "transaction.max.timeout.ms": "120000",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", overrides=TXN_OVERRIDES).start()
    yield b
    b.stop()


@pytest.fixture
def fresh_txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for tests that kill or restart it."""
    b = BrokerProcess(tmp_path_factory.mktemp("txn-own") / "data", overrides=TXN_OVERRIDES)
    yield b
    b.stop()
