"""Kafka's scripts as `odradek kafka-path` writes them, run as a user's shell script would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def kafka_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """$(odradek kafka-path), with the data home in a temporary folder."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path_factory.mktemp("xdg"))}
    printed = subprocess.run([sys.executable, "-m", "odradek", "kafka-path"], env=env,
                             capture_output=True, text=True, timeout=60, check=True)
    home = Path(printed.stdout.strip())
    assert (home / "bin" / "kafka-topics.sh").exists()
    yield home


@pytest.fixture(scope="module")
def kafka(kafka_home: Path, broker: BrokerProcess) -> Run:
    """kafka("kafka-topics.sh", args..., stdin=...): the script's result, never raising."""

    def run(script: str, *args: str, stdin: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(kafka_home / "bin" / script), *args], input=stdin,
                              capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture(scope="module")
def bootstrap(broker: BrokerProcess) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]
