"""`odradek lake ingest` started with SIGINT ignored (as `make test &` starts it) stops
after its current batch on SIGINT or SIGTERM, and its Spark JVM goes with it."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from tests.pipeline.helpers import create_topic, produce_values, topic
from tests.processes import started, stop, wait_for_output


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_lake_ingest_stops_gracefully_on_a_signal(bootstrap: str, tmp_path: Path,
                                                  sig: int) -> None:
    name = create_topic(bootstrap, topic("sig"))
    produce_values(bootstrap, name, [json.dumps({"n": i}) for i in range(20)])
    log = tmp_path / "ingest.log"
    cmd = [sys.executable, "-m", "odradek", "lake", "ingest", "--bootstrap-server", bootstrap,
           "--topic", name, "--table", "iot.signals", "--data-dir", str(tmp_path / "lake"),
           "--trigger-interval", "300 milliseconds"]
    with started(cmd, log, sigint_ignored=True) as proc:
        wait_for_output(proc, log, r"batch \d+: 20 rows", timeout=240)
        assert stop(proc, sig, timeout=120) == 0, log.read_text()[-3000:]
    assert "done: 20 rows" in log.read_text()
