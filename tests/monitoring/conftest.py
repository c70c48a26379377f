"""A broker with its Prometheus endpoint on, and a scrape that parses what it serves."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import BrokerProcess, free_port

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class MetricsBroker(BrokerProcess):
    def __init__(self, data_dir: Path) -> None:
        self.metrics_port = free_port()
        super().__init__(data_dir, overrides={"metrics.port": str(self.metrics_port),
                                              "group.initial.rebalance.delay.ms": "100"})

    def scrape(self) -> Samples:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        return {(s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    """Gauges refresh every few seconds: poll until `check` holds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("not within the timeout")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsBroker]:
    b = MetricsBroker(tmp_path_factory.mktemp("monitoring") / "data").start()
    yield b
    b.stop()
