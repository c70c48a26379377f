"""One SparkSession (local[2]) and one broker for the whole pipeline suite."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess
from tests.registry.conftest import RegistryProcess

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402


@pytest.fixture(scope="session")
def pipeline_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # The fleet tests replay fixed event times from 2023: with time retention on, the
    # broker's retention check (every 5 minutes) could delete their records between the
    # produce and the read, as it did once in CI (a stateful query that read nothing).
    broker = BrokerProcess(tmp_path_factory.mktemp("pipeline-broker") / "data",
                           overrides={"log.retention.ms": "-1"}).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from odradek.pipeline.session import build_session

    session = build_session(app_name="odradek-tests",
                            warehouse=tmp_path_factory.mktemp("spark"),
                            extra={"spark.ui.showConsoleProgress": "false"})
    yield session
    session.stop()


@pytest.fixture
def bootstrap(pipeline_broker: BrokerProcess) -> str:
    return pipeline_broker.bootstrap


@pytest.fixture
def lake_dir(tmp_path: Path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def registry(pipeline_broker: BrokerProcess, tmp_path: Path) -> Iterator[RegistryProcess]:
    """A schema registry on the suite's broker, with its own `_schemas` topic and group."""
    tag = uuid.uuid4().hex[:8]
    r = RegistryProcess(pipeline_broker.bootstrap, tmp_path, f"_schemas-{tag}", f"sr-{tag}")
    try:
        r.start().wait_for_leader()
        yield r
    finally:
        r.stop()
